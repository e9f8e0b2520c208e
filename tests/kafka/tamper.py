"""Changes to real segment files, as corruption, a bad copy or a broker bug would make them.

Each works on the batches of one `.log` file by their framing (base offset at 0, length at 8,
CRC-32C at 17 over the bytes from the attributes at 21 to the end: the RecordBatch v2 header).
"""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import crc32c

from tests.fixtures.segment_builder import kafka_python_view, split_entries
from tests.jars import JarSet


def batches(segment: Path) -> list[tuple[int, bytes, dict]]:
    """(position, bytes, kafka-python's view) of each batch of `segment`."""
    entries = split_entries(segment.read_bytes())
    return [(pos, entry, kafka_python_view(entry)) for pos, entry in entries]


def restamped(entry: bytes, base_offset: int) -> bytes:
    """`entry` moved to `base_offset`, its CRC computed again (as a broker appending it would)."""
    body = bytearray(entry)
    struct.pack_into(">q", body, 0, base_offset)
    struct.pack_into(">I", body, 17, crc32c.crc32c(bytes(body[21:])))
    return bytes(body)


def remove_batch(segment: Path, position: int) -> None:
    """Cut the batch at `position` out of `segment`: its offsets and sequences are gone."""
    data = segment.read_bytes()
    size = 12 + struct.unpack_from(">i", data, position + 8)[0]
    segment.write_bytes(data[:position] + data[position + size :])


def append(segment: Path, entry: bytes) -> None:
    """Append `entry` (already restamped) at the end of `segment`."""
    with segment.open("ab") as out:
        out.write(entry)


def flip_byte(segment: Path, position: int) -> None:
    """Invert one byte of `segment` (inside a batch's records: only its CRC can tell)."""
    data = bytearray(segment.read_bytes())
    data[position] ^= 0xFF
    segment.write_bytes(bytes(data))


def next_offset(segment: Path) -> int:
    """The offset after the last batch of `segment`."""
    return batches(segment)[-1][2]["last_offset"] + 1


# The one record of a control batch (docs/formats.md#control-batches) after the v2 header: its
# length, attributes, timestamp delta, offset delta and key length (five one-byte varints for a
# marker), then the key, version int16 and type int16 (0 ABORT, 1 COMMIT).
MARKER_TYPE_AT = 61 + 5 + 2
MARKER_TYPES = {"ABORT": 0, "COMMIT": 1}


def recompress(jars: JarSet, classes: Path, codec: str, segment: Path) -> None:
    """Write `segment` again, its data batches compressed with `codec` (gzip, snappy, lz4, zstd)
    by Kafka's own record writer (`RecompressedSegments.java`, compiled into `classes` against
    `jars`): the bytes a broker writes with that codec, as `offsets.topic.compression.codec` has
    the group coordinator write `__consumer_offsets`."""
    copy = segment.with_suffix(f".{codec}")
    subprocess.run(
        ["java", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
         "-cp", f"{classes}:{jars.classpath()}", "RecompressedSegments", codec,
         str(segment), str(copy)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    copy.replace(segment)


def rewrite_marker(segment: Path, position: int, control_type: str) -> None:
    """Make the transaction marker at `position` of `segment` say `control_type` (ABORT or
    COMMIT), its CRC computed again: a marker that lies about its transaction's outcome."""
    data = bytearray(segment.read_bytes())
    size = 12 + struct.unpack_from(">i", data, position + 8)[0]
    entry = bytearray(data[position : position + size])
    if not struct.unpack_from(">h", entry, 21)[0] & 0x20 or entry[65] != 8:
        raise ValueError(f"no transaction marker at byte {position} of {segment}")
    struct.pack_into(">h", entry, MARKER_TYPE_AT, MARKER_TYPES[control_type])
    base_offset = struct.unpack_from(">q", entry, 0)[0]
    data[position : position + size] = restamped(bytes(entry), base_offset)
    segment.write_bytes(bytes(data))


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """The zigzag varint at `at` of `data` and the position after it (the records' encoding)."""
    shift = raw = 0
    while True:
        byte = data[at]
        raw, at, shift = raw | (byte & 0x7F) << shift, at + 1, shift + 7
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), at


def record_values(segment: Path) -> list[tuple[int, int, bytes, bytes]]:
    """(batch position, value position, key, value) of each record with a value in the
    uncompressed data batches of `segment`, positions in the file: coordinator records, which
    the coordinators write uncompressed."""
    data = segment.read_bytes()
    out = []
    for position, entry in split_entries(data):
        attributes = struct.unpack_from(">h", entry, 21)[0]
        if attributes & 0x20 or attributes & 0x07:
            continue  # a control batch, or a compressed one: no coordinator record
        at = 61
        for _ in range(struct.unpack_from(">i", entry, 57)[0]):
            length, at = _varint(entry, at)
            end = at + length
            at += 1  # attributes
            for _field in range(2):  # timestamp delta, offset delta
                _, at = _varint(entry, at)
            key_length, at = _varint(entry, at)
            key = entry[at : at + max(key_length, 0)]
            value_length, at = _varint(entry, at + max(key_length, 0))
            if value_length >= 0:
                out.append((position, position + at, key, entry[at : at + value_length]))
            at = end
    return out


# A `__transaction_state` value (TransactionLogValue, every version): its version int16, then the
# producer id int64 and the producer epoch int16.
TRANSACTION_PRODUCER_ID_AT, TRANSACTION_PRODUCER_EPOCH_AT = 2, 2 + 8


def rewrite_transaction_state(
    segment: Path, batch: int, value: int, *, producer_id: int | None = None,
    epoch: int | None = None,
) -> None:  # fmt: skip
    """Give the `__transaction_state` record whose value starts at byte `value` of `segment` (in
    the batch at byte `batch`) another producer id or epoch, its batch's CRC computed again: a
    transaction log that says its transactional id was given another producer than it was."""
    data = bytearray(segment.read_bytes())
    if producer_id is not None:
        struct.pack_into(">q", data, value + TRANSACTION_PRODUCER_ID_AT, producer_id)
    if epoch is not None:
        struct.pack_into(">h", data, value + TRANSACTION_PRODUCER_EPOCH_AT, epoch)
    size = 12 + struct.unpack_from(">i", data, batch + 8)[0]
    entry = bytes(data[batch : batch + size])
    data[batch : batch + size] = restamped(entry, struct.unpack_from(">q", entry, 0)[0])
    segment.write_bytes(bytes(data))
