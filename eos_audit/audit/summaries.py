"""The summary tables people read first, built from the run's staged records.

Both are aggregates of the small records the one pass emits (partition statistics, one row per
producer epoch, findings, transactions): the batch data is not read again.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from eos_audit.audit import output_records
from eos_audit.findings import SEVERITY_ORDER
from eos_audit.schemas import PRODUCER_SESSIONS
from eos_audit.sql_text import cast

SESSION_KEYS = ["topic", "partition", "producer_id", "producer_epoch"]
# The kernel's partition statistics that add up over partials.
_SUMMED_STATS = ("batches", "replica_batches", "batches_skipped", "records", "markers",
                 "producers", "batches_with_producer_id")  # fmt: skip


def partition_summary(staged: DataFrame, run_id: str) -> DataFrame:
    """One row per audited partition, from the stage's small records (no batch data read again).

    The kernel's statistics of a partition and its findings' severities are grouped by partition
    in one aggregate (one shuffle; a join of two aggregates took two more Spark jobs); only a
    partition the kernel has statistics for gets a row.

    Args:
        staged: the run's staged output records.
        run_id: the run id.

    Returns:
        Rows in the `partition_summary` contract.
    """
    stats = output_records.partition_summary_of(staged).withColumn("_stats", F.lit(1))
    severities = output_records.findings_of(staged).select("topic", "partition", "severity")
    rows = stats.unionByName(severities, allowMissingColumns=True)
    # One statistics row per partition (the kernel's end of the partition); merged as partials
    # all the same, so that a partition's counts are never taken twice by a join.
    merged = (
        rows.groupBy("topic", "partition")
        .agg(
            F.count("_stats").alias("_stats"),
            F.min("first_offset").alias("first_offset"),
            F.max("last_offset").alias("last_offset"),
            *[F.sum(c).alias(c) for c in _SUMMED_STATS],
            *[
                F.count(F.when(F.col("severity") == s, 1)).alias(f"findings_{s.lower()}")
                for s in SEVERITY_ORDER
            ],
        )
        .where(F.col("_stats") > 0)
    )
    counts = ["producers", *[f"findings_{s.lower()}" for s in SEVERITY_ORDER]]
    return merged.select(
        F.lit(run_id).alias("run_id"),
        "topic",
        "partition",
        "first_offset",
        "last_offset",
        "batches",
        "replica_batches",
        "batches_skipped",
        "records",
        "markers",
        *[F.coalesce(F.col(c), F.lit(0)).alias(c) for c in counts],
        "batches_with_producer_id",
        F.when(F.col("batches") > 0, F.col("batches_with_producer_id") / F.col("batches")).alias(
            "coverage"
        ),
    )


def producer_sessions(staged: DataFrame, run_id: str) -> DataFrame:
    """One row per (topic, partition, producer id, epoch): what it wrote and what was found.

    Findings count for the producer epoch they name (the batch's, or the acknowledgement's); a
    producer epoch known only from findings (an acknowledged write entirely missing from the log)
    or from transactions gets a row with zero batches, so no finding is left without its
    producer.

    The partial summaries, the findings counted by type and the transactions are grouped by
    producer epoch in one aggregate: two shuffles in all (the counts by type, then the epochs),
    where three aggregates and two full joins took five.

    Args:
        staged: the run's staged output records.
        run_id: the run id.

    Returns:
        Rows in the `producer_sessions` contract.
    """
    serious = F.col("severity").isin("CRITICAL", "ERROR")
    by_type = (
        output_records.findings_of(staged)
        .where((F.col("producer_id") >= 0) & F.col("producer_epoch").isNotNull())
        .groupBy(*SESSION_KEYS, "finding_type")
        .agg(F.count(F.lit(1)).alias("n"), F.max(serious).alias("serious"))
    )
    transactions = (
        output_records.transactions_of(staged)
        .where(F.col("start_epoch").isNotNull())
        .select(
            "topic",
            "partition",
            "producer_id",
            F.col("start_epoch").alias("producer_epoch"),
            F.lit(1).alias("_transaction"),
        )
    )
    rows = (
        output_records.rows_of(staged, "producer_sessions")
        .unionByName(by_type, allowMissingColumns=True)
        .unionByName(transactions, allowMissingColumns=True)
    )
    type_count = F.when(F.col("finding_type").isNotNull(), F.struct("finding_type", "n"))
    merged = rows.groupBy(*SESSION_KEYS).agg(
        *output_records.merged_session_columns(),
        # At most one entry per finding type; sorted, so the map reads the same in every run.
        F.map_from_entries(F.array_sort(F.collect_list(type_count))).alias("findings"),
        F.max("serious").alias("_violated"),
        F.count("_transaction").alias("transactions"),
    )
    has_findings = F.size("findings") > 0
    values = {
        "run_id": F.lit(run_id),
        "batches": F.coalesce(F.col("batches"), F.lit(0)),
        "status": F.when(F.coalesce(F.col("_violated"), F.lit(False)), F.lit("violated"))
        .when(has_findings, F.lit("benign"))
        .otherwise(F.lit("clean")),
    }
    return merged.select(
        *[
            cast(values.get(f.name, F.col(f.name)), f.dataType).alias(f.name)
            for f in PRODUCER_SESSIONS.fields
        ]
    )
