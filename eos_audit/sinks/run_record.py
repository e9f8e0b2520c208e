"""The run's own row in `audit_runs`, written at its start and its end, and dead runs settled.

A run is recorded RUNNING before it writes any other table (so its rows are never without a
record) and its row is replaced by the final one when it ends. A FAILED run leaves no rows in the
data tables: they are removed before it records FAILED. A run that died RUNNING (killed, or
unable to record its end, as on a full disk) is found by the next run: every RUNNING row of
`audit_runs` whose run holds no staging lock (`eos_audit.sinks.staging`), with or without a
staging folder left behind, is settled: its partial rows are removed from every table and its
record says FAILED, why, and by whom.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from eos_audit import __version__
from eos_audit.errors import EosAuditError
from eos_audit.schemas import AUDIT_RUNS, DATA_TABLES, OUTPUT_TABLES
from eos_audit.sinks.delta import TableWriter
from eos_audit.sinks.run_status import FAILED, RUNNING
from eos_audit.sinks.staging import RunStage
from eos_audit.sources.files import filesystems as fsys

log = logging.getLogger(__name__)

# Every table a run writes besides audit_runs, in writing order, with its contract (the catalog,
# schemas.OUTPUT_TABLES).
TABLE_SCHEMAS = {name: OUTPUT_TABLES[name] for name in DATA_TABLES}


def error_text(exc: BaseException) -> str:
    """What audit_runs.error says about a failure: one line, never a JVM stack."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    text = str(exc) if isinstance(exc, EosAuditError) else f"{type(exc).__name__}: {exc}"
    lines = text.strip().splitlines() or [type(exc).__name__]
    return lines[0][:2000]


@dataclass
class RunResult:
    """What a run did: its `audit_runs` row, the CLI's summary and its exit code.

    Defined beside the recorder that writes it, so that the tables need nothing of the run
    (`eos_audit.audit.pipeline` fills it in).
    """

    run_id: str
    status: str
    writer: str
    batches_read: int = 0
    batches_audited: int = 0
    batches_quarantined: int = 0
    batches_skipped: int = 0  # below the offsets the seeding run's state covers (--since-state)
    # Lines of dump-log texts that are no part of the tool's output (quarantine input
    # dump_log_line): not batches, so in no batch count; their bytes count (input_files).
    lines_quarantined: int = 0
    # Coordinator records of types the audit does not read (a consumer group's assignments,
    # share and streams groups), by "<topic> type <n> (<name>)": counted and skipped, never an
    # error.
    coordinator_records_skipped: dict[str, int] = field(default_factory=dict)
    seeded_from_run: str | None = None
    findings_by_severity: dict[str, int] = field(default_factory=dict)
    findings_by_type: list[tuple[str, str, int]] = field(default_factory=list)
    tables: dict[str, str] = field(default_factory=dict)
    # Why a finished run is not SUCCEEDED, or what failed (audit_runs.error).
    error: str | None = None


@dataclass
class RunRecorder:
    """Writes one run's `audit_runs` row.

    Attributes:
        spark: the session.
        writer: the run's table writer.
        started: when the run started (UTC).
        inputs: the run's inputs, as JSON.
        configuration: the run's configuration, as JSON.
    """

    spark: SparkSession
    writer: TableWriter
    started: dt.datetime
    inputs: str
    configuration: str
    # Asked once, at the start: a FAILED record is written when the server may be gone (Spark
    # Connect answers `version` with a call to it).
    spark_version: str = ""

    def __post_init__(self) -> None:  # noqa: D105
        self.spark_version = self.spark_version or self.spark.version

    def row(self, result: RunResult) -> tuple:
        """The run's audit_runs row, in the contract's column order."""
        # While RUNNING, finished_at is when the start was recorded (the contract's column is
        # non-null, and a stale RUNNING row's age is what an operator wants to see).
        finished = self.started if result.status == RUNNING else dt.datetime.now(dt.UTC)
        by_severity = result.findings_by_severity
        values = {
            "run_id": result.run_id,
            "started_at": self.started,
            "finished_at": finished,
            "status": result.status,
            "package_version": __version__,
            "spark_version": self.spark_version,
            "writer": result.writer,
            "inputs": self.inputs,
            "configuration": self.configuration,
            "batches_read": result.batches_read,
            "batches_audited": result.batches_audited,
            "batches_quarantined": result.batches_quarantined,
            "batches_skipped": result.batches_skipped,
            "seeded_from_run": result.seeded_from_run,
            "findings_critical": by_severity.get("CRITICAL", 0),
            "findings_error": by_severity.get("ERROR", 0),
            "findings_warning": by_severity.get("WARNING", 0),
            "findings_info": by_severity.get("INFO", 0),
            "error": result.error,
        }
        return tuple(values[f.name] for f in AUDIT_RUNS.fields)

    def record(self, result: RunResult) -> None:
        """Replace the run's row by `result` (RUNNING at the start, the final status at the end).

        A failed run's record that cannot be written is logged, not raised: the run's own error
        matters more.
        """
        try:
            location = self.writer.replace_run_rows(
                "audit_runs", [self.row(result)], AUDIT_RUNS, result.run_id
            )
        except Exception:
            if result.status != FAILED:
                raise
            log.exception("run %s: could not record the run in audit_runs", result.run_id)
            return
        result.tables["audit_runs"] = location
        log.info("run %s: %s, recorded in %s", result.run_id, result.status, location)

    def remove_rows(self, run_id: str) -> None:
        """Remove a run's rows from every data table that exists (a FAILED run keeps none).

        Logged, not raised, when it fails: the run's own error matters more, and a run that
        stays RUNNING is settled by the next one.
        """
        for name, schema in TABLE_SCHEMAS.items():
            try:
                if self._exists(self.writer.location(name)):
                    self.writer.replace_run_rows(name, [], schema, run_id)
            except Exception:
                log.exception("run %s: could not remove its rows from %s", run_id, name)
                return

    def _exists(self, location: str) -> bool:
        if "/" not in location and "." in location:  # catalog_schema.table
            return self.spark.catalog.tableExists(location)
        if fsys.is_uri(location) and not fsys.is_remote(location):  # dbfs:, only Spark knows
            return True  # replacing no rows of a table that does not exist costs nothing wrong
        return fsys.is_delta_table(location)

    def _runs(self) -> dict[str, dict]:
        """Every run's audit_runs row as it is now, by run id (one small row per run).

        Read on the driver through delta-rs where the table is a local path or on an object
        store (no Spark job at every run's start, and no Spark connector needed), else through
        Spark; a table without rows or columns gives nothing.
        """
        location = self.writer.location("audit_runs")
        rows = None
        if "/" in location and (fsys.is_remote(location) or not fsys.is_uri(location)):
            try:
                from deltalake import DeltaTable

                table = DeltaTable(location, storage_options=fsys.delta_storage_options(location))
                rows = table.to_pyarrow_table().to_pylist()
            except Exception:  # noqa: BLE001 - features delta-rs lacks: Spark reads it
                log.debug(
                    "audit_runs not read by delta-rs; reading it through Spark", exc_info=True
                )
        if rows is None:
            from eos_audit.sinks.delta_reader import read_delta

            table = read_delta(self.spark, location)
            if "run_id" not in table.columns:
                return {}
            rows = [r.asDict() for r in table.collect()]
        return {r["run_id"]: r for r in rows}

    def settle_dead_runs(self, stage: RunStage, run_id: str) -> None:
        """Settle every run recorded RUNNING that no living process runs (issue 12, case 2).

        A run is alive while it holds its staging lock (`RunStage.is_alive`); a RUNNING row
        whose run holds none died: killed (its staging folder stays behind) or unable to record
        its end (a full disk; its folder may be gone). Its rows are removed from every table and
        its record says FAILED. A RUNNING row of this same run id needs nothing: this run
        replaces its rows.
        """
        if not self._exists(self.writer.location("audit_runs")):
            return
        running = [r for r, row in self._runs().items() if row["status"] == RUNNING and r != run_id]
        for dead_id in running:
            if stage.is_alive(dead_id):
                continue
            # Read again after the lock test: a run that finished meanwhile recorded its end
            # before it let go of its lock.
            row = self._runs().get(dead_id)
            if row is None or row["status"] != RUNNING:
                continue
            log.warning("run %s: run %s died RUNNING; removing its rows", run_id, dead_id)
            for name, schema in TABLE_SCHEMAS.items():
                if self._exists(self.writer.location(name)):
                    self.writer.replace_run_rows(name, [], schema, dead_id)
            values = row | {
                "status": FAILED,
                "finished_at": dt.datetime.now(dt.UTC),
                "error": f"died while running (killed, or could not record its end); its "
                f"partial rows were removed by run {run_id}",
            }
            failed = tuple(values.get(f.name) for f in AUDIT_RUNS.fields)
            self.writer.replace_run_rows("audit_runs", [failed], AUDIT_RUNS, dead_id)
