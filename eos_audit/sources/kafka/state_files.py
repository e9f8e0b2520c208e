"""Partition directories of exported Kafka logs: discovery, producer snapshots and checkpoints.

Layout (docs/formats.md#partition-directory): `<log.dir>/<topic>-<partition>/` holds the segments
(`<20-digit base offset>.log`), producer snapshots (`.snapshot`, docs/formats.md#producer-snapshot)
and the `leader-epoch-checkpoint` (docs/formats.md#checkpoint-files); the log dir itself holds the
text checkpoints `log-start-offset-checkpoint`, `replication-offset-checkpoint` (high watermarks)
and `recovery-point-offset-checkpoint`. An export is usually `<export>/<broker-id>/<topic>-<p>/`,
so the folder above a partition dir names the replica.

Discovery runs on the driver (it lists directories, it reads no data). Every file is read on the
executors in the `kafka_partition_files` format (`file_source`): snapshots are decoded with one
numpy structured view per file, checkpoint lines with pyarrow.compute regular expressions.

Readers of these files return a `FileRead(data, problems)` pair: `data` the parsed rows, `problems`
one `(source, reason)` row per file or line that could not be used (corrupt snapshot, malformed
checkpoint line). Nothing raises on bad content.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

import crc32c
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eos_audit.schemas import PRODUCER_STATE, SEED_BATCH
from eos_audit.sources.files import filesystems as fsys
from eos_audit.sources.files.arrow_text import parse_int
from eos_audit.sources.files.file_source import FileFormat, load_files
from eos_audit.sources.kafka.partition_dirs import (  # noqa: F401 (re-exported for callers)
    PartitionDir,
    discover_partition_dirs,
    discover_segment_files,
    log_dir_files,
    partition_files,
)
from eos_audit.sources.kafka.segments import decrement_sequence

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

FORMAT_NAME = "kafka_partition_files"
PROBLEM_COL = "_problem"

_SNAPSHOT = re.compile(r"^(\d{20})\.snapshot$")
LEADER_EPOCH_FILE = "leader-epoch-checkpoint"
OFFSET_CHECKPOINTS = {
    "log-start-offset-checkpoint": "log_start",
    "replication-offset-checkpoint": "high_watermark",
    "recovery-point-offset-checkpoint": "recovery_point",
}

SNAPSHOT_VERSION = 1
SNAPSHOT_HEADER = 10
SNAPSHOT_ENTRY = 46
_SNAPSHOT_DTYPE = np.dtype(
    [
        ("producer_id", ">i8"),
        ("epoch", ">i2"),
        ("last_sequence", ">i4"),
        ("last_offset", ">i8"),
        ("offset_delta", ">i4"),
        ("timestamp", ">i8"),
        ("coordinator_epoch", ">i4"),
        ("txn_first_offset", ">i8"),
    ]
)
assert _SNAPSHOT_DTYPE.itemsize == SNAPSHOT_ENTRY


class FileRead(NamedTuple):
    """A parsed file family: usable rows and the problems met (`source`, `reason`)."""

    data: DataFrame
    problems: DataFrame


# ------------------------------------------------------------------------------------------------
# Output schemas
# ------------------------------------------------------------------------------------------------
def _nullable(schema: T.StructType) -> list[T.StructField]:
    return [T.StructField(f.name, f.dataType, True, f.metadata) for f in schema.fields]


SNAPSHOT_SCHEMA = T.StructType(
    [
        *_nullable(PRODUCER_STATE),
        T.StructField("snapshot_offset", T.LongType(), True),
        T.StructField("replica", T.StringType(), True),
    ]
)
LEADER_EPOCH_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType(), True),
        T.StructField("partition", T.IntegerType(), True),
        T.StructField("replica", T.StringType(), True),
        T.StructField("leader_epoch", T.IntegerType(), True),
        T.StructField("start_offset", T.LongType(), True),
        T.StructField("source", T.StringType(), True),
    ]
)
OFFSET_CHECKPOINT_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType(), True),
        T.StructField("partition", T.IntegerType(), True),
        T.StructField("replica", T.StringType(), True),
        T.StructField("kind", T.StringType(), True),
        T.StructField("offset", T.LongType(), True),
        T.StructField("source", T.StringType(), True),
    ]
)
_SCHEMAS = {
    "snapshot": SNAPSHOT_SCHEMA,
    "leader_epoch": LEADER_EPOCH_SCHEMA,
    "offset_checkpoint": OFFSET_CHECKPOINT_SCHEMA,
}

# The seed batch struct as the contract declares it (names, types and nullability), so the
# snapshot reader returns exactly the schema Spark expects.
_ARROW_SEED_BATCH = pa.struct(
    [
        pa.field(
            f.name,
            pa.int32() if isinstance(f.dataType, T.IntegerType) else pa.int64(),
            nullable=f.nullable,
        )
        for f in SEED_BATCH.fields
    ]
)


def _arrow_type(dt: T.DataType) -> pa.DataType:
    if isinstance(dt, T.StringType):
        return pa.string()
    if isinstance(dt, T.IntegerType):
        return pa.int32()
    if isinstance(dt, T.LongType):
        return pa.int64()
    if isinstance(dt, T.ArrayType):
        return pa.list_(pa.field("element", _ARROW_SEED_BATCH, nullable=dt.containsNull))
    raise TypeError(dt)


def _arrow_schema(kind: str) -> pa.Schema:
    fields = [pa.field(f.name, _arrow_type(f.dataType)) for f in _SCHEMAS[kind].fields]
    return pa.schema([*fields, pa.field(PROBLEM_COL, pa.string())])


def _rows(kind: str, n: int, cols: dict) -> pa.RecordBatch:
    schema = _arrow_schema(kind)
    arrays = []
    for field in schema:
        v = cols.get(field.name)
        if v is None:
            arrays.append(pa.nulls(n, field.type))
        elif isinstance(v, pa.Array):
            arrays.append(v if v.type == field.type else v.cast(field.type))
        elif isinstance(v, np.ndarray):
            arrays.append(pa.array(v, field.type))
        else:  # a scalar repeated
            arrays.append(pa.array([v] * n, field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _problem(schema_kind: str, source: str, reason: str, **known) -> pa.RecordBatch:
    return _rows(schema_kind, 1, {**known, "source": source, PROBLEM_COL: reason})


# ------------------------------------------------------------------------------------------------
# Parsers (pure; executors)
# ------------------------------------------------------------------------------------------------
def parse_snapshot(
    data: bytes, *, path: str, topic: str, partition: int, replica: str
) -> pa.RecordBatch:
    """Decode one `.snapshot` file (docs/formats.md#producer-snapshot) into producer-state rows.

    A corrupt file (unknown version, CRC mismatch, size not 10 + 46·N, bad name) gives a single
    row with `_problem` set and no entries, as Kafka drops such a snapshot entirely.

    Args:
        data: file content.
        path: file path (`source` is "<path>:<byte position of the entry>").
        topic: topic of the partition dir.
        partition: partition of the partition dir.
        replica: replica name of the partition dir.

    Returns:
        Rows in the snapshot schema plus `_problem`.

    """
    known = {"topic": topic, "partition": partition, "replica": replica}
    m = _SNAPSHOT.match(fsys.basename(path))
    if not m:
        return _problem("snapshot", path, "file name is not <20-digit offset>.snapshot", **known)
    snap_offset = int(m.group(1))
    # The file name is the exclusive end offset of the state (docs/formats.md#producer-snapshot).
    known["snapshot_offset"] = snap_offset
    known["state_offset"] = snap_offset
    size = len(data)
    if size < SNAPSHOT_HEADER:
        return _problem(
            "snapshot", path, f"corrupt snapshot: {size} bytes, shorter than the header", **known
        )
    version = int.from_bytes(data[0:2], "big", signed=True)
    if version != SNAPSHOT_VERSION:
        return _problem(
            "snapshot", path, f"corrupt snapshot: unknown file version {version}", **known
        )
    stored = int.from_bytes(data[2:6], "big")
    computed = crc32c.crc32c(data[6:])
    if stored != computed:
        return _problem(
            "snapshot",
            path,
            f"corrupt snapshot: CRC is not valid (stored {stored}, computed {computed})",
            **known,
        )
    count = int.from_bytes(data[6:10], "big", signed=True)
    if count < 0 or size != SNAPSHOT_HEADER + SNAPSHOT_ENTRY * count:
        return _problem(
            "snapshot",
            path,
            f"corrupt snapshot: {size} bytes for {count} entries "
            f"(expected {SNAPSHOT_HEADER} + {SNAPSHOT_ENTRY} x {count})",
            **known,
        )
    e = np.frombuffer(data, dtype=_SNAPSHOT_DTYPE, offset=SNAPSHOT_HEADER, count=count)
    last_offset = e["last_offset"].astype(np.int64)
    delta = e["offset_delta"].astype(np.int64)
    last_seq = e["last_sequence"].astype(np.int64)
    has_batch = last_offset >= 0
    idx = np.flatnonzero(has_batch)
    batch_struct = pa.StructArray.from_arrays(
        [
            pa.array(decrement_sequence(last_seq[idx], delta[idx]).astype(np.int32)),
            pa.array(last_seq[idx].astype(np.int32)),
            pa.array(last_offset[idx] - delta[idx]),
            pa.array(last_offset[idx]),
        ],
        fields=list(_ARROW_SEED_BATCH),
    )
    offsets = np.concatenate([[0], np.cumsum(has_batch)]).astype(np.int32)
    batches = pa.ListArray.from_arrays(
        pa.array(offsets), batch_struct, type=_arrow_type(T.ArrayType(SEED_BATCH))
    )
    coord = e["coordinator_epoch"].astype(np.int32)
    txn = e["txn_first_offset"].astype(np.int64)
    positions = SNAPSHOT_HEADER + SNAPSHOT_ENTRY * np.arange(count, dtype=np.int64)
    sources = pc.binary_join_element_wise(
        pa.array([path + ":"] * count, pa.string()), pc.cast(pa.array(positions), pa.string()), ""
    )
    return _rows(
        "snapshot",
        count,
        {
            **known,
            "producer_id": e["producer_id"].astype(np.int64),
            "producer_epoch": e["epoch"].astype(np.int32),
            "coordinator_epoch": pa.array(coord, mask=coord == -1),
            "txn_first_offset": pa.array(txn, mask=txn < 0),
            "last_timestamp": e["timestamp"].astype(np.int64),
            "batches": batches,
            "source": sources,
        },
    )


def _lines(data: bytes) -> list[str]:
    lines = data.decode("utf-8", errors="replace").split("\n")
    # Kafka writes a newline after the last entry: the empty string after it is not a line.
    if lines and lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]


def _parse_checkpoint(
    data: bytes, *, path: str, entry_regex: str, kind: str, known: dict
) -> list[pa.RecordBatch]:
    """Common part of Kafka's text checkpoints: version `0`, entry count, then entry lines."""
    lines = _lines(data)
    out: list[pa.RecordBatch] = []
    if len(lines) < 2:
        return [_problem(kind, path, "checkpoint file has no version and count lines", **known)]
    if lines[0].strip() != "0":
        return [_problem(kind, f"{path}:line 1", "unsupported checkpoint version", **known)]
    if not re.fullmatch(r"[0-9]+", lines[1].strip()):
        return [_problem(kind, f"{path}:line 2", "entry count is not a number", **known)]
    declared = int(lines[1].strip())
    body = pa.array(lines[2:], pa.string())
    n = len(body)
    line_no = pa.array(np.arange(3, 3 + n, dtype=np.int64))
    sources = pc.binary_join_element_wise(
        pa.array([path + ":line "] * n, pa.string()), pc.cast(line_no, pa.string()), ""
    )
    parsed = pc.extract_regex(body, entry_regex)
    # A line whose numbers do not fit their fields is malformed too (never a failed cast).
    ok = pc.is_valid(parsed)
    for field, typ in _CHECKPOINT_INTS[kind].items():
        _, too_big = parse_int(pc.struct_field(parsed, field), typ)
        ok = pc.and_(ok, pc.invert(pc.fill_null(too_big, False)))
    ok = pc.fill_null(ok, False)
    good = pc.filter(parsed, ok)
    bad_sources = pc.filter(sources, pc.invert(ok))
    if len(bad_sources):
        out.append(
            _rows(
                kind,
                len(bad_sources),
                {
                    **known,
                    "source": bad_sources,
                    PROBLEM_COL: pa.array(
                        ["malformed checkpoint line"] * len(bad_sources), pa.string()
                    ),
                },
            )
        )
    if declared != n:
        out.append(
            _problem(
                kind,
                f"{path}:line 2",
                f"checkpoint declares {declared} entries but holds {n} lines",
                **known,
            )
        )
    out.insert(0, _entry_rows(kind, good, pc.filter(sources, ok), known))
    return out


# The numeric fields of each checkpoint's entry lines and their types.
_CHECKPOINT_INTS = {
    "leader_epoch": {"epoch": pa.int32(), "offset": pa.int64()},
    "offset_checkpoint": {"partition": pa.int32(), "offset": pa.int64()},
}


def _entry_rows(kind: str, good: pa.StructArray, sources: pa.Array, known: dict) -> pa.RecordBatch:
    n = len(good)
    ints = {f: parse_int(good.field(f), typ)[0] for f, typ in _CHECKPOINT_INTS[kind].items()}
    if kind == "leader_epoch":
        return _rows(
            kind,
            n,
            {
                **known,
                "leader_epoch": ints["epoch"],
                "start_offset": ints["offset"],
                "source": sources,
            },
        )
    return _rows(
        kind,
        n,
        {
            **known,
            "topic": good.field("topic"),
            "partition": ints["partition"],
            "offset": ints["offset"],
            "source": sources,
        },
    )


def parse_leader_epoch_checkpoint(
    data: bytes, *, path: str, topic: str, partition: int, replica: str
) -> list[pa.RecordBatch]:
    """Decode a `leader-epoch-checkpoint`: `0`, count, `<epoch> <startOffset>` lines.

    See docs/formats.md#checkpoint-files.

    Args:
        data: file content.
        path: file path.
        topic: topic of the partition dir.
        partition: partition of the partition dir.
        replica: replica name of the partition dir.

    Returns:
        Arrow batches in the leader-epoch schema plus `_problem`.

    """
    known = {"topic": topic, "partition": partition, "replica": replica}
    return _parse_checkpoint(
        data,
        path=path,
        entry_regex=r"^(?P<epoch>\d{1,10}) (?P<offset>\d{1,19})$",
        kind="leader_epoch",
        known=known,
    )


def parse_offset_checkpoint(
    data: bytes, *, path: str, replica: str, checkpoint_kind: str
) -> list[pa.RecordBatch]:
    """Decode a log-dir level offset checkpoint: `0`, count, `<topic> <partition> <offset>` lines.

    Args:
        data: file content.
        path: file path.
        replica: name of the log dir (the replica).
        checkpoint_kind: 'log_start', 'high_watermark' or 'recovery_point'.

    Returns:
        Arrow batches in the offset-checkpoint schema plus `_problem`.

    """
    return _parse_checkpoint(
        data,
        path=path,
        entry_regex=r"^(?P<topic>[A-Za-z0-9._-]+) (?P<partition>\d{1,10}) (?P<offset>-?\d{1,19})$",
        kind="offset_checkpoint",
        known={"replica": replica, "kind": checkpoint_kind},
    )


# ------------------------------------------------------------------------------------------------
# The format read on the executors
# ------------------------------------------------------------------------------------------------
class KafkaPartitionFilesFormat(FileFormat):
    """The `kafka_partition_files` format: snapshots and checkpoints.

    Files: dicts with `path` and the known `topic`, `partition`, `replica` (and
    `checkpoint_kind` for offset checkpoints).

    Options:
        kind: 'snapshot', 'leader_epoch' or 'offset_checkpoint'.
    """

    format_name = FORMAT_NAME

    def schema(self) -> T.StructType:
        """The schema of the requested kind plus `_problem`."""
        base = _SCHEMAS[self.options["kind"]]
        return T.StructType([*base.fields, T.StructField(PROBLEM_COL, T.StringType(), True)])

    def parse(self, file: dict, data: bytes | memoryview) -> Iterator[pa.RecordBatch]:
        """The rows of one snapshot or checkpoint file."""
        kind, path, data = self.options["kind"], file["path"], bytes(data)
        if kind == "snapshot":
            yield parse_snapshot(
                data, path=path, topic=file["topic"], partition=file["partition"],
                replica=file["replica"],
            )  # fmt: skip
        elif kind == "leader_epoch":
            yield from parse_leader_epoch_checkpoint(
                data, path=path, topic=file["topic"], partition=file["partition"],
                replica=file["replica"],
            )  # fmt: skip
        else:
            yield from parse_offset_checkpoint(
                data, path=path, replica=file["replica"], checkpoint_kind=file["checkpoint_kind"]
            )

    def unreadable(self, file: dict, reason: str) -> Iterator[pa.RecordBatch]:
        """One problem row naming the file."""
        known = {k: file[k] for k in ("topic", "partition", "replica") if k in file}
        yield _problem(self.options["kind"], file["path"], reason, **known)


def _load(spark: SparkSession, kind: str, files: list[dict]) -> FileRead:
    df = load_files(spark, KafkaPartitionFilesFormat, files, kind=kind)
    data = df.filter(F.col(PROBLEM_COL).isNull()).select(*_SCHEMAS[kind].fieldNames())
    problems = df.filter(F.col(PROBLEM_COL).isNotNull()).select(
        "source", F.col(PROBLEM_COL).alias("reason")
    )
    return FileRead(data, problems)


def read_snapshots(spark: SparkSession, partition_dirs: list[PartitionDir]) -> FileRead:
    """Read every producer `.snapshot` of the given partition dirs.

    Args:
        spark: the session.
        partition_dirs: from `discover_partition_dirs`.

    Returns:
        `FileRead(data, problems)`: `data` has the `PRODUCER_STATE` columns (all nullable) plus
        `snapshot_offset` (exclusive end offset from the file name) and `replica`, one row per
        producer entry; `problems` has `(source, reason)` per corrupt snapshot.

    """
    files = []
    for pd in partition_dirs:
        for name in sorted(partition_files(pd)):
            if name.endswith(".snapshot"):
                files.append(
                    {
                        "path": fsys.join(pd.path, name),
                        "topic": pd.topic,
                        "partition": pd.partition,
                        "replica": pd.replica,
                    }
                )
    return _load(spark, "snapshot", files)


def read_snapshot_files(spark: SparkSession, files: list[dict]) -> FileRead:
    """Read chosen `.snapshot` files (dicts with path, topic, partition, replica).

    Returns:
        As `read_snapshots`.
    """
    return _load(spark, "snapshot", files)


def read_leader_epoch_checkpoints(
    spark: SparkSession, partition_dirs: list[PartitionDir]
) -> FileRead:
    """Read the `leader-epoch-checkpoint` of each partition dir that has one.

    Args:
        spark: the session.
        partition_dirs: from `discover_partition_dirs`.

    Returns:
        `FileRead(data, problems)`: `data` has (topic, partition, replica, leader_epoch int,
        start_offset long, source "<path>:line <n>"); `problems` has `(source, reason)`.

    """
    files = [
        {
            "path": fsys.join(pd.path, LEADER_EPOCH_FILE),
            "topic": pd.topic,
            "partition": pd.partition,
            "replica": pd.replica,
        }
        for pd in partition_dirs
        if LEADER_EPOCH_FILE in partition_files(pd)
    ]
    return _load(spark, "leader_epoch", files)


def read_offset_checkpoints(spark: SparkSession, partition_dirs: list[PartitionDir]) -> FileRead:
    """Read the log-dir level offset checkpoints of the log dirs holding `partition_dirs`.

    Every entry of each file is returned (also partitions that were not exported), so callers
    join on (topic, partition, replica).

    Args:
        spark: the session.
        partition_dirs: from `discover_partition_dirs`.

    Returns:
        `FileRead(data, problems)`: `data` has (topic, partition, replica, kind in
        {'log_start', 'high_watermark', 'recovery_point'}, offset long, source); `problems`
        has `(source, reason)`.

    """
    files = []
    by_log_dir = {(pd.log_dir, pd.replica): pd for pd in partition_dirs}
    for (log_dir, replica), pd in sorted(by_log_dir.items()):
        present = log_dir_files(pd)
        for name, kind in OFFSET_CHECKPOINTS.items():
            if name in present:
                path = fsys.join(log_dir, name)
                files.append({"path": path, "replica": replica, "checkpoint_kind": kind})
    return _load(spark, "offset_checkpoint", files)
