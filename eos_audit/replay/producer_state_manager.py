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
def takes_part_in_replay(row):
    """Whether the batch takes part in the producer replay (docs/rules.md#replay-scope).

    Batches with a producer id, magic 2 and a CRC that did not fail; a control batch with no
    records changes nothing.
    """
    if row.producer_id < 0:
        return False
    if row.magic != NULL and row.magic < 2:
        return False
    if row.crc_valid == 0:
        return False
    return not (row.is_control and row.record_count == 0)


# ------------------------------------------------------------------------------------------------
# One producer row: UnifiedLog.analyzeAndValidateProducerState, then ProducerStateManager.update
# ------------------------------------------------------------------------------------------------
def replay_producer_row(row, part, entries, slots, params, out):
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
    slot = slot_of(slots, entries, part, row.producer_id)
    if slot < 0:
        return False
    e = entries[slot]
    kind = row.kind
    timestamp = row.timestamp if row.timestamp >= 0 else NULL
    if kind == AUDITED:
        expired = is_expired(e, timestamp, params.expiration_ms)
        if expired:
            clear_entry_session(e)
        if row.is_control:
            if validate_end_txn_marker(e, row, part, out):
                append_end_txn_marker(e, row, part, out, timestamp)
        elif validate_data_batch(e, row, part, params, out, expired):
            append_data_batch(e, row, part, timestamp, row.last_offset + 1)
        if not e.has_audited:
            e.has_audited = True
            part.audited_producers += 1
        summarise(e, row, timestamp, out, part)
    else:
        e.sequences_seen = True  # a seed's state is the broker's, sequences or not
        if kind == SEED_STATE:
            load_seed_state(e, row, timestamp)
        else:
            append_data_batch(e, row, part, timestamp, row.value)
    remember_log_row(e, row, timestamp)
    return True


def remember_log_row(e, row, timestamp):
    """What producer expiry reads from the log, whatever the verdict.

    The producer's previous row, and whether the log shows its transaction open after it
    (docs/rules.md#producer-expiry).
    """
    e.has_rows = True
    e.previous_timestamp = timestamp
    if row.kind == SEED_STATE:
        e.previous_offset = NULL
        if row.value != NULL:
            e.log_txn_open = True
    else:
        e.previous_offset = row.base_offset
        if row.is_control:
            e.log_txn_open = False
        elif row.is_transactional:
            e.log_txn_open = True


def remember_corrupt_claim(row, entries, slots):
    """Keep the sequences a corrupt batch claims for its producer (docs/rules.md#corrupt-batch).

    Only for a producer already known: an untrusted header must not create state.
    """
    producer_id = row.producer_id
    if producer_id < 0 or row.base_sequence < 0 or row.is_control:
        return
    slot = find_slot(slots, producer_id)
    if slot < 0:
        return
    e = entries[slot]
    epoch = row.producer_epoch
    base_sequence = row.base_sequence
    extends = (
        e.corrupt_claim
        and e.corrupt_epoch == epoch
        and next_expected_sequence(e.corrupt_last_sequence) == base_sequence
    )
    if not extends:
        e.corrupt_claim = True
        e.corrupt_epoch = epoch
        e.corrupt_base_sequence = base_sequence
    e.corrupt_last_sequence = row.last_sequence
