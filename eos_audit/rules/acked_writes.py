"""Client acknowledgements against the log: ACKED_WRITE_LOST and ACKED_OFFSET_MISMATCH.

A successful produce response tells the application the leader appended the batch at `offset`
(the ProduceResponse base offset) and, with acks=all, that every in-sync replica had it (§5). The
batch is identified by (producer id, epoch, base sequence), which idempotent producers never reuse
for other records (§1.3, §1.5). So an acknowledged batch at or above the exported log's start and
below its end must be in the export, at exactly the acknowledged offset.

Acknowledgements enter the one pass as rows (`eos_audit.engine.ack_rows`, kind `KIND_ACK`) next to
the batches; `ack_window` brings each one together with the log's batches of the same producer,
epoch and base sequence. The window is partitioned by a superset of (topic, partition), so it adds
a sort inside the existing partitions but no exchange.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F

from eos_audit.config import AuditConfig
from eos_audit.rules.common import (
    KIND_ACK,
    KIND_AUDITED,
    finding,
    sentence,
    topic_matches,
    when_true,
)

ACK_KEYS = ["topic", "partition", "producer_id", "producer_epoch", "base_sequence"]


def ack_window() -> WindowSpec:
    """One batch identity (producer, epoch, base sequence) of one partition, by offset.

    At equal offsets the log's batch (kind 2) comes before the acknowledgement (kind 6), so a
    running "last batch offset" at the acknowledgement equals the acknowledged offset exactly
    when the log holds the batch there.
    """
    return Window.partitionBy(*ACK_KEYS).orderBy("base_offset", "_kind")


def with_ack_matches(df: DataFrame) -> DataFrame:
    """Add what the log holds for each acknowledgement's batch identity.

    `_ack_log_batches`: batches of the audited log with the same producer, epoch and base sequence;
    `_ack_log_offset`: the lowest of their offsets; `_ack_at_or_below`: the highest of their
    offsets at or below the row's own offset.
    """
    window = ack_window()
    in_log = (
        F.col("_is_valid")
        & (F.col("_kind") == KIND_AUDITED)
        & (F.col("producer_id") >= 0)
        & (F.col("base_sequence") >= 0)
    )
    whole = window.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    upto = window.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    return df.select(
        "*",
        F.count(F.when(in_log, 1)).over(whole).alias("_ack_log_batches"),
        F.min(F.when(in_log, F.col("base_offset"))).over(whole).alias("_ack_log_offset"),
        F.max(F.when(in_log, F.col("base_offset"))).over(upto).alias("_ack_at_or_below"),
    )


def _checkable_ack() -> Column:
    """A successful idempotent acknowledgement inside the exported log's offset range."""
    return (
        (F.col("_kind") == KIND_ACK)
        & F.col("_ack_error").isNull()
        & F.col("base_offset").isNotNull()
        & (F.col("producer_id") >= 0)
        & (F.col("base_sequence") >= 0)
        & (F.col("base_offset") >= F.col("_p_log_start"))
        & (F.col("base_offset") < F.col("_p_log_end"))
    )


def acked_write_lost(config: AuditConfig) -> Column:
    """ACKED_WRITE_LOST: acknowledged, inside the log's range, and no such batch in the log.

    On a compacted topic the cleaner may remove a whole batch whose records were all superseded,
    so there the cause is COMPACTION and the finding is INFO.
    """
    cause = F.when(topic_matches(config.topics.compacted), F.lit("COMPACTION")).otherwise(
        F.lit("UNEXPLAINED")
    )
    return when_true(
        _checkable_ack() & (F.col("_ack_log_batches") == 0),
        finding(
            "ACKED_WRITE_LOST",
            config,
            detail=sentence(
                "Producer %s epoch %s was acknowledged sequence %s at offset %s on %s, but the "
                "log (offsets %s to %s) holds no batch of that producer, epoch and sequence: an "
                "acknowledged write is lost.",
                F.col("producer_id"),
                F.col("producer_epoch"),
                F.col("base_sequence"),
                F.col("base_offset"),
                F.col("_ack_event_time"),
                F.col("_p_log_start"),
                F.col("_p_log_end") - 1,
            ),
            spec_ref="§1.3, §5",
            cause=cause,
            evidence={
                "acknowledged_at": F.col("_ack_event_time"),
                "log_start_offset": F.col("_p_log_start"),
                "log_end_offset": F.col("_p_log_end"),
            },
        ),
    )


def acked_offset_mismatch(config: AuditConfig) -> Column:
    """ACKED_OFFSET_MISMATCH: the log holds the acknowledged batch, but at another offset."""
    return when_true(
        _checkable_ack()
        & (F.col("_ack_log_batches") > 0)
        & ~F.col("_ack_at_or_below").eqNullSafe(F.col("base_offset")),
        finding(
            "ACKED_OFFSET_MISMATCH",
            config,
            detail=sentence(
                "Producer %s epoch %s sequence %s was acknowledged at offset %s on %s, but the "
                "log holds that batch at offset %s: consumers and the application disagree on "
                "where the records are.",
                F.col("producer_id"),
                F.col("producer_epoch"),
                F.col("base_sequence"),
                F.col("base_offset"),
                F.col("_ack_event_time"),
                F.col("_ack_log_offset"),
            ),
            spec_ref="§1.3, §5",
            previous_offset=F.col("_ack_log_offset"),
            evidence={
                "acknowledged_at": F.col("_ack_event_time"),
                "log_batches": F.col("_ack_log_batches"),
            },
        ),
    )
