"""A transaction committed by a producer the transaction log had already fenced (ZOMBIE_COMMIT).

The transaction coordinator fences a transactional id's older producer by bumping its epoch
(`InitProducerId`; `TransactionMetadata.prepareFenceProducerEpoch` when a transaction is
open) or by moving the id to a new producer id (KIP-890's next producer id on epoch
exhaustion, or a new id after expiry). It writes every such change to `__transaction_state`,
and it writes markers with the epoch of the transaction it completes, so a COMMIT marker's
(producer id, epoch) is the transaction log's (producer id, epoch) of the moment. A COMMIT
marker whose epoch is below the epoch the log had already given its producer, or whose producer
id the log had already replaced, made a fenced producer's outputs or offsets visible: a zombie
commit (docs/rules.md#zombie-commit).

One stream per transactional id: its `__transaction_state` records and the COMMIT markers of its
producer ids (in every exported partition), ordered by the brokers' append times; each marker is
judged against the log's latest record before it (less the tolerated clock skew), carried down
the stream as a running value. A producer id counts as replaced only by one the log gave the id
after it, and an epoch as fenced only by a later epoch of the same producer id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from eos_audit.processing.coordinator_audit import SOURCE_ERROR
from eos_audit.sinks.finding_rows import finding_struct
from eos_audit.sources.kafka.coordinator_keys import (
    TRANSACTION_STATE_TOPIC as TRANSACTION_STATE,
)

if TYPE_CHECKING:
    from eos_audit.config import AuditConfig


def prepare_fence_producer_epoch(
    records: DataFrame, transactions: DataFrame, config: AuditConfig, run_id: str
) -> DataFrame:
    """ZOMBIE_COMMIT findings: COMMIT markers of producers the transaction log had fenced.

    Named after the coordinator's fencing (`TransactionMetadata.prepareFenceProducerEpoch`).

    Args:
        records: decoded coordinator records (coordinator_records contract, `_source_error`).
        transactions: the audit's transactions (TRANSACTIONS columns) of every partition.
        config: the run configuration (`processing.clock_skew_ms`, severities).
        run_id: the run id.

    Returns:
        FINDINGS rows.
    """
    states = records.where(
        (F.col("coordinator_topic") == TRANSACTION_STATE)
        & F.col(SOURCE_ERROR).isNull()
        & F.col("transactional_id").isNotNull()
        & ~F.col("is_tombstone")
        & F.col("timestamp").isNotNull()
    )
    # Which transactional id a producer id served (a producer id serves one id).
    owners = states.groupBy("producer_id").agg(F.min("transactional_id").alias("transactional_id"))
    commits = (
        transactions.where((F.col("outcome") == "COMMIT") & F.col("end_timestamp").isNotNull())
        .join(owners, "producer_id")
        .select(
            "transactional_id",
            (F.col("end_timestamp") - F.lit(config.processing.clock_skew_ms)).alias("at"),
            F.lit(1).alias("order"),
            F.lit(None).alias("log"),
            F.struct(
                "topic",
                "partition",
                "producer_id",
                F.col("end_epoch").alias("producer_epoch"),
                "marker_offset",
                "end_timestamp",
                "first_offset",
            ).alias("marker"),
        )  # fmt: skip
    )
    logged = states.select(
        "transactional_id",
        F.col("timestamp").alias("at"),
        F.lit(0).alias("order"),
        F.struct(
            "producer_id", "producer_epoch", "transaction_status",
            F.col("coordinator_partition").alias("partition"), "offset",
        ).alias("log"),
        F.lit(None).alias("marker"),
    )  # fmt: skip
    # Records of one millisecond in the log's order, so the latest is the same in every run.
    before = (
        Window.partitionBy("transactional_id")
        .orderBy("at", "order", F.col("log.partition"), F.col("log.offset"))
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    stream = logged.unionByName(commits, allowMissingColumns=True)
    judged = stream.select(
        "transactional_id",
        "marker",
        F.last("log", ignorenulls=True).over(before).alias("current"),
        # The producer ids the log had given the id by then. Kafka moves an id only forward, to
        # a new producer id: one not given yet is newer than the latest record's, which the skew
        # may leave before the marker (KIP-890 moves the id every 32,766 transactions).
        F.collect_set(F.col("log.producer_id")).over(before).alias("given"),
    ).where(F.col("marker").isNotNull() & F.col("current").isNotNull())
    marker, current = F.col("marker"), F.col("current")
    replaced = (current["producer_id"] != marker["producer_id"]) & F.array_contains(
        "given", marker["producer_id"]
    )
    # Epochs are one producer id's: a newer id starts again at 0.
    fenced = (current["producer_id"] == marker["producer_id"]) & (
        current["producer_epoch"] > marker["producer_epoch"]
    )
    zombies = judged.withColumn(
        "cause", F.when(replaced, "PRODUCER_ID_REPLACED").when(fenced, "EPOCH_FENCED")
    ).where(F.col("cause").isNotNull())
    values = {
        "cause": F.col("cause"),
        "topic": marker["topic"],
        "partition": marker["partition"],
        "producer_id": marker["producer_id"],
        "producer_epoch": marker["producer_epoch"],
        "base_offset": marker["marker_offset"],
        "last_offset": marker["marker_offset"],
        "previous_offset": marker["first_offset"],
        "batch_timestamp": marker["end_timestamp"],
        "transactional_id": F.col("transactional_id"),
        "current_producer_id": current["producer_id"],
        "current_producer_epoch": current["producer_epoch"],
        "current_state": current["transaction_status"],
        "transaction_log_partition": current["partition"],
        "transaction_log_offset": current["offset"],
        "fenced_by": F.when(
            F.col("cause") == "PRODUCER_ID_REPLACED",
            F.format_string("moved the id to producer %s", current["producer_id"]),
        ).otherwise(F.format_string("given producer %s epoch %s", current["producer_id"],
                                    current["producer_epoch"])),
    }  # fmt: skip
    identity = [marker["topic"], marker["partition"], marker["marker_offset"]]
    finding = finding_struct("ZOMBIE_COMMIT", config, run_id, identity=identity, values=values)
    return zombies.select(finding.alias("f")).select("f.*")
