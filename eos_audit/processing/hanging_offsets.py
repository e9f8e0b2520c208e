"""Offset commits pending in a transaction no coordinator will end (HANGING_OFFSET_TRANSACTION).

A transactional offset commit stays pending in the group coordinator until its producer's marker
lands in the `__consumer_offsets` partition; while it is pending the group's fetches of those
offsets answer UNSTABLE_OFFSET_COMMIT and the partition's last stable offset, and its cleaning,
stay behind it. Kafka's `kafka-transactions.sh find-hanging` (`TransactionsCommand`,
`FindHangingTransactionsCommand.filterHangingTransactions`) calls an open transaction hanging
when it is older than the maximum transaction timeout and its producer id has no transactional
id, or its transactional id's current transaction no longer lists the partition: no coordinator
will ever write its marker (docs/rules.md#hanging-offset-transaction).

The same, offline: the offset replay's PENDING commits at the export's end, per
`__consumer_offsets` partition and producer id, against the transaction log's latest record of
that producer id's transactional id.

The same latest record tells which open transactions are KIP-939 two-phase-commit ones, which
their coordinator never aborts: the replay's HANGING_TRANSACTION of one, found by age on its
partition alone, is lowered to INFO (docs/rules.md#hanging-transaction).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from eos_audit.processing.coordinator_audit import SOURCE_ERROR
from eos_audit.processing.exported_logs import (
    EXPORT_DOES_NOT_SPAN,
    TRANSACTION_LOG_NOT_WHOLE,
    exported_logs,
    transaction_log_held,
    transaction_log_held_reason,
    transaction_log_reach_reason,
    unverifiable_finding,
)
from eos_audit.sinks.finding_rows import finding_struct, lowered_by
from eos_audit.sources.kafka.coordinator_keys import (
    CONSUMER_OFFSETS_TOPIC as CONSUMER_OFFSETS,
)
from eos_audit.sources.kafka.coordinator_keys import (
    TRANSACTION_STATE_TOPIC as TRANSACTION_STATE,
)

if TYPE_CHECKING:
    from eos_audit.config import AuditConfig

_OPEN_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort")
# Integer.MAX_VALUE: the timeout by which Kafka marks a KIP-939 two-phase-commit transaction
# (`TransactionMetadata.isDistributedTwoPhaseCommitTxn`).
TWO_PHASE_COMMIT_TIMEOUT_MS = 2**31 - 1
TWO_PHASE_COMMIT = "TWO_PHASE_COMMIT"  # the cause (findings.CAUSE_CEILING)


def find_hanging_transactions(
    history: DataFrame,
    records: DataFrame,
    config: AuditConfig,
    run_id: str,
    as_of_ms: int | None,
    partitions_listed: Collection[tuple[str, int]] = (),
    partitions: DataFrame | None = None,
    stage: Callable[[DataFrame], DataFrame] | None = None,
) -> DataFrame:
    """HANGING_OFFSET_TRANSACTION findings, as `kafka-transactions.sh find-hanging` decides.

    That no transactional id owns a producer id (NO_TRANSACTIONAL_ID) is told only from the whole
    transaction log: every one of `processing.transaction_state_partitions` partitions in the
    export, listed or holding records, each of them decoded whole. Otherwise such a producer's
    pending commits are UNVERIFIABLE (TRANSACTION_LOG_NOT_WHOLE): its transactional id may be
    in a partition the export lacks. Nor unless the log was copied after the first pending
    commit: at `--export-time`, or, without it, where a record of the log, of any id, is later
    than the commit by the clock skew; else UNVERIFIABLE (EXPORT_DOES_NOT_SPAN): the id may
    have been written after the copy.
    NOT_IN_CURRENT_TRANSACTION needs the id's latest exported record to be no older than the
    first pending commit (less the clock skew): the coordinator wrote the Ongoing record
    listing the partition before it, so an older latest record means the transaction log was
    exported earlier (UNVERIFIABLE, EXPORT_DOES_NOT_SPAN), unless a later record of that
    partition of the log, of any id, shows its export reached past the commit. Without
    `--export-time`, nor may that record be newer than the `__consumer_offsets` partition's
    latest batch (by the skew): the partition may have been exported before it, and before the
    marker that closed the commits (a KIP-939 transaction open for hours, completed between
    the two copies).

    Args:
        history: the offset replay's history (`coordinator_audit.replay_offsets`).
        records: decoded coordinator records (coordinator_records contract, `_source_error`).
        config: the run configuration (`transactions.max_timeout_ms`,
            `processing.transaction_state_partitions`, severities).
        run_id: the run id.
        as_of_ms: the export's time (`--export-time`); without it, each `__consumer_offsets`
            partition's last commit record.
        partitions_listed: the (topic, partition) pairs the export lists, with or without
            records (`BatchRead.partitions_listed`).
        partitions: the audit's partition statistics (kernel partials, as `exported_logs`
            reads them), for each `__consumer_offsets` partition's latest batch; without them,
            its last commit record.
        stage: writes a DataFrame where the run stages its work and reads it back (the
            pipeline's `checked_once`), or None: the judged producers, which both the findings
            and the undecided ones read, staged; without it their plan (the pending commits,
            the transaction log's owners and ends) is planned and run once for each.

    Returns:
        FINDINGS rows (UNVERIFIABLE ones among them).
    """
    last_record = history.groupBy("coordinator_partition").agg(
        F.max("timestamp").alias("last_record_at")
    )
    if partitions is not None:
        written = exported_logs(partitions).where(F.col("topic") == CONSUMER_OFFSETS)
        last_record = last_record.join(
            written.select(F.col("partition").alias("coordinator_partition"), "written_until"),
            "coordinator_partition",
            "left",
        )
    else:
        last_record = last_record.withColumn("written_until", F.lit(None).cast("long"))
    pending = (
        history.where(F.col("outcome") == "PENDING")
        .groupBy("coordinator_partition", "producer_id")
        .agg(
            F.min_by(
                F.struct("record_offset", "producer_epoch", "timestamp", "group_id", "source"),
                "record_offset",
            ).alias("first"),
            F.count(F.lit(1)).alias("offsets"),
        )
        .join(last_record, "coordinator_partition")
    )
    now = F.lit(as_of_ms) if as_of_ms is not None else F.col("last_record_at")
    old = pending.withColumn("open_ms", now - F.col("first.timestamp")).where(
        F.col("open_ms") > F.lit(config.transactions.max_timeout_ms)
    )
    # How far each exported partition of the transaction log reaches: its latest record, of any
    # transactional id.
    log_ends = (
        records.where(
            (F.col("coordinator_topic") == TRANSACTION_STATE) & F.col(SOURCE_ERROR).isNull()
        )
        .groupBy(F.col("coordinator_partition").alias("log_partition"))
        .agg(F.max("timestamp").alias("log_partition_until"))
    )
    judged = (
        old.join(_current_transactions(records), "producer_id", "left")
        .join(log_ends, F.col("log.partition") == F.col("log_partition"), "left")
        .crossJoin(
            transaction_log_held(
                records, config.processing.transaction_state_partitions, partitions_listed
            )
        )
    )
    if stage is not None:
        judged = stage(judged)
    log = F.col("log")
    whole = F.col("log_partitions_held") == F.col("log_partitions")
    listed = F.exists(
        log["transaction_partitions"],
        lambda tp: (
            (tp["topic"] == CONSUMER_OFFSETS) & (tp["partition"] == F.col("coordinator_partition"))
        ),
    )
    first = F.col("first")
    not_current = (
        F.col("replaced")
        | ~log["transaction_status"].isin(*_OPEN_STATES)
        | ~F.coalesce(listed, F.lit(False))
    )
    # The coordinator writes the Ongoing record listing the partition (AddOffsetsToTxn) before
    # the commit: an id's latest record older than the commit (by more than the skew) is of a
    # transaction log exported before it, which cannot say what the transaction is now, unless
    # the log's partition holds a record of another id later than the commit by the skew: it
    # was exported after the commit, and holds the id's records up to then (a commit sent
    # without AddOffsetsToTxn included).
    skew = F.lit(config.processing.clock_skew_ms)
    log_spans = (log["timestamp"] >= first["timestamp"] - skew) | F.coalesce(
        F.col("log_partition_until") >= first["timestamp"] + skew, F.lit(False)
    )
    # Without --export-time, the partition's export is known to reach its latest batch only: a
    # newer record of the transaction log may have come after it, and so may the marker.
    offsets_end = F.coalesce("written_until", "last_record_at")
    log_after = F.lit(False) if as_of_ms is not None else (log["timestamp"] > offsets_end + skew)
    # A producer id no record has: its transactional id's record (InitProducerId) comes before
    # any commit of it, so the whole log says there is none only if it was copied after the
    # commit: at --export-time, which says so, else where a record of the log, of any id and
    # partition, is later than the commit by the skew (the log's partitions copied together, as
    # the id's partition is not known).
    log_reaches = (
        F.lit(True)
        if as_of_ms is not None
        else F.coalesce(F.col("log_latest.timestamp") >= first["timestamp"] + skew, F.lit(False))
    )
    # Where the export cannot decide, no cause: `undecided` below.
    cause = F.when(log.isNull(), F.when(whole & log_reaches, F.lit("NO_TRANSACTIONAL_ID"))).when(
        not_current & log_spans & ~log_after, "NOT_IN_CURRENT_TRANSACTION"
    )
    undecided_cause = F.when(
        log.isNull(),
        F.when(~whole, F.lit(TRANSACTION_LOG_NOT_WHOLE)).when(
            ~log_reaches, F.lit(EXPORT_DOES_NOT_SPAN)
        ),
    ).when(not_current & (~log_spans | log_after), F.lit(EXPORT_DOES_NOT_SPAN))
    hanging = judged.withColumn("cause", cause).where(F.col("cause").isNotNull())
    values = {
        "cause": F.col("cause"),
        "topic": F.lit(CONSUMER_OFFSETS),
        "partition": F.col("coordinator_partition"),
        "producer_id": F.col("producer_id"),
        "producer_epoch": first["producer_epoch"],
        "base_offset": first["record_offset"],
        "last_offset": first["record_offset"],
        "batch_timestamp": first["timestamp"],
        "source": first["source"],
        "group_id": first["group_id"],
        "pending_offsets": F.col("offsets"),
        "open_ms": F.col("open_ms"),
        "transactional_id": log["transactional_id"],
        "current_state": log["transaction_status"],
        "transaction_log_partition": log["partition"],
        "transaction_log_offset": log["offset"],
        "why": F.when(
            log.isNull(), F.lit("no transactional id in the transaction log has that producer id")
        ).when(
            F.col("replaced"),
            F.format_string(
                "its transactional id %s has moved on to producer %s (__transaction_state-%s "
                "offset %s, %s)",
                log["transactional_id"], log["producer_id"], log["partition"], log["offset"],
                log["transaction_status"],
            ),
        ).otherwise(
            F.format_string(
                "its transactional id %s is %s (__transaction_state-%s offset %s) without this "
                "partition",
                log["transactional_id"], log["transaction_status"], log["partition"],
                log["offset"],
            )
        ),
    }  # fmt: skip
    identity = [F.col("coordinator_partition"), F.col("producer_id"), first["record_offset"]]
    finding = finding_struct(
        "HANGING_OFFSET_TRANSACTION", config, run_id, identity=identity, values=values
    )
    undecided = judged.withColumn("cause", undecided_cause).where(F.col("cause").isNotNull())
    unverifiable = unverifiable_finding(
        "HANGING_OFFSET_TRANSACTION",
        {
            "cause": F.col("cause"),
            "topic": F.lit(CONSUMER_OFFSETS),
            "partition": F.col("coordinator_partition"),
            "group_id": first["group_id"],
            "scope": F.format_string(
                "producer %d, %d offset commit(s) of group %s pending since record %d for %d ms",
                "producer_id", "offsets", first["group_id"], first["record_offset"], "open_ms",
            ),
            "reason": F.when(
                F.col("cause") == TRANSACTION_LOG_NOT_WHOLE,
                F.concat(
                    F.lit("no exported record of __transaction_state has that producer id, and "),
                    transaction_log_held_reason(config),
                    F.lit(": its transactional id may be in one the export lacks"),
                ),
            ).when(
                log.isNull(),
                F.concat(
                    F.lit("no exported record of __transaction_state has that producer id, and "),
                    transaction_log_reach_reason("the first pending commit"),
                    F.lit(": its export may end before the producer's transactional id was "
                          "written (InitProducerId, before its first commit)"),
                ),
            ).when(
                ~log_spans,
                F.format_string(
                    "the latest exported record of its transactional id %s "
                    "(__transaction_state-%s offset %s, %s) is older than the first pending "
                    "commit, and that partition's latest is no later than it by the tolerated "
                    "clock skew: its export may end before the transaction began",
                    log["transactional_id"], log["partition"], log["offset"],
                    log["transaction_status"],
                ),
            ).otherwise(
                F.format_string(
                    "the latest exported record of its transactional id %s "
                    "(__transaction_state-%s offset %s, %s) is newer than the latest batch of "
                    "the __consumer_offsets partition's export: the marker that closed the "
                    "commits may have been written after that export (give --export-time if "
                    "both were exported at once)",
                    log["transactional_id"], log["partition"], log["offset"],
                    log["transaction_status"],
                )
            ),
        },
        [F.col("coordinator_partition"), F.col("producer_id"), F.col("cause")],
        config,
        run_id,
    )  # fmt: skip
    return (
        hanging.select(finding.alias("f"))
        .unionByName(undecided.select(unverifiable.alias("f")))
        .select("f.*")
    )


def _current_transactions(records: DataFrame) -> DataFrame:
    """Each producer id's transaction as the transaction log has it at its end.

    That is the latest `__transaction_state` record of the producer id's transactional id:
    find-hanging asks which transactional id a producer id is the current one of
    (ListTransactions filtered by producer id, `TransactionStateManager.listTransactionStates`),
    so a producer id its transactional id has moved on from (KIP-890's new producer id when the
    epoch is exhausted, `TransactionMetadata.prepareAbortOrCommit`; a new InitProducerId once
    the id expired) belongs to none, whatever its own latest record says.

    Returns producer_id, `replaced` (the id's latest record is another producer id's) and a
    `log` struct of that record: transactional_id, transaction_status,
    transaction_partitions, transaction_timeout_ms, producer_id, and the record's partition,
    offset and timestamp.
    """
    states = records.where(
        (F.col("coordinator_topic") == TRANSACTION_STATE)
        & F.col(SOURCE_ERROR).isNull()
        & F.col("transactional_id").isNotNull()
        & ~F.col("is_tombstone")
    )

    def latest(key: str) -> DataFrame:
        newest_first = Window.partitionBy(key).orderBy(
            F.col("coordinator_partition").desc(), F.col("offset").desc()
        )
        return states.withColumn("rank", F.row_number().over(newest_first)).where(
            F.col("rank") == 1
        )

    owners = latest("producer_id").select("producer_id", "transactional_id")
    current = latest("transactional_id").select(
        "transactional_id",
        F.struct(
            "transactional_id",
            "transaction_status",
            "transaction_partitions",
            "transaction_timeout_ms",
            "producer_id",
            F.col("coordinator_partition").alias("partition"),
            "offset",
            "timestamp",
        ).alias("log"),
    )  # fmt: skip
    return owners.join(current, "transactional_id").select(
        "producer_id", (F.col("log.producer_id") != F.col("producer_id")).alias("replaced"), "log"
    )


def two_phase_commit_record() -> Column:
    """Whether a decoded coordinator record is of a KIP-939 two-phase-commit transaction.

    Kafka marks such a transaction by its timeout alone: `TransactionMetadata
    .isDistributedTwoPhaseCommitTxn` is `txnTimeoutMs == Integer.MAX_VALUE`.
    """
    return (F.col("coordinator_topic") == TRANSACTION_STATE) & F.coalesce(
        F.col("transaction_timeout_ms") == F.lit(TWO_PHASE_COMMIT_TIMEOUT_MS), F.lit(False)
    )


def distributed_two_phase_commit_partitions(records: DataFrame) -> DataFrame:
    """The partitions of each open KIP-939 two-phase-commit transaction.

    The coordinator never aborts such a transaction (docs/rules.md#hanging-transaction). One is
    open where its producer id is still its transactional id's, and that id's latest record has
    that timeout (`two_phase_commit_record`) and an open state; its partitions are the ones it
    lists. The caller asks for them only where
    some record has that timeout (the usual case has none: no join).

    Args:
        records: decoded coordinator records (coordinator_records contract, `_source_error`).

    Returns:
        producer_id, topic, partition (distinct).
    """
    log = F.col("log")
    is_open = (
        ~F.col("replaced")
        & (log["transaction_timeout_ms"] == F.lit(TWO_PHASE_COMMIT_TIMEOUT_MS))
        & log["transaction_status"].isin(*_OPEN_STATES)
    )
    listed = _current_transactions(records).where(is_open)
    return (
        listed.select("producer_id", F.explode(log["transaction_partitions"]).alias("tp"))
        .select("producer_id", F.col("tp.topic").alias("topic"), F.col("tp.partition"))
        .distinct()
    )


def lower_distributed_two_phase_commit_txns(staged: DataFrame, prepared: DataFrame) -> DataFrame:
    """The stage with each HANGING_TRANSACTION of an open two-phase-commit transaction lowered.

    The replay reads a partition alone and calls its transaction hanging by age
    (docs/rules.md#hanging-transaction); the transaction log says whether its coordinator would
    ever abort it. One of a producer id whose open transaction is a KIP-939 one listing that
    partition keeps its type and evidence, with the cause TWO_PHASE_COMMIT and INFO: it still
    pins the last stable offset, by design.

    Args:
        staged: the run's staged output records.
        prepared: `distributed_two_phase_commit_partitions` (small: broadcast).

    Returns:
        `staged`, those findings lowered; every other row as it was.
    """
    finding = F.col("findings")
    keys = prepared.select(
        F.col("producer_id").alias("_2pc_producer_id"),
        F.col("topic").alias("_2pc_topic"),
        F.col("partition").alias("_2pc_partition"),
    )
    on = (
        (finding["finding_type"] == "HANGING_TRANSACTION")
        & (finding["producer_id"] == F.col("_2pc_producer_id"))
        & (finding["topic"] == F.col("_2pc_topic"))
        & (finding["partition"] == F.col("_2pc_partition"))
    )
    lowered = lowered_by(TWO_PHASE_COMMIT)
    joined = staged.join(F.broadcast(keys), on, "left")
    return joined.withColumn(
        "findings", F.when(F.col("_2pc_producer_id").isNotNull(), lowered).otherwise(finding)
    ).drop("_2pc_producer_id", "_2pc_topic", "_2pc_partition")
