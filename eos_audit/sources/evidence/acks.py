"""Client acknowledgements: the `--acks` input contract and its readers.

The rules they feed: docs/rules.md#client-sequence-error and docs/rules.md#acked-write-lost.

An *ack* is one send result as the producing application logged it: when it arrived, the batch
it was for (topic, partition, producer id, epoch, base sequence, record count) and what the
partition leader answered: the base offset it wrote the batch at, or an error such as
UNKNOWN_PRODUCER_ID, with the log start offset the produce response carries (KIP-360 seed, item
4). `eos_audit.evidence_rules.acks` classifies the sequence errors.

Formats (`fmt`): `parquet`, `json` (JSON lines; fields that are not contract columns, such as a
logging framework's `level` or `message`, are ignored) and `csv` (with a header line), all in the
`ACKS` contract (schemas/acks.json). Integer columns may have any width (JSON and CSV values are
read as text and parsed per row, never inferred). `event_time`, `topic`, `partition`,
`producer_id`, `producer_epoch` and `base_sequence` are required (JSON: checked on the first line);
`record_count`, `offset`, `error`, `log_start_offset` and `source` are optional (absent: null).
`event_time` may be a timestamp, an ISO-8601 string (UTC when it has no zone) or epoch
milliseconds. `source` defaults to the file (Parquet: the file and row number).

Values are normalized where they enter:

* `error` becomes Kafka's error name (`org.apache.kafka.common.errors.Errors`): an error name in
  any case is upper-cased; a Java exception, with or without its package and message, is named
  after its class (UnknownProducerIdException -> UNKNOWN_PRODUCER_ID), with the classes whose
  name is not the error's mapped (OutOfOrderSequenceException -> OUT_OF_ORDER_SEQUENCE_NUMBER,
  TimeoutException -> REQUEST_TIMED_OUT, ...) and a `java.util.concurrent.ExecutionException:`
  wrapper (what `send().get()` throws) unwrapped. NONE or blank: no error.
* `offset` -1 is no offset: it is ProduceResponse.INVALID_OFFSET, which a Java send callback
  reports in the RecordMetadata of a failed send (and of an acks=0 send, never acknowledged).
* `log_start_offset` -1 stays -1: the contract's "not sent".

Nothing is dropped silently and nothing crashes on bad data: a row that cannot be an ack is
returned with `_source_error` set (all its reasons, '; '-joined) for the caller to quarantine:

* a required value null or unparseable, `event_time` not a time, `topic` not a legal topic name;
* `partition` negative or above int32; `producer_id` below -1 (-1 is RecordBatch.NO_PRODUCER_ID);
  `producer_epoch` outside int16, below -1, or -1 with a producer id;
* `base_sequence` below -1 or above int32, or -1 with a producer id: an idempotent batch always
  carries a sequence, and the client-sequence rule needs it. A producer_id -1 ack (a producer
  without idempotence) is legal and carries no sequence: its base_sequence is not checked beyond
  its range (-1 by Kafka's NO_SEQUENCE, but any value is kept) and no rule reads it;
* `record_count` below 1 (a batch holds at least one record) or above int32;
* an ack with neither an offset nor an error, or with both; an offset below -1;
* `log_start_offset` below -1;
* UNKNOWN_PRODUCER_ID or OUT_OF_ORDER_SEQUENCE_NUMBER for producer_id -1: a leader only checks
  sequences of idempotent producers, so that row contradicts itself.

Bad inputs as a whole (a missing path, a missing required column, a column of an unusable type)
raise `InputNotFoundError` / `InputSchemaError` naming them.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from eos_audit.schemas import ACKS, ACKS_COLUMNS
from eos_audit.sources.formats import ACKS_FORMATS
from eos_audit.sources.tabular import contract_reader as cr
from eos_audit.sources.tabular.canonical import (
    INT16_MAX,
    INT16_MIN,
    INT32_MAX,
    LONG_MAX,
    reason_when,
)
from eos_audit.sources.tabular.contract_reader import SOURCE_ERROR
from eos_audit.sql_text import lookup

__all__ = [
    "ACKS",
    "FORMATS",
    "SEQUENCE_ERRORS",
    "SOURCE_ERROR",
    "detect_format",
    "normalize_error_name",
    "read_acks",
    "to_contract",
]

FORMATS = ACKS_FORMATS
UNKNOWN_PRODUCER_ID = "UNKNOWN_PRODUCER_ID"
OUT_OF_ORDER_SEQUENCE_NUMBER = "OUT_OF_ORDER_SEQUENCE_NUMBER"
# The errors a leader returns from its sequence check (docs/rules.md#client-sequence-error).
SEQUENCE_ERRORS = (UNKNOWN_PRODUCER_ID, OUT_OF_ORDER_SEQUENCE_NUMBER)
NO_OFFSET = -1  # ProduceResponse.INVALID_OFFSET
NO_PRODUCER_ID = -1  # RecordBatch.NO_PRODUCER_ID (and NO_PRODUCER_EPOCH, NO_SEQUENCE)

REQUIRED_COLUMNS = [
    "event_time", "topic", "partition", "producer_id", "producer_epoch", "base_sequence"
]  # fmt: skip
_REQUIRED_INTEGERS = ("partition", "producer_id", "producer_epoch", "base_sequence")
_OPTIONAL_INTEGERS = ("record_count", "offset", "log_start_offset")
CONTRACT = cr.TableContract(
    label="acks",
    columns=tuple(c.name for c in ACKS_COLUMNS),
    required=tuple(REQUIRED_COLUMNS),
    integer_columns=_REQUIRED_INTEGERS + _OPTIONAL_INTEGERS,
    string_columns=("topic", "error", "source"),
    time_columns=("event_time",),
    required_note=" (record_count, offset, error, log_start_offset and source are optional)",
)
_SUFFIXES = cr.TABLE_SUFFIXES
_FORMAT_ALIASES = {"jsonl": "json"}

# Exceptions whose class name is not their error's name (clients/.../protocol/Errors.java); every
# other exception is named by its class name's words.
_EXCEPTION_ERRORS = {
    "OUT_OF_ORDER_SEQUENCE": OUT_OF_ORDER_SEQUENCE_NUMBER,
    "DUPLICATE_SEQUENCE": "DUPLICATE_SEQUENCE_NUMBER",
    "TIMEOUT": "REQUEST_TIMED_OUT",
    "CORRUPT_RECORD": "CORRUPT_MESSAGE",
    "RECORD_TOO_LARGE": "MESSAGE_TOO_LARGE",
    "RECORD_BATCH_TOO_LARGE": "RECORD_LIST_TOO_LARGE",
    "NETWORK": "NETWORK_EXCEPTION",
    "INVALID_TOPIC": "INVALID_TOPIC_EXCEPTION",
    "UNKNOWN_SERVER": "UNKNOWN_SERVER_ERROR",
    "KAFKA_STORAGE": "KAFKA_STORAGE_ERROR",
    "TOPIC_AUTHORIZATION": "TOPIC_AUTHORIZATION_FAILED",
    "CLUSTER_AUTHORIZATION": "CLUSTER_AUTHORIZATION_FAILED",
    "TRANSACTIONAL_ID_AUTHORIZATION": "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
    "INVALID_PID_MAPPING": "INVALID_PRODUCER_ID_MAPPING",
    "INVALID_TXN_TIMEOUT": "INVALID_TRANSACTION_TIMEOUT",
}
# `future.get()` wraps the send's exception; the cause is the error.
_WRAPPER = r"^\s*(?:[\w$]+\.)*(?:Execution|Completion)Exception:\s*(?=(?:[\w$]+\.)*\w+Exception\b)"


def normalize_error_name(text: Column) -> Column:
    """Kafka's error name for an error as applications log it; null for no error.

    Args:
        text: an error name in any case (unknown_producer_id), a Java exception class with or
            without its package and message, or null / blank / NONE.

    Returns:
        The upper-snake error name (UNKNOWN_PRODUCER_ID, OUT_OF_ORDER_SEQUENCE_NUMBER, ...), the
        upper-cased text when it names no exception, or null.

    """
    text = F.trim(text)
    from_class = cr.exception_error_name(F.regexp_replace(text, _WRAPPER, ""))
    name = F.when(
        from_class != "", F.coalesce(lookup(from_class, _EXCEPTION_ERRORS), from_class)
    ).otherwise(F.upper(text))
    return F.when((name != "") & (name != "NONE"), name)


def to_contract(df: DataFrame, *, default_source: Column | None = None) -> DataFrame:
    """Validate and cast a source DataFrame into the ACKS columns plus `_source_error`.

    Args:
        df: the rows as read: contract columns of any integer width or as text, optionally
            `_source_error` (a reason found while reading, such as a malformed line).
        default_source: where a row came from when it has no `source` value.

    Returns:
        The ACKS columns with contract types and `_source_error` (null for good rows, else every
        reason, '; '-joined; see the module docstring).

    """
    event_time, time_problem = cr.parse_time(df, "event_time")
    integers = {n: cr.parse_integer(df, n) for n in _REQUIRED_INTEGERS + _OPTIONAL_INTEGERS}
    source = cr.parse_text(df, "source")
    if default_source is not None:
        source = F.coalesce(source, default_source)
    # Stage 1: every value parsed once (the checks refer to these columns, so no parsing
    # expression is repeated in the plan).
    parsed = df.select(
        event_time.alias("_event_time"),
        time_problem.alias("_event_time_problem"),
        cr.parse_text(df, "topic").alias("_topic"),
        *[value.alias(f"_{n}") for n, (value, _) in integers.items()],
        *[problem.alias(f"_{n}_problem") for n, (_, problem) in integers.items()],
        normalize_error_name(cr.parse_text(df, "error")).alias("_error"),
        source.alias("_source"),
        cr.upstream_reason(df),
    )

    # Stage 2: the checks.
    topic, error = F.col("_topic"), F.col("_error")
    partition, pid, epoch = F.col("_partition"), F.col("_producer_id"), F.col("_producer_epoch")
    sequence, count = F.col("_base_sequence"), F.col("_record_count")
    raw_offset, log_start = F.col("_offset"), F.col("_log_start_offset")
    offset = F.when(raw_offset != NO_OFFSET, raw_offset)
    idempotent = pid >= 0
    problems = [
        F.col("_event_time_problem"),
        reason_when(topic.isNull(), "null topic"),
        reason_when(
            ~topic.rlike(cr.LEGAL_TOPIC),
            cr.format_reason("topic %s is not a legal Kafka topic name", topic),
        ),
        *[
            F.coalesce(F.col(f"_{n}_problem"), reason_when(F.col(f"_{n}").isNull(), f"null {n}"))
            for n in _REQUIRED_INTEGERS
        ],
        reason_when(
            (partition < 0) | (partition > INT32_MAX),
            cr.format_reason("partition %s out of range", partition),
        ),
        reason_when(pid < NO_PRODUCER_ID, cr.format_reason("producer_id %s below -1", pid)),
        reason_when(
            (epoch < INT16_MIN) | (epoch > INT16_MAX),
            cr.format_reason("producer_epoch %s outside int16", epoch),
        ),
        reason_when(
            (epoch >= INT16_MIN) & (epoch < -1),
            cr.format_reason("producer_epoch %s below -1", epoch),
        ),
        # InitProducerId assigns a producer id and an epoch together.
        reason_when(
            idempotent & (epoch == -1),
            cr.format_reason("producer_id %s without a producer_epoch", pid),
        ),
        reason_when(
            (sequence < -1) | (sequence > INT32_MAX),
            cr.format_reason("base_sequence %s out of range", sequence),
        ),
        # An idempotent producer numbers every batch; the client-sequence rule needs that number.
        reason_when(
            idempotent & (sequence == -1),
            cr.format_reason("producer_id %s without a base_sequence", pid),
        ),
        F.col("_record_count_problem"),
        reason_when(count < 1, cr.format_reason("record_count %s below 1", count)),
        reason_when(count > INT32_MAX, cr.format_reason("record_count %s above int32", count)),
        F.coalesce(
            F.col("_offset_problem"),
            F.when(
                error.isNull() & (raw_offset == NO_OFFSET),
                F.lit("offset -1 and no error (an acks=0 send is never acknowledged)"),
            ).when(offset.isNull() & error.isNull(), F.lit("no offset and no error")),
        ),
        reason_when(
            (offset >= 0) & error.isNotNull(),
            cr.format_reason("both offset %s and error %s", offset, error),
        ),
        reason_when(raw_offset < NO_OFFSET, cr.format_reason("negative offset %s", raw_offset)),
        # The acknowledged batch's last offset (offset + record_count - 1) must be a long below
        # Long.MAX_VALUE, like every batch's (the audit computes it; issue 12, case 1).
        reason_when(
            (offset >= 0)
            & F.coalesce(
                F.try_add(offset, F.try_subtract(F.coalesce(count, F.lit(1)), F.lit(1)))
                >= F.lit(LONG_MAX),
                F.lit(True),
            ),
            cr.format_reason("offset %s plus record_count %s leaves no next offset", offset, count),
        ),
        F.col("_log_start_offset_problem"),
        reason_when(log_start < -1, cr.format_reason("log_start_offset %s below -1", log_start)),
        reason_when(
            (pid == NO_PRODUCER_ID) & error.isin(*SEQUENCE_ERRORS),
            cr.format_reason(
                "%s for producer_id -1: a leader checks sequences of idempotent producers only",
                error,
            ),
        ),
    ]
    # try_cast: an out-of-range value is already a reason; the cast must not fail the job.
    values = {
        "event_time": F.col("_event_time"),
        "topic": topic,
        "partition": partition.try_cast("int"),
        "producer_id": pid,
        "producer_epoch": epoch.try_cast("int"),
        "base_sequence": sequence.try_cast("int"),
        "record_count": count.try_cast("int"),
        "offset": offset,
        "error": error,
        "log_start_offset": log_start,
        "source": F.col("_source"),
    }
    return cr.select_contract(parsed, values, problems, ACKS)


# ------------------------------------------------------------------------------------------------
# Readers
# ------------------------------------------------------------------------------------------------
def _read_parquet(spark: SparkSession, paths: list[str]) -> DataFrame:
    df = cr.read_parquet_table(spark, paths, CONTRACT)
    return to_contract(df, default_source=F.col(cr.DEFAULT_SOURCE))


def _read_json(spark: SparkSession, paths: list[str]) -> DataFrame:
    # Every required column is never null in a good ack, so all of them must be on line 1.
    df = cr.read_json_lines(spark, paths, CONTRACT, REQUIRED_COLUMNS)
    return to_contract(df, default_source=F.col(cr.DEFAULT_SOURCE))


def _read_csv(spark: SparkSession, paths: list[str]) -> DataFrame:
    df = cr.read_csv_table(spark, paths, CONTRACT)
    return to_contract(df, default_source=F.col(cr.DEFAULT_SOURCE))


_READERS = {"parquet": _read_parquet, "json": _read_json, "csv": _read_csv}


def detect_format(path: str) -> str:
    """Guess the acks input format of a path from its suffix or its files' suffixes.

    Args:
        path: a file or directory (a URI's format is told from its suffix only).

    Returns:
        parquet, json or csv.

    Raises:
        InputNotFoundError: the path does not exist or its format cannot be told.

    """
    return cr.detect_format(path, CONTRACT, _SUFFIXES, FORMATS)


def read_acks(spark: SparkSession, paths: list[str], fmt: str = "auto") -> DataFrame:
    """Read client acknowledgements into the ACKS contract.

    Args:
        spark: the session.
        paths: files or directories (a directory is read with every file below it).
        fmt: auto (from the path's suffix), parquet, json (JSON lines) or csv.

    Returns:
        The ACKS columns plus `_source_error`: null for an ack, else the reasons the row must be
        quarantined. Nothing is dropped.

    Raises:
        InputNotFoundError: a path does not exist, or its format cannot be told.
        InputSchemaError: a required column is missing or has an unusable type (named).
        ConfigError: fmt is not a supported format.

    """
    return cr.read_by_format(
        cr.input_paths(paths, CONTRACT),
        fmt,
        CONTRACT,
        formats=FORMATS,
        detect=detect_format,
        read=lambda group_fmt, group_paths: _READERS[group_fmt](spark, group_paths),
        aliases=_FORMAT_ALIASES,
    )
