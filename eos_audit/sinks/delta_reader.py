"""Reading Delta tables: eos-audit's own (the run history, `--since-state`, the report), and inputs.

Writing is `sinks.delta`'s; this is its counterpart, for tables wherever they were written: through
Spark when the session has Delta (Databricks, spark-submit with delta-spark), else by the file list
delta-rs resolves, read by Spark as Parquet on the executors.

The warehouse's own tables on an object store (`warehouse_table`) are read without Spark's
connector where the session has no Delta: delta-rs wrote them without one, so the session that
wrote a night can read it back (`--since-state`, the report). Their Parquet files are read by
pyarrow on the executors, as eos-audit reads Kafka's files there (`sources.files.file_source`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from eos_audit.errors import InputSchemaError
from eos_audit.sources.files import filesystems as fsys
from eos_audit.sources.files.file_source import FileFormat, load_files


def table_location(warehouse: str, table: str) -> str:
    """`<warehouse>/<table>`: a URI joined as text (`s3://b/wh/findings`), a local path by pathlib.

    Never a URI through `pathlib`, which reads `s3://b/wh` as the local path `s3:/b/wh`.
    """
    if fsys.is_uri(warehouse):
        return fsys.join(warehouse, table)
    return str(Path(warehouse) / table)


def utc_arrow_schema(schema: T.StructType) -> pa.Schema:
    """Spark's Arrow schema for `schema`, timestamps in UTC, on every pyspark the package admits."""
    try:
        return to_arrow_schema(schema, timezone="UTC")
    except TypeError:  # before pyspark 4.2: no `timezone`, and timestamps are UTC by default
        return to_arrow_schema(schema)


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
    _refuse_unsupported(table, path)
    files = files_as_given(path, table.table_uri, table.file_uris())
    if not files:
        return spark.createDataFrame([], empty_schema)
    return spark.read.parquet(*files)


def _refuse_unsupported(table: object, path: str) -> None:
    """Refuse a table whose files do not hold its rows as they are (features, partitions).

    Raises:
        InputSchemaError: naming the reader features or the partitioning.
    """
    features = set(table.protocol().reader_features or [])
    unsupported = features & {"deletionVectors", "columnMapping", "v2Checkpoint"}
    if unsupported:
        raise InputSchemaError(
            f"Delta table {path} uses reader features {sorted(unsupported)} that eos-audit can "
            "only read through Spark with Delta Lake; run with delta-spark (spark-submit.sh) or on "
            "Databricks"
        )
    if table.file_uris() and table.metadata().partition_columns:
        raise InputSchemaError(
            f"Delta table {path} is partitioned; read it through Spark with Delta Lake or export "
            "it unpartitioned"
        )


def files_as_given(path: str, table_uri: str, files: list[str]) -> list[str]:
    """A Delta table's data files named under `path` as the user gave it.

    delta-rs names them under its own spelling of the table's URI (`s3://` for `s3a://`, an
    absolute path for a relative one); Spark reads them through the filesystem connector of their
    scheme, and the cluster's is the one of the URI the user gave (hadoop-aws serves `s3a://`).
    """
    root = table_uri.rstrip("/")
    given = path.rstrip("/")
    return [given + f[len(root) :] if f.startswith(root + "/") else f for f in files]


class DeltaDataFileFormat(FileFormat):
    """A Delta table's Parquet data files, read by pyarrow into the table's contract schema.

    Options: `schema`, the contract as Spark's JSON. A column the file lacks (added to the
    contract after the file was written) is null; timestamps are cast to the contract's UTC
    microseconds (delta-spark writes INT96, which pyarrow reads as nanoseconds).
    """

    format_name: ClassVar[str] = "delta_data_files"

    def schema(self) -> T.StructType:
        """The contract schema the files are read in."""
        return T.StructType.fromJson(json.loads(self.options["schema"]))

    def parse(self, file: dict, data: bytes | memoryview) -> Iterator[pa.RecordBatch]:
        """The file's rows, batch by batch, in the contract's columns and types."""
        import pyarrow.parquet as pq

        target = utc_arrow_schema(self.schema())
        parquet = pq.ParquetFile(pa.BufferReader(data))
        for batch in parquet.iter_batches(batch_size=65_536):
            arrays = [
                batch.column(f.name).cast(f.type)
                if f.name in batch.schema.names
                else pa.nulls(batch.num_rows, f.type)
                for f in target
            ]
            yield pa.RecordBatch.from_arrays(arrays, schema=target)

    def unreadable(self, file: dict, reason: str) -> Iterator[pa.RecordBatch]:
        """Fail the read: a table's rows are not optional.

        The run checked the table at its start, so the file changed since (or the store fails).
        """
        raise OSError(f"cannot read {file['path']}, a data file of a Delta table: {reason}")


def warehouse_table(spark: SparkSession, path: str, schema: T.StructType) -> DataFrame:
    """One of eos-audit's own tables (by path or URI) in `schema`, read on the executors.

    Through Spark's Delta reader where the session has Delta; a local table by the files
    delta-rs lists (`delta_dataframe`); a table on an object store by the files delta-rs lists,
    read by pyarrow on the executors (`DeltaDataFileFormat`), so that no Spark connector is
    needed to read back what delta-rs wrote without one.

    Raises:
        InputSchemaError: the table needs a reader feature delta-rs file lists cannot honour.
    """
    from eos_audit.session import session_has_delta

    if session_has_delta(spark) or not fsys.is_remote(path):
        return delta_dataframe(spark, path, schema)
    from deltalake import DeltaTable

    table = DeltaTable(path, storage_options=fsys.delta_storage_options(path))
    _refuse_unsupported(table, path)
    files = [{"path": f} for f in files_as_given(path, table.table_uri, table.file_uris())]
    return load_files(spark, DeltaDataFileFormat, files, schema=json.dumps(schema.jsonValue()))


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
