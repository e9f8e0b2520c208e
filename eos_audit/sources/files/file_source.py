"""The one base of eos-audit's Python data sources: files in, Arrow record batches out.

Every reader of a file format Spark does not know (Kafka `.log` segments, producer snapshots and
checkpoints, `kafka-dump-log.sh` text, numbered text lines) is the same data source: the driver
lists the files and passes them as a JSON option, each input partition reads some of them on an
executor, and a pure parser turns each file's bytes into Arrow batches. A subclass says only how
one file is parsed and what an unreadable file becomes.

Three guarantees live here, once:

- a read of no files is one empty partition (Spark would otherwise hand the reader a bare
  `InputPartition` without our attributes; issue 12, case 3);
- a file that cannot be opened, or that a parser fails on (a bug: the parsers are fuzzed never to
  raise), becomes the subclass's error rows, never a failed task;
- inputs are opened read-only and never written next to.
"""

from __future__ import annotations

import json
import logging
import mmap
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from eos_audit.sources.files import filesystems

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import types as T

log = logging.getLogger(__name__)


class FilesPartition(InputPartition):
    """Some of the files of a read, each a dict with at least `path`."""

    def __init__(self, files: list[dict]):
        super().__init__(len(files))
        self.files = files


class _FilesReader(DataSourceReader):
    def __init__(self, source: FileDataSource):
        self.source = source
        self.files = sorted(json.loads(source.options.get("files", "[]")), key=lambda f: f["path"])

    def partitions(self) -> list[InputPartition]:
        step = self.source.files_per_partition
        chunks = [self.files[i : i + step] for i in range(0, len(self.files), step)]
        return [FilesPartition(c) for c in chunks] or [FilesPartition([])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        for file in getattr(partition, "files", []):
            yield from self._read_file(file)

    def _read_file(self, file: dict) -> Iterator[pa.RecordBatch]:
        path = file["path"]
        try:
            if filesystems.is_remote(path):
                # An object store's object: read whole into memory (filesystems.read_remote says
                # why and what it costs), the same bytes and byte positions as a local file.
                config = json.loads(self.source.options.get("object_store", "{}"))
                yield from self.source.parse(file, filesystems.read_remote(path, config))
                return
            with open(path, "rb") as fh:  # read-only: the input is evidence
                if not self.source.memory_map or os.fstat(fh.fileno()).st_size == 0:
                    yield from self.source.parse(file, fh.read())
                    return
                with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                    view = memoryview(mm)
                    try:
                        yield from self.source.parse(file, view)
                    finally:
                        view.release()
        except OSError as exc:
            yield from self.source.unreadable(file, f"cannot read file: {exc.strerror or exc}")
        except Exception as exc:  # noqa: BLE001 - a parser bug must not fail the night's job
            # The parsers are fuzzed never to raise (tests/fuzz); should one still, the file
            # becomes a quarantine row saying so instead of a failed Spark task.
            log.warning("could not parse %s", path, exc_info=True)
            yield from self.source.unreadable(
                file, f"could not parse the file ({type(exc).__name__}: {exc}); a bug in eos-audit"
            )


class FileDataSource(DataSource):
    """Base of a file-format data source (see the module docstring).

    Subclasses set `format_name` (and optionally `files_per_partition`, `memory_map`) and
    implement `schema`, `parse` and `unreadable`. Options: `files`, a JSON list of dicts with
    `path` and whatever else the parser needs (topic, partition, replica...), plus the
    subclass's own options, read from `self.options` in `parse`.
    """

    format_name: ClassVar[str] = ""
    files_per_partition: ClassVar[int] = 1
    memory_map: ClassVar[bool] = False

    @classmethod
    def name(cls) -> str:
        """The format name used with `spark.read.format(...)`."""
        return cls.format_name

    def schema(self) -> T.StructType:  # pragma: no cover - every subclass defines it
        """The Spark schema of the rows."""
        raise NotImplementedError

    def reader(self, schema: T.StructType) -> DataSourceReader:
        """A reader over the files given in the options."""
        return _FilesReader(self)

    def parse(self, file: dict, data: bytes | memoryview) -> Iterator[pa.RecordBatch]:
        """Arrow batches (in `schema()`) of one file's content; must not raise on bad content."""
        raise NotImplementedError  # pragma: no cover

    def unreadable(self, file: dict, reason: str) -> Iterator[pa.RecordBatch]:
        """The rows that report a file that could not be read."""
        raise NotImplementedError  # pragma: no cover


def load_files(
    spark: SparkSession, source: type[FileDataSource], files: list[dict], **options: str
) -> DataFrame:
    """Read files through a `FileDataSource` subclass (registered with the session on use).

    Args:
        spark: the session.
        source: the data source class.
        files: dicts with `path` and what the parser needs.
        **options: the source's own options, as strings.

    Returns:
        The source's rows, read on the executors.
    """
    spark.dataSource.register(source)
    reader = spark.read.format(source.format_name).option("files", json.dumps(files))
    if any(filesystems.is_remote(f["path"]) for f in files):
        # The executors read objects from the store the driver's environment names.
        reader = reader.option("object_store", json.dumps(filesystems.settings()))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()
