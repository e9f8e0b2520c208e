"""Small generated exports as Kafka writes them: partition directories and dump-log text.

This is the small-size path of `eos-audit generate --files` (at most
`command.FILES_MAX_BATCHES` batches): the generated batches are brought to the driver one
partition after the other and written as RecordBatch v2 bytes (docs/formats.md#record-batch-v2)
into `<output>/segments/0/<topic>-<partition>/<base offset>.log`, and as the text
`kafka-dump-log.sh --deep-iteration` prints for them (Kafka 3.x layout,
docs/formats.md#dump-log) into `<output>/dump-log/<topic>-<partition>.txt`. Both read back through
eos-audit's own readers to the same batches as the Parquet export.

The bytes are built here rather than by a Kafka client library, which the package does not depend
on: record payloads are a few filler bytes (the audit never reads them), control batches carry
the marker record of docs/formats.md#control-batches, and the CRC-32C is computed as a broker
does (from the attributes to the end of the batch).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path

import crc32c
from pyspark.sql import SparkSession

from eos_audit.generate.spark_export import GeneratedExport

SEGMENT_BATCHES = 2_000  # batches per segment file: exports of a few thousand batches roll
BROKER = "0"
_VALUE = b"generated"


@dataclass(frozen=True)
class WrittenFiles:
    """Where the files went."""

    segments: Path
    dump_log: Path


def _varint(value: int) -> bytes:
    """Zig-zag varint (Kafka's ByteUtils.writeVarint / writeVarlong)."""
    z = (value << 1) ^ (value >> 63)
    out = bytearray()
    while z & ~0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes) -> bytes:
    body = (
        b"\x00"  # attributes
        + _varint(timestamp_delta)
        + _varint(offset_delta)
        + (_varint(-1) if key is None else _varint(len(key)) + key)
        + _varint(len(value))
        + value
        + _varint(0)  # headers
    )
    return _varint(len(body)) + body


def batch_bytes(row: dict) -> bytes:
    """One RecordBatch v2 for a canonical batch row (schemas/record_batch.json)."""
    count = row["record_count"]
    span = row["last_offset"] - row["base_offset"]
    max_ts = row["max_timestamp"]
    if row["is_control"]:
        marker_type = 1 if row["control_type"] == "COMMIT" else 0
        key = struct.pack(">hh", 0, marker_type)
        value = struct.pack(">hi", 0, row["coordinator_epoch"])
        records = [_record(0, 0, key, value)]
        base_ts = max_ts
    else:
        base_ts = max_ts - span
        records = [_record(i, i, None, _VALUE) for i in range(count)]
    attributes = (0x10 if row["is_transactional"] else 0) | (0x20 if row["is_control"] else 0)
    after_crc = struct.pack(
        ">hiqqqhii",
        attributes,
        span,
        base_ts,
        max_ts,
        row["producer_id"],
        row["producer_epoch"],
        row["base_sequence"],
        len(records),
    ) + b"".join(records)
    crc = crc32c.crc32c(after_crc)
    header = struct.pack(
        ">qiibI",
        row["base_offset"],
        4 + 1 + 4 + len(after_crc),  # batch length: from the leader epoch on
        row["partition_leader_epoch"],
        2,
        crc,
    )
    return header + after_crc


def dump_lines(row: dict, position: int, data: bytes) -> list[str]:
    """What `kafka-dump-log.sh --deep-iteration` (3.x) prints for one batch."""
    crc = struct.unpack_from(">I", data, 17)[0]
    flag = "true" if row["is_transactional"] else "false"
    control = "true" if row["is_control"] else "false"
    lines = [
        f"baseOffset: {row['base_offset']} lastOffset: {row['last_offset']} "
        f"count: {1 if row['is_control'] else row['record_count']} "
        f"baseSequence: {row['base_sequence']} lastSequence: {row['last_sequence']} "
        f"producerId: {row['producer_id']} producerEpoch: {row['producer_epoch']} "
        f"partitionLeaderEpoch: {row['partition_leader_epoch']} isTransactional: {flag} "
        f"isControl: {control} deleteHorizonMs: OptionalLong.empty position: {position} "
        f"CreateTime: {row['max_timestamp']} size: {len(data)} magic: 2 compresscodec: none "
        f"crc: {crc} isvalid: true"
    ]
    if row["is_control"]:
        lines.append(
            f"| offset: {row['base_offset']} CreateTime: {row['max_timestamp']} keySize: 4 "
            f"valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: {row['control_type']} "
            f"coordinatorEpoch: {row['coordinator_epoch']}"
        )
    return lines


def _partition_rows(spark: SparkSession, export: GeneratedExport) -> Iterator[tuple[tuple, list]]:
    """The generated batches, one partition at a time, in offset order (the small path)."""
    df = spark.read.parquet(str(export.batches)).orderBy("topic", "partition", "base_offset")
    rows = (r.asDict() for r in df.toLocalIterator())
    for key, group in groupby(rows, key=lambda r: (r["topic"], r["partition"])):
        yield key, list(group)


def write_files(spark: SparkSession, export: GeneratedExport) -> WrittenFiles:
    """Write the export's batches as partition directories and as dump-log text.

    Args:
        spark: the session.
        export: a generated export (its Parquet batches are read back).

    Returns:
        The segments root (audit it with `--batches-format segments`) and the dump-log folder.
    """
    segments_root = export.directory / "segments"
    dump_root = export.directory / "dump-log"
    dump_root.mkdir(parents=True, exist_ok=True)
    for (topic, partition), rows in _partition_rows(spark, export):
        pdir = segments_root / BROKER / f"{topic}-{partition}"
        pdir.mkdir(parents=True, exist_ok=True)
        text: list[str] = []
        for start in range(0, len(rows), SEGMENT_BATCHES):
            chunk = rows[start : start + SEGMENT_BATCHES]
            path = pdir / f"{chunk[0]['base_offset']:020d}.log"
            text += [f"Dumping {path}", f"Log starting offset: {chunk[0]['base_offset']}"]
            position = 0
            with path.open("wb") as segment:
                for row in chunk:
                    data = batch_bytes(row)
                    segment.write(data)
                    text += dump_lines(row, position, data)
                    position += len(data)
        (dump_root / f"{topic}-{partition}.txt").write_text("\n".join(text) + "\n")
    return WrittenFiles(segments=segments_root, dump_log=dump_root)
