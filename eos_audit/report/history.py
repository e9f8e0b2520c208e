"""The runs before this one in the same warehouse: getting worse or better, and what is new.

A nightly job writes one run a night into the same tables. The history shows the latest runs up to
this one (findings per severity and batches audited as recorded in `audit_runs`, durations), and
for this run's findings whether an earlier finished run of that window reported the same finding
id (`finding_id` is deterministic: the same batch and type give the same id every night).

Bounded as the rest of the report: `audit_runs` rows are read up to `ReportLimits.history_runs`,
and the comparison with earlier runs is one aggregate (a join on finding ids restricted to the
earlier runs shown) that brings counts per finding type to the driver, never the findings.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from eos_audit.findings import SEVERITY_ORDER
from eos_audit.report.findings import FindingGroup
from eos_audit.report.limits import ReportLimits
from eos_audit.report.tables import TableLocation, bounded_rows, read_table, rows_and_total
from eos_audit.sinks.run_status import FINISHED


@dataclass(frozen=True)
class HistoryRun:
    """One run of the warehouse, as `audit_runs` records it."""

    run_id: str
    status: str
    started_ms: int
    finished_ms: int
    batches_audited: int
    findings: dict[str, int]
    is_current: bool = False

    @property
    def duration_s(self) -> float:
        """Seconds from start to finish (0 for a run still RUNNING)."""
        return max(self.finished_ms - self.started_ms, 0) / 1000

    @property
    def findings_total(self) -> int:
        """Findings of every severity."""
        return sum(self.findings.values())


@dataclass(frozen=True)
class History:
    """The latest runs up to this one, and this run's findings against the earlier ones."""

    runs: list[HistoryRun]  # oldest first; the last is this run
    total_runs: int  # runs that started up to this one, shown or not
    compared: list[str] = field(default_factory=list)  # earlier finished runs compared with
    new_by_type: dict[str, int] = field(default_factory=dict)
    seen_by_type: dict[str, int] = field(default_factory=dict)

    @property
    def omitted(self) -> int:
        """Earlier runs not shown (older than the window)."""
        return max(self.total_runs - len(self.runs), 0)

    @property
    def new_total(self) -> int:
        """Findings of this run that no earlier run compared with reported."""
        return sum(self.new_by_type.values())

    @property
    def seen_total(self) -> int:
        """Findings of this run that an earlier run already reported."""
        return sum(self.seen_by_type.values())


def _run_columns() -> list:
    # Times leave Spark as epoch ms: a collected TIMESTAMP is in the driver's local zone.
    return [
        "run_id",
        "status",
        F.unix_millis("started_at").alias("started_ms"),
        F.unix_millis("finished_at").alias("finished_ms"),
        "batches_audited",
        *[f"findings_{s.lower()}" for s in SEVERITY_ORDER],
    ]


def _new_and_seen(findings: DataFrame, run_id: str, compared: list[str]) -> list[dict]:
    """Per finding type, this run's findings new and seen in `compared` (one aggregate)."""
    this_run = findings.where(F.col("run_id") == run_id).select("finding_id", "finding_type")
    if not compared:
        return bounded_rows(
            this_run.groupBy("finding_type").agg(
                F.count(F.lit(1)).alias("new"), F.lit(0).cast("long").alias("seen")
            ),
            1000,
        )
    earlier = (
        findings.where(F.col("run_id").isin(*compared))
        .select("finding_id", F.lit(True).alias("was_seen"))
        .dropDuplicates(["finding_id"])
    )
    joined = this_run.join(earlier, "finding_id", "left")
    return bounded_rows(
        joined.groupBy("finding_type").agg(
            F.count(F.when(F.col("was_seen").isNull(), 1)).alias("new"),
            F.count(F.when(F.col("was_seen"), 1)).alias("seen"),
        ),
        1000,
    )


def query_history(
    spark: SparkSession, where: TableLocation, run_id: str, limits: ReportLimits
) -> dict[str, Any]:
    """The latest runs up to `run_id` and this run's findings, new or seen before, by type.

    Runs are ordered by when they started; the window is the latest `limits.history_runs` of
    those that started no later than this one (a report of an older run shows its own past).

    Returns:
        `runs` (audit_runs rows, newest first), `total` (runs up to this one), `compared` (the
        earlier finished runs of the window) and `by_type` (finding_type, new, seen) rows.
    """
    runs = read_table(spark, where, "audit_runs")
    this = bounded_rows(
        runs.where(F.col("run_id") == run_id).select(F.unix_millis("started_at").alias("ms")), 1
    )
    if not this:
        return {"runs": [], "total": 0, "compared": [], "by_type": []}
    up_to = runs.where(
        (F.unix_millis("started_at") < this[0]["ms"])
        | ((F.unix_millis("started_at") == this[0]["ms"]) & (F.col("run_id") <= run_id))
    )
    window, total = rows_and_total(
        up_to.orderBy(F.col("started_at").desc(), F.col("run_id").desc()).select(*_run_columns()),
        max(limits.history_runs, 1),
    )
    compared = [r["run_id"] for r in window if r["run_id"] != run_id and r["status"] in FINISHED]
    findings = read_table(spark, where, "findings")
    return {
        "runs": window,
        "total": total,
        "compared": compared,
        "by_type": _new_and_seen(findings, run_id, compared),
    }


def query_seen_before(
    spark: SparkSession, where: TableLocation, compared: list[str], finding_ids: list[str]
) -> dict[str, int]:
    """For the findings the report lists, in how many of the `compared` runs each was reported.

    Args:
        spark: the session.
        where: the tables' location.
        compared: earlier finished runs (`History.compared`).
        finding_ids: the listed findings (a few hundred at most: `findings_per_type` per type).

    Returns:
        Earlier runs per finding id, for the ids an earlier run reported.
    """
    if not compared or not finding_ids:
        return {}
    rows = bounded_rows(
        read_table(spark, where, "findings")
        .where(F.col("run_id").isin(*compared) & F.col("finding_id").isin(*finding_ids))
        .groupBy("finding_id")
        .agg(F.count_distinct("run_id").alias("runs")),
        len(finding_ids),
    )
    return {r["finding_id"]: int(r["runs"]) for r in rows}


def build_history(raw: dict[str, Any], run_id: str) -> History:
    """The history from `query_history`'s rows (runs oldest first)."""
    runs = [
        HistoryRun(
            run_id=r["run_id"],
            status=r["status"],
            started_ms=int(r["started_ms"]),
            finished_ms=int(r["finished_ms"] if r["finished_ms"] is not None else r["started_ms"]),
            batches_audited=int(r["batches_audited"] or 0),
            findings={s: int(r[f"findings_{s.lower()}"] or 0) for s in SEVERITY_ORDER},
            is_current=r["run_id"] == run_id,
        )
        for r in reversed(raw["runs"])
    ]
    return History(
        runs=runs,
        total_runs=int(raw["total"]),
        compared=list(raw["compared"]),
        new_by_type={r["finding_type"]: int(r["new"]) for r in raw["by_type"]},
        seen_by_type={r["finding_type"]: int(r["seen"]) for r in raw["by_type"]},
    )


def mark_seen_before(
    groups: list[FindingGroup], history: History, seen: dict[str, int]
) -> list[FindingGroup]:
    """The listed findings marked new or seen before (left unmarked when no run was compared)."""
    if not history.compared:
        return groups
    return [
        replace(
            g,
            items=[replace(f, seen_before=f.finding_id in seen) for f in g.items],
        )
        for g in groups
    ]
