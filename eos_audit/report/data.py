"""Everything the report shows, gathered with bounded queries into small Python structures."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace

from pyspark.sql import SparkSession

from eos_audit.report.findings import (
    FindingGroup,
    FindingsMatrix,
    Offenders,
    build_finding_groups,
    build_findings_matrix,
    build_offenders,
    query_finding_samples,
    query_findings_matrix,
    query_offenders,
)
from eos_audit.report.limits import ReportLimits
from eos_audit.report.list_offsets import (
    ListOffsetsView,
    build_list_offsets_view,
    query_list_offsets,
)
from eos_audit.report.overview import RunOverview, build_overview, query_overview
from eos_audit.report.partitions import (
    PartitionTimelines,
    build_partition_timelines,
    query_partition_timelines,
)
from eos_audit.report.producers import EpochPlots, build_epoch_plots, query_epoch_plots
from eos_audit.report.tables import TableLocation, run_tables
from eos_audit.report.transactions import (
    TransactionActivity,
    build_transaction_activity,
    query_transaction_activity,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReportData:
    """The data behind every part of the report."""

    overview: RunOverview
    matrix: FindingsMatrix
    groups: list[FindingGroup]
    offenders: Offenders
    timelines: PartitionTimelines
    epochs: EpochPlots
    transactions: TransactionActivity
    list_offsets: ListOffsetsView
    limits: ReportLimits
    generated_ms: int


def collect_report_data(
    spark: SparkSession, where: TableLocation, run_id: str, limits: ReportLimits | None = None
) -> ReportData:
    """Read what the report shows about one run: aggregates and the first rows of each kind.

    Args:
        spark: the session.
        where: the tables' location.
        run_id: a recorded run (see `tables.resolve_run_id`).
        limits: how much to show (default `ReportLimits()`).

    Returns:
        Small structures; no query brings more than its limit to the driver.
    """
    limits = limits or ReportLimits()
    started = time.monotonic()
    tables = run_tables(spark, where, run_id)
    overview = build_overview(query_overview(tables, limits), run_id)
    matrix = build_findings_matrix(query_findings_matrix(tables))
    timelines = build_partition_timelines(
        query_partition_timelines(tables, limits), overview.coverage.partitions
    )
    anchors = frozenset(t.anchor for t in timelines.timelines)
    groups = build_finding_groups(
        query_finding_samples(tables, limits.findings_per_type, len(matrix.types)), matrix, anchors
    )
    data = ReportData(
        overview=overview,
        matrix=matrix,
        groups=groups,
        offenders=build_offenders(query_offenders(tables, limits), anchors),
        timelines=timelines,
        epochs=build_epoch_plots(query_epoch_plots(tables, limits)),
        transactions=build_transaction_activity(query_transaction_activity(tables, limits)),
        list_offsets=build_list_offsets_view(
            query_list_offsets(spark, tables, overview.inputs, limits)
        ),
        limits=limits,
        generated_ms=int(time.time() * 1000),
    )
    log.info("run %s: report data read in %.1f s", run_id, time.monotonic() - started)
    return data


def left_out(data: ReportData) -> list[str]:
    """What the report does not show, one sentence each (empty when it shows everything)."""
    lines = []
    for group in data.groups:
        if group.omitted:
            lines.append(
                f"{group.finding_type}: {group.omitted:,} of {group.total:,} findings not listed "
                f"(the first {len(group.items)} are, worst severity and lowest offset first)"
            )
    t = data.timelines
    if t.omitted:
        lines.append(
            f"partitions: {t.omitted:,} of {t.total_partitions:,} not drawn (the "
            f"{len(t.timelines)} with the most severe findings are)"
        )
    for tl in t.timelines:
        for n, what in (
            (tl.omitted_marks, "findings"),
            (tl.omitted_epochs, "producer epochs"),
            (tl.omitted_transactions, "unfinished transactions"),
        ):
            if n > 0:
                lines.append(f"{tl.topic}-{tl.partition}: {n:,} {what} not drawn on its timeline")
    e = data.epochs
    if e.omitted:
        lines.append(
            f"producer epochs: {e.omitted:,} of {e.total_with_findings:,} with findings not "
            f"drawn (violated and most findings first)"
        )
    for p in e.plots:
        if p.omitted_marks > 0:
            lines.append(
                f"{p.topic}-{p.partition} producer {p.producer_id} epoch {p.producer_epoch}: "
                f"{p.omitted_marks:,} findings not drawn"
            )
    a = data.transactions
    if a.omitted_spans > 0:
        lines.append(
            f"transactions: {a.omitted_spans:,} aborted, open or hanging transactions not drawn "
            f"one by one (hanging and open first); all are counted per interval"
        )
    v = data.list_offsets
    if v.omitted_partitions:
        lines.append(f"ListOffsets: {v.omitted_partitions:,} partitions' observations not drawn")
    if v.regressions_total > sum(len(s.marks) for s in v.series):
        lines.append(
            f"ListOffsets: {v.regressions_total - sum(len(s.marks) for s in v.series):,} "
            "regression findings not drawn"
        )
    return lines


def relink(data: ReportData) -> ReportData:
    """Point marks of findings that are not listed at their type's list instead.

    Charts mark the worst findings of each partition and epoch; the evidence section lists the
    first findings of each type. A mark whose finding is not listed links to its type's list, so
    no link of the report leads nowhere.
    """
    listed = {item.anchor for group in data.groups for item in group.items}

    def fix(mark):
        if mark.href in listed:
            return mark
        return replace(mark, href="t-" + mark.finding_type)

    timelines = replace(
        data.timelines,
        timelines=[replace(t, marks=[fix(m) for m in t.marks]) for t in data.timelines.timelines],
    )
    epochs = replace(
        data.epochs, plots=[replace(p, marks=[fix(m) for m in p.marks]) for p in data.epochs.plots]
    )
    offsets = replace(
        data.list_offsets,
        series=[replace(s, marks=[fix(m) for m in s.marks]) for s in data.list_offsets.series],
    )
    return replace(data, timelines=timelines, epochs=epochs, list_offsets=offsets)
