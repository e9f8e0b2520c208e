"""Findings by type and severity, the first of each type with their evidence, top offenders.

The producers and partitions with the most findings come from the summary tables.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import functions as F

from eos_audit.findings import REGISTRY, SEVERITY_ORDER, FindingType
from eos_audit.report.limits import ReportLimits
from eos_audit.report.tables import (
    RunTables,
    batch_ms,
    bounded_rows,
    first_rows_per_group,
    severity_rank,
)


def slug(*parts: object) -> str:
    """An HTML id from names (topics may hold characters ids should not)."""
    text = "-".join(str(p) for p in parts)
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)


def partition_anchor(topic: str, partition: int) -> str:
    """The id of a partition's timeline."""
    return "p-" + slug(topic, partition)


def finding_anchor(finding_id: str) -> str:
    """The id of a finding's evidence row."""
    return "f-" + slug(finding_id)


def previous_offset_means(finding_type: str) -> str:
    """What a finding's `previous_offset` points at, as its type's registry entry says."""
    kind = REGISTRY.get(finding_type)
    return kind.previous_offset_means if kind else FindingType.previous_offset_means


@dataclass(frozen=True)
class TypeCounts:
    """One finding type's counts by severity."""

    finding_type: str
    meaning: str
    counts: dict[str, int]
    first_ms: int | None = None  # the earliest batch time of its findings, epoch ms (UTC)
    last_ms: int | None = None

    @property
    def total(self) -> int:
        """Findings of this type."""
        return sum(self.counts.values())


@dataclass(frozen=True)
class FindingsMatrix:
    """Findings by type (worst first) and severity."""

    types: list[TypeCounts]
    severities: tuple[str, ...] = SEVERITY_ORDER

    @property
    def total(self) -> int:
        """All findings of the run."""
        return sum(t.total for t in self.types)

    def by_severity(self) -> dict[str, int]:
        """Findings per severity, every severity present."""
        return {s: sum(t.counts.get(s, 0) for t in self.types) for s in self.severities}


def query_findings_matrix(tables: RunTables) -> list[dict]:
    """Counts and batch-time range per (finding_type, severity): one aggregate, a few dozen rows."""
    return bounded_rows(
        tables.findings.groupBy("finding_type", "severity").agg(
            F.count(F.lit(1)).alias("count"),
            F.min(batch_ms()).alias("first_ms"),
            F.max(batch_ms()).alias("last_ms"),
        ),
        1000,
    )


def _worst(counts: dict[str, int]) -> int:
    return min(
        (SEVERITY_ORDER.index(s) for s, n in counts.items() if n and s in SEVERITY_ORDER),
        default=len(SEVERITY_ORDER),
    )


def build_findings_matrix(rows: Iterable[dict]) -> FindingsMatrix:
    """The matrix from `query_findings_matrix` rows: types sorted by worst severity, then count.

    A type's first and last batch time span all its severities (rows without a time are left out).
    """
    counts: dict[str, dict[str, int]] = {}
    times: dict[str, list[int]] = {}
    for r in rows:
        counts.setdefault(r["finding_type"], {})[r["severity"]] = int(r["count"])
        times.setdefault(r["finding_type"], []).extend(
            int(t) for t in (r.get("first_ms"), r.get("last_ms")) if t is not None
        )
    types = [
        TypeCounts(
            t,
            REGISTRY[t].meaning if t in REGISTRY else "",
            c,
            min(times[t], default=None),
            max(times[t], default=None),
        )
        for t, c in counts.items()
    ]
    types.sort(key=lambda t: (_worst(t.counts), -t.total, t.finding_type))
    return FindingsMatrix(types)


@dataclass(frozen=True)
class FindingItem:
    """One finding with its evidence, as listed in the report."""

    anchor: str
    finding_id: str
    finding_type: str
    severity: str
    cause: str | None
    kafka_error: str | None
    topic: str
    partition: int
    producer: str
    batch: str
    expected_sequence: int | None
    earlier: str | None
    earlier_href: str | None
    detail: str
    spec_ref: str
    evidence: dict[str, str]
    source: str | None
    batch_ms: int | None = None  # the batch's time, epoch ms (UTC)
    # Whether an earlier run reported the same finding id (None: not compared).
    seen_before: bool | None = None


@dataclass(frozen=True)
class FindingGroup:
    """The first findings of one type."""

    finding_type: str
    meaning: str
    total: int
    items: list[FindingItem] = field(default_factory=list)

    @property
    def omitted(self) -> int:
        """Findings of this type not listed."""
        return self.total - len(self.items)


_SAMPLE_COLUMNS = [
    "finding_id",
    "finding_type",
    "severity",
    "cause",
    "kafka_error",
    "topic",
    "partition",
    "producer_id",
    "producer_epoch",
    "base_offset",
    "last_offset",
    "base_sequence",
    "last_sequence",
    "expected_sequence",
    "previous_offset",
    "detail",
    "spec_ref",
    "evidence",
    "source",
    "batch_ms",
]


def query_finding_samples(tables: RunTables, per_type: int, types: int) -> list[dict]:
    """The first `per_type` findings of each type (worst severity, then log order).

    Args:
        tables: the run's tables.
        per_type: findings per type.
        types: how many types the run has (bounds the rows read).
    """
    order = [
        severity_rank(),
        F.col("topic"),
        F.col("partition"),
        F.col("base_offset"),
        F.col("finding_id"),
    ]
    findings = tables.findings.withColumn("batch_ms", batch_ms())
    first = first_rows_per_group(findings, ["finding_type"], order, per_type)
    return bounded_rows(
        first.select(*_SAMPLE_COLUMNS).orderBy("finding_type", *order), per_type * max(types, 1)
    )


def _range(what: str, low: Any, high: Any) -> str:
    """'offset 7' or 'offsets 7–9'."""
    return f"{what} {low}" if low == high or high is None else f"{what}s {low}–{high}"


def _batch_text(r: dict) -> str:
    where = f"{r['topic']}-{r['partition']}"
    if r["base_offset"] is None or r["base_offset"] < 0:
        where += ", not in the log (the send failed)"
    else:
        where += " " + _range("offset", r["base_offset"], r["last_offset"])
    if r.get("base_sequence") is not None and r["base_sequence"] >= 0:
        where += ", " + _range("sequence", r["base_sequence"], r["last_sequence"])
    return where


def _producer_text(r: dict) -> str:
    if r.get("producer_id") is None or r["producer_id"] < 0:
        return "no producer id"
    return f"producer {r['producer_id']} epoch {r['producer_epoch']}"


def build_finding_groups(
    rows: Iterable[dict], matrix: FindingsMatrix, partition_anchors: frozenset[str] = frozenset()
) -> list[FindingGroup]:
    """Findings grouped by type in the matrix's order, each with links to its evidence.

    The earlier batch a finding conflicts with (`previous_offset`) links to that batch's own
    finding when it is listed too, else to the partition's timeline when it is drawn.

    Args:
        rows: `query_finding_samples` rows.
        matrix: the run's matrix (totals per type, order).
        partition_anchors: ids of the partition timelines in the report.
    """
    rows = list(rows)
    at_offset = {
        (r["topic"], r["partition"], r["base_offset"]): finding_anchor(r["finding_id"])
        for r in rows
        if r["base_offset"] is not None and r["base_offset"] >= 0
    }
    by_type: dict[str, list[FindingItem]] = {}
    for r in rows:
        earlier, href = None, None
        if r["previous_offset"] is not None:
            meaning = previous_offset_means(r["finding_type"])
            earlier = f"offset {r['previous_offset']}: {meaning}"
            href = at_offset.get((r["topic"], r["partition"], r["previous_offset"]))
            if href is None and partition_anchor(r["topic"], r["partition"]) in partition_anchors:
                href = partition_anchor(r["topic"], r["partition"])
        by_type.setdefault(r["finding_type"], []).append(
            FindingItem(
                anchor=finding_anchor(r["finding_id"]),
                finding_id=r["finding_id"],
                finding_type=r["finding_type"],
                severity=r["severity"],
                cause=r["cause"],
                kafka_error=r["kafka_error"],
                topic=r["topic"],
                partition=int(r["partition"]),
                producer=_producer_text(r),
                batch=_batch_text(r),
                expected_sequence=r["expected_sequence"],
                earlier=earlier,
                earlier_href=href,
                detail=r["detail"],
                spec_ref=r["spec_ref"],
                evidence=dict(sorted((r["evidence"] or {}).items())),
                source=r["source"],
                batch_ms=r.get("batch_ms"),
            )
        )
    return [
        FindingGroup(t.finding_type, t.meaning, t.total, by_type.get(t.finding_type, []))
        for t in matrix.types
    ]


@dataclass(frozen=True)
class Offender:
    """A producer or a partition with findings."""

    label: str
    href: str | None
    findings: int
    note: str
    counts: dict[str, int] = field(default_factory=dict)  # by severity, when known


@dataclass(frozen=True)
class Offenders:
    """The producers and partitions with the most findings."""

    producers: list[Offender]
    partitions: list[Offender]


def query_offenders(tables: RunTables, limits: ReportLimits) -> dict[str, list[dict]]:
    """Top producers (over their epochs and partitions) and partitions by findings."""
    per_epoch = F.aggregate(F.map_values("findings"), F.lit(0).cast("long"), lambda a, x: a + x)
    producers = (
        tables.producer_sessions.where(F.col("producer_id") >= 0)
        .withColumn("_n", per_epoch)
        .groupBy("producer_id")
        .agg(
            F.sum("_n").alias("findings"),
            F.count_distinct("topic", "partition").alias("partitions"),
            F.count(F.when(F.col("status") == "violated", 1)).alias("violated_epochs"),
            F.array_sort(F.array_distinct(F.flatten(F.collect_list(F.map_keys("findings"))))).alias(
                "types"
            ),
        )
        .where(F.col("findings") > 0)
        .orderBy(F.col("findings").desc(), "producer_id")
    )
    counts = [F.col(f"findings_{s.lower()}") for s in SEVERITY_ORDER]
    partitions = (
        tables.partition_summary.withColumn("findings", sum(counts[1:], counts[0]))
        .where(F.col("findings") > 0)
        .orderBy(*[c.desc() for c in counts], "topic", "partition")
        .select(
            "topic", "partition", "findings", *[f"findings_{s.lower()}" for s in SEVERITY_ORDER]
        )
    )
    return {
        "producers": bounded_rows(producers, limits.offenders),
        "partitions": bounded_rows(partitions, limits.offenders),
    }


def build_offenders(
    raw: dict[str, list[dict]], partition_anchors: frozenset[str] = frozenset()
) -> Offenders:
    """The two top lists from `query_offenders` rows."""
    producers = [
        Offender(
            label=f"producer {r['producer_id']}",
            href=None,
            findings=int(r["findings"]),
            note=f"{r['partitions']} partition(s), {r['violated_epochs']} violated epoch(s): "
            + ", ".join(r["types"] or []),
        )
        for r in raw["producers"]
    ]
    partitions = []
    for r in raw["partitions"]:
        anchor = partition_anchor(r["topic"], r["partition"])
        parts = [
            f"{r[f'findings_{s.lower()}']} {s}"
            for s in SEVERITY_ORDER
            if r[f"findings_{s.lower()}"]
        ]
        partitions.append(
            Offender(
                label=f"{r['topic']}-{r['partition']}",
                href=anchor if anchor in partition_anchors else None,
                findings=int(r["findings"]),
                note=", ".join(parts),
                counts={s: int(r[f"findings_{s.lower()}"]) for s in SEVERITY_ORDER},
            )
        )
    return Offenders(producers, partitions)
