"""Text files as numbered lines: (path, line number, text), read on the executors.

Spark's text and JSON readers split files but cannot say which line a row came from; a
quarantined JSON line must name it (issue 12, case 4). This format (`file_source`) reads each
file in one task, finds the line breaks with numpy and hands the lines to Spark as Arrow strings
without a Python loop over lines. Bytes that are not UTF-8 are replaced (U+FFFD), never fatal.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T

from eos_audit.sources.files.file_source import FileFormat, load_files

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FORMAT_NAME = "eos_text_lines"
PATH, LINE, VALUE, ERROR = "path", "line", "value", "_read_error"
SCHEMA = T.StructType(
    [
        T.StructField(PATH, T.StringType(), True),
        T.StructField(LINE, T.LongType(), True),
        T.StructField(VALUE, T.StringType(), True),
        T.StructField(ERROR, T.StringType(), True),
    ]
)
ARROW_SCHEMA = pa.schema(
    [(PATH, pa.string()), (LINE, pa.int64()), (VALUE, pa.string()), (ERROR, pa.string())]
)
CHUNK_LINES = 65_536


def parse_lines(data: bytes | memoryview, *, path: str) -> Iterator[pa.RecordBatch]:
    """Numbered lines of a file (1-based), LF or CRLF separated, in batches.

    Args:
        data: the file content.
        path: the file path (the `path` column).

    Yields:
        Batches in `ARROW_SCHEMA`; a final line without a newline is a line too.
    """
    view = memoryview(data).cast("B")
    breaks = np.flatnonzero(np.frombuffer(view, dtype=np.uint8) == 0x0A)
    # End (exclusive, without its newline) of every line; a last line without one ends the file.
    ends = breaks if len(breaks) and breaks[-1] == len(view) - 1 else np.append(breaks, len(view))
    if len(view) == 0:
        ends = ends[:0]
    for first in range(0, len(ends), CHUNK_LINES):
        chunk = ends[first : first + CHUNK_LINES]
        start = 0 if first == 0 else int(ends[first - 1]) + 1
        # One decode and one split per chunk of lines: no Python work per line.
        text = bytes(view[start : int(chunk[-1])]).decode("utf-8", errors="replace")
        lines = pc.utf8_rtrim(pa.array(text.split("\n"), pa.string()), characters="\r")
        n = len(lines)
        yield pa.RecordBatch.from_arrays(
            [
                pa.array([path], pa.string()).take(pa.array(np.zeros(n, dtype=np.int32))),
                pa.array(np.arange(first + 1, first + n + 1, dtype=np.int64)),
                lines,
                pa.nulls(n, pa.string()),
            ],
            schema=ARROW_SCHEMA,
        )


class TextLinesFormat(FileFormat):
    """The `eos_text_lines` format: each file whole in one task."""

    format_name = FORMAT_NAME
    memory_map = True

    def schema(self) -> T.StructType:
        """(path, line, value, _read_error)."""
        return SCHEMA

    def parse(self, file: dict, data: bytes | memoryview) -> Iterator[pa.RecordBatch]:
        """The file's numbered lines."""
        yield from parse_lines(data, path=file["path"])

    def unreadable(self, file: dict, reason: str) -> Iterator[pa.RecordBatch]:
        """One row with line 0 and the reason."""
        yield pa.RecordBatch.from_arrays(
            [
                pa.array([file["path"]]),
                pa.array([0], pa.int64()),
                pa.nulls(1, pa.string()),
                pa.array([reason]),
            ],
            schema=ARROW_SCHEMA,
        )


def list_files(paths: list[str]) -> list[str]:
    """The files of local paths (a directory: every file below it but Spark's `_`/`.` markers)."""
    files: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            for dirpath, dirnames, names in os.walk(path):
                dirnames[:] = sorted(d for d in dirnames if not d.startswith(("_", ".")))
                files += [os.path.join(dirpath, n) for n in names if not n.startswith(("_", "."))]
        else:
            files.append(path)
    return sorted({os.path.abspath(f) for f in files})


def read_text_lines(spark: SparkSession, paths: list[str]) -> DataFrame:
    """Numbered lines of local text files or directories.

    Args:
        spark: the session.
        paths: files or directories.

    Returns:
        (path, line, value, _read_error) rows; an unreadable file is one row with the reason.
    """
    return load_files(spark, TextLinesFormat, [{"path": f} for f in list_files(paths)])
