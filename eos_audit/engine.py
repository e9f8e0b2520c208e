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
from eos_audit.rules.acked_writes import acked_offset_mismatch, acked_write_lost, with_ack_matches
from eos_audit.rules.common import (
    FINDING_STRUCT,
    KIND_ACK,
    KIND_AUDITED,
    KIND_CHECKPOINT,
    KIND_EPOCH_ENTRY,
    KIND_REPLICA,
    KIND_SEED_BATCH,
    KIND_SEED_STATE,
)
from eos_audit.rules.partition import (
    corrupt_batch,
    leader_epoch_mismatch,
    leader_epoch_regression,
    offset_overlap,
    replica_divergence,
    with_partition_context,
)
from eos_audit.rules.producer_state import (
    producer_state_finding,
    with_applied_state,
    with_duplicates,
    with_replay_roles,
    with_sessions,
)
from eos_audit.rules.sessions import SESSION_STRUCT, with_sessions_summary
from eos_audit.rules.transactions import (
    TRANSACTION_STRUCT,
    hanging_transaction,
    transaction_record,
    with_transactions,
)
from eos_audit.schemas import FINDINGS, PARTITION_STATS, QUARANTINE, RECORD_BATCH
from eos_audit.sources.canonical import QUARANTINE_REASON, RAW

OUTPUT_KINDS = (
    "findings",
    "quarantine",
    "partition_stats",
    "transactions",
    "producers",
    "sessions",
)


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
        T.StructField("transaction", TRANSACTION_STRUCT, True),
        # One per producer of a partition (its last row): the partition summary counts them.
        T.StructField(
            "producer",
            T.StructType(
                [
                    T.StructField("topic", T.StringType(), True),
                    T.StructField("partition", T.IntegerType(), True),
                    T.StructField("producer_id", T.LongType(), True),
                ]
            ),
            True,
        ),
        # One per producer epoch of a partition (rules.sessions): the producer_sessions table.
        T.StructField("session", SESSION_STRUCT, True),
    ]
)


def _record(kind: str, **values: Column) -> Column:
    """One output record: `kind` and that kind's struct, every other struct null."""
    fields = [F.lit(kind).alias("kind")]
    for field in OUTPUT_RECORD.fields[1:]:
        value = values.get(field.name)
        fields.append(
            (value if value is not None else F.lit(None)).cast(field.dataType).alias(field.name)
        )
    return F.struct(*fields)


def _audited_rows(batches_df: DataFrame) -> DataFrame:
    # Several replicas of a partition: rank 0 is audited, the others are compared with it.
    rank = (
        F.coalesce(F.col("_replica_rank"), F.lit(0))
        if "_replica_rank" in batches_df.columns
        else F.lit(0)
    )
    replica = F.col("_replica") if "_replica" in batches_df.columns else F.lit(None).cast("string")
    return batches_df.select(
        *RECORD_BATCH.fieldNames(),
        QUARANTINE_REASON,
        RAW,
        F.col(QUARANTINE_REASON).isNull().alias("_is_valid"),
        F.when(rank > 0, F.lit(KIND_REPLICA)).otherwise(F.lit(KIND_AUDITED)).alias("_kind"),
        rank.cast("int").alias("_replica_rank"),
        replica.alias("_replica"),
        F.lit(None).cast("int").alias("_ckpt_leader_epoch"),
        F.lit(None).cast("long").alias("_seed_txn_first_offset"),
        # Coverage end: where the log known to the state ends after this batch; missing batches
        # after it may have been deleted only if it is below the log start (LOG_START cause).
        (F.col("last_offset") + 1).alias("_cause_offset"),
    )


def _typed_nulls() -> dict[str, Column]:
    """A null of the right type for every record-batch column."""
    return {f.name: F.lit(None).cast(f.dataType) for f in RECORD_BATCH.fields}


def seed_rows(seeds_df: DataFrame) -> DataFrame:
    """Turn seeded producer state into replay rows that stand before the audited batches.

    Each cached batch becomes a data row (kind 0, an applied batch of the seeded epoch) and the
    state itself one row (kind 1) carrying epoch, coordinator epoch, open transaction and last
    timestamp; the producer-state windows read them like any earlier row of the producer.
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
            F.lit(0).alias("_replica_rank"),
            F.lit(None).cast("string").alias("_replica"),
            F.lit(None).cast("int").alias("_ckpt_leader_epoch"),
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


def epoch_entry_rows(leader_epochs_df: DataFrame) -> DataFrame:
    """Leader-epoch checkpoint entries as rows of the partition window (§3.3).

    An entry stands at its start offset, before the batch there (rank -1), so the partition window
    reads the epoch in force at every batch with a running "last entry" and no join.
    """
    values = _typed_nulls()
    values.update(
        topic=F.col("topic").cast("string"),
        partition=F.col("partition").cast("int"),
        base_offset=F.col("start_offset").cast("long"),
        last_offset=F.col("start_offset").cast("long"),
        producer_id=F.lit(-1).cast("long"),
        producer_epoch=F.lit(-1),
        base_sequence=F.lit(-1),
        is_transactional=F.lit(False),
        is_control=F.lit(False),
        source=F.lit("leader-epoch-checkpoint"),
    )
    return leader_epochs_df.select(
        *[values[f.name].alias(f.name) for f in RECORD_BATCH.fields],
        F.lit(None).cast("string").alias(QUARANTINE_REASON),
        F.lit(None).cast("string").alias(RAW),
        F.lit(True).alias("_is_valid"),
        F.lit(KIND_EPOCH_ENTRY).alias("_kind"),
        F.lit(-1).alias("_replica_rank"),
        F.lit(None).cast("string").alias("_replica"),
        F.col("leader_epoch").cast("int").alias("_ckpt_leader_epoch"),
        F.lit(None).cast("long").alias("_seed_txn_first_offset"),
        F.lit(None).cast("long").alias("_cause_offset"),
    )


def ack_rows(acks_df: DataFrame) -> DataFrame:
    """Client acknowledgements (schemas/acks.json, valid rows) as rows of the one pass.

    A successful acknowledgement stands at its acknowledged offset, after the batches there, and
    carries the batch identity (producer, epoch, base sequence) that `rules.acked_writes` looks up.
    Failed sends (offset null) stay out: `rules.acks` classifies them from the acknowledgements
    alone.
    """
    from eos_audit.sources.canonical import increment_sequence

    count = F.coalesce(F.col("record_count"), F.lit(1))
    values = _typed_nulls()
    values.update(
        topic=F.col("topic"),
        partition=F.col("partition"),
        base_offset=F.col("offset"),
        last_offset=F.col("offset") + count - 1,
        producer_id=F.col("producer_id"),
        producer_epoch=F.col("producer_epoch"),
        base_sequence=F.col("base_sequence"),
        last_sequence=F.when(
            F.col("base_sequence") >= 0, increment_sequence(F.col("base_sequence"), count - 1)
        ).otherwise(F.lit(-1)),
        record_count=count,
        is_transactional=F.lit(False),
        is_control=F.lit(False),
        magic=F.lit(2),
        max_timestamp=F.unix_millis(F.col("event_time")),
        source=F.col("source"),
    )
    return acks_df.where(F.col("offset").isNotNull()).select(
        *[values[f.name].cast(f.dataType).alias(f.name) for f in RECORD_BATCH.fields],
        F.lit(True).alias("_is_valid"),
        F.lit(KIND_ACK).alias("_kind"),
        # After every replica's copy at the same offset in the partition window.
        F.lit(1_000_000).alias("_replica_rank"),
        F.col("error").alias("_ack_error"),
        # Printed in findings as UTC whatever the session's time zone.
        F.date_format(
            F.to_utc_timestamp(F.col("event_time"), F.current_timezone()),
            "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'",
        ).alias("_ack_event_time"),
    )


def checkpoint_rows(
    log_starts_df: DataFrame | None, high_watermarks_df: DataFrame | None
) -> DataFrame | None:
    """Log-start and high-watermark checkpoint values as rows of the partition window.

    Like the seeds, they enter the one pass as rows, so no join (and no exchange) is needed; the
    partition window takes their maximum over the whole partition.
    """
    frames = []
    for df, column, value in (
        (log_starts_df, "_ckpt_log_start", "log_start_offset"),
        (high_watermarks_df, "_ckpt_high_watermark", "high_watermark"),
    ):
        if df is None:
            continue
        values = _typed_nulls()
        values.update(
            topic=F.col("topic").cast("string"),
            partition=F.col("partition").cast("int"),
            base_offset=F.col(value).cast("long"),
            last_offset=F.col(value).cast("long"),
            producer_id=F.lit(-1).cast("long"),
            producer_epoch=F.lit(-1),
            base_sequence=F.lit(-1),
            is_transactional=F.lit(False),
            is_control=F.lit(False),
            source=F.lit(f"checkpoint:{value}"),
        )
        frames.append(
            df.select(
                *[values[f.name].alias(f.name) for f in RECORD_BATCH.fields],
                F.lit(True).alias("_is_valid"),
                F.lit(KIND_CHECKPOINT).alias("_kind"),
                F.lit(-2).alias("_replica_rank"),
                F.col(value).cast("long").alias(column),
            )
        )
    if not frames:
        return None
    rows = frames[0]
    for other in frames[1:]:
        rows = rows.unionByName(other, allowMissingColumns=True)
    return rows


def _early_rules(config: AuditConfig, *, with_acks: bool) -> list[Column]:
    """The rules that read only the partition window (and the acknowledgement window)."""
    rules = [
        offset_overlap(config),
        leader_epoch_regression(config),
        leader_epoch_mismatch(config),
        corrupt_batch(config),
        replica_divergence(config),
    ]
    if with_acks:
        rules += [acked_write_lost(config), acked_offset_mismatch(config)]
    return rules


def _late_rules(config: AuditConfig, as_of_ms: int | None) -> list[Column]:
    """The findings read off the finished rows: producer state and HANGING_TRANSACTION."""
    return [F.col("_f_producer_state"), hanging_transaction(config, as_of_ms)]


def _finding_records(late_rules: list[Column], run_id: str) -> Column:
    found = F.filter(
        F.concat(
            F.coalesce(F.col("_f_early"), F.array().cast(T.ArrayType(FINDING_STRUCT, True))),
            F.array(*late_rules).cast(T.ArrayType(FINDING_STRUCT, True)),
        ),
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
            "base_offset": F.coalesce(f["at_base_offset"], F.col("base_offset")),
            "last_offset": F.coalesce(f["at_last_offset"], F.col("last_offset")),
        }
        return _record(
            "findings",
            finding=F.struct(
                *[
                    values.get(n, F.col(n)).cast(FINDINGS[n].dataType).alias(n)
                    for n in FINDINGS.fieldNames()
                ]
            ),
        )

    return F.transform(found, record)


def _rejected() -> Column:
    return F.col("_kind").isin(KIND_AUDITED, KIND_REPLICA) & ~F.col("_is_valid")


def _quarantine_struct() -> Column:
    """The quarantine row of a rejected batch, null for every other row."""
    quarantine = F.struct(
        F.sha2(F.concat_ws("|", F.col(RAW), F.col("source")), 256)
        .substr(1, 32)
        .alias("quarantine_id"),
        F.lit(None).cast("string").alias("run_id"),  # stamped by `_quarantine_records`
        F.lit("record_batch").alias("input"),
        F.col(QUARANTINE_REASON).alias("reason"),
        F.col("source"),
        F.col("topic"),
        F.col("partition").cast("long").alias("partition"),
        F.col("base_offset"),
        F.col(RAW).alias("raw"),
    ).cast(QUARANTINE_N)
    return F.when(_rejected(), quarantine)


def _quarantine_records(run_id: str) -> Column:
    quarantine = F.col("_quarantine")
    return F.when(
        quarantine.isNotNull(),
        F.array(_record("quarantine", quarantine=quarantine.withField("run_id", F.lit(run_id)))),
    ).otherwise(F.array().cast(T.ArrayType(OUTPUT_RECORD)))


def _partition_stats_struct() -> Column:
    """The partition's statistics on its last row, null on every other row."""
    stats = F.struct(
        F.col("topic"),
        F.col("partition"),
        F.col("_p_first_offset").alias("first_offset"),
        F.col("_p_last_offset").alias("last_offset"),
        F.col("_p_batches").alias("batches"),
        F.col("_p_replica_batches").alias("replica_batches"),
        F.col("_p_batches_with_pid").alias("batches_with_producer_id"),
        F.col("_p_records").alias("records"),
        F.col("_p_max_timestamp").alias("max_timestamp"),
    ).cast(PARTITION_STATS_N)
    return F.when(_last_of_partition(), stats)


def _partition_stats_records() -> Column:
    stats = F.col("_partition_stats")
    return F.when(
        stats.isNotNull(),
        F.array(_record("partition_stats", partition_stats=stats)),
    ).otherwise(F.array().cast(T.ArrayType(OUTPUT_RECORD)))


def _last_of_partition() -> Column:
    return (
        F.col("_p_is_last")
        & ((F.col("_p_batches") + F.col("_p_replica_batches")) > 0)
        & F.col("topic").isNotNull()
        & F.col("partition").isNotNull()
    )


def _last_of_producer() -> Column:
    return (
        (F.col("_kind") == KIND_AUDITED) & F.col("_pkey").isNotNull() & F.col("_is_producer_last")
    )


def _producer_records() -> Column:
    last_of_producer = _last_of_producer()
    producer = F.struct(F.col("topic"), F.col("partition"), F.col("producer_id"))
    return F.when(last_of_producer, F.array(_record("producers", producer=producer))).otherwise(
        F.array().cast(T.ArrayType(OUTPUT_RECORD))
    )


def _session_records() -> Column:
    session = F.col("_producer_session")
    return F.when(session.isNotNull(), F.array(_record("sessions", session=session))).otherwise(
        F.array().cast(T.ArrayType(OUTPUT_RECORD))
    )


def _transaction_records(config: AuditConfig, run_id: str, as_of_ms: int | None) -> Column:
    transaction = transaction_record(config, run_id, as_of_ms)
    return F.when(
        transaction.isNotNull(), F.array(_record("transactions", transaction=transaction))
    ).otherwise(F.array().cast(T.ArrayType(OUTPUT_RECORD)))


# Columns nothing reads once the partition window's rules and statistics are evaluated
# (`_f_early`, `_partition_stats`, `_quarantine`). Dropping them narrows every later Window
# operator and sort, which copy whole rows: row width is what the audit's time goes into.
_PARTITION_ONLY = (
    "_p_prev_max_last_offset", "_p_prev_max_leader_epoch", "_p_first_offset", "_p_is_last",
    "_p_batches", "_p_batches_with_pid", "_p_records", "_p_last_offset", "_p_max_timestamp",
    "_p_log_end", "_log_start_checkpoint", "_hw", "_p_replica_batches", "_p_epoch_entry",
    "_p_primary_prev", "_p_same_start", "_ckpt_log_start", "_ckpt_high_watermark",
    "_ckpt_leader_epoch", "_replica_rank", "_replica", "partition_leader_epoch", RAW,
    QUARANTINE_REASON, "_ack_error", "_ack_event_time", "_ack_log_batches", "_ack_at_or_below",
    "_ack_log_offset",
)  # fmt: skip
# Read only by `with_replay_roles`.
_ROLE_ONLY = ("magic", "crc_valid")
# Read only while the sessions are cut (`with_sessions`).
_EXPIRY_ONLY = ("_prev_ts", "_log_txn_open")
# Read only by the epoch summaries (their window's order, the record count).
_SUMMARY_ONLY = ("_dup_key", "record_count")
# Read only by the producer-state rules, evaluated into `_f_producer_state` before transactions.
_PRODUCER_RULES_ONLY = (
    "_expired", "_cur_epoch", "_prev_row_offset", "_dup_of_offset", "_last_seq",
    "_last_seq_offset", "_last_seq_cause_offset", "_cache_oldest_evicted",
    "_state_coordinator_epoch", "_txn_first_offset", "_is_compacted", "_seq_checked",
    "_cause_offset", "_p_log_start", "is_control", "_is_data",
)  # fmt: skip


def with_rules(
    batches_df: DataFrame,
    config: AuditConfig,
    *,
    seeds_df: DataFrame | None = None,
    log_starts_df: DataFrame | None = None,
    high_watermarks_df: DataFrame | None = None,
    leader_epochs_df: DataFrame | None = None,
    acks_df: DataFrame | None = None,
    prune: bool = False,
) -> DataFrame:
    """Every row with the window facts the rules read, and the rules evaluated as they complete.

    Rows: audited and quarantined batches, seeded state, other replicas' copies, leader-epoch
    checkpoint entries, client acknowledgements. Added as soon as their inputs exist:
    `_f_early` (the partition and acknowledgement rules' findings, null when there are none),
    `_partition_stats`, `_quarantine` and `_f_producer_state`.

    Args:
        batches_df: `to_canonical` output.
        config: the run configuration.
        seeds_df: optional seeded producer state.
        log_starts_df: optional log-start checkpoint values.
        high_watermarks_df: optional high-watermark checkpoint values.
        leader_epochs_df: optional leader-epoch checkpoint entries.
        acks_df: optional client acknowledgements (valid rows).
        prune: drop each window fact once nothing later reads it (the audit); off, every fact
            stays for inspection (the rule tests read them). Values are the same either way.

    Returns:
        The rows with their facts.

    """
    # Every input enters the one pass as rows; columns a kind of row lacks are null.
    rows = _audited_rows(batches_df).withColumns(
        {
            "_ckpt_log_start": F.lit(None).cast("long"),
            "_ckpt_high_watermark": F.lit(None).cast("long"),
        }
    )
    extra = [
        seed_rows(seeds_df) if seeds_df is not None else None,
        epoch_entry_rows(leader_epochs_df) if leader_epochs_df is not None else None,
        checkpoint_rows(log_starts_df, high_watermarks_df),
        ack_rows(acks_df) if acks_df is not None else None,
    ]
    for more in extra:
        if more is not None:
            rows = rows.unionByName(more, allowMissingColumns=True)

    def pruned(df: DataFrame, columns: tuple[str, ...]) -> DataFrame:
        return df.drop(*columns) if prune else df

    rows = rows.transform(with_partition_context)
    if acks_df is not None:
        rows = rows.transform(with_ack_matches)
    early = _early_rules(config, with_acks=acks_df is not None)
    rows = rows.withColumns(
        {
            # Several partition rules may fire on one batch; most batches fire none.
            "_f_early": F.when(F.coalesce(*early).isNotNull(), F.array(*early)),
            "_partition_stats": _partition_stats_struct(),
            "_quarantine": _quarantine_struct(),
        }
    ).transform(pruned, _PARTITION_ONLY)
    # The producer-state steps in dependency order, with the epoch summaries between the duplicate
    # window and the applied-state window: they share the duplicate window's sort.
    rows = (
        rows.transform(with_replay_roles, config)
        .transform(pruned, _ROLE_ONLY)
        .transform(with_sessions, config)
        .transform(pruned, _EXPIRY_ONLY)
        .transform(with_duplicates)
        .transform(with_sessions_summary)
        .transform(pruned, _SUMMARY_ONLY)
        .transform(with_applied_state)
    )
    rows = rows.withColumn("_f_producer_state", producer_state_finding(config))
    return rows.transform(pruned, _PRODUCER_RULES_ONLY).transform(with_transactions)


def audit(
    batches_df: DataFrame,
    config: AuditConfig,
    run_id: str,
    *,
    seeds_df: DataFrame | None = None,
    log_starts_df: DataFrame | None = None,
    high_watermarks_df: DataFrame | None = None,
    leader_epochs_df: DataFrame | None = None,
    acks_df: DataFrame | None = None,
    as_of_ms: int | None = None,
) -> DataFrame:
    """Run every rule over the batches and return the tagged output records.

    Args:
        batches_df: `to_canonical` output (canonical columns, `quarantine_reason`, `raw`).
        config: the run configuration.
        run_id: the run id stamped on every row.
        seeds_df: optional producer state (schemas.PRODUCER_STATE) that precedes the audited log.
        log_starts_df: optional (topic, partition, log_start_offset) from log-start checkpoints.
        high_watermarks_df: optional (topic, partition, high_watermark) from replication-offset
            checkpoints; bounds the REPLICA_DIVERGENCE comparison.
        leader_epochs_df: optional (topic, partition, leader_epoch, start_offset) from the audited
            replica's leader-epoch checkpoint (LEADER_EPOCH_MISMATCH).
        acks_df: optional client acknowledgements in the acks contract (valid rows only):
            ACKED_WRITE_LOST and ACKED_OFFSET_MISMATCH.
        as_of_ms: the export time in epoch ms, when known: the age of open transactions.

    Returns:
        One row per output record: `kind` (one of OUTPUT_KINDS) and one non-null struct of that
        kind's schema.

    """
    ruled = with_rules(
        batches_df,
        config,
        seeds_df=seeds_df,
        log_starts_df=log_starts_df,
        high_watermarks_df=high_watermarks_df,
        leader_epochs_df=leader_epochs_df,
        acks_df=acks_df,
        prune=True,
    )
    late = _late_rules(config, as_of_ms)
    records = F.concat(
        _finding_records(late, run_id),
        _quarantine_records(run_id),
        _partition_stats_records(),
        _transaction_records(config, run_id, as_of_ms),
        _producer_records(),
        _session_records(),
    )
    # Most rows emit nothing. Dropping them first with plain (generated-code) conditions spares
    # them the records' array functions, which Spark evaluates without generated code.
    emits = (
        F.col("_f_early").isNotNull()
        | F.coalesce(*late).isNotNull()
        | F.col("_quarantine").isNotNull()
        | F.col("_partition_stats").isNotNull()
        | F.col("_txn_end").isNotNull()
        | _last_of_producer()
        | F.col("_producer_session").isNotNull()
    )
    return ruled.where(emits).select(F.explode(records).alias("r")).select("r.*")


def findings_of(records_df: DataFrame) -> DataFrame:
    """The findings table rows of an `audit` result."""
    return records_df.where(F.col("kind") == "findings").select("finding.*")


def quarantine_of(records_df: DataFrame) -> DataFrame:
    """The quarantine table rows of an `audit` result."""
    return records_df.where(F.col("kind") == "quarantine").select("quarantine.*")


def partition_stats_of(records_df: DataFrame) -> DataFrame:
    """The per-partition statistics of an `audit` result."""
    return records_df.where(F.col("kind") == "partition_stats").select("partition_stats.*")


def problem_records(problems_df: DataFrame, run_id: str) -> DataFrame:
    """Quarantine records for unusable non-batch inputs (corrupt snapshot, bad checkpoint line).

    Args:
        problems_df: (input, source, reason) rows.
        run_id: the run id.

    Returns:
        Output records of kind quarantine, to union with `audit`'s.
    """
    quarantine = F.struct(
        F.sha2(F.concat_ws("|", F.col("input"), F.col("source"), F.col("reason")), 256)
        .substr(1, 32)
        .alias("quarantine_id"),
        F.lit(run_id).alias("run_id"),
        F.col("input"),
        F.col("reason"),
        F.col("source"),
        F.lit(None).cast("string").alias("topic"),
        F.lit(None).cast("long").alias("partition"),
        F.lit(None).cast("long").alias("base_offset"),
        F.lit(None).cast("string").alias("raw"),
    ).cast(QUARANTINE_N)
    return problems_df.select(_record("quarantine", quarantine=quarantine).alias("r")).select("r.*")


def sessions_of(records_df: DataFrame) -> DataFrame:
    """The per producer epoch summaries of an `audit` result (before findings are added)."""
    return records_df.where(F.col("kind") == "sessions").select("session.*")


def transactions_of(records_df: DataFrame) -> DataFrame:
    """The transactions table rows of an `audit` result."""
    return records_df.where(F.col("kind") == "transactions").select("transaction.*")


def finding_records_of(findings_df: DataFrame) -> DataFrame:
    """Output records of kind findings for rows already in the findings contract."""
    finding = F.struct(*[F.col(n) for n in FINDINGS.fieldNames()])
    return findings_df.select(_record("findings", finding=finding).alias("r")).select("r.*")
