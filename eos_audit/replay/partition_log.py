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
    COMPACTION,
    CORRUPT_BATCH,
    CORRUPT_MESSAGE,
    LEADER_EPOCH_MISMATCH,
    LEADER_EPOCH_REGRESSION,
    NO_CAUSE,
    NO_ERROR,
    OFFSET_GAP,
    OFFSET_OVERLAP,
    QUARANTINED_BATCH,
    REPLICA_DIVERGENCE,
    UNEXPLAINED,
    max_or_null,
)
from eos_audit.replay.emit import (
    finding_at,
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
    part.max_timestamp = NULL
    part.latest_timestamp = NULL
    part.producers = 0
    part.audited_producers = 0
    part.acks = 0
    part.covered_end = NULL
    part.skipped_batches = 0


def already_in_state(rows, i, part):
    """A batch below the offset the seeded state covers: replayed by an earlier run already.

    What LogLoader does when it loads a producer-state snapshot: only the log above the snapshot's
    offset is replayed on top of it (docs/rules.md#seeded-state, --since-state).
    """
    if part.covered_end == NULL or rows[i].base_offset >= part.covered_end:
        return False
    part.skipped_batches += 1
    return True


def count_occurrence(part, base_offset):
    """How many earlier log rows start at this offset: keeps finding ids unique."""
    if part.previous_base_offset != NULL and part.previous_base_offset == base_offset:
        part.occurrence += 1
    else:
        part.occurrence = 0
    part.previous_base_offset = base_offset


def is_same_batch(rows, i, part):
    """Whether row i has the header of the audited batch at its base offset.

    The header a batch is told by: offsets, producer id, epoch, base sequence, control and
    transactional bits, record count (docs/rules.md#replica-divergence compares the same).
    """
    return (
        part.primary_base_offset != NULL
        and part.primary_base_offset == rows[i].base_offset
        and part.primary_last_offset == rows[i].last_offset
        and part.primary_producer_id == rows[i].producer_id
        and part.primary_producer_epoch == rows[i].producer_epoch
        and part.primary_base_sequence == rows[i].base_sequence
        and part.primary_is_control == rows[i].is_control
        and part.primary_is_transactional == rows[i].is_transactional
        and part.primary_record_count == rows[i].record_count
    )


def check_audited_batch(rows, i, part, out):
    """The checks of a batch of the audited replica that need no producer state."""
    base_offset = rows[i].base_offset
    leader_epoch = rows[i].leader_epoch
    magic = rows[i].magic
    has_leader_epoch = (magic == NULL or magic >= 2) and leader_epoch != NULL and leader_epoch >= 0
    if part.max_last_offset != NULL and base_offset <= part.max_last_offset:
        # docs/rules.md#offset-overlap: against the highest earlier last offset, so a batch
        # overlapping any earlier batch is found.
        finding_at(
            out,
            OFFSET_OVERLAP,
            rows,
            i,
            part,
            NO_CAUSE,
            NO_ERROR,
            NULL,
            part.max_last_offset,
        )
    elif (
        part.max_last_offset != NULL
        and base_offset > part.max_last_offset + 1
        and (magic == NULL or magic >= 2)
    ):
        # docs/rules.md#offset-gap: a leader assigns every offset from its log end, markers
        # included, so only the cleaner (or a lost segment) leaves a hole. A v0/v1 entry's base
        # offset is not the first of its records, so only v2 batches are judged.
        if rows[i].follows_quarantined:
            cause = QUARANTINED_BATCH
        elif rows[i].is_compacted:
            cause = COMPACTION
        else:
            cause = UNEXPLAINED
        f = finding_at(out, OFFSET_GAP, rows, i, part, cause, NO_ERROR, NULL, part.max_last_offset)
        f.facts[FACT_FIRST_MISSING_OFFSET] = part.max_last_offset + 1
        f.facts[FACT_LAST_MISSING_OFFSET] = base_offset - 1
    if has_leader_epoch and part.max_leader_epoch != NULL and leader_epoch < part.max_leader_epoch:
        # docs/rules.md#leader-epoch-regression
        f = finding_at(out, LEADER_EPOCH_REGRESSION, rows, i, part, NO_CAUSE, NO_ERROR, NULL, NULL)
        f.facts[FACT_MAX_LEADER_EPOCH] = part.max_leader_epoch
        f.facts[FACT_LEADER_EPOCH] = leader_epoch
    if (
        has_leader_epoch
        and part.epoch_entry_epoch != NULL
        and leader_epoch != part.epoch_entry_epoch
    ):
        # docs/rules.md#leader-epoch-mismatch: the checkpoint entry in force at this offset
        f = finding_at(
            out,
            LEADER_EPOCH_MISMATCH,
            rows,
            i,
            part,
            NO_CAUSE,
            NO_ERROR,
            NULL,
            part.epoch_entry_start,
        )
        f.facts[FACT_CHECKPOINT_EPOCH] = part.epoch_entry_epoch
        f.facts[FACT_LEADER_EPOCH] = leader_epoch
    if rows[i].crc_valid == 0:
        # DefaultRecordBatch.ensureValid (docs/rules.md#corrupt-batch)
        finding_at(out, CORRUPT_BATCH, rows, i, part, NO_CAUSE, CORRUPT_MESSAGE, NULL, NULL)
    if has_leader_epoch:
        part.max_leader_epoch = max_or_null(part.max_leader_epoch, leader_epoch)


def count_audited_batch(rows, i, part):
    """The partition's statistics and the audited replica's latest batch."""
    part.max_last_offset = max_or_null(part.max_last_offset, rows[i].last_offset)
    part.batches += 1
    if rows[i].producer_id >= 0:
        part.batches_with_producer_id += 1
    part.records += record_estimate(rows, i)
    part.max_timestamp = max_or_null(part.max_timestamp, rows[i].timestamp)
    if rows[i].timestamp != NULL and rows[i].timestamp >= 0:
        part.latest_timestamp = max_or_null(part.latest_timestamp, rows[i].timestamp)
    part.primary_base_offset = rows[i].base_offset
    part.primary_last_offset = rows[i].last_offset
    part.primary_producer_id = rows[i].producer_id
    part.primary_producer_epoch = rows[i].producer_epoch
    part.primary_base_sequence = rows[i].base_sequence
    part.primary_is_control = rows[i].is_control
    part.primary_is_transactional = rows[i].is_transactional
    part.primary_record_count = rows[i].record_count


def check_replica_batch(rows, i, part, out):
    """Compare another replica's batch with the audited one (docs/rules.md#replica-divergence).

    Below the high watermark every replica holds the same batches, so it must match the audited
    batch starting at its offset.
    """
    part.replica_batches += 1
    base_offset = rows[i].base_offset
    if part.high_watermark != NULL and base_offset >= part.high_watermark:
        return
    same_start = part.primary_base_offset != NULL and part.primary_base_offset == base_offset
    if same_start:
        differs = not is_same_batch(rows, i, part)
    else:
        # no audited batch starts here although one covers this offset
        differs = part.max_last_offset != NULL and part.max_last_offset >= base_offset
    if not differs:
        return
    f = finding_at(
        out,
        REPLICA_DIVERGENCE,
        rows,
        i,
        part,
        NO_CAUSE,
        NO_ERROR,
        NULL,
        part.primary_base_offset,
    )
    if part.primary_base_offset != NULL:
        f.facts[FACT_PRIMARY_LAST_OFFSET] = part.primary_last_offset
        f.facts[FACT_PRIMARY_PRODUCER_ID] = part.primary_producer_id
        f.facts[FACT_PRIMARY_BASE_SEQUENCE] = part.primary_base_sequence
    f.facts[FACT_HIGH_WATERMARK] = part.high_watermark
