"""The run's own row in `audit_runs`, written at its start and its end, and dead runs settled.

A run is recorded RUNNING before it writes any other table (so its rows are never without a
record) and its row is replaced by the final one when it ends. A run that died RUNNING is found
by the next run through its staging folder's unheld lock (`eos_audit.sinks.staging`); its
partial rows are removed from every table and its record says FAILED, why, and by whom.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from eos_audit import __version__
from eos_audit.errors import EosAuditError
from eos_audit.schemas import (
    AUDIT_RUNS,
    FINDINGS,
    INPUT_FILES,
    LIST_OFFSETS_ERRORS,
    PARTITION_SUMMARY,
    PRODUCER_SESSIONS,
    PRODUCER_STATE,
    QUARANTINE,
    TRANSACTIONS,
)
from eos_audit.sinks.delta import TableWriter
from eos_audit.sinks.run_status import FAILED, RUNNING
from eos_audit.sinks.staging import DeadRun

if TYPE_CHECKING:
    from eos_audit.pipeline import RunResult

log = logging.getLogger(__name__)

# Every table a run writes besides audit_runs, in writing order, with its contract.
TABLE_SCHEMAS = {
    "findings": FINDINGS,
    "quarantine": QUARANTINE,
    "transactions": TRANSACTIONS,
    "partition_summary": PARTITION_SUMMARY,
    "producer_sessions": PRODUCER_SESSIONS,
    "list_offsets_errors": LIST_OFFSETS_ERRORS,
    "producer_state": PRODUCER_STATE,
    "input_files": INPUT_FILES,
}
DATA_TABLES = tuple(TABLE_SCHEMAS)


def error_text(exc: BaseException) -> str:
    """What audit_runs.error says about a failure: one line, never a JVM stack."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    text = str(exc) if isinstance(exc, EosAuditError) else f"{type(exc).__name__}: {exc}"
    lines = text.strip().splitlines() or [type(exc).__name__]
    return lines[0][:2000]


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
            "spark_version": self.spark.version,
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

    def settle_dead_runs(self, dead_runs: Iterable[DeadRun], run_id: str) -> None:
        """Remove the rows of runs that died RUNNING and record them FAILED (issue 12, case 2).

        A dead run of this same run id needs nothing: this run replaces its rows. A dead run that
        had finished (it died removing its staging folder) keeps its rows.
        """
        from eos_audit.sources.contract_reader import read_delta

        for dead in dead_runs:
            if dead.run_id is None or dead.run_id == run_id:
                continue
            try:
                table = read_delta(self.spark, self.writer.location("audit_runs"))
                row = table.where(F.col("run_id") == dead.run_id).limit(1).head()
            except Exception:  # noqa: BLE001 - no table yet: nothing was written by that run
                log.debug("no audit_runs to settle %s in", dead.run_id, exc_info=True)
                continue
            if row is None or row["status"] != RUNNING:
                continue
            log.warning("run %s: run %s died RUNNING; removing its rows", run_id, dead.run_id)
            for name, schema in TABLE_SCHEMAS.items():
                self.writer.replace_run_rows(name, [], schema, dead.run_id)
            values = row.asDict() | {
                "status": FAILED,
                "finished_at": dt.datetime.now(dt.UTC),
                "error": f"died while running (killed?); its partial rows were removed by run "
                f"{run_id}",
            }
            failed = tuple(values[f.name] for f in AUDIT_RUNS.fields)
            self.writer.replace_run_rows("audit_runs", [failed], AUDIT_RUNS, dead.run_id)
