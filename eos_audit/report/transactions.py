"""Transactions over time: how many started per interval by outcome, and the unfinished ones."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from eos_audit.report.limits import ReportLimits
from eos_audit.report.tables import RunTables, bounded_rows

# Outcome classes, drawn in this order; a hanging transaction is an OPEN one past timeout + grace,
# an UNKNOWN one was closed by a marker whose type the export does not show.
KINDS = ("COMMIT", "ABORT", "UNKNOWN", "OPEN", "HANGING")


@dataclass(frozen=True)
class TxnBucket:
    """Transactions that started in [start_ms, start_ms + width), by kind."""

    start_ms: int
    counts: dict[str, int]


@dataclass(frozen=True)
class TxnSpan:
    """One transaction that did not commit, from its first batch to its marker (or to now)."""

    label: str
    kind: str
    start_ms: int
    end_ms: int
    first_offset: int | None
    marker_offset: int | None
    duration_ms: int | None


@dataclass(frozen=True)
class TransactionActivity:
    """The run's transactions in time."""

    totals: dict[str, int]
    start_ms: int | None = None
    end_ms: int | None = None
    bucket_ms: int = 1
    buckets: list[TxnBucket] = field(default_factory=list)
    spans: list[TxnSpan] = field(default_factory=list)

    @property
    def total(self) -> int:
        """All transactions."""
        return sum(self.totals.values())

    @property
    def omitted_spans(self) -> int:
        """Transactions that did not commit and are not drawn one by one."""
        return sum(n for k, n in self.totals.items() if k != "COMMIT") - len(self.spans)


def _kind() -> Column:
    return F.when(F.col("hanging"), F.lit("HANGING")).otherwise(F.col("outcome"))


def _end_ms() -> Column:
    # An open transaction has no marker: its duration is its age at the export (or log end).
    return F.coalesce(
        F.col("end_timestamp"),
        F.col("first_timestamp") + F.col("duration_ms"),
        F.col("first_timestamp"),
    )


def bucket_width(start_ms: int, end_ms: int, buckets: int) -> int:
    """Milliseconds per bucket so that `buckets` buckets cover start..end (at least 1 ms)."""
    return max(1, math.ceil((end_ms - start_ms + 1) / max(buckets, 1)))


def query_transaction_activity(tables: RunTables, limits: ReportLimits) -> dict[str, Any]:
    """Totals by kind, the time range, counts per time bucket and the first unfinished ones."""
    txns = tables.transactions.withColumn("kind", _kind())
    totals = bounded_rows(
        txns.groupBy("kind").agg(
            F.count(F.lit(1)).alias("count"),
            F.min("first_timestamp").alias("start"),
            F.max(_end_ms()).alias("end"),
        ),
        16,
    )
    starts = [r["start"] for r in totals if r["start"] is not None]
    ends = [r["end"] for r in totals if r["end"] is not None]
    raw: dict[str, Any] = {
        "totals": [{"kind": r["kind"], "count": r["count"]} for r in totals],
        "range": {"start": min(starts, default=None), "end": max(ends, default=None)},
        "buckets": [],
    }
    start, end = raw["range"]["start"], raw["range"]["end"]
    if start is not None:
        width = bucket_width(start, end, limits.time_buckets)
        raw["bucket_ms"] = width
        raw["buckets"] = bounded_rows(
            txns.where(F.col("first_timestamp").isNotNull())
            .groupBy(F.floor((F.col("first_timestamp") - F.lit(start)) / width).alias("b"), "kind")
            .count(),
            (limits.time_buckets + 1) * len(KINDS),
        )
    raw["spans"] = bounded_rows(
        txns.where(F.col("kind") != "COMMIT")
        .where(F.col("first_timestamp").isNotNull())
        .orderBy(
            F.col("hanging").desc(),
            (F.col("outcome") == "OPEN").desc(),
            "first_timestamp",
            "topic",
            "partition",
            "producer_id",
        )
        .select(
            "topic",
            "partition",
            "producer_id",
            "start_epoch",
            "kind",
            "first_offset",
            "marker_offset",
            "first_timestamp",
            _end_ms().alias("end_ms"),
            "duration_ms",
        ),
        limits.transactions,
    )
    return raw


def build_transaction_activity(raw: dict[str, Any]) -> TransactionActivity:
    """The activity from `query_transaction_activity`'s rows (buckets in time order, all kinds)."""
    totals = {k: 0 for k in KINDS}
    for r in raw["totals"]:
        totals[r["kind"]] = totals.get(r["kind"], 0) + int(r["count"])
    start, end = raw["range"]["start"], raw["range"]["end"]
    if start is None:
        return TransactionActivity(totals)
    width = raw["bucket_ms"]
    by_bucket: dict[int, dict[str, int]] = {}
    for r in raw["buckets"]:
        by_bucket.setdefault(int(r["b"]), {k: 0 for k in KINDS})[r["kind"]] = int(r["count"])
    last = max([*by_bucket, (end - start) // width])
    buckets = [
        TxnBucket(start + b * width, by_bucket.get(b, {k: 0 for k in KINDS}))
        for b in range(last + 1)
    ]
    spans = [
        TxnSpan(
            label=f"{r['topic']}-{r['partition']} producer {r['producer_id']} "
            f"epoch {r['start_epoch']}",
            kind=r["kind"],
            start_ms=r["first_timestamp"],
            end_ms=max(r["end_ms"], r["first_timestamp"]),
            first_offset=r["first_offset"],
            marker_offset=r["marker_offset"],
            duration_ms=r["duration_ms"],
        )
        for r in raw["spans"]
    ]
    return TransactionActivity(totals, start, end, width, buckets, spans)
