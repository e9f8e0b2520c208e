"""The only code that writes: Delta tables through Spark, or through delta-rs without Spark Delta.

Both writers replace the rows of one run (`run_id = X`) and leave every other run's rows alone, so
re-running the same run never appends twice. Both pin the table's contract schema (names, types,
nullability) before writing.

delta-rs path: the executors write the rows as Parquet into a staging folder, then the driver
streams those files through Arrow into `write_deltalake` batch by batch, so driver memory stays
flat however many rows a table gets (no collect, no toPandas).

Concurrent runs: Delta's optimistic concurrency lets runs of different run ids commit to one table
at once (their predicates touch disjoint rows). A commit that conflicts (two writers of the same
run id, or two runs creating a table at once) is retried against the new table version: the retry
replaces that run's rows again, so rows are never doubled.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pyarrow as pa
import pyarrow.dataset as pads
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from eos_audit.errors import SinkError
from eos_audit.session import default_parallelism
from eos_audit.sinks.delta_reader import table_location, utc_arrow_schema
from eos_audit.sources.files import filesystems as fsys
from eos_audit.sql_text import cast_as, cast_text, ident, sql_type, string_literal

log = logging.getLogger(__name__)

COMMIT_ATTEMPTS = 8


def _is_conflict(exc: Exception) -> bool:
    """A lost optimistic-concurrency race (delta-rs CommitFailedError, Delta's Concurrent*)."""
    name = type(exc).__name__
    text = str(exc)
    return (
        name == "CommitFailedError"
        or "Concurrent" in name
        or "io.delta.exceptions.Concurrent" in text
        or "DELTA_CONCURRENT" in text
        or "already exists" in text
        and "_delta_log" in text
    )


def with_commit_retries(commit: Callable[[], None], table: str) -> None:
    """Run a commit, again (with a jittered back-off) while it loses a concurrency race."""
    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        try:
            commit()
            return
        except Exception as exc:
            if attempt == COMMIT_ATTEMPTS or not _is_conflict(exc):
                raise
            log.info("%s: concurrent commit, retrying (%d/%d)", table, attempt, COMMIT_ATTEMPTS)
            time.sleep(random.uniform(0.05, 0.2) * attempt)  # noqa: S311 - jitter, not crypto


class TableWriter(Protocol):
    """Writes one run's rows of a table."""

    name: str

    def location(self, table: str) -> str:
        """Where `table` is: a path under the warehouse, or a catalog table name."""
        ...

    def replace_run(self, table: str, df: DataFrame, schema: T.StructType, run_id: str) -> str:
        """Replace the rows of `run_id` in `table` by `df`; return where the table is."""
        ...

    def replace_run_rows(
        self, table: str, rows: list[tuple], schema: T.StructType, run_id: str
    ) -> str:
        """Replace the rows of `run_id` by a few rows made on the driver (the run's record)."""
        ...

    def replace_runs(
        self, tables: list[TableRows], run_id: str, on_written: Callable[[str, str], None]
    ) -> dict[str, str]:
        """Replace the rows of `run_id` in several tables, in order.

        `on_written(table, where)` runs after each table's commit; returns where each table is.
        """
        ...


@dataclass(frozen=True)
class TableRows:
    """One table's rows of a run: a DataFrame, or None when known to be empty.

    Rows the driver made already (`driver_rows`: input_files has one per input file) go straight
    into the table, as the run's record does, instead of through a Spark job.
    `per_input_record`: the table has a row per record of an input (consumer_offsets, a row per
    offset commit), so its rows may be many; a writer that stages tables together keeps it apart
    from the tables whose rows are few (`DeltaRsWriter.replace_runs`).
    """

    table: str
    df: DataFrame | None
    schema: T.StructType
    driver_rows: list[tuple] | None = None
    per_input_record: bool = False

    def rows_known(self) -> list[tuple] | None:
        """The rows to write without Spark: the driver's, or none at all; None for a DataFrame."""
        if self.df is not None:
            return None
        return self.driver_rows or []


def _replace_each(
    writer: TableWriter,
    tables: list[TableRows],
    run_id: str,
    on_written: Callable[[str, str], None],
) -> dict[str, str]:
    """`replace_runs` as one `replace_run` per table."""
    out = {}
    for t in tables:
        rows = t.rows_known()
        if rows is not None:
            out[t.table] = writer.replace_run_rows(t.table, rows, t.schema, run_id)
        else:
            out[t.table] = writer.replace_run(t.table, t.df, t.schema, run_id)
        on_written(t.table, out[t.table])
    return out


def _conform(df: DataFrame, schema: T.StructType) -> DataFrame:
    """Select the contract's columns in order, cast to the contract's types."""
    return df.selectExpr(*[cast_as(f) for f in schema.fields])


def _delta_rs_run_predicate(run_id: str) -> str:
    """The rows of `run_id`, as delta-rs's overwrite predicate (standard SQL: a quote doubled)."""
    return "run_id = '" + run_id.replace("'", "''") + "'"


def spark_run_predicate(run_id: str) -> str:
    """The rows of `run_id`, as the Spark writer's replaceWhere.

    Spark's parser reads backslash escapes and takes `'a''b'` for two literals joined ('ab'), so
    the run id is escaped its way, not delta-rs's (`_delta_rs_run_predicate`).
    """
    return f"run_id = {string_literal(run_id)}"


def _create_with_contract(spark: SparkSession, name: str, schema: T.StructType) -> None:
    """Create the Delta table `name` with the contract's columns unless it exists.

    A table Spark's DataFrameWriter creates gets every column nullable (measured with delta-spark
    4.4.0: the contract's NOT NULL columns were lost), where delta-rs keeps them; created here
    first, the table has the contract's nullability whichever writer makes it.
    """
    columns = ", ".join(
        f"{ident(f.name)} {sql_type(f.dataType)}{'' if f.nullable else ' NOT NULL'}"
        for f in schema.fields
    )
    spark.sql(f"CREATE TABLE IF NOT EXISTS {name} ({columns}) USING delta")


def _absolute(path: str) -> str:
    """`path` made absolute on the driver, unless it is a URI.

    Delta takes ``delta.`<path>` `` for a table path only when the path is absolute: a relative
    one is read as a table of a schema named delta, which does not exist (measured).
    """
    if fsys.is_uri(path) or ":/" in path:
        return path
    return str(Path(path).absolute())


@dataclass
class SparkDeltaWriter:
    """Spark's own Delta data source (Databricks, or spark-submit with delta-spark)."""

    warehouse: str
    catalog_schema: str = ""
    name: str = "spark-delta"

    def location(self, table: str) -> str:
        """A catalog table name (catalog_schema.table) or a path under the warehouse."""
        if self.catalog_schema:
            return f"{self.catalog_schema}.{table}"
        return table_location(self.warehouse, table)

    def replace_run(self, table: str, df: DataFrame, schema: T.StructType, run_id: str) -> str:
        """Overwrite only this run's rows (replaceWhere), creating the table on first use."""
        writer = (
            _conform(df, schema)
            .write.format("delta")
            .mode("overwrite")
            .option("replaceWhere", spark_run_predicate(run_id))
            # A newer eos-audit may add (nullable) columns to a table an older one created.
            .option("mergeSchema", "true")
        )
        target = self.location(table)
        name = target if self.catalog_schema else f"delta.{ident(_absolute(target))}"
        try:
            with_commit_retries(
                lambda: _create_with_contract(df.sparkSession, name, schema), target
            )
            if self.catalog_schema:
                with_commit_retries(lambda: writer.saveAsTable(target), target)
            else:
                with_commit_retries(lambda: writer.save(target), target)
        except Exception as exc:
            uris = fsys.missing_connector(str(exc))
            if uris is None:
                raise
            # A warehouse in a scheme the cluster has no connector for (s3:// beside hadoop-aws's
            # s3a://): the user's to fix, in one line rather than a JVM trace.
            raise SinkError(
                f"cannot write {target}: Spark has no filesystem connector for {uris} in this "
                "session; give --warehouse in the scheme of the cluster's connector (s3a:// with "
                "hadoop-aws, s3:// on EMR), or write with delta-rs (output.writer = 'delta-rs')"
            ) from exc
        return target

    def replace_run_rows(
        self, table: str, rows: list[tuple], schema: T.StructType, run_id: str
    ) -> str:
        """Driver-made rows through `replace_run`."""
        spark = SparkSession.getActiveSession()
        return self.replace_run(table, spark.createDataFrame(rows, schema), schema, run_id)

    def replace_runs(
        self, tables: list[TableRows], run_id: str, on_written: Callable[[str, str], None]
    ) -> dict[str, str]:
        """One replaceWhere write per table (Spark's Delta writer stages nothing itself)."""
        return _replace_each(self, tables, run_id, on_written)


@dataclass
class DeltaRsWriter:
    """delta-rs (`deltalake`): standard Delta tables without Delta jars in the JVM."""

    warehouse: str
    name: str = "delta-rs"
    # Where the rows are staged before they are streamed into the table: the run's own folder
    # (eos_audit.sinks.staging), so a killed run's leftovers are found and removed.
    staging_dir: str = ""

    def location(self, table: str) -> str:
        """The table's directory (or URI) under the warehouse."""
        return table_location(self.warehouse, table)

    def replace_run(self, table: str, df: DataFrame, schema: T.StructType, run_id: str) -> str:
        """Stage on the executors as Parquet, then stream into the Delta table."""
        staging = self._staging(table)
        try:
            _conform(df, schema).write.mode("overwrite").parquet(staging)
            return self._stream(table, staging, schema, run_id, lambda batch: batch.columns)
        finally:
            fsys.remove_tree(staging)

    def replace_runs(
        self, tables: list[TableRows], run_id: str, on_written: Callable[[str, str], None]
    ) -> dict[str, str]:
        """Stage the tables in one Spark job (or two), then stream each into its table in order.

        The tables' rows go into one Parquet dataset partitioned by table, each table's columns
        packed in a struct column of its own: one job instead of one per table (each job is a
        scheduling round trip however few the rows). Each packed row also carries the other
        tables' columns, null, and Parquet writes a null to each of their leaf columns: the
        tables with a row per input record (`TableRows.per_input_record`) are packed apart, in
        a job of their own. Measured on 2 cores, the benchmark's 1M offset commits: staging and
        streaming every table took 5.8-6.2 s packed together, 4.1 s packed apart.
        """
        staged = [t for t in tables if t.df is not None]
        if len(staged) < 2:
            return _replace_each(self, tables, run_id, on_written)
        groups = [
            group
            for group in (
                [t for t in staged if not t.per_input_record],
                [t for t in staged if t.per_input_record],
            )
            if group
        ]
        stagings: list[str] = []
        picked: dict[str, tuple[str, str]] = {}
        out = {}
        try:
            # Every table staged before the first commit: a run that fails staging leaves
            # every table as it was.
            for group in groups:
                stagings.append(self._staging("tables"))
                for table, column in _stage_packed(group, stagings[-1]).items():
                    picked[table] = (fsys.join(stagings[-1], f"_table={table}"), column)
            for t in tables:
                rows = t.rows_known()
                if rows is not None:
                    out[t.table] = self.replace_run_rows(t.table, rows, t.schema, run_id)
                else:
                    folder, name = picked[t.table]
                    out[t.table] = self._stream(
                        t.table,
                        folder,
                        t.schema,
                        run_id,
                        lambda batch, name=name: batch.column(name).flatten(),
                    )
                on_written(t.table, out[t.table])
        finally:
            for staging in stagings:
                fsys.remove_tree(staging)
        return out

    def _staging(self, name: str) -> str:
        """A new folder for one write's staged Parquet: a local path, or a URI on the store."""
        root = self.staging_dir or fsys.join(self.warehouse, "_staging")
        return fsys.join(root, f"{name}-{uuid.uuid4().hex}")

    def _stream(
        self,
        table: str,
        folder: str,
        schema: T.StructType,
        run_id: str,
        columns: Callable[[pa.RecordBatch], list[pa.Array]],
    ) -> str:
        """Stream staged Parquet (`columns` picks the table's columns of a batch) into the table.

        Driver memory stays flat: batch by batch, never the whole table.
        """
        from deltalake import write_deltalake

        target = self.location(table)
        arrow_schema = utc_arrow_schema(schema)
        dataset = _staged_dataset(folder)

        def batches():
            if dataset is None:
                return
            for batch in dataset.to_batches(batch_size=65_536):
                # Spark writes timestamps as INT96 and marks every column nullable; the cast
                # pins the contract's Arrow types and nullability.
                arrays = columns(batch)
                yield pa.RecordBatch.from_arrays(
                    [arrays[i].cast(arrow_schema.field(i).type) for i in range(len(arrow_schema))],
                    schema=arrow_schema,
                )

        def commit() -> None:
            # A fresh reader per attempt: the staged files stay until the commit succeeds.
            write_deltalake(
                target,
                pa.RecordBatchReader.from_batches(arrow_schema, batches()),
                mode="overwrite",
                predicate=_delta_rs_run_predicate(run_id),
                # A newer eos-audit may add (nullable) columns to a table an older one created.
                schema_mode="merge",
                storage_options=fsys.delta_storage_options(target),
            )

        _commit(commit, target)
        return target

    def replace_run_rows(
        self, table: str, rows: list[tuple], schema: T.StructType, run_id: str
    ) -> str:
        """A few driver-made rows straight into the table: no Spark job for a one-row record."""
        from deltalake import write_deltalake

        target = self.location(table)
        arrow_schema = utc_arrow_schema(schema)
        data = pa.Table.from_pylist(
            [dict(zip(schema.fieldNames(), row, strict=True)) for row in rows], schema=arrow_schema
        )
        _commit(
            lambda: write_deltalake(
                target,
                data,
                mode="overwrite",
                predicate=_delta_rs_run_predicate(run_id),
                schema_mode="merge",
                storage_options=fsys.delta_storage_options(target),
            ),
            target,
        )
        return target


def _stage_packed(tables: list[TableRows], staging: str) -> dict[str, str]:
    """Write `tables`' rows in one Spark job into `staging`, partitioned by `_table`.

    Returns:
        Each table's struct column in the staged files.
    """
    column = {t.table: f"_t{i}" for i, t in enumerate(tables)}
    # SQL text: one call into Spark per table, not a few per column (eos_audit.sql_text).
    nothing = {t.table: cast_text("NULL", t.schema) for t in tables}
    parts = []
    for t in tables:
        fields = ", ".join(f"'{f.name}', {cast_text(ident(f.name), f.dataType)}" for f in t.schema)
        row = f"named_struct({fields})"
        parts.append(
            t.df.selectExpr(
                f"'{t.table}' AS _table",
                *[
                    f"{row if other == t.table else nothing[other]} AS {name}"
                    for other, name in column.items()
                ],
            )
        )
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    # At most one task per core: every task of a union deserializes all of the tables' plans
    # (50 ms a task on 2 cores; 30 tasks and 1.5 CPU-s for a run with the processing audit's
    # tables and a shuffle partition per core).
    union = union.coalesce(default_parallelism(union.sparkSession))
    union.write.mode("overwrite").partitionBy("_table").parquet(staging)
    return column


def _staged_dataset(folder: str) -> pads.Dataset | None:
    """The Parquet files Spark staged in a folder (a local path or a URI); None for none."""
    try:
        names = sorted(n for n in fsys.files_in(folder) if n.endswith(".parquet"))
    except (FileNotFoundError, NotADirectoryError):  # a DataFrame of no partitions wrote none
        return None
    if not names:
        return None
    if not fsys.is_remote(folder):
        return pads.dataset([fsys.join(folder, n) for n in names], format="parquet")
    fs, inner = fsys.resolve(folder)
    return pads.dataset([f"{inner}/{n}" for n in names], format="parquet", filesystem=fs)


def _commit(commit: Callable[[], None], target: str) -> None:
    """A delta-rs commit with retries; an existing table of another schema is the user's to fix."""
    try:
        with_commit_retries(commit, target)
    except Exception as exc:
        if "schema" in str(exc).lower() and fsys.is_delta_table(target):
            raise SinkError(
                f"cannot write {target}: the existing Delta table has another schema ({exc}); "
                "write to a new --warehouse or migrate the table"
            ) from exc
        raise


def choose_writer(
    spark: SparkSession,
    warehouse: str,
    writer: str,
    catalog_schema: str,
    has_delta: bool,
    staging_dir: str = "",
) -> TableWriter:
    """Pick the writer: Spark's Delta when the session has it (or when asked), else delta-rs.

    Raises:
        SinkError: `spark` was asked for but the session has no Delta Lake, or a catalog schema
            was given without Spark Delta.

    """
    if writer == "spark" or (writer == "auto" and has_delta):
        if not has_delta:
            raise SinkError(
                "output.writer = 'spark' but this Spark session has no Delta Lake; run through "
                "spark-submit.sh (delta-spark package) or on Databricks, or use writer 'auto'"
            )
        return SparkDeltaWriter(warehouse=warehouse, catalog_schema=catalog_schema)
    if catalog_schema:
        raise SinkError(
            "output.catalog_schema needs Spark's Delta writer (Databricks or delta-spark); "
            "without it, write paths under --warehouse"
        )
    return DeltaRsWriter(warehouse=warehouse, staging_dir=staging_dir)
