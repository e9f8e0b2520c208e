"""The records inside one v2 record batch: (offset delta, timestamp delta, key, value) each.

The segment reader decodes batch headers only (docs/formats.md#record-batch-v2); the coordinator
topics need their records too. A record (`DefaultRecord.readFrom`) is: length (varint),
attributes (int8, unused), timestamp delta (varlong), offset delta (varint), key length (varint,
-1 = null) and key, value length (varint, -1 = null) and value, header count (varint) and headers
(key length, key, value length, value each). Varints are zig-zag encoded.

The records section is compressed as a whole when the attributes' bits 0-2 are not 0
(`CompressionType`: 1 gzip, 2 snappy, 3 lz4, 4 zstd). Kafka's coordinators write with
`offsets.topic.compression.codec` (none by default) and the transaction log uncompressed. Each
codec is read as Kafka's Java client writes it:
- gzip: a gzip stream (`GZIPOutputStream`), by the standard library;
- snappy: snappy-java's stream framing (`SnappyOutputStream`): an 8-byte magic (0x82, `SNAPPY`,
  0), two int32 versions, then blocks of an int32 length and one raw snappy block each; a section
  without the magic is one raw snappy block, as `SnappyInputStream` reads it;
- lz4: an LZ4 frame (`Lz4BlockOutputStream`, the frame format with a header checksum Kafka has
  computed rightly since message format v1);
- zstd: a zstd frame (zstd-jni's `ZstdOutputStreamNoFinalizer`).
The last three are decompressed by pyarrow's codecs, on the executor that walks the batch. An
unknown codec raises `CompressionNotDecodedError` rather than yielding nothing.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from eos_audit.sources.kafka.protocol import ProtocolFormatError, ProtocolReader

# Header positions and sizes (docs/formats.md#record-batch-v2).
LENGTH_AT = 8
ATTRIBUTES_AT = 21
RECORD_COUNT_AT = 57
RECORDS_AT = 61
LOG_OVERHEAD = 12
COMPRESSION_MASK = 0x07
COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
# A coordinator batch holds a few kilobytes; a gzip section that inflates past this is damaged or
# hostile, and is refused before it takes the executor's memory.
MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024


class RecordBatchError(ProtocolFormatError):
    """The records of a batch cannot be walked (framing, counts, compression)."""


class CompressionNotDecodedError(RecordBatchError):
    """The batch is compressed with a codec this module does not decompress."""


@dataclass(frozen=True, slots=True)
class BatchRecord:
    """One record of a batch, as framed: offsets and timestamps relative to the batch's base."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None


def _records_bytes(section: bytes, attributes: int) -> bytes:
    codec = attributes & COMPRESSION_MASK
    if codec == 0:
        return section
    if codec == 1:
        return _gunzip(section)
    if codec == 2:
        return _snappy_stream(section)
    if codec in (3, 4):
        return _frame(section, COMPRESSION_NAMES[codec])
    raise CompressionNotDecodedError(f"not decoded: compression unknown codec {codec}")


# How much of a frame is read at a time: a read allocates what it asks for, and most
# coordinator batches inflate to a few kB (a first read of the cap, 64 MiB, took 55-100 us a
# small batch against 10-31 us in chunks).
_FIRST_READ, _NEXT_READS = 64 * 1024, 1 << 20


def _frame(section: bytes, codec: str) -> bytes:
    """An LZ4 or zstd frame's bytes, refused past MAX_DECOMPRESSED_BYTES or cut short."""
    import pyarrow as pa

    chunks, inflated, size = [], 0, _FIRST_READ
    try:
        stream = pa.CompressedInputStream(pa.BufferReader(section), codec)
        while chunk := stream.read(size):
            inflated += len(chunk)
            if inflated > MAX_DECOMPRESSED_BYTES:
                raise RecordBatchError(
                    f"{codec} records inflate past {MAX_DECOMPRESSED_BYTES} bytes"
                )
            chunks.append(chunk)
            size = _NEXT_READS
    except (OSError, pa.ArrowException) as err:
        # pyarrow says "Truncated compressed stream" for a frame cut short.
        raise RecordBatchError(f"{codec} records do not decompress: {err}") from None
    return b"".join(chunks)


# snappy-java's stream header (SnappyCodec): the magic, then its version and the oldest
# version that reads it, both 1.
_SNAPPY_MAGIC = b"\x82SNAPPY\x00"
_SNAPPY_HEADER = len(_SNAPPY_MAGIC) + 8


def _snappy_stream(section: bytes) -> bytes:
    """The bytes of snappy-java's framed stream, or of one raw block without its magic."""
    if not section.startswith(_SNAPPY_MAGIC):
        return _snappy_block(section, 0, len(section))
    if len(section) < _SNAPPY_HEADER:
        raise RecordBatchError("snappy records end inside their stream header (truncated)")
    out, at, total = [], _SNAPPY_HEADER, 0
    while at < len(section):
        if at + 4 > len(section):
            raise RecordBatchError("snappy records end inside a block's length (truncated)")
        size = int.from_bytes(section[at : at + 4], "big", signed=True)
        at += 4
        if size < 0 or at + size > len(section):
            raise RecordBatchError(
                f"snappy block of {size} bytes at {at - 4} does not fit the {len(section)} of "
                "the records (truncated)"
            )
        block = _snappy_block(section, at, at + size)
        total += len(block)
        if total > MAX_DECOMPRESSED_BYTES:
            raise RecordBatchError(f"snappy records inflate past {MAX_DECOMPRESSED_BYTES} bytes")
        out.append(block)
        at += size
    return b"".join(out)


def _snappy_block(section: bytes, start: int, end: int) -> bytes:
    """One raw snappy block: its uncompressed length (a little-endian base-128 varint) first."""
    import pyarrow as pa

    size, shift, at = 0, 0, start
    while True:
        if at >= end or shift > 28:
            raise RecordBatchError("snappy block's length does not decode")
        byte = section[at]
        size |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            break
    if size > MAX_DECOMPRESSED_BYTES:
        raise RecordBatchError(f"snappy records inflate past {MAX_DECOMPRESSED_BYTES} bytes")
    try:
        return pa.Codec("snappy").decompress(section[start:end], size, asbytes=True)
    except (OSError, pa.ArrowException) as err:
        raise RecordBatchError(f"snappy records do not decompress: {err}") from None


def _gunzip(section: bytes) -> bytes:
    # Kafka's GZIPOutputStream writes a standard gzip stream: wbits 16 + 15 reads its header.
    inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(section, MAX_DECOMPRESSED_BYTES)
    except zlib.error as err:
        raise RecordBatchError(f"gzip records do not decompress: {err}") from None
    if inflater.unconsumed_tail:
        raise RecordBatchError(f"gzip records inflate past {MAX_DECOMPRESSED_BYTES} bytes")
    if not inflater.eof:
        raise RecordBatchError("gzip records end before the gzip stream does (truncated)")
    return out


def _nullable_chunk(reader: ProtocolReader, field: str) -> bytes | None:
    size = reader.varint(f"{field} length")
    if size < -1:
        raise ProtocolFormatError(f"{field} length {size} is negative")
    return None if size == -1 else reader.raw(size, field)


def _read_record(reader: ProtocolReader, index: int) -> BatchRecord:
    length = reader.varint("record length")
    if length < 0:
        raise ProtocolFormatError(f"record {index}: negative length {length}")
    body = ProtocolReader(reader.raw(length, f"record {index}"), f"record {index}")
    body.int8("attributes")
    timestamp_delta = body.varlong("timestamp delta")
    offset_delta = body.varint("offset delta")
    key = _nullable_chunk(body, "key")
    value = _nullable_chunk(body, "value")
    headers = body.varint("header count")
    if headers < 0:
        raise ProtocolFormatError(f"record {index}: invalid number of record headers {headers}")
    for _ in range(headers):
        header_key = body.varint("header key length")
        if header_key < 0:
            raise ProtocolFormatError(f"record {index}: negative header key size {header_key}")
        body.raw(header_key, "header key")
        _nullable_chunk(body, "header value")
    # DefaultRecord.readFrom rejects a record whose fields do not fill its length exactly
    # ("Invalid record size: expected to read X bytes in record payload, but instead read Y").
    body.expect_end()
    return BatchRecord(offset_delta, timestamp_delta, key, value)


def walk_records(section: bytes, attributes: int, record_count: int) -> Iterator[BatchRecord]:
    """The records of a v2 batch's records section, in order.

    Args:
        section: the batch's bytes from RECORDS_AT (61) to its end.
        attributes: the batch's attributes (int16 at byte 21): bits 0-2 give the compression.
        record_count: the header's record count (int32 at byte 57).

    Yields:
        Each record's offset delta, timestamp delta, key and value (None when null).

    Raises:
        CompressionNotDecodedError: for an unknown codec (5 to 7).
        RecordBatchError: when a record is truncated or malformed, when fewer records than the
            count are found, or when bytes remain after the last one.
    """
    if record_count < 0:
        raise RecordBatchError(f"negative record count {record_count}")
    reader = ProtocolReader(_records_bytes(section, attributes), "records")
    for index in range(record_count):
        try:
            yield _read_record(reader, index)
        except ProtocolFormatError as err:
            raise RecordBatchError(f"record {index} of {record_count}: {err.reason}") from None
    if reader.remaining:
        # DefaultRecordBatch: "Incorrect declared batch size, records still remaining in file".
        raise RecordBatchError(f"{reader.remaining} bytes remain after {record_count} records")


def walk_batch(batch: bytes) -> Iterator[BatchRecord]:
    """The records of one whole v2 batch (from its base offset to its last byte).

    Args:
        batch: the batch's bytes, as a segment holds them.

    Yields:
        Each record, as `walk_records` does.

    Raises:
        RecordBatchError: when the batch is shorter than its header or its length field says.
    """
    header = ProtocolReader(batch, "batch")
    try:
        header.raw(LENGTH_AT, "base offset")
        length = header.int32("batch length")
        header.raw(ATTRIBUTES_AT - LENGTH_AT - 4, "leader epoch, magic, crc")
        attributes = header.int16("attributes")
        header.raw(RECORD_COUNT_AT - ATTRIBUTES_AT - 2, "header")
        record_count = header.int32("record count")
    except ProtocolFormatError as err:
        raise RecordBatchError(err.reason) from None
    end = LOG_OVERHEAD + length
    if end < RECORDS_AT or end > len(batch):
        raise RecordBatchError(f"batch length {length} does not fit its {len(batch)} bytes")
    yield from walk_records(batch[RECORDS_AT:end], attributes, record_count)
