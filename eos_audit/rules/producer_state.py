"""Producer-state replay: the leader's idempotence and fencing rules as window functions.

The semantics are docs/replay_semantics.md (from kafka_rules.md §1, §7, §8). The broker's state
machine is sequential; it becomes column expressions because every piece of state can be read off
the rows before a batch once three facts are known per row, each computable without the others'
verdicts on later rows:

1. the state *session* (expiry resets it), from timestamps and the log's transaction events;
2. the current epoch = the highest epoch of the session's earlier rows (a fenced batch never raises
   it, a duplicate repeats it), which decides FENCED_PRODUCER_EPOCH;
3. DUPLICATE_BATCH = an earlier data batch of the session with the same epoch and sequence range.

Everything else (last applied sequence, the 5-batch cache, the open transaction, the coordinator
epoch) is a "last value" or "n-th previous value" over rows that are *applied* (neither duplicate
nor fenced). Windows: `producer_window` (topic, partition, producer) in replay order and
`duplicate_window` (the same plus session, epoch and sequence range). Both are partitioned by a
superset of (topic, partition), so the one shuffle of the partition rules serves them.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F

from eos_audit.config import AuditConfig
from eos_audit.rules.common import (
    INT32_MAX,
    KIND_AUDITED,
    KIND_SEED_STATE,
    UNEXPLAINED,
    finding,
    sentence,
    topic_matches,
    when_true,
)

PRODUCER_KEYS = ["topic", "partition", "_pkey"]
# Seeded rows first, then the partition's log order. `_p_row` is the row's unique position in
# the partition window (rules.partition): base offset, replica rank, then LOG_ORDER. Inside one
# producer's replay rows (one producer id, replica rank 0) that is exactly LOG_ORDER, so two
# columns order the replay instead of 15 tie-breakers, and the sorts compare short keys.
REPLAY_ORDER = ["_kind", "_p_row"]
SEQUENCE_SPACE = 2_147_483_648  # 2^31: sequences are int32 and wrap from MAX to 0 (§1.5)
CACHE_SIZE = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN (§1.2)


def producer_window() -> WindowSpec:
    """One producer of one partition, in replay order (seeded rows first)."""
    return Window.partitionBy(*PRODUCER_KEYS).orderBy(*REPLAY_ORDER)


def duplicate_window() -> WindowSpec:
    """Data batches of one producer session and epoch with the same sequence range.

    Epoch before session: `eos_audit.rules.sessions` groups by (producer, epoch) and is ordered
    by the rest of this spec, so both windows share one sort.
    """
    return Window.partitionBy(*PRODUCER_KEYS, "producer_epoch", "_session", "_dup_key").orderBy(
        *REPLAY_ORDER
    )


def _before(window: WindowSpec) -> WindowSpec:
    return window.rowsBetween(Window.unboundedPreceding, -1)


def _upto(window: WindowSpec) -> WindowSpec:
    return window.rowsBetween(Window.unboundedPreceding, Window.currentRow)


def _in_session(state: Column, field: str, default: Column | int | None) -> Column:
    """`state.field` if `state` (a struct with a `session` field) belongs to this row's session."""
    fallback = default if isinstance(default, Column) else F.lit(default)
    return F.when(state["session"] == F.col("_session"), state[field]).otherwise(fallback)


def with_replay_roles(df: DataFrame, config: AuditConfig) -> DataFrame:
    """Classify rows for the replay (row-level, no window).

    `_pkey` is the producer id for rows that carry producer state and null otherwise, so rows
    outside the replay share one inert window group per partition.
    """
    replays = (
        F.col("_is_valid")
        & (F.col("_kind") <= KIND_AUDITED)  # seeds and the audited replica's batches
        & (F.col("producer_id") >= 0)
        & (F.coalesce(F.col("magic"), F.lit(2)) >= 2)
        # A batch that failed its CRC has an untrusted header (§2.1): CORRUPT_BATCH only.
        & ~F.coalesce(F.col("crc_valid") == F.lit(False), F.lit(False))
        # "Control batches with no records change nothing" (§1.7).
        & ~(F.col("is_control") & F.coalesce(F.col("record_count") == 0, F.lit(False)))
    )
    is_data = replays & ~F.col("is_control") & (F.col("_kind") != KIND_SEED_STATE)
    # Coordinator topics and batches without a sequence are COORDINATOR appends (§1.9, §7 rule 8).
    seq_checked = (
        is_data & (F.col("base_sequence") >= 0) & ~topic_matches(config.topics.coordinator)
    )
    return df.select(
        "*",
        F.when(replays, F.col("producer_id")).alias("_pkey"),
        (replays & F.col("is_control")).alias("_is_marker"),
        is_data.alias("_is_data"),
        seq_checked.alias("_seq_checked"),
        (is_data & F.col("is_transactional")).alias("_is_txn_data"),
        F.when(F.col("max_timestamp") >= 0, F.col("max_timestamp")).alias("_ts"),
        F.when(seq_checked, F.struct("base_sequence", "last_sequence")).alias("_dup_key"),
        topic_matches(config.topics.compacted).alias("_is_compacted"),
    )


def with_sessions(df: DataFrame, config: AuditConfig) -> DataFrame:
    """Sessions (expiry resets), current epoch and the fenced flag (docs/replay_semantics.md).

    Expiry is read from the log: the gap to the producer's previous row, and whether the log shows
    a transaction open after it (a transactional data batch after the last marker). It does not
    depend on verdicts, which is what makes it a window function; the broker's own expiry is an
    approximation too (§1.10, §9).
    """
    window = producer_window()
    txn_event = (
        F.when(F.col("_is_marker"), F.lit(False))
        .when(F.col("_is_txn_data"), F.lit(True))
        .when(
            (F.col("_kind") == KIND_SEED_STATE) & F.col("_seed_txn_first_offset").isNotNull(),
            F.lit(True),
        )
    )
    df = df.select(
        "*",
        F.lag("_ts").over(window).alias("_prev_ts"),
        F.lag(F.when(F.col("_kind") != KIND_SEED_STATE, F.col("base_offset")))
        .over(window)
        .alias("_prev_row_offset"),
        F.coalesce(F.last(txn_event, ignorenulls=True).over(_before(window)), F.lit(False)).alias(
            "_log_txn_open"
        ),
    )
    expired = (
        (F.col("_kind") == KIND_AUDITED)
        & F.col("_pkey").isNotNull()
        & ((F.col("_ts") - F.col("_prev_ts")) >= config.cluster.effective_expiration_ms)
        & ~F.col("_log_txn_open")
    )
    df = df.withColumn("_expired", F.coalesce(expired, F.lit(False)))
    df = df.withColumn("_session", F.sum(F.col("_expired").cast("int")).over(_upto(window)))
    epoch_state = F.max(
        F.struct(F.col("_session").alias("session"), F.col("producer_epoch").alias("epoch"))
    ).over(_before(window))
    df = df.withColumn("_cur_epoch", _in_session(epoch_state, "epoch", -1))
    return df.withColumn(
        "_fenced",
        (F.col("_kind") == KIND_AUDITED)
        & F.col("_pkey").isNotNull()
        & (F.col("producer_epoch") < F.col("_cur_epoch")),
    )


def with_duplicates(df: DataFrame) -> DataFrame:
    """DUPLICATE_BATCH candidates: an earlier data batch of the session, same epoch and range.

    Only non-fenced rows can be duplicates, and every earlier row of a non-fenced row's group is
    itself non-fenced (epochs only rise within a session), so the first row of the group is the
    original the broker applied.
    """
    first_offset = F.first("base_offset").over(_before(duplicate_window()))
    return df.withColumn(
        "_dup_of_offset",
        F.when(
            (F.col("_kind") == KIND_AUDITED) & F.col("_seq_checked") & ~F.col("_fenced"),
            first_offset,
        ),
    ).withColumn("_is_dup", F.col("_dup_of_offset").isNotNull())


def with_applied_state(df: DataFrame) -> DataFrame:
    """Add the state read from the applied rows before each batch.

    Last sequence, the 5-batch cache, the open transaction and the coordinator epoch.

    Applied = neither DUPLICATE_BATCH nor FENCED_PRODUCER_EPOCH (they leave the state as it was).
    """
    window = producer_window()
    applied = ~F.col("_is_dup") & ~F.col("_fenced")
    applied_seq_data = applied & F.col("_seq_checked")
    is_seed_state = F.col("_kind") == KIND_SEED_STATE
    last_data = F.last(
        F.when(
            applied_seq_data,
            F.struct(
                F.col("_session").alias("session"),
                F.col("producer_epoch").alias("epoch"),
                F.col("last_sequence").alias("last_sequence"),
                F.col("base_offset").alias("offset"),
                F.col("_cause_offset").alias("cause_offset"),
            ),
        ),
        ignorenulls=True,
    ).over(_before(window))
    same_epoch_data = F.when(
        (last_data["session"] == F.col("_session")) & (last_data["epoch"] == F.col("_cur_epoch")),
        last_data,
    )
    txn_event = (
        F.when(applied & F.col("_is_marker"), F.lit(False))
        .when(applied & F.col("_is_txn_data"), F.lit(True))
        .when(is_seed_state & F.col("_seed_txn_first_offset").isNotNull(), F.lit(True))
    )
    txn_state = F.last(
        F.when(
            txn_event.isNotNull(),
            F.struct(F.col("_session").alias("session"), txn_event.alias("open")),
        ),
        ignorenulls=True,
    ).over(_before(window))
    coordinator_state = F.last(
        F.when(
            applied
            & (F.col("_is_marker") | is_seed_state)
            & F.col("coordinator_epoch").isNotNull(),
            F.struct(F.col("_session").alias("session"), F.col("coordinator_epoch").alias("epoch")),
        ),
        ignorenulls=True,
    ).over(_before(window))
    df = df.select(
        "*",
        F.coalesce(same_epoch_data["last_sequence"], F.lit(-1)).alias("_last_seq"),
        same_epoch_data["offset"].alias("_last_seq_offset"),
        same_epoch_data["cause_offset"].alias("_last_seq_cause_offset"),
        # The 5th most recent applied data batch: the leader's cache holds only the 5 newest (§1.3).
        F.expr(
            f"lag(CASE WHEN {_sql_applied_seq_data()} THEN base_offset END, {CACHE_SIZE}) "
            "IGNORE NULLS"
        )
        .over(window)
        .alias("_cache_oldest_evicted"),
        F.coalesce(_in_session(txn_state, "open", False), F.lit(False)).alias("_txn_open"),
        _in_session(coordinator_state, "epoch", -1).alias("_state_coordinator_epoch"),
    )
    txn_start = F.when(
        applied & F.col("_is_txn_data") & ~F.col("_txn_open"), F.col("base_offset")
    ).when(is_seed_state, F.col("_seed_txn_first_offset"))
    start_state = F.last(
        F.when(
            txn_start.isNotNull() | (applied & F.col("_is_marker")),
            F.struct(F.col("_session").alias("session"), txn_start.alias("first_offset")),
        ),
        ignorenulls=True,
    ).over(_before(window))
    return df.withColumn(
        "_txn_first_offset",
        F.when(F.col("_txn_open"), _in_session(start_state, "first_offset", None)),
    )


def _sql_applied_seq_data() -> str:
    return "NOT _is_dup AND NOT _fenced AND _seq_checked"


# ------------------------------------------------------------------------------------------------
# Rules. Each returns a finding struct or null; `producer_state_finding` applies the precedence.
# ------------------------------------------------------------------------------------------------
def _audited_data() -> Column:
    return (F.col("_kind") == KIND_AUDITED) & F.col("_is_data")


def _audited_marker() -> Column:
    return (F.col("_kind") == KIND_AUDITED) & F.col("_is_marker")


def _expected_sequence() -> Column:
    last = F.col("_last_seq")
    return F.when((last == -1) | (last == INT32_MAX), F.lit(0)).otherwise(last + 1)


def _same_epoch_out_of_sequence() -> Column:
    return (
        _audited_data()
        & F.col("_seq_checked")
        & ~F.col("_is_dup")
        & (F.col("producer_epoch") == F.col("_cur_epoch"))
        & (F.col("_cur_epoch") >= 0)
        & (F.col("base_sequence") != _expected_sequence())
    )


def _forward_distance() -> Column:
    """How far past the expected sequence the batch starts, modulo 2^31 (wraparound-aware)."""
    return F.pmod(
        F.col("base_sequence").cast("long") - _expected_sequence().cast("long"),
        F.lit(SEQUENCE_SPACE),
    )


def _gap_or_reset_cause() -> Column:
    """LOG_START when the batch before the missing ones lies below the log start (§7 rule 2a)."""
    below_start = F.col("_last_seq_cause_offset") < F.col("_p_log_start")
    return F.when(below_start, F.lit("LOG_START")).otherwise(F.lit(UNEXPLAINED))


def fenced_producer_epoch(config: AuditConfig) -> Column:
    """FENCED_PRODUCER_EPOCH: a data batch or marker below the producer's current epoch (§1.4)."""
    return when_true(
        (_audited_data() | _audited_marker()) & F.col("_fenced"),
        finding(
            "FENCED_PRODUCER_EPOCH",
            config,
            detail=sentence(
                "Producer %s wrote at epoch %s after epoch %s: a zombie write the leader "
                "would have rejected with INVALID_PRODUCER_EPOCH.",
                F.col("producer_id"),
                F.col("producer_epoch"),
                F.col("_cur_epoch"),
            ),
            spec_ref="§1.4",
            kafka_error="INVALID_PRODUCER_EPOCH",
            evidence={"current_epoch": F.col("_cur_epoch")},
        ),
    )


def duplicate_batch(config: AuditConfig) -> Column:
    """DUPLICATE_BATCH: the same records twice in the log (§1.3, §7 rule 4).

    Within the leader's 5-batch cache it would have been deduplicated (no error); beyond it the
    leader would have answered OUT_OF_ORDER_SEQUENCE_NUMBER.
    """
    in_cache = F.col("_cache_oldest_evicted").isNull() | (
        F.col("_dup_of_offset") >= F.col("_cache_oldest_evicted")
    )
    return when_true(
        _audited_data() & F.col("_is_dup"),
        finding(
            "DUPLICATE_BATCH",
            config,
            detail=sentence(
                "Producer %s epoch %s wrote sequences %s-%s again at offset %s; they were first "
                "written at offset %s, so consumers see these records twice.",
                F.col("producer_id"),
                F.col("producer_epoch"),
                F.col("base_sequence"),
                F.col("last_sequence"),
                F.col("base_offset"),
                F.col("_dup_of_offset"),
            ),
            spec_ref="§1.3",
            kafka_error=F.when(~in_cache, F.lit("OUT_OF_ORDER_SEQUENCE_NUMBER")),
            previous_offset=F.col("_dup_of_offset"),
        ),
    )


def sequence_reset(config: AuditConfig) -> Column:
    """SEQUENCE_RESET: same epoch, sequence back to 0 after a last sequence other than MAX."""
    return when_true(
        _same_epoch_out_of_sequence() & (F.col("base_sequence") == 0),
        finding(
            "SEQUENCE_RESET",
            config,
            detail=sentence(
                "Producer %s epoch %s restarted at sequence 0 after sequence %s without an epoch "
                "bump.",
                F.col("producer_id"),
                F.col("producer_epoch"),
                F.col("_last_seq"),
            ),
            spec_ref="§1.5, §7",
            cause=_gap_or_reset_cause(),
            kafka_error="OUT_OF_ORDER_SEQUENCE_NUMBER",
            expected_sequence=_expected_sequence(),
            previous_offset=F.col("_last_seq_offset"),
        ),
    )


def sequence_overlap(config: AuditConfig) -> Column:
    """SEQUENCE_OVERLAP: same epoch, starts at or below the last sequence, not an exact repeat."""
    return when_true(
        _same_epoch_out_of_sequence()
        & (F.col("_last_seq") >= 0)
        & (_forward_distance() >= SEQUENCE_SPACE // 2),
        finding(
            "SEQUENCE_OVERLAP",
            config,
            detail=sentence(
                "Producer %s epoch %s wrote sequences %s-%s, overlapping its last sequence %s "
                "without repeating a batch exactly.",
                F.col("producer_id"),
                F.col("producer_epoch"),
                F.col("base_sequence"),
                F.col("last_sequence"),
                F.col("_last_seq"),
            ),
            spec_ref="§1.5",
            kafka_error="OUT_OF_ORDER_SEQUENCE_NUMBER",
            expected_sequence=_expected_sequence(),
            previous_offset=F.col("_last_seq_offset"),
        ),
    )


def sequence_gap(config: AuditConfig) -> Column:
    """SEQUENCE_GAP: same epoch, starts beyond the expected sequence: batches are missing."""
    cause = F.when(F.col("_is_compacted"), F.lit("COMPACTION")).otherwise(_gap_or_reset_cause())
    return when_true(
        _same_epoch_out_of_sequence(),
        finding(
            "SEQUENCE_GAP",
            config,
            detail=sentence(
                "Producer %s epoch %s jumped from sequence %s to %s: %s sequence(s) are missing "
                "from the log.",
                F.col("producer_id"),
                F.col("producer_epoch"),
                F.col("_last_seq"),
                F.col("base_sequence"),
                _forward_distance(),
            ),
            spec_ref="§1.5, §7",
            cause=cause,
            kafka_error="OUT_OF_ORDER_SEQUENCE_NUMBER",
            expected_sequence=_expected_sequence(),
            previous_offset=F.col("_last_seq_offset"),
            evidence={"missing_sequences": _forward_distance()},
        ),
    )


def new_epoch_nonzero_sequence(config: AuditConfig) -> Column:
    """NEW_EPOCH_NONZERO_SEQUENCE: the first batch of a higher epoch does not start at 0 (§1.5)."""
    return when_true(
        _audited_data()
        & F.col("_seq_checked")
        & (F.col("_cur_epoch") >= 0)
        & (F.col("producer_epoch") > F.col("_cur_epoch"))
        & (F.col("base_sequence") != 0),
        finding(
            "NEW_EPOCH_NONZERO_SEQUENCE",
            config,
            detail=sentence(
                "Producer %s moved from epoch %s to %s but its first batch starts at sequence %s, "
                "not 0.",
                F.col("producer_id"),
                F.col("_cur_epoch"),
                F.col("producer_epoch"),
                F.col("base_sequence"),
            ),
            spec_ref="§1.5",
            kafka_error="OUT_OF_ORDER_SEQUENCE_NUMBER",
            expected_sequence=0,
        ),
    )


def _unknown_producer_error(config: AuditConfig) -> str | None:
    version = config.cluster.version
    if version < (1, 0):
        return "OUT_OF_ORDER_SEQUENCE_NUMBER"
    if version < (2, 5):
        return "UNKNOWN_PRODUCER_ID"
    return None  # KIP-360: accepted since 2.5 (§1.5 history table)


def unknown_producer(config: AuditConfig) -> Column:
    """UNKNOWN_PRODUCER: a producer without state whose first batch does not start at 0."""
    cause = (
        F.when(F.col("_expired"), F.lit("PRODUCER_EXPIRY"))
        .when(F.col("_p_log_start") > 0, F.lit("LOG_START"))
        .when(F.col("_is_compacted"), F.lit("COMPACTION"))
        .otherwise(F.lit(UNEXPLAINED))
    )
    return when_true(
        _audited_data()
        & F.col("_seq_checked")
        & (F.col("_cur_epoch") == -1)
        & (F.col("base_sequence") != 0),
        finding(
            "UNKNOWN_PRODUCER",
            config,
            detail=sentence(
                "Producer %s has no state here (first seen, or expired) and starts at sequence %s "
                "instead of 0; the log starts at offset %s.",
                F.col("producer_id"),
                F.col("base_sequence"),
                F.col("_p_log_start"),
            ),
            spec_ref="§1.5, §7",
            cause=cause,
            kafka_error=_unknown_producer_error(config),
            expected_sequence=0,
            previous_offset=F.col("_prev_row_offset"),
        ),
    )


def invalid_txn_state(config: AuditConfig) -> Column:
    """INVALID_TXN_STATE: a non-transactional data batch while a transaction is open (§1.6)."""
    return when_true(
        _audited_data() & ~F.col("is_transactional") & F.col("_txn_open"),
        finding(
            "INVALID_TXN_STATE",
            config,
            detail=sentence(
                "Producer %s wrote a non-transactional batch while its transaction opened at "
                "offset %s was still open.",
                F.col("producer_id"),
                F.col("_txn_first_offset"),
            ),
            spec_ref="§1.6",
            kafka_error="INVALID_TXN_STATE",
            previous_offset=F.col("_txn_first_offset"),
        ),
    )


def coordinator_fenced(config: AuditConfig) -> Column:
    """COORDINATOR_FENCED: a marker from an older transaction coordinator epoch (§1.7)."""
    return when_true(
        _audited_marker() & (F.col("coordinator_epoch") < F.col("_state_coordinator_epoch")),
        finding(
            "COORDINATOR_FENCED",
            config,
            detail=sentence(
                "%s marker of producer %s carries coordinator epoch %s, below the %s of an "
                "earlier marker.",
                F.coalesce(F.col("control_type"), F.lit("Transaction")),
                F.col("producer_id"),
                F.col("coordinator_epoch"),
                F.col("_state_coordinator_epoch"),
            ),
            spec_ref="§1.7",
            kafka_error="TRANSACTION_COORDINATOR_FENCED",
            evidence={"coordinator_epoch_seen": F.col("_state_coordinator_epoch")},
        ),
    )


def producer_state_finding(config: AuditConfig) -> Column:
    """At most one producer-state finding per batch, in the engine issue's precedence order."""
    return F.coalesce(
        fenced_producer_epoch(config),
        duplicate_batch(config),
        sequence_reset(config),
        sequence_overlap(config),
        sequence_gap(config),
        new_epoch_nonzero_sequence(config),
        unknown_producer(config),
        invalid_txn_state(config),
        coordinator_fenced(config),
    )
