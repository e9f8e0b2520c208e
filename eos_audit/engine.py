"""The audit as one DataFrame transformation: canonical batches in, output records out.

One shuffle: every window is partitioned by (topic, partition) or a superset of it, so Spark
exchanges the batch data once (hash of topic, partition) and then only sorts inside partitions.
Every output (findings, quarantine rows, partition statistics) comes out of the same pass as one
DataFrame of tagged records, so the pipeline runs once however many tables it feeds.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eos_audit.config import AuditConfig
from eos_audit.rules.common import (
    FINDING_STRUCT,
    KIND_AUDITED,
    KIND_SEED_BATCH,
    KIND_SEED_STATE,
)
from eos_audit.rules.partition import (
    corrupt_batch,
    leader_epoch_regression,
    offset_overlap,
    with_partition_context,
)
from eos_audit.rules.producer_state import producer_state_finding, with_producer_state
from eos_audit.schemas import FINDINGS, PARTITION_STATS, QUARANTINE, RECORD_BATCH
from eos_audit.sources.canonical import QUARANTINE_REASON, RAW

OUTPUT_KINDS = ("findings", "quarantine", "partition_stats")


def _nullable(schema: T.StructType) -> T.StructType:
    """The schema with every field nullable.

    Spark cannot cast into non-nullable fields; the sinks pin the contract's nullability.
    """
    return T.StructType([T.StructField(f.name, f.dataType, True) for f in schema.fields])


FINDINGS_N = _nullable(FINDINGS)
QUARANTINE_N = _nullable(QUARANTINE)
PARTITION_STATS_N = _nullable(PARTITION_STATS)
OUTPUT_RECORD = T.StructType(
    [
        T.StructField("kind", T.StringType(), False),
        T.StructField("finding", FINDINGS_N, True),
        T.StructField("quarantine", QUARANTINE_N, True),
        T.StructField("partition_stats", PARTITION_STATS_N, True),
    ]
)
_SEED_COLUMNS = ["_seed_txn_first_offset", "_cause_offset"]


def _audited_rows(batches_df: DataFrame) -> DataFrame:
    return batches_df.select(
        *RECORD_BATCH.fieldNames(),
        QUARANTINE_REASON,
        RAW,
        F.col(QUARANTINE_REASON).isNull().alias("_is_valid"),
        F.lit(KIND_AUDITED).alias("_kind"),
        F.lit(None).cast("long").alias("_seed_txn_first_offset"),
        # Coverage end: where the log known to the state ends after this batch; missing batches
        # after it may have been deleted only if it is below the log start (LOG_START cause).
        (F.col("last_offset") + 1).alias("_cause_offset"),
    )


def seed_rows(seeds_df: DataFrame) -> DataFrame:
    """Turn seeded producer state into replay rows that stand before the audited batches.

    Each cached batch becomes a data row (kind 0, an applied batch of the seeded epoch) and the
    state itself one row (kind 1) carrying epoch, coordinator epoch, open transaction and last
    timestamp; `with_producer_state` reads them like any earlier row of the producer.
    """

    def common(kind: int, **columns: Column) -> list[Column]:
        base = {
            "topic": F.col("topic"),
            "partition": F.col("partition"),
            "base_offset": F.lit(None).cast("long"),
            "last_offset": F.lit(None).cast("long"),
            "producer_id": F.col("producer_id"),
            "producer_epoch": F.col("producer_epoch"),
            "base_sequence": F.lit(-1),
            "last_sequence": F.lit(-1),
            "record_count": F.lit(None).cast("int"),
            "is_transactional": F.lit(False),
            "is_control": F.lit(False),
            "control_type": F.lit(None).cast("string"),
            "coordinator_epoch": F.lit(None).cast("int"),
            "partition_leader_epoch": F.lit(None).cast("int"),
            "magic": F.lit(2),
            "max_timestamp": F.col("last_timestamp"),
            "crc_valid": F.lit(None).cast("boolean"),
            "source": F.concat(F.lit("seed:"), F.coalesce(F.col("source"), F.lit("state"))),
        }
        base.update(columns)
        return [
            *[base[f.name].cast(f.dataType).alias(f.name) for f in RECORD_BATCH.fields],
            F.lit(None).cast("string").alias(QUARANTINE_REASON),
            F.lit(None).cast("string").alias(RAW),
            F.lit(True).alias("_is_valid"),
            F.lit(kind).alias("_kind"),
        ]

    batches = seeds_df.select("*", F.explode_outer("batches").alias("_b")).where(
        F.col("_b").isNotNull()
    )
    batch_rows = batches.select(
        *common(
            KIND_SEED_BATCH,
            base_offset=F.col("_b.base_offset"),
            last_offset=F.col("_b.last_offset"),
            base_sequence=F.col("_b.base_sequence"),
            last_sequence=F.col("_b.last_sequence"),
        ),
        F.lit(None).cast("long").alias("_seed_txn_first_offset"),
        # A seed's coverage ends at state_offset (null: right before the log, so never below
        # the log start).
        F.col("state_offset").alias("_cause_offset"),
    )
    state_rows = seeds_df.select(
        *common(KIND_SEED_STATE, coordinator_epoch=F.col("coordinator_epoch")),
        F.col("txn_first_offset").alias("_seed_txn_first_offset"),
        F.lit(None).cast("long").alias("_cause_offset"),
    )
    return batch_rows.unionByName(state_rows)


def with_log_start(df: DataFrame, log_starts_df: DataFrame | None) -> DataFrame:
    """Attach the log start offset from checkpoints, when the input provides them.

    The checkpoint table is tiny (one row per partition), so it is broadcast and the batch data is
    not shuffled for the join.
    """
    if log_starts_df is None:
        return df.withColumn("_log_start_checkpoint", F.lit(None).cast("long"))
    # One row per partition: replicas' checkpoints may each list it; the most advanced log start
    # is the one the leader enforced last.
    starts = log_starts_df.groupBy("topic", "partition").agg(
        F.max("log_start_offset").alias("_log_start_checkpoint")
    )
    return df.join(F.broadcast(starts), ["topic", "partition"], "left")


def _finding_records(config: AuditConfig, run_id: str) -> Column:
    found = F.filter(
        F.array(
            offset_overlap(config),
            leader_epoch_regression(config),
            corrupt_batch(config),
            producer_state_finding(config),
        ).cast(T.ArrayType(FINDING_STRUCT, True)),
        lambda f: f.isNotNull(),
    )

    def record(f: Column) -> Column:
        finding_id = F.sha2(
            F.concat_ws(
                "|",
                f["finding_type"],
                F.col("topic"),
                F.col("partition").cast("string"),
                F.col("base_offset").cast("string"),
                F.col("_p_occurrence").cast("string"),
            ),
            256,
        ).substr(1, 32)
        values = {
            "finding_id": finding_id,
            "run_id": F.lit(run_id),
            "finding_type": f["finding_type"],
            "severity": f["severity"],
            "cause": f["cause"],
            "kafka_error": f["kafka_error"],
            "expected_sequence": f["expected_sequence"],
            "previous_offset": f["previous_offset"],
            "detail": f["detail"],
            "spec_ref": f["spec_ref"],
            "evidence": f["evidence"],
            "batch_timestamp": F.col("max_timestamp"),
        }
        return F.struct(
            F.lit("findings").alias("kind"),
            F.struct(
                *[
                    values.get(n, F.col(n)).cast(FINDINGS[n].dataType).alias(n)
                    for n in FINDINGS.fieldNames()
                ]
            )
            .cast(FINDINGS_N)
            .alias("finding"),
            F.lit(None).cast(QUARANTINE_N).alias("quarantine"),
            F.lit(None).cast(PARTITION_STATS_N).alias("partition_stats"),
        )

    return F.transform(found, record)


def _quarantine_records(run_id: str) -> Column:
    rejected = (F.col("_kind") == KIND_AUDITED) & ~F.col("_is_valid")
    quarantine = F.struct(
        F.sha2(F.concat_ws("|", F.col(RAW), F.col("source")), 256)
        .substr(1, 32)
        .alias("quarantine_id"),
        F.lit(run_id).alias("run_id"),
        F.col(QUARANTINE_REASON).alias("reason"),
        F.col("source"),
        F.col("topic"),
        F.col("partition").cast("long").alias("partition"),
        F.col("base_offset"),
        F.col(RAW).alias("raw"),
    ).cast(QUARANTINE_N)
    return F.when(
        rejected,
        F.array(
            F.struct(
                F.lit("quarantine").alias("kind"),
                F.lit(None).cast(FINDINGS_N).alias("finding"),
                quarantine.alias("quarantine"),
                F.lit(None).cast(PARTITION_STATS_N).alias("partition_stats"),
            )
        ),
    ).otherwise(F.array().cast(T.ArrayType(OUTPUT_RECORD)))


def _partition_stats_records() -> Column:
    stats = F.struct(
        F.col("topic"),
        F.col("partition"),
        F.col("_p_first_offset").alias("first_offset"),
        F.col("_p_last_offset").alias("last_offset"),
        F.col("_p_batches").alias("batches"),
        F.col("_p_batches_with_pid").alias("batches_with_producer_id"),
        F.col("_p_records").alias("records"),
        F.col("_p_max_timestamp").alias("max_timestamp"),
    ).cast(PARTITION_STATS_N)
    last_of_partition = (
        F.col("_p_is_last")
        & (F.col("_p_batches") > 0)
        & F.col("topic").isNotNull()
        & F.col("partition").isNotNull()
    )
    return F.when(
        last_of_partition,
        F.array(
            F.struct(
                F.lit("partition_stats").alias("kind"),
                F.lit(None).cast(FINDINGS_N).alias("finding"),
                F.lit(None).cast(QUARANTINE_N).alias("quarantine"),
                stats.alias("partition_stats"),
            )
        ),
    ).otherwise(F.array().cast(T.ArrayType(OUTPUT_RECORD)))


def with_rules(
    batches_df: DataFrame,
    config: AuditConfig,
    *,
    seeds_df: DataFrame | None = None,
    log_starts_df: DataFrame | None = None,
) -> DataFrame:
    """Every row (audited, quarantined and seeded) with all window facts the rules read."""
    rows = _audited_rows(batches_df)
    if seeds_df is not None:
        rows = rows.unionByName(seed_rows(seeds_df))
    return (
        rows.transform(with_log_start, log_starts_df)
        .transform(with_partition_context)
        .transform(with_producer_state, config)
    )


def audit(
    batches_df: DataFrame,
    config: AuditConfig,
    run_id: str,
    *,
    seeds_df: DataFrame | None = None,
    log_starts_df: DataFrame | None = None,
) -> DataFrame:
    """Run every rule over the batches and return the tagged output records.

    Args:
        batches_df: `to_canonical` output (canonical columns, `quarantine_reason`, `raw`).
        config: the run configuration.
        run_id: the run id stamped on every row.
        seeds_df: optional producer state (schemas.PRODUCER_STATE) that precedes the audited log.
        log_starts_df: optional (topic, partition, log_start_offset) from log-start checkpoints.

    Returns:
        One row per output record: `kind` (findings, quarantine, partition_stats) and one non-null
        struct of that kind's table schema.

    """
    ruled = with_rules(batches_df, config, seeds_df=seeds_df, log_starts_df=log_starts_df)
    records = F.concat(
        _finding_records(config, run_id), _quarantine_records(run_id), _partition_stats_records()
    )
    return ruled.select(F.explode(records).alias("r")).select("r.*")


def findings_of(records_df: DataFrame) -> DataFrame:
    """The findings table rows of an `audit` result."""
    return records_df.where(F.col("kind") == "findings").select("finding.*")


def quarantine_of(records_df: DataFrame) -> DataFrame:
    """The quarantine table rows of an `audit` result."""
    return records_df.where(F.col("kind") == "quarantine").select("quarantine.*")


def partition_stats_of(records_df: DataFrame) -> DataFrame:
    """The per-partition statistics of an `audit` result."""
    return records_df.where(F.col("kind") == "partition_stats").select("partition_stats.*")
