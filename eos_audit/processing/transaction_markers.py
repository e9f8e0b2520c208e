"""Every partition of a transaction got the marker its coordinator decided (TORN_TRANSACTION).

Kafka's transaction coordinator decides a transaction once: it writes PrepareCommit or
PrepareAbort to `__transaction_state`, naming the transaction's partitions
(`TransactionMetadata.prepareAbortOrCommit`), sends that producer's COMMIT or ABORT marker to
each of them (`TransactionMarkerChannelManager`, WriteTxnMarkers), and writes CompleteCommit or
CompleteAbort once every partition's leader wrote its marker. A transaction's outputs and its
consumer offsets (a `__consumer_offsets` partition of the same transaction) therefore share one
outcome. A partition whose marker says otherwise, or lacks one the coordinator saw written, is a
torn transaction: offsets committed for aborted outputs lose input, committed outputs of an
aborted offset commit are processed again (docs/rules.md#torn-transaction).

The join needs no driver: each prepared partition and each marker of that producer in that
partition go into one stream per (topic, partition, producer id), ordered by time. Under
transactions v2 the marker's epoch is the prepare record's (bumped) epoch, unique per
transaction, and names its marker; under v1 every transaction of a session shares the epoch,
so the time order decides: a prepared transaction's marker is the first marker after it and
before the producer's next prepared transaction there. Times are the brokers' own: the
`__transaction_state` record's timestamp (the coordinator's append) and the marker batch's (its
leader's append). The prepare record's `transactionLastUpdateTimestampMs` is not used: Kafka
writes CompleteCommit with the time the markers were sent, before they were written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from eos_audit.processing.coordinator_audit import SOURCE_ERROR
from eos_audit.processing.exported_logs import (
    PARTITION_NOT_EXPORTED,
    exported_logs,
    has_exported_log,
    unverifiable_finding,
)
from eos_audit.sinks.finding_rows import finding_struct
from eos_audit.sources.kafka.coordinator_keys import (
    CONSUMER_OFFSETS_TOPIC as CONSUMER_OFFSETS,
)
from eos_audit.sources.kafka.coordinator_keys import (
    TRANSACTION_STATE_TOPIC as TRANSACTION_STATE,
)
from eos_audit.sql_text import lookup

if TYPE_CHECKING:
    from collections.abc import Callable

    from eos_audit.config import AuditConfig

PREPARED = {"PrepareCommit": "COMMIT", "PrepareAbort": "ABORT"}
_NEVER = 2**63 - 1  # the end of a transaction still open when the export was taken
COMPLETED = {"CompleteCommit": "COMMIT", "CompleteAbort": "ABORT"}
# UNVERIFIABLE's cause where a marker may be either of two transactions' (`write_txn_markers`).
MARKER_AMBIGUOUS = "MARKER_AMBIGUOUS"
# What a partition's marker that contradicts the coordinator's decision means, by where it is.
_CONSEQUENCE = {
    (True, "COMMIT"): "offsets committed for outputs that aborted: that input is lost",
    (True, "ABORT"): "outputs committed while their offsets aborted: that input is processed again",
    (False, "COMMIT"): "outputs visible although the transaction aborted: processed again",
    (False, "ABORT"): "outputs dropped although the transaction committed: that input is lost",
}


def prepared_partitions(records: DataFrame, skew_ms: int) -> DataFrame:
    """One row per partition of each PrepareCommit/PrepareAbort record of `__transaction_state`.

    Args:
        records: decoded coordinator records (coordinator_records contract, `_source_error`).
        skew_ms: how far a marker's leader may stamp it before the coordinator's prepare record
            (their clocks apart); never before the transaction's first record (or, without
            one, the transactional id's previous record), which follows the previous
            transaction's markers.

    Returns:
        transactional_id, its `__transaction_state` partition and offset, the producer id and
        epoch, `decision` (COMMIT or ABORT), `prepared_at`, `completed_at` (the Complete record's
        time, null while the markers were still being written), `at` (where the prepared
        transaction sorts among markers), `bumped` (its epoch is above its Ongoing records':
        the coordinator bumped it for this transaction, so it names the transaction's markers),
        topic and partition.
    """
    states = records.where(
        (F.col("coordinator_topic") == TRANSACTION_STATE)
        & F.col(SOURCE_ERROR).isNull()
        & F.col("transactional_id").isNotNull()
        & ~F.col("is_tombstone")
    )
    by_id = Window.partitionBy("transactional_id").orderBy("coordinator_partition", "offset")
    # A transaction's records: its Ongoing ones (AddPartitionsToTxn, AddOffsetsToTxn), then its
    # prepare. Its first one follows the previous transaction's end, so its markers: the
    # coordinator answers CONCURRENT_TRANSACTIONS until they are written. Its last Ongoing one is
    # often written ms before the prepare, too close for a leader's clock a few ms behind.
    nth = F.count(F.when(F.col("transaction_status") != "Ongoing", F.lit(1))).over(
        by_id.rowsBetween(Window.unboundedPreceding, -1)
    )
    numbered = states.select("*", nth.alias("nth"))
    own = Window.partitionBy("transactional_id", "nth").orderBy("coordinator_partition", "offset")
    neighbours = numbered.select(
        "transactional_id", "coordinator_partition", "offset", "timestamp", "producer_id",
        "producer_epoch", "transaction_status", "transaction_partitions",
        "client_transaction_version",
        F.coalesce(
            F.min("timestamp").over(own.rowsBetween(Window.unboundedPreceding, -1)),
            F.lag("timestamp").over(by_id),
        ).alias("previous_at"),
        F.lead(F.struct("transaction_status", "timestamp")).over(by_id).alias("next"),
        F.min("producer_epoch").over(own.rowsBetween(Window.unboundedPreceding, -1))
        .alias("ongoing_epoch"),
    )  # fmt: skip
    prepared = neighbours.where(F.col("transaction_status").isin(*PREPARED))
    decision = lookup(F.col("transaction_status"), PREPARED)
    completed = lookup(F.col("next.transaction_status"), COMPLETED)
    earliest = F.col("timestamp") - F.lit(skew_ms)
    return (
        prepared.select(
            "transactional_id",
            F.col("coordinator_partition").alias("transaction_log_partition"),
            F.col("offset").alias("transaction_log_offset"),
            "producer_id",
            "producer_epoch",
            decision.alias("decision"),
            F.col("timestamp").alias("prepared_at"),
            F.when(completed == decision, F.col("next.timestamp")).alias("completed_at"),
            F.greatest(earliest, F.least(F.coalesce("previous_at", earliest), "timestamp")).alias(
                "at"
            ),
            # Prepared at an epoch above the transaction's Ongoing records': the coordinator
            # bumped it for this transaction (transactions v2, or a fenced producer's abort).
            F.coalesce(
                F.col("producer_epoch") > F.col("ongoing_epoch"),
                F.col("client_transaction_version") >= 2,
                F.lit(False),
            ).alias("bumped"),
            F.explode("transaction_partitions").alias("tp"),
        )
        .select("*", "tp.topic", "tp.partition")
        .drop("tp")
    )


def matched_markers(prepared: DataFrame, transactions: DataFrame, skew_ms: int) -> DataFrame:
    """Each prepared partition with the marker that ended its producer's transaction there.

    Where the prepare was bumped (`prepared_partitions`: transactions v2, a fenced producer's
    abort), its marker is the producer's one of that epoch in the partition whose epoch names
    its transaction (`identified_by_epoch`), wherever its leader stamped it. Otherwise
    (transactions v1, whose transactions share the epoch), it is the producer's next marker in
    the partition, of the prepared epoch, before the producer's next prepare record and no
    later than the Complete record (by `skew_ms`): the coordinator writes Complete once every
    marker is written. Without that bound a partition holding no marker of this transaction
    would take the next transaction's, where the export of the transaction log ends before
    that one's prepare. There a marker whose epoch names its transaction (closing data an
    earlier session left open) is taken by epoch only where one transaction was prepared with
    it, and within that transaction's time.

    Args:
        prepared: `prepared_partitions`' rows.
        transactions: the audit's transactions (TRANSACTIONS columns) of every partition.
        skew_ms: how far apart the partition leader's and the coordinator's clocks may be.

    Returns:
        The prepared rows with `marker` when a marker ended the transaction there (its time,
        epoch, its transaction's first epoch, outcome, offset, the transaction's first offset
        and time and its data records); otherwise `later`, the producer's next transaction there
        (the first time of its data, and its marker if it has one); `previous_completed_at`, the
        time of the Complete record of the producer's previous prepared transaction in the
        partition; `shifted`, whether under v1 its marker was stamped within the skew after
        that Complete record, in a run of such markers in which a transaction got none (each
        may hold its predecessor's); and `next_took_it`, whether the producer's next prepared
        transaction there took the marker this one was left before.
    """
    key = ["topic", "partition", "producer_id"]
    # A transaction still open at the export's end sorts last, as if its marker came never.
    ended_at = F.coalesce(F.col("end_timestamp"), F.lit(_NEVER))
    markers = transactions.where(
        F.col("marker_offset").isNotNull() | (F.col("outcome") == "OPEN")
    ).select(
        *key,
        ended_at.alias("at"),
        F.lit(1).alias("order"),
        F.lit(None).alias("e"),
        F.struct(
            ended_at.alias("at"),
            F.col("end_epoch").alias("epoch"),
            F.col("start_epoch").alias("start_epoch"),
            F.col("outcome").alias("outcome"),
            F.col("marker_offset").alias("marker_offset"),
            F.col("first_offset").alias("first_offset"),
            F.col("first_timestamp").alias("first_timestamp"),
            F.col("records").alias("records"),
        ).alias("m"),
    )
    # How many prepared transactions of the producer in the partition have the epoch: all of a
    # v1 session's, where the prepare's epoch is not bumped.
    of_epoch = Window.partitionBy(*key, "producer_epoch")
    expected = prepared.select(
        *key,
        "at",
        F.lit(0).alias("order"),
        F.struct(
            *[c for c in prepared.columns if c not in key],
            F.count(F.lit(1)).over(of_epoch).alias("prepares_of_epoch"),
        ).alias("e"),
        F.lit(None).alias("m"),
    )
    stream = expected.unionByName(markers, allowMissingColumns=True)
    # Descending, so that a running frame (linear, unlike an unbounded-following one) reaches from
    # the stream's end down to the row: its last non-null value is the nearest one after it.
    later = Window.partitionBy(*key).orderBy(F.col("at").desc(), F.col("order").desc())
    next_marker = F.last("m", ignorenulls=True).over(
        later.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    next_prepared = F.last(F.when(F.col("order") == 0, F.col("at")), ignorenulls=True).over(
        later.rowsBetween(Window.unboundedPreceding, -1)
    )
    # The previous prepared transaction's Complete record, in time order: a marker stamped
    # within the skew after it may be that transaction's (`write_txn_markers`). In a struct, so
    # that a previous prepare without a Complete record counts (as null), not the one before it.
    earlier = Window.partitionBy(*key).orderBy("at", "order")
    previous_completed = F.last(
        F.when(F.col("order") == 0, F.struct(F.col("e.completed_at").alias("at"))),
        ignorenulls=True,
    ).over(earlier.rowsBetween(Window.unboundedPreceding, -1))
    rows = stream.select(
        "*",
        next_marker.alias("n"),
        next_prepared.alias("next_at"),
        previous_completed["at"].alias("previous_completed_at"),
    )
    completed_by = F.col("e.completed_at") + F.lit(skew_ms)
    in_time = (F.col("next_at").isNull() | (F.col("n.at") < F.col("next_at"))) & (
        F.col("e.completed_at").isNull() | (F.col("n.at") <= completed_by)
    )
    ends_it = F.coalesce(
        F.col("n.marker_offset").isNotNull()
        & (F.col("n.epoch") == F.col("e.producer_epoch"))
        & in_time,
        F.lit(False),
    )
    # A marker whose epoch names its transaction (`identified_by_epoch`) is the transaction's of
    # that epoch wherever its leader stamped it: the first of the producer's markers of that
    # epoch in the partition (a marker the coordinator sent again closes no data, and is not
    # among the transactions). Where the prepare was bumped, that epoch is the transaction's
    # own; otherwise (a v1 marker closing data an earlier session left open) only where one
    # transaction was prepared with it, and the marker falls within that transaction's time.
    named_key = {c: f"named_{c}" for c in key}
    named = (
        markers.where(identified_by_epoch(F.col("m")))
        .groupBy(
            *[F.col(c).alias(n) for c, n in named_key.items()],
            F.col("m.epoch").alias("named_epoch"),
        )
        .agg(F.min_by("m", F.col("m.marker_offset")).alias("named"))
    )
    on = [F.col(c) == F.col(n) for c, n in named_key.items()]
    judged = rows.where(F.col("order") == 0).join(
        named, [*on, F.col("e.producer_epoch") == F.col("named_epoch")], "left"
    )
    named_ok = F.col("named").isNotNull() & (
        F.col("e.bumped")
        | F.coalesce(
            (F.col("e.prepares_of_epoch") == 1)
            & (F.col("named.at") >= F.col("e.at"))
            & (F.col("e.completed_at").isNull() | (F.col("named.at") <= completed_by)),
            F.lit(False),
        )
    )
    marker = F.when(named_ok, F.col("named")).when(ends_it, F.col("n"))
    decided = judged.select(*key, "e", marker.alias("marker"), "n", "previous_completed_at")
    # Under v1 a marker stamped within the skew after the previous transaction's Complete record
    # may be that one's (`write_txn_markers`' MARKER_AMBIGUOUS): where a leader's clock runs
    # ahead, each transaction of a run of such markers takes its predecessor's. Only a marker
    # that came before its own transaction was even prepared (the coordinator sends a
    # transaction's markers after its prepare), of the predecessor's epoch, is taken for its
    # predecessor's: a leader ahead stamps a transaction's own marker after its prepare, and a
    # new session's marker is none of the old session's. A run starts at any other marker;
    # where a transaction of the run got no marker, the ones after it may each hold the one
    # before's.
    prepares = Window.partitionBy(*key).orderBy("e.at", "e.transaction_log_offset")
    near = F.coalesce(
        ~identified_by_epoch(F.col("marker"))
        & (F.col("marker.at") <= F.col("previous_completed_at") + F.lit(skew_ms))
        & (F.col("marker.at") < F.col("e.prepared_at"))
        & (F.col("e.producer_epoch") == F.lag("e.producer_epoch").over(prepares)),
        F.lit(False),
    )
    runs = decided.select(
        "*",
        near.alias("near"),
        F.sum(F.when(near, 0).otherwise(1))
        .over(prepares.rowsBetween(Window.unboundedPreceding, Window.currentRow))
        .alias("run"),
    )
    in_run = Window.partitionBy(*key, "run").orderBy("e.at", "e.transaction_log_offset")
    lacked = F.max(F.col("marker").isNull().cast("int")).over(
        in_run.rowsBetween(Window.unboundedPreceding, -1)
    )
    return runs.select(
        *key,
        "e.*",
        "marker",
        F.when(F.col("marker").isNull(), F.col("n")).alias("later"),
        "previous_completed_at",
        (F.col("near") & F.coalesce(lacked == 1, F.lit(False))).alias("shifted"),
        F.coalesce(
            F.col("n.marker_offset") == F.lead(F.col("marker.marker_offset")).over(prepares),
            F.lit(False),
        ).alias("next_took_it"),
    ).drop("at", "prepares_of_epoch")


def identified_by_epoch(marker: Column) -> Column:
    """Whether a `matched_markers` marker's epoch names one transaction of its producer.

    Its epoch is above its transaction's first batch's: the coordinator bumped it for that
    transaction, as transactions v2 does for every one (`TransactionMetadata
    .prepareAbortOrCommit`) and v1 when it fences the producer to abort a transaction
    (`prepareFenceProducerEpoch`); the producer's next transaction writes at that epoch or a
    later one. Under v1 a producer's transactions share its epoch, and only the time order
    tells them apart; there a marker closing data left open from an earlier session is above
    it too, and its epoch is all of the new session's: for a prepare that was not bumped,
    `matched_markers` names a marker by its epoch only where one transaction was prepared with
    it.
    """
    return F.coalesce(marker["start_epoch"] < marker["epoch"], F.lit(False))


def write_txn_markers(
    records: DataFrame,
    history: DataFrame,
    transactions: DataFrame,
    partitions: DataFrame,
    config: AuditConfig,
    run_id: str,
    stage: Callable[[DataFrame], DataFrame] | None = None,
) -> DataFrame:
    """TORN_TRANSACTION and UNVERIFIABLE findings: each prepared partition against its marker.

    Named after the coordinator's WriteTxnMarkers, whose work this checks. A partition whose
    marker contradicts the decision is torn. One without the marker is torn where its data of
    the transaction was left open (the producer's next transaction there, closed later or
    never, began before the prepare) and the partition holds a batch from after the Complete
    record. A partition missing from the export, a marker whose type the export does not show,
    a partition exported before the Complete record, or, under transactions v1, a marker two
    neighbouring transactions could claim (MARKER_AMBIGUOUS) is UNVERIFIABLE, one finding per
    transactional id, partition and reason. A partition the transaction wrote nothing to has
    a marker Kafka completes nothing with (`ProducerAppendInfo.appendEndTxnMarker`), which the
    audit's transactions do not hold: it is not judged.

    Args:
        records: decoded coordinator records (coordinator_records contract, `_source_error`).
        history: the offset replay's history (`coordinator_audit.replay_offsets`): a torn
            `__consumer_offsets` marker is reported once per offset commit it decided.
        transactions: the audit's transactions (TRANSACTIONS columns) of every partition.
        partitions: the audit's partition statistics (kernel partials, as `exported_logs`
            reads them: the latest batch of each, batches a --since-state run skipped included).
        config: the run configuration (`processing.clock_skew_ms`, severities).
        run_id: the run id.
        stage: writes a DataFrame where the run stages its work and reads it back (the
            pipeline's `checked_once`), or None: each prepared partition with its matched
            marker, which the torn ones, the offset commits their markers decided and the
            undecided ones read, staged; without it that plan (the prepares, the markers and
            their windows) is planned and run once for each.

    Returns:
        FINDINGS rows.
    """
    skew = config.processing.clock_skew_ms
    prepared = prepared_partitions(records, skew)
    exported = exported_logs(partitions).select("topic", "partition", "log_end", "written_until")
    judged = matched_markers(prepared, transactions, skew).join(
        exported, ["topic", "partition"], "left"
    )
    if stage is not None:
        judged = stage(judged)
    marker, later = F.col("marker"), F.col("later")
    # Without its marker, the partition's data of the transaction stays open until a later
    # marker of the producer closes it with the next transaction's (or never): the producer's
    # next transaction there began before this one was prepared. Where the prepare was bumped,
    # the later data's epoch says so: below the prepared epoch, this transaction's data left
    # open (an open one at the export's end included). Otherwise the times say, unless that
    # data's epoch is another session's: data written before the prepare carries the
    # producer's clock, and must precede the prepare by the tolerated skew.
    data_left_open = (
        F.when(
            F.col("bumped") & later["start_epoch"].isNotNull(),
            later["start_epoch"] < F.col("producer_epoch"),
        )
        # Data of an epoch other than the prepared one: of an earlier session (this
        # transaction's marker would have closed it) or of a later one (written after it).
        .when(
            identified_by_epoch(later) & (later["start_epoch"] != F.col("producer_epoch")),
            later["start_epoch"] < F.col("producer_epoch"),
        )
        .otherwise(later["first_timestamp"] <= F.col("prepared_at") - F.lit(skew))
    )
    completed = F.col("completed_at").isNotNull()
    contradicts = marker["outcome"].isin("COMMIT", "ABORT") & (
        marker["outcome"] != F.col("decision")
    )
    # Under transactions v1 a marker stamped within the skew after a Complete record may be that
    # transaction's or the next one's (its leader's clock ahead of the coordinator's by the few
    # milliseconds between the Complete record and the next transaction's first): where a run
    # of such markers follows a transaction left without one (`shifted`), or the next
    # transaction took the marker this one was left before, either could claim it.
    taken_by_next = (
        ~identified_by_epoch(later)
        & F.col("next_took_it")
        & F.coalesce(later["at"] <= F.col("completed_at") + F.lit(skew), F.lit(False))
    )
    verdict = (
        # Exported without a batch time (Parquet may give none): not known to span the Complete
        # record, EXPORT_DOES_NOT_SPAN below, never a partition missing.
        F.when(~has_exported_log(), PARTITION_NOT_EXPORTED)
        .when(contradicts & F.col("shifted"), MARKER_AMBIGUOUS)
        .when(contradicts, F.concat(marker["outcome"], F.lit("_WHERE_"), F.col("decision")))
        .when(marker.isNotNull() & ~marker["outcome"].isin("COMMIT", "ABORT"),
              "MARKER_TYPE_NOT_SHOWN")
        .when(marker.isNull() & completed & data_left_open & taken_by_next, MARKER_AMBIGUOUS)
        # The partition was written after the coordinator completed (the leader's clock against
        # the coordinator's, by the tolerated skew): its export is later than the marker.
        .when(marker.isNull() & completed & data_left_open
              & (F.col("written_until") >= F.col("completed_at") + F.lit(skew)), "MARKER_MISSING")
        .when(marker.isNull() & completed & data_left_open, "EXPORT_DOES_NOT_SPAN")
    )  # fmt: skip
    verdicts = judged.withColumn("verdict", verdict).where(F.col("verdict").isNotNull())
    unverifiable = [
        PARTITION_NOT_EXPORTED, "MARKER_TYPE_NOT_SHOWN", "EXPORT_DOES_NOT_SPAN", MARKER_AMBIGUOUS
    ]  # fmt: skip
    torn = _with_decided_offsets(
        verdicts.where(~F.col("verdict").isin(*unverifiable)), judged, history
    )
    return _torn_findings(torn, config, run_id).unionByName(
        _unverifiable_findings(verdicts.where(F.col("verdict").isin(*unverifiable)), config, run_id)
    )


def _consequence(marker_type: Column) -> Column:
    in_offsets = F.col("topic") == CONSUMER_OFFSETS
    out = F.lit("a partition of the transaction has no marker")
    for (offsets, said), text in _CONSEQUENCE.items():
        out = F.when((in_offsets == F.lit(offsets)) & (marker_type == said), text).otherwise(out)
    return out


def _with_decided_offsets(torn: DataFrame, judged: DataFrame, history: DataFrame) -> DataFrame:
    """Torn partitions with each offset commit their transaction's offsets markers decided.

    A finding per commit, with its group and input partition, so that the report's group charts
    mark it: a torn `__consumer_offsets` partition's own marker's commits; a torn output
    partition's, the commits the markers of the same transaction (its prepare record) decided in
    `__consumer_offsets`: the input whose outputs it tore. A torn partition whose transaction
    decided no commit keeps its one row.

    Args:
        torn: the torn prepared partitions (`matched_markers`' rows with their verdict).
        judged: every prepared partition with its marker (`matched_markers`' rows).
        history: the offset replay's history (`coordinator_audit.replay_offsets`).
    """
    # Named apart from `torn`'s columns: both sides come from `judged`, and a condition between
    # two columns of one lineage would be trivially true.
    offsets_markers = judged.where(
        (F.col("topic") == CONSUMER_OFFSETS) & F.col("marker").isNotNull()
    ).select(
        F.col("transaction_log_partition").alias("decided_log_partition"),
        F.col("transaction_log_offset").alias("decided_log_offset"),
        F.col("partition").alias("offsets_partition"),
        F.col("marker.marker_offset").alias("decided_by"),
    )
    decided = history.where(F.col("marker_offset").isNotNull()).select(
        F.col("coordinator_partition").alias("offsets_partition"),
        F.col("marker_offset").alias("decided_by"),
        F.struct(
            "group_id",
            F.col("topic").alias("committed_topic"),
            F.col("partition").alias("committed_partition"),
            "committed_offset",
            "record_offset",
            F.col("coordinator_partition").alias("offsets_partition"),
        ).alias("commit"),
    )
    commits = offsets_markers.join(decided, ["offsets_partition", "decided_by"])
    on = (
        (torn["transaction_log_partition"] == commits["decided_log_partition"])
        & (torn["transaction_log_offset"] == commits["decided_log_offset"])
        & (
            (torn["topic"] != F.lit(CONSUMER_OFFSETS))
            | (torn["partition"] == commits["offsets_partition"])
        )
    )
    return torn.join(commits, on, "left").select(torn["*"], "commit")


def _torn_findings(torn: DataFrame, config: AuditConfig, run_id: str) -> DataFrame:
    marker = F.col("marker")
    says = F.when(
        marker.isNull(),
        F.format_string("has no marker of it (CompleteCommit/Abort at %s ms)", "completed_at"),
    ).otherwise(F.format_string("has a %s marker at offset %s", marker["outcome"],
                                marker["marker_offset"]))  # fmt: skip
    values = {
        "cause": F.col("verdict"),
        "topic": F.col("topic"),
        "partition": F.col("partition"),
        "producer_id": F.col("producer_id"),
        "producer_epoch": F.col("producer_epoch"),
        # A missing marker has no offset: -1, as a failed send's findings have.
        "base_offset": F.coalesce(marker["marker_offset"], F.lit(-1)),
        "last_offset": F.coalesce(marker["marker_offset"], F.lit(-1)),
        "batch_timestamp": marker["at"],
        "transactional_id": F.col("transactional_id"),
        "decision": F.col("decision"),
        "marker_type": F.coalesce(marker["outcome"], F.lit("none")),
        "marker_offset": marker["marker_offset"],
        "transaction_log_partition": F.col("transaction_log_partition"),
        "transaction_log_offset": F.col("transaction_log_offset"),
        "marker_says": says,
        "consequence": _consequence(marker["outcome"]),
        "group_id": F.col("commit.group_id"),
        "committed_topic": F.col("commit.committed_topic"),
        "committed_partition": F.col("commit.committed_partition"),
        "committed_offset": F.col("commit.committed_offset"),
        "offsets_partition": F.col("commit.offsets_partition"),
        "previous_offset": F.col("commit.record_offset"),
    }
    # A transaction may commit offsets of groups in several `__consumer_offsets` partitions,
    # whose records can share an offset: the commit is its partition and offset.
    identity = [F.col("transaction_log_partition"), F.col("transaction_log_offset"),
                F.col("topic"), F.col("partition"), F.col("commit.record_offset"),
                F.col("commit.offsets_partition")]  # fmt: skip
    finding = finding_struct("TORN_TRANSACTION", config, run_id, identity=identity, values=values)
    return torn.select(finding.alias("f")).select("f.*")


_REASONS = {
    PARTITION_NOT_EXPORTED: "the partition is not in the export",
    "MARKER_TYPE_NOT_SHOWN": "the export does not show its markers' types (kafka-dump-log.sh "
    "without --deep-iteration)",
    "EXPORT_DOES_NOT_SPAN": "the exported partition is not known to span the transaction's time "
    "(its latest batch is not later than the coordinator's Complete record by the tolerated "
    "clock skew, or its batches carry no time)",
    MARKER_AMBIGUOUS: "the producer's transactions there share an epoch (transactions v1), and "
    "the marker that would decide was stamped within the tolerated clock skew after a "
    "Complete record: whether it is this transaction's or the one's next to it, the times "
    "cannot tell",
}


def transactions_scope() -> Column:
    """What an UNVERIFIABLE finding about transactions covers, for its `detail`.

    From the columns `transactions`, `transactional_id`, `transaction_log_partition` and
    `transaction_log_offset` (the first transaction's `__transaction_state` record).
    """
    return F.format_string(
        "%d transaction(s) of %s, the first at __transaction_state-%d offset %d",
        "transactions", "transactional_id", "transaction_log_partition", "transaction_log_offset",
    )  # fmt: skip


def _unverifiable_findings(rows: DataFrame, config: AuditConfig, run_id: str) -> DataFrame:
    grouped = rows.groupBy(
        "transactional_id", "transaction_log_partition", "topic", "partition", "verdict"
    ).agg(
        F.count(F.lit(1)).alias("transactions"),
        F.min("transaction_log_offset").alias("transaction_log_offset"),
        F.min_by("producer_id", "transaction_log_offset").alias("producer_id"),
        F.min_by("producer_epoch", "transaction_log_offset").alias("producer_epoch"),
    )
    values = {
        "cause": F.col("verdict"),
        "topic": F.col("topic"),
        "partition": F.col("partition"),
        "producer_id": F.col("producer_id"),
        "producer_epoch": F.col("producer_epoch"),
        "reason": lookup(F.col("verdict"), _REASONS),
        "scope": transactions_scope(),
        "transactional_id": F.col("transactional_id"),
        "transactions": F.col("transactions"),
        "transaction_log_partition": F.col("transaction_log_partition"),
        "transaction_log_offset": F.col("transaction_log_offset"),
    }
    identity = [F.col("transactional_id"), F.col("topic"), F.col("partition"), F.col("verdict")]
    finding = unverifiable_finding("TORN_TRANSACTION", values, identity, config, run_id)
    return grouped.select(finding.alias("f")).select("f.*")
