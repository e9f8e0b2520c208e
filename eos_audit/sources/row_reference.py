"""Where a Parquet row was read, carried as two numbers instead of a text.

A record batch read from Parquet without a `source` of its own is named by its file and row,
`<file>:row <n>`. Building that text for every row cost about a fifth of the audit's hand-over to
the replay (10M batches, 2 cores: the hand-over 8.1 s with the text, 6.2 s without), and only the
few rows that findings or quarantine name ever show it. So the reader carries each row's file as
an id, the CRC-32 of the path Spark gives it (`_metadata.file_path`), and its row number; the
text is written only for the rows that are shown: quarantined rows get it in Spark
(`canonical.to_canonical`), findings in the replay, which maps ids back to paths from the
driver's listing of the input files (`file_ids`).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable

from pyspark.sql import Column
from pyspark.sql import functions as F

# The canonical columns of a row located by reference (absent for other inputs).
SOURCE_FILE = "source_file"
SOURCE_ROW = "source_row"
# The file's path as read, beside them until validation has written the quarantined rows' text.
SOURCE_PATH = "source_path"
COLUMNS = (SOURCE_FILE, SOURCE_ROW, SOURCE_PATH)


def file_id(path: Column) -> Column:
    """A file's id in Spark: the CRC-32 of its path's UTF-8 bytes (what `zlib.crc32` gives)."""
    return F.crc32(path.cast("binary"))


def source_text(path: Column, row: Column) -> Column:
    """`row_source` in Spark."""
    return F.concat(path, F.lit(":row "), row.cast("string"))


def row_source(path: str, row: int) -> str:
    """The text naming a row of a file, as the readers name rows they read (`<file>:row <n>`)."""
    return f"{path}:row {row}"


def spellings(path: str) -> list[str]:
    """The ways Spark writes one input file's path.

    `DataFrame.inputFiles()` lists local files as `file:///dir/f`, while `_metadata.file_path`
    names them `file:/dir/f`; other schemes (s3a://bucket/key, dbfs:/...) are written alike.
    """
    if path.startswith("file:///"):
        return [path, "file:/" + path[len("file:///") :]]
    return [path]


def file_ids(
    paths: Iterable[str], crc: Callable[[bytes], int] = zlib.crc32
) -> dict[int, str] | None:
    """The id of every spelling of the given files' paths, mapped to that spelling.

    Args:
        paths: the input files, as `DataFrame.inputFiles()` lists them.
        crc: the hash (tests pass a weaker one to provoke a collision).

    Returns:
        id -> path, or None when two different paths share an id: the rows of such an input
        cannot be told apart by id, and are then named by text as before.
    """
    out: dict[int, str] = {}
    for path in paths:
        for spelling in spellings(path):
            known = out.setdefault(crc(spelling.encode("utf-8")), spelling)
            if known != spelling:
                return None
    return out
