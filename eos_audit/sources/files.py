"""Readers for record batches already in tabular form: Parquet, JSON lines, CSV and Delta tables."""

from __future__ import annotations

import logging
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eos_audit.errors import InputNotFoundError, InputSchemaError
from eos_audit.schemas import RECORD_BATCH_COLUMNS
from eos_audit.session import session_has_delta
from eos_audit.sources.canonical import SOURCE_ERROR, to_canonical

log = logging.getLogger(__name__)

TABULAR_FORMATS = ("parquet", "json", "csv", "delta")
_SUFFIXES = {
    ".parquet": "parquet",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
    ".csv": "csv",
}


def detect_format(path: str) -> str:
    """Guess the input format from a path: a Delta table, a Kafka log tree, or a file suffix.

    Raises:
        InputNotFoundError: the path does not exist or its format cannot be told.

    """
    p = Path(path)
    if not p.exists():
        raise InputNotFoundError(f"input {path} does not exist; check --batches")
    if p.is_dir():
        if (p / "_delta_log").is_dir():
            return "delta"
        files = [f for f in p.rglob("*") if f.is_file()]
        if any(f.suffix == ".log" and f.stem.isdigit() for f in files):
            return "segments"
        if any(f.name.endswith(".txt") or f.name.endswith(".dump") for f in files):
            return "dump-log"
        for f in files:
            if f.suffix in _SUFFIXES:
                return _SUFFIXES[f.suffix]
        raise InputNotFoundError(
            f"cannot tell the format of directory {path}: no Delta log, segment, Parquet, JSON or "
            "CSV files in it; pass --batches-format"
        )
    if p.suffix in _SUFFIXES:
        return _SUFFIXES[p.suffix]
    if p.suffix in (".txt", ".dump"):
        return "dump-log"
    raise InputNotFoundError(
        f"cannot tell the format of {path} from its name; pass --batches-format"
    )


def _file_source(with_row_index: bool) -> Column:
    path = F.col("_metadata.file_path")
    if with_row_index:
        return F.concat(path, F.lit(":row "), F.col("_metadata.row_index").cast("string"))
    return path


def _with_source(df: DataFrame, default: Column) -> DataFrame:
    if "source" in df.columns:
        return df.withColumn("source", F.coalesce(F.col("source").cast("string"), default))
    return df.withColumn("source", default)


def _string_schema(extra: list[str]) -> T.StructType:
    names = [c.name for c in RECORD_BATCH_COLUMNS] + extra
    return T.StructType([T.StructField(n, T.StringType(), True) for n in names])


def _delta_dataframe(spark: SparkSession, path: str) -> DataFrame:
    """Read a Delta table on the executors: through Spark when it has Delta, else by file list.

    Without Delta in the session, delta-rs resolves the table's current files and Spark reads them
    as Parquet. Features that change what a reader must do (deletion vectors, column mapping) are
    refused with a clear message instead of being read wrongly.
    """
    if session_has_delta(spark):
        return spark.read.format("delta").load(path)
    from deltalake import DeltaTable

    table = DeltaTable(path)
    protocol = table.protocol()
    features = set(protocol.reader_features or [])
    unsupported = features & {"deletionVectors", "columnMapping", "v2Checkpoint"}
    if unsupported:
        raise InputSchemaError(
            f"Delta table {path} uses reader features {sorted(unsupported)} that eos-audit can "
            "only read through Spark with Delta Lake; run with delta-spark (spark-submit.sh) or on "
            "Databricks"
        )
    files = table.file_uris()
    if not files:
        return spark.createDataFrame(
            [],
            T.StructType([T.StructField(c.name, c.data_type, True) for c in RECORD_BATCH_COLUMNS]),
        )
    if table.metadata().partition_columns:
        raise InputSchemaError(
            f"Delta table {path} is partitioned; read it through Spark with Delta Lake or export "
            "it unpartitioned"
        )
    return spark.read.parquet(*files)


def read_delta(spark: SparkSession, location: str) -> DataFrame:
    """Read an eos-audit output table (or any Delta table) wherever it was written.

    Args:
        spark: the session.
        location: a catalog table name (`catalog.schema.table`) or a Delta table path.

    Returns:
        The table as a DataFrame, read on the executors.
    """
    if "/" not in location and "." in location:
        return spark.read.table(location)
    return _delta_dataframe(spark, location)


def read_tabular(spark: SparkSession, paths: list[str], fmt: str) -> DataFrame:
    """Read record batches from Parquet, JSON lines, CSV or Delta into the canonical schema.

    Args:
        spark: the session.
        paths: files or directories of one format.
        fmt: parquet, json, csv or delta.

    Returns:
        `to_canonical`'s output: canonical columns, `quarantine_reason`, `raw`.

    Raises:
        InputNotFoundError: a path does not exist.
        InputSchemaError: a required column is missing or mistyped.

    """
    for path in paths:
        if not Path(path).exists():
            raise InputNotFoundError(f"input {path} does not exist; check --batches")
    if fmt == "parquet":
        df = spark.read.parquet(*paths)
        return to_canonical(_with_source(df, _file_source(with_row_index=True)))
    if fmt == "delta":
        frames = [_with_source(_delta_dataframe(spark, p), F.lit(f"delta:{p}")) for p in paths]
        df = frames[0]
        for other in frames[1:]:
            df = df.unionByName(other, allowMissingColumns=True)
        return to_canonical(df)
    if fmt == "json":
        # Every value is read as text and parsed per row, so one bad value quarantines one row
        # instead of nulling it silently; the first line tells us which columns the file has.
        first = spark.read.text(paths).limit(1).select(F.json_object_keys("value")).head()
        keys = set(first[0] or []) if first else set()
        df = (
            spark.read.schema(_string_schema(["_corrupt_record"]))
            .option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", "_corrupt_record")
            .json(paths)
        )
        if first is not None:
            missing = [
                c.name for c in RECORD_BATCH_COLUMNS if not c.nullable and c.name not in keys
            ]
            if missing:
                raise InputSchemaError(
                    f"JSON input {paths[0]} is missing required column(s) {missing} (read from its "
                    "first line); the contract is schemas/record_batch.json"
                )
        df = df.withColumn(
            SOURCE_ERROR,
            F.when(F.col("_corrupt_record").isNotNull(), F.lit("malformed JSON line")),
        ).drop("_corrupt_record")
        return to_canonical(_with_source(df, _file_source(with_row_index=False)), text_input=True)
    if fmt == "csv":
        # No schema inference (an extra pass, and silent nulls on bad values): every column is
        # read as text and parsed per row by to_canonical.
        df = spark.read.option("header", "true").csv(paths)
        return to_canonical(_with_source(df, _file_source(with_row_index=False)), text_input=True)
    raise InputSchemaError(f"unknown tabular format {fmt!r}; expected one of {TABULAR_FORMATS}")
