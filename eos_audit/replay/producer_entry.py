"""ProducerStateEntry (docs/rules.md#producer-state-entry), and ProducerStateManager's expiry of it.

Kafka's `ProducerStateEntry.java` beside this module: the entry's epoch, its batch cache
(`add_batch`, `find_duplicate_batch`, `maybe_update_producer_epoch`), and what the audit keeps
beside the broker's fields (a 64-batch look-back, the session's first row). An entry is one record
of `state.PRODUCER_STATE_ENTRY`.
"""

from __future__ import annotations

from eos_audit.replay.state import (
    DUPLICATE_LOOKBACK,
    NULL,
)


def clear_entry_session(e):
    """A new session: the empty entry a broker has for an unknown or expired producer."""
    e.epoch = -1
    e.coordinator_epoch = -1
    e.txn_open = False
    e.txn_first_offset = NULL
    e.ring_size = 0
    e.ring_next = 0
    e.ring_run = 0
    e.has_last_data = False
    e.last_data_epoch = NULL
    e.last_data_sequence = NULL
    e.last_data_offset = NULL
    e.last_data_coverage_end = NULL
    e.corrupt_claim = False


def new_entry(e, producer_id):
    """A producer seen for the first time in this partition."""
    e.producer_id = producer_id
    clear_entry_session(e)
    e.last_timestamp = NULL
    e.has_rows = False
    e.sequences_seen = False
    e.previous_timestamp = NULL
    e.previous_offset = NULL
    e.log_txn_open = False
    e.has_audited = False
    e.summary_open = False


def ring_slot(e, back):
    """The slot of the batch applied `back` batches before the entry's newest (0: the newest).

    The entry keeps its last DUPLICATE_LOOKBACK applied data batches in a ring whose newest is at
    `ring_next - 1` (state.PRODUCER_STATE_ENTRY): every read of the ring finds its slot here, and
    only add_batch moves `ring_next`. The map is its own inverse: `ring_slot(e, k)` is also how
    many batches before the newest slot k was written.
    """
    return (e.ring_next - 1 - back) % DUPLICATE_LOOKBACK


def maybe_update_producer_epoch(e, epoch):
    """ProducerStateEntry.maybeUpdateProducerEpoch: the applied append's epoch becomes the entry's.

    An applied append is never below the entry's epoch (check_producer_epoch), so the epoch only
    rises. Kafka empties its cached batches here; the ring keeps them, each slot with its epoch,
    and whoever reads the cache reads only the entry's epoch (find_duplicate_batch,
    last_sequence_of, emit_final_state).
    """
    if epoch > e.epoch:
        e.epoch = epoch


def add_batch(e, epoch, base_sequence, last_sequence, base_offset, last_offset, timestamp):
    """ProducerStateEntry.addBatch (docs/rules.md#producer-state-entry): the newest cached batch.

    Kafka drops the oldest of 6 cached batches; the ring drops the oldest of
    DUPLICATE_LOOKBACK + 1, the broker's cache being its newest NUM_BATCHES_TO_RETAIN of the
    entry's epoch. The entry's lastSeq and lastDataOffset are kept beside it (last_data_*).
    """
    maybe_update_producer_epoch(e, epoch)
    newest = ring_slot(e, 0)
    if last_sequence < base_sequence:
        e.ring_run = 0  # wraps past INT32_MAX: it starts above sequences that follow it
    elif (
        e.ring_run > 0
        and e.ring_epoch[newest] == epoch
        and base_sequence > e.ring_last_sequence[newest]
    ):
        e.ring_run = min(e.ring_run + 1, DUPLICATE_LOOKBACK)
    else:
        e.ring_run = 1
    k = e.ring_next  # the slot after the newest: the oldest batch's once the ring is full
    e.ring_epoch[k] = epoch
    e.ring_base_sequence[k] = base_sequence
    e.ring_last_sequence[k] = last_sequence
    e.ring_base_offset[k] = base_offset
    e.ring_last_offset[k] = last_offset
    e.ring_next = (k + 1) % DUPLICATE_LOOKBACK  # the ring's only move
    if e.ring_size < DUPLICATE_LOOKBACK:
        e.ring_size += 1
    e.has_last_data = True
    e.last_data_epoch = epoch
    e.last_data_sequence = last_sequence
    e.last_data_offset = base_offset
    e.last_timestamp = timestamp


def find_duplicate_batch(e, epoch, base_sequence, last_sequence):
    """ProducerStateEntry.findDuplicateBatch (docs/rules.md#duplicate-batch).

    A batch of the entry's epoch whose exact sequence range a cached batch has. Returns how many
    applied batches before this one that batch is (0: the newest), -1 when none. The broker
    searches its NUM_BATCHES_TO_RETAIN cached batches; the audit searches the look-back, so a
    retry the broker no longer recognised is still named (the caller tells the two apart).
    """
    if epoch != e.epoch:
        return -1
    if e.ring_run >= e.ring_size:
        # The whole look-back is one rising run of one epoch (add_batch): every cached batch
        # starts at or below the newest's last sequence, so a batch of another epoch, or one
        # that starts above it, matches none. This is the common case, a producer writing on.
        newest = ring_slot(e, 0)
        if (
            e.ring_size == 0
            or e.ring_epoch[newest] != epoch
            or base_sequence > e.ring_last_sequence[newest]
        ):
            return -1
    return batch_with_sequence_range(e, epoch, base_sequence, last_sequence)


def batch_with_sequence_range(e, epoch, base_sequence, last_sequence):
    """ProducerStateEntry.batchWithSequenceRange over the look-back: the newest match, -1 if none.

    The look-back's slots of older epochs are not the entry's cache: each slot's epoch is compared.
    Every slot is compared, in storage order, and the newest match kept: a loop without early
    exits or modulo per step, which the compiler turns into vector compares.
    """
    found = -1
    for k in range(e.ring_size):
        if (
            (e.ring_base_sequence[k] == base_sequence)
            & (e.ring_last_sequence[k] == last_sequence)
            & (e.ring_epoch[k] == epoch)
        ):
            back = ring_slot(e, k)  # how many batches before the newest slot k was written
            if found < 0 or back < found:
                found = back
    return found


def last_sequence_of(e):
    """ProducerStateEntry.lastSeq: of the entry's epoch, -1 when none (the next batch starts at 0).

    A marker that raised the epoch emptied the cache (docs/rules.md#transactions).
    """
    if e.has_last_data and e.last_data_epoch == e.epoch:
        return e.last_data_sequence
    return -1


def is_expired(e, timestamp, expiration_ms):
    """ProducerStateManager.isProducerExpired, read from the log (docs/rules.md#producer-expiry).

    The producer's previous row is older than the expiration and the log shows no transaction open
    after it; both timestamps must be known.
    """
    return (
        e.has_rows
        and timestamp != NULL
        and e.previous_timestamp != NULL
        and timestamp - e.previous_timestamp >= expiration_ms
        and not e.log_txn_open
    )
