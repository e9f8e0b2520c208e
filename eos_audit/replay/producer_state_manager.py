"""One producer row: UnifiedLog.analyzeAndValidateProducerState, then ProducerStateManager.update.

Which rows take part in the producer replay (its scope), the producer's entry looked up or
created, a seeded state loaded, and an audited batch validated (`append_info`) and, when a leader
would have accepted it, applied.
"""

from __future__ import annotations

from eos_audit.replay.append_info import (
    append_data_batch,
    append_end_txn_marker,
    load_seed_state,
    validate_data_batch,
    validate_end_txn_marker,
)
from eos_audit.replay.basics import (
    AUDITED,
    SEED_STATE,
    next_expected_sequence,
)
from eos_audit.replay.emit import (
    summarise,
)
from eos_audit.replay.lookups import (
    find_slot,
    slot_of,
)
from eos_audit.replay.producer_entry import (
    clear_entry_session,
    is_expired,
)
from eos_audit.replay.state import (
    NULL,
)


# ------------------------------------------------------------------------------------------------
# The producer replay's scope
# ------------------------------------------------------------------------------------------------
def takes_part_in_replay(rows, i):
    """Whether the batch takes part in the producer replay (docs/rules.md#replay-scope).

    Batches with a producer id, magic 2 and a CRC that did not fail; a control batch with no
    records changes nothing.
    """
    if rows[i].producer_id < 0:
        return False
    if rows[i].magic != NULL and rows[i].magic < 2:
        return False
    if rows[i].crc_valid == 0:
        return False
    return not (rows[i].is_control and rows[i].record_count == 0)


# ------------------------------------------------------------------------------------------------
# One producer row: UnifiedLog.analyzeAndValidateProducerState, then ProducerStateManager.update
# ------------------------------------------------------------------------------------------------
def replay_producer_row(rows, i, part, entries, slots, params, out):
    """One row of a producer: an audited batch, or a seeded batch or entry.

    An audited batch as a leader appends it: an expired entry is forgotten first
    (ProducerStateManager.removeExpiredProducers), the batch is checked against the entry as it
    stands (`validate_*`), and only an applied batch changes the entry (`append_*`), as Kafka
    commits the `updatedEntry` of an accepted append. A seed is the broker's own state: loaded,
    not judged. Then what the log shows whatever the verdict: the producer's summary and what
    expiry reads.

    Returns False when the producer needs a slot and none is free (the caller grows the entries
    and calls again).
    """
    slot = slot_of(slots, entries, part, rows[i].producer_id)
    if slot < 0:
        return False
    e = entries[slot]
    kind = rows[i].kind
    timestamp = rows[i].timestamp if rows[i].timestamp >= 0 else NULL
    if kind == AUDITED:
        expired = is_expired(e, timestamp, params.expiration_ms)
        if expired:
            clear_entry_session(e)
        if rows[i].is_control:
            if validate_end_txn_marker(e, rows, i, part, out):
                append_end_txn_marker(e, rows, i, part, out, timestamp)
        elif validate_data_batch(e, rows, i, part, params, out, expired):
            append_data_batch(e, rows, i, part, timestamp, rows[i].last_offset + 1)
        if not e.has_audited:
            e.has_audited = True
            part.audited_producers += 1
        summarise(e, rows, i, timestamp, out, part)
    else:
        e.sequences_seen = True  # a seed's state is the broker's, sequences or not
        if kind == SEED_STATE:
            load_seed_state(e, rows, i, timestamp)
        else:
            append_data_batch(e, rows, i, part, timestamp, rows[i].value)
    remember_log_row(e, rows, i, timestamp)
    return True


def remember_log_row(e, rows, i, timestamp):
    """What producer expiry reads from the log, whatever the verdict.

    The producer's previous row, and whether the log shows its transaction open after it
    (docs/rules.md#producer-expiry).
    """
    e.has_rows = True
    e.previous_timestamp = timestamp
    if rows[i].kind == SEED_STATE:
        e.previous_offset = NULL
        if rows[i].value != NULL:
            e.log_txn_open = True
    else:
        e.previous_offset = rows[i].base_offset
        if rows[i].is_control:
            e.log_txn_open = False
        elif rows[i].is_transactional:
            e.log_txn_open = True


def remember_corrupt_claim(rows, i, entries, slots):
    """Keep the sequences a corrupt batch claims for its producer (docs/rules.md#corrupt-batch).

    Only for a producer already known: an untrusted header must not create state.
    """
    producer_id = rows[i].producer_id
    if producer_id < 0 or rows[i].base_sequence < 0 or rows[i].is_control:
        return
    slot = find_slot(slots, producer_id)
    if slot < 0:
        return
    e = entries[slot]
    epoch = rows[i].producer_epoch
    base_sequence = rows[i].base_sequence
    extends = (
        e.corrupt_claim
        and e.corrupt_epoch == epoch
        and next_expected_sequence(e.corrupt_last_sequence) == base_sequence
    )
    if not extends:
        e.corrupt_claim = True
        e.corrupt_epoch = epoch
        e.corrupt_base_sequence = base_sequence
    e.corrupt_last_sequence = rows[i].last_sequence
