"""How much of a run the report shows: it stays a few hundred kilobytes however large the run."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReportLimits:
    """Upper bounds on what the report reads and draws; whatever is cut is said in the report.

    Attributes:
        findings_per_type: findings listed with their evidence, per finding type.
        partitions: partitions drawn as a timeline (most findings first).
        spans_per_partition: producer epochs and unfinished transactions drawn per partition.
        marks_per_chart: findings marked on one chart.
        producer_epochs: producer epochs drawn as sequence against offset (violated first).
        transactions: aborted, open and hanging transactions drawn one by one.
        time_buckets: columns of a chart over time.
        offset_series: partitions whose ListOffsets observations are drawn.
        offenders: producers and partitions in the top-offender lists.
        history_runs: runs of the warehouse in the history (the latest up to this one); this
            run's findings are compared with the earlier finished runs among them.
        consumer_groups: consumer groups drawn (the most severe findings first, then by name).
        group_partitions: input partitions drawn per consumer group (the same order).
    """

    findings_per_type: int = 20
    partitions: int = 12
    spans_per_partition: int = 40
    marks_per_chart: int = 60
    producer_epochs: int = 12
    transactions: int = 30
    time_buckets: int = 60
    offset_series: int = 8
    offenders: int = 10
    history_runs: int = 30
    consumer_groups: int = 8
    group_partitions: int = 6
