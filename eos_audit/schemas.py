"""Schemas of the canonical input and of every output table: the published contracts.

The JSON files in `schemas/` are generated from these definitions (`python -m eos_audit.schemas
schemas/`) and a test checks that they are equal, so the contract people read is the one the code
enforces. Column descriptions live here, next to the types, and travel into the JSON.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import types as T


@dataclass(frozen=True)
class Column:
    """One column of a published table: name, Spark type, nullability and meaning."""

    name: str
    data_type: T.DataType
    nullable: bool
    description: str

    def field(self) -> T.StructField:
        """The Spark field, with the description kept as column metadata (`comment`)."""
        return T.StructField(
            self.name, self.data_type, self.nullable, {"comment": self.description}
        )


def _struct(columns: list[Column]) -> T.StructType:
    return T.StructType([c.field() for c in columns])


# --------------------------------------------------------------------------------------------
# Canonical input: one row per Kafka record batch (rules.md#corrupt-batch for the header fields).
# --------------------------------------------------------------------------------------------
RECORD_BATCH_COLUMNS: list[Column] = [
    Column("topic", T.StringType(), False, "topic name"),
    Column("partition", T.IntegerType(), False, "partition number"),
    Column("base_offset", T.LongType(), False, "first offset of the batch"),
    Column("last_offset", T.LongType(), False, "base_offset + lastOffsetDelta"),
    Column("producer_id", T.LongType(), False, "-1 when the batch has no producer id"),
    Column("producer_epoch", T.IntegerType(), False, "-1 when none (int16 in Kafka)"),
    Column("base_sequence", T.IntegerType(), False, "-1 when none"),
    Column(
        "last_sequence",
        T.IntegerType(),
        True,
        "derived from base_sequence and the offset delta with Kafka's wraparound rule when absent",
    ),
    Column(
        "record_count",
        T.IntegerType(),
        True,
        "records in the batch (may be below the offset span after compaction)",
    ),
    Column("is_transactional", T.BooleanType(), False, "attributes bit 4"),
    Column("is_control", T.BooleanType(), False, "attributes bit 5"),
    Column("control_type", T.StringType(), True, "COMMIT or ABORT for transaction markers"),
    Column("coordinator_epoch", T.IntegerType(), True, "from the marker's value"),
    Column("partition_leader_epoch", T.IntegerType(), True, "leader epoch stamped by the leader"),
    Column("magic", T.IntegerType(), True, "record format version; defaults to 2"),
    Column("max_timestamp", T.LongType(), True, "batch max timestamp, ms since the epoch"),
    Column(
        "crc_valid",
        T.BooleanType(),
        True,
        "result of CRC-32C verification when the source could check it",
    ),
    Column(
        "source",
        T.StringType(),
        True,
        "where the row came from (file and byte position, or table and row)",
    ),
]
RECORD_BATCH = _struct(RECORD_BATCH_COLUMNS)
REQUIRED_INPUT_COLUMNS = [c.name for c in RECORD_BATCH_COLUMNS if not c.nullable]

# --------------------------------------------------------------------------------------------
# Optional seeded producer state (engine issue; `.snapshot` files and previous runs arrive here).
# --------------------------------------------------------------------------------------------
SEED_BATCH = T.StructType(
    [
        T.StructField("base_sequence", T.IntegerType(), True),
        T.StructField("last_sequence", T.IntegerType(), True),
        T.StructField("base_offset", T.LongType(), True),
        T.StructField("last_offset", T.LongType(), True),
    ]
)
PRODUCER_STATE_COLUMNS: list[Column] = [
    Column("topic", T.StringType(), False, "topic name"),
    Column("partition", T.IntegerType(), False, "partition number"),
    Column("producer_id", T.LongType(), False, "producer id"),
    Column("producer_epoch", T.IntegerType(), False, "the producer's current epoch"),
    Column(
        "coordinator_epoch", T.IntegerType(), True, "coordinator epoch of the last marker, if any"
    ),
    Column(
        "txn_first_offset",
        T.LongType(),
        True,
        "first offset of the producer's open transaction, null when none is open",
    ),
    Column("last_timestamp", T.LongType(), True, "timestamp of the producer's last write, ms"),
    Column(
        "batches",
        T.ArrayType(SEED_BATCH, True),
        True,
        "the last (at most 5) data batches of the current epoch, oldest first",
    ),
    Column(
        "state_offset",
        T.LongType(),
        True,
        "exclusive end offset the state covers (a snapshot's file offset); null: the state stands "
        "immediately before the audited log",
    ),
    Column(
        "source", T.StringType(), True, "where the state came from (snapshot file, previous run)"
    ),
    Column(
        "run_id",
        T.StringType(),
        True,
        "the audit run whose replay ended in this state (the producer_state table); null in "
        "state from elsewhere. Given the table, --producer-state seeds from its latest run",
    ),
]
PRODUCER_STATE = _struct(PRODUCER_STATE_COLUMNS)

# --------------------------------------------------------------------------------------------
# Output tables.
# --------------------------------------------------------------------------------------------
FINDINGS_COLUMNS: list[Column] = [
    Column(
        "finding_id",
        T.StringType(),
        False,
        "deterministic id: the same input batch and finding type give the same id",
    ),
    Column("run_id", T.StringType(), False, "the audit run that produced the finding"),
    Column("finding_type", T.StringType(), False, "what was violated (see README)"),
    Column("severity", T.StringType(), False, "CRITICAL, ERROR, WARNING or INFO"),
    Column(
        "cause",
        T.StringType(),
        True,
        "why it happened when evidence explains it: LOG_START, PRODUCER_EXPIRY, COMPACTION, "
        "QUARANTINED_BATCH, UNREADABLE_INPUT, UNEXPLAINED",
    ),
    Column(
        "kafka_error",
        T.StringType(),
        True,
        "the error a partition leader would have returned for this batch, if any",
    ),
    Column("topic", T.StringType(), False, "topic name"),
    Column("partition", T.IntegerType(), False, "partition number"),
    Column("producer_id", T.LongType(), True, "producer id of the batch (-1: none)"),
    Column("producer_epoch", T.IntegerType(), True, "producer epoch of the batch"),
    Column("base_offset", T.LongType(), False, "first offset of the batch"),
    Column("last_offset", T.LongType(), False, "last offset of the batch"),
    Column("base_sequence", T.IntegerType(), True, "first sequence of the batch"),
    Column("last_sequence", T.IntegerType(), True, "last sequence of the batch"),
    Column(
        "expected_sequence",
        T.IntegerType(),
        True,
        "the sequence the leader expected (sequence findings)",
    ),
    Column(
        "previous_offset",
        T.LongType(),
        True,
        "evidence: offset of the earlier batch the finding relates to",
    ),
    Column("detail", T.StringType(), False, "one readable sentence"),
    Column(
        "spec_ref",
        T.StringType(),
        False,
        "the rule, as a section of this repository's docs/rules.md",
    ),
    Column(
        "evidence",
        T.MapType(T.StringType(), T.StringType(), True),
        True,
        "further evidence by name (for example max_leader_epoch)",
    ),
    Column(
        "batch_timestamp",
        T.LongType(),
        True,
        "max timestamp of the batch, epoch ms, as Kafka stores it (kept for existing readers; "
        "batch_time is the same instant as a timestamp)",
    ),
    Column(
        "batch_time",
        T.TimestampType(),
        True,
        "max timestamp of the batch (UTC): the canonical column to filter and read findings "
        "by time; for ListOffsets findings the observation's time, for acknowledgement findings "
        "the acknowledgement's; null in rows written before this column existed",
    ),
    Column("source", T.StringType(), True, "where the batch came from"),
]
FINDINGS = _struct(FINDINGS_COLUMNS)

QUARANTINE_COLUMNS: list[Column] = [
    Column("quarantine_id", T.StringType(), False, "deterministic id of the rejected row"),
    Column("run_id", T.StringType(), False, "the audit run that rejected the row"),
    Column(
        "input",
        T.StringType(),
        False,
        "what was rejected: record_batch, dump_log_line (a line of a kafka-dump-log.sh text "
        "that is no part of the tool's output: not a batch), producer_snapshot, producer_state "
        "(a seed row), checkpoint, leader_epoch_checkpoint, list_offsets or acks",
    ),
    Column("reason", T.StringType(), False, "why the row was rejected (all reasons, ';'-joined)"),
    Column("source", T.StringType(), True, "where the row came from"),
    Column("topic", T.StringType(), True, "topic, when readable"),
    Column("partition", T.LongType(), True, "partition, when readable"),
    Column("base_offset", T.LongType(), True, "base offset, when readable"),
    Column("raw", T.StringType(), True, "the row as read, as JSON"),
]
QUARANTINE = _struct(QUARANTINE_COLUMNS)

AUDIT_RUNS_COLUMNS: list[Column] = [
    Column("run_id", T.StringType(), False, "run id (given, or derived from the inputs)"),
    Column("started_at", T.TimestampType(), False, "when the run started (UTC)"),
    Column(
        "finished_at", T.TimestampType(), False,
        "when the run finished (UTC); while RUNNING, when the run started",
    ),  # fmt: skip
    Column(
        "status", T.StringType(), False,
        "RUNNING, SUCCEEDED, QUARANTINE_EXCEEDED, NOTHING_AUDITED, INPUT_UNREADABLE or FAILED",
    ),  # fmt: skip
    Column("package_version", T.StringType(), False, "eos-audit version"),
    Column("spark_version", T.StringType(), False, "Spark version of the session"),
    Column("writer", T.StringType(), False, "spark-delta or delta-rs"),
    Column("inputs", T.StringType(), False, "the inputs, as JSON"),
    Column("configuration", T.StringType(), False, "the effective configuration, as JSON"),
    Column("batches_read", T.LongType(), False, "input rows read"),
    Column("batches_audited", T.LongType(), False, "rows that passed validation and were audited"),
    Column("batches_quarantined", T.LongType(), False, "rows written to the quarantine table"),
    Column(
        "batches_skipped", T.LongType(), True,
        "batches below the offsets the seeding run's state covers (--since-state): "
        "batches_read = batches_audited + batches_quarantined + batches_skipped; null in rows "
        "written before this column existed",
    ),  # fmt: skip
    Column(
        "seeded_from_run", T.StringType(), True,
        "the run whose producer_state seeded this one (--since-state), null otherwise",
    ),  # fmt: skip
    Column("findings_critical", T.LongType(), False, "findings with severity CRITICAL"),
    Column("findings_error", T.LongType(), False, "findings with severity ERROR"),
    Column("findings_warning", T.LongType(), False, "findings with severity WARNING"),
    Column("findings_info", T.LongType(), False, "findings with severity INFO"),
    Column(
        "error", T.StringType(), True,
        "why the run is FAILED, NOTHING_AUDITED, QUARANTINE_EXCEEDED or INPUT_UNREADABLE (then "
        "every path the run could not read)",
    ),  # fmt: skip
]
AUDIT_RUNS = _struct(AUDIT_RUNS_COLUMNS)

INPUT_FILES_COLUMNS: list[Column] = [
    Column("run_id", T.StringType(), False, "the audit run"),
    Column("path", T.StringType(), False, "the file (or directory, for a Delta table)"),
    Column(
        "format",
        T.StringType(),
        False,
        "segment, producer_snapshot, leader_epoch_checkpoint, checkpoint, offset_index, ..., "
        "or the tabular format (parquet, json, csv, delta, dump-log); symlink: a symbolic link "
        "the run did not follow (IGNORED)",
    ),
    Column(
        "bytes",
        T.LongType(),
        True,
        "size of the file when listed; null for a directory or a symbolic link not followed",
    ),
    Column(
        "batches_read",
        T.LongType(),
        True,
        "record batches read from the file (audited + quarantined + skipped), counted in the "
        "run's one pass for segments, Parquet, JSON lines and CSV; null for Delta and dump-log "
        "text, whose counts are the run's (audit_runs)",
    ),
    Column("batches_audited", T.LongType(), True, "of those, audited"),
    Column("batches_quarantined", T.LongType(), True, "of those, quarantined"),
    Column(
        "batches_skipped",
        T.LongType(),
        True,
        "of those, below the offsets the seeding run's state covers (--since-state)",
    ),
    Column(
        "bytes_quarantined",
        T.LongType(),
        True,
        "bytes of the file the run could not audit: all of an unreadable file, the rest of a "
        "segment from a batch that cannot be framed (not a TRUNCATED_TAIL); counted against "
        "run.max_quarantined_share (segments and Parquet)",
    ),
    Column(
        "status",
        T.StringType(),
        False,
        "READ (audited; a TRUNCATED_TAIL noted in reason), DAMAGED (read, some of it "
        "quarantined), UNREADABLE (an executor could not open it) or IGNORED (not read)",
    ),
    Column("reason", T.StringType(), True, "why IGNORED, DAMAGED or UNREADABLE, or the tail cut"),
]
INPUT_FILES = _struct(INPUT_FILES_COLUMNS)

PARTITION_STATS = T.StructType(
    [
        T.StructField("topic", T.StringType(), False),
        T.StructField("partition", T.IntegerType(), False),
        T.StructField("first_offset", T.LongType(), True),
        T.StructField("last_offset", T.LongType(), True),
        T.StructField("batches", T.LongType(), False),
        T.StructField("replica_batches", T.LongType(), False),
        T.StructField("batches_with_producer_id", T.LongType(), False),
        T.StructField("records", T.LongType(), True),
        T.StructField("markers", T.LongType(), True),
        T.StructField("log_start_offset", T.LongType(), True),
        T.StructField("max_timestamp", T.LongType(), True),
        T.StructField("batches_skipped", T.LongType(), False),
    ]
)

PARTITION_SUMMARY_COLUMNS: list[Column] = [
    Column("run_id", T.StringType(), False, "the audit run"),
    Column("topic", T.StringType(), False, "topic name"),
    Column("partition", T.IntegerType(), False, "partition number"),
    Column("first_offset", T.LongType(), True, "first offset of the audited log"),
    Column("last_offset", T.LongType(), True, "last offset of the audited log"),
    Column("batches", T.LongType(), False, "batches audited (the audited replica)"),
    Column("replica_batches", T.LongType(), False, "batches of other replicas, compared"),
    Column(
        "batches_skipped", T.LongType(), True,
        "batches (of any replica) below the offset the seeding run's state covers "
        "(--since-state): that run audited them; null in rows written before this column existed",
    ),  # fmt: skip
    Column("records", T.LongType(), True, "records in the audited batches, markers included"),
    Column(
        "markers", T.LongType(), True,
        "control batches (transaction markers, one record each) among the audited batches; null "
        "in rows written before this column existed",
    ),  # fmt: skip
    Column("producers", T.LongType(), False, "producer ids seen"),
    Column("batches_with_producer_id", T.LongType(), False, "batches carrying a producer id"),
    Column(
        "coverage",
        T.DoubleType(),
        True,
        "share of batches carrying producer ids: a clean result on a topic written without "
        "idempotence (coverage 0) proves nothing",
    ),
    Column("findings_critical", T.LongType(), False, "findings with severity CRITICAL"),
    Column("findings_error", T.LongType(), False, "findings with severity ERROR"),
    Column("findings_warning", T.LongType(), False, "findings with severity WARNING"),
    Column("findings_info", T.LongType(), False, "findings with severity INFO"),
]
PARTITION_SUMMARY = _struct(PARTITION_SUMMARY_COLUMNS)

LIST_OFFSETS_COLUMNS: list[Column] = [
    Column(
        "observed_at", T.TimestampType(), False, "when the ListOffsets answer was received (UTC)"
    ),
    Column("topic", T.StringType(), False, "topic name"),
    Column("partition", T.IntegerType(), False, "partition number"),
    Column(
        "spec",
        T.StringType(),
        False,
        "what was asked: latest (-1: high watermark, or last stable offset for read_committed), "
        "earliest (-2: log start offset) or max_timestamp (-3: offset of the record with the "
        "highest timestamp)",
    ),
    Column(
        "isolation",
        T.StringType(),
        True,
        "isolation level of the request: read_uncommitted or read_committed; may be null for "
        "earliest, whose answer does not depend on it",
    ),
    Column(
        "offset",
        T.LongType(),
        True,
        "the offset answered; null when the request failed (see error)",
    ),
    Column(
        "leader_epoch",
        T.IntegerType(),
        True,
        "leader epoch returned with the offset (ListOffsets v4+); null when unknown",
    ),
    Column(
        "error",
        T.StringType(),
        True,
        "Kafka error name when the request failed for this partition (OFFSET_NOT_AVAILABLE, "
        "LEADER_NOT_AVAILABLE, ...); null on success",
    ),
    Column(
        "source", T.StringType(), True, "where the observation came from (file and line or row)"
    ),
]
LIST_OFFSETS = _struct(LIST_OFFSETS_COLUMNS)

TRANSACTIONS_COLUMNS: list[Column] = [
    Column("run_id", T.StringType(), False, "the audit run"),
    Column(
        "transaction_id",
        T.StringType(),
        False,
        "deterministic id (partition, producer, first offset)",
    ),
    Column("topic", T.StringType(), False, "topic name"),
    Column("partition", T.IntegerType(), False, "partition number"),
    Column("producer_id", T.LongType(), False, "producer id"),
    Column("start_epoch", T.IntegerType(), True, "producer epoch of the first batch"),
    Column("end_epoch", T.IntegerType(), True, "epoch of the marker (transactions v2: start + 1)"),
    Column("first_offset", T.LongType(), True, "offset of the first batch of the transaction"),
    Column("marker_offset", T.LongType(), True, "offset of the COMMIT/ABORT marker; null if open"),
    Column(
        "outcome",
        T.StringType(),
        False,
        "COMMIT, ABORT, OPEN (still open at the end) or UNKNOWN (closed by a marker whose type "
        "the export does not show, e.g. kafka-dump-log.sh without --deep-iteration)",
    ),
    Column("hanging", T.BooleanType(), False, "open longer than the timeout plus grace"),
    Column("batches", T.LongType(), True, "transactional data batches in the transaction"),
    Column(
        "records",
        T.LongType(),
        True,
        "data records in the transaction's batches; null when it began before the log this run "
        "replayed (a seeded open transaction)",
    ),
    Column("first_timestamp", T.LongType(), True, "timestamp of the first batch, ms"),
    Column("end_timestamp", T.LongType(), True, "timestamp of the marker, ms"),
    Column(
        "duration_ms",
        T.LongType(),
        True,
        "first batch to marker; for an open transaction its age at the export time "
        "(--export-time), else at the partition's last timestamp",
    ),
    Column("coordinator_epoch", T.IntegerType(), True, "coordinator epoch of the marker"),
]
TRANSACTIONS = _struct(TRANSACTIONS_COLUMNS)

ACKS_COLUMNS: list[Column] = [
    Column(
        "event_time",
        T.TimestampType(),
        False,
        "when the application received the send result (UTC)",
    ),
    Column("topic", T.StringType(), False, "topic name"),
    Column("partition", T.IntegerType(), False, "partition number"),
    Column("producer_id", T.LongType(), False, "producer id the batch was sent with"),
    Column("producer_epoch", T.IntegerType(), False, "producer epoch the batch was sent with"),
    Column("base_sequence", T.IntegerType(), False, "first sequence of the batch sent"),
    Column("record_count", T.IntegerType(), True, "records in the batch; null: 1"),
    Column(
        "offset",
        T.LongType(),
        True,
        "base offset the leader acknowledged (ProduceResponse baseOffset); null on error",
    ),
    Column(
        "error",
        T.StringType(),
        True,
        "Kafka error name the send failed with (UNKNOWN_PRODUCER_ID, "
        "OUT_OF_ORDER_SEQUENCE_NUMBER, ...); null on success",
    ),
    Column(
        "log_start_offset",
        T.LongType(),
        True,
        "logStartOffset of the produce response (KIP-360 seed; -1 or null when not sent)",
    ),
    Column("source", T.StringType(), True, "where the row came from (file and row)"),
]
ACKS = _struct(ACKS_COLUMNS)

PRODUCER_SESSIONS_COLUMNS: list[Column] = [
    Column("run_id", T.StringType(), False, "the audit run"),
    Column("topic", T.StringType(), False, "topic name"),
    Column("partition", T.IntegerType(), False, "partition number"),
    Column("producer_id", T.LongType(), False, "producer id"),
    Column("producer_epoch", T.IntegerType(), False, "producer epoch"),
    Column("first_offset", T.LongType(), True, "base offset of the epoch's first batch in the log"),
    Column("last_offset", T.LongType(), True, "last offset of the epoch's last batch in the log"),
    Column("first_sequence", T.IntegerType(), True, "base sequence of the first data batch"),
    Column("last_sequence", T.IntegerType(), True, "last sequence of the last data batch"),
    Column("batches", T.LongType(), False, "batches in the log (data and markers)"),
    Column("records", T.LongType(), True, "records in the data batches"),
    Column("transactions", T.LongType(), False, "transactions started at this epoch"),
    Column("first_timestamp", T.LongType(), True, "timestamp of the first batch, ms"),
    Column("last_timestamp", T.LongType(), True, "timestamp of the last batch, ms"),
    Column(
        "findings",
        T.MapType(T.StringType(), T.LongType(), True),
        False,
        "findings about this producer epoch, by finding_type",
    ),
    Column(
        "status",
        T.StringType(),
        False,
        "clean (no finding), benign (only INFO and WARNING findings) or violated (an ERROR or "
        "CRITICAL finding)",
    ),
]
PRODUCER_SESSIONS = _struct(PRODUCER_SESSIONS_COLUMNS)

LIST_OFFSETS_ERRORS_COLUMNS: list[Column] = [
    Column("run_id", T.StringType(), False, "the audit run"),
    Column("topic", T.StringType(), False, "topic name"),
    Column("partition", T.IntegerType(), False, "partition number"),
    Column("spec", T.StringType(), False, "latest, earliest or max_timestamp"),
    Column("error", T.StringType(), False, "the error answered (OFFSET_NOT_AVAILABLE, ...)"),
    Column("observations", T.LongType(), False, "how many answers carried this error"),
    Column("first_observed_at", T.TimestampType(), False, "first such answer (UTC)"),
    Column("last_observed_at", T.TimestampType(), False, "last such answer (UTC)"),
]
LIST_OFFSETS_ERRORS = _struct(LIST_OFFSETS_ERRORS_COLUMNS)

# The ground truth of a synthetic export (eos-audit generate; scored by eos-audit score).
GROUND_TRUTH_COLUMNS: list[Column] = [
    Column(
        "run_id",
        T.StringType(),
        False,
        "the generation that planted the fault (gen-<batches>-<seed>); a re-generation replaces "
        "its rows",
    ),
    Column(
        "fault_kind",
        T.StringType(),
        False,
        "the injected scenario (eos_audit.generate.plan.FAULT_KINDS); a scenario may raise "
        "several findings, one row each",
    ),
    Column("finding_type", T.StringType(), False, "the finding the audit must report"),
    Column("cause", T.StringType(), True, "its cause; null for finding types without one"),
    Column("severity", T.StringType(), False, "the severity the audit gives it by default"),
    Column("topic", T.StringType(), False, "topic name"),
    Column("partition", T.IntegerType(), False, "partition number"),
    Column(
        "base_offset",
        T.LongType(),
        False,
        "the finding's base_offset: the batch's, the acknowledged offset (ACKED_WRITE_LOST) or "
        "the regressed observed offset (LIST_OFFSETS_REGRESSION)",
    ),
    Column("producer_id", T.LongType(), True, "producer id, null for ListOffsets faults"),
    Column("producer_epoch", T.IntegerType(), True, "producer epoch of the batch, when any"),
]
GROUND_TRUTH = _struct(GROUND_TRUTH_COLUMNS)

# --------------------------------------------------------------------------------------------
# Decoded coordinator records (__consumer_offsets, __transaction_state): an input contract for
# users who decode these topics themselves. The decoded fields are those of
# sources/kafka/coordinator_records.DecodedRecord, in its order, after the batch's context.
# --------------------------------------------------------------------------------------------
# Nullable inside, like every column the readers give: Spark cannot cast a struct whose fields
# may be null to one whose fields may not, and a Parquet input's nested fields are nullable.
_TRANSACTION_PARTITION = T.StructType(
    [
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
    ]
)
COORDINATOR_RECORDS_COLUMNS: list[Column] = [
    Column("coordinator_topic", T.StringType(), False, "__consumer_offsets or __transaction_state"),
    Column("coordinator_partition", T.IntegerType(), False, "partition of the coordinator topic"),
    Column("offset", T.LongType(), False, "the record's offset"),
    Column("base_offset", T.LongType(), False, "first offset of the record's batch"),
    Column(
        "batch_producer_id",
        T.LongType(),
        False,
        "producer id of the batch: a transactional producer's for a TxnOffsetCommit, else -1",
    ),
    Column(
        "batch_producer_epoch", T.IntegerType(), False, "producer epoch of the batch, -1 when none"
    ),
    Column("is_transactional", T.BooleanType(), False, "the batch's transactional flag"),
    Column(
        "control_type", T.StringType(), True,
        "COMMIT or ABORT when the row is a transaction marker (a control batch) rather than a "
        "record: its producer is the batch's, its offset the marker's, and the record's columns "
        "are null; the coordinator replay needs both",
    ),
    Column("timestamp", T.LongType(), True, "the record's timestamp, ms since the epoch"),
    Column(
        "source",
        T.StringType(),
        True,
        "where the row came from (file and byte position or line, or table and row)",
    ),
    Column(
        "record_type",
        T.IntegerType(),
        True,
        "the key's int16 prefix (0/1 OffsetCommit, 2 GroupMetadata, 5 ConsumerGroupMemberMetadata, "
        "3, 4, 6+ other group records; 0 in "
        "__transaction_state); null only for a tombstone printed without key (kafka-dump-log 2.4 "
        "and older)",
    ),
    Column(
        "record_type_name",
        T.StringType(),
        True,
        "OffsetCommit, GroupMetadata, TransactionLog, ...; null for a type Kafka does not define",
    ),
    Column(
        "value_version",
        T.IntegerType(),
        True,
        "the value's int16 prefix; null for a tombstone or text that does not print it",
    ),
    Column("is_tombstone", T.BooleanType(), False, "the value is null (a deletion)"),
    Column(
        "is_skipped",
        T.BooleanType(),
        False,
        "a record type not decoded (consumer group records other than members, share and "
        "streams group records, unknown types)",
    ),
    Column(
        "group_id",
        T.StringType(),
        True,
        "group of an OffsetCommit, GroupMetadata or ConsumerGroupMemberMetadata record; of a "
        "skipped __consumer_offsets record, where its key or the text shows it",
    ),
    Column("committed_topic", T.StringType(), True, "topic whose offset is committed"),
    Column("committed_partition", T.IntegerType(), True, "partition whose offset is committed"),
    Column("committed_offset", T.LongType(), True, "the committed offset (the next to read)"),
    Column(
        "leader_epoch",
        T.IntegerType(),
        True,
        "OffsetCommit value v3+; -1 when the client sent none",
    ),
    Column("metadata", T.StringType(), True, "the commit's free-text metadata"),
    Column("commit_timestamp_ms", T.LongType(), True, "commitTimestamp of the offset, ms"),
    Column(
        "expire_timestamp_ms", T.LongType(), True, "expireTimestamp (OffsetCommit value v1 only)"
    ),
    Column(
        "topic_id",
        T.StringType(),
        True,
        "topic id (OffsetCommit value v4 tag 0, Kafka 4.1+), as Kafka prints a Uuid",
    ),
    Column("protocol_type", T.StringType(), True, "GroupMetadata: protocolType (consumer, ...)"),
    Column("generation", T.IntegerType(), True, "GroupMetadata: the generation id"),
    Column("protocol", T.StringType(), True, "GroupMetadata: the chosen assignor, if any"),
    Column("leader", T.StringType(), True, "GroupMetadata: the leader's member id, if any"),
    Column(
        "current_state_timestamp_ms",
        T.LongType(),
        True,
        "GroupMetadata v2+: when the group entered its state, -1 when unknown",
    ),
    Column(
        "member_count",
        T.IntegerType(),
        True,
        "GroupMetadata: number of members (0: the group is Empty); null, unknown, is read as Empty",
    ),
    Column(
        "member_id",
        T.StringType(),
        True,
        "ConsumerGroupMemberMetadata (type 5, KIP-848 consumer groups): the member the record "
        "is about, there while it has a value, gone at its tombstone; such a record that is not "
        "skipped needs it and group_id",
    ),
    Column("transactional_id", T.StringType(), True, "TransactionLog: the transactional.id"),
    Column("producer_id", T.LongType(), True, "TransactionLog: the producer id in use"),
    Column("producer_epoch", T.IntegerType(), True, "TransactionLog: its epoch (int16 in Kafka)"),
    Column(
        "previous_producer_id",
        T.LongType(),
        True,
        "TransactionLog v1 tag 0: producer id of the last committed transaction, -1 when none",
    ),
    Column(
        "next_producer_id",
        T.LongType(),
        True,
        "TransactionLog v1 tag 1: the producer id sent to the producer next, -1 when none",
    ),
    Column("transaction_timeout_ms", T.IntegerType(), True, "TransactionLog: the timeout, ms"),
    Column(
        "transaction_status",
        T.StringType(),
        True,
        "TransactionLog: Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, "
        "CompleteAbort, Dead or PrepareEpochFence",
    ),
    Column(
        "transaction_partitions",
        T.ArrayType(_TRANSACTION_PARTITION),
        True,
        "TransactionLog: the partitions in the transaction; null when Kafka stored none (the "
        "text of kafka-dump-log 3.x prints [] for none too, so it gives [])",
    ),
    Column("last_update_timestamp_ms", T.LongType(), True, "TransactionLog: last update time, ms"),
    Column(
        "start_timestamp_ms",
        T.LongType(),
        True,
        "TransactionLog: start of the transaction, ms (-1 when none)",
    ),
    Column(
        "client_transaction_version",
        T.IntegerType(),
        True,
        "TransactionLog v1 tag 2: the client's transaction version (0 when absent)",
    ),
]
COORDINATOR_RECORDS = _struct(COORDINATOR_RECORDS_COLUMNS)

# The processing audit's tables (eos_audit.processing, docs/rules.md#exactly-once-processing).
CONSUMER_OFFSETS_COLUMNS: list[Column] = [
    Column("run_id", T.StringType(), False, "the audit run"),
    Column("group_id", T.StringType(), False, "the consumer group"),
    Column("topic", T.StringType(), False, "the topic whose offset the group committed"),
    Column("partition", T.IntegerType(), False, "its partition"),
    Column(
        "committed_offset", T.LongType(), True,
        "the offset committed (the next record the group reads); null for a tombstone",
    ),
    Column("leader_epoch", T.IntegerType(), True, "the leader epoch committed with it, -1: none"),
    Column("metadata", T.StringType(), True, "the commit's metadata text"),
    Column("commit_time", T.TimestampType(), True, "the commit's timestamp (UTC)"),
    Column(
        "kind", T.StringType(), False,
        "PLAIN (OffsetCommit, no producer id), TRANSACTIONAL (TxnOffsetCommit, in a transactional "
        "producer's batch) or TOMBSTONE (the key's offset deleted: expiry, DeleteOffsets, group "
        "deletion)",
    ),
    Column(
        "outcome", T.StringType(), False,
        "APPLIED (became the committed offset), SKIPPED (its COMMIT came after a later record's "
        "value was stored), ABORTED, PENDING (no marker by the export's end), REPLACED (the same "
        "producer committed the key again before its marker), CLEARED (a tombstone removed it "
        "while pending), DELETED (a tombstone)",
    ),
    Column(
        "previous_committed_offset", T.LongType(), True,
        "the committed offset this record replaced (APPLIED, DELETED); null when there was none",
    ),
    Column("producer_id", T.LongType(), False, "producer id of the record's batch, -1: plain"),
    Column("producer_epoch", T.IntegerType(), False, "producer epoch of the batch, -1: plain"),
    Column(
        "marker_offset", T.LongType(), True,
        "offset of the COMMIT or ABORT marker that decided a transactional record",
    ),
    Column(
        "coordinator_partition", T.IntegerType(), False, "the __consumer_offsets partition"
    ),
    Column("record_offset", T.LongType(), False, "the record's offset in that partition"),
    Column("source", T.StringType(), True, "where the record came from (file and position)"),
]  # fmt: skip

TRANSACTION_LOG_COLUMNS: list[Column] = [
    Column("run_id", T.StringType(), False, "the audit run"),
    Column("transactional_id", T.StringType(), False, "the producer's transactional.id"),
    Column(
        "state", T.StringType(), True,
        "Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Dead, "
        "PrepareEpochFence; null for a tombstone (the transactional.id expired)",
    ),
    Column("previous_state", T.StringType(), True, "the id's state in its record before"),
    Column("producer_id", T.LongType(), True, "the producer id the coordinator gave the id"),
    Column("producer_epoch", T.IntegerType(), True, "its epoch"),
    Column(
        "previous_producer_id", T.LongType(), True,
        "KIP-890: the producer id before an epoch overflow gave a new one (-1: none)",
    ),
    Column(
        "next_producer_id", T.LongType(), True,
        "KIP-890: the producer id the next transaction will use (-1: none)",
    ),
    Column(
        "partitions",
        T.ArrayType(_TRANSACTION_PARTITION),
        True,
        "the partitions of the ongoing or ending transaction",
    ),
    Column("timeout_ms", T.IntegerType(), True, "transaction.timeout.ms"),
    Column("start_time", T.TimestampType(), True, "when the transaction started (UTC)"),
    Column("last_update_time", T.TimestampType(), True, "when the state changed (UTC)"),
    Column(
        "client_transaction_version", T.IntegerType(), True,
        "KIP-890: 2 when the client uses transactions v2",
    ),
    Column("is_tombstone", T.BooleanType(), False, "the record deletes the transactional.id"),
    Column(
        "coordinator_partition", T.IntegerType(), False, "the __transaction_state partition"
    ),
    Column("record_offset", T.LongType(), False, "the record's offset in that partition"),
    Column("source", T.StringType(), True, "where the record came from (file and position)"),
]  # fmt: skip

# The one catalog of the warehouse's tables: name -> columns, in the order a run writes them, each
# run's record (`RUN_TABLE`) around the data tables (`DATA_TABLES`). A new table is one entry here.
RUN_TABLE = "audit_runs"
OUTPUT_COLUMNS: dict[str, list[Column]] = {
    "findings": FINDINGS_COLUMNS,
    "quarantine": QUARANTINE_COLUMNS,
    "transactions": TRANSACTIONS_COLUMNS,
    "partition_summary": PARTITION_SUMMARY_COLUMNS,
    "producer_sessions": PRODUCER_SESSIONS_COLUMNS,
    "list_offsets_errors": LIST_OFFSETS_ERRORS_COLUMNS,
    "producer_state": PRODUCER_STATE_COLUMNS,
    "input_files": INPUT_FILES_COLUMNS,
    "consumer_offsets": CONSUMER_OFFSETS_COLUMNS,
    "transaction_log": TRANSACTION_LOG_COLUMNS,
    RUN_TABLE: AUDIT_RUNS_COLUMNS,
}
OUTPUT_TABLES: dict[str, T.StructType] = {
    name: _struct(columns) for name, columns in OUTPUT_COLUMNS.items()
}
# The inputs' contracts besides (producer_state is both: a seed is an earlier run's table).
INPUT_COLUMNS: dict[str, list[Column]] = {
    "record_batch": RECORD_BATCH_COLUMNS,
    "list_offsets": LIST_OFFSETS_COLUMNS,
    "acks": ACKS_COLUMNS,
    "ground_truth": GROUND_TRUTH_COLUMNS,
    "coordinator_records": COORDINATOR_RECORDS_COLUMNS,
}
# Every contract `schemas/` publishes as JSON: the inputs' and the tables'.
PUBLISHED: dict[str, list[Column]] = {**INPUT_COLUMNS, **OUTPUT_COLUMNS}
DATA_TABLES = tuple(name for name in OUTPUT_TABLES if name != RUN_TABLE)
# The tables with a row per record of an input, whose rows may be as many as the input's (a row
# per offset commit, per `__transaction_state` record); the others' rows are bounded by the
# findings, partitions and producers.
PER_INPUT_RECORD_TABLES = frozenset({"consumer_offsets", "transaction_log"})


def contract_json(columns: list[Column]) -> dict:
    """The JSON contract of one table: its columns with type, nullability and description."""
    return {
        "columns": [
            {
                "name": c.name,
                "type": c.data_type.simpleString(),
                "nullable": c.nullable,
                "description": c.description,
            }
            for c in columns
        ]
    }


def write_contracts(directory: Path) -> list[Path]:
    """Write `<table>.json` for every published table into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, columns in PUBLISHED.items():
        path = directory / f"{name}.json"
        path.write_text(json.dumps(contract_json(columns), indent=2) + "\n")
        written.append(path)
    return written


if __name__ == "__main__":  # python -m eos_audit.schemas schemas/
    for p in write_contracts(Path(sys.argv[1] if len(sys.argv) > 1 else "schemas")):
        print(p)
