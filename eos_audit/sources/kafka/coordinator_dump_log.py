"""`kafka-dump-log.sh --offsets-decoder` / `--transaction-log-decoder` text → one row per record.

The text holds a coordinator partition's batches as the segments do: a batch line each, and under
it one record line per record, to which a decoder flag appends the record's key and value as the
tool decoded them (`coordinator_text`, every generation of eos_processing.md §2). The lines are
classified by the batch reader's own parse (`dump_log.parse_dump_log_lines`), so a record gets
its batch's producer id, epoch and transactional flag from the batch row the batch reader gives,
and the lines that parse cannot place (unknown lines, a damaged batch line, a record line before
any batch line, `Found N invalid bytes`) are its error rows here too.

A section's coordinator topic, which says which decoder the tool ran, comes from its `Dumping
<dir>/__consumer_offsets-12/<file>` line, or from the `topic` option. The rows of sections of other
topics are the batch reader's and are left out.

As from segments (`coordinator_segments`): a control batch gives one row, its marker, with the
control type the batch reader read from its record line (`--deep-iteration`, which a decoder flag
implies); what cannot be read is an error row, never dropped: a batch line the batch reader could
not read (one row for the batch; its records are not decoded), and a record line whose decoder
text does not decode (the tool's `Error at offset ...` among them). `source` is `<file>:line <n>`
of the record line, or of the line the error is on.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from eos_audit.errors import ConfigError
from eos_audit.sources.files.file_source import load_files
from eos_audit.sources.kafka.coordinator_records import (
    MARKER,
    CoordinatorRecordError,
    DecodedRecord,
)
from eos_audit.sources.kafka.coordinator_rows import (
    ARROW_SCHEMA,
    CHUNK_ROWS,
    COORDINATOR_TOPICS,
    CoordinatorRows,
    coordinator_source_schema,
)
from eos_audit.sources.kafka.coordinator_text import parse_record_line
from eos_audit.sources.kafka.dump_log import (
    KafkaDumpLogFormat,
    dump_log_files,
    parse_dump_log_lines,
)
from eos_audit.sources.kafka.segments import SOURCE_ERROR_COL

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import types as T

log = logging.getLogger(__name__)

FORMAT_NAME = "kafka_coordinator_dump_log"

# A record line's own offset and timestamp, which come before its key on every record line shape
# (`| offset: N CreateTime: T ...`, the 2.8 superset line, 0.11-2.1 `offset: N position: P
# CreateTime: T ...`), so the first match is the record's even when an id holds the same text.
_OFFSET = re.compile(r"^\|?\s*offset: (\d+)")
_TIMESTAMP = re.compile(r" (?:CreateTime|LogAppendTime): (-?\d+)")
# What the tool prints for a control record instead of decoder output.
_MARKER = re.compile(r" (?:endTxnMarker|controlType): ")
_BATCH_COLUMNS = [
    "topic", "partition", "base_offset", "producer_id", "producer_epoch", "is_transactional",
    "is_control", "control_type", "max_timestamp", "source", SOURCE_ERROR_COL,
]  # fmt: skip
_UNPLACED_RECORD = (
    "record line shows no offset, keySize and valueSize (--skip-record-metadata?): its record "
    "cannot be placed"
)


def _batch_context(batch: dict) -> dict:
    return {
        "coordinator_topic": batch["topic"],
        "coordinator_partition": batch["partition"],
        "base_offset": batch["base_offset"],
        "batch_producer_id": batch["producer_id"],
        "batch_producer_epoch": batch["producer_epoch"],
        "is_transactional": batch["is_transactional"],
    }


def _marker_row(batch: dict, context: dict) -> tuple[dict, DecodedRecord | None, str | None]:
    """A control batch's row: its marker, or an error when the text shows no marker type."""
    if batch["control_type"] is None:
        return context, None, (
            "control batch whose marker type the text does not show (dumped without "
            "--deep-iteration or a decoder flag)"
        )
    marker = {
        **context,
        "offset": batch["base_offset"],
        "timestamp": batch["max_timestamp"],
        "control_type": batch["control_type"],
    }
    return marker, MARKER, None


def _is_other_topic(topic: str | None) -> bool:
    """A section of a topic that is no coordinator's: the batch reader's, not read here."""
    return topic is not None and topic not in COORDINATOR_TOPICS


def _record_row(
    text: str, line: int, batch: dict, path: str
) -> tuple[dict, DecodedRecord | None, str | None] | None:
    """The row of one record line of a data batch; None for a marker's line."""
    offset = _OFFSET.match(text)
    timestamp = _TIMESTAMP.search(text)
    context = {
        **_batch_context(batch),
        "offset": int(offset[1]) if offset else None,
        "timestamp": int(timestamp[1]) if timestamp else None,
        "source": f"{path}:line {line + 1}",
    }
    try:
        parsed = parse_record_line(text, batch["topic"])
    except CoordinatorRecordError as err:
        return context, None, f"record line does not decode: {err.reason}"
    if parsed is None:
        if _MARKER.search(text):
            return None
        return context, None, _UNPLACED_RECORD
    return {**context, "offset": parsed.offset}, parsed.record, None


def parse_coordinator_dump_log(
    data: bytes, *, path: str, topic: str | None = None, partition: int | None = None
) -> pa.Table:
    """Decode one `kafka-dump-log.sh` decoder output file (pure: Spark calls it on executors).

    Args:
        data: the file content.
        path: the file path, used in `source` ("<path>:line <n>").
        topic: the coordinator topic of every section; default: from its `Dumping` line.
        partition: the coordinator partition of every section; likewise.

    Returns:
        One row per record of a data batch of a coordinator topic, and the error rows, in line
        order (`coordinator_rows.ARROW_SCHEMA`).
    """
    parsed = parse_dump_log_lines(data, path=path, topic=topic, partition=partition)
    batches = parsed.batches.select(_BATCH_COLUMNS).to_pylist()
    found: list[tuple[int, dict, DecodedRecord | None, str | None]] = []
    for line, batch in zip(parsed.batch_lines.tolist(), batches, strict=True):
        if _is_other_topic(batch["topic"]):
            continue
        context = {**_batch_context(batch), "source": batch["source"]}
        if batch[SOURCE_ERROR_COL] is not None:
            found.append((line, context, None, batch[SOURCE_ERROR_COL]))
        elif batch["is_control"]:
            found.append((line, *_marker_row(batch, context)))
    errors = parsed.errors.select(["topic", "partition", "source", SOURCE_ERROR_COL]).to_pylist()
    for line, error in zip(parsed.error_lines.tolist(), errors, strict=True):
        if not _is_other_topic(error["topic"]):
            context = {
                "coordinator_topic": error["topic"],
                "coordinator_partition": error["partition"],
                "source": error["source"],
            }
            found.append((line, context, None, error[SOURCE_ERROR_COL]))
    # Each record line's batch: the last batch row at or before it (record_lines have one).
    governing = np.searchsorted(parsed.batch_lines, parsed.record_lines, side="right") - 1
    texts = parsed.lines.take(pa.array(parsed.record_lines, pa.int64())).to_pylist()
    for line, index, text in zip(
        parsed.record_lines.tolist(), governing.tolist(), texts, strict=True
    ):
        batch = batches[index]
        if batch["topic"] not in COORDINATOR_TOPICS or batch[SOURCE_ERROR_COL] is not None:
            continue  # another topic's, or a batch already reported as one error row
        if batch["is_control"]:
            continue  # a transaction marker: the row of its batch line (below)
        row = _record_row(text, line, batch, path)
        if row is not None:
            found.append((line, *row))
    rows = CoordinatorRows()
    for _, context, record, error in sorted(found, key=lambda row: row[0]):
        rows.add(context, record, error)
    return pa.Table.from_batches([rows.take()], schema=ARROW_SCHEMA)


class CoordinatorDumpLogFormat(KafkaDumpLogFormat):
    """The `kafka_coordinator_dump_log` format: each text file whole in one task.

    Files and options as the batch reader's `kafka_dump_log` format (`topic`, `partition`).
    """

    format_name = FORMAT_NAME

    def schema(self) -> T.StructType:
        """The readers' schema (`coordinator_source_schema()`)."""
        return coordinator_source_schema()

    def parse(self, file: dict, data: bytes | memoryview) -> Iterator[pa.RecordBatch]:
        """The rows of one dump file (`parse_coordinator_dump_log`)."""
        topic, partition = self._topic_partition()
        table = parse_coordinator_dump_log(
            bytes(data), path=file["path"], topic=topic, partition=partition
        )
        yield from table.to_batches(max_chunksize=CHUNK_ROWS)

    def unreadable(self, file: dict, reason: str) -> Iterator[pa.RecordBatch]:
        """One error row at line 0 of the file."""
        topic, partition = self._topic_partition()
        rows = CoordinatorRows()
        context = {
            "coordinator_topic": topic,
            "coordinator_partition": partition,
            "source": f"{file['path']}:line 0",
        }
        rows.add(context, error=reason)
        yield rows.take()


def read_coordinator_dump_log(
    spark: SparkSession,
    paths: list[str],
    *,
    topic: str | None = None,
    partition: int | None = None,
) -> DataFrame:
    """Decode `kafka-dump-log.sh --offsets-decoder` / `--transaction-log-decoder` output files.

    Args:
        spark: the session.
        paths: text files, or directories whose files are all dump-log output.
        topic: the coordinator topic of every section, when the text has no usable `Dumping`
            line.
        partition: its partition, likewise.

    Returns:
        `COORDINATOR_RECORDS` columns plus `_source_error` (`coordinator_source_schema()`);
        `source` is "<file>:line <n>".

    Raises:
        ConfigError: `topic` is not a coordinator topic.
        InputNotFoundError: a path does not exist or holds no file.
    """
    if topic is not None and topic not in COORDINATOR_TOPICS:
        raise ConfigError(
            f"topic {topic!r}: the coordinator readers decode {' and '.join(COORDINATOR_TOPICS)}"
        )
    files = dump_log_files(paths)
    options = {"topic": topic or "", "partition": "" if partition is None else str(int(partition))}
    log.info("reading %d kafka-dump-log files of the coordinator topics", len(files))
    return load_files(spark, CoordinatorDumpLogFormat, [{"path": f} for f in files], **options)
