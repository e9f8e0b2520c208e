"""Where a run's tables are, and reading them with bounded queries only.

The report never reads batch data: it reads the output tables of one run (findings, summaries,
transactions...), and every query it sends is an aggregate or ends in `limit()`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eos_audit.errors import InputNotFoundError
from eos_audit.findings import SEVERITY_ORDER
from eos_audit.schemas import OUTPUT_TABLES
from eos_audit.sinks.delta_reader import read_delta, table_location, warehouse_table
from eos_audit.sinks.run_status import FINISHED
from eos_audit.sources.files import filesystems as fsys


@dataclass(frozen=True)
class TableLocation:
    """Where the output tables are: paths under a warehouse, or a catalog schema."""

    warehouse: str
    catalog_schema: str = ""

    def of(self, table: str) -> str:
        """The table's catalog name (`catalog.schema.table`) or its directory."""
        if self.catalog_schema:
            return f"{self.catalog_schema}.{table}"
        return table_location(self.warehouse, table)


def read_table(spark: SparkSession, where: TableLocation, table: str) -> DataFrame:
    """One output table in its contract's columns; empty when it was never written.

    Read as the pipeline reads its own tables (`sinks.delta_reader`): a catalog table through
    Spark; a path through Spark's Delta source when the session has Delta, else delta-rs lists
    the table's current files and Spark reads them.

    Args:
        spark: the session.
        where: the tables' location.
        table: an output table name (`eos_audit.schemas.OUTPUT_TABLES`).

    Returns:
        The table, read on the executors, with exactly the contract's columns.
    """
    schema: T.StructType = OUTPUT_TABLES[table]
    location = where.of(table)
    if where.catalog_schema:
        if not spark.catalog.tableExists(location):
            return spark.createDataFrame([], schema)
        df = read_delta(spark, location)
    elif not fsys.is_delta_table(location):
        return spark.createDataFrame([], schema)
    else:
        df = warehouse_table(spark, location, schema)
    # Columns added to a contract after a table was written (findings.batch_time) read as null.
    return df.select(
        *[
            F.col(f.name) if f.name in df.columns else F.lit(None).cast(f.dataType).alias(f.name)
            for f in schema.fields
        ]
    )


def batch_ms() -> Column:
    """A finding's batch time in epoch ms (UTC), also for rows written before `batch_time` existed.

    The report brings times to the driver as epoch ms: a collected TIMESTAMP becomes a datetime in
    the driver process's local zone, whatever the session's.
    """
    return F.coalesce(F.unix_millis(F.col("batch_time")), F.col("batch_timestamp"))


def resolve_run_id(spark: SparkSession, where: TableLocation, run_id: str | None) -> str:
    """The run to report: `run_id` when it is recorded, else the latest finished run.

    "Latest" is the run that finished last (run ids given by hand need not sort by date) among
    those whose tables are complete (`run_status.FINISHED`: not RUNNING, not FAILED).

    Raises:
        InputNotFoundError: no such run, or no finished run at all, in `audit_runs`.
    """
    runs = read_table(spark, where, "audit_runs")
    if run_id is not None:
        if runs.where(F.col("run_id") == run_id).limit(1).count() == 0:
            raise InputNotFoundError(
                f"run {run_id!r} is not recorded in {where.of('audit_runs')}; "
                "omit --run-id for the latest run"
            )
        return run_id
    latest = (
        runs.where(F.col("status").isin(*FINISHED))
        .orderBy(F.col("finished_at").desc(), F.col("run_id").desc())
        .select("run_id")
        .limit(1)
        .collect()
    )
    if not latest:
        raise InputNotFoundError(
            f"no finished run in {where.of('audit_runs')}: run `eos-audit audit` first"
        )
    return latest[0]["run_id"]


@dataclass(frozen=True)
class RunTables:
    """The output tables, each restricted to one run."""

    run_id: str
    audit_runs: DataFrame
    findings: DataFrame
    quarantine: DataFrame
    transactions: DataFrame
    partition_summary: DataFrame
    producer_sessions: DataFrame
    list_offsets_errors: DataFrame
    # Written by runs since the processing audit; an older warehouse reads it as empty.
    consumer_offsets: DataFrame


def run_tables(spark: SparkSession, where: TableLocation, run_id: str) -> RunTables:
    """Every table the report reads, filtered to `run_id` (lazy: nothing is read yet)."""

    def of_run(table: str) -> DataFrame:
        return read_table(spark, where, table).where(F.col("run_id") == run_id)

    return RunTables(
        run_id=run_id,
        audit_runs=of_run("audit_runs"),
        findings=of_run("findings"),
        quarantine=of_run("quarantine"),
        transactions=of_run("transactions"),
        partition_summary=of_run("partition_summary"),
        producer_sessions=of_run("producer_sessions"),
        list_offsets_errors=of_run("list_offsets_errors"),
        consumer_offsets=of_run("consumer_offsets"),
    )


def severity_rank(col_name: str = "severity") -> Column:
    """0 for CRITICAL ... 3 for INFO (4 for anything else), to sort the worst first."""
    rank = F.lit(len(SEVERITY_ORDER))
    for index, severity in reversed(list(enumerate(SEVERITY_ORDER))):
        rank = F.when(F.col(col_name) == severity, F.lit(index)).otherwise(rank)
    return rank


def key_filter(col_names: Sequence[str], keys: Sequence[tuple]) -> Column:
    """True for rows whose columns equal one of `keys` (a short list: the report's selection)."""
    condition = F.lit(False)
    for key in keys:
        match = F.lit(True)
        for col_name, value in zip(col_names, key, strict=True):
            match = match & (F.col(col_name) == F.lit(value))
        condition = condition | match
    return condition


def first_rows_per_group(
    df: DataFrame, group_cols: Sequence[str], order: Sequence[Column], n: int
) -> DataFrame:
    """The first `n` rows of each group in `order`.

    A row_number filter alone lets Spark keep only the top `n` of each group in every task
    before the shuffle (WindowGroupLimit), so a group of millions of rows costs a scan, never a
    shuffle and sort of all of them. Group sizes come from `group_counts`, an aggregate.
    """
    ordered = Window.partitionBy(*group_cols).orderBy(*order)
    return df.withColumn("_n", F.row_number().over(ordered)).where(F.col("_n") <= n).drop("_n")


def group_counts(df: DataFrame, group_cols: Sequence[str], max_groups: int) -> dict[tuple, int]:
    """Rows per group, for at most `max_groups` groups (the caller filtered to its selection)."""
    rows = bounded_rows(df.groupBy(*group_cols).count(), max_groups)
    return {tuple(r[c] for c in group_cols): r["count"] for r in rows}


def bounded_rows(df: DataFrame, n: int) -> list[dict]:
    """At most `n` rows as dictionaries: the report's only way of bringing rows to the driver."""
    return [row.asDict(recursive=True) for row in df.limit(max(n, 0)).collect()]


def rows_and_total(df: DataFrame, n: int) -> tuple[list[dict], int]:
    """The first `n` rows and how many there are: one query unless there are more than `n`."""
    rows = bounded_rows(df, n + 1)
    if len(rows) <= n:
        return rows, len(rows)
    return rows[:n], df.count()
