"""Kafka `.log` segment files → the canonical one-row-per-record-batch DataFrame.

The parser walks a segment batch by batch in compiled code (`segment_walk`; the framing of
docs/formats.md#segment-layout: size at byte 8, magic at byte 16), then decodes every v2 header
field (docs/formats.md#record-batch-v2) and the first record of control batches (the transaction
marker, docs/formats.md#control-batches) in one compiled pass over each batch's bytes, and verifies
CRC-32C with the `crc32c` library's C function called from the compiled loop. Record payloads are
never decoded and never logged.

Everything runs on the executors: the `kafka_segments` format (`file_source`, in a `mapInArrow`)
reads whole `.log` files (packed into Spark partitions by size, `file_source.pack_files`) and
yields Arrow record batches. A batch is located by reference
(`row_reference`): its file's id, which the driver gave the file, and its byte position; the text
`<file>:<byte>` is written only where a row is shown (quarantine, findings, `read_segments`).

Bad bytes never crash a read and are never dropped silently: the first position a file cannot be
framed at becomes one row whose `_source_error` is set (there is no safe way to resync a Kafka log,
so the rest of that file is reported as skipped). A tail of zero bytes (a preallocated segment
copied while active) is the only thing ignored, and only when every remaining byte is zero.
"""

from __future__ import annotations

import logging
import struct
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eos_audit.schemas import RECORD_BATCH
from eos_audit.sources.files import row_reference as ref
from eos_audit.sources.files.file_source import FileFormat, load_files
from eos_audit.sources.kafka.partition_dirs import discover_segment_files

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

SOURCE_ERROR_COL = "_source_error"
FORMAT_NAME = "kafka_segments"

# Header layout of a magic v2 batch (docs/formats.md#record-batch-v2).
RECORD_BATCH_OVERHEAD = 61
LOG_OVERHEAD = 12  # baseOffset int64 + batchLength int32
MIN_V2_BATCH_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD  # 49
# Smallest legacy message after the log overhead (crc, magic, attributes, [ts], key, value;
# docs/formats.md#legacy-entries).
MIN_LEGACY_LENGTH = {0: 14, 1: 22}
# A declared length above this is treated as garbage rather than a batch cut by a copy: Kafka's
# segments default to 1 GiB and a batch never exceeds a segment.
MAX_PLAUSIBLE_BATCH = 1 << 30
MAX_INT = 2147483647
# Rows per Arrow batch handed to Spark; bounds the arrays a decode of v2 headers fills too.
CHUNK_ROWS = 65536

_FRAME = struct.Struct(">qi")
# The reason of a batch cut at the end of a replica's last segment: what a copy of an active
# segment gives, and what Kafka's recovery (LogSegment.recover) truncates on restart. Recorded in
# quarantine, but not counted as bad input (run.max_quarantined_share); a cut anywhere else is.
TRUNCATED_TAIL = "TRUNCATED_TAIL"


def source_schema() -> T.StructType:
    """The schema every reader returns: `RECORD_BATCH` columns plus `_source_error`.

    Names, types and order are those of `eos_audit.schemas.RECORD_BATCH`; every field is nullable
    here because a `_source_error` row carries only what could be read (the validation step that
    turns those rows into quarantine rows restores the non-null contract for the others).

    Returns:
        The Spark schema of a reader's output.

    """
    fields = [T.StructField(f.name, f.dataType, True, f.metadata) for f in RECORD_BATCH.fields]
    fields.append(T.StructField(SOURCE_ERROR_COL, T.StringType(), True))
    return T.StructType(fields)


ARROW_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("base_offset", pa.int64()),
        ("last_offset", pa.int64()),
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int32()),
        ("base_sequence", pa.int32()),
        ("last_sequence", pa.int32()),
        ("record_count", pa.int32()),
        ("is_transactional", pa.bool_()),
        ("is_control", pa.bool_()),
        ("control_type", pa.string()),
        ("coordinator_epoch", pa.int32()),
        ("partition_leader_epoch", pa.int32()),
        ("magic", pa.int32()),
        ("max_timestamp", pa.int64()),
        ("crc_valid", pa.bool_()),
        ("source", pa.string()),
        (SOURCE_ERROR_COL, pa.string()),
    ]
)
assert ARROW_SCHEMA.names == [f.name for f in RECORD_BATCH.fields] + [SOURCE_ERROR_COL]
# What the segment reader yields: the reader output plus where each row was read, as numbers
# (row_reference): the file's id (null unless the driver gave one) and the byte position.
SEGMENT_ARROW_SCHEMA = ARROW_SCHEMA.append(pa.field(ref.SOURCE_FILE, pa.int64())).append(
    pa.field(ref.SOURCE_ROW, pa.int64())
)


# ------------------------------------------------------------------------------------------------
# Sequence arithmetic (docs/formats.md#sequence-arithmetic)
# ------------------------------------------------------------------------------------------------
def decrement_sequence(seq: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """Kafka's `decrementSequence`, vectorised: `s < k ? MAX - (k - s) + 1 : s - k`.

    Args:
        seq: last sequences.
        delta: decrements (the offset delta of the batch).

    Returns:
        int64 array of the wrapped differences.

    """
    s = np.asarray(seq, dtype=np.int64)
    k = np.asarray(delta, dtype=np.int64)
    return np.where(s < k, MAX_INT - (k - s) + 1, s - k)


# ------------------------------------------------------------------------------------------------
# Arrow helpers
# ------------------------------------------------------------------------------------------------
def _const_str(value: str | None, n: int) -> pa.Array:
    if value is None or n == 0:
        return pa.nulls(n, pa.string())
    return pa.array([value], pa.string()).take(pa.array(np.zeros(n, dtype=np.int32)))


def _sources(path: str, positions: np.ndarray) -> pa.Array:
    pos = pc.cast(pa.array(np.asarray(positions, dtype=np.int64)), pa.string())
    return pc.binary_join_element_wise(_const_str(path + ":", len(pos)), pos, "")


def _batch(
    columns: dict[str, pa.Array | np.ndarray | None], n: int, schema: pa.Schema = ARROW_SCHEMA
) -> pa.RecordBatch:
    arrays = []
    for field in schema:
        value = columns.get(field.name)
        if value is None:
            arrays.append(pa.nulls(n, field.type))
        elif isinstance(value, np.ndarray):
            arrays.append(
                pa.array(value.astype(field.type.to_pandas_dtype(), copy=False), field.type)
            )
        else:
            arrays.append(value if value.type == field.type else value.cast(field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _located(
    columns: dict, path: str, positions: np.ndarray, file_id: int | None
) -> dict[str, pa.Array | np.ndarray | None]:
    """The columns that say where rows were read: by reference when the file has an id."""
    n = len(positions)
    return {
        **columns,
        "source": None if file_id is not None else _sources(path, positions),
        ref.SOURCE_FILE: None if file_id is None else np.full(n, file_id, dtype=np.int64),
        ref.SOURCE_ROW: np.asarray(positions, dtype=np.int64),
    }


def _located_errors(
    batch: pa.RecordBatch, file_id: int | None, positions: list[int]
) -> pa.RecordBatch:
    """Error rows in the segment reader's schema: their text and, beside it, their reference."""
    n = batch.num_rows
    ids = pa.array([file_id] * n, pa.int64())
    return pa.RecordBatch.from_arrays(
        [*batch.columns, ids, pa.array(positions, pa.int64())], schema=SEGMENT_ARROW_SCHEMA
    )


def error_batch(
    *,
    topic: str | None,
    partition: int | None,
    sources: list[str],
    errors: list[str],
    base_offsets: list[int | None] | None = None,
) -> pa.RecordBatch:
    """Rows that carry a `_source_error` (and whatever is known), in the reader output schema.

    Args:
        topic: topic, when known.
        partition: partition, when known.
        sources: one `source` per row.
        errors: one message per row.
        base_offsets: base offset per row when readable.

    Returns:
        An Arrow batch in `ARROW_SCHEMA`.

    """
    n = len(sources)
    cols: dict = {
        "topic": _const_str(topic, n),
        "partition": pa.array([partition] * n, pa.int32()),
        "source": pa.array(sources, pa.string()),
        SOURCE_ERROR_COL: pa.array(errors, pa.string()),
    }
    if base_offsets is not None:
        cols["base_offset"] = pa.array(base_offsets, pa.int64())
    return _batch(cols, n)


# ------------------------------------------------------------------------------------------------
# Framing walk
# ------------------------------------------------------------------------------------------------
def _frame(
    mv: memoryview, buf: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple | None]:
    """Walk the entries of a segment; returns v2 positions, their ends, legacy positions, error.

    The walk is compiled (`segment_walk`). The error is `(position, message, base_offset_or_None)`;
    the walk stops there.
    """
    # Imported where a file is read, not with this module: the driver imports the module to plan
    # a read and never walks a segment, and the walk brings numba, whose import alone is about
    # 0.4 s.
    from eos_audit.sources.kafka import segment_walk

    positions, ends, legacy, stop = segment_walk.frames(buf)
    v2 = ~legacy
    found = positions[v2], ends[v2], positions[legacy]
    # Something that is not a whole batch. A preallocated (zero-filled) tail is normal for a copy
    # of an active segment; anything else is reported and the rest of the file skipped (Kafka has
    # no sync marker, so nothing after a framing error can be trusted).
    if stop < 0 or not buf[stop:].any():
        return (*found, None)
    return (*found, _framing_error(mv, stop))


def _framing_error(mv: memoryview, pos: int) -> tuple[int, str, int | None]:
    n = len(mv)
    rem = n - pos
    if rem < LOG_OVERHEAD:
        return (
            pos,
            (
                f"truncated batch header at byte {pos}: only {rem} bytes remain "
                f"(a batch header needs at least {LOG_OVERHEAD}); {rem} bytes skipped"
            ),
            (struct.unpack_from(">q", mv, pos)[0] if rem >= 8 else None),
        )
    base, length = _FRAME.unpack_from(mv, pos)
    size = LOG_OVERHEAD + length
    if rem < 17:
        return (
            pos,
            (f"truncated batch at byte {pos}: header declares {size} bytes, only {rem} remain"),
            base,
        )
    magic = struct.unpack_from(">b", mv, pos + 16)[0]
    if magic not in (0, 1, 2):
        return (
            pos,
            (
                f"unknown magic {magic} at byte {pos}: cannot frame the rest of the file; "
                f"{rem} bytes skipped"
            ),
            None,
        )
    minimum = MIN_V2_BATCH_LENGTH if magic == 2 else MIN_LEGACY_LENGTH[magic]
    if length < minimum:
        return (
            pos,
            (
                f"invalid batch length {length} at byte {pos} (magic {magic} needs at least "
                f"{minimum}): cannot frame the rest of the file; {rem} bytes skipped"
            ),
            None,
        )
    if length > MAX_PLAUSIBLE_BATCH:
        return (
            pos,
            (
                f"invalid batch length {length} at byte {pos}: beyond the end of the file "
                f"({rem} bytes remain); {rem} bytes skipped"
            ),
            None,
        )
    return (
        pos,
        (f"truncated batch at byte {pos}: header declares {size} bytes, only {rem} remain"),
        base,
    )


# ------------------------------------------------------------------------------------------------
# Vectorised decoding
# ------------------------------------------------------------------------------------------------
def _headers(buf: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """The first `width` bytes of each entry, one row each (a copy of `width` bytes per entry)."""
    if len(buf) < width:  # no entry is shorter than its header: then there is none
        return np.empty((0, width), dtype=np.uint8)
    return np.lib.stride_tricks.sliding_window_view(buf, width)[pos]


def _be(hdr: np.ndarray, off: int, dtype: str) -> np.ndarray:
    width = np.dtype(dtype).itemsize
    return np.ascontiguousarray(hdr[:, off : off + width]).view(dtype).ravel()


# Kafka's ControlRecordType by its number: 0 ABORT, 1 COMMIT.
_MARKER_NAMES = pa.array(["ABORT", "COMMIT"], pa.string())


def _control_types(code: np.ndarray, read: np.ndarray) -> pa.Array:
    """`control_type` of each marker type (docs/formats.md#control-batches); null where unread."""
    n = len(code)
    if not read.any():
        return pa.nulls(n, pa.string())
    known = read & ((code == 0) | (code == 1))
    if (known == read).all():  # only ABORT (0) and COMMIT (1): no Python loop over the rows
        return _MARKER_NAMES.take(pa.array(code.astype(np.int32), mask=~known))
    names: list[str | None] = [None] * n
    for i in np.flatnonzero(read).tolist():
        names[i] = _MARKER_NAMES[int(code[i])].as_py() if known[i] else f"UNKNOWN({code[i]})"
    return pa.array(names, pa.string())


def _decode_v2(
    mv: memoryview,
    buf: np.ndarray,
    pos: np.ndarray,
    ends: np.ndarray,
    *,
    topic: str,
    partition: int,
    path: str,
    verify_crc: bool,
    file_id: int | None,
) -> pa.RecordBatch:
    from eos_audit.sources.kafka import segment_walk  # see _frame

    n = len(pos)
    fields = {name: np.empty(n, dtype) for name, dtype in segment_walk.DECODE_V2_OUTPUTS}
    segment_walk.decode_v2(buf, pos, ends, *fields.values())
    attributes = fields.pop("attributes")
    stored_crc = fields.pop("stored_crc")
    code, code_read = fields.pop("control_code"), fields.pop("control_read")
    epoch, epoch_read = fields.pop("coordinator_epoch"), fields.pop("epoch_read")
    cols: dict = {
        **fields,
        "topic": _const_str(topic, n),
        "partition": pa.array(np.full(n, partition, dtype=np.int32)),
        "is_transactional": (attributes & segment_walk.TRANSACTIONAL_FLAG) != 0,
        "is_control": (attributes & segment_walk.CONTROL_FLAG) != 0,
        "control_type": _control_types(code, code_read),
        "coordinator_epoch": pa.array(epoch, pa.int32(), mask=~epoch_read),
        "crc_valid": (
            pa.array(segment_walk.crc_valid(mv, buf, pos, ends, stored_crc)) if verify_crc else None
        ),
    }
    return _batch(_located(cols, path, pos, file_id), n, SEGMENT_ARROW_SCHEMA)


def _decode_legacy(
    mv: memoryview,
    buf: np.ndarray,
    pos: np.ndarray,
    *,
    topic: str,
    partition: int,
    path: str,
    verify_crc: bool,
    file_id: int | None,
) -> pa.RecordBatch:
    """Legacy magic 0/1 entries (docs/formats.md#legacy-entries): counted, no producer fields."""
    n = len(pos)
    hdr = _headers(buf, pos, 26)  # offset, size, crc, magic, attributes, timestamp
    offset = _be(hdr, 0, ">i8")
    size = _be(hdr, 8, ">i4").astype(np.int64)
    magic = hdr[:, 16].astype(np.int32)
    # v1 carries a timestamp after the attributes; v0 has none (Kafka reports NO_TIMESTAMP, -1).
    timestamp = np.where(magic >= 1, _be(hdr, 18, ">i8"), -1)
    minus1 = np.full(n, -1, dtype=np.int64)
    crc_valid = None
    if verify_crc:
        stored = _be(hdr, 12, ">u4").astype(np.uint64)
        computed = np.fromiter(
            (
                zlib.crc32(mv[p + 16 : p + 12 + s])
                for p, s in zip(pos.tolist(), size.tolist(), strict=True)
            ),
            dtype=np.uint64,
            count=n,
        )
        crc_valid = pa.array(computed == stored)
    false = np.zeros(n, dtype=bool)
    cols = {
        "topic": _const_str(topic, n),
        "partition": pa.array(np.full(n, partition, dtype=np.int32)),
        # A (compressed) wrapper's offset is its last inner offset; no base offset exists.
        "base_offset": offset,
        "last_offset": offset,
        "producer_id": minus1,
        "producer_epoch": minus1,
        "base_sequence": minus1,
        "last_sequence": minus1,
        # Kafka's countOrNull() is null for legacy entries.
        "record_count": None,
        "is_transactional": false,
        "is_control": false,
        "partition_leader_epoch": minus1,
        "magic": magic,
        "max_timestamp": timestamp,
        "crc_valid": crc_valid,
    }
    return _batch(_located(cols, path, pos, file_id), n, SEGMENT_ARROW_SCHEMA)


def iter_segment(
    data: bytes | memoryview,
    *,
    topic: str,
    partition: int,
    path: str,
    verify_crc: bool = True,
    chunk_rows: int = CHUNK_ROWS,
    last_segment: bool = False,
    file_id: int | None = None,
) -> Iterator[pa.RecordBatch]:
    """Parse a segment's bytes into Arrow batches of at most `chunk_rows` rows, in file order.

    Args:
        data: the whole content of a `.log` file.
        topic: topic of the partition the segment belongs to.
        partition: partition number.
        path: file path, used in `source` ("<path>:<byte position>").
        verify_crc: verify CRC-32C (v2) / CRC-32 (legacy); `crc_valid` is null when False.
        chunk_rows: maximum rows per yielded batch.
        last_segment: the file is the last segment of its replica: a batch cut at its end is
            reported as TRUNCATED_TAIL.
        file_id: the file's id (row_reference): rows are then located by it and their byte
            position alone, `source` is written for error rows only.

    Yields:
        Arrow batches in `SEGMENT_ARROW_SCHEMA` (`source_row` is the byte position); the last
        row is the framing error, if any.

    """
    mv = memoryview(data).cast("B") if not isinstance(data, bytes) else memoryview(data)
    buf = np.frombuffer(mv, dtype=np.uint8)
    pos, ends, legacy_pos, error = _frame(mv, buf)
    kw = {
        "topic": topic,
        "partition": partition,
        "path": path,
        "verify_crc": verify_crc,
        "file_id": file_id,
    }
    if not len(legacy_pos):
        for i in range(0, len(pos), chunk_rows):
            yield _decode_v2(mv, buf, pos[i : i + chunk_rows], ends[i : i + chunk_rows], **kw)
    else:
        # Mixed formats (a topic upgraded from an old message format): keep file order.
        parts = []
        if len(pos):
            parts.append(_decode_v2(mv, buf, pos, ends, **kw))
        parts.append(_decode_legacy(mv, buf, legacy_pos, **kw))
        order = np.argsort(np.concatenate([pos, legacy_pos]))
        table = pa.Table.from_batches(parts).take(pa.array(order))
        yield from table.to_batches(max_chunksize=chunk_rows)
    if error is not None:
        err_pos, message, base = error
        if last_segment and message.startswith("truncated batch"):
            message = (
                f"{TRUNCATED_TAIL}: a partial batch at the end of the replica's last segment (a "
                f"copy of an active segment; Kafka's recovery truncates it): {message}"
            )
        rows = error_batch(
            topic=topic,
            partition=partition,
            sources=[f"{path}:{err_pos}"],
            errors=[message],
            base_offsets=[base],
        )
        yield _located_errors(rows, file_id, [err_pos])


def parse_segment(
    data: bytes | memoryview,
    *,
    topic: str,
    partition: int,
    path: str,
    verify_crc: bool = True,
) -> pa.Table:
    """Parse the bytes of one `.log` segment into a table in the reader output schema.

    Pure function (no Spark): the reader calls `iter_segment` on executors, tests call this.

    Args:
        data: the whole content of a `.log` file.
        topic: topic of the partition the segment belongs to.
        partition: partition number.
        path: file path, used in `source` ("<path>:<byte position>").
        verify_crc: verify checksums; `crc_valid` is null when False.

    Returns:
        One row per batch/legacy entry in file order, plus a final `_source_error` row when the
        file could not be framed to its end (truncated batch, garbage length, unknown magic).

    """
    batches = list(
        iter_segment(data, topic=topic, partition=partition, path=path, verify_crc=verify_crc)
    )
    table = pa.Table.from_batches(batches, schema=SEGMENT_ARROW_SCHEMA)
    return table.select(ARROW_SCHEMA.names)


# ------------------------------------------------------------------------------------------------
# The format read on the executors
# ------------------------------------------------------------------------------------------------
class KafkaSegmentsFormat(FileFormat):
    """The `kafka_segments` format: whole `.log` files, memory-mapped, packed by size.

    Files: `{"path": ..., "topic": ..., "partition": ...}`, with the file's `file_id`
    (row_reference) when the driver gave it one, `last_segment` and `bytes`.

    Options:
        verify_crc: "true" (default) or "false".
    """

    format_name = FORMAT_NAME
    memory_map = True

    def schema(self) -> T.StructType:
        """The reader output schema (`segment_schema()`)."""
        return segment_schema()

    def parse(self, file: dict, data: bytes | memoryview) -> Iterator[pa.RecordBatch]:
        """The batches of one segment, in file order (`iter_segment`)."""
        yield from iter_segment(
            data,
            topic=file["topic"],
            partition=int(file["partition"]),
            path=file["path"],
            verify_crc=self.options.get("verify_crc", "true").lower() == "true",
            last_segment=bool(file.get("last_segment", False)),
            file_id=file.get("file_id"),
        )

    def unreadable(self, file: dict, reason: str) -> Iterator[pa.RecordBatch]:
        """One error row at byte 0 of the file."""
        rows = error_batch(
            topic=file["topic"],
            partition=int(file["partition"]),
            sources=[f"{file['path']}:0"],
            errors=[f"cannot read segment file: {reason.removeprefix('cannot read file: ')}"],
        )
        yield _located_errors(rows, file.get("file_id"), [0])


def segment_schema() -> T.StructType:
    """The segment reader's schema: `source_schema()` plus `source_file` and `source_row`.

    Returns:
        The Spark schema of `read_segment_files`.

    """
    return source_schema().add(ref.SOURCE_FILE, T.LongType()).add(ref.SOURCE_ROW, T.LongType())


def read_segment_files(
    spark: SparkSession, files: list[dict], *, verify_crc: bool = True
) -> DataFrame:
    """Read explicit `.log` files with known topic/partition on the executors.

    This is the audit's read: a file given a `file_id` (`row_reference.unique_file_ids`) has its
    rows located by that id and their byte position (`source_file`, `source_row`) and no text,
    but for the rows that report an error.

    Args:
        spark: the session.
        files: dicts with `path`, `topic`, `partition`, and optionally `file_id`.
        verify_crc: verify checksums.

    Returns:
        The reader output DataFrame (`segment_schema()`).

    """
    return load_files(
        spark, KafkaSegmentsFormat, files, verify_crc=str(bool(verify_crc)).lower()
    )


def read_segments(spark: SparkSession, paths: list[str], *, verify_crc: bool = True) -> DataFrame:
    """Discover partition directories under `paths` and read every `.log` segment in them.

    Every row is named by its text, `<file>:<byte>`, for people and notebooks; the audit reads
    with `read_segment_files` and writes that text only for the rows it shows.

    Args:
        spark: the session.
        paths: log dirs, partition dirs, export trees (`<export>/<broker>/<topic>-<p>/`) or
            individual `.log` files inside a partition dir.
        verify_crc: verify CRC-32C of every batch (`crc_valid` is null when False).

    Returns:
        `RECORD_BATCH` columns plus `_source_error`, one row per batch, in file order within a
        file.

    Raises:
        InputNotFoundError: a path does not exist or no partition directory was found.

    """
    files = discover_segment_files(paths)
    log.info("reading %d segment files", len(files))
    ids = ref.unique_file_ids(f["path"] for f in files)
    batches = read_segment_files(
        spark, [{**f, "file_id": ids[f["path"]]} for f in files], verify_crc=verify_crc
    )
    names = spark.createDataFrame(
        sorted((file_id, path) for path, file_id in ids.items()),
        f"{ref.SOURCE_FILE} long, {ref.SOURCE_PATH} string",
    )
    named = batches.join(F.broadcast(names), ref.SOURCE_FILE, "left")
    text = ref.source_text(F.col(ref.SOURCE_PATH), F.col(ref.SOURCE_ROW), ref.BYTE_POSITION)
    return named.select(
        *[
            F.coalesce(F.col("source"), text).alias("source", metadata=field.metadata)
            if field.name == "source"
            else F.col(field.name)
            for field in source_schema().fields
        ]
    )
