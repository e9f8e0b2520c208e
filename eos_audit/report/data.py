"""Everything the report shows, gathered with bounded queries into small Python structures."""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from pyspark.sql import SparkSession

from eos_audit.findings import REGISTRY
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
from eos_audit.report.groups import (
    ConsumerGroups,
    build_consumer_groups,
    query_consumer_groups,
)
from eos_audit.report.history import (
    History,
    build_history,
    mark_seen_before,
    query_history,
    query_seen_before,
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

# Queries in flight at once: enough to overlap their scheduling, few enough for a small driver.
_QUERY_THREADS = 6


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
    history: History | None = None
    consumer_groups: ConsumerGroups = field(default_factory=lambda: ConsumerGroups([], 0))


def collect_report_data(
    spark: SparkSession, where: TableLocation, run_id: str, limits: ReportLimits | None = None
) -> ReportData:
    """Read what the report shows about one run: aggregates and the first rows of each kind.

    The queries are independent and each is small, so they run side by side (Spark schedules
    jobs from several threads): the report costs the slowest few queries, not the sum of all.

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
    with ThreadPoolExecutor(max_workers=_QUERY_THREADS, thread_name_prefix="report") as pool:
        overview_raw = pool.submit(query_overview, tables, limits)
        matrix_raw = pool.submit(query_findings_matrix, tables)
        timelines_raw = pool.submit(query_partition_timelines, tables, limits)
        # A bound on the types: the registry's, with room for types of a newer release.
        types = 2 * len(REGISTRY)
        samples_raw = pool.submit(query_finding_samples, tables, limits.findings_per_type, types)
        offenders_raw = pool.submit(query_offenders, tables, limits)
        epochs_raw = pool.submit(query_epoch_plots, tables, limits)
        transactions_raw = pool.submit(query_transaction_activity, tables, limits)
        history_raw = pool.submit(query_history, spark, where, run_id, limits)
        groups_raw = pool.submit(query_consumer_groups, tables, limits)
        overview = build_overview(overview_raw.result(), run_id)
        # The ListOffsets inputs are named in the run's record.
        offsets_raw = pool.submit(query_list_offsets, spark, tables, overview.inputs, limits)
        matrix = build_findings_matrix(matrix_raw.result())
        timelines = build_partition_timelines(timelines_raw.result(), overview.coverage.partitions)
        anchors = frozenset(t.anchor for t in timelines.timelines)
        groups = build_finding_groups(samples_raw.result(), matrix, anchors)
        history = build_history(history_raw.result(), run_id)
        listed = [f.finding_id for g in groups for f in g.items]
        seen = query_seen_before(spark, where, history.compared, listed)
        data = ReportData(
            overview=overview,
            matrix=matrix,
            groups=mark_seen_before(groups, history, seen),
            offenders=build_offenders(offenders_raw.result(), anchors),
            timelines=timelines,
            epochs=build_epoch_plots(epochs_raw.result()),
            transactions=build_transaction_activity(transactions_raw.result()),
            list_offsets=build_list_offsets_view(offsets_raw.result()),
            limits=limits,
            generated_ms=int(time.time() * 1000),
            history=history,
            consumer_groups=build_consumer_groups(groups_raw.result()),
        )
    log.info("run %s: report data read in %.1f s", run_id, time.monotonic() - started)
    return data


def left_out(data: ReportData) -> list[str]:
    """What the report does not show, one sentence each (empty when it shows everything)."""
    lines = []
    h = data.history
    if h is not None and h.omitted:
        lines.append(
            f"history: {h.omitted:,} earlier runs not shown (the latest {len(h.runs)} up to this "
            f"one are; findings are compared with the {len(h.compared)} earlier finished runs "
            "among them)"
        )
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
    c = data.consumer_groups
    if c.omitted:
        lines.append(
            f"consumer groups: {c.omitted:,} of {c.total_groups:,} not drawn (the "
            f"{len(c.groups)} with the most severe findings are)"
        )
    for g in c.groups:
        if g.omitted_partitions:
            lines.append(
                f"group {g.group_id}: {g.omitted_partitions:,} of {g.total_partitions:,} input "
                f"partitions not drawn (the {len(g.partitions)} with the most severe findings are)"
            )
        for p in g.partitions:
            if p.omitted_marks > 0:
                lines.append(
                    f"group {g.group_id} {p.topic}-{p.partition}: {p.omitted_marks:,} findings "
                    "not drawn on its chart"
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
    groups = replace(
        data.consumer_groups,
        groups=[
            replace(
                g,
                partitions=[replace(p, marks=[fix(m) for m in p.marks]) for p in g.partitions],
            )
            for g in data.consumer_groups.groups
        ],
    )
    return replace(
        data, timelines=timelines, epochs=epochs, list_offsets=offsets, consumer_groups=groups
    )
