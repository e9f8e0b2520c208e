"""The run at the top of the report: inputs, configuration, counts that must reconcile, coverage."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import functions as F

from eos_audit.findings import SEVERITY_ORDER, failing_findings
from eos_audit.report.limits import ReportLimits
from eos_audit.report.tables import RunTables, bounded_rows
from eos_audit.sinks.run_status import SUCCEEDED


@dataclass(frozen=True)
class Check:
    """One count the run must reconcile: `expected` (recorded) against `actual` (in the tables)."""

    statement: str
    expected: int
    actual: int

    @property
    def ok(self) -> bool:
        """Whether both sides agree."""
        return self.expected == self.actual


@dataclass(frozen=True)
class Coverage:
    """How much of the audited log carried producer ids: a clean result at 0 proves nothing."""

    partitions: int
    batches: int
    batches_with_producer_id: int
    partitions_below_full: int
    lowest: list[tuple[str, int, int, float]] = field(default_factory=list)

    @property
    def share(self) -> float | None:
        """Batches carrying a producer id, over all audited batches (None: nothing audited)."""
        return self.batches_with_producer_id / self.batches if self.batches else None


@dataclass(frozen=True)
class RunOverview:
    """The run's record, its checks and its coverage."""

    run_id: str
    status: str
    error: str | None
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    writer: str
    versions: str
    inputs: dict[str, Any]
    configuration: list[tuple[str, str]]
    batches_read: int
    batches_audited: int
    batches_quarantined: int
    batches_skipped: int
    findings_by_severity: dict[str, int]
    quarantine_by_input: dict[str, int]
    checks: list[Check]
    coverage: Coverage

    @property
    def findings_total(self) -> int:
        """Findings of every severity, as recorded."""
        return sum(self.findings_by_severity.values())

    def failure(self, fail_on: str) -> str | None:
        """Why this run fails a scheduled job at `fail_on`, or None when it passes.

        The same rule as the CLI's exit code: a run that did not succeed (failed, still running,
        audited nothing, quarantined too much) fails whatever the threshold; otherwise a finding
        at or above `fail_on` (critical, error, warning; never: none) fails it.

        Args:
            fail_on: the threshold, as `--fail-on` takes it.
        """
        if self.status != SUCCEEDED:
            return f"status {self.status}" + (f": {self.error}" if self.error else "")
        found = failing_findings(self.findings_by_severity, fail_on)
        if not found:
            return None
        counts = ", ".join(f"{n} {s}" for s, n in found.items())
        return f"findings at or above {fail_on}: {counts}"


def query_overview(tables: RunTables, limits: ReportLimits) -> dict[str, Any]:
    """The few rows behind the overview: the run record, the counts it must match, coverage.

    The counts (findings per severity, quarantine rows per input, partition_summary totals) come
    from one job: three small aggregates unioned.

    Returns:
        `run` (the audit_runs row or None), `counts` (kind, key, n) rows and `lowest_coverage`.
    """
    summary = tables.partition_summary
    totals = summary.agg(
        F.count(F.lit(1)).alias("partitions"),
        F.coalesce(F.sum("batches"), F.lit(0)).alias("batches"),
        F.coalesce(F.sum("replica_batches"), F.lit(0)).alias("replica_batches"),
        F.coalesce(F.sum("batches_skipped"), F.lit(0)).alias("batches_skipped"),
        F.coalesce(F.sum("batches_with_producer_id"), F.lit(0)).alias("batches_with_producer_id"),
        F.count(F.when(F.col("coverage") < 1.0, 1)).alias("partitions_below_full"),
    )
    names = ["partitions", "batches", "replica_batches", "batches_skipped",
             "batches_with_producer_id", "partitions_below_full"]  # fmt: skip
    counts = (
        tables.findings.groupBy(F.lit("severity").alias("kind"), F.col("severity").alias("key"))
        .agg(F.count(F.lit(1)).alias("n"))
        .unionByName(
            tables.quarantine.groupBy(
                F.lit("quarantine").alias("kind"), F.col("input").alias("key")
            ).agg(F.count(F.lit(1)).alias("n"))
        )
        .unionByName(
            totals.select(
                F.explode(F.create_map(*[x for c in names for x in (F.lit(c), F.col(c))])).alias(
                    "key", "n"
                )
            ).select(F.lit("partitions").alias("kind"), "key", "n")
        )
    )
    runs = bounded_rows(tables.audit_runs, 1)
    return {
        "run": runs[0] if runs else None,
        "counts": bounded_rows(counts, 1000),
        "lowest_coverage": bounded_rows(
            summary.where(F.col("coverage") < 1.0)
            .orderBy("coverage", "topic", "partition")
            .select("topic", "partition", "batches", "coverage"),
            limits.offenders,
        ),
    }


def _flatten(prefix: str, value: Any) -> list[tuple[str, str]]:
    if isinstance(value, dict):
        return [kv for k in sorted(value) for kv in _flatten(f"{prefix}{k}.", value[k])]
    return [(prefix.rstrip("."), json.dumps(value) if not isinstance(value, str) else value)]


def _json(text: str | None) -> Any:
    try:
        return json.loads(text) if text else {}
    except ValueError:  # an older or hand-written record: show it as it is
        return {"(unparsed)": text}


def build_overview(raw: dict[str, Any], run_id: str) -> RunOverview:
    """The overview of one run from `query_overview`'s rows.

    Args:
        raw: what `query_overview` returned.
        run_id: the run (used when its record is missing).

    Returns:
        The overview; the checks say whether the recorded counts match the tables.
    """
    run = raw["run"] or {}

    def counts(kind: str) -> dict[str, int]:
        return {r["key"]: int(r["n"]) for r in raw["counts"] if r["kind"] == kind}

    by_severity = counts("severity")
    quarantine = counts("quarantine")
    parts = counts("partitions")
    recorded = {s: int(run.get(f"findings_{s.lower()}") or 0) for s in SEVERITY_ORDER}
    read = int(run.get("batches_read") or 0)
    audited = int(run.get("batches_audited") or 0)
    quarantined = int(run.get("batches_quarantined") or 0)
    # Runs recorded before --since-state existed have no batches_skipped: none were skipped.
    skipped = int(run.get("batches_skipped") or 0)
    in_summary = int(parts.get("batches") or 0) + int(parts.get("replica_batches") or 0)
    checks = [
        Check(
            "batches read = audited + quarantined + skipped (--since-state)",
            read,
            audited + quarantined + skipped,
        ),
        Check(
            "batches skipped = batches_skipped of partition_summary",
            skipped,
            int(parts.get("batches_skipped") or 0),
        ),
        Check(
            "batches quarantined = record_batch rows in quarantine",
            quarantined,
            quarantine.get("record_batch", 0),
        ),
        Check("batches audited = batches of partition_summary (all replicas)", audited, in_summary),
        *[
            Check(
                f"{s} findings recorded = {s} rows in findings", recorded[s], by_severity.get(s, 0)
            )
            for s in SEVERITY_ORDER
        ],
    ]
    versions = ", ".join(
        f"{name} {run[key]}"
        for name, key in (("eos-audit", "package_version"), ("Spark", "spark_version"))
        if run.get(key)
    )
    return RunOverview(
        run_id=run.get("run_id") or run_id,
        status=run.get("status") or "NOT RECORDED",
        error=run.get("error"),
        started_at=run.get("started_at"),
        finished_at=run.get("finished_at"),
        writer=run.get("writer") or "",
        versions=versions,
        inputs={k: v for k, v in _json(run.get("inputs")).items() if v not in (None, [], "")},
        configuration=_flatten("", _json(run.get("configuration"))),
        batches_read=read,
        batches_audited=audited,
        batches_quarantined=quarantined,
        batches_skipped=skipped,
        findings_by_severity=recorded,
        quarantine_by_input=quarantine,
        checks=checks,
        coverage=Coverage(
            partitions=int(parts.get("partitions") or 0),
            batches=int(parts.get("batches") or 0),
            batches_with_producer_id=int(parts.get("batches_with_producer_id") or 0),
            partitions_below_full=int(parts.get("partitions_below_full") or 0),
            lowest=[
                (r["topic"], int(r["partition"]), int(r["batches"]), float(r["coverage"]))
                for r in raw["lowest_coverage"]
            ],
        ),
    )
