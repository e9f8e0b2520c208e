"""Per producer epoch, sequence against offset: the plot a Kafka engineer draws after an incident.

A healthy epoch rises steadily (each batch continues the sequence where the last one ended). The
plot has the epoch's first and last batch (producer_sessions) and every batch a finding names,
with the evidence it brings: the earlier batch of a duplicate, the last batch before a gap, the
acknowledged position of a lost write. Batches between them are not stored by the audit, so the
line joining the known batches is drawn thin.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import functions as F

from eos_audit.findings import MARK_DUPLICATE, MARK_GAP, MARK_OTHER, REGISTRY
from eos_audit.report.findings import finding_anchor, slug
from eos_audit.report.limits import ReportLimits
from eos_audit.report.tables import (
    RunTables,
    batch_ms,
    bounded_rows,
    first_rows_per_group,
    group_counts,
    key_filter,
    rows_and_total,
)

EPOCH_KEY = ("topic", "partition", "producer_id", "producer_epoch")


@dataclass(frozen=True)
class SeqPoint:
    """A batch known to be in the log: offsets and sequences it holds."""

    offset: int
    last_offset: int
    sequence: int
    last_sequence: int
    role: str  # first, last, finding, earlier


@dataclass(frozen=True)
class SeqMark:
    """A finding drawn on the plot."""

    kind: str
    href: str
    finding_type: str
    severity: str
    offset: int
    sequence: int
    last_sequence: int
    expected_sequence: int | None = None
    previous_offset: int | None = None
    time_ms: int | None = None  # the batch's time, epoch ms (UTC)


@dataclass(frozen=True)
class EpochPlot:
    """One producer epoch of one partition."""

    anchor: str
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    status: str
    findings: int
    points: list[SeqPoint] = field(default_factory=list)
    marks: list[SeqMark] = field(default_factory=list)
    omitted_marks: int = 0
    unplaced: int = 0  # findings without a batch position (a failed send)
    first_ms: int | None = None  # the epoch's first and last batch times, epoch ms (UTC)
    last_ms: int | None = None

    @property
    def x_domain(self) -> tuple[int, int]:
        """Offsets spanned by the points and marks."""
        xs = [v for p in self.points for v in (p.offset, p.last_offset)]
        xs += [v for m in self.marks for v in (m.offset, m.previous_offset) if v is not None]
        return (min(xs), max(xs)) if xs else (0, 0)

    @property
    def y_domain(self) -> tuple[int, int]:
        """Sequences spanned by the points and marks (the expected sequence included)."""
        ys = [v for p in self.points for v in (p.sequence, p.last_sequence)]
        ys += [
            v
            for m in self.marks
            for v in (m.sequence, m.last_sequence, m.expected_sequence)
            if v is not None
        ]
        return (min(ys), max(ys)) if ys else (0, 0)


@dataclass(frozen=True)
class EpochPlots:
    """The epochs drawn, and how many epochs have findings."""

    plots: list[EpochPlot]
    total_with_findings: int

    @property
    def omitted(self) -> int:
        """Epochs with findings not drawn."""
        return max(self.total_with_findings - len(self.plots), 0)


def query_epoch_plots(tables: RunTables, limits: ReportLimits) -> dict[str, Any]:
    """Producer epochs with findings (violated first, most findings first) and their findings."""
    per_epoch = F.aggregate(F.map_values("findings"), F.lit(0).cast("long"), lambda a, x: a + x)
    with_findings = tables.producer_sessions.where(F.col("status") != "clean").withColumn(
        "findings_total", per_epoch
    )
    epochs, total = rows_and_total(
        with_findings.orderBy(
            (F.col("status") == "violated").desc(), F.col("findings_total").desc(), *EPOCH_KEY
        ).select(
            *EPOCH_KEY,
            "first_offset",
            "last_offset",
            "first_sequence",
            "last_sequence",
            "status",
            "findings_total",
            "first_timestamp",
            "last_timestamp",
        ),
        limits.producer_epochs,
    )
    raw: dict[str, Any] = {"epochs": epochs, "total": total, "findings": [], "counts": {}}
    keys = [tuple(r[c] for c in EPOCH_KEY) for r in epochs]
    if not keys:
        return raw
    findings = tables.findings.where(key_filter(EPOCH_KEY, keys))
    m = limits.marks_per_chart
    raw["findings"] = bounded_rows(
        first_rows_per_group(
            findings, EPOCH_KEY, [F.col("base_offset"), F.col("finding_id")], m
        ).select(
            *EPOCH_KEY,
            "finding_id",
            "finding_type",
            "severity",
            "base_offset",
            "last_offset",
            "base_sequence",
            "last_sequence",
            "expected_sequence",
            "previous_offset",
            batch_ms().alias("batch_ms"),
        ),
        m * len(keys),
    )
    raw["counts"] = group_counts(findings, EPOCH_KEY, len(keys))
    return raw


def _evidence(f: dict) -> tuple[list[SeqPoint], SeqMark | None]:
    """The batches a finding puts on the plot, and its mark."""
    points = []
    has_batch = f["base_offset"] is not None and f["base_offset"] >= 0
    has_sequence = f["base_sequence"] is not None and f["base_sequence"] >= 0
    if not (has_batch and has_sequence):
        return points, None
    base, last = (
        f["base_sequence"],
        f["last_sequence"] if f["last_sequence"] is not None else f["base_sequence"],
    )
    finding_type = REGISTRY.get(f["finding_type"])
    # How the registry says the type is drawn; its offsets are a batch in the log unless it says
    # otherwise (an acknowledgement, a failed send).
    kind = finding_type.mark if finding_type else MARK_OTHER
    if finding_type is None or finding_type.offsets_in_log:
        points.append(SeqPoint(f["base_offset"], f["last_offset"], base, last, "finding"))
    previous = f["previous_offset"]
    if previous is not None and previous >= 0:
        if kind == MARK_DUPLICATE:  # the earlier batch holds the same sequences
            points.append(SeqPoint(previous, previous, base, last, "earlier"))
        elif kind == MARK_GAP and f["expected_sequence"] is not None:
            # The batch before the gap ended just below the sequence the leader expected.
            end = f["expected_sequence"] - 1
            points.append(SeqPoint(previous, previous, end, end, "earlier"))
    mark = SeqMark(
        kind=kind,
        href=finding_anchor(f["finding_id"]),
        finding_type=f["finding_type"],
        severity=f["severity"],
        offset=f["base_offset"],
        sequence=base,
        last_sequence=last,
        expected_sequence=f["expected_sequence"],
        previous_offset=previous,
        time_ms=f.get("batch_ms"),
    )
    return points, mark


def build_epoch_plots(raw: dict[str, Any]) -> EpochPlots:
    """Plots from `query_epoch_plots`' rows: known batches in offset order, and the marks."""
    plots = []
    for e in raw["epochs"]:
        key = tuple(e[c] for c in EPOCH_KEY)
        points: list[SeqPoint] = []
        if e["first_sequence"] is not None and e["first_offset"] is not None:
            points.append(
                SeqPoint(
                    e["first_offset"],
                    e["first_offset"],
                    e["first_sequence"],
                    e["first_sequence"],
                    "first",
                )
            )
        if e["last_sequence"] is not None and e["last_offset"] is not None:
            points.append(
                SeqPoint(
                    e["last_offset"],
                    e["last_offset"],
                    e["last_sequence"],
                    e["last_sequence"],
                    "last",
                )
            )
        marks = []
        rows = [f for f in raw["findings"] if tuple(f[c] for c in EPOCH_KEY) == key]
        for f in rows:
            found, mark = _evidence(f)
            points += found
            if mark is not None:
                marks.append(mark)
        # One point per offset: the most specific role wins (a finding over first/last).
        rank = {"finding": 0, "earlier": 1, "first": 2, "last": 3}
        unique: dict[int, SeqPoint] = {}
        for p in sorted(points, key=lambda p: rank[p.role]):
            unique.setdefault(p.offset, p)
        plots.append(
            EpochPlot(
                anchor="e-" + slug(*key),
                topic=e["topic"],
                partition=int(e["partition"]),
                producer_id=int(e["producer_id"]),
                producer_epoch=int(e["producer_epoch"]),
                status=e["status"],
                findings=int(e["findings_total"]),
                points=sorted(unique.values(), key=lambda p: (p.offset, p.sequence)),
                marks=marks,
                omitted_marks=raw["counts"].get(key, 0) - len(rows),
                unplaced=len(rows) - len(marks),
                first_ms=e.get("first_timestamp"),
                last_ms=e.get("last_timestamp"),
            )
        )
    return EpochPlots(plots, int(raw["total"]))
