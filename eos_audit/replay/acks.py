"""Client acknowledgements (docs/rules.md#acked-write-lost).

Registered before the partition's log (they sort first), matched against its batches by
(producer id, epoch, base sequence), judged at the end of the partition.
"""

from __future__ import annotations

from eos_audit.findings import (
    FACT_ACKNOWLEDGED_MS,
    FACT_LOG_BATCHES,
    FACT_LOG_END_OFFSET,
    FACT_LOG_START_OFFSET,
)
from eos_audit.replay.basics import (
    ACKED_OFFSET_MISMATCH,
    ACKED_WRITE_LOST,
    COMPACTION,
    UNEXPLAINED,
    log_start_of,
)
from eos_audit.replay.emit import (
    finding_without_row,
)
from eos_audit.replay.lookups import (
    ack_position,
    index_ack,
)
from eos_audit.replay.state import (
    ACKS_SEEN,
    NULL,
)


def register_ack(row, part, acks, ack_index, counts):
    """Remember an acknowledgement until the end of its partition.

    Returns False when the acknowledgement array is full (the caller grows it).
    """
    if part.acks >= len(acks):
        return False
    offset = row.base_offset
    if part.previous_ack_offset != NULL and part.previous_ack_offset == offset:
        part.ack_occurrence += 1
    else:
        part.ack_occurrence = 0
    part.previous_ack_offset = offset
    k = part.acks
    part.acks += 1
    a = acks[k]
    a.producer_id = row.producer_id
    a.producer_epoch = row.producer_epoch
    a.base_sequence = row.base_sequence
    a.last_sequence = row.last_sequence
    a.offset = offset
    a.last_offset = row.last_offset
    a.acknowledged_ms = row.value
    a.occurrence = part.ack_occurrence
    a.ordinal = counts[ACKS_SEEN]
    counts[ACKS_SEEN] += 1
    a.log_batches = 0
    a.log_min_offset = NULL
    a.log_has_exact = False
    index_ack(ack_index, acks, k)
    return True


def match_acks(row, part, acks, ack_index):
    """An audited batch with a batch identity: count it for the acknowledgements of that batch."""
    if part.acks == 0 or row.producer_id < 0 or row.base_sequence < 0:
        return  # most audits have no acknowledgements: no key to hash
    k = ack_index[
        ack_position(ack_index, row.producer_id, row.producer_epoch, row.base_sequence),
        3,
    ]
    base_offset = row.base_offset
    while k >= 0:
        a = acks[k]
        a.log_batches += 1
        if a.log_min_offset == NULL or base_offset < a.log_min_offset:
            a.log_min_offset = base_offset
        if base_offset == a.offset:
            a.log_has_exact = True
        k = a.next_same_batch


def judge_acks(part, acks, out, tp_row, is_compacted):
    """ACKED_WRITE_LOST and ACKED_OFFSET_MISMATCH for the checkable acknowledgements.

    Checkable: inside [log start, log end) of the exported log (below it retention deleted it,
    at or past its end it was made after the export).
    """
    if part.batches == 0:
        return
    log_start = log_start_of(part)
    log_end = part.max_last_offset + 1
    for k in range(part.acks):
        a = acks[k]
        if a.producer_id < 0 or a.base_sequence < 0:
            continue
        if a.offset < log_start or a.offset >= log_end:
            continue
        if a.log_batches == 0:
            f = finding_without_row(out, ACKED_WRITE_LOST, tp_row, part)
            f.cause = COMPACTION if is_compacted else UNEXPLAINED
            f.facts[FACT_LOG_START_OFFSET] = log_start
            f.facts[FACT_LOG_END_OFFSET] = log_end
        elif not a.log_has_exact:
            f = finding_without_row(out, ACKED_OFFSET_MISMATCH, tp_row, part)
            f.previous_offset = a.log_min_offset
            f.facts[FACT_LOG_BATCHES] = a.log_batches
        else:
            continue
        f.producer_id = a.producer_id
        f.producer_epoch = a.producer_epoch
        f.base_offset = a.offset
        f.last_offset = a.last_offset
        f.base_sequence = a.base_sequence
        f.last_sequence = a.last_sequence
        f.timestamp = a.acknowledged_ms
        f.occurrence = a.occurrence
        f.ack_ordinal = a.ordinal
        f.facts[FACT_ACKNOWLEDGED_MS] = a.acknowledged_ms
