"""ListOffsets observations against time, with regressions and failed answers marked.

The findings carry each regression's evidence (the earlier, higher observation and when the
offset recovered). The observations themselves are not an output table: when the run's
`--list-offsets` inputs are still readable, they are read again and drawn as a band per time
bucket (lowest and highest offset answered), for a few partitions only.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from eos_audit.findings import RAISED_BY_LIST_OFFSETS
from eos_audit.instants import epoch_millis
from eos_audit.report.findings import finding_anchor
from eos_audit.report.limits import ReportLimits
from eos_audit.report.tables import (
    RunTables,
    bounded_rows,
    key_filter,
    rows_and_total,
    severity_rank,
)
from eos_audit.report.transactions import bucket_width

log = logging.getLogger(__name__)


def parse_time_ms(text: str | None) -> int | None:
    """Epoch milliseconds of an evidence time ("2026-11-21 00:01:00", ISO-8601; UTC if no zone)."""
    if not text:
        return None
    try:
        return epoch_millis(text)
    except ValueError:
        return None


@dataclass(frozen=True)
class OffsetPoint:
    """Observations of one time bucket: the lowest and highest offset answered."""

    time_ms: int
    low: int
    high: int
    observations: int


@dataclass(frozen=True)
class OffsetLine:
    """Observations of one spec and isolation level of a partition."""

    spec: str
    isolation: str | None
    points: list[OffsetPoint]


@dataclass(frozen=True)
class OffsetMark:
    """A regression (or acknowledged data missing from the log) at the observation that shows it."""

    href: str
    finding_type: str
    severity: str
    cause: str | None
    time_ms: int
    offset: int
    earlier_time_ms: int | None = None
    earlier_offset: int | None = None
    recovered_ms: int | None = None
    log_end_offset: int | None = None


@dataclass(frozen=True)
class ErrorWindow:
    """Failed ListOffsets answers of one kind: retriable, not regressions."""

    error: str
    spec: str
    first_ms: int
    last_ms: int
    observations: int


@dataclass(frozen=True)
class OffsetSeries:
    """One partition's chart."""

    topic: str
    partition: int
    lines: list[OffsetLine] = field(default_factory=list)
    marks: list[OffsetMark] = field(default_factory=list)
    errors: list[ErrorWindow] = field(default_factory=list)

    @property
    def time_domain(self) -> tuple[int, int]:
        """Times spanned by everything drawn."""
        ts = [p.time_ms for line in self.lines for p in line.points]
        for m in self.marks:
            ts += [t for t in (m.time_ms, m.earlier_time_ms, m.recovered_ms) if t is not None]
        ts += [t for e in self.errors for t in (e.first_ms, e.last_ms)]
        return (min(ts), max(ts)) if ts else (0, 0)

    @property
    def offset_domain(self) -> tuple[int, int]:
        """Offsets spanned by everything drawn."""
        vs = [v for line in self.lines for p in line.points for v in (p.low, p.high)]
        for m in self.marks:
            vs += [v for v in (m.offset, m.earlier_offset, m.log_end_offset) if v is not None]
        return (min(vs), max(vs)) if vs else (0, 0)


@dataclass(frozen=True)
class ListOffsetsView:
    """The ListOffsets section: per-partition charts and what could not be drawn."""

    series: list[OffsetSeries]
    regressions_total: int
    errors_total: int
    observations_note: str
    omitted_partitions: int = 0

    @property
    def has_content(self) -> bool:
        """Whether the run had ListOffsets observations at all."""
        return bool(self.series) or self.regressions_total > 0 or self.errors_total > 0


def _observations(spark: SparkSession, inputs: dict[str, Any]) -> tuple[DataFrame | None, str]:
    """The run's observations read again from its inputs, or why they cannot be."""
    paths = list(inputs.get("list_offsets") or [])
    if not paths:
        return None, "the run had no --list-offsets input"
    missing = [p for p in paths if "://" not in p and not Path(p).exists()]
    if missing:
        return None, f"observations not drawn: {', '.join(missing)} no longer exist(s)"
    from eos_audit.sources.evidence.list_offsets import SOURCE_ERROR, read_list_offsets

    try:
        df = read_list_offsets(
            spark,
            paths,
            fmt=inputs.get("list_offsets_format") or "auto",
            spec=inputs.get("list_offsets_spec") or "latest",
        )
    except Exception as exc:  # noqa: BLE001 - the report still shows the findings' evidence
        log.warning("report: could not read the ListOffsets inputs again: %s", exc)
        return None, f"observations not drawn: reading {', '.join(paths)} failed ({exc})"
    usable = df.where(F.col(SOURCE_ERROR).isNull() & F.col("offset").isNotNull())
    return usable, "observations read again from " + ", ".join(paths)


def query_list_offsets(
    spark: SparkSession, tables: RunTables, inputs: dict[str, Any], limits: ReportLimits
) -> dict[str, Any]:
    """Offset findings, error counts and (when readable) bucketed observations of a few partitions.

    Args:
        spark: the session.
        tables: the run's tables.
        inputs: the run's recorded inputs (`audit_runs.inputs`).
        limits: the report's limits.
    """
    offset_findings = tables.findings.where(F.col("finding_type").isin(*RAISED_BY_LIST_OFFSETS))
    marks, marks_total = rows_and_total(
        offset_findings.orderBy(severity_rank(), "topic", "partition", "batch_timestamp").select(
            "finding_id", "finding_type", "severity", "cause", "topic", "partition",
            "base_offset", "previous_offset", "batch_timestamp", "evidence",
        ),
        limits.marks_per_chart,
    )  # fmt: skip
    errors, errors_total = rows_and_total(
        tables.list_offsets_errors.orderBy(F.col("observations").desc(), "topic", "partition")
        .select("topic", "partition", "spec", "error", "observations",
                F.unix_millis("first_observed_at").alias("first_ms"),
                F.unix_millis("last_observed_at").alias("last_ms")),
        limits.marks_per_chart,
    )  # fmt: skip
    raw: dict[str, Any] = {
        "marks": marks,
        "marks_total": marks_total,
        "errors": errors,
        "errors_total": errors_total,
        "points": [],
        "partitions_observed": 0,
    }
    chosen: list[tuple[str, int]] = []
    for r in raw["marks"]:
        if (r["topic"], r["partition"]) not in chosen:
            chosen.append((r["topic"], r["partition"]))
    chosen = chosen[: limits.offset_series]
    observations, raw["note"] = _observations(spark, inputs)
    if observations is not None:
        observations = observations.withColumn("t", F.unix_millis("observed_at"))
        # How many partitions were observed, and when: one aggregate.
        span = bounded_rows(
            observations.agg(
                F.count_distinct("topic", "partition").alias("partitions"),
                F.min("t").alias("start"),
                F.max("t").alias("end"),
            ),
            1,
        )[0]
        raw["partitions_observed"] = span["partitions"]
        if len(chosen) < limits.offset_series and span["partitions"] > len(chosen):
            keys = (
                observations.select("topic", "partition").distinct().orderBy("topic", "partition")
            )
            for r in bounded_rows(keys, limits.offset_series * 2):
                if (r["topic"], r["partition"]) not in chosen and len(
                    chosen
                ) < limits.offset_series:
                    chosen.append((r["topic"], r["partition"]))
        if span["start"] is not None:
            raw["points"] = _bucketed(observations, chosen, span["start"], span["end"], limits)
    raw["chosen"] = chosen
    return raw


def _bucketed(
    observations: DataFrame,
    chosen: list[tuple[str, int]],
    start: int,
    end: int,
    limits: ReportLimits,
) -> list[dict]:
    """Lowest and highest offset per (partition, spec, isolation, time bucket) of `chosen`."""
    if not chosen:
        return []
    width = bucket_width(start, end, limits.time_buckets)
    bucket = F.floor((F.col("t") - F.lit(start)) / width)
    return bounded_rows(
        observations.where(key_filter(("topic", "partition"), chosen))
        .groupBy("topic", "partition", "spec", "isolation", bucket.alias("b"))
        .agg(
            F.min("offset").alias("low"),
            F.max("offset").alias("high"),
            F.count(F.lit(1)).alias("n"),
            # The bucket's time: its first observation (exact when a bucket holds one answer).
            F.min("t").alias("time_ms"),
        )
        .orderBy("topic", "partition", "spec", "isolation", "b"),
        # Three specs and two isolation levels at most per partition.
        len(chosen) * 6 * (limits.time_buckets + 1),
    )


def _mark(r: dict) -> OffsetMark:
    evidence = r["evidence"] or {}

    def as_int(name: str) -> int | None:
        value = evidence.get(name)
        return int(value) if value not in (None, "") else None

    return OffsetMark(
        href=finding_anchor(r["finding_id"]),
        finding_type=r["finding_type"],
        severity=r["severity"],
        cause=r["cause"],
        time_ms=r["batch_timestamp"],
        offset=r["base_offset"],
        earlier_time_ms=parse_time_ms(evidence.get("earlier_max_observed_at")),
        earlier_offset=r["previous_offset"],
        recovered_ms=parse_time_ms(evidence.get("recovered_at")),
        log_end_offset=as_int("exported_log_end_offset"),
    )


def build_list_offsets_view(raw: dict[str, Any]) -> ListOffsetsView:
    """Per-partition charts from `query_list_offsets`' rows, in the order chosen there."""
    series = []
    for topic, partition in raw["chosen"]:
        lines: dict[tuple[str, str | None], list[OffsetPoint]] = {}
        for r in raw["points"]:
            if (r["topic"], r["partition"]) == (topic, partition):
                lines.setdefault((r["spec"], r["isolation"]), []).append(
                    OffsetPoint(r["time_ms"], r["low"], r["high"], r["n"])
                )
        series.append(
            OffsetSeries(
                topic=topic,
                partition=int(partition),
                lines=[
                    OffsetLine(s, i, sorted(p, key=lambda x: x.time_ms))
                    for (s, i), p in sorted(
                        lines.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")
                    )
                ],
                marks=[
                    _mark(r)
                    for r in raw["marks"]
                    if (r["topic"], r["partition"]) == (topic, partition)
                ],
                errors=[
                    ErrorWindow(
                        r["error"], r["spec"], r["first_ms"], r["last_ms"], r["observations"]
                    )
                    for r in raw["errors"]
                    if (r["topic"], r["partition"]) == (topic, partition)
                ],
            )
        )
    with_regressions = {(r["topic"], r["partition"]) for r in raw["marks"]}
    observed = max(int(raw.get("partitions_observed") or 0), len(with_regressions))
    return ListOffsetsView(
        series=series,
        regressions_total=int(raw["marks_total"]),
        errors_total=int(raw["errors_total"]),
        observations_note=raw["note"],
        omitted_partitions=max(observed - len(series), 0),
    )
