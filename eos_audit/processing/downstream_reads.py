"""A group committed past a transaction still open at the time (READ_PAST_LSO, ABORTED_READ).

A read_committed consumer reads a partition only up to its last stable offset (LSO: the first
offset of the earliest transaction still open, `UnifiedLog.lastStableOffset`, fetched with
`FetchIsolation.TXN_COMMITTED`), so the offset its group commits never passes a transaction
that is open when it commits. A commit that does was made by a consumer that read uncommitted
records: READ_PAST_LSO, and ABORTED_READ when that transaction then aborted, for the group
processed and committed records that never existed (an aborted read, Adya's G1a)
(docs/rules.md#read-past-lso, docs/rules.md#aborted-read).

Each committed partition's transactions and its groups' commits go into one stream ordered by
offset: a commit at offset c sees, as a running maximum, the transaction starting below c that
ended last (and the aborted one that ended last); if that end is later than the commit's time,
the transaction was open when the group committed past it. Memory per task is a partition's
stream position, never its commits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from eos_audit.findings import REGISTRY
from eos_audit.processing.coordinator_audit import commit_record_values, read_past_lso_commits
from eos_audit.processing.exported_logs import (
    exported_logs,
    log_start_offset,
    unverifiable_finding,
)
from eos_audit.sinks.finding_rows import coded_finding_struct

if TYPE_CHECKING:
    from collections.abc import Callable

    from eos_audit.config import AuditConfig

READ_TYPES = ("READ_PAST_LSO", "ABORTED_READ")
_NEVER = 2**63 - 1  # the end of a transaction still open when the export was taken


def last_stable_offset(
    history: DataFrame,
    records: DataFrame,
    transactions: DataFrame,
    partitions: DataFrame,
    config: AuditConfig,
    run_id: str,
    incremental: bool = False,
    stage: Callable[[DataFrame], DataFrame] | None = None,
) -> DataFrame:
    """READ_PAST_LSO and ABORTED_READ findings: every commit against its partition's LSO then.

    Named after the bound the rule replays (`UnifiedLog.lastStableOffset`). A commit's time is
    its group coordinator's (`commitTimestamp`, else the record's time), a transaction's end its
    marker's: `processing.clock_skew_ms` absorbs the two brokers' clocks. Commits of partitions
    the export does not hold are not judged (`exported_logs.unexported_input_partitions` says
    so where the export holds the topic); an aborted transactional commit never counted.

    A transaction still open at the end of its partition's export was open at a commit only if
    the export shows the partition after the commit (a batch at least the skew later): of a
    commit made after the partition's last exported batch (the two topics exported at different
    times) the export cannot tell, and says UNVERIFIABLE (EXPORT_DOES_NOT_SPAN), one finding per
    group and partition. Nor can it tell of a commit at or below the log start the export shows,
    past a transaction that began below it (LOG_START_UNKNOWN): the broker's first unstable
    offset is never below the log start, and where that start was at the time of the commit is
    not in the export.

    Args:
        history: the offset replay's history (`coordinator_audit.replay_offsets`).
        records: the decoded coordinator records the replay read (their markers end the
            transactions of cleared commits, `coordinator_audit.read_past_lso_commits`).
        transactions: the audit's transactions (TRANSACTIONS columns) of every partition.
        partitions: the audit's partition statistics (kernel partials, as
            `exported_logs` reads them: the latest batch of each, skipped ones included).
        config: the run configuration (`processing.clock_skew_ms`, severities).
        run_id: the run id.
        incremental: the run is seeded by an earlier run's state (--since-state): its export
            of a partition may start anywhere, so the export's first offset is not the log's
            start (`exported_logs.log_start_offset`).
        stage: writes a DataFrame where the run stages its work and reads it back (the
            pipeline's `checked_once`), or None: the judged commits, which both the findings
            and the undecided commits read, staged; without it their plan (the commits, the
            cleared ones' markers, the window over the partitions' transactions) is planned
            and run once for each.

    Returns:
        FINDINGS rows (UNVERIFIABLE ones among them).
    """
    key = ["topic", "partition"]
    spans = transactions.where(F.col("first_offset").isNotNull())
    # Only a partition with a transaction has an LSO a commit can pass: the commits of the others
    # (most of them, where the export holds few of the groups' input partitions) are left out
    # before the shuffles, by the few keys of the partitions with one.
    read = history.join(F.broadcast(spans.select(*key).distinct()), key, "left_semi")
    commits = read_past_lso_commits(read, records).select(
        *key,
        F.col("committed_offset").alias("position"),
        F.lit(0).alias("order"),
        F.struct(
            "group_id", "committed_offset", "kind", "coordinator_partition", "record_offset",
            "producer_id", "producer_epoch", "timestamp", "source",
            F.coalesce("commit_timestamp_ms", "timestamp").alias("committed_at"),
        ).alias("c"),
    )  # fmt: skip
    # Open at the export's end: no marker. A marker without a time (Parquet may give none) ended
    # its transaction at a time the export does not show: null, which passes no commit.
    ended = F.when(F.col("marker_offset").isNull(), F.lit(_NEVER)).otherwise(F.col("end_timestamp"))
    open_then = F.struct(
        ended.alias("ended_at"),
        F.col("first_offset").alias("first_offset"),
        F.col("producer_id").alias("producer_id"),
        F.col("marker_offset").alias("marker_offset"),
        F.col("outcome").alias("outcome"),
    )
    spans = spans.select(
        *key,
        F.col("first_offset").alias("position"),
        F.lit(1).alias("order"),
        open_then.alias("t"),
    )
    stream = commits.unionByName(spans, allowMissingColumns=True)
    # A transaction starting at the committed offset itself is not passed: commits sort first.
    below = (
        Window.partitionBy(*key)
        .orderBy("position", "order")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    seen = stream.select(
        *key,
        "order",
        "c",
        F.max("t").over(below).alias("latest"),
        F.max(F.when(F.col("t.outcome") == "ABORT", F.col("t"))).over(below).alias("aborted"),
    ).where(F.col("order") == 0)
    deadline = F.col("c.committed_at") + F.lit(config.processing.clock_skew_ms)
    aborted_open = F.col("aborted.ended_at") > deadline
    judged = seen.select(
        *key,
        "c",
        F.when(aborted_open, "ABORTED_READ")
        .when(F.col("latest.ended_at") > deadline, "READ_PAST_LSO")
        .alias("finding_type"),
        F.when(aborted_open, F.col("aborted")).otherwise(F.col("latest")).alias("t"),
    ).where(F.col("finding_type").isNotNull())
    exported = exported_logs(partitions).select(
        *key,
        F.col("written_until").alias("exported_until"),
        log_start_offset(config, incremental).alias("log_start"),
    )
    judged = judged.join(exported, key, "left")
    # The broker's first unstable offset is never below the log start
    # (`UnifiedLog.maybeIncrementFirstUnstableOffset`): a commit at or below the log start at
    # the export passed the transaction only if the log started below it at the time of the
    # commit, which the export does not show (the log start only grows). Where that start is
    # unknown (an export that was cut, without a checkpoint), the commit is judged.
    start_unknown = F.coalesce(F.col("c.committed_offset") <= F.col("log_start"), F.lit(False))
    open_at_end = (F.col("finding_type") == "READ_PAST_LSO") & (F.col("t.ended_at") == _NEVER)
    spans = F.coalesce(F.col("exported_until") >= deadline, F.lit(False))
    undecided = F.when(start_unknown, "LOG_START_UNKNOWN").when(
        open_at_end & ~spans, "EXPORT_DOES_NOT_SPAN"
    )
    judged = judged.withColumn("undecided", undecided)
    if stage is not None:
        judged = stage(judged)
    return _findings(judged.where(F.col("undecided").isNull()), config, run_id).unionByName(
        _undecided(judged.where(F.col("undecided").isNotNull()), config, run_id)
    )


# Each cause of an UNVERIFIABLE READ_PAST_LSO: why, from the commits' first time and the column
# of what the export shows.
_UNDECIDED = {
    "EXPORT_DOES_NOT_SPAN": (
        "they passed a transaction still open at the end of the partition's export, and were "
        "made from %d ms on, after its last exported batch (at %d ms): whether the transaction "
        "was still open then is not in the export",
        "exported_until",
    ),
    "LOG_START_UNKNOWN": (
        "they passed a transaction that began below the partition's log start at the export "
        "(%2$d), made from %1$d ms on at offsets up to it: the broker serves up to the log start "
        "whatever is open below it, and where the log started when they were made is not in "
        "the export",
        "log_start",
    ),
}


def _undecided(judged: DataFrame, config: AuditConfig, run_id: str) -> DataFrame:
    """UNVERIFIABLE (READ_PAST_LSO), one per group, partition and cause (`undecided`).

    EXPORT_DOES_NOT_SPAN: commits past a transaction open at the end of the partition's export,
    made after its last exported batch. LOG_START_UNKNOWN: commits at or below the log start the
    export shows, past a transaction that began below it.
    """
    cause = F.col("undecided")
    per_group = judged.groupBy(
        "topic", "partition", F.col("c.group_id").alias("group_id"), cause
    ).agg(
        F.count(F.lit(1)).alias("commits"),
        F.min("c.committed_at").alias("first_at"),
        F.first("exported_until").alias("exported_until"),
        F.first("log_start").alias("log_start"),
    )
    # A partition whose exported batches carry no time (Parquet may give none) ends at a time
    # the export does not show.
    reason = F.when(
        (cause == "EXPORT_DOES_NOT_SPAN") & F.col("exported_until").isNull(),
        F.format_string(
            "they passed a transaction still open at the end of the partition's export, made "
            "from %d ms on, and its exported batches carry no time: whether the transaction "
            "was still open then is not in the export",
            "first_at",
        ),
    )
    for name, (text, known) in _UNDECIDED.items():
        reason = reason.when(cause == name, F.format_string(text, "first_at", known))
    values = {
        "topic": F.col("topic"),
        "partition": F.col("partition"),
        "group_id": F.col("group_id"),
        "scope": F.format_string("%d commit(s) of group %s", "commits", "group_id"),
        "reason": reason,
        "cause": cause,
    }
    identity = [F.col("topic"), F.col("partition"), F.col("group_id"), cause]
    finding = unverifiable_finding("READ_PAST_LSO", values, identity, config, run_id)
    return per_group.select(finding.alias("f")).select("f.*")


def _findings(judged: DataFrame, config: AuditConfig, run_id: str) -> DataFrame:
    c, t = F.col("c"), F.col("t")
    still_open = t["ended_at"] == F.lit(_NEVER)
    ended = F.when(
        still_open, F.lit("it was still open when the export was taken")
    ).otherwise(
        F.format_string(
            "its %s marker (offset %s) came %s ms later",
            t["outcome"], t["marker_offset"], t["ended_at"] - c["committed_at"],
        )
    )  # fmt: skip
    # The commit's columns are in `c`, but its input partition is the stream's key.
    values = {
        **commit_record_values(
            lambda name: F.col(name) if name in ("topic", "partition") else c[name]
        ),
        "committed_at": c["committed_at"],
        "transaction_producer_id": t["producer_id"],
        "transaction_first_offset": t["first_offset"],
        "transaction_marker_offset": t["marker_offset"],
        "transaction_outcome": t["outcome"],
        "transaction_end": ended,
    }
    identity = [c["coordinator_partition"], c["record_offset"]]
    code = F.when(F.col("finding_type") == "ABORTED_READ", REGISTRY["ABORTED_READ"].code)
    code = code.otherwise(REGISTRY["READ_PAST_LSO"].code)
    finding = coded_finding_struct(
        code, READ_TYPES, config, run_id,
        identity=identity, values=values, type_values=lambda _kind: {},
    )  # fmt: skip
    return judged.select(finding.alias("f")).select("f.*")
