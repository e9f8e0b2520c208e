"""A one-to-one processor processed each input record once (DUPLICATE_PROCESSING, SKIPPED_INPUT).

A consume-transform-produce processor commits its consumer's position with its outputs
(`KafkaProducer.sendOffsetsToTransaction`): transaction i commits offset c(i) of an input
partition, so it processed the input range [c(i-1), c(i)), where c(i-1) is the group's committed
offset before it. For a processor that writes one output record per input data record (a copier,
a 1:1 map; `[processing] one_to_one_groups`), what its committed transactions processed must tile
each input partition, and each transaction must write as many records as its ranges hold data
records (control records and the records of aborted transactions are not data: a read_committed
consumer never returns them). Kafka's own `transactions_test.py` checks exactly this of its
copier. A range that starts below the end of an earlier one was processed twice
(DUPLICATE_PROCESSING, OVERLAPPING_RANGE); one that starts above it skipped the offsets between
(SKIPPED_INPUT, RANGE_GAP); a transaction with more outputs than input records repeated some
(DUPLICATE_PROCESSING, MORE_OUTPUT_THAN_INPUT), with fewer lost some (SKIPPED_INPUT,
LESS_OUTPUT_THAN_INPUT) (docs/rules.md#duplicate-processing, docs/rules.md#skipped-input).
A commit the coordinator skipped (a later record of the key was applied while it was pending:
KAFKA-14505) is not the group's offset, but its transaction's outputs are committed: its range
starts at the group's offset when its record was written, and its end counts in what the group's
transactions covered.

Where the export cannot count, the check says UNVERIFIABLE with the reason, never pass or fail:
a `__consumer_offsets` partition that is not whole from offset 0 (compaction or retention removed
commits, so a range could span several transactions), a range over input offsets the export does
not hold one record at or over markers it cannot attribute (the replay's spans of them, per input
partition: `exported_logs`) or over offsets an incremental run (--since-state) skipped as an
earlier run's, a range reaching outside the exported input, an aborted or
undecided transaction straddling a range's end, an output partition not exported, or a
transaction `__transaction_state` does not show. Where only the count is in doubt, the range's
place in the group's tiling is judged all the same. A group declared by name that the export holds
no commit of is said to be so, at the `__consumer_offsets` partition that holds it.

The counting is Spark work with no driver: the ranges come from the offset replay's history in
one window per group and input partition; a range's input records from one stream per input
partition, where running sums over the partition's transactions give, at any offset, the markers
and aborted records below it; a transaction's outputs from its markers, matched to its
`__transaction_state` prepare record (`transaction_markers.matched_markers`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from eos_audit.config import globs_to_java_regex, has_wildcard
from eos_audit.findings import REGISTRY
from eos_audit.processing.coordinator_audit import commit_record_values
from eos_audit.processing.exported_logs import (
    KEYLESS_TOMBSTONES,
    exported_logs,
    offsets_logs,
    partition_count,
    unverifiable_finding,
)
from eos_audit.processing.offset_metadata_manager import APPLIED, SKIPPED, TRANSACTIONAL
from eos_audit.processing.transaction_markers import (
    matched_markers,
    prepared_partitions,
    transactions_scope,
)
from eos_audit.sinks.finding_rows import coded_finding_struct
from eos_audit.sources.kafka.coordinator_keys import (
    CONSUMER_OFFSETS_TOPIC as CONSUMER_OFFSETS,
)
from eos_audit.sources.kafka.coordinator_keys import coordinator_hash
from eos_audit.sql_text import lookup

if TYPE_CHECKING:
    from eos_audit.config import AuditConfig

ONE_TO_ONE_TYPES = ("DUPLICATE_PROCESSING", "SKIPPED_INPUT")
KEY = ["group_id", "topic", "partition"]
_TRANSACTION = ["coordinator_partition", "marker_offset", "group_id"]

_REASONS = {
    "OFFSETS_NOT_WHOLE": "the __consumer_offsets partition holding the group is not whole from "
    "offset 0 in the export (compacted or deleted commits): a range could span several "
    "transactions",
    KEYLESS_TOMBSTONES: "the export shows tombstones of the __consumer_offsets partition "
    "holding the group without their key (kafka-dump-log.sh 2.4 and older prints none): where "
    "the group's offset was deleted, and so where a range began, is unknown",
    "RANGE_START_UNKNOWN": "where its transaction began reading is not in the log: the group's "
    "offset had been deleted before this commit, it is the group's first commit and the export "
    "holds the input from after offset 0 only, or the coordinator skipped this commit and it is "
    "below the group's offset when its record was written",
    "INPUT_NOT_EXPORTED": "the input partition is not in the export",
    "INPUT_SKIPPED": "the range holds input offsets an earlier run audited: an incremental run "
    "(--since-state) skips the batches below the offset its seeded state covers and does not "
    "replay their transactions again, so the range's data records are not counted",
    "INPUT_NOT_WHOLE": "the range holds offsets of the input partition where the export does "
    "not hold one record per offset (compaction, or batches not read)",
    "MARKERS_NOT_ATTRIBUTED": "the range holds markers of input transactions the export does not "
    "show, so its data records cannot be counted",
    "EXPORT_DOES_NOT_SPAN": "the range reaches outside the exported input partition",
    "RANGE_SPLITS_TRANSACTION": "an aborted, undecided or open transaction of the input "
    "straddles an end of the range",
    "OUTPUTS_NOT_COUNTED": "an output partition of the transaction is not exported, holds no "
    "marker of it, or its marker's type or records are not shown, or the cleaner removed "
    "records there",
    "OUTPUTS_SHARED": "the transaction committed offsets of more than one group, so its "
    "outputs are not one group's",
    "NO_TRANSACTION_LOG_RECORD": "__transaction_state does not show the transaction, so its "
    "outputs are unknown",
    "GROUP_NOT_EXPORTED": "the export holds no record of the __consumer_offsets partition that "
    "holds the group's commits (its id's hash modulo the topic's partitions: "
    "processing.offsets_topic_partitions, or more where the export holds a higher one), so none "
    "of its transactions is known",
    "NO_COMMITS_OF_GROUP": "the export holds the __consumer_offsets partition that holds the "
    "group's commits, and no offset commit of the group that a committed transaction made: it "
    "made none in the exported range (its records there, if any, are plain, aborted or pending "
    "commits, or tombstones), or the declared name is not the group's",
}

# The reasons that leave a range's input records uncounted, where the range itself is known: its
# start and the group's earlier ranges come from `__consumer_offsets`, so its place in the
# tiling is judged (`_range_findings`); the others leave the range's start in doubt.
_UNCOUNTED_INPUT = (
    "INPUT_NOT_EXPORTED", "INPUT_SKIPPED", "INPUT_NOT_WHOLE", "MARKERS_NOT_ATTRIBUTED",
    "EXPORT_DOES_NOT_SPAN", "RANGE_SPLITS_TRANSACTION",
)  # fmt: skip

# The reasons that name a span of the input partition (`exported_logs`), and what it holds.
_SPANS = {"INPUT_NOT_WHOLE": "uncounted", "MARKERS_NOT_ATTRIBUTED": "unattributed"}
_SPAN_NAMES = {
    "uncounted": "the partition's offsets in doubt are",
    "unattributed": "the partition's markers that closed nothing are at offsets",
}


def _start_unknown(start: Column) -> Column:
    """Where the range starting at `start` begins is in doubt (RANGE_START_UNKNOWN).

    No offset stood before it, or it is a skipped commit whose processor read from above what
    it committed: it read from further back than the group's offset of its time.
    """
    skipped = F.col("outcome") == "SKIPPED"
    return start.isNull() | (skipped & (start > F.col("committed_offset")))


def send_offsets_to_transaction(
    records: DataFrame,
    history: DataFrame,
    transactions: DataFrame,
    partitions: DataFrame,
    config: AuditConfig,
    run_id: str,
    stage: Callable[[DataFrame], DataFrame] | None = None,
) -> DataFrame | None:
    """DUPLICATE_PROCESSING, SKIPPED_INPUT and UNVERIFIABLE findings of the one-to-one groups.

    Named after `KafkaProducer.sendOffsetsToTransaction`, the call whose promise this checks:
    the offsets a transaction commits are the input it turned into its outputs.

    Args:
        records: decoded coordinator records (coordinator_records contract, `_source_error`).
        history: the offset replay's history (`coordinator_audit.replay_offsets`).
        transactions: the audit's transactions (TRANSACTIONS columns, `records` included).
        partitions: the audit's partition statistics (kernel partials: topic, partition,
            first_offset, last_offset, records, markers).
        config: the run configuration (`processing.one_to_one_groups`, severities).
        run_id: the run id.
        stage: writes a DataFrame where the run stages its work and reads it back (the
            pipeline's `checked_once`), or None to leave the plan whole. Three findings read
            each judged commit (its range, its count, what cannot be judged): staged, its
            plan, the largest of the processing audit's, is optimized and run once, not three
            times.

    Returns:
        FINDINGS rows, or None when no group is declared one-to-one.
    """
    groups = config.processing.one_to_one_groups
    if not groups:
        return None
    pattern = globs_to_java_regex(groups)
    logs = exported_logs(partitions)
    ranges = _ranges(history.where(F.col("group_id").rlike(pattern)), records, logs)
    counted = _input_records(ranges, transactions)
    outputs = _outputs(records, history, transactions, logs, config.processing.clock_skew_ms)
    judged = counted.join(outputs, ["coordinator_partition", "marker_offset"], "left")
    if stage is not None:
        judged = stage(judged)
    found = (
        _range_findings(judged, config, run_id)
        .unionByName(_count_findings(judged, config, run_id))
        .unionByName(_unverifiable(judged, config, run_id))
    )
    absent = _declared_groups_not_found(history, records, config, run_id)
    return found if absent is None else found.unionByName(absent)


def groups_declared_by_name(config: AuditConfig) -> list[str]:
    """The groups `processing.one_to_one_groups` names without a wildcard, each once."""
    named = (group for group in config.processing.one_to_one_groups if not has_wildcard(group))
    return list(dict.fromkeys(named))


def _declared_groups_not_found(
    history: DataFrame, records: DataFrame, config: AuditConfig, run_id: str
) -> DataFrame | None:
    """UNVERIFIABLE (ONE_TO_ONE) for each group declared by name that the check judged nothing of.

    A declared name without wildcards tells the `__consumer_offsets` partition that holds the
    group: the Java hash of its id modulo the topic's partition count (`partition_for`). Kafka
    takes the count from the topic itself, which `processing.offsets_topic_partitions` gives;
    an exported partition at or above it says the topic has more, at least that partition's
    number plus one. Where the export holds no offset commit of the group that a committed
    transaction made, the check verified none of its transactions (plain, aborted and pending
    commits and tombstones are not judged): that is said, naming the partition, never passed. A
    wildcard pattern names no partition, and matching no group is what a pattern may rightly do
    (a group not yet started), so it gives no finding.

    Returns:
        FINDINGS rows, or None when no group is declared by name.
    """
    names = [(group, coordinator_hash(group)) for group in groups_declared_by_name(config)]
    if not names:
        return None
    declared = history.sparkSession.createDataFrame(names, "group_id string, group_hash long")
    logs = offsets_logs(records)
    configured = config.processing.offsets_topic_partitions
    count = logs.agg(partition_count(configured, F.max("coordinator_partition")).alias("n"))
    placed = declared.crossJoin(count).select(
        "group_id", (F.col("group_hash") % F.col("n")).cast("int").alias("coordinator_partition")
    )
    judged = history.where(
        (F.col("kind") == TRANSACTIONAL) & F.col("outcome").isin(APPLIED, SKIPPED)
    ).select("group_id")
    held = logs.select("coordinator_partition", F.lit(True).alias("held"), "undecoded")
    absent = placed.join(judged.distinct(), "group_id", "left_anti").join(
        held, "coordinator_partition", "left"
    )
    verdict = F.when(F.col("held"), "NO_COMMITS_OF_GROUP").otherwise("GROUP_NOT_EXPORTED")
    # Records that did not decode may be the group's commits: said, with where they went.
    undecoded = F.when(
        F.col("undecoded") > 0,
        F.format_string(
            "; %d record(s) of the partition did not decode (quarantined, each with its reason), "
            "and the group's commits may be among them",
            "undecoded",
        ),
    ).otherwise(F.lit(""))
    values = {
        "cause": verdict,
        "topic": F.lit(CONSUMER_OFFSETS),
        "partition": F.col("coordinator_partition"),
        "reason": F.concat(lookup(verdict, _REASONS), undecoded),
        "scope": F.concat(F.lit("group "), F.col("group_id"), F.lit(", declared one-to-one")),
        "group_id": F.col("group_id"),
    }
    identity = [F.col("group_id"), F.lit(CONSUMER_OFFSETS), F.col("coordinator_partition"), verdict]
    finding = unverifiable_finding("ONE_TO_ONE", values, identity, config, run_id)
    return absent.select(finding.alias("f")).select("f.*")


def _ranges(history: DataFrame, records: DataFrame, logs: DataFrame) -> DataFrame:
    """Each committed transactional commit with the input range its transaction processed.

    `range_start` is the group's offset the commit replaced (for the group's first commit, offset
    0 where the export holds the input from there, else unknown); `resumed_from` the previous
    committed transaction's offset; `covered_to` the highest offset an earlier committed
    transaction of the key reached, against which the range overlaps or leaves a gap. `reason`
    says why the range cannot be judged.

    A commit the coordinator skipped (its transaction committed, but a later record of the key
    had been applied first: KAFKA-14505) replaced nothing, and its transaction's outputs are
    committed all the same: its range starts at the group's offset when its record was written,
    the offset its processor read from, and its end counts in what the group covered.
    """
    outcome, transactional = F.col("outcome"), F.col("kind") == "TRANSACTIONAL"
    applied, skipped = outcome == "APPLIED", outcome == "SKIPPED"
    # A skipped commit enters twice: at its marker, in the order the coordinator decided the
    # commits, and as a probe at its record, of the offset the group had then.
    stream = history.where(outcome.isin("APPLIED", "SKIPPED", "DELETED")).select(
        "*",
        F.explode(F.when(skipped, F.array(F.lit(True), F.lit(False))).otherwise(
            F.array(F.lit(False))
        )).alias("probe"),
    )  # fmt: skip
    probe = F.col("probe")
    at = F.when(probe, F.col("record_offset")).otherwise(
        F.coalesce("marker_offset", "record_offset")
    )
    # The order the coordinator applied them: a transactional commit at its marker.
    order = Window.partitionBy(*KEY).orderBy("coordinator_partition", at, "record_offset")
    earlier = order.rowsBetween(Window.unboundedPreceding, -1)
    committed = transactional & (applied | skipped) & ~probe
    # The group's offset: the last applied, unless a tombstone removed it after.
    stored = F.when(applied | (outcome == "DELETED"), F.struct(
        F.when(applied, F.col("committed_offset")).alias("offset")
    ))  # fmt: skip
    with_past = stream.select(
        "*",
        F.max(F.when(committed, F.col("committed_offset"))).over(earlier).alias("covered_to"),
        F.count(F.when(applied, F.lit(1))).over(earlier).alias("applied_before"),
        F.last(F.when(committed, F.col("committed_offset")), ignorenulls=True)
        .over(earlier)
        .alias("resumed_from"),
        F.last(stored, ignorenulls=True).over(earlier)["offset"].alias("stored"),
    )
    # Where each range starts: the offset an applied commit replaced; a skipped commit's probe's
    # (the window's partitioning holds: no shuffle).
    record = Window.partitionBy(*KEY, "coordinator_partition", "record_offset")
    starts = [
        F.when(skipped, F.max(F.when(probe, F.col(of_probe))).over(record))
        .otherwise(F.col(of_applied))
        .alias(name)
        for name, of_probe, of_applied in (
            ("read_from", "stored", "previous_committed_offset"),
            ("began_after", "applied_before", "applied_before"),
        )
    ]
    decided = with_past.select("*", *starts).where(committed)
    offsets_log = offsets_logs(records).select(
        "coordinator_partition", "offsets_whole", "keyless_tombstones"
    )
    joined = (
        decided.drop("probe", "stored", "applied_before")
        .join(offsets_log, "coordinator_partition", "left")
        .join(logs, ["topic", "partition"], "left")
    )
    # The group's first commit of the partition read from where the group began: offset 0 (the
    # tiling Kafka's copier test checks) where the export holds the input from there; above it,
    # retention, DeleteRecords or the cleaner removed input the group may have read.
    first = (F.col("began_after") == 0) & (F.col("log_start") == 0)
    start = F.coalesce(F.col("read_from"), F.when(first, F.lit(0)))

    def meets(span: str) -> Column:
        """The range [start, committed_offset) holds an offset of the input's span `span`."""
        return F.coalesce(
            (start <= F.col(f"{span}_to")) & (F.col("committed_offset") > F.col(f"{span}_from")),
            F.lit(False),
        )

    reason = (
        F.when(~F.coalesce(F.col("offsets_whole"), F.lit(False)), "OFFSETS_NOT_WHOLE")
        .when(F.col("keyless_tombstones") > 0, KEYLESS_TOMBSTONES)
        .when(F.col("log_start").isNull(), "INPUT_NOT_EXPORTED")
        .when(_start_unknown(start), "RANGE_START_UNKNOWN")
        # Input offsets below the covered one: an empty range there holds none, and counts 0.
        .when(F.coalesce((start < F.col("covered_end")) & (F.col("committed_offset") > start),
                         F.lit(False)), "INPUT_SKIPPED")
        .when(meets("uncounted"), "INPUT_NOT_WHOLE")
        .when(meets("unattributed"), "MARKERS_NOT_ATTRIBUTED")
        .when((start < F.col("log_start")) | (F.col("committed_offset") > F.col("log_end")),
              "EXPORT_DOES_NOT_SPAN")
    )  # fmt: skip
    return joined.select(
        *[c for c in joined.columns if c not in ("read_from", "began_after")],
        start.alias("range_start"),
        reason.alias("reason"),
    )


def _input_records(ranges: DataFrame, transactions: DataFrame) -> DataFrame:
    """The ranges with `input_records`: the data records in [range_start, committed_offset).

    Where the range meets no offset in doubt and no marker that closed nothing (`_ranges`' reason
    says so otherwise), that is the range's offsets less the markers in it and the records of the
    aborted transactions whose markers lie in it; an aborted, undecided or open transaction that
    straddles an end leaves the count unknown (`reason` RANGE_SPLITS_TRANSACTION). One stream per
    input partition: the transactions' contributions at the offset after their first batch and
    after their marker, and the range ends as queries; running sums give each query the totals
    below it.
    """
    counted = F.col("reason").isNull() & (F.col("committed_offset") >= F.col("range_start"))
    countable = ranges.where(counted)
    inputs = countable.select("topic", "partition").distinct()
    not_committed = F.col("outcome") != "COMMIT"
    txns = transactions.join(F.broadcast(inputs), ["topic", "partition"])
    zero = F.lit(0)
    at_marker = txns.where(F.col("marker_offset").isNotNull()).select(
        "topic",
        "partition",
        (F.col("marker_offset") + 1).alias("at"),
        F.lit(1).alias("markers"),
        F.when(not_committed, F.coalesce("records", zero)).otherwise(zero).alias("aborted"),
        F.when(not_committed, F.lit(-1)).otherwise(zero).alias("straddling"),
        # An undecided marker, or an aborted transaction whose records are not known.
        F.when((F.col("outcome") == "UNKNOWN") | (not_committed & F.col("records").isNull()), 1)
        .otherwise(zero)
        .alias("unknown"),
    )
    at_first = txns.where(not_committed & F.col("first_offset").isNotNull()).select(
        "topic",
        "partition",
        (F.col("first_offset") + 1).alias("at"),
        zero.alias("markers"),
        zero.alias("aborted"),
        F.lit(1).alias("straddling"),
        zero.alias("unknown"),
    )
    ends = [("start", F.col("range_start")), ("end", F.col("committed_offset"))]
    identity = ["coordinator_partition", "record_offset"]
    queries = countable.select(
        "topic",
        "partition",
        *identity,
        F.explode(
            F.array(*[F.struct(F.lit(n).alias("side"), c.alias("at")) for n, c in ends])
        ).alias("q"),
    ).select("topic", "partition", *identity, "q.side", "q.at")
    stream = at_marker.unionByName(at_first).unionByName(queries, allowMissingColumns=True)
    below = (
        Window.partitionBy("topic", "partition")
        .orderBy("at", F.col("side").isNotNull())
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    totals = (
        stream.select(
            "*",
            *[
                F.sum(c).over(below).alias(f"below_{c}")
                for c in ("markers", "aborted", "straddling", "unknown")
            ],
        )
        .where(F.col("side").isNotNull())
        .groupBy(*identity)
        .agg(
            *[
                _side(side, c)
                for side in ("start", "end")
                for c in ("markers", "aborted", "straddling", "unknown")
            ]
        )
    )
    splits = (
        (F.coalesce("start_straddling", zero) > 0)
        | (F.coalesce("end_straddling", zero) > 0)
        | (F.coalesce("end_unknown", zero) > F.coalesce("start_unknown", zero))
    )
    data = (
        F.col("committed_offset")
        - F.col("range_start")
        - (F.coalesce("end_markers", zero) - F.coalesce("start_markers", zero))
        - (F.coalesce("end_aborted", zero) - F.coalesce("start_aborted", zero))
    )
    with_totals = ranges.join(totals, identity, "left")
    reason = F.when(counted & splits, F.lit("RANGE_SPLITS_TRANSACTION")).otherwise(F.col("reason"))
    return with_totals.select(
        *[c for c in ranges.columns if c != "reason"],
        reason.alias("reason"),
        F.when(counted & ~splits, data).alias("input_records"),
    )


def _side(side: str, column: str) -> Column:
    return F.max(F.when(F.col("side") == side, F.col(f"below_{column}"))).alias(f"{side}_{column}")


def _outputs(
    records: DataFrame,
    history: DataFrame,
    transactions: DataFrame,
    logs: DataFrame,
    skew_ms: int,
) -> DataFrame:
    """Each transaction's committed output records, by its `__consumer_offsets` marker.

    The transaction is its `__transaction_state` prepare record; its offsets' marker is the one
    its `__consumer_offsets` partition got, its outputs the records of the transactions its
    other partitions' COMMIT markers closed. `outputs_known` is false where a partition is not
    exported, holds no marker of the transaction, or its marker's type or records are not
    shown, or the transaction's offsets there are in doubt (the cleaner removed records);
    `shared` is true where the transaction committed offsets of more than one group,
    whose inputs its outputs mix.
    """
    matched = matched_markers(prepared_partitions(records, skew_ms), transactions, skew_ms).join(
        logs.select(
            "topic", "partition", F.lit(True).alias("exported"), "uncounted_from", "uncounted_to"
        ),
        ["topic", "partition"],
        "left",
    )
    marker = F.col("marker")
    offsets = F.col("topic") == CONSUMER_OFFSETS
    # The cleaner (a compacted output topic) removes records of a transaction's batches, or
    # whole batches: where the transaction's offsets meet the partition's offsets in doubt, its
    # records are what the cleaner kept, not what it wrote.
    cleaned = F.coalesce(
        (marker["first_offset"] <= F.col("uncounted_to"))
        & (marker["marker_offset"] >= F.col("uncounted_from")),
        F.lit(False),
    )
    # Kafka writes a marker to every partition of a transaction: an exported partition without
    # one here does not hold the transaction (its export ends before the marker or starts after
    # the data, or lost either), so its outputs are not counted rather than taken for none.
    known = (
        F.col("exported").isNotNull()
        & marker["outcome"].isin("COMMIT", "ABORT")
        & marker["records"].isNotNull()
        & ~cleaned
    )
    committed = F.when(marker["outcome"] == "COMMIT", marker["records"]).otherwise(F.lit(0))
    tx = ["transaction_log_partition", "transaction_log_offset"]
    written = (
        matched.where(~offsets)
        .groupBy(*tx)
        .agg(
            F.sum(committed).alias("output_records"),
            F.min(known).alias("outputs_known"),
        )
    )
    # A transaction may commit offsets of groups in several __consumer_offsets partitions: each
    # of its markers there decided some of them.
    deciding = matched.where(offsets & marker.isNotNull()).select(
        F.col("partition").alias("coordinator_partition"),
        marker["marker_offset"].alias("marker_offset"),
        "transactional_id",
        *tx,
    )
    # A group's offsets are in one __consumer_offsets partition: the groups each marker decided
    # add up to the transaction's.
    decided = (
        history.where(F.col("marker_offset").isNotNull())
        .groupBy("coordinator_partition", "marker_offset")
        .agg(F.count_distinct("group_id").alias("groups"))
    )
    with_groups = deciding.join(decided, ["coordinator_partition", "marker_offset"], "left")
    groups = with_groups.groupBy(*tx).agg(F.sum("groups").alias("groups"))
    return (
        with_groups.drop("groups")
        .join(written, tx, "left")
        .join(groups, tx, "left")
        .select(
            "coordinator_partition",
            "marker_offset",
            "transactional_id",
            *tx,
            # A transaction with no other partition wrote no output.
            F.coalesce("output_records", F.lit(0)).alias("output_records"),
            F.coalesce("outputs_known", F.lit(True)).alias("outputs_known"),
            (F.coalesce("groups", F.lit(0)) > 1).alias("shared"),
        )
    )


def _range_findings(judged: DataFrame, config: AuditConfig, run_id: str) -> DataFrame:
    """OVERLAPPING_RANGE and RANGE_GAP: a range against what earlier transactions covered.

    Once per rewind: a transaction that starts where the group's previous transaction ended
    continues a run of reprocessing the first one of which was reported (with the whole range
    the group's transactions had covered), so a replay of a million transactions is one finding.
    Where a range starts and what the group covered before it are the offset replay's alone: a
    range whose input records cannot be counted (`_UNCOUNTED_INPUT`) is judged all the same.
    """
    start, covered = F.col("range_start"), F.col("covered_to")
    overlap = start < covered
    # The group's previous committed transaction, in the order the coordinator applied them.
    previous = Window.partitionBy(*KEY).orderBy(
        "coordinator_partition", F.coalesce("marker_offset", "record_offset"), "record_offset"
    )
    # Continuing a run of reprocessing: starting where the previous transaction ended, which
    # overlapped what the group had covered and read forward from there. One that rewound the
    # group's offset (its commit below its start, as a stale owner's is) read nothing forward:
    # the transaction after it is the first to process that input again.
    resumed = F.coalesce(
        (start == F.col("resumed_from"))
        & F.lag(overlap & (F.col("committed_offset") >= start)).over(previous),
        F.lit(False),
    )
    # A reason tested before RANGE_START_UNKNOWN (the input not exported) may hide that one.
    placed = (F.col("reason").isNull() | F.col("reason").isin(*_UNCOUNTED_INPUT)) & ~_start_unknown(
        start
    )
    judgeable = judged.withColumn("resumed", resumed).where(
        placed & covered.isNotNull() & (start != covered) & ~(overlap & F.col("resumed"))
    )
    repeated_to = F.least(covered, F.col("committed_offset"))
    values = {
        **_common(F.when(overlap, "OVERLAPPING_RANGE").otherwise("RANGE_GAP")),
        "processed_twice": _skipped(F.format_string(
            "it processed [%d, %d), and offsets [%d, %d) of it an earlier committed transaction "
            "of the group had processed (the group's transactions had reached offset %d)",
            start, F.col("committed_offset"), start, repeated_to, covered,
        )),
        "never_processed": _skipped(F.format_string(
            "it processed [%d, %d), and no committed transaction of the group processed "
            "offsets [%d, %d) before it",
            start, F.col("committed_offset"), covered, start,
        )),
    }  # fmt: skip
    code = F.when(overlap, REGISTRY["DUPLICATE_PROCESSING"].code).otherwise(
        REGISTRY["SKIPPED_INPUT"].code
    )
    identity = [F.col("coordinator_partition"), F.col("record_offset"), F.lit("range")]
    finding = coded_finding_struct(
        code, ONE_TO_ONE_TYPES, config, run_id,
        identity=identity, values=values, type_values=lambda _kind: {},
    )  # fmt: skip
    return judgeable.select(finding.alias("f")).select("f.*")


def _count_findings(judged: DataFrame, config: AuditConfig, run_id: str) -> DataFrame:
    """MORE_OUTPUT_THAN_INPUT and LESS_OUTPUT_THAN_INPUT: a transaction's records, in and out.

    One finding per transaction and group, at its first offset commit; the input is the sum
    over the input partitions it committed.
    """
    by_transaction = Window.partitionBy(*_TRANSACTION)
    first = Window.partitionBy(*_TRANSACTION).orderBy("record_offset")
    whole = judged.select(
        "*",
        F.sum("input_records").over(by_transaction).alias("transaction_input"),
        F.count(F.lit(1)).over(by_transaction).alias("commits"),
        F.count("input_records").over(by_transaction).alias("counted"),
        F.row_number().over(first).alias("nth"),
    ).where(
        (F.col("nth") == 1)
        & (F.col("commits") == F.col("counted"))
        & F.col("outputs_known")
        & ~F.col("shared")
        & (F.col("transaction_input") != F.col("output_records"))
    )
    more = F.col("output_records") > F.col("transaction_input")
    values = {
        **_common(F.when(more, "MORE_OUTPUT_THAN_INPUT").otherwise("LESS_OUTPUT_THAN_INPUT")),
        "input_records": F.col("transaction_input"),
        "processed_twice": _skipped(F.format_string(
            "it wrote %d committed output records for %d input data records of the offsets it "
            "committed: %d more than one each",
            "output_records", "transaction_input",
            F.col("output_records") - F.col("transaction_input"),
        )),
        "never_processed": _skipped(F.format_string(
            "it wrote %d committed output records for %d input data records of the offsets it "
            "committed: %d of them produced no output",
            "output_records", "transaction_input",
            F.col("transaction_input") - F.col("output_records"),
        )),
    }  # fmt: skip
    code = F.when(more, REGISTRY["DUPLICATE_PROCESSING"].code).otherwise(
        REGISTRY["SKIPPED_INPUT"].code
    )
    identity = [F.col("coordinator_partition"), F.col("marker_offset"), F.col("group_id")]
    finding = coded_finding_struct(
        code, ONE_TO_ONE_TYPES, config, run_id,
        identity=identity, values=values, type_values=lambda _kind: {},
    )  # fmt: skip
    return whole.select(finding.alias("f")).select("f.*")


def _skipped(said: Column) -> Column:
    """`said` of a commit, told first, where the coordinator skipped it, that its outputs count."""
    return F.when(
        F.col("outcome") == "SKIPPED",
        F.concat(
            F.lit(
                "the coordinator skipped this commit, a later record of the key having been "
                "applied first (KAFKA-14505), and its transaction's outputs are committed all the "
                "same; "
            ),
            said,
        ),
    ).otherwise(said)


def _common(cause: Column) -> dict[str, Column]:
    return {
        **commit_record_values(F.col),
        "cause": cause,
        "outcome": F.col("outcome"),
        "previous_committed_offset": F.col("previous_committed_offset"),
        "marker_offset": F.col("marker_offset"),
        "range_start": F.col("range_start"),
        "range_end": F.col("committed_offset"),
        "covered_to": F.col("covered_to"),
        "input_records": F.col("input_records"),
        "output_records": F.col("output_records"),
        "transactional_id": F.coalesce(F.col("transactional_id"), F.lit("unknown")),
    }


def _unverifiable(judged: DataFrame, config: AuditConfig, run_id: str) -> DataFrame:
    """One UNVERIFIABLE finding per group, input partition and reason."""
    reason = (
        F.when(F.col("reason").isNotNull(), F.col("reason"))
        .when(F.col("transaction_log_offset").isNull(), "NO_TRANSACTION_LOG_RECORD")
        .when(~F.col("outputs_known"), "OUTPUTS_NOT_COUNTED")
        .when(F.col("shared"), "OUTPUTS_SHARED")
    )
    rows = judged.withColumn("verdict", reason).where(F.col("verdict").isNotNull())
    first = ["transactional_id", "transaction_log_partition", "transaction_log_offset",
             "producer_id", "producer_epoch"]  # fmt: skip
    spans = [
        *[f"{span}_{end}" for span in _SPANS.values() for end in ("from", "to")],
        "covered_end",
    ]
    grouped = (
        rows.groupBy(*KEY, "verdict")
        .agg(
            F.count(F.lit(1)).alias("transactions"),
            F.min_by(F.struct(*first), F.struct("coordinator_partition", "record_offset")).alias(
                "first"
            ),
            *[F.first(span, ignorenulls=True).alias(span) for span in spans],  # one per partition
        )
        .select(*KEY, "verdict", "transactions", "first.*", *spans)
    )
    said = lookup(F.col("verdict"), _REASONS)
    said = F.when(
        F.col("verdict") == "INPUT_SKIPPED",
        F.format_string("%s; the seeded state covers offsets below %d", said, "covered_end"),
    ).otherwise(said)
    for verdict, span in _SPANS.items():
        said = F.when(
            F.col("verdict") == verdict,
            F.format_string(
                f"%s; {_SPAN_NAMES[span]} %d to %d", said, f"{span}_from", f"{span}_to"
            ),
        ).otherwise(said)
    counted = F.when(
        F.col("transactional_id").isNull(), F.format_string("%d transaction(s)", "transactions")
    ).otherwise(transactions_scope())
    values = {
        "cause": F.col("verdict"),
        "topic": F.col("topic"),
        "partition": F.col("partition"),
        "producer_id": F.col("producer_id"),
        "producer_epoch": F.col("producer_epoch"),
        "reason": said,
        "scope": F.concat(F.lit("group "), F.col("group_id"), F.lit(", "), counted),
        **{c: F.col(c) for c in ("group_id", "transactional_id", "transactions",
                                 "transaction_log_partition", "transaction_log_offset")},
    }  # fmt: skip
    identity = [F.col("group_id"), F.col("topic"), F.col("partition"), F.col("verdict")]
    finding = unverifiable_finding("ONE_TO_ONE", values, identity, config, run_id)
    return grouped.select(finding.alias("f")).select("f.*")
