"""Partition-level rules: one window per (topic, partition) in log order.

They look at every audited batch of a partition, with or without a producer id.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F

from eos_audit.config import AuditConfig
from eos_audit.rules.common import (
    KIND_AUDITED,
    KIND_EPOCH_ENTRY,
    KIND_REPLICA,
    LOG_ORDER,
    finding,
    sentence,
    when_true,
)

PARTITION_KEYS = ["topic", "partition"]
# At one offset: a leader-epoch checkpoint entry (rank -1) first, then the audited (primary)
# replica's batch (rank 0), then other replicas' copies, so each can read the one before it.
PARTITION_ORDER = ["base_offset", "_replica_rank", *LOG_ORDER[1:]]
# Header fields two replicas of one batch must agree on.
_REPLICATED_FIELDS = [
    "last_offset",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "is_control",
    "is_transactional",
    "record_count",
]


def partition_window() -> WindowSpec:
    """All rows of a topic-partition in log order (non-audited rows are guarded out of rules)."""
    return Window.partitionBy(*PARTITION_KEYS).orderBy(*PARTITION_ORDER)


def _audited() -> Column:
    return F.col("_is_valid") & (F.col("_kind") == KIND_AUDITED)


def with_partition_context(df: DataFrame) -> DataFrame:
    """Add the running partition facts the rules and the summaries read.

    Everything here is a running (unbounded preceding) or offset window function over one window
    spec, so Spark computes it in one streaming pass without buffering a whole partition.

    Adds `_p_prev_max_last_offset`, `_p_prev_max_leader_epoch`, `_p_first_offset` (the exported
    log's first offset), `_p_log_start`, `_p_is_last` and running totals `_p_*` for the summary.
    """
    window = partition_window()
    before = window.rowsBetween(Window.unboundedPreceding, -1)
    upto = window.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    whole = window.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    audited = _audited()
    has_leader_epoch = audited & (F.col("magic") >= 2) & (F.col("partition_leader_epoch") >= 0)
    record_estimate = F.coalesce(
        F.col("record_count").cast("long"), F.col("last_offset") - F.col("base_offset") + 1
    )
    df = df.select(
        "*",
        F.max(F.when(audited, F.col("last_offset"))).over(before).alias("_p_prev_max_last_offset"),
        F.max(F.when(has_leader_epoch, F.col("partition_leader_epoch")))
        .over(before)
        .alias("_p_prev_max_leader_epoch"),
        F.first(F.when(audited, F.col("base_offset")), ignorenulls=True)
        .over(upto)
        .alias("_p_first_offset"),
        F.lead(F.lit(1)).over(window).isNull().alias("_p_is_last"),
        F.count(F.when(audited, 1)).over(upto).alias("_p_batches"),
        F.count(F.when(audited & (F.col("producer_id") >= 0), 1))
        .over(upto)
        .alias("_p_batches_with_pid"),
        F.sum(F.when(audited, record_estimate)).over(upto).alias("_p_records"),
        F.max(F.when(audited, F.col("last_offset"))).over(upto).alias("_p_last_offset"),
        F.max(F.when(audited, F.col("max_timestamp"))).over(upto).alias("_p_max_timestamp"),
        # The partition's latest timestamp, for the age of open transactions.
        F.max(F.when(audited & (F.col("max_timestamp") >= 0), F.col("max_timestamp")))
        .over(whole)
        .alias("_p_max_ts_all"),
        # Where the exported log ends (its last offset + 1): acknowledgements at or beyond it
        # were made after the export and cannot be checked against it.
        (F.max(F.when(audited, F.col("last_offset"))).over(whole) + 1).alias("_p_log_end"),
        # Checkpoint rows (engine.checkpoint_rows): several replicas may list the partition;
        # the most advanced value is the one the leader enforced last.
        F.max("_ckpt_log_start").over(whole).alias("_log_start_checkpoint"),
        F.max("_ckpt_high_watermark").over(whole).alias("_hw"),
        F.count(F.when(F.col("_is_valid") & (F.col("_kind") == KIND_REPLICA), 1))
        .over(upto)
        .alias("_p_replica_batches"),
        # The leader-epoch checkpoint entry in force at this offset (§3.3).
        F.last(
            F.when(
                F.col("_kind") == KIND_EPOCH_ENTRY,
                F.struct(
                    F.col("_ckpt_leader_epoch").alias("epoch"),
                    F.col("base_offset").alias("start_offset"),
                ),
            ),
            ignorenulls=True,
        )
        .over(before)
        .alias("_p_epoch_entry"),
        # The audited replica's most recent batch, for comparing other replicas' copies with it.
        F.last(F.when(audited, F.struct("base_offset", *_REPLICATED_FIELDS)), ignorenulls=True)
        .over(before)
        .alias("_p_primary_prev"),
        F.row_number().over(window).alias("_p_row"),
        F.lag("base_offset").over(window).eqNullSafe(F.col("base_offset")).alias("_p_same_start"),
    )
    # Occurrence of this base offset among rows sharing it (0 for the first): keeps finding ids
    # unique and stable when an export repeats a batch (see engine).
    run_start = F.last(F.when(~F.col("_p_same_start"), F.col("_p_row")), ignorenulls=True)
    df = df.withColumn("_p_occurrence", F.col("_p_row") - run_start.over(upto))
    # The exported log starts at its first batch; a log-start checkpoint (DeleteRecords) may put
    # the broker's log start above it (kafka_rules.md §3.1), never below what was exported.
    return df.withColumn(
        "_p_log_start", F.greatest(F.col("_p_first_offset"), F.col("_log_start_checkpoint"))
    )


def offset_overlap(config: AuditConfig) -> Column:
    """OFFSET_OVERLAP: two batches claim the same offsets (corruption or a bad export).

    The running maximum of earlier last offsets is used, so a batch overlapping any earlier batch
    is found, not only one overlapping the batch just before it.
    """
    prev = F.col("_p_prev_max_last_offset")
    return when_true(
        _audited() & (F.col("base_offset") <= prev),
        finding(
            "OFFSET_OVERLAP",
            config,
            detail=sentence(
                "Batch %s-%s starts at or below offset %s, already covered by an earlier batch of "
                "this partition: two batches claim the same offsets.",
                F.col("base_offset"),
                F.col("last_offset"),
                prev,
            ),
            spec_ref="§2.1",
            previous_offset=prev,
        ),
    )


def leader_epoch_regression(config: AuditConfig) -> Column:
    """LEADER_EPOCH_REGRESSION: a batch stamped with a lower leader epoch than an earlier batch.

    Within a retained log the partition leader epoch never decreases with offset (§3.3); a lower
    one means a replica kept a diverged suffix.
    """
    prev = F.col("_p_prev_max_leader_epoch")
    epoch = F.col("partition_leader_epoch")
    return when_true(
        _audited() & (F.col("magic") >= 2) & (epoch >= 0) & (epoch < prev),
        finding(
            "LEADER_EPOCH_REGRESSION",
            config,
            detail=sentence(
                "Batch at offset %s carries leader epoch %s, below leader epoch %s of an earlier "
                "batch: the log holds a suffix written by an older leader.",
                F.col("base_offset"),
                epoch,
                prev,
            ),
            spec_ref="§3.3",
            evidence={"max_leader_epoch": prev, "leader_epoch": epoch},
        ),
    )


def corrupt_batch(config: AuditConfig) -> Column:
    """CORRUPT_BATCH: the batch failed CRC-32C verification (the leader answers CORRUPT_MESSAGE)."""
    return when_true(
        _audited() & (F.col("crc_valid") == F.lit(False)),
        finding(
            "CORRUPT_BATCH",
            config,
            detail=sentence(
                "Batch %s-%s failed CRC-32C verification: its bytes changed after it was written.",
                F.col("base_offset"),
                F.col("last_offset"),
            ),
            spec_ref="§2.1",
            kafka_error="CORRUPT_MESSAGE",
        ),
    )


def leader_epoch_mismatch(config: AuditConfig) -> Column:
    """LEADER_EPOCH_MISMATCH: a batch's leader epoch contradicts the leader-epoch checkpoint.

    Each checkpoint entry's start offset is the base offset of the first batch stamped with that
    epoch (§3.3), so every batch from there to the next entry carries that epoch.
    """
    entry = F.col("_p_epoch_entry")
    epoch = F.col("partition_leader_epoch")
    return when_true(
        _audited()
        & (F.col("magic") >= 2)
        & (epoch >= 0)
        & entry.isNotNull()
        & (epoch != entry["epoch"]),
        finding(
            "LEADER_EPOCH_MISMATCH",
            config,
            detail=sentence(
                "Batch at offset %s carries leader epoch %s, but the leader-epoch checkpoint says "
                "epoch %s started at offset %s and was still in force.",
                F.col("base_offset"),
                epoch,
                entry["epoch"],
                entry["start_offset"],
            ),
            spec_ref="§3.3",
            previous_offset=entry["start_offset"],
            evidence={"checkpoint_epoch": entry["epoch"], "leader_epoch": epoch},
        ),
    )


def replica_divergence(config: AuditConfig) -> Column:
    """REPLICA_DIVERGENCE: another replica holds a different batch at an offset of the audited one.

    Only offsets below the partition's high watermark count (above it a follower may legitimately
    differ until it truncates, §5): there both copies were committed and must be identical.
    """
    primary = F.col("_p_primary_prev")
    same_start = primary["base_offset"] == F.col("base_offset")
    differs = F.lit(False)
    for name in _REPLICATED_FIELDS:
        differs = differs | ~primary[name].eqNullSafe(F.col(name))
    covered = F.col("_p_prev_max_last_offset") >= F.col("base_offset")
    below_hw = F.col("_hw").isNull() | (F.col("base_offset") < F.col("_hw"))
    return when_true(
        F.col("_is_valid")
        & (F.col("_kind") == KIND_REPLICA)
        & below_hw
        & ((same_start & differs) | (~same_start & covered)),
        finding(
            "REPLICA_DIVERGENCE",
            config,
            detail=sentence(
                "Replica %s holds batch %s-%s (producer %s, sequence %s) where the audited replica "
                "holds batch %s-%s (producer %s, sequence %s), below the high watermark %s.",
                F.col("_replica"),
                F.col("base_offset"),
                F.col("last_offset"),
                F.col("producer_id"),
                F.col("base_sequence"),
                primary["base_offset"],
                primary["last_offset"],
                primary["producer_id"],
                primary["base_sequence"],
                F.col("_hw"),
            ),
            spec_ref="§3.3, §5",
            previous_offset=primary["base_offset"],
            evidence={"replica": F.col("_replica"), "high_watermark": F.col("_hw")},
        ),
    )
