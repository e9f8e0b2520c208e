"""The client rule over producer acknowledgements (docs/rules.md#client-sequence-error, KIP-360).

A producer told UNKNOWN_PRODUCER_ID or OUT_OF_ORDER_SEQUENCE_NUMBER by a partition leader has
lost its state there. Either retention or DeleteRecords removed the producer's batches from the
front of the log, and the broker's producer state went with them (benign), or data the leader
had acknowledged is gone (loss). The Java client (TransactionManager `canRetry`) tells them apart
by comparing two numbers, and this rule applies the same comparison to the acknowledgements the
application logged:

* `last_acked_offset`: the client's lastAckedOffset of the partition. That is the last offset
  (`offset + record_count - 1`, a null record_count counting 1) of the producer's successful
  sends to the same topic, partition and producer id that the application received strictly
  before the error. It is -1 (ProduceResponse.INVALID_OFFSET) when there was none. Only the
  producer id is part of the key, not the epoch: offsets only grow within a partition, so the
  highest one is the last acknowledgement whichever epoch wrote it.
* `log_start_offset`: the one the error response carried.

**CLIENT_SEQUENCE_ERROR** (`config.severity`, CRITICAL by default), one finding per such error:

* `log_start_offset > last_acked_offset`: cause LOG_START, severity INFO. Everything the producer
  had acknowledged is below the log start, so removing it explains the lost state. With no
  earlier acknowledgement (-1) every log start offset >= 0 passes. That is exactly the client's
  rule, and the first-write hole KIP-360 describes (seed item 3): a lost first write is not
  caught, by the client or here.
* otherwise: cause UNEXPLAINED, the configured severity. An acknowledged batch at or above the
  log start is no longer known to the leader: acknowledged data was lost.
* `log_start_offset` null or -1 (an older broker, or a leader that did not know it; the current
  client then just retries): the benign case cannot be proved, so UNEXPLAINED, and the detail says
  the response carried no log start offset.

Rows with `_source_error` are ignored (the pipeline quarantines them), and so are acks of
producer_id -1, which have no producer state. One window partitioned by (topic, partition,
producer_id) over the acknowledgements, which are small: no UDF, no collect.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from eos_audit.config import AuditConfig
from eos_audit.errors import InputSchemaError
from eos_audit.findings import UNEXPLAINED, Cause
from eos_audit.schemas import ACKS
from eos_audit.sinks.finding_rows import finding_struct, sentence
from eos_audit.sources.evidence.acks import (
    NO_OFFSET,
    SEQUENCE_ERRORS,
    SOURCE_ERROR,
    normalize_error_name,
)
from eos_audit.sources.tabular.canonical import increment_sequence

CLIENT_SEQUENCE_ERROR = "CLIENT_SEQUENCE_ERROR"
CAUSE_LOG_START = Cause.LOG_START.name
KEY = ["topic", "partition", "producer_id"]
_REQUIRED = ["event_time", "topic", "partition", "producer_id", "producer_epoch", "base_sequence"]
_OPTIONAL = ["record_count", "offset", "error", "log_start_offset", "source"]
# An ISO-8601 instant whatever the session time zone (XXX prints Z for UTC).
_ISO_INSTANT = "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"


def _acks(acks_df: DataFrame) -> DataFrame:
    """The rows the rule reads: valid successes and sequence errors of idempotent producers."""
    missing = [c for c in _REQUIRED if c not in acks_df.columns]
    if missing:
        raise InputSchemaError(f"acks lack column(s) {missing}")
    df = acks_df
    if SOURCE_ERROR in df.columns:
        df = df.where(F.col(SOURCE_ERROR).isNull())
    df = df.select(
        *[F.col(c).cast(ACKS[c].dataType).alias(c) for c in _REQUIRED],
        *[
            (F.col(c) if c in df.columns else F.lit(None)).cast(ACKS[c].dataType).alias(c)
            for c in _OPTIONAL
        ],
    )
    # `read_acks` has normalized the error already; a hand-made DataFrame may spell it otherwise.
    df = df.withColumn("error", normalize_error_name(F.col("error")))
    acked = F.col("error").isNull() & F.col("offset").isNotNull()
    # Other errors (NOT_LEADER_OR_FOLLOWER, timeouts, ...) neither count as acknowledgements nor
    # say anything about producer state: drop them before the shuffle.
    return df.where(
        F.col("event_time").isNotNull()
        & F.col("topic").isNotNull()
        & F.col("partition").isNotNull()
        & (F.col("producer_id") >= 0)
        & (acked | F.col("error").isin(*SEQUENCE_ERRORS))
    )


def client_error_findings(acks_df: DataFrame, config: AuditConfig, run_id: str) -> DataFrame:
    """CLIENT_SEQUENCE_ERROR findings: sequence errors a producer saw, classified like the client.

    The failed send was not written, so it has no offset: `base_offset` and `last_offset` (not
    nullable in FINDINGS) are -1, Kafka's "no offset". `previous_offset` is the producer's last
    acknowledged offset on the partition (null when there is none), `batch_timestamp` the ack's
    `event_time` in epoch milliseconds, `kafka_error` the client's error, `last_sequence` the
    batch's last sequence (wrapping at 2147483647 like Kafka). The evidence holds last_acked_offset
    (-1 when none), log_start_offset (when sent), base_sequence and event_time (ISO-8601).

    Args:
        acks_df: `read_acks` output (ACKS columns; rows with `_source_error` are skipped).
        config: the run configuration (severities).
        run_id: the audit run.

    Returns:
        Findings with exactly the columns and types of `eos_audit.schemas.FINDINGS`.

    Raises:
        InputSchemaError: `acks_df` lacks a required ACKS column.

    """
    acks = _acks(acks_df)
    # The frame is by time, not by row: the acks received strictly before this row. Acks in the
    # same microsecond are peers, all in or all out of each other's frame, so no tie-break is
    # needed for a deterministic result (and an ack logged with the error's own time is not
    # "before" it).
    earlier = (
        Window.partitionBy(*KEY)
        .orderBy(F.unix_micros(F.col("event_time")))
        .rangeBetween(Window.unboundedPreceding, -1)
    )
    # TransactionManager.updateLastAckedOffset: baseOffset + recordCount - 1.
    acked_last = F.when(
        F.col("error").isNull(), F.col("offset") + F.coalesce(F.col("record_count"), F.lit(1)) - 1
    )
    errors = acks.select("*", F.max(acked_last).over(earlier).alias("_last_acked")).where(
        F.col("error").isin(*SEQUENCE_ERRORS)
    )

    last_acked = F.col("_last_acked")
    compared = F.coalesce(last_acked, F.lit(NO_OFFSET).cast("long"))
    log_start = F.col("log_start_offset")
    has_log_start = F.coalesce(log_start >= 0, F.lit(False))
    is_benign = has_log_start & (log_start > compared)
    cause = F.when(is_benign, F.lit(CAUSE_LOG_START)).otherwise(F.lit(UNEXPLAINED))

    at = F.date_format(F.col("event_time"), _ISO_INSTANT)
    acked_text = F.coalesce(last_acked.cast("string"), F.lit("-1 (none acknowledged before)"))
    explanation = (
        F.when(
            is_benign,
            sentence(
                ": the response's log start offset %s is above the producer's last acknowledged "
                "offset %s, so retention or DeleteRecords removed its state",
                log_start,
                acked_text,
            ),
        )
        .when(
            has_log_start,
            sentence(
                ": the response's log start offset %s is not above the producer's last "
                "acknowledged offset %s: acknowledged data is gone from the log",
                log_start,
                acked_text,
            ),
        )
        .otherwise(
            sentence(
                ": the response carried no log start offset, so removal by retention cannot be "
                "told from loss (last acknowledged offset %s)",
                acked_text,
            )
        )
    )
    evidence = F.map_filter(
        F.create_map(
            F.lit("last_acked_offset"),
            compared.cast("string"),
            F.lit("log_start_offset"),
            log_start.cast("string"),
            F.lit("base_sequence"),
            F.col("base_sequence").cast("string"),
            F.lit("event_time"),
            at,
        ),
        lambda _k, v: v.isNotNull(),
    )
    span = (F.coalesce(F.col("record_count"), F.lit(1)) - 1).cast("long")
    values = {
        "cause": cause,
        "kafka_error": F.col("error"),
        "topic": F.col("topic"),
        "partition": F.col("partition"),
        "producer_id": F.col("producer_id"),
        "producer_epoch": F.col("producer_epoch"),
        # The failed send was never written: -1 is Kafka's "no offset".
        "base_offset": F.lit(NO_OFFSET),
        "last_offset": F.lit(NO_OFFSET),
        "base_sequence": F.col("base_sequence"),
        "last_sequence": increment_sequence(F.col("base_sequence").cast("long"), span),
        "previous_offset": last_acked,
        "event_time": at,
        "explanation": explanation,
        "evidence": evidence,
        "batch_timestamp": F.unix_millis(F.col("event_time")),
        "source": F.col("source"),
    }
    identity = [
        F.col("topic"),
        F.col("partition"),
        F.col("producer_id"),
        F.col("producer_epoch"),
        F.col("base_sequence"),
        F.unix_micros(F.col("event_time")),
    ]
    finding = finding_struct(
        CLIENT_SEQUENCE_ERROR, config, run_id, identity=identity, values=values
    )
    return errors.select(finding.alias("f")).select("f.*")
