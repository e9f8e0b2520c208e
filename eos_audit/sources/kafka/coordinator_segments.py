"""`__consumer_offsets` and `__transaction_state` segments → one row per coordinator record.

The batch reader (`segments`) decodes batch headers and leaves records alone. The two coordinator
topics need their records: their keys and values say which group committed which offset and what
state each transaction was in (eos_processing.md §1). This reader frames a segment with the batch
reader's own walk and header decode (`segments.iter_segment`: the same framing errors, CRC check
and byte positions), walks the records of each data batch (`batch_records`) and decodes each
(`coordinator_records`). Every record carries its batch's producer id, epoch and transactional
flag, which tell a TxnOffsetCommit (pending until its producer's marker) from a plain commit.

A control batch (a transaction marker) is one row with its `control_type` (COMMIT, ABORT) and no
decoded fields: the coordinator replay needs the markers in offset order with the records, and a
user who hands in decoded records as Parquet hands in the markers the same way.

What cannot be decoded is an error row (`_source_error`, `source` = `<file>:<byte>` of the batch),
never dropped:

- where the segment cannot be framed, as the batch reader reports it (the rest of the file is
  skipped: Kafka has no sync marker);
- a magic 0/1 entry (the message formats before 0.11): its records are not decoded here;
- a batch whose CRC does not match: its bytes are damaged, so none of its records is trusted (the
  batch reader reports the corrupt batch itself);
- a batch compressed with a codec not decoded (snappy, lz4, zstd): one row for the batch;
- records that cannot be walked: the records before are rows, and one error row stands for the
  rest of the batch;
- a record that does not decode: one row with its offset; the batch's other records are kept.

A record of a type the audit does not decode (consumer, share and streams groups) is a row with
`is_skipped` set, not an error.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from eos_audit.sources.files import row_reference as ref
from eos_audit.sources.files.file_source import FileFormat, load_files
from eos_audit.sources.kafka.batch_records import (
    CompressionNotDecodedError,
    RecordBatchError,
    walk_batch,
)
from eos_audit.sources.kafka.coordinator_keys import (
    CONSUMER_OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
)
from eos_audit.sources.kafka.coordinator_records import (
    MARKER,
    CoordinatorRecordError,
    DecodedRecord,
    decode_consumer_offsets,
    decode_transaction_state,
)
from eos_audit.sources.kafka.coordinator_rows import (
    ARROW_SCHEMA,
    CHUNK_ROWS,
    COORDINATOR_TOPICS,
    CoordinatorRows,
    coordinator_source_schema,
)
from eos_audit.sources.kafka.partition_dirs import discover_segment_files
from eos_audit.sources.kafka.segments import LOG_OVERHEAD, SOURCE_ERROR_COL, iter_segment

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import types as T

log = logging.getLogger(__name__)

FORMAT_NAME = "kafka_coordinator_segments"

# The v2 header (docs/formats.md#record-batch-v2): the batch's first timestamp, and the attribute
# bit that makes every record's timestamp the batch's max timestamp (LogAppendTime:
# DefaultRecordBatch's iterator hands `maxTimestamp` to each record instead of base + delta).
BASE_TIMESTAMP_AT = 27
LOG_APPEND_TIME_FLAG = 0x08
_ATTRIBUTES = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")

_DECODERS: dict[str, Callable[[bytes | None, bytes | None], DecodedRecord]] = {
    CONSUMER_OFFSETS_TOPIC: decode_consumer_offsets,
    TRANSACTION_STATE_TOPIC: decode_transaction_state,
}
# What this reader takes of the batch reader's row for each batch.
_HEADER_COLUMNS = [
    "base_offset", "producer_id", "producer_epoch", "is_transactional", "is_control",
    "control_type", "record_count", "magic", "max_timestamp", "crc_valid", "source",
    SOURCE_ERROR_COL, ref.SOURCE_ROW,
]  # fmt: skip


def _batch_records(
    data: bytes | memoryview,
    header: dict,
    context: dict,
    decode: Callable[[bytes | None, bytes | None], DecodedRecord],
    rows: CoordinatorRows,
) -> None:
    """The rows of one framed v2 data batch whose CRC matched: a row a record, or an error."""
    position = header[ref.SOURCE_ROW]
    count = header["record_count"]
    length = _INT32.unpack_from(data, position + 8)[0]
    batch = bytes(data[position : position + LOG_OVERHEAD + length])
    log_append_time = _ATTRIBUTES.unpack_from(batch, 21)[0] & LOG_APPEND_TIME_FLAG
    base_timestamp = _INT64.unpack_from(batch, BASE_TIMESTAMP_AT)[0]
    walked = 0
    try:
        for record in walk_batch(batch):
            walked += 1
            offset = header["base_offset"] + record.offset_delta
            timestamp = (
                header["max_timestamp"]
                if log_append_time
                else base_timestamp + record.timestamp_delta
            )
            located = {**context, "offset": offset, "timestamp": timestamp}
            try:
                rows.add(located, decode(record.key, record.value))
            except CoordinatorRecordError as err:
                rows.add(located, error=f"record at offset {offset} does not decode: {err.reason}")
    except CompressionNotDecodedError as err:
        rows.add(
            context,
            error=f"{err.reason}: the {count} records of the batch at byte {position} are not "
            "decoded",
        )
    except RecordBatchError as err:
        rows.add(
            context,
            error=f"the records of the batch at byte {position} cannot be walked ({err.reason}): "
            f"{max(count - walked, 0)} of its {count} records are not decoded",
        )


def _marker_row(header: dict, context: dict, rows: CoordinatorRows) -> None:
    """A control batch's row: its marker, or an error for a control record of no known type."""
    if header["control_type"] is None:
        rows.add(
            context,
            error=f"the control batch at byte {header[ref.SOURCE_ROW]} holds no COMMIT or ABORT "
            "marker the audit knows",
        )
        return
    marker = {
        **context,
        "offset": header["base_offset"],
        "timestamp": header["max_timestamp"],
        "control_type": header["control_type"],
    }
    rows.add(marker, MARKER)


def _batch_rows(
    data: bytes | memoryview,
    header: dict,
    topic: str,
    partition: int,
    decode: Callable[[bytes | None, bytes | None], DecodedRecord],
    rows: CoordinatorRows,
) -> None:
    """The rows of one entry the batch reader framed (or of the point where framing stopped)."""
    position = header[ref.SOURCE_ROW]
    context = {
        "coordinator_topic": topic,
        "coordinator_partition": partition,
        "base_offset": header["base_offset"],
        "batch_producer_id": header["producer_id"],
        "batch_producer_epoch": header["producer_epoch"],
        "is_transactional": header["is_transactional"],
        "source": header["source"],
    }
    if header[SOURCE_ERROR_COL] is not None:
        rows.add(context, error=header[SOURCE_ERROR_COL])
    elif header["magic"] != 2:
        rows.add(
            context,
            error=f"a magic {header['magic']} entry at byte {position}: records of the message "
            "formats before v2 are not decoded",
        )
    elif not header["crc_valid"]:
        rows.add(
            context,
            error=f"the batch at byte {position} fails its CRC-32C: its {header['record_count']} "
            "records are not decoded (damaged bytes)",
        )
    elif header["is_control"]:
        _marker_row(header, context, rows)
    else:
        _batch_records(data, header, context, decode, rows)


def iter_coordinator_segment(
    data: bytes | memoryview,
    *,
    topic: str,
    partition: int,
    path: str,
    last_segment: bool = False,
    chunk_rows: int = CHUNK_ROWS,
) -> Iterator[pa.RecordBatch]:
    """Decode the records of one coordinator segment into Arrow batches, in file order.

    Args:
        data: the whole content of a `.log` file.
        topic: `__consumer_offsets` or `__transaction_state`: which decoder reads the records.
        partition: the coordinator partition.
        path: file path, used in `source` ("<path>:<byte position of the batch>").
        last_segment: the file is its replica's last segment: a batch cut at its end is
            TRUNCATED_TAIL, as the batch reader says.
        chunk_rows: rows per yielded batch, at most (a batch's records are never split).

    Yields:
        Arrow batches in `coordinator_rows.ARROW_SCHEMA`.

    Raises:
        ValueError: for a topic that is neither coordinator topic.
    """
    decode = _DECODERS.get(topic)
    if decode is None:
        raise ValueError(f"{topic!r} is not a coordinator topic")
    rows = CoordinatorRows()
    headers = iter_segment(
        data, topic=topic, partition=partition, path=path, last_segment=last_segment
    )
    for chunk in headers:
        for header in chunk.select(_HEADER_COLUMNS).to_pylist():
            _batch_rows(data, header, topic, partition, decode, rows)
            if len(rows) >= chunk_rows:
                yield rows.take()
    if len(rows):
        yield rows.take()


def parse_coordinator_segment(
    data: bytes | memoryview, *, topic: str, partition: int, path: str
) -> pa.Table:
    """The rows of one coordinator segment as a table (pure: tests call it, Spark does not).

    Args:
        data: the whole content of a `.log` file.
        topic: `__consumer_offsets` or `__transaction_state`.
        partition: the coordinator partition.
        path: file path, used in `source`.

    Returns:
        One row per data record in file order, and the error rows where they occur.
    """
    batches = list(iter_coordinator_segment(data, topic=topic, partition=partition, path=path))
    return pa.Table.from_batches(batches, schema=ARROW_SCHEMA)


class CoordinatorSegmentsFormat(FileFormat):
    """The `kafka_coordinator_segments` format: whole `.log` files, memory-mapped, packed by size.

    Files: `{"path": ..., "topic": ..., "partition": ...}`, with `last_segment` and `bytes`
    where known.
    """

    format_name = FORMAT_NAME
    memory_map = True

    def schema(self) -> T.StructType:
        """The readers' schema (`coordinator_source_schema()`)."""
        return coordinator_source_schema()

    def parse(self, file: dict, data: bytes | memoryview) -> Iterator[pa.RecordBatch]:
        """The rows of one segment, in file order (`iter_coordinator_segment`)."""
        yield from iter_coordinator_segment(
            data,
            topic=file["topic"],
            partition=int(file["partition"]),
            path=file["path"],
            last_segment=bool(file.get("last_segment", False)),
        )

    def unreadable(self, file: dict, reason: str) -> Iterator[pa.RecordBatch]:
        """One error row at byte 0 of the file, worded as the batch reader's."""
        rows = CoordinatorRows()
        context = {
            "coordinator_topic": file["topic"],
            "coordinator_partition": int(file["partition"]),
            "source": f"{file['path']}:0",
        }
        reason = reason.removeprefix("cannot read file: ")
        rows.add(context, error=f"cannot read segment file: {reason}")
        yield rows.take()


def read_coordinator_segment_files(spark: SparkSession, files: list[dict]) -> DataFrame:
    """Decode the records of explicit coordinator `.log` files on the executors.

    Args:
        spark: the session.
        files: dicts with `path`, `topic` (a coordinator topic) and `partition`.

    Returns:
        `COORDINATOR_RECORDS` columns plus `_source_error` (`coordinator_source_schema()`).
    """
    return load_files(spark, CoordinatorSegmentsFormat, files)


def read_coordinator_segments(spark: SparkSession, paths: list[str]) -> DataFrame:
    """Decode every `__consumer_offsets-N` and `__transaction_state-N` segment under `paths`.

    Partition directories of other topics are left to the batch reader. Every replica found is
    read: `source` names the file, so its folder names the replica; choosing one is the caller's.

    Args:
        spark: the session.
        paths: log dirs, partition dirs, export trees or `.log` files, as for `read_segments`.

    Returns:
        One row per data record (and per error), `coordinator_source_schema()`; no row when no
        coordinator partition is found.

    Raises:
        InputNotFoundError: a path does not exist or no partition directory was found.
    """
    files = [f for f in discover_segment_files(paths) if f["topic"] in COORDINATOR_TOPICS]
    log.info("reading %d segment files of the coordinator topics", len(files))
    return read_coordinator_segment_files(spark, files)
