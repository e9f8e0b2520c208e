"""One audit run: read, audit in one pass, write every table, record the run.

The audit's output records (findings, quarantine rows, partition statistics) are computed by one
Spark job and staged as Parquet, partitioned by kind; each table is then written from its slice of
the stage, so the expensive shuffle and sorts run exactly once per run.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import logging
import shutil
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from eos_audit import __version__, engine
from eos_audit.config import AuditConfig
from eos_audit.errors import ConfigError, EosAuditError, InputSchemaError
from eos_audit.schemas import (
    AUDIT_RUNS,
    FINDINGS,
    LIST_OFFSETS_ERRORS,
    PARTITION_SUMMARY,
    PRODUCER_SESSIONS,
    PRODUCER_STATE,
    QUARANTINE,
    TRANSACTIONS,
)
from eos_audit.session import session_has_delta
from eos_audit.sinks.delta import TableWriter, choose_writer
from eos_audit.sources.files import TABULAR_FORMATS, detect_format, read_tabular
from eos_audit.summaries import SEVERITY_ORDER, partition_summary, producer_sessions

log = logging.getLogger(__name__)

BATCH_FORMATS = ("auto", *TABULAR_FORMATS, "segments", "dump-log")


@dataclass(frozen=True)
class AuditInputs:
    """What to audit."""

    batches: tuple[str, ...]
    batches_format: str = "auto"
    producer_state: tuple[str, ...] = ()
    verify_crc: bool = True
    dump_topic: str | None = None
    dump_partition: int | None = None
    list_offsets: tuple[str, ...] = ()
    list_offsets_format: str = "auto"
    list_offsets_spec: str = "latest"
    export_time: str | None = None
    acks: tuple[str, ...] = ()
    acks_format: str = "auto"


@dataclass
class RunResult:
    """What a run did, for the CLI's summary and exit code."""

    run_id: str
    status: str
    writer: str
    batches_read: int = 0
    batches_audited: int = 0
    batches_quarantined: int = 0
    findings_by_severity: dict[str, int] = field(default_factory=dict)
    findings_by_type: list[tuple[str, str, int]] = field(default_factory=list)
    tables: dict[str, str] = field(default_factory=dict)


def default_run_id(inputs: AuditInputs, config: AuditConfig, today: dt.date | None = None) -> str:
    """A run id that is the same for the same inputs, configuration and audit date.

    Re-running a night's audit therefore replaces that night's rows instead of adding a copy.
    """
    digest = hashlib.sha256(
        json.dumps([asdict(inputs), config.to_json()], sort_keys=True, default=str).encode()
    ).hexdigest()[:10]
    return f"{(today or dt.datetime.now(dt.UTC).date()).isoformat()}-{digest}"


@dataclass
class EngineInputs:
    """Everything the engine reads, as DataFrames (all but `batches` optional)."""

    batches: DataFrame
    seeds: DataFrame | None = None
    log_starts: DataFrame | None = None
    high_watermarks: DataFrame | None = None
    leader_epochs: DataFrame | None = None
    problems: DataFrame | None = None  # input, source, reason: unusable non-batch inputs


def _batch_format(inputs: AuditInputs) -> str:
    if inputs.batches_format != "auto":
        return inputs.batches_format
    formats = {detect_format(p) for p in inputs.batches}
    if len(formats) != 1:
        raise InputSchemaError(
            f"the --batches inputs have different formats {sorted(formats)}; audit them "
            "separately or pass --batches-format"
        )
    return formats.pop()


def read_inputs(spark: SparkSession, inputs: AuditInputs) -> EngineInputs:
    """Read every input of a run; a broker export also brings snapshots and checkpoints."""
    if _batch_format(inputs) == "segments":
        from eos_audit.sources.kafka_export import read_kafka_export

        export = read_kafka_export(spark, list(inputs.batches), verify_crc=inputs.verify_crc)
        seeds = export.seeds
        extra = read_producer_state(spark, inputs.producer_state)
        if extra is not None:
            seeds = extra if seeds is None else seeds.unionByName(extra)
        return EngineInputs(
            batches=export.batches,
            seeds=seeds,
            log_starts=export.log_starts,
            high_watermarks=export.high_watermarks,
            leader_epochs=export.leader_epochs,
            problems=export.problems,
        )
    return EngineInputs(
        batches=read_batches(spark, inputs),
        seeds=read_producer_state(spark, inputs.producer_state),
    )


def read_batches(spark: SparkSession, inputs: AuditInputs) -> DataFrame:
    """Read the batch inputs into the canonical schema (with quarantine reasons)."""
    fmt = _batch_format(inputs)
    paths = list(inputs.batches)
    if fmt in TABULAR_FORMATS:
        return read_tabular(spark, paths, fmt)
    if fmt == "segments":
        from eos_audit.sources.canonical import to_canonical
        from eos_audit.sources.segments import read_segments

        return to_canonical(read_segments(spark, paths, verify_crc=inputs.verify_crc))
    if fmt == "dump-log":
        from eos_audit.sources.canonical import to_canonical
        from eos_audit.sources.dump_log import read_dump_log

        return to_canonical(
            read_dump_log(spark, paths, topic=inputs.dump_topic, partition=inputs.dump_partition),
            text_input=False,
        )
    raise InputSchemaError(f"unknown --batches-format {fmt!r}; expected one of {BATCH_FORMATS}")


def read_producer_state(spark: SparkSession, paths: tuple[str, ...]) -> DataFrame | None:
    """Seeded producer state in the `producer_state` contract.

    Each path is Parquet or JSON lines, or a `producer_state` Delta table an earlier run wrote
    (its latest run's rows: the state that run's replay ended in).
    """
    if not paths:
        return None
    frames = []
    for path in paths:
        if (Path(path) / "_delta_log").is_dir():
            frames.append(_latest_run_state(spark, path))
            continue
        fmt = detect_format(path)
        if fmt not in ("parquet", "json"):
            raise InputSchemaError(
                f"--producer-state {path}: expected Parquet or JSON lines in the producer_state "
                "contract (schemas/producer_state.json), or a producer_state Delta table"
            )
        reader = spark.read.schema(PRODUCER_STATE)
        frames.append(reader.parquet(path) if fmt == "parquet" else reader.json(path))
    df = frames[0]
    for other in frames[1:]:
        df = df.unionByName(other)
    return df


def _latest_run_state(spark: SparkSession, path: str) -> DataFrame:
    """The rows of the latest run of a producer_state Delta table, read on the executors.

    Without Delta in the session, delta-rs lists the table's current data files and Spark reads
    them, so the table is read as Delta defines it (removed files stay unread).
    """
    if session_has_delta(spark):
        table = spark.read.format("delta").load(path).select(*PRODUCER_STATE.fieldNames())
    else:
        from deltalake import DeltaTable

        files = DeltaTable(path).file_uris()
        if not files:
            return spark.createDataFrame([], PRODUCER_STATE)
        table = spark.read.schema(PRODUCER_STATE).parquet(*files)
    # A scalar subquery: Spark picks the latest run while it reads, nothing comes to the driver.
    return table.where(F.col("run_id") == table.agg(F.max("run_id")).scalar())


def export_time_ms(export_time: str | None) -> int | None:
    """The --export-time as epoch milliseconds (ISO-8601; UTC when it names no zone).

    Raises:
        ConfigError: when the text is not an ISO-8601 time.
    """
    if export_time is None:
        return None
    try:
        value = dt.datetime.fromisoformat(export_time.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise ConfigError(
            f"--export-time {export_time!r} is not an ISO-8601 time; write it like "
            "2026-11-21T03:00:00Z"
        ) from exc
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return (value - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(milliseconds=1)


def read_acks_input(spark: SparkSession, inputs: AuditInputs) -> DataFrame | None:
    """The --acks inputs in the acks contract, with `_source_error` on rows that are unusable."""
    if not inputs.acks:
        return None
    from eos_audit.sources.acks import read_acks

    return read_acks(spark, list(inputs.acks), fmt=inputs.acks_format)


def _stage_acks(acks: DataFrame, config: AuditConfig, run_id: str, stage: Path) -> None:
    """Classify client-seen sequence errors and quarantine unusable acknowledgements.

    The acknowledgements checked against the log (ACKED_WRITE_LOST, ACKED_OFFSET_MISMATCH) went
    through the one pass; these two need the acknowledgements alone.
    """
    from eos_audit.rules.acks import client_error_findings
    from eos_audit.sources.contract_reader import SOURCE_ERROR

    rejected = acks.where(F.col(SOURCE_ERROR).isNotNull()).select(
        F.lit("acks").alias("input"),
        F.coalesce(F.col("source"), F.lit("acks")).alias("source"),
        F.col(SOURCE_ERROR).alias("reason"),
    )
    records = engine.finding_records_of(client_error_findings(acks, config, run_id)).unionByName(
        engine.problem_records(rejected, run_id)
    )
    records.write.mode("append").partitionBy("kind").parquet(str(stage))


def _stage_list_offsets(
    spark: SparkSession, inputs: AuditInputs, config: AuditConfig, run_id: str, stage: Path
) -> DataFrame:
    """Audit ListOffsets observations and add their records to the run's stage.

    The exported log's end offset per partition (for ACKED_DATA_MISSING_FROM_LOG) comes from the
    staged partition statistics: a few rows, so the batches are not read again.

    Returns:
        The observations as read, for the errors table.
    """
    from eos_audit.rules.list_offsets import list_offsets_findings
    from eos_audit.sources.list_offsets import SOURCE_ERROR, read_list_offsets

    observations = read_list_offsets(
        spark,
        list(inputs.list_offsets),
        fmt=inputs.list_offsets_format,
        spec=inputs.list_offsets_spec,
    )
    log_ends = engine.partition_stats_of(
        spark.read.schema(engine.OUTPUT_RECORD).parquet(str(stage))
    ).select("topic", "partition", (F.col("last_offset") + 1).alias("log_end_offset"))
    valid = observations.where(F.col(SOURCE_ERROR).isNull()).drop(SOURCE_ERROR)
    findings = list_offsets_findings(
        valid, config, run_id, log_end_df=log_ends, export_time=inputs.export_time
    )
    rejected = observations.where(F.col(SOURCE_ERROR).isNotNull()).select(
        F.lit("list_offsets").alias("input"),
        F.coalesce(F.col("source"), F.lit("list_offsets")).alias("source"),
        F.col(SOURCE_ERROR).alias("reason"),
    )
    records = engine.finding_records_of(findings).unionByName(
        engine.problem_records(rejected, run_id)
    )
    records.write.mode("append").partitionBy("kind").parquet(str(stage))
    return observations


def _summary(staged: DataFrame) -> dict:
    """The run's counts, from the stage, in one small Spark job (the run's one summary step)."""
    findings = F.col("kind") == "findings"
    key = F.concat_ws("|", F.col("finding.finding_type"), F.col("finding.severity"))
    by_type = (
        staged.where(findings)
        .groupBy(key.alias("k"))
        .agg(F.count("*").alias("count"))
        .agg(F.map_from_entries(F.collect_list(F.struct("k", "count"))).alias("by_type"))
    )
    quarantine = F.col("kind") == "quarantine"
    totals = staged.agg(
        # Batches only: a corrupt snapshot or checkpoint line is quarantined too, but it is not
        # a batch and must not upset the read = audited + quarantined reconciliation.
        F.count(F.when(quarantine & (F.col("quarantine.input") == "record_batch"), 1)).alias(
            "quarantined"
        ),
        F.coalesce(
            F.sum(F.col("partition_stats.batches") + F.col("partition_stats.replica_batches")),
            F.lit(0),
        ).alias("audited"),
        *[
            F.count(F.when(findings & (F.col("finding.severity") == s), 1)).alias(s)
            for s in SEVERITY_ORDER
        ],
    )
    row = totals.crossJoin(by_type).head()
    return row.asDict(recursive=True)


def _run_row(
    spark: SparkSession,
    result: RunResult,
    started: dt.datetime,
    inputs: AuditInputs,
    config: AuditConfig,
    error: str | None,
) -> DataFrame:
    values = {
        "run_id": result.run_id,
        "started_at": started,
        "finished_at": dt.datetime.now(dt.UTC),
        "status": result.status,
        "package_version": __version__,
        "spark_version": spark.version,
        "writer": result.writer,
        "inputs": json.dumps(asdict(inputs), sort_keys=True),
        "configuration": config.to_json(),
        "batches_read": result.batches_read,
        "batches_audited": result.batches_audited,
        "batches_quarantined": result.batches_quarantined,
        "findings_critical": result.findings_by_severity.get("CRITICAL", 0),
        "findings_error": result.findings_by_severity.get("ERROR", 0),
        "findings_warning": result.findings_by_severity.get("WARNING", 0),
        "findings_info": result.findings_by_severity.get("INFO", 0),
        "error": error,
    }
    return spark.createDataFrame([tuple(values[f.name] for f in AUDIT_RUNS.fields)], AUDIT_RUNS)


def run_audit(
    spark: SparkSession,
    inputs: AuditInputs,
    config: AuditConfig,
    warehouse: str,
    run_id: str | None = None,
) -> RunResult:
    """Audit the inputs and write findings, quarantine and the run record as Delta tables.

    Args:
        spark: the session.
        inputs: what to audit.
        config: the run configuration.
        warehouse: directory of the Delta tables (or staging area in catalog mode).
        run_id: the run id; default: derived from the inputs, configuration and date.

    Returns:
        What the run did. A failed run is recorded in `audit_runs` with status FAILED and the
        exception is raised again.

    """
    started = dt.datetime.now(dt.UTC)
    run_id = run_id or default_run_id(inputs, config)
    writer: TableWriter = choose_writer(
        spark,
        warehouse,
        config.output.writer,
        config.output.catalog_schema,
        has_delta=session_has_delta(spark),
    )
    result = RunResult(run_id=run_id, status="FAILED", writer=writer.name)
    stage = Path(warehouse) / "_staging" / f"run-{uuid.uuid4().hex}"
    log.info("run %s: reading %s (%s)", run_id, ", ".join(inputs.batches), inputs.batches_format)
    error: str | None = "interrupted"
    try:
        as_of_ms = export_time_ms(inputs.export_time)
        read = read_inputs(spark, inputs)
        acks = read_acks_input(spark, inputs)
        valid_acks = None
        if acks is not None:
            from eos_audit.sources.contract_reader import SOURCE_ERROR

            valid_acks = acks.where(F.col(SOURCE_ERROR).isNull()).drop(SOURCE_ERROR)
        records = engine.audit(
            read.batches,
            config,
            run_id,
            seeds_df=read.seeds,
            log_starts_df=read.log_starts,
            high_watermarks_df=read.high_watermarks,
            leader_epochs_df=read.leader_epochs,
            acks_df=valid_acks,
            as_of_ms=as_of_ms,
        )
        if read.problems is not None:
            records = records.unionByName(engine.problem_records(read.problems, run_id))
        log.info("run %s: auditing (one shuffle) and staging the results", run_id)
        records.write.mode("overwrite").partitionBy("kind").parquet(str(stage))
        if acks is not None:
            _stage_acks(acks, config, run_id, stage)
        offset_errors = spark.createDataFrame([], LIST_OFFSETS_ERRORS)
        if inputs.list_offsets:
            from eos_audit.rules.list_offsets import list_offsets_error_counts

            observations = _stage_list_offsets(spark, inputs, config, run_id, stage)
            offset_errors = list_offsets_error_counts(observations, run_id)
        staged = spark.read.schema(engine.OUTPUT_RECORD).parquet(str(stage))
        for table, df, schema in (
            ("findings", engine.findings_of(staged), FINDINGS),
            ("quarantine", engine.quarantine_of(staged), QUARANTINE),
            ("transactions", engine.transactions_of(staged), TRANSACTIONS),
            ("partition_summary", partition_summary(staged, run_id), PARTITION_SUMMARY),
            ("producer_sessions", producer_sessions(staged, run_id), PRODUCER_SESSIONS),
            ("list_offsets_errors", offset_errors, LIST_OFFSETS_ERRORS),
            (
                "producer_state",
                engine.producer_state_of(staged).withColumn("run_id", F.lit(run_id)),
                PRODUCER_STATE,
            ),
        ):
            result.tables[table] = writer.replace_run(table, df, schema, run_id)
            log.info("run %s: wrote %s", run_id, result.tables[table])
        summary = _summary(staged)
        result.batches_audited = int(summary["audited"])
        result.batches_quarantined = int(summary["quarantined"])
        result.batches_read = result.batches_audited + result.batches_quarantined
        result.findings_by_severity = {s: int(summary[s]) for s in SEVERITY_ORDER}
        result.findings_by_type = sorted(
            (
                (k.split("|")[0], k.split("|")[1], int(v))
                for k, v in (summary["by_type"] or {}).items()
            ),
            key=lambda t: (SEVERITY_ORDER.index(t[1]), t[0]),
        )
        result.status = "SUCCEEDED"
        error = None
    except EosAuditError as exc:
        error = str(exc)
        raise
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        try:
            run_df = _run_row(spark, result, started, inputs, config, error)
            result.tables["audit_runs"] = writer.replace_run(
                "audit_runs", run_df, AUDIT_RUNS, run_id
            )
            log.info(
                "run %s: %s, recorded in %s", run_id, result.status, result.tables["audit_runs"]
            )
        except Exception:  # the original error matters more than a failed run record
            log.exception("run %s: could not record the run in audit_runs", run_id)
        shutil.rmtree(stage, ignore_errors=True)
        with contextlib.suppress(OSError):  # only when empty: another run may be staging
            stage.parent.rmdir()
    return result
