"""The one base of eos-audit's file readers: files in, Arrow record batches out.

Every reader of a file format Spark does not know (Kafka `.log` segments, producer snapshots and
checkpoints, `kafka-dump-log.sh` text, numbered text lines) is the same Spark query: the driver
lists the files and packs them into groups, `spark.range(groups)` makes one Spark partition of
each group, and a `mapInArrow` on the executors reads each group's files and turns each file's
bytes into Arrow batches with a pure parser. A subclass of `FileFormat` says only how one file is
parsed and what an unreadable file becomes.

Why `mapInArrow` and not a Spark 4 Python data source (what the readers were before): the same
Arrow batches cost the JVM more per row from a data source, and Spark plans each read of a data
source with two Python processes of its own (the source's schema, then its partitions). Measured
on 2 cores (`bench/bench_segments.py`, 1M batches in 16 segments; `bench/README.md`): the audit's
read took 0.30-0.40 s as a data source and 0.20-0.23 s as `mapInArrow`, the same parse.
`mapInArrow` also runs on every Spark since 3.3 and over Spark Connect with nothing registered.

The driver packs the files as Spark packs its own file sources
(`FilePartition.getFilePartitions`, with the session's `spark.sql.files.maxPartitionBytes`,
`openCostInBytes` and parallelism): one task per large segment, many small files (a snapshot per
partition, short segments) per task. A task of Python code also has a fixed cost a JVM reader
does not have, so a group holds at least `PYTHON_TASK_BYTES` where there is that much.

Three guarantees live here, once:

- a read of no files is one empty partition with the format's schema;
- a file that cannot be opened, or that a parser fails on (a bug: the parsers are fuzzed never to
  raise), becomes the subclass's error rows, never a failed task;
- inputs are opened read-only and never written next to.
"""

from __future__ import annotations

import json
import logging
import mmap
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import pyarrow as pa

from eos_audit.python_workers import freeze_worker_heap
from eos_audit.session import default_parallelism
from eos_audit.sources.files import filesystems

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import types as T

log = logging.getLogger(__name__)


class FileFormat:
    """Base of a file format read on the executors (see the module docstring).

    Subclasses set `format_name` (and optionally `memory_map`) and implement `schema`, `parse`
    and `unreadable`. `options` are the format's own, as strings, read in `parse`; the file dicts
    `read_files` is given hold `path` and whatever else the parser needs (topic, partition,
    replica...).
    """

    format_name: ClassVar[str] = ""
    memory_map: ClassVar[bool] = False

    def __init__(self, options: dict[str, str] | None = None):
        self.options: dict[str, str] = dict(options or {})

    def schema(self) -> T.StructType:  # pragma: no cover - every subclass defines it
        """The Spark schema of the rows."""
        raise NotImplementedError

    def parse(self, file: dict, data: bytes | memoryview) -> Iterator[pa.RecordBatch]:
        """Arrow batches (in `schema()`) of one file's content; must not raise on bad content."""
        raise NotImplementedError  # pragma: no cover

    def unreadable(self, file: dict, reason: str) -> Iterator[pa.RecordBatch]:
        """The rows that report a file that could not be read."""
        raise NotImplementedError  # pragma: no cover

    def read_files(self, files: list[dict]) -> Iterator[pa.RecordBatch]:
        """The rows of some files, one after the other: what one Spark task reads."""
        for file in files:
            yield from self._read_file(file)
        freeze_worker_heap("read")

    def _read_file(self, file: dict) -> Iterator[pa.RecordBatch]:
        path = file["path"]
        try:
            if filesystems.is_remote(path):
                # An object store's object: read whole into memory (filesystems.read_remote says
                # why and what it costs), the same bytes and byte positions as a local file.
                config = json.loads(self.options.get("object_store", "{}"))
                yield from self.parse(file, filesystems.read_remote(path, config))
                return
            with open(path, "rb") as fh:  # read-only: the input is evidence
                if not self.memory_map or os.fstat(fh.fileno()).st_size == 0:
                    yield from self.parse(file, fh.read())
                    return
                with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                    view = memoryview(mm)
                    try:
                        yield from self.parse(file, view)
                    finally:
                        view.release()
        except OSError as exc:
            yield from self.unreadable(file, f"cannot read file: {exc.strerror or exc}")
        except Exception as exc:  # noqa: BLE001 - a parser bug must not fail the night's job
            # The parsers are fuzzed never to raise (tests/fuzz); should one still, the file
            # becomes a quarantine row saying so instead of a failed Spark task.
            log.warning("could not parse %s", path, exc_info=True)
            yield from self.unreadable(
                file, f"could not parse the file ({type(exc).__name__}: {exc}); a bug in eos-audit"
            )


@dataclass(frozen=True)
class SplitSettings:
    """How Spark packs files into input partitions (its `spark.sql.files.*` settings)."""

    max_partition_bytes: int = 128 * 1024 * 1024
    open_cost_bytes: int = 4 * 1024 * 1024
    min_partitions: int = 1


# What a task of a Python source costs before it reads a byte, as bytes the parsers read in that
# time. Measured on 2 cores (pyspark 4.2): a reused worker's task costs 20-30 ms (its command,
# its Arrow stream, the daemon's collection after it), 50-100 ms while the worker's heap is not
# frozen (eos_audit.python_workers); 16 tasks over 16 files of 10 kB took 0.85 s, 2 tasks 0.12 s.
# The segment walk reads 500 MB/s a core with CRC: 30 ms of it is about 16 MB.
PYTHON_TASK_BYTES = 16 * 1024 * 1024

_BYTE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


def byte_size(text: str) -> int:
    """A Spark byte-size setting ("128MB", "4194304b", "64m", "1048576") in bytes.

    Raises:
        ValueError: the text is not a byte size.
    """
    match = re.fullmatch(r"\s*([0-9]+)\s*([kmgtp]?)b?\s*", text.lower())
    if match is None:
        raise ValueError(f"not a byte size: {text!r}")
    return int(match.group(1)) * _BYTE_UNITS[match.group(2)]


def split_settings(spark: SparkSession) -> SplitSettings:
    """The session's file-splitting settings, and its parallelism as the minimum partitions."""
    defaults = SplitSettings()
    max_bytes = spark.conf.get("spark.sql.files.maxPartitionBytes", None)
    open_cost = spark.conf.get("spark.sql.files.openCostInBytes", None)
    min_partitions = spark.conf.get("spark.sql.files.minPartitionNum", None)
    return SplitSettings(
        max_partition_bytes=byte_size(max_bytes) if max_bytes else defaults.max_partition_bytes,
        open_cost_bytes=byte_size(open_cost) if open_cost else defaults.open_cost_bytes,
        min_partitions=int(min_partitions) if min_partitions else default_parallelism(spark),
    )


def _sizes(files: list[dict]) -> list[int]:
    """Each file's size, for packing: the listing's (`bytes`), else asked; 0 if that fails.

    Asked: a local stat, or one listing of its directory on an object store (a request a
    directory, not one a file).
    """
    remote_dirs = {
        filesystems.dirname(f["path"])
        for f in files
        if f.get("bytes") is None and filesystems.is_remote(f["path"])
    }
    listed: dict[str, dict[str, int]] = {}
    for directory in remote_dirs:
        try:
            listed[directory] = filesystems.files_in(directory)
        except (OSError, ValueError):  # the executor's open names what is wrong with it
            listed[directory] = {}
    sizes = []
    for f in files:
        path = f["path"]
        if f.get("bytes") is not None:
            sizes.append(int(f["bytes"]))
        elif filesystems.is_remote(path):
            in_dir = listed[filesystems.dirname(path)]
            sizes.append(in_dir.get(filesystems.basename(path), 0))
        else:
            try:
                sizes.append(os.stat(path).st_size)
            except OSError:  # the executor's open names what is wrong with it
                sizes.append(0)
    return sizes


def pack_files(files: list[dict], settings: SplitSettings) -> list[list[dict]]:
    """The files packed into input partitions as Spark packs its file sources.

    Spark's `FilePartition.maxSplitBytes` and `getFilePartitions`: each file weighs its size plus
    the open cost; a partition holds up to `min(max_partition_bytes, max(open_cost, total
    weight / min_partitions))`, largest files first. One change for Python: a partition may
    hold `PYTHON_TASK_BYTES` whatever the parallelism, since splitting less than that over more
    tasks costs more than it saves. A file is never split: a segment is parsed from its start.

    Args:
        files: dicts with `path` and, where the listing knew it, `bytes` (else `_sizes` asks).
        settings: the session's settings (`split_settings`).

    Returns:
        The input partitions, each a non-empty list of files; none for no files.
    """
    sized = sorted(zip(_sizes(files), files, strict=True), key=lambda s: (-s[0], s[1]["path"]))
    open_cost = settings.open_cost_bytes
    total = sum(size + open_cost for size, _ in sized)
    per_core = total // max(settings.min_partitions, 1)
    max_split = min(settings.max_partition_bytes, max(open_cost, PYTHON_TASK_BYTES, per_core))
    packed: list[list[dict]] = []
    current: list[dict] = []
    current_size = 0
    for size, file in sized:
        if current and current_size + size > max_split:
            packed.append(current)
            current, current_size = [], 0
        current.append(file)
        current_size += size + open_cost
    if current:
        packed.append(current)
    return packed


def load_files(
    spark: SparkSession, file_format: type[FileFormat], files: list[dict], **options: str
) -> DataFrame:
    """Read files in a `FileFormat` on the executors.

    Args:
        spark: the session.
        file_format: the format's class.
        files: dicts with `path` and what the parser needs; `bytes`, the size the listing saw,
            saves a stat per file when the files are packed into partitions.
        **options: the format's own options, as strings.

    Returns:
        The format's rows: one Spark partition per group of files (`pack_files`).
    """
    groups = pack_files(files, split_settings(spark))
    if any(filesystems.is_remote(f["path"]) for f in files):
        # The executors read objects from the store the driver's environment names.
        options["object_store"] = json.dumps(filesystems.settings())
    reader = file_format(options)

    def read(requests: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # Each row of spark.range is the index of a group; its partition holds that row alone.
        for request in requests:
            for index in request.column(0).to_pylist():
                yield from reader.read_files(groups[index])

    read.__name__ = read.__qualname__ = f"read_{file_format.format_name}"  # named in Spark's plan
    # No files: one partition with no row, so the read is an empty DataFrame of the schema.
    requests = spark.range(0, len(groups), 1, max(len(groups), 1))
    return requests.mapInArrow(read, reader.schema())
