"""What the kernel writes into its outputs.

Findings (`emit`: one call per verdict, the row's own fields filled in), the producer-epoch
summaries of the producer_sessions table, and at a partition's end its open transactions and its
final producer state. Each output is a record array of `state.OUTPUT_DTYPES`, all handed over in
one `state.Outputs` (`out`), whose `counts` says how many rows each holds.
"""

from __future__ import annotations

from eos_audit.findings import (
    FACT_AGE_MS,
    FACT_FIRST_OFFSET,
    FACT_MEASURED_AT_EXPORT,
    FACTS_PER_FINDING,
)
from eos_audit.replay.basics import (
    FINDINGS,
    HANGING_TRANSACTION,
    NO_CAUSE,
    NO_ERROR,
    OPEN,
    PRODUCER_SESSIONS,
    PRODUCER_STATE,
    TRANSACTIONS,
    max_or_null,
)
from eos_audit.replay.producer_entry import (
    ring_slot,
)
from eos_audit.replay.state import (
    NULL,
    NUM_BATCHES_TO_RETAIN,
)


# ------------------------------------------------------------------------------------------------
# Emitting
# ------------------------------------------------------------------------------------------------
def emit(out, code, row, part, cause=NO_CAUSE, error=NO_ERROR, expected=NULL, previous=NULL):
    """Append a finding of type `code` about `row`, its own fields filled in.

    One call per verdict; the caller fills the type's facts (`findings.REGISTRY[...].facts`) into
    the finding returned.

    Args:
        out: the kernel's outputs (`state.Outputs`).
        code: the finding's type (`basics`: a finding code of findings.REGISTRY).
        row: the replay row it is about (`state.REPLAY_ROW`).
        part: the partition being replayed.
        cause: why the finding happened (`findings.Cause`), when the rule explains it.
        error: the Kafka error a leader answered with (`findings.KafkaError`).
        expected: the sequence the leader expected.
        previous: the offset of the batch the finding compares the row with.

    Returns:
        The finding: a record of `out.findings`.
    """
    f = out.findings[out.counts[FINDINGS]]
    out.counts[FINDINGS] += 1
    f.finding_code = code
    f.cause = cause
    f.kafka_error = error
    f.row = row.position
    f.tp_row = row.position
    f.partition = part.partition
    f.producer_id = row.producer_id
    f.producer_epoch = row.producer_epoch
    f.base_offset = row.base_offset
    f.last_offset = row.last_offset
    f.base_sequence = row.base_sequence
    f.last_sequence = row.last_sequence
    f.timestamp = row.timestamp
    f.expected_sequence = expected
    f.previous_offset = previous
    f.occurrence = part.occurrence
    f.ack_ordinal = NULL
    for k in range(FACTS_PER_FINDING):
        f.facts[k] = NULL
    return f


def finding_without_row(out, code, tp_row, part):
    """Append a finding found at the end of a partition (no input row of its own)."""
    f = out.findings[out.counts[FINDINGS]]
    out.counts[FINDINGS] += 1
    f.finding_code = code
    f.cause = NO_CAUSE
    f.kafka_error = NO_ERROR
    f.row = -1
    f.tp_row = tp_row
    f.partition = part.partition
    f.producer_id = NULL
    f.producer_epoch = NULL
    f.base_offset = NULL
    f.last_offset = NULL
    f.base_sequence = NULL
    f.last_sequence = NULL
    f.timestamp = NULL
    f.expected_sequence = NULL
    f.previous_offset = NULL
    f.occurrence = 0
    f.ack_ordinal = NULL
    for k in range(FACTS_PER_FINDING):
        f.facts[k] = NULL
    return f


# ------------------------------------------------------------------------------------------------
# The producer-epoch summary (producer_sessions table)
# ------------------------------------------------------------------------------------------------
def flush_summary(e, out, tp_row, part):
    """Emit the producer epoch's summary, if one is open."""
    if not e.summary_open:
        return
    s = out.producer_sessions[out.counts[PRODUCER_SESSIONS]]
    out.counts[PRODUCER_SESSIONS] += 1
    s.tp_row = tp_row
    s.partition = part.partition
    s.producer_id = e.producer_id
    s.producer_epoch = e.summary_epoch
    s.first_offset = e.summary_first_offset
    s.last_offset = e.summary_last_offset
    s.first_sequence_offset = e.summary_first_sequence_offset
    s.first_sequence = e.summary_first_sequence
    s.last_sequence_offset = e.summary_last_sequence_offset
    s.last_sequence = e.summary_last_sequence
    s.batches = e.summary_batches
    s.records = e.summary_records
    s.first_timestamp = e.summary_first_timestamp
    s.last_timestamp = e.summary_last_timestamp
    e.summary_open = False


def summarise(e, row, timestamp, out, part):
    """Count an audited row into its producer epoch's summary."""
    epoch = row.producer_epoch
    if e.summary_open and e.summary_epoch != epoch:
        flush_summary(e, out, row.position, part)
    if not e.summary_open:
        e.summary_open = True
        e.summary_epoch = epoch
        e.summary_first_offset = NULL
        e.summary_last_offset = NULL
        e.summary_first_sequence_offset = NULL
        e.summary_first_sequence = NULL
        e.summary_last_sequence_offset = NULL
        e.summary_last_sequence = NULL
        e.summary_batches = 0
        e.summary_records = NULL  # markers only: no records
        e.summary_first_timestamp = NULL
        e.summary_last_timestamp = NULL
    base_offset = row.base_offset
    last_offset = row.last_offset
    e.summary_batches += 1
    if e.summary_first_offset == NULL or base_offset < e.summary_first_offset:
        e.summary_first_offset = base_offset
    e.summary_last_offset = max_or_null(e.summary_last_offset, last_offset)
    if timestamp != NULL:
        if e.summary_first_timestamp == NULL or timestamp < e.summary_first_timestamp:
            e.summary_first_timestamp = timestamp
        e.summary_last_timestamp = max_or_null(e.summary_last_timestamp, timestamp)
    if not row.is_control:
        if e.summary_records == NULL:
            e.summary_records = 0
        e.summary_records += record_estimate(row)
        if row.base_sequence >= 0:
            if (
                e.summary_first_sequence_offset == NULL
                or base_offset < e.summary_first_sequence_offset
            ):
                e.summary_first_sequence_offset = base_offset
                e.summary_first_sequence = row.base_sequence
            last_sequence = row.last_sequence
            if (
                e.summary_last_sequence_offset == NULL
                or last_offset > e.summary_last_sequence_offset
                or (
                    last_offset == e.summary_last_sequence_offset
                    and last_sequence > e.summary_last_sequence
                )
            ):
                e.summary_last_sequence_offset = last_offset
                e.summary_last_sequence = last_sequence


def record_estimate(row):
    """Records of a batch; dump-log text without a count: the offsets it spans."""
    if row.record_count != NULL:
        return row.record_count
    return row.last_offset - row.base_offset + 1


# ------------------------------------------------------------------------------------------------
# The end of a partition: what is still open, the summaries and the final producer state
# ------------------------------------------------------------------------------------------------
def emit_open_transaction(e, part, out, tp_row, clock, params):
    """An OPEN transaction, and HANGING_TRANSACTION when it is too old.

    Too old: older than the transaction timeout plus the broker's grace
    (docs/rules.md#hanging-transaction).
    """
    age = NULL
    if clock != NULL and e.txn_first_timestamp != NULL:
        age = clock - e.txn_first_timestamp
    hanging = age != NULL and age > params.hanging_after_ms
    t = out.transactions[out.counts[TRANSACTIONS]]
    out.counts[TRANSACTIONS] += 1
    t.tp_row = tp_row
    t.partition = part.partition
    t.producer_id = e.producer_id
    t.start_epoch = e.txn_start_epoch
    t.end_epoch = NULL
    t.first_offset = e.txn_first_offset
    t.marker_offset = NULL
    t.outcome = OPEN
    t.hanging = hanging
    t.batches = e.txn_batches
    t.records = e.txn_records
    t.first_timestamp = e.txn_first_timestamp
    t.end_timestamp = NULL
    t.duration_ms = age
    t.coordinator_epoch = NULL
    if hanging:
        f = finding_without_row(out, HANGING_TRANSACTION, tp_row, part)
        f.producer_id = e.producer_id
        f.producer_epoch = e.txn_start_epoch
        f.base_offset = e.txn_first_offset
        f.last_offset = (
            e.txn_first_last_offset if e.txn_first_last_offset != NULL else e.txn_first_offset
        )
        f.previous_offset = e.txn_first_offset
        f.timestamp = e.txn_first_timestamp
        f.occurrence = e.txn_first_occurrence
        f.facts[FACT_AGE_MS] = age
        f.facts[FACT_FIRST_OFFSET] = e.txn_first_offset
        f.facts[FACT_MEASURED_AT_EXPORT] = 1 if params.as_of_ms != NULL else 0


def emit_final_state(e, part, out, tp_row, log_end):
    """The entry as a broker would snapshot it: a producer_state row that seeds the next run."""
    s = out.producer_state[out.counts[PRODUCER_STATE]]
    out.counts[PRODUCER_STATE] += 1
    s.tp_row = tp_row
    s.partition = part.partition
    s.producer_id = e.producer_id
    s.producer_epoch = e.epoch
    s.coordinator_epoch = e.coordinator_epoch if e.coordinator_epoch >= 0 else NULL
    s.txn_first_offset = e.txn_first_offset if e.txn_open else NULL
    s.last_timestamp = e.last_timestamp
    s.state_offset = log_end
    # The cache: the newest NUM_BATCHES_TO_RETAIN batches of the current epoch, oldest first.
    cached = 0
    for back in range(min(e.ring_size, NUM_BATCHES_TO_RETAIN)):
        if e.ring_epoch[ring_slot(e, back)] != e.epoch:
            break
        cached += 1
    s.cached = cached
    for j in range(NUM_BATCHES_TO_RETAIN):
        if j < cached:
            k = ring_slot(e, cached - 1 - j)
            s.base_sequence[j] = e.ring_base_sequence[k]
            s.last_sequence[j] = e.ring_last_sequence[k]
            s.base_offset[j] = e.ring_base_offset[k]
            s.last_offset[j] = e.ring_last_offset[k]
        else:
            s.base_sequence[j] = NULL
            s.last_sequence[j] = NULL
            s.base_offset[j] = NULL
            s.last_offset[j] = NULL
