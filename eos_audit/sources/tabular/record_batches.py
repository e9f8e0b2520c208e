"""Record batches already in tabular form (Parquet, JSON lines, CSV, Delta) in the canonical schema.

The record-batch contract (schemas/record_batch.json) is read by the one contract reader
(`eos_audit.sources.tabular.contract_reader`) like every other tabular input, then validated row by
row by `eos_audit.sources.tabular.canonical.to_canonical`. Integer columns of any width are accepted
(JSON and CSV values are text, parsed per row); a missing or mistyped column stops the run naming
it; a row with an impossible value, or a malformed line, is quarantined with its reasons. JSON lines
are read as numbered lines, so a quarantined line names its file and line and keeps its text.
"""

from __future__ import annotations

import os

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eos_audit.errors import InputNotFoundError, InputSchemaError
from eos_audit.schemas import RECORD_BATCH, RECORD_BATCH_COLUMNS, REQUIRED_INPUT_COLUMNS
from eos_audit.sinks.delta_reader import delta_dataframe
from eos_audit.sources.files import row_reference as ref
from eos_audit.sources.files.input_files import followed_paths
from eos_audit.sources.tabular import contract_reader as cr
from eos_audit.sources.tabular.canonical import to_canonical

FORMATS = ("parquet", "json", "csv", "delta")
CONTRACT = cr.TableContract(
    label="record-batch",
    columns=tuple(RECORD_BATCH.fieldNames()),
    required=tuple(REQUIRED_INPUT_COLUMNS),
    integer_columns=tuple(
        c.name for c in RECORD_BATCH_COLUMNS if isinstance(c.data_type, T.IntegerType | T.LongType)
    ),
    # `source` is free text of any type (a writer's numeric row id, an all-null column): cast.
    string_columns=tuple(
        c.name
        for c in RECORD_BATCH_COLUMNS
        if isinstance(c.data_type, T.StringType) and c.name != "source"
    ),
    time_columns=(),
    required_note=" (schemas/record_batch.json)",
)


def _with_source(df: DataFrame, default: F.Column | None = None) -> DataFrame:
    """`source` as given, else where the row was read (file, and row or line)."""
    fallback = default if default is not None else F.col(cr.DEFAULT_SOURCE)
    given = F.col("source").cast("string") if "source" in df.columns else F.lit(None)
    out = df.withColumn("source", F.coalesce(given, fallback))
    return out.drop(cr.DEFAULT_SOURCE) if cr.DEFAULT_SOURCE in out.columns else out


_FILE_ID = (ref.SOURCE_FILE,)


def _with_file_id(df: DataFrame) -> DataFrame:
    """Each row's file as an id (`row_reference.file_id`), so the replay counts rows per file.

    The default source is the file, or `<file>:line <n>` for numbered JSON lines. A file with a
    column of that name keeps its own, and goes uncounted per file.
    """
    if ref.SOURCE_FILE in df.columns:
        return df
    path = F.regexp_extract(F.col(cr.DEFAULT_SOURCE), r"^(.*?)(?::line [0-9]+)?$", 1)
    return df.withColumn(ref.SOURCE_FILE, ref.file_id(path))


def _read_parquet(spark: SparkSession, paths: list[str]) -> DataFrame:
    """Parquet rows, each located by (file id, row) rather than a text (`row_reference`).

    The text `<file>:row <n>` is then built only for the rows shown: quarantined rows here, and
    the rows findings name in the replay. Should two input files share an id, every row is named
    by its text, as every other format does.
    """
    df = cr.read_parquet_table(spark, paths, CONTRACT, by_reference=True)
    if cr.DEFAULT_SOURCE in df.columns:  # located by text (see read_parquet_table)
        return to_canonical(_with_source(df))
    if "source" in df.columns:
        df = df.withColumn("source", F.col("source").cast("string"))
    return to_canonical(
        df,
        keep=(ref.SOURCE_FILE, ref.SOURCE_ROW),
        source_fallback=ref.source_text(F.col(ref.SOURCE_PATH), F.col(ref.SOURCE_ROW)),
        fallback_columns=(ref.SOURCE_PATH,),
    )


def _read_delta(spark: SparkSession, paths: list[str]) -> DataFrame:
    empty = T.StructType([T.StructField(c.name, c.data_type, True) for c in RECORD_BATCH_COLUMNS])
    frames = [_with_source(delta_dataframe(spark, p, empty), F.lit(f"delta:{p}")) for p in paths]
    df = frames[0]
    for other in frames[1:]:
        df = df.unionByName(other, allowMissingColumns=True)
    return to_canonical(df)


def read_tabular(spark: SparkSession, paths: list[str], fmt: str) -> DataFrame:
    """Read record batches from Parquet, JSON lines, CSV or Delta into the canonical schema.

    Args:
        spark: the session.
        paths: files or directories of one format.
        fmt: parquet, json, csv or delta.

    Returns:
        `to_canonical`'s output: canonical columns, `quarantine_reason`, `raw`; for Parquet
        also `source_file` and `source_row`, which locate the rows whose `source` is null.

    Raises:
        InputNotFoundError: a path does not exist.
        InputSchemaError: a file is not in its format, or a required column is missing or
            mistyped.

    """
    for path in paths:
        if not cr.is_uri(path) and not os.path.exists(path):
            raise InputNotFoundError(f"input {path} does not exist; check --batches")
    if fmt != "delta":  # a Delta table's files are those its log names
        paths = followed_paths(paths, fmt)
    if fmt == "parquet":
        return _read_parquet(spark, paths)
    if fmt == "delta":
        return _read_delta(spark, paths)
    if fmt == "json":
        df = cr.read_json_lines(spark, paths, CONTRACT, REQUIRED_INPUT_COLUMNS, line_numbers=True)
        return to_canonical(_with_source(_with_file_id(df)), text_input=True, keep=_FILE_ID)
    if fmt == "csv":
        df = cr.read_csv_table(spark, paths, CONTRACT)
        return to_canonical(_with_source(_with_file_id(df)), text_input=True, keep=_FILE_ID)
    raise InputSchemaError(f"unknown tabular format {fmt!r}; expected one of {FORMATS}")
