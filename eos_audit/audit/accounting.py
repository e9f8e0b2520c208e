"""The `input_files` table: every file under the inputs, with what the run made of it.

The driver lists the files (`eos_audit.sources.files.input_files`); the replay counts the batches of
each file in the run's one pass (`runner.count_files`, staged as kind `input_files`); the
quarantine rows name the file and position of what could not be read. Here the three meet, on
the driver, over a few rows per file: no batch data is read again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from eos_audit.audit import output_records
from eos_audit.findings import Cause
from eos_audit.replay.runner import FILE_COUNTS
from eos_audit.sinks.finding_rows import lowered_by
from eos_audit.sources.files.input_files import (
    DAMAGED,
    IGNORED,
    UNREADABLE,
    InputFile,
    file_id_spellings,
)
from eos_audit.sources.kafka.dump_log import LINE_INPUT, UNKNOWN_LINE
from eos_audit.sources.kafka.partition_dirs import partition_of_folder
from eos_audit.sources.kafka.segments import TRUNCATED_TAIL

# A batch that cannot be framed: the reader skips the rest of its file (sources.segments).
_FRAMING = "truncated batch|unknown magic|invalid batch length"
# What a reader says of a file it could not open (sources.file_source, segments.unreadable).
_CANNOT_READ = "cannot read"
# The bytes of a dump text's line that is no part of the tool's output, as its reason gives them.
_LINE_BYTES = rf"^{re.escape(UNKNOWN_LINE)} \(([0-9]+) bytes"
# `<file>:<byte>` (segments), `<file>:row <n>` (Parquet), `<file>:line <n>` (text).
# or the file alone (CSV).
_LOCATION = r"^(.*?)(?::(?:row |line )?([0-9]+))?$"


@dataclass
class Accounting:
    """What the run made of its input files.

    Attributes:
        rows: the `input_files` rows (schemas.INPUT_FILES order, run_id first).
        bytes_read: bytes of the files whose batches are counted.
        bytes_quarantined: bytes of them that could not be audited.
        tolerated: quarantined batches that are not bad input (TRUNCATED_TAIL).
        unreadable: files an executor could not read.
    """

    rows: list[tuple] = field(default_factory=list)
    bytes_read: int = 0
    bytes_quarantined: int = 0
    tolerated: int = 0
    unreadable: tuple[str, ...] = ()


def _quarantine_by_file(staged: DataFrame) -> dict[str, dict]:
    """Per file named by quarantined batches or text lines: its framing, tails and unreadability.

    And the lines no part of kafka-dump-log.sh's output, with their bytes.
    """
    q = staged.where(
        (F.col("kind") == "quarantine") & F.col("quarantine.input").isin("record_batch", LINE_INPUT)
    ).select(
        # Spark names a local file `file:/x`; the listing `/x`.
        F.regexp_replace("quarantine.source", "^file:/+", "/").alias("source"),
        "quarantine.reason",
        (F.col("quarantine.input") == LINE_INPUT).alias("is_line"),
    )
    location = F.regexp_extract("source", _LOCATION, 1)
    position = F.regexp_extract("source", _LOCATION, 2).try_cast("long")
    reason = F.col("reason")
    batch = ~F.col("is_line")
    tail = batch & reason.startswith(TRUNCATED_TAIL)
    framing = batch & reason.rlike(_FRAMING) & ~tail
    cannot_read = batch & reason.contains(_CANNOT_READ)
    line_bytes = F.regexp_extract(reason, _LINE_BYTES, 1).try_cast("long")
    per_file = (
        q.where(location != "")
        .groupBy(location.alias("path"))
        .agg(
            F.count(F.when(batch, 1)).alias("quarantined"),
            F.count(F.when(tail, 1)).alias("tails"),
            F.min(F.when(framing, position)).alias("lost_from"),
            F.min(F.when(cannot_read, reason)).alias("unreadable"),
            F.min(F.when(tail, reason)).alias("tail_reason"),
            F.min(F.when(batch & ~tail, reason)).alias("reason"),
            F.count(F.when(F.col("is_line"), 1)).alias("lines"),
            F.sum(F.when(F.col("is_line"), line_bytes)).alias("line_bytes"),
        )
    )
    return {row["path"]: row.asDict() for row in per_file.collect()}


def account(staged: DataFrame, files: list[InputFile], run_id: str) -> Accounting:
    """The `input_files` rows of a run and the byte counts of its quarantine threshold.

    Args:
        staged: the run's staged output records.
        files: the driver's listing of the inputs.
        run_id: the run.

    Returns:
        The accounting (one small Spark job over the staged records per part).
    """
    counted = output_records.input_file_counts_of(staged).collect()
    counts: dict[int, dict] = {row["file_id"]: row.asDict() for row in counted}
    problems = _quarantine_by_file(staged)
    out = Accounting()
    unreadable: list[str] = []
    for f in files:
        status, reason, size = f.status, f.reason, f.bytes
        numbers: list[int | None] = [None] * (len(FILE_COUNTS) + 1)
        lost = None
        if f.counted:
            ids = [f.file_id] if f.file_id is not None else file_id_spellings(f.path)
            found = next((counts[i] for i in ids if i in counts), None)
            if found is not None or f.format == "segment":
                got = [int((found or {}).get(c) or 0) for c in FILE_COUNTS]
                read, quarantined, skipped = got
                numbers = [read, read - quarantined - skipped, quarantined, skipped]
            lost = 0
        problem = problems.get(f.path) if status != IGNORED else None
        if problem is not None:
            out.tolerated += int(problem["tails"])
            if problem["unreadable"] is not None:
                status, reason, lost = UNREADABLE, problem["unreadable"], size
                unreadable.append(f.path)
            elif problem["lost_from"] is not None or problem["quarantined"] > problem["tails"]:
                status, reason = DAMAGED, problem["reason"]
                if problem["lost_from"] is not None and size is not None:
                    lost = max(size - int(problem["lost_from"]), 0)
            elif problem["lines"]:
                status, reason = DAMAGED, _lines_reason(int(problem["lines"]))
            else:
                reason = problem["tail_reason"]
            # A line that is no part of the tool's output: its bytes, not a batch, count.
            if problem["unreadable"] is None and problem["line_bytes"]:
                lost = (lost or 0) + int(problem["line_bytes"])
        elif status != IGNORED and (numbers[2] or 0) > 0:
            status, reason = DAMAGED, "some of its batches are quarantined (see quarantine)"
        # A dump text's batches are not counted per file (its rows carry a line, not the file's
        # id), but its bytes are: the lines no part of the tool's output count by them.
        if (f.counted or f.format == "dump-log") and status != IGNORED:
            out.bytes_read += size or 0
            out.bytes_quarantined += lost or 0
        out.rows.append((run_id, f.path, f.format, size, *numbers, lost, status, reason))
    out.unreadable = tuple(unreadable)
    return out


def _lines_reason(lines: int) -> str:
    """input_files' reason for a dump text whose only damage is lines no part of the output."""
    what = "line matches" if lines == 1 else "lines match"
    return f"{lines} {what} no known kafka-dump-log.sh format (see quarantine, input {LINE_INPUT})"


def findings_beside_unreadable(staged: DataFrame, unreadable: tuple[str, ...]) -> DataFrame:
    """The stage with each finding the unreadable files may have made lowered to INFO.

    A file listed and then not read leaves a hole the replay cannot see: its batches' sequences
    look missing (SEQUENCE_GAP), a marker or an epoch bump in it is unseen (HANGING_TRANSACTION,
    FENCED_PRODUCER_EPOCH...). No verdict is built on it: every finding of a partition one of
    whose files was unreadable, and every finding of the run when such a file names no partition
    (a Parquet, JSON or dump-log file may hold any), keeps its type and evidence but becomes
    INFO with the cause UNREADABLE_INPUT (docs/rules.md#causes). The run ends INPUT_UNREADABLE
    (exit 4), naming the files.

    Args:
        staged: the run's staged output records.
        unreadable: the paths of the files the executors could not read.

    Returns:
        `staged`, its findings in those partitions lowered.
    """
    partitions = set()
    for path in unreadable:
        folder = path.rstrip("/").rsplit("/", 2)[-2] if "/" in path else ""
        named = partition_of_folder(folder)
        if named is None:
            partitions = None  # a file of any partition: every finding may rest on it
            break
        partitions.add(named)
    finding = F.col("kind") == "findings"
    if partitions is not None:
        # One membership test, however many files: `topic/partition` (no topic holds a `/`).
        named = F.concat_ws("/", F.col("findings.topic"), F.col("findings.partition"))
        finding = finding & named.isin(sorted(f"{t}/{p}" for t, p in partitions))
    lowered = lowered_by(Cause.UNREADABLE_INPUT.name)
    return staged.withColumn("findings", F.when(finding, lowered).otherwise(F.col("findings")))
