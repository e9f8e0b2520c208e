"""The one registry of input formats: name, file suffixes, reader.

The CLI's `--batches-format` choices, the pipeline's reading and format detection, and the
Databricks notebook's format widget all come from `BATCH_FORMATS`, so a format is added in one
place; the tabular suffixes and the formats of the other inputs (acknowledgements, ListOffsets
observations) are declared here too. No Spark is imported here: the CLI reads it before Spark
starts. Every reader returns a `BatchRead`: the batches in the canonical schema (`to_canonical`
output) and, for a broker export, what else the partition directories hold.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from eos_audit.errors import InputNotFoundError, InputSchemaError
from eos_audit.sources.files import filesystems as fsys
from eos_audit.sources.files.input_files import (
    InputFile,
    list_table_files,
    readable,
    unreadable_error,
    walk_files,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# File suffixes of the tabular formats, for every input that comes as a table.
TABLE_SUFFIXES = {
    ".parquet": "parquet",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
    ".csv": "csv",
}
# The formats of the other inputs (their readers: eos_audit.sources.evidence.acks and
# .list_offsets); the CLI's choices and the readers' checks both come from here.
ACKS_FORMATS = ("parquet", "json", "csv")
LIST_OFFSETS_FORMATS = ("parquet", "json", "csv", "get-offsets")
# kafka-get-offsets.sh output as it is usually saved.
LIST_OFFSETS_SUFFIXES = {**TABLE_SUFFIXES, ".txt": "get-offsets", ".out": "get-offsets",
                         ".log": "get-offsets"}  # fmt: skip


@dataclass(frozen=True)
class BatchOptions:
    """Reader options some formats take."""

    verify_crc: bool = True  # segments: verify CRC-32C
    topic: str | None = None  # dump-log: when the text does not name it
    partition: int | None = None  # dump-log: likewise


@dataclass
class BatchRead:
    """What a batch input gives the engine (all but `batches` only from broker exports)."""

    batches: DataFrame
    seeds: DataFrame | None = None
    log_starts: DataFrame | None = None
    high_watermarks: DataFrame | None = None
    leader_epochs: DataFrame | None = None
    problems: DataFrame | None = None  # input, source, reason: unusable non-batch content
    # Every file under the inputs, read or ignored (input_files); listed on the driver.
    files: list[InputFile] | None = None
    # Rows located by reference in files the driver handed to the reader: the text before a
    # row's position, by file id (row_reference.row_prefixes).
    source_files: dict[int, str] | None = None
    # The records and markers of `__consumer_offsets` and `__transaction_state` partitions among
    # the inputs, decoded (schemas/coordinator_records.json plus `_source_error`), one replica of
    # each: what the processing audit replays. None when the inputs hold none.
    coordinator_records: DataFrame | None = None
    # Every (topic, partition) with a segment file in the export, empty or not (broker exports
    # of segments only): Kafka creates a coordinator topic's partitions at once, so the empty
    # ones show the export holds the whole topic.
    partitions_listed: frozenset[tuple[str, int]] = frozenset()


@dataclass(frozen=True)
class InputFormat:
    """One record-batch input format.

    Attributes:
        name: the `--batches-format` value.
        suffixes: file suffixes that tell the format (lower case, with the dot).
        read: reads paths of this format.
        description: one line for help texts.
    """

    name: str
    suffixes: tuple[str, ...]
    read: Callable[[SparkSession, list[str], BatchOptions], BatchRead]
    description: str


def _tabular(fmt: str) -> Callable[[SparkSession, list[str], BatchOptions], BatchRead]:
    def read(spark: SparkSession, paths: list[str], options: BatchOptions) -> BatchRead:
        from eos_audit.sources.tabular.record_batches import read_tabular

        # Listed first: an input the run may not read stops it here, naming the file.
        files = list_table_files(paths, fmt)
        return BatchRead(read_tabular(spark, paths, fmt), files=files)

    return read


def _segments(spark: SparkSession, paths: list[str], options: BatchOptions) -> BatchRead:
    from eos_audit.sources.kafka.export import read_kafka_export

    export = read_kafka_export(spark, paths, verify_crc=options.verify_crc)
    return BatchRead(
        batches=export.batches,
        seeds=export.seeds,
        log_starts=export.log_starts,
        high_watermarks=export.high_watermarks,
        leader_epochs=export.leader_epochs,
        problems=export.problems,
        files=export.files,
        source_files=export.source_files,
        coordinator_records=export.coordinator_records,
        partitions_listed=export.partitions_listed,
    )


def _dump_log(spark: SparkSession, paths: list[str], options: BatchOptions) -> BatchRead:
    from eos_audit.sources.kafka.coordinator_dump_log import read_coordinator_dump_log
    from eos_audit.sources.kafka.coordinator_rows import COORDINATOR_TOPICS
    from eos_audit.sources.kafka.dump_log import read_dump_log
    from eos_audit.sources.tabular.canonical import to_canonical

    files = list_table_files(paths, "dump-log")
    text = read_dump_log(spark, paths, topic=options.topic, partition=options.partition)
    # Sections of the coordinator topics, printed with their decoder flag, are decoded too; the
    # text is not seen on the driver, so it is parsed for them whatever it holds (no rows when
    # it has none), unless --dump-topic names another topic.
    coordinator = None
    if options.topic is None or options.topic in COORDINATOR_TOPICS:
        coordinator = read_coordinator_dump_log(
            spark, paths, topic=options.topic, partition=options.partition
        )
    return BatchRead(
        to_canonical(text, text_input=False), files=files, coordinator_records=coordinator
    )


BATCH_FORMATS: dict[str, InputFormat] = {
    f.name: f
    for f in (
        *(
            InputFormat(
                name,
                tuple(s for s, f in TABLE_SUFFIXES.items() if f == name),
                _tabular(name),
                description,
            )
            for name, description in (
                ("parquet", "Parquet files"),
                ("json", "JSON lines"),
                ("csv", "CSV with a header line"),
            )
        ),
        InputFormat("delta", (), _tabular("delta"), "a Delta table"),
        InputFormat(
            "segments", (".log",), _segments, "Kafka partition directories (.log segments)"
        ),
        InputFormat("dump-log", (".txt", ".dump"), _dump_log, "kafka-dump-log.sh output"),
    )
}
FORMAT_NAMES: tuple[str, ...] = tuple(BATCH_FORMATS)
_BY_SUFFIX = {suffix: f.name for f in BATCH_FORMATS.values() for suffix in f.suffixes}


def _is_segment(file: Path) -> bool:
    return file.suffix == ".log" and file.stem.isdigit()


def detect_format(path: str) -> str:
    """The format of a path: a Delta table, a Kafka log tree, or a file suffix.

    Raises:
        InputNotFoundError: the path does not exist or its format cannot be told.
    """
    p = Path(path)
    if not fsys.exists(path):
        raise InputNotFoundError(f"input {path} does not exist; check --batches")
    if not readable(path):
        raise unreadable_error([path])
    if fsys.isfile(path):
        if p.suffix.lower() in _BY_SUFFIX:
            return _BY_SUFFIX[p.suffix.lower()]
        raise InputNotFoundError(
            f"cannot tell the format of {path} from its name; pass --batches-format "
            f"(one of {list(FORMAT_NAMES)})"
        )
    if fsys.is_delta_table(path):
        return "delta"
    unreadable: list[str] = []
    files = [Path(name) for _, _, names in walk_files(path, unreadable) for name in names]
    if unreadable:  # what cannot be listed cannot be told, nor read: named, not guessed around
        raise unreadable_error(unreadable)
    if any(_is_segment(f) for f in files):
        return "segments"
    for name in ("dump-log", "parquet", "json", "csv"):
        if any(f.suffix.lower() in BATCH_FORMATS[name].suffixes for f in files):
            return name
    raise InputNotFoundError(
        f"cannot tell the format of directory {path}: no Delta log, segment, Parquet, JSON, CSV "
        "or dump-log files in it; pass --batches-format"
    )


def batch_format(paths: list[str], fmt: str) -> str:
    """The one format of the `--batches` paths: `fmt`, or detected (all paths must agree).

    Raises:
        InputSchemaError: `fmt` is unknown, or the paths have different formats.
        InputNotFoundError: a path does not exist or its format cannot be told.
    """
    if fmt != "auto":
        if fmt not in BATCH_FORMATS:
            raise InputSchemaError(
                f"unknown --batches-format {fmt!r}; expected auto or one of {list(FORMAT_NAMES)}"
            )
        return fmt
    formats = {detect_format(p) for p in paths}
    if len(formats) != 1:
        raise InputSchemaError(
            f"the --batches inputs have different formats {sorted(formats)}; audit them "
            "separately or pass --batches-format"
        )
    return formats.pop()


def read_batches(
    spark: SparkSession, paths: list[str], fmt: str, options: BatchOptions | None = None
) -> BatchRead:
    """Read record-batch inputs of one format (`auto`: detected) through the registry.

    Args:
        spark: the session.
        paths: the `--batches` paths.
        fmt: a name of `BATCH_FORMATS`, or auto.
        options: reader options.

    Returns:
        The batches in the canonical schema, and what a broker export adds.
    """
    name = batch_format(paths, fmt)
    return BATCH_FORMATS[name].read(spark, paths, options or BatchOptions())
