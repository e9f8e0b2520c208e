"""Partition-level rules: one window per (topic, partition) in log order.

They look at every audited batch of a partition, with or without a producer id.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F

from eos_audit.config import AuditConfig
from eos_audit.rules.common import KIND_AUDITED, LOG_ORDER, finding, sentence, when_true

PARTITION_KEYS = ["topic", "partition"]


def partition_window() -> WindowSpec:
    """All rows of a topic-partition in log order (seeded rows are guarded out of the rules)."""
    return Window.partitionBy(*PARTITION_KEYS).orderBy(*LOG_ORDER)


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
