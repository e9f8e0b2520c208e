"""One audit run: read, audit in one pass, write every table, record the run.

The audit's output records (findings, quarantine rows, partition statistics) are computed by one
Spark job and staged as Parquet, partitioned by kind; each table is then written from its slice of
the stage, so the expensive shuffle and sorts run exactly once per run. The evidence beside the
batches (acknowledgements, ListOffsets observations) and every seed are parsed and checked once
and staged too (`checked_once`), before the readers that split them into valid and quarantined
rows.
"""

from __future__ import annotations

import datetime as dt
import errno
import functools
import hashlib
import itertools
import json
import logging
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from eos_audit import progress
from eos_audit.audit import accounting, output_records, replay_plan
from eos_audit.audit.since_state import seed_inputs, warehouse_state
from eos_audit.audit.summaries import partition_summary, producer_sessions
from eos_audit.config import AuditConfig
from eos_audit.errors import ConfigError, EosAuditError, InputSchemaError, SinkError
from eos_audit.findings import SEVERITY_ORDER
from eos_audit.instants import epoch_millis
from eos_audit.schemas import PER_INPUT_RECORD_TABLES
from eos_audit.session import (
    adaptive_execution,
    default_parallelism,
    ensure_code_on_server,
    lost_server_error,
    replay_arrow_settings,
    session_has_delta,
    shares_driver_disk,
)
from eos_audit.sinks.delta import TableRows, TableWriter, choose_writer
from eos_audit.sinks.run_record import (
    DATA_TABLES,
    TABLE_SCHEMAS,
    RunRecorder,
    RunResult,
    error_text,
)
from eos_audit.sinks.run_status import FAILED, RUNNING, finished_status
from eos_audit.sinks.staging import RunStage
from eos_audit.sinks.warehouse import check_warehouse
from eos_audit.sources.files import filesystems
from eos_audit.sources.files.input_files import dedupe_paths, list_table_files, path_identity
from eos_audit.sources.formats import BatchOptions, BatchRead, read_batches
from eos_audit.sources.kafka.dump_log import LINE_INPUT as DUMP_LOG_LINE
from eos_audit.sources.tabular.producer_state import INPUT as SEED_INPUT
from eos_audit.sources.tabular.producer_state import Keep

log = logging.getLogger(__name__)


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
    # Decoded coordinator records (schemas/coordinator_records.json, Parquet) for the processing
    # audit, beside (or instead of) the coordinator topics' partitions in --batches.
    coordinator_records: tuple[str, ...] = ()
    # Seed from the warehouse's own producer_state (the latest finished run's) and skip the
    # batches that state covers already (docs/nightly.md).
    since_state: bool = False


def input_paths(inputs: AuditInputs) -> list[str]:
    """Every path a run reads."""
    return [
        *inputs.batches, *inputs.producer_state, *inputs.list_offsets, *inputs.acks,
        *inputs.coordinator_records,
    ]  # fmt: skip


def _fingerprint(path: str) -> Iterator[tuple[str, int, int]]:
    """(relative name, size, mtime) of every file under a path.

    A local path or an object store's URI (its listing's size and last-modified time); nothing
    for a URI Spark lists (dbfs:).

    Metadata only: a re-export of new data into the same folder gets another run id, a re-run
    of the same files gets the same one.
    """
    if filesystems.is_remote(path):
        try:  # one listing; an object (not a prefix) is its own entry
            if filesystems.isfile(path):
                yield (filesystems.basename(path), *filesystems.stat(path))
            else:
                yield from filesystems.remote_tree(path)
        except (OSError, ValueError):  # unlistable: the run's own listing names it
            return
        return
    if "://" in path or path.startswith("dbfs:"):
        return
    root = Path(path)
    if root.is_file():
        stat = root.stat()
        yield (root.name, stat.st_size, stat.st_mtime_ns)
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            full = Path(dirpath) / name
            try:
                stat = full.stat()
            except OSError:  # vanished while listing: the next listing decides
                continue
            yield (str(full.relative_to(root)), stat.st_size, stat.st_mtime_ns)


def default_run_id(inputs: AuditInputs, config: AuditConfig) -> str:
    """A run id derived from the inputs (paths and their files' names, sizes, times) and config.

    Never from the clock: a re-run of the same inputs, after midnight or a week later, gets the
    same id and therefore replaces that run's rows instead of adding a copy (issue 12, case 2).
    Each path counts by the place it names (`path_identity`): `--batches exp2` and `--batches
    exp2/`, or the absolute path a Spark Connect client sends, are one night.
    """
    inputs = replace(
        inputs,
        **{
            name: tuple(path_identity(path) for path in getattr(inputs, name))
            for name in ("batches", "producer_state", "list_offsets", "acks", "coordinator_records")
        },
    )
    listing = {path: list(_fingerprint(path)) for path in input_paths(inputs)}
    digest = hashlib.sha256(
        json.dumps(
            [asdict(inputs), config.to_json(), listing], sort_keys=True, default=str
        ).encode()
    ).hexdigest()[:16]
    return f"run-{digest}"


def read_inputs(spark: SparkSession, inputs: AuditInputs, keep: Keep | None = None) -> BatchRead:
    """Read every input of a run through the format registry; every seed is checked.

    Seeds (the export's snapshots, --producer-state) that fail `check_seeds` join the problems;
    `keep` materializes the checked seeds (see `check_seeds`).
    """
    read = read_batches(
        spark,
        list(inputs.batches),
        inputs.batches_format,
        BatchOptions(
            verify_crc=inputs.verify_crc,
            topic=inputs.dump_topic,
            partition=inputs.dump_partition,
        ),
    )
    if inputs.coordinator_records:
        from eos_audit.sources.tabular.coordinator_records import read_coordinator_records_table

        given = read_coordinator_records_table(spark, list(inputs.coordinator_records))
        read.coordinator_records = (
            given
            if read.coordinator_records is None
            else read.coordinator_records.unionByName(given)
        )
    seeds = seed_inputs(spark, read.seeds, inputs.producer_state, keep)
    read.seeds = seeds.seeds
    if seeds.problems is not None:
        read.problems = (
            seeds.problems if read.problems is None else read.problems.unionByName(seeds.problems)
        )
    return read


def export_time_ms(export_time: str | None) -> int | None:
    """The --export-time as epoch milliseconds (ISO-8601; UTC when it names no zone).

    Raises:
        ConfigError: when the text is not an ISO-8601 time.
    """
    if export_time is None:
        return None
    try:
        return epoch_millis(export_time)
    except ValueError as exc:
        raise ConfigError(
            f"--export-time {export_time!r} is not an ISO-8601 time; write it like "
            "2026-11-21T03:00:00Z"
        ) from exc


def read_acks_input(spark: SparkSession, inputs: AuditInputs) -> DataFrame | None:
    """The --acks inputs in the acks contract, with `_source_error` on rows that are unusable."""
    if not inputs.acks:
        return None
    from eos_audit.sources.evidence.acks import read_acks

    return read_acks(spark, list(inputs.acks), fmt=inputs.acks_format)


def checked_once(
    spark: SparkSession, evidence: DataFrame, path: str, options: dict[str, str] | None = None
) -> DataFrame:
    """An evidence input parsed and checked by one job, staged as Parquet and read back.

    A contract reader's `_source_error` is one wide expression over every column (all of a row's
    reasons). Its readers filter on it (the valid rows for the one pass and the rules, the others
    for the quarantine), and the optimizer copies the whole expression, with the parsing of each
    column it reads, into every filter it pushes towards the scan: the acknowledgements' staging
    plan was 170 kB optimized against 47 kB analyzed, about 0.55 s of planning for the demo's few
    rows. Each reader also parsed the files again (the acks three times). Staged, they are parsed
    and checked once and every reader scans plain Parquet columns (at 1M generated batches the
    acks took 1.7-2.0 s instead of 2.1-2.3 s).

    Args:
        spark: the session.
        evidence: a contract reader's output (its columns and `_source_error`).
        path: where to stage it, inside the run's staging folder.
        options: the Parquet writer's options, if any.

    Returns:
        The same rows and columns, read from the stage.
    """
    evidence.write.mode("overwrite").options(**(options or {})).parquet(path)
    return spark.read.schema(evidence.schema).parquet(path)


def _stage_acks(acks: DataFrame, config: AuditConfig, run_id: str, stage: str) -> None:
    """Classify client-seen sequence errors and quarantine unusable acknowledgements.

    The acknowledgements checked against the log (ACKED_WRITE_LOST, ACKED_OFFSET_MISMATCH) went
    through the one pass; these two need the acknowledgements alone.
    """
    from eos_audit.evidence_rules.acks import client_error_findings
    from eos_audit.sources.tabular.contract_reader import SOURCE_ERROR

    rejected = acks.where(F.col(SOURCE_ERROR).isNotNull()).select(
        F.lit("acks").alias("input"),
        F.coalesce(F.col("source"), F.lit("acks")).alias("source"),
        F.col(SOURCE_ERROR).alias("reason"),
    )
    findings = client_error_findings(acks, config, run_id)
    records = output_records.finding_records_of(findings).unionByName(
        output_records.problem_records(rejected, run_id)
    )
    records.write.mode("append").partitionBy("kind").parquet(stage)


def _stage_list_offsets(
    spark: SparkSession,
    inputs: AuditInputs,
    config: AuditConfig,
    run_id: str,
    stage: str,
    checked: str,
) -> DataFrame:
    """Audit ListOffsets observations and add their records to the run's stage.

    The exported log's end offset per partition (for ACKED_DATA_MISSING_FROM_LOG) comes from the
    staged partition statistics: a few rows, so the batches are not read again.

    Returns:
        The observations as read and checked (staged at `checked`), for the errors table.
    """
    from eos_audit.evidence_rules.list_offsets import list_offsets_findings
    from eos_audit.sources.evidence.list_offsets import SOURCE_ERROR, read_list_offsets

    observations = checked_once(
        spark,
        read_list_offsets(
            spark,
            list(inputs.list_offsets),
            fmt=inputs.list_offsets_format,
            spec=inputs.list_offsets_spec,
        ),
        checked,
    )
    log_ends = output_records.partition_summary_of(
        spark.read.schema(output_records.OUTPUT_RECORD).parquet(stage)
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
    records = output_records.finding_records_of(findings).unionByName(
        output_records.problem_records(rejected, run_id)
    )
    records.write.mode("append").partitionBy("kind").parquet(stage)
    return observations


@dataclass(frozen=True)
class ProcessingTables:
    """The processing audit's tables of a run, read from its stage."""

    consumer_offsets: DataFrame
    transaction_log: DataFrame
    # The partitions of open KIP-939 transactions, or None when the transaction log has none.
    two_phase_commit: DataFrame | None = None
    # Records of types the audit does not read (a consumer group's assignments and epochs, share
    # and streams groups, types a newer Kafka writes): how many, by `_record_type`. Counted, not
    # quarantined: they are no error.
    skipped: dict[str, int] = field(default_factory=dict)


COORDINATOR_INPUT = "coordinator_records"


def _staged_replay(
    spark: SparkSession, coordinator: DataFrame, stage: RunStage
) -> tuple[DataFrame, DataFrame]:
    """The decoded coordinator records and the offset replay's history, each staged once.

    The records are read by the replay, the transaction log, the quarantine and the checks; the
    history by its table and the checks.
    """
    from eos_audit.processing.coordinator_audit import (
        STAGED_HISTORY_OPTIONS,
        STAGED_RECORDS_OPTIONS,
        offset_events,
        replay_offsets,
        staged_records,
    )

    records = checked_once(
        spark, staged_records(coordinator), stage.subdir("coordinator_records"),
        STAGED_RECORDS_OPTIONS,
    )  # fmt: skip
    history = checked_once(
        spark, replay_offsets(offset_events(records)), stage.subdir("consumer_offsets"),
        STAGED_HISTORY_OPTIONS,
    )  # fmt: skip
    return records, history


def _stage_processing(
    spark: SparkSession,
    coordinator: DataFrame,
    config: AuditConfig,
    run_id: str,
    stage: RunStage,
    staged_path: str,
    as_of_ms: int | None,
    partitions_listed: frozenset[tuple[str, int]] = frozenset(),
    incremental: bool = False,
) -> ProcessingTables:
    """Replay the group coordinators' offsets and add the findings and quarantine rows to the stage.

    The decoded records are staged once (the replay, the transaction log and the quarantine read
    them), the replay's history once (its table and its findings read it), and what two or
    three findings of one check read once (`staged_as`): the prepared partitions with their
    markers (TORN_TRANSACTION), READ_PAST_LSO's judged commits, the pending producers
    HANGING_OFFSET_TRANSACTION judges, the one-to-one check's judged commits. The checks are
    `processing.checks.processing_checks`, their findings written by one job.
    `partitions_listed`: the partitions the export lists (`BatchRead.partitions_listed`);
    `incremental`: the run is seeded by an earlier run's state (--since-state).
    """
    from eos_audit.processing.checks import CheckInputs, processing_checks
    from eos_audit.processing.coordinator_audit import (
        SOURCE_ERROR,
        consumer_offsets_table,
        transaction_log_table,
    )
    from eos_audit.processing.hanging_offsets import (
        distributed_two_phase_commit_partitions,
        two_phase_commit_record,
    )

    records, history = _staged_replay(spark, coordinator, stage)
    rejected = records.where(F.col(SOURCE_ERROR).isNotNull()).select(
        F.lit(COORDINATOR_INPUT).alias("input"),
        F.coalesce(F.col("source"), F.col("coordinator_topic")).alias("source"),
        F.col(SOURCE_ERROR).alias("reason"),
    )

    def staged_as(name: str) -> Callable[[DataFrame], DataFrame]:
        """A check's intermediate that more than one of its findings read, staged once."""
        return lambda frame: checked_once(spark, frame, stage.subdir(name))

    # The audit's own rows, staged before this: each partition's transactions and statistics.
    audited = spark.read.schema(output_records.OUTPUT_RECORD).parquet(staged_path)
    inputs = CheckInputs(
        records, history, output_records.transactions_of(audited),
        output_records.partition_summary_of(audited), config, run_id, as_of_ms,
        partitions_listed, incremental,
    )  # fmt: skip
    # Every check's findings in one write.
    built = [build() for build in processing_checks(inputs, staged_as).values()]
    findings = functools.reduce(
        lambda union, frame: union.unionByName(frame), [f for f in built if f is not None]
    )
    staged = output_records.finding_records_of(findings).unionByName(
        output_records.problem_records(rejected, run_id)
    )
    if not adaptive_execution(spark):
        # The findings are few, from some thirty plans. Without adaptive execution every
        # partition of each plan is a task of this write (63 on the suite's local[2] sessions),
        # and each task deserializes the whole union's plan and writes its own files: as many
        # tasks as the session runs at once instead, as the Delta tables' staging does
        # (`sinks.delta`). With it, Spark coalesces each plan's partitions itself, and this
        # measured no gain (at 1M coordinator records, up to 0.5 s more a run).
        staged = staged.coalesce(default_parallelism(spark))
    staged.write.mode("append").partitionBy("kind").parquet(staged_path)
    # One small job, its rows bounded by the record types, never by the records: whether the
    # transaction log holds a two-phase-commit transaction, and the records of the types the
    # audit does not read.
    two_phase = two_phase_commit_record()
    skipped = F.col("is_skipped") & F.col(SOURCE_ERROR).isNull()
    counted = (
        records.where(two_phase | skipped)
        .groupBy(two_phase.alias("two_phase"), "coordinator_topic", "record_type")
        .count()
        .collect()
    )
    return ProcessingTables(
        consumer_offsets_table(history, run_id),
        transaction_log_table(records, run_id),
        distributed_two_phase_commit_partitions(records)
        if any(r["two_phase"] for r in counted)
        else None,
        {
            _record_type(r["coordinator_topic"], r["record_type"]): r["count"]
            for r in counted
            if not r["two_phase"]
        },
    )


def _record_type(topic: str, record_type: int | None) -> str:
    """A coordinator record type as the run's summary names it: `<topic> type <n> (<name>)`."""
    from eos_audit.sources.kafka.coordinator_keys import CONSUMER_OFFSETS_TOPIC
    from eos_audit.sources.kafka.coordinator_records import GROUP_RECORD_TYPE_NAMES

    name = GROUP_RECORD_TYPE_NAMES.get(record_type) if topic == CONSUMER_OFFSETS_TOPIC else None
    return f"{topic} type {record_type}" + (f" ({name})" if name else "")


def _summary(staged: DataFrame) -> dict:
    """The run's counts, from the stage, in one small Spark job (the run's one summary step).

    One aggregate grouped by what is counted (the kind of record; a finding's type and
    severity; a quarantined row's input): its rows are bounded by the finding types, severities
    and inputs, never by the batches, and are summed up here.
    """
    findings = F.col("kind") == "findings"
    quarantine = F.col("kind") == "quarantine"
    stats = "partition_summary"
    groups = (
        staged.where(findings | quarantine | (F.col("kind") == stats))
        .groupBy(
            "kind",
            F.when(findings, F.col("findings.finding_type")).alias("finding_type"),
            F.when(findings, F.col("findings.severity")).alias("severity"),
            F.when(quarantine, F.col("quarantine.input")).alias("input"),
        )
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.sum(F.col(f"{stats}.batches") + F.col(f"{stats}.replica_batches")).alias("audited"),
            F.sum(f"{stats}.batches_skipped").alias("skipped"),
        )
        .collect()
    )
    summary: dict = {
        "quarantined": 0, "lines_quarantined": 0, "seeds_quarantined": 0, "audited": 0,
        "skipped": 0, "coordinator_records_quarantined": 0,
    }  # fmt: skip
    summary.update(dict.fromkeys(SEVERITY_ORDER, 0))
    by_type: dict[str, int] = {}
    for row in groups:
        if row["kind"] == "findings":
            by_type[f"{row['finding_type']}|{row['severity']}"] = row["n"]
            if row["severity"] in summary:
                summary[row["severity"]] += row["n"]
        elif row["kind"] == "quarantine":
            # Batches only: a corrupt snapshot or checkpoint line is quarantined too, but it is
            # not a batch and must not upset the read = audited + quarantined reconciliation.
            if row["input"] == "record_batch":
                summary["quarantined"] += row["n"]
            elif row["input"] == DUMP_LOG_LINE:
                summary["lines_quarantined"] += row["n"]
            # A seed row that could not be trusted: its producer was replayed without its state.
            elif row["input"] == SEED_INPUT:
                summary["seeds_quarantined"] += row["n"]
            elif row["input"] == COORDINATOR_INPUT:
                summary["coordinator_records_quarantined"] += row["n"]
        else:
            summary["audited"] += row["audited"] or 0
            summary["skipped"] += row["skipped"] or 0
    summary["by_type"] = by_type
    return summary


def _reached(point: str) -> None:
    """A named point of a run (read, staged, wrote:<table>). Does nothing.

    The crash-safety tests replace it to kill the run exactly there.
    """


# Spark's wording when a task cannot read an input file (a zero-byte or non-Parquet .parquet).
_READ_FAILURE = re.compile(
    r"FAILED_READ_FILE|CANNOT_READ_FILE_FOOTER|is not a Parquet file|"
    r"Could not read footer|UNABLE_TO_INFER_SCHEMA"
)
_FAILED_FILE = re.compile(r"(?:reading file|read footer for file:?|file) (\S+?)[.;,]?(?:\s|$)")
# Java's wording when the run's user may not read a file Spark opens (FileNotFoundException,
# AccessDeniedException); the driver's listing catches most, a file made unreadable later not.
_PERMISSION = re.compile(r"(\S+) \(Permission denied\)|AccessDeniedException: (\S+)")


def as_input_error(exc: Exception) -> EosAuditError | None:
    """An unreadable input file as the user's problem (exit 2) naming the file, else None."""
    text = str(exc)
    uris = filesystems.missing_connector(text)
    if uris:
        return InputSchemaError(
            f"Spark cannot read {uris} in this session: it has no filesystem "
            "connector for the scheme. Parquet, JSON, CSV and Delta inputs on an object store are "
            "read by Spark and need the cluster's connector (hadoop-aws for s3a://: README, "
            "Inputs on object stores); Kafka's own files are read without one"
        )
    denied = _PERMISSION.search(text)
    if denied:
        where = re.sub(r"^file:/*", "/", denied.group(1) or denied.group(2))
        return InputSchemaError(f"cannot read {where}: permission denied")
    if isinstance(exc, PermissionError):
        return InputSchemaError(f"cannot read {exc.filename or 'an input file'}: permission denied")
    if not _READ_FAILURE.search(text):
        return None
    match = _FAILED_FILE.search(text)
    where = re.sub(r"^file:/*", "/", match.group(1)) if match else "an input file"
    # The line that says what failed, not Py4J's "An error occurred while calling o43.parquet".
    cause = next(line for line in text.splitlines() if _READ_FAILURE.search(line))
    cause = re.sub(r"\s+", " ", cause).strip()[:300]
    return InputSchemaError(f"cannot read {where}: it is not a readable input file ({cause})")


_NO_SPACE = re.compile(r"No space left on device|ENOSPC|os error 28", re.IGNORECASE)


def _staging_error(exc: Exception, stage: RunStage) -> EosAuditError | None:
    """Spark without the connector of a warehouse it stages on (a cluster's run), else None.

    The run's executors do not share this machine's disk, so they stage under the warehouse's
    URI (eos_audit.sinks.staging): its scheme needs the cluster's connector, as inputs do.
    """
    if not filesystems.is_uri(stage.data):
        return None
    uris = filesystems.missing_connector(str(exc))
    if uris != stage.data.split("://", 1)[0] + ":// URIs":
        return None
    return SinkError(
        f"Spark cannot write {uris} in this session: it has no filesystem connector for the "
        f"scheme, and this run stages its results under --warehouse {stage.warehouse} (its "
        "executors do not share this machine's disk); give the cluster the connector (hadoop-aws "
        "for s3a://: README, Inputs on object stores) or the warehouse in its scheme"
    )


def disk_full_error(exc: BaseException, warehouse: str) -> EosAuditError | None:
    """A full disk while staging or writing as the user's problem (exit 2), else None.

    Spark (a task's IOException), delta-rs (os error 28) and Python (ENOSPC) each say it in
    their own words, with hundreds of lines of trace around; the user needs one line.
    """
    if isinstance(exc, EosAuditError):
        return None
    seen: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and cause not in seen:
        seen.append(cause)
        cause = cause.__cause__ or cause.__context__
    hit = next(
        (
            e
            for e in seen
            if (isinstance(e, OSError) and e.errno == errno.ENOSPC) or _NO_SPACE.search(str(e))
        ),
        None,
    )
    if hit is None:
        return None
    where = warehouse
    filename = getattr(hit, "filename", None)
    if isinstance(filename, str) and warehouse not in filename:
        where = os.path.dirname(filename) or filename
    return SinkError(
        f"no space left on device under {where}: free space there (or pass a --warehouse on a "
        "larger disk) and run again"
    )


def _audit_and_write(
    spark: SparkSession,
    warehouse: str,
    inputs: AuditInputs,
    config: AuditConfig,
    writer: TableWriter,
    result: RunResult,
    stage: RunStage,
) -> None:
    """Read, audit in one pass, stage, write every table and count: the body of a run."""
    run_id = result.run_id
    staged_path = stage.subdir("records")
    as_of_ms = export_time_ms(inputs.export_time)
    # The evidence beside the batches is input too: listed (and checked readable) first.
    evidence = [
        *list_table_files(inputs.list_offsets, "list_offsets"),
        *list_table_files(inputs.acks, "acks"),
        *list_table_files(inputs.coordinator_records, "coordinator_records"),
    ]
    checked_seeds = (stage.subdir(f"seeds-{n}") for n in itertools.count())

    def keep(seeds: DataFrame) -> DataFrame:
        return checked_once(spark, seeds, next(checked_seeds))

    read = read_inputs(spark, inputs, keep)
    covered = None
    if inputs.since_state:
        state = warehouse_state(spark, warehouse, config.output.catalog_schema, run_id, keep)
        if state is not None:
            # Snapshot files in the export seed only the partitions the run's state does not
            # cover: where it does, it already holds everything up to its offset.
            seeds = state.seeds
            if read.seeds is not None:
                uncovered = read.seeds.join(state.covered, ["topic", "partition"], "left_anti")
                seeds = seeds.unionByName(uncovered)
            read.seeds = seeds
            covered = state.covered
            result.seeded_from_run = state.run_id
            if state.problems is not None:  # its rows that failed the seed checks
                read.problems = (
                    state.problems
                    if read.problems is None
                    else read.problems.unionByName(state.problems)
                )
    acks = read_acks_input(spark, inputs)
    valid_acks = None
    if acks is not None:
        from eos_audit.sources.tabular.contract_reader import SOURCE_ERROR

        with progress.stage(spark, run_id, "checking the acknowledgements"):
            acks = checked_once(spark, acks, stage.subdir("acks"))
        valid_acks = acks.where(F.col(SOURCE_ERROR).isNull()).drop(SOURCE_ERROR)
    records = replay_plan.audit(
        read.batches,
        config,
        run_id,
        seeds_df=read.seeds,
        log_starts_df=read.log_starts,
        high_watermarks_df=read.high_watermarks,
        leader_epochs_df=read.leader_epochs,
        acks_df=valid_acks,
        as_of_ms=as_of_ms,
        covered_df=covered,
        source_files=read.source_files,
    )
    if read.problems is not None:
        records = records.unionByName(output_records.problem_records(read.problems, run_id))
    _reached("read")
    offset_errors = None
    with progress.stage(spark, run_id, "auditing (one shuffle) and staging the results"):
        records.write.mode("overwrite").partitionBy("kind").parquet(staged_path)
        if acks is not None:
            _stage_acks(acks, config, run_id, staged_path)
        if inputs.list_offsets:
            from eos_audit.evidence_rules.list_offsets import list_offsets_error_counts

            observations = _stage_list_offsets(
                spark, inputs, config, run_id, staged_path, stage.subdir("list_offsets")
            )
            offset_errors = list_offsets_error_counts(observations, run_id)
    processing = None
    coordinator = read.coordinator_records
    if coordinator is None:
        from eos_audit.processing.coordinator_audit import SOURCE_ERROR
        from eos_audit.processing.one_to_one import groups_declared_by_name
        from eos_audit.schemas import COORDINATOR_RECORDS

        if groups_declared_by_name(config):
            # A group declared one-to-one by name is reported at its partition when the export
            # holds no coordinator record at all, as when it holds others: never passed silently.
            coordinator = spark.createDataFrame([], COORDINATOR_RECORDS).withColumn(
                SOURCE_ERROR, F.lit(None).cast("string")
            )
    if coordinator is not None:
        with progress.stage(spark, run_id, "replaying the group coordinators' offsets"):
            processing = _stage_processing(
                spark, coordinator, config, run_id, stage, staged_path, as_of_ms,
                read.partitions_listed, incremental=covered is not None,
            )  # fmt: skip
    if processing is not None and processing.skipped:
        result.coordinator_records_skipped = dict(sorted(processing.skipped.items()))
        log.info(
            "run %s: skipped %d coordinator record(s) of types the audit does not read: %s",
            run_id, sum(processing.skipped.values()),
            ", ".join(f"{k} ({n})" for k, n in result.coordinator_records_skipped.items()),
        )  # fmt: skip
    _reached("staged")
    staged = spark.read.schema(output_records.OUTPUT_RECORD).parquet(staged_path)
    if processing is not None and processing.two_phase_commit is not None:
        from eos_audit.processing.hanging_offsets import lower_distributed_two_phase_commit_txns

        # The replay's HANGING_TRANSACTION read each partition alone; the transaction log says
        # which of them its coordinator will never abort.
        staged = lower_distributed_two_phase_commit_txns(staged, processing.two_phase_commit)
    with progress.stage(spark, run_id, "counting"):
        books = accounting.account(staged, [*(read.files or []), *evidence], run_id)
        if books.unreadable:  # no verdict rests on a file the run could not read
            staged = accounting.findings_beside_unreadable(staged, books.unreadable)
        summary = _summary(staged)
    frames = {
        "findings": output_records.findings_of(staged),
        "quarantine": output_records.quarantine_of(staged),
        "transactions": output_records.transactions_of(staged),
        "partition_summary": partition_summary(staged, run_id),
        "producer_sessions": producer_sessions(staged, run_id),
        "list_offsets_errors": offset_errors,
        "producer_state": output_records.producer_state_of(staged).withColumn(
            "run_id", F.lit(run_id)
        ),
        "consumer_offsets": processing and processing.consumer_offsets,
        "transaction_log": processing and processing.transaction_log,
    }

    def written(table: str, location: str) -> None:
        result.tables[table] = location
        log.info("run %s: wrote %s", run_id, location)
        _reached(f"wrote:{table}")

    for path in books.unreadable:
        log.error("run %s: could not read %s (listed, then unreadable)", run_id, path)
    # None: known to be empty (no Spark job for nothing); input_files is the driver's rows.
    tables = [
        TableRows(
            t,
            frames.get(t),
            TABLE_SCHEMAS[t],
            books.rows if t == "input_files" else None,
            per_input_record=t in PER_INPUT_RECORD_TABLES,
        )
        for t in DATA_TABLES
    ]
    with progress.stage(spark, run_id, "writing the tables"):
        writer.replace_runs(tables, run_id, written)
    result.batches_audited = int(summary["audited"])
    result.batches_quarantined = int(summary["quarantined"])
    result.batches_skipped = int(summary["skipped"])
    result.lines_quarantined = int(summary["lines_quarantined"])
    result.batches_read = (
        result.batches_audited + result.batches_quarantined + result.batches_skipped
    )
    result.findings_by_severity = {s: int(summary[s]) for s in SEVERITY_ORDER}
    result.findings_by_type = sorted(
        ((k.split("|")[0], k.split("|")[1], int(v)) for k, v in (summary["by_type"] or {}).items()),
        key=lambda t: (SEVERITY_ORDER.index(t[1]), t[0]),
    )
    result.status, result.error = finished_status(
        result.batches_audited,
        result.batches_quarantined,
        config.run.max_quarantined_share,
        result.batches_skipped,
        bytes_read=books.bytes_read,
        bytes_quarantined=books.bytes_quarantined,
        tolerated=books.tolerated,
        unreadable=books.unreadable,
        seeds_quarantined=int(summary["seeds_quarantined"]),
        coordinator_records_quarantined=int(summary["coordinator_records_quarantined"]),
    )


def run_audit(
    spark: SparkSession,
    inputs: AuditInputs,
    config: AuditConfig,
    warehouse: str,
    run_id: str | None = None,
) -> RunResult:
    """Audit the inputs and write findings, quarantine and the run record as Delta tables.

    The run's lifecycle (issues 12, 27): the warehouse and its tables are checked before
    anything is read; the run takes its staging folder (removing what dead runs left), settles
    every RUNNING run no living process runs, and records itself RUNNING in `audit_runs` before
    any other table is written; each table then replaces the run's rows; the last write turns
    the RUNNING row into the final status. A run killed on the way (or unable to record its end)
    stays RUNNING until the next run on the warehouse settles it, and a re-run of the same inputs
    (same default run id) replaces its rows.

    Args:
        spark: the session.
        inputs: what to audit.
        config: the run configuration.
        warehouse: directory of the Delta tables (or staging area in catalog mode).
        run_id: the run id; default: derived from the inputs and configuration (not the clock).

    Returns:
        What the run did: SUCCEEDED, NOTHING_AUDITED, QUARANTINE_EXCEEDED or INPUT_UNREADABLE
        (an executor could not read files the driver had listed). A failed run removes its rows
        from every data table, is recorded in `audit_runs` with status FAILED, and the exception
        is raised again.

    Raises:
        SinkError: the warehouse cannot be written, lies inside an input directory, holds a
            damaged Delta table or fills up (no space left on device), or another process is
            running the same run id.
        InputSchemaError: an input file cannot be read.
        InputUnreadableError: an input the run may not read (listed on the driver).

    """
    started = dt.datetime.now(dt.UTC)
    if inputs.since_state and inputs.producer_state:
        raise ConfigError(
            "--since-state seeds from the warehouse's own producer_state: leave out "
            "--producer-state, or use it without --since-state to seed from elsewhere"
        )
    # The same files given twice would be read twice (OFFSET_OVERLAP, DUPLICATE_BATCH): once,
    # with a warning, and before the run id, which the inputs decide.
    inputs = replace(inputs, batches=dedupe_paths(inputs.batches))
    run_id = run_id or default_run_id(inputs, config)
    check_warehouse(warehouse, input_paths(inputs))
    # Spark Connect: the server's Python workers run the readers and the replay; ship them the
    # client's code when they do not have this very version (a no-op on classic sessions).
    ensure_code_on_server(spark)
    has_delta = session_has_delta(spark)
    try:
        return _run(spark, inputs, config, warehouse, run_id, started, has_delta)
    except Exception as exc:
        full = disk_full_error(exc, warehouse)
        if full is None:
            raise
        raise full from exc


def _run(
    spark: SparkSession,
    inputs: AuditInputs,
    config: AuditConfig,
    warehouse: str,
    run_id: str,
    started: dt.datetime,
    has_delta: bool,
) -> RunResult:
    """`run_audit` once the warehouse is checked: stage, record, audit, record the end."""
    # A warehouse on an object store stages on this machine's disk where the executors write to
    # it too, else on the store (eos_audit.sinks.staging).
    with RunStage(warehouse, run_id, shares_driver_disk(spark)) as stage:
        writer: TableWriter = choose_writer(
            spark,
            warehouse,
            config.output.writer,
            config.output.catalog_schema,
            has_delta=has_delta,
            staging_dir=stage.subdir("tables"),
        )
        result = RunResult(run_id=run_id, status=RUNNING, writer=writer.name)
        recorder = RunRecorder(
            spark, writer, started, json.dumps(asdict(inputs), sort_keys=True), config.to_json()
        )
        recorder.settle_dead_runs(stage, run_id)
        recorder.record(result)  # RUNNING, before any other table is written
        batches = ", ".join(inputs.batches)
        log.info("run %s: reading %s (%s)", run_id, batches, inputs.batches_format)
        try:
            try:
                with replay_arrow_settings(spark):
                    _audit_and_write(spark, warehouse, inputs, config, writer, result, stage)
            except Exception as exc:
                unreadable = (
                    _staging_error(exc, stage)
                    or as_input_error(exc)
                    or disk_full_error(exc, warehouse)
                    or lost_server_error(exc, spark)
                )
                if unreadable is None:
                    raise
                raise unreadable from exc
        except (Exception, KeyboardInterrupt) as exc:
            # Anything short of the process dying is recorded; a kill leaves RUNNING behind.
            # A FAILED run keeps no rows: they go first, so that a run dying meanwhile stays
            # RUNNING (and is settled by the next) rather than FAILED with rows.
            result.status, result.error = FAILED, error_text(exc)
            recorder.remove_rows(run_id)
            recorder.record(result)
            raise
        recorder.record(result)
    return result
