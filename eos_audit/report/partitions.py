"""Per partition, the audited log as a line of offsets with what happened on it.

Producer epochs, unfinished transactions and findings are placed at their offsets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import functions as F

from eos_audit.findings import SEVERITY_ORDER
from eos_audit.report.findings import finding_anchor, partition_anchor
from eos_audit.report.limits import ReportLimits
from eos_audit.report.tables import (
    RunTables,
    batch_ms,
    bounded_rows,
    first_rows_per_group,
    group_counts,
    key_filter,
    severity_rank,
)

PARTITION_KEY = ("topic", "partition")


@dataclass(frozen=True)
class Span:
    """Something that covers offsets `start`..`end` of a partition, drawn on lane `lane`."""

    label: str
    start: int
    end: int
    kind: str
    lane: int = 0


@dataclass(frozen=True)
class Mark:
    """A finding placed at its batch's offsets."""

    href: str
    finding_type: str
    severity: str
    start: int
    end: int
    time_ms: int | None = None  # the batch's time, epoch ms (UTC)


@dataclass(frozen=True)
class PartitionTimeline:
    """One partition's log with what happened on it."""

    anchor: str
    topic: str
    partition: int
    first_offset: int | None
    last_offset: int | None
    batches: int
    coverage: float | None
    findings: int
    epochs: list[Span] = field(default_factory=list)
    transactions: list[Span] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    omitted_epochs: int = 0
    omitted_transactions: int = 0
    omitted_marks: int = 0
    # The times of the log's producer batches at its ends, epoch ms (from producer_sessions:
    # batches without a producer id carry no time the audit keeps).
    first_ms: int | None = None
    last_ms: int | None = None

    @property
    def lanes(self) -> int:
        """Lanes the producer epochs need so that overlapping epochs do not hide each other."""
        return max((s.lane for s in self.epochs), default=-1) + 1

    @property
    def domain(self) -> tuple[int, int]:
        """The offsets the chart spans: the log, widened to every span and mark."""
        values = [v for v in (self.first_offset, self.last_offset) if v is not None]
        for item in [*self.epochs, *self.transactions, *self.marks]:
            values += [item.start, item.end]
        return (min(values), max(values)) if values else (0, 0)


@dataclass(frozen=True)
class PartitionTimelines:
    """The partitions drawn, and how many there are."""

    timelines: list[PartitionTimeline]
    total_partitions: int

    @property
    def omitted(self) -> int:
        """Partitions not drawn."""
        return max(self.total_partitions - len(self.timelines), 0)


def _findings_total() -> Any:
    cols = [F.col(f"findings_{s.lower()}") for s in SEVERITY_ORDER]
    return sum(cols[1:], cols[0])


def query_partition_timelines(tables: RunTables, limits: ReportLimits) -> dict[str, Any]:
    """The partitions with the most findings, and what lies on their logs (bounded per partition).

    Returns:
        `partitions` (partition_summary rows), `epochs`, `transactions` and `marks` (the first
        rows of each partition) and `counts` of each per partition.
    """
    severities = [F.col(f"findings_{s.lower()}").desc() for s in SEVERITY_ORDER]
    partitions = bounded_rows(
        tables.partition_summary.withColumn("findings", _findings_total())
        .orderBy(*severities, "topic", "partition")
        .select(
            "topic", "partition", "first_offset", "last_offset", "batches", "coverage", "findings"
        ),
        limits.partitions,
    )
    keys = [(r["topic"], r["partition"]) for r in partitions]
    raw: dict[str, Any] = {
        "partitions": partitions,
        "epochs": [],
        "transactions": [],
        "marks": [],
        "counts": {},
        "times": [],
    }
    if not keys:
        return raw
    chosen = key_filter(PARTITION_KEY, keys)
    n = limits.spans_per_partition
    epochs = tables.producer_sessions.where(chosen & F.col("first_offset").isNotNull())
    unfinished = tables.transactions.where(
        chosen
        & F.col("first_offset").isNotNull()
        & ((F.col("outcome") != "COMMIT") | F.col("hanging"))
    )
    marks = tables.findings.where(chosen & (F.col("base_offset") >= 0))
    raw["epochs"] = bounded_rows(
        first_rows_per_group(
            epochs,
            PARTITION_KEY,
            [F.col("first_offset"), F.col("producer_id"), F.col("producer_epoch")],
            n,
        ).select(
            "topic",
            "partition",
            "producer_id",
            "producer_epoch",
            "first_offset",
            "last_offset",
            "status",
        ),
        n * len(keys),
    )
    raw["transactions"] = bounded_rows(
        first_rows_per_group(unfinished, PARTITION_KEY, [F.col("first_offset")], n).select(
            "topic",
            "partition",
            "producer_id",
            "first_offset",
            "marker_offset",
            "outcome",
            "hanging",
        ),
        n * len(keys),
    )
    m = limits.marks_per_chart
    raw["marks"] = bounded_rows(
        first_rows_per_group(
            marks, PARTITION_KEY, [severity_rank(), F.col("base_offset")], m
        ).select(
            "topic",
            "partition",
            "finding_id",
            "finding_type",
            "severity",
            "base_offset",
            "last_offset",
            batch_ms().alias("batch_ms"),
        ),
        m * len(keys),
    )
    raw["times"] = bounded_rows(
        tables.producer_sessions.where(chosen)
        .groupBy(*PARTITION_KEY)
        .agg(F.min("first_timestamp").alias("first_ms"), F.max("last_timestamp").alias("last_ms")),
        len(keys),
    )
    # How many of each there are, to say what was cut: one aggregate for the three.
    kinds = [("epochs", epochs), ("transactions", unfinished), ("marks", marks)]
    union = None
    for kind, df in kinds:
        part = df.select(F.lit(kind).alias("kind"), *PARTITION_KEY)
        union = part if union is None else union.unionByName(part)
    counts = group_counts(union, ("kind", *PARTITION_KEY), len(kinds) * len(keys))
    raw["counts"] = {
        kind: {key[1:]: n for key, n in counts.items() if key[0] == kind} for kind, _ in kinds
    }
    return raw


def assign_lanes(spans: list[Span]) -> list[Span]:
    """Put overlapping spans on separate lanes, each on the lowest free lane (in start order)."""
    lane_ends: list[int] = []
    placed = []
    for span in sorted(spans, key=lambda s: (s.start, s.end, s.label)):
        lane = next((i for i, end in enumerate(lane_ends) if end < span.start), len(lane_ends))
        if lane == len(lane_ends):
            lane_ends.append(span.end)
        else:
            lane_ends[lane] = span.end
        placed.append(Span(span.label, span.start, span.end, span.kind, lane))
    return placed


def _transaction_kind(r: dict) -> str:
    return "HANGING" if r["hanging"] else r["outcome"]


def build_partition_timelines(raw: dict[str, Any], total_partitions: int) -> PartitionTimelines:
    """Timelines from `query_partition_timelines`' rows.

    An open transaction (no marker yet) reaches to the end of the log it pins.

    Args:
        raw: the rows.
        total_partitions: partitions in the run (to say how many are not drawn).
    """
    timelines = []
    for p in raw["partitions"]:
        key = (p["topic"], p["partition"])

        def of(kind: str, key: tuple = key) -> list[dict]:
            return [r for r in raw.get(kind, []) if (r["topic"], r["partition"]) == key]

        log_end = p["last_offset"] if p["last_offset"] is not None else 0
        epochs = assign_lanes(
            [
                Span(
                    f"producer {r['producer_id']} epoch {r['producer_epoch']}",
                    r["first_offset"],
                    r["last_offset"] if r["last_offset"] is not None else r["first_offset"],
                    r["status"],
                )
                for r in of("epochs")
            ]
        )
        transactions = assign_lanes(
            [
                Span(
                    f"producer {r['producer_id']}: {_transaction_kind(r).lower()} transaction",
                    r["first_offset"],
                    r["marker_offset"] if r["marker_offset"] is not None else log_end,
                    _transaction_kind(r),
                )
                for r in of("transactions")
            ]
        )
        marks = [
            Mark(
                href=finding_anchor(r["finding_id"]),
                finding_type=r["finding_type"],
                severity=r["severity"],
                start=r["base_offset"],
                end=r["last_offset"],
                time_ms=r.get("batch_ms"),
            )
            for r in of("marks")
        ]
        times = next(iter(of("times")), {})
        counts = raw["counts"]
        timelines.append(
            PartitionTimeline(
                anchor=partition_anchor(*key),
                topic=p["topic"],
                partition=int(p["partition"]),
                first_offset=p["first_offset"],
                last_offset=p["last_offset"],
                batches=int(p["batches"]),
                coverage=p["coverage"],
                findings=int(p["findings"]),
                epochs=epochs,
                transactions=transactions,
                marks=marks,
                omitted_epochs=counts.get("epochs", {}).get(key, 0) - len(epochs),
                omitted_transactions=counts.get("transactions", {}).get(key, 0) - len(transactions),
                omitted_marks=counts.get("marks", {}).get(key, 0) - len(marks),
                first_ms=times.get("first_ms"),
                last_ms=times.get("last_ms"),
            )
        )
    return PartitionTimelines(timelines, total_partitions)
