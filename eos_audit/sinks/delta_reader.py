"""Reading Delta tables: eos-audit's own (the run history, `--since-state`, the report), and inputs.

Writing is `sinks.delta`'s; this is its counterpart, for tables wherever they were written: through
Spark when the session has Delta (Databricks, spark-submit with delta-spark), else by the file list
delta-rs resolves, read by Spark as Parquet on the executors.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from eos_audit.errors import InputSchemaError
from eos_audit.sources.files import filesystems as fsys


def delta_dataframe(spark: SparkSession, path: str, empty_schema: T.StructType) -> DataFrame:
    """Read a Delta table on the executors: through Spark when it has Delta, else by file list.

    Without Delta in the session, delta-rs resolves the table's current files and Spark reads them
    as Parquet. Features that change what a reader must do (deletion vectors, column mapping) are
    refused with a clear message instead of being read wrongly.

    Args:
        spark: the session.
        path: the table's directory.
        empty_schema: the schema of the result when the table has no data file.

    Raises:
        InputSchemaError: the table needs a reader feature delta-rs file lists cannot honour.
    """
    from eos_audit.session import session_has_delta

    if session_has_delta(spark):
        return spark.read.format("delta").load(path)
    from deltalake import DeltaTable

    table = DeltaTable(path, storage_options=fsys.delta_storage_options(path))
    protocol = table.protocol()
    features = set(protocol.reader_features or [])
    unsupported = features & {"deletionVectors", "columnMapping", "v2Checkpoint"}
    if unsupported:
        raise InputSchemaError(
            f"Delta table {path} uses reader features {sorted(unsupported)} that eos-audit can "
            "only read through Spark with Delta Lake; run with delta-spark (spark-submit.sh) or on "
            "Databricks"
        )
    files = files_as_given(path, table.table_uri, table.file_uris())
    if not files:
        return spark.createDataFrame([], empty_schema)
    if table.metadata().partition_columns:
        raise InputSchemaError(
            f"Delta table {path} is partitioned; read it through Spark with Delta Lake or export "
            "it unpartitioned"
        )
    return spark.read.parquet(*files)


def files_as_given(path: str, table_uri: str, files: list[str]) -> list[str]:
    """A Delta table's data files named under `path` as the user gave it.

    delta-rs names them under its own spelling of the table's URI (`s3://` for `s3a://`, an
    absolute path for a relative one); Spark reads them through the filesystem connector of their
    scheme, and the cluster's is the one of the URI the user gave (hadoop-aws serves `s3a://`).
    """
    root = table_uri.rstrip("/")
    given = path.rstrip("/")
    return [given + f[len(root) :] if f.startswith(root + "/") else f for f in files]


def read_delta(spark: SparkSession, location: str) -> DataFrame:
    """Read an eos-audit output table (or any Delta table) wherever it was written.

    Args:
        spark: the session.
        location: a catalog table name (`catalog.schema.table`) or a Delta table path.

    Returns:
        The table as a DataFrame, read on the executors (an empty table without data files has
        no columns).
    """
    if "/" not in location and "." in location:
        return spark.read.table(location)
    return delta_dataframe(spark, location, T.StructType([]))
