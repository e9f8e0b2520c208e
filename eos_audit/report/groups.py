"""Per consumer group, the committed offset of each input partition over time.

The `consumer_offsets` table (eos_audit.processing) has every OffsetCommit record with what the
group coordinator made of it. Per group (the most severe findings first) and input partition, the
APPLIED commits are a step line, the SKIPPED, ABORTED and PENDING transactional ones marks of their
own (a SKIPPED one's transaction committed, but a later record of the key had been applied: its
offset never became the group's), and the group's findings on the partition (rewinds, mixed
commits, concurrent owners) marks linking to their evidence. Commits are read per interval (the
last of each, with the lowest and highest), so a partition committed every second for a night
costs no more than one committed ten times.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from eos_audit.findings import REGISTRY, SEVERITY_ORDER
from eos_audit.processing.offset_metadata_manager import (
    ABORTED,
    APPLIED,
    CLEARED,
    DELETED,
    PENDING,
    PLAIN,
    REPLACED,
    SKIPPED,
    TOMBSTONE,
    TRANSACTIONAL,
)
from eos_audit.report.findings import finding_anchor, slug
from eos_audit.report.limits import ReportLimits
from eos_audit.report.tables import (
    RunTables,
    batch_ms,
    bounded_rows,
    first_rows_per_group,
    key_filter,
    rows_and_total,
    severity_rank,
)
from eos_audit.report.transactions import bucket_width

KINDS = (PLAIN, TRANSACTIONAL, TOMBSTONE)
OUTCOMES = (APPLIED, SKIPPED, ABORTED, PENDING, REPLACED, CLEARED, DELETED)
# The outcomes drawn: the committed offset (APPLIED), and the transactional commits that never
# became it though their transaction committed (SKIPPED, KAFKA-14505) or aborted (ABORTED), or had
# not yet at the export's end (PENDING).
DRAWN = (APPLIED, SKIPPED, ABORTED, PENDING)
SERIES_KEY = ("group_id", "topic", "partition")
CONSUMER_OFFSETS = "__consumer_offsets"
_SEVERITY_COLS = [f"findings_{s.lower()}" for s in SEVERITY_ORDER]


@dataclass(frozen=True)
class CommitPoint:
    """The commits of one kind and outcome in one interval of a chart.

    `x` and `offset` are those of the interval's last commit in the coordinator's order (a
    transactional commit takes effect at its marker); `low` and `high` span all of them.
    """

    kind: str
    outcome: str
    x: int
    offset: int
    low: int
    high: int
    commits: int


@dataclass(frozen=True)
class GroupMark:
    """A finding of the group on one input partition, at the commit it is about."""

    href: str
    finding_type: str
    severity: str
    cause: str | None
    record_offset: int
    x: int | None  # None: its commit is not in consumer_offsets and the chart's axis has no time
    offset: int | None  # the committed offset the finding is about
    previous_offset: int | None = None  # the committed offset it replaced (a rewind)
    time_ms: int | None = None


@dataclass(frozen=True)
class GroupPartition:
    """One input partition of a group: its commits and findings."""

    anchor: str
    topic: str
    partition: int
    commits: int
    counts: dict[tuple[str, str], int]  # commits by (kind, outcome)
    findings_by_type: dict[str, int]
    last_offset: int | None = None  # the committed offset at the export's end
    last_deleted: bool = False  # the last change removed the offset (a tombstone)
    last_ms: int | None = None
    points: list[CommitPoint] = field(default_factory=list)
    marks: list[GroupMark] = field(default_factory=list)

    @property
    def findings(self) -> int:
        """The group's findings on this partition."""
        return sum(self.findings_by_type.values())

    @property
    def omitted_marks(self) -> int:
        """Findings not marked: beyond the limit, or with no place on the chart's axis."""
        return self.findings - sum(1 for m in self.marks if m.x is not None)

    @property
    def applied(self) -> list[CommitPoint]:
        """The points of the step line, left to right."""
        return sorted((p for p in self.points if p.outcome == APPLIED), key=lambda p: p.x)

    @property
    def offset_domain(self) -> tuple[int, int]:
        """Committed offsets spanned by the points and marks."""
        values = [v for p in self.points for v in (p.low, p.high)]
        for m in self.marks:
            values += [v for v in (m.offset, m.previous_offset) if v is not None]
        return (min(values), max(values)) if values else (0, 0)


@dataclass(frozen=True)
class ConsumerGroup:
    """One group: its totals and the input partitions drawn, on one x axis."""

    anchor: str
    group_id: str
    coordinator_partition: int | None
    commits: int
    total_partitions: int
    counts: dict[tuple[str, str], int]
    findings_by_type: dict[str, int]
    findings_by_severity: dict[str, int]
    partitions: list[GroupPartition] = field(default_factory=list)
    # The charts' x: commit times (epoch ms) when every commit drawn has one, else the records'
    # offsets in the group's __consumer_offsets partition.
    x_is_time: bool = True
    x_domain: tuple[int, int] = (0, 0)

    @property
    def omitted_partitions(self) -> int:
        """Input partitions not drawn."""
        return max(self.total_partitions - len(self.partitions), 0)

    @property
    def x_range(self) -> tuple[int, int]:
        """The x its charts share: the commits drawn, widened to every mark placed."""
        xs = [x for p in self.partitions for x in (m.x for m in p.marks) if x is not None]
        if not any(p.points for p in self.partitions):
            return (min(xs), max(xs)) if xs else self.x_domain
        return (min([self.x_domain[0], *xs]), max([self.x_domain[1], *xs]))


@dataclass(frozen=True)
class ConsumerGroups:
    """The groups drawn, and how many the run has."""

    groups: list[ConsumerGroup]
    total_groups: int

    @property
    def omitted(self) -> int:
        """Groups not drawn."""
        return max(self.total_groups - len(self.groups), 0)


def group_findings(findings: DataFrame) -> DataFrame:
    """Findings about a group's input partition: their evidence names the group and partition.

    Chosen by their evidence, not their type, so that a type the processing audit raises later
    takes its place on the charts without a change here. `partition` and `topic` become the input
    partition; the finding's own (the __consumer_offsets partition) is `coordinator_partition`.
    A finding in another partition that names the offset commit it is about
    (`offsets_partition` and `previous_offset`: a torn transaction's output partition) is
    placed at that commit, as if it were in `__consumer_offsets`.
    """
    evidence = F.col("evidence")
    offsets_partition = evidence["offsets_partition"].try_cast("int")
    at_commit = (
        (F.col("topic") != CONSUMER_OFFSETS)
        & offsets_partition.isNotNull()
        & F.col("previous_offset").isNotNull()
    )
    return findings.where(
        evidence["group_id"].isNotNull()
        & evidence["committed_topic"].isNotNull()
        & evidence["committed_partition"].isNotNull()
    ).select(
        "finding_id",
        "finding_type",
        "severity",
        "cause",
        F.when(at_commit, F.lit(CONSUMER_OFFSETS)).otherwise(F.col("topic")).alias("finding_topic"),
        F.when(at_commit, offsets_partition)
        .otherwise(F.col("partition"))
        .alias("coordinator_partition"),
        F.when(at_commit, F.col("previous_offset"))
        .otherwise(F.col("base_offset"))
        .alias("record_offset"),
        batch_ms().alias("batch_ms"),
        evidence["group_id"].alias("group_id"),
        evidence["committed_topic"].alias("topic"),
        # Evidence is text: a value that is not a number reads as unknown, never as an error.
        evidence["committed_partition"].try_cast("int").alias("partition"),
        evidence["committed_offset"].try_cast("long").alias("committed_offset"),
        evidence["previous_committed_offset"].try_cast("long").alias("previous_committed_offset"),
    )


def _commits_and_findings(commits: DataFrame, found: DataFrame) -> DataFrame:
    """Commits and findings as rows of one frame (`is_commit` tells them apart).

    Counting both in one aggregate costs one shuffle, where joining an aggregate of each costs
    three.
    """
    return commits.select(
        *SERIES_KEY,
        "kind",
        "outcome",
        "committed_offset",
        "commit_time",
        "marker_offset",
        "record_offset",
        "coordinator_partition",
        F.lit(True).alias("is_commit"),
    ).unionByName(
        found.select(*SERIES_KEY, "severity", F.lit(False).alias("is_commit")),
        allowMissingColumns=True,
    )


def _severity_counts() -> list[Column]:
    return [
        F.count(F.when(F.col("severity") == s, 1)).alias(c)
        for s, c in zip(SEVERITY_ORDER, _SEVERITY_COLS, strict=True)
    ]


def _most_severe_first() -> list[Column]:
    return [F.col(c).desc() for c in _SEVERITY_COLS]


def _effective() -> Column:
    # Where a commit took effect in the coordinator's log: a transactional one at its marker.
    return F.coalesce(F.col("marker_offset"), F.col("record_offset"))


def _commit_ms() -> Column:
    # Epoch ms, not a collected TIMESTAMP (a datetime in the driver's local zone).
    return F.unix_millis(F.col("commit_time"))


def query_consumer_groups(tables: RunTables, limits: ReportLimits) -> dict[str, Any]:
    """The groups with the most severe findings, their partitions, commits and findings.

    Every query is an aggregate or limited: the groups (at most `consumer_groups`), their input
    partitions (at most `group_partitions` each), counts per kind, outcome and finding type,
    the commits per interval of the charts, and the first findings of each partition.

    Returns:
        `groups` and their `total`, `partitions`, `counts`, `points`, `marks` and
        `mark_commits` (the commit times of the marked records).
    """
    commits = tables.consumer_offsets
    found = group_findings(tables.findings)
    ranked = (
        _commits_and_findings(commits, found)
        .groupBy("group_id")
        .agg(
            F.count(F.when(F.col("is_commit"), 1)).alias("commits"),
            F.count_distinct(F.when(F.col("is_commit"), F.struct("topic", "partition"))).alias(
                "partitions"
            ),
            F.min("coordinator_partition").alias("coordinator_partition"),
            *_severity_counts(),
        )
        .where(F.col("commits") > 0)
    )
    groups, total = rows_and_total(
        ranked.orderBy(*_most_severe_first(), "group_id"), limits.consumer_groups
    )
    raw: dict[str, Any] = {
        "groups": groups,
        "total": total,
        "partitions": [],
        "counts": [],
        "points": [],
        "marks": [],
        "mark_commits": [],
    }
    if not groups:
        return raw
    ids = [g["group_id"] for g in groups]
    commits = commits.where(F.col("group_id").isin(*ids))
    found = found.where(F.col("group_id").isin(*ids))
    raw["partitions"] = _query_partitions(commits, found, len(ids), limits)
    keys = [tuple(p[c] for c in SERIES_KEY) for p in raw["partitions"]]
    raw["counts"] = _query_counts(commits, found, keys, len(ids))
    raw["points"] = _query_points(commits, raw["partitions"], keys, limits)
    m = limits.marks_per_chart
    marked = found.where(key_filter(SERIES_KEY, keys))
    raw["marks"] = bounded_rows(
        first_rows_per_group(
            marked, SERIES_KEY, [severity_rank(), F.col("record_offset"), F.col("finding_id")], m
        ),
        m * len(keys),
    )
    raw["mark_commits"] = _query_mark_commits(commits, raw["marks"])
    return raw


def _query_partitions(
    commits: DataFrame, found: DataFrame, groups: int, limits: ReportLimits
) -> list[dict]:
    """The input partitions of the chosen groups, the most severe findings first in each."""
    drawn = F.col("outcome").isin(*DRAWN) & F.col("committed_offset").isNotNull()
    ranked = (
        _commits_and_findings(commits, found)
        .groupBy(*SERIES_KEY)
        .agg(
            F.count(F.when(F.col("is_commit"), 1)).alias("commits"),
            # The last change of the committed offset, in the coordinator's order.
            F.max(
                F.when(
                    F.col("outcome").isin(APPLIED, DELETED),
                    F.struct(
                        _effective().alias("at"),
                        F.col("outcome").alias("outcome"),
                        F.col("committed_offset").alias("offset"),
                        _commit_ms().alias("ms"),
                    ),
                )
            ).alias("last"),
            # What the charts' x axis needs: the drawn commits' times and record offsets.
            F.count(F.when(drawn, 1)).alias("drawn"),
            F.count(F.when(drawn & F.col("commit_time").isNull(), 1)).alias("untimed"),
            F.min(F.when(drawn, _commit_ms())).alias("first_ms"),
            F.max(F.when(drawn, _commit_ms())).alias("last_ms"),
            F.min(F.when(drawn, F.col("record_offset"))).alias("first_record"),
            F.max(F.when(drawn, F.col("record_offset"))).alias("last_record"),
            *_severity_counts(),
        )
        .where(F.col("commits") > 0)
    )
    n = limits.group_partitions
    return bounded_rows(
        first_rows_per_group(
            ranked, ["group_id"], [*_most_severe_first(), F.col("topic"), F.col("partition")], n
        ).orderBy("group_id", *_most_severe_first(), "topic", "partition"),
        n * groups,
    )


def _query_counts(
    commits: DataFrame, found: DataFrame, keys: Sequence[tuple], groups: int
) -> list[dict]:
    """Commits by kind and outcome, findings by type: per group, and per partition drawn.

    One aggregate over a union: rows (`what`, group, topic, partition, `kind`, `key`, `n`),
    topic and partition null for a group's totals.
    """
    none_topic, none_partition = F.lit(None).cast("string"), F.lit(None).cast("int")
    parts = [
        commits.select(
            F.lit("commits").alias("what"), "group_id", none_topic.alias("topic"),
            none_partition.alias("partition"), "kind", F.col("outcome").alias("key"),
        ),
        found.select(
            F.lit("findings").alias("what"), "group_id", none_topic.alias("topic"),
            none_partition.alias("partition"), F.col("severity").alias("kind"),
            F.col("finding_type").alias("key"),
        ),
    ]  # fmt: skip
    if keys:
        chosen = key_filter(SERIES_KEY, keys)
        parts += [
            commits.where(chosen).select(
                F.lit("commits").alias("what"), *SERIES_KEY, "kind",
                F.col("outcome").alias("key"),
            ),
            found.where(chosen).select(
                F.lit("findings").alias("what"), *SERIES_KEY,
                F.col("severity").alias("kind"), F.col("finding_type").alias("key"),
            ),
        ]  # fmt: skip
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    # Kinds and outcomes: 21 pairs at most; severities and types: the registry's, with room for
    # types of a newer release.
    per_key = len(KINDS) * len(OUTCOMES) + len(SEVERITY_ORDER) * 2 * len(REGISTRY)
    return bounded_rows(
        union.groupBy("what", *SERIES_KEY, "kind", "key").count(),
        per_key * (groups + len(keys)),
    )


def x_axes(partitions: list[dict]) -> dict[str, dict[str, Any]]:
    """Per group, the x axis its charts share: time when every commit drawn has one.

    Returns:
        group id -> `is_time`, `start` and `end` (epoch ms or record offsets); groups with
        nothing to draw are absent.
    """
    axes: dict[str, dict[str, Any]] = {}
    for p in partitions:
        if not p["drawn"]:
            continue
        axis = axes.setdefault(p["group_id"], {"is_time": True, "ms": [], "records": []})
        axis["is_time"] = axis["is_time"] and not p["untimed"]
        axis["ms"] += [v for v in (p["first_ms"], p["last_ms"]) if v is not None]
        axis["records"] += [p["first_record"], p["last_record"]]
    out = {}
    for group_id, axis in axes.items():
        values = axis["ms"] if axis["is_time"] else axis["records"]
        out[group_id] = {"is_time": axis["is_time"], "start": min(values), "end": max(values)}
    return out


def _x_and_bucket(axes: dict[str, dict[str, Any]], buckets: int) -> tuple[Column, Column]:
    """Each commit's x on its group's axis, and its interval there."""
    x_col: Column | None = None
    bucket_col: Column | None = None
    for group_id, axis in axes.items():
        is_group = F.col("group_id") == F.lit(group_id)
        x = _commit_ms() if axis["is_time"] else F.col("record_offset")
        width = bucket_width(axis["start"], axis["end"], buckets)
        bucket = F.floor((x - F.lit(axis["start"])) / F.lit(width))
        x_col = F.when(is_group, x) if x_col is None else x_col.when(is_group, x)
        bucket_col = (
            F.when(is_group, bucket) if bucket_col is None else bucket_col.when(is_group, bucket)
        )
    assert x_col is not None and bucket_col is not None
    return x_col, bucket_col


def _query_points(
    commits: DataFrame, partitions: list[dict], keys: Sequence[tuple], limits: ReportLimits
) -> list[dict]:
    """The drawn commits of the chosen partitions per interval, kind and outcome."""
    axes = x_axes(partitions)
    keys = [k for k in keys if k[0] in axes]
    if not keys:
        return []
    x, bucket = _x_and_bucket(axes, limits.time_buckets)
    drawn = commits.where(
        key_filter(SERIES_KEY, keys)
        & F.col("outcome").isin(*DRAWN)
        & F.col("committed_offset").isNotNull()
    ).withColumn("x", x)
    last = F.max(F.struct(_effective().alias("at"), F.col("committed_offset"), F.col("x")))
    return bounded_rows(
        drawn.where(F.col("x").isNotNull())
        .groupBy(*SERIES_KEY, bucket.alias("b"), "kind", "outcome")
        .agg(
            last.alias("last"),
            F.min("committed_offset").alias("low"),
            F.max("committed_offset").alias("high"),
            F.count(F.lit(1)).alias("n"),
        ),
        # APPLIED plain and transactional, SKIPPED, ABORTED and PENDING transactional: five per
        # interval.
        len(keys) * (limits.time_buckets + 1) * 5,
    )


def _query_mark_commits(commits: DataFrame, marks: list[dict]) -> list[dict]:
    """The commit times of the records the marks are about (a short list of record offsets)."""
    at: dict[int, set[int]] = {}
    for m in marks:
        if m["finding_topic"] == CONSUMER_OFFSETS and m["record_offset"] is not None:
            at.setdefault(m["coordinator_partition"], set()).add(m["record_offset"])
    if not at:
        return []
    # One IN list per coordinator partition: a group's records are all in one.
    condition = F.lit(False)
    for partition, offsets in at.items():
        condition = condition | (
            (F.col("coordinator_partition") == partition)
            & F.col("record_offset").isin(*sorted(offsets))
        )
    return bounded_rows(
        commits.where(condition)
        .select("coordinator_partition", "record_offset", _commit_ms().alias("commit_ms"))
        .distinct(),
        sum(len(v) for v in at.values()),
    )


def group_anchor(group_id: str, *partition: object) -> str:
    """The id of a group's section, or of one of its partitions' charts."""
    return "g-" + slug(group_id, *partition)


def _counts(raw: dict[str, Any], what: str, key: tuple) -> list[dict]:
    return [
        r
        for r in raw["counts"]
        if r["what"] == what and (r["group_id"], r["topic"], r["partition"]) == key
    ]


def _by_type(rows: list[dict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rows:
        out[r["key"]] = out.get(r["key"], 0) + int(r["count"])
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def _mark(r: dict, x_is_time: bool, commit_ms: dict[tuple[int, int], int | None]) -> GroupMark:
    record = (r["coordinator_partition"], r["record_offset"])
    in_log = r["finding_topic"] == CONSUMER_OFFSETS
    if x_is_time:
        x = commit_ms.get(record) if in_log else None
        x = x if x is not None else r["batch_ms"]
    else:
        x = r["record_offset"] if in_log else None
    return GroupMark(
        href=finding_anchor(r["finding_id"]),
        finding_type=r["finding_type"],
        severity=r["severity"],
        cause=r["cause"],
        record_offset=r["record_offset"],
        x=x,
        offset=r["committed_offset"],
        previous_offset=r["previous_committed_offset"],
        time_ms=commit_ms.get(record, r["batch_ms"]) if in_log else r["batch_ms"],
    )


def build_consumer_groups(raw: dict[str, Any]) -> ConsumerGroups:
    """The groups from `query_consumer_groups`' rows, in its order."""
    axes = x_axes(raw["partitions"])
    commit_ms = {
        (r["coordinator_partition"], r["record_offset"]): r["commit_ms"]
        for r in raw["mark_commits"]
    }
    used: set[str] = set()

    def unique(anchor: str) -> str:
        # Names joined by "-" can meet ("a-b", "c" and "a", "b-c"): ids stay unique.
        n, candidate = 1, anchor
        while candidate in used:
            n += 1
            candidate = f"{anchor}-{n}"
        used.add(candidate)
        return candidate

    groups = []
    for g in raw["groups"]:
        group_id = g["group_id"]
        axis = axes.get(group_id, {"is_time": True, "start": 0, "end": 0})
        partitions = []
        for p in raw["partitions"]:
            key = tuple(p[c] for c in SERIES_KEY)
            if key[0] != group_id:
                continue
            last = p["last"] or {}
            partitions.append(
                GroupPartition(
                    anchor=unique(group_anchor(*key)),
                    topic=p["topic"],
                    partition=int(p["partition"]),
                    commits=int(p["commits"]),
                    counts={
                        (r["kind"], r["key"]): int(r["count"]) for r in _counts(raw, "commits", key)
                    },
                    findings_by_type=_by_type(_counts(raw, "findings", key)),
                    last_offset=last.get("offset"),
                    last_deleted=last.get("outcome") == DELETED,
                    last_ms=last.get("ms"),
                    points=sorted(
                        (
                            CommitPoint(
                                kind=r["kind"],
                                outcome=r["outcome"],
                                x=r["last"]["x"],
                                offset=r["last"]["committed_offset"],
                                low=r["low"],
                                high=r["high"],
                                commits=int(r["n"]),
                            )
                            for r in raw["points"]
                            if tuple(r[c] for c in SERIES_KEY) == key
                        ),
                        key=lambda pt: (pt.x, pt.outcome, pt.kind),
                    ),
                    marks=[
                        _mark(r, axis["is_time"], commit_ms)
                        for r in raw["marks"]
                        if tuple(r[c] for c in SERIES_KEY) == key
                    ],
                )
            )
        totals = (group_id, None, None)
        groups.append(
            ConsumerGroup(
                anchor=unique(group_anchor(group_id)),
                group_id=group_id,
                coordinator_partition=g["coordinator_partition"],
                commits=int(g["commits"]),
                total_partitions=int(g["partitions"]),
                counts={
                    (r["kind"], r["key"]): int(r["count"]) for r in _counts(raw, "commits", totals)
                },
                findings_by_type=_by_type(_counts(raw, "findings", totals)),
                findings_by_severity={
                    s: int(g[c]) for s, c in zip(SEVERITY_ORDER, _SEVERITY_COLS, strict=True)
                },
                partitions=partitions,
                x_is_time=axis["is_time"],
                x_domain=(axis["start"], axis["end"]),
            )
        )
    return ConsumerGroups(groups, int(raw["total"]))
