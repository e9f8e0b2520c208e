"""The partition's log: UnifiedLog's checks of the log itself.

Offsets (overlaps and gaps), leader epochs against the batches before and the
`leader-epoch-checkpoint`, CRC, the other replicas' batches, and the partition's statistics. None
of these needs a producer's state.
"""

from __future__ import annotations

from eos_audit.findings import (
    FACT_CHECKPOINT_EPOCH,
    FACT_FIRST_MISSING_OFFSET,
    FACT_HIGH_WATERMARK,
    FACT_LAST_MISSING_OFFSET,
    FACT_LEADER_EPOCH,
    FACT_MAX_LEADER_EPOCH,
    FACT_PRIMARY_BASE_SEQUENCE,
    FACT_PRIMARY_LAST_OFFSET,
    FACT_PRIMARY_PRODUCER_ID,
)
from eos_audit.replay.basics import (
    AUDITED,
    COMPACTION,
    CORRUPT_BATCH,
    CORRUPT_MESSAGE,
    LEADER_EPOCH_MISMATCH,
    LEADER_EPOCH_REGRESSION,
    OFFSET_GAP,
    OFFSET_OVERLAP,
    QUARANTINED_BATCH,
    REPLICA_DIVERGENCE,
    UNEXPLAINED,
    max_or_null,
    min_or_null,
)
from eos_audit.replay.emit import (
    emit,
    record_estimate,
)
from eos_audit.replay.state import (
    NULL,
)


def begin_partition(part, partition):
    """A new (topic, partition): nothing known yet."""
    part.active = True
    part.partition = partition
    part.first_offset = NULL
    part.max_last_offset = NULL
    part.max_leader_epoch = NULL
    part.log_start_checkpoint = NULL
    part.high_watermark = NULL
    part.epoch_entry_epoch = NULL
    part.epoch_entry_start = NULL
    part.primary_base_offset = NULL
    part.previous_base_offset = NULL
    part.occurrence = 0
    part.previous_ack_offset = NULL
    part.ack_occurrence = 0
    part.batches = 0
    part.replica_batches = 0
    part.batches_with_producer_id = 0
    part.records = 0
    part.markers = 0
    part.uncounted_from = NULL
    part.uncounted_to = NULL
    part.unattributed_from = NULL
    part.unattributed_to = NULL
    part.max_timestamp = NULL
    part.latest_timestamp = NULL
    part.producers = 0
    part.audited_producers = 0
    part.acks = 0
    part.covered_end = NULL
    part.skipped_batches = 0
    part.skipped_from = NULL
    part.skipped_to = NULL
    part.skipped_max_timestamp = NULL


def in_snapshot(row, part):
    """A batch the seeded state holds already: counted as skipped, not replayed again.

    The runner decides which batches those are, for a whole Arrow batch at once
    (`runner._Replayer.below_snapshot`, LogLoader's rule: docs/rules.md#seeded-state). The
    export holds them all the same: their offsets and latest time are kept apart from the
    replayed log's, for the checks that judge commits against the exported log
    (`processing.exported_logs`).
    """
    if not row.below_snapshot:
        return False
    part.skipped_batches += 1
    part.skipped_from = min_or_null(part.skipped_from, row.base_offset)
    part.skipped_to = max_or_null(part.skipped_to, row.last_offset)
    part.skipped_max_timestamp = max_or_null(part.skipped_max_timestamp, row.timestamp)
    if row.kind == AUDITED and part.covered_end != NULL and row.last_offset >= part.covered_end:
        # A batch across the covered offset (one the cleaner rewrote): its offsets above it are
        # neither replayed here nor by the earlier run, so their records are not counted.
        doubt_offsets(part, part.covered_end, row.last_offset)
    return True


def count_occurrence(part, base_offset):
    """How many earlier log rows start at this offset: keeps finding ids unique."""
    if part.previous_base_offset != NULL and part.previous_base_offset == base_offset:
        part.occurrence += 1
    else:
        part.occurrence = 0
    part.previous_base_offset = base_offset


def is_same_batch(row, part):
    """Whether row i has the header of the audited batch at its base offset.

    The header a batch is told by: offsets, producer id, epoch, base sequence, control and
    transactional bits, record count (docs/rules.md#replica-divergence compares the same).
    """
    return (
        part.primary_base_offset != NULL
        and part.primary_base_offset == row.base_offset
        and part.primary_last_offset == row.last_offset
        and part.primary_producer_id == row.producer_id
        and part.primary_producer_epoch == row.producer_epoch
        and part.primary_base_sequence == row.base_sequence
        and part.primary_is_control == row.is_control
        and part.primary_is_transactional == row.is_transactional
        and part.primary_record_count == row.record_count
    )


def check_audited_batch(row, part, out):
    """The checks of a batch of the audited replica that need no producer state."""
    base_offset = row.base_offset
    leader_epoch = row.leader_epoch
    magic = row.magic
    has_leader_epoch = (magic == NULL or magic >= 2) and leader_epoch != NULL and leader_epoch >= 0
    if part.max_last_offset != NULL and base_offset <= part.max_last_offset:
        # docs/rules.md#offset-overlap: against the highest earlier last offset, so a batch
        # overlapping any earlier batch is found.
        emit(out, OFFSET_OVERLAP, row, part, previous=part.max_last_offset)
    elif (
        part.max_last_offset != NULL
        and base_offset > part.max_last_offset + 1
        and (magic == NULL or magic >= 2)
    ):
        # docs/rules.md#offset-gap: a leader assigns every offset from its log end, markers
        # included, so only the cleaner (or a lost segment) leaves a hole. A v0/v1 entry's base
        # offset is not the first of its records, so only v2 batches are judged.
        cause = explain_offset_gap(row)
        f = emit(out, OFFSET_GAP, row, part, cause=cause, previous=part.max_last_offset)
        f.facts[FACT_FIRST_MISSING_OFFSET] = part.max_last_offset + 1
        f.facts[FACT_LAST_MISSING_OFFSET] = base_offset - 1
    if has_leader_epoch and part.max_leader_epoch != NULL and leader_epoch < part.max_leader_epoch:
        # docs/rules.md#leader-epoch-regression
        f = emit(out, LEADER_EPOCH_REGRESSION, row, part)
        f.facts[FACT_MAX_LEADER_EPOCH] = part.max_leader_epoch
        f.facts[FACT_LEADER_EPOCH] = leader_epoch
    if (
        has_leader_epoch
        and part.epoch_entry_epoch != NULL
        and leader_epoch != part.epoch_entry_epoch
    ):
        # docs/rules.md#leader-epoch-mismatch: the checkpoint entry in force at this offset
        f = emit(out, LEADER_EPOCH_MISMATCH, row, part, previous=part.epoch_entry_start)
        f.facts[FACT_CHECKPOINT_EPOCH] = part.epoch_entry_epoch
        f.facts[FACT_LEADER_EPOCH] = leader_epoch
    if row.crc_valid == 0:
        # DefaultRecordBatch.ensureValid (docs/rules.md#corrupt-batch)
        emit(out, CORRUPT_BATCH, row, part, error=CORRUPT_MESSAGE)
    if has_leader_epoch:
        part.max_leader_epoch = max_or_null(part.max_leader_epoch, leader_epoch)


def explain_offset_gap(row):
    """Why offsets are missing before the batch (docs/rules.md#offset-gap), first match.

    A quarantined batch nobody could read lay there, or the cleaner removed batches.
    """
    if row.follows_quarantined:
        return QUARANTINED_BATCH
    if row.is_compacted:
        return COMPACTION
    return UNEXPLAINED


def count_audited_batch(row, part, closed_transaction):
    """The partition's statistics and the audited replica's latest batch.

    `closed_transaction`: the batch closed a transaction (a `transactions` row). Where the export
    does not hold one record at every offset, or a marker closed nothing, the offsets join the
    partition's uncounted or unattributed span (docs/rules.md#one-to-one-processors).
    """
    records = record_estimate(row)
    previous = part.max_last_offset
    if previous == NULL and part.covered_end != NULL:
        # The first batch replayed after the seeded state: below it lie the log the earlier run
        # replayed and the batches skipped here. An export that resumes above them holds no
        # record at the offsets between, which no run counted (docs/nightly.md).
        previous = max_or_null(part.covered_end - 1, part.skipped_to)
    if previous != NULL and row.base_offset > previous + 1:
        doubt_offsets(part, previous + 1, row.base_offset - 1)  # a hole before the batch
    elif previous != NULL and row.base_offset <= previous:
        doubt_offsets(part, row.base_offset, min(previous, row.last_offset))  # held twice
    if records != row.last_offset - row.base_offset + 1:
        # A hole inside the batch: the cleaner keeps a v2 batch's offsets and removes records.
        doubt_offsets(part, row.base_offset, row.last_offset)
    part.max_last_offset = max_or_null(part.max_last_offset, row.last_offset)
    part.batches += 1
    if row.producer_id >= 0:
        part.batches_with_producer_id += 1
    part.records += records
    if row.is_control:
        part.markers += 1
        if not closed_transaction:
            part.unattributed_from = min_or_null(part.unattributed_from, row.base_offset)
            part.unattributed_to = max_or_null(part.unattributed_to, row.last_offset)
    part.max_timestamp = max_or_null(part.max_timestamp, row.timestamp)
    if row.timestamp != NULL and row.timestamp >= 0:
        part.latest_timestamp = max_or_null(part.latest_timestamp, row.timestamp)
    part.primary_base_offset = row.base_offset
    part.primary_last_offset = row.last_offset
    part.primary_producer_id = row.producer_id
    part.primary_producer_epoch = row.producer_epoch
    part.primary_base_sequence = row.base_sequence
    part.primary_is_control = row.is_control
    part.primary_is_transactional = row.is_transactional
    part.primary_record_count = row.record_count


def doubt_offsets(part, first, last):
    """Offsets first..last do not hold one record each: they join the partition's uncounted span."""
    part.uncounted_from = min_or_null(part.uncounted_from, first)
    part.uncounted_to = max_or_null(part.uncounted_to, last)


def check_replica_batch(row, part, out):
    """Compare another replica's batch with the audited one (docs/rules.md#replica-divergence).

    Below the high watermark every replica holds the same batches, so it must match the audited
    batch starting at its offset.
    """
    part.replica_batches += 1
    base_offset = row.base_offset
    if part.high_watermark != NULL and base_offset >= part.high_watermark:
        return
    same_start = part.primary_base_offset != NULL and part.primary_base_offset == base_offset
    if same_start:
        differs = not is_same_batch(row, part)
    else:
        # no audited batch starts here although one covers this offset
        differs = part.max_last_offset != NULL and part.max_last_offset >= base_offset
    if not differs:
        return
    f = emit(out, REPLICA_DIVERGENCE, row, part, previous=part.primary_base_offset)
    if part.primary_base_offset != NULL:
        f.facts[FACT_PRIMARY_LAST_OFFSET] = part.primary_last_offset
        f.facts[FACT_PRIMARY_PRODUCER_ID] = part.primary_producer_id
        f.facts[FACT_PRIMARY_BASE_SEQUENCE] = part.primary_base_sequence
    f.facts[FACT_HIGH_WATERMARK] = part.high_watermark
