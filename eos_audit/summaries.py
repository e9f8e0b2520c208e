"""The summary tables people read first, built from the run's staged records.

Both are aggregates of the small records the one pass emits (partition statistics, one row per
producer epoch, findings, transactions): the batch data is not read again.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from eos_audit import output_records
from eos_audit.findings import SEVERITY_ORDER
from eos_audit.schemas import PRODUCER_SESSIONS
from eos_audit.sql_text import cast

SESSION_KEYS = ["topic", "partition", "producer_id", "producer_epoch"]


def partition_summary(staged: DataFrame, run_id: str) -> DataFrame:
    """One row per audited partition, from the stage's small records (no batch data read again).

    Args:
        staged: the run's staged output records.
        run_id: the run id.

    Returns:
        Rows in the `partition_summary` contract.
    """
    stats = output_records.partition_summary_of(staged)
    findings = (
        output_records.findings_of(staged)
        .groupBy("topic", "partition")
        .agg(
            *[
                F.count(F.when(F.col("severity") == s, 1)).alias(f"findings_{s.lower()}")
                for s in SEVERITY_ORDER
            ]
        )
    )
    joined = stats.join(findings, ["topic", "partition"], "left")
    counts = ["producers", *[f"findings_{s.lower()}" for s in SEVERITY_ORDER]]
    return joined.select(
        F.lit(run_id).alias("run_id"),
        "topic",
        "partition",
        "first_offset",
        "last_offset",
        "batches",
        "replica_batches",
        "batches_skipped",
        "records",
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
    gets a row with zero batches, so no finding is left without its producer.

    Args:
        staged: the run's staged output records.
        run_id: the run id.

    Returns:
        Rows in the `producer_sessions` contract.
    """
    sessions = output_records.producer_sessions_of(staged)
    serious = F.col("severity").isin("CRITICAL", "ERROR")
    by_type = (
        output_records.findings_of(staged)
        .where((F.col("producer_id") >= 0) & F.col("producer_epoch").isNotNull())
        .groupBy(*SESSION_KEYS, "finding_type")
        .agg(F.count(F.lit(1)).alias("n"), F.max(serious).alias("serious"))
    )
    findings = by_type.groupBy(*SESSION_KEYS).agg(
        # Sorted, so the map reads the same in every run.
        F.map_from_entries(F.array_sort(F.collect_list(F.struct("finding_type", "n")))).alias(
            "findings"
        ),
        F.max("serious").alias("_violated"),
    )
    transactions = (
        output_records.transactions_of(staged)
        .withColumnRenamed("start_epoch", "producer_epoch")
        .where(F.col("producer_epoch").isNotNull())
        .groupBy(*SESSION_KEYS)
        .agg(F.count(F.lit(1)).alias("transactions"))
    )
    joined = sessions.join(findings, SESSION_KEYS, "full").join(transactions, SESSION_KEYS, "full")
    has_findings = F.coalesce(F.size("findings"), F.lit(0)) > 0
    values = {
        "run_id": F.lit(run_id),
        "batches": F.coalesce(F.col("batches"), F.lit(0)),
        "transactions": F.coalesce(F.col("transactions"), F.lit(0)),
        "findings": F.coalesce(F.col("findings"), F.create_map().cast("map<string,bigint>")),
        "status": F.when(F.coalesce(F.col("_violated"), F.lit(False)), F.lit("violated"))
        .when(has_findings, F.lit("benign"))
        .otherwise(F.lit("clean")),
    }
    return joined.select(
        *[
            cast(values.get(f.name, F.col(f.name)), f.dataType).alias(f.name)
            for f in PRODUCER_SESSIONS.fields
        ]
    )
