"""Where a row was read (Parquet, Kafka segments), carried as two numbers instead of a text.

A record batch read from Parquet without a `source` of its own is named by its file and row,
`<file>:row <n>`. Building that text for every row cost about a fifth of the audit's hand-over to
the replay (10M batches, 2 cores: the hand-over 8.1 s with the text, 6.2 s without), and only the
few rows that findings or quarantine name ever show it. So the reader carries each row's file as
an id, the CRC-32 of the path Spark gives it (`_metadata.file_path`), and its row number; the
text is written only for the rows that are shown: quarantined rows get it in Spark
(`canonical.to_canonical`), findings in the replay, which maps ids back to paths from the
driver's listing of the input files (`file_ids`).

Kafka's segment files are located the same way, by the position that names a batch in Kafka's
own tools, its byte position (`<file>:<byte>`): their reader is told each file's id by the driver,
which lists them (`unique_file_ids`), and never writes a row's text (5M batches, 2 cores: Spark's
hand-over of the reader's rows took 1.75 s with the text, 1.41 s without; and the audit of an
export then matched every row's text with a regular expression to find its replica).
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


# What comes between a file and a row's position in the text naming the row.
ROW_NUMBER = ":row "  # tabular files: `<file>:row <n>`, the row's number
BYTE_POSITION = ":"  # Kafka's segments: `<file>:<byte>`, where the batch starts


def source_text(path: Column, row: Column, separator: str = ROW_NUMBER) -> Column:
    """The text naming a row of a file, in Spark (`<file>:row <n>` or `<file>:<byte>`)."""
    return F.concat(path, F.lit(separator), row.cast("string"))


def row_prefixes(ids: dict[int, str], separator: str = ROW_NUMBER) -> dict[int, str]:
    """What the replay writes before a located row's position, by file id (`<file>:row `)."""
    return {file: path + separator for file, path in ids.items()}


def unique_file_ids(paths: Iterable[str]) -> dict[str, int]:
    """An id for each file the driver lists and hands to a reader: unique, for any paths.

    The CRC-32 of the path (what Spark's `file_id` gives a file it names), or, for the rare path
    whose CRC-32 another listed path already has, the next free 32-bit value: the driver hands
    the ids out, so they never need to be computed again from the path.
    """
    out: dict[str, int] = {}
    taken: set[int] = set()
    for path in paths:
        if path in out:
            continue
        candidate = zlib.crc32(path.encode("utf-8"))
        while candidate in taken:
            candidate = (candidate + 1) & 0xFFFFFFFF
        taken.add(candidate)
        out[path] = candidate
    return out


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
