"""The run's seeds: which producer state seeds tonight's audit, and what of the log it covers.

Every seed a run is given is read and checked here (`seed_inputs`): the `.snapshot` files of a
segment export, and each `--producer-state` path, a file in the producer_state contract or a
Delta table of an earlier run's state.

`--producer-state <warehouse>/producer_state` and `--since-state` read the state the latest
finished run ended in. Run ids are digests of a run's inputs (or names the user chose), so
"latest" is decided by `audit_runs.finished_at`, not by the run id: the `audit_runs` table next to
the state is read on the driver (one small row per run, no batch data). A state table without its
`audit_runs` is accepted only when it holds a single run, since nothing else says which is latest.

With `--since-state` the state also says where each partition's audited log ended
(`state_offset`): tonight's batches below it were audited by that run and are already inside the
state, so the replay skips them, as the broker's log loader replays only the log above the
snapshot it loaded (docs/nightly.md). They are counted in `batches_skipped`, so
`batches_read = batches_audited + batches_quarantined + batches_skipped`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eos_audit.errors import ConfigError, InputSchemaError
from eos_audit.schemas import AUDIT_RUNS, PRODUCER_STATE
from eos_audit.sinks.delta_reader import delta_dataframe, table_location, warehouse_table
from eos_audit.sinks.run_status import FINISHED
from eos_audit.sinks.warehouse import check_table
from eos_audit.sources.files import filesystems as fsys
from eos_audit.sources.formats import detect_format
from eos_audit.sources.tabular.producer_state import Keep, SeedRead, check_seeds, read_seed_files

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SeedState:
    """The state that seeds a run: its rows and the per-partition end of what it covers."""

    run_id: str
    seeds: DataFrame  # rows that passed eos_audit.sources.tabular.producer_state.check_seeds
    covered: DataFrame  # topic, partition, covered_end
    problems: DataFrame | None = None  # input, source, reason: rows that did not (quarantined)


def _read_delta(
    spark: SparkSession, location: str, columns: list[str], warehouse: bool = False
) -> DataFrame:
    """Columns of an eos-audit table, a path or a catalog name (the readers' one Delta reader).

    `warehouse`: the run's own warehouse's table, read as the run writes it (`warehouse_table`:
    no Spark connector needed on an object store); else an input, read by Spark's readers.
    """
    if "/" not in location and "." in location:
        return spark.read.table(location).select(*columns)
    schema = PRODUCER_STATE if "producer_id" in columns else AUDIT_RUNS
    if warehouse:
        return warehouse_table(spark, location, schema).select(*columns)
    empty = T.StructType([schema[c] for c in columns])
    return delta_dataframe(spark, location, empty).select(*columns)


def latest_finished_run(
    spark: SparkSession,
    audit_runs: str,
    exclude_run_id: str | None = None,
    warehouse: bool = False,
) -> str | None:
    """The run id of the latest finished run in an `audit_runs` table, other than `exclude_run_id`.

    A re-run of a night (same run id) is therefore seeded by the run before it, not by its own
    earlier attempt. FAILED and RUNNING runs never seed: their tables may be incomplete.
    `warehouse`: see `_read_delta`.
    """
    columns = ["run_id", "status", "finished_at"]
    runs = _read_delta(spark, audit_runs, columns, warehouse).where(F.col("status").isin(*FINISHED))
    if exclude_run_id is not None:
        runs = runs.where(F.col("run_id") != exclude_run_id)
    # One small row per run, never batch data.
    latest = runs.orderBy(F.col("finished_at").desc(), F.col("run_id").desc()).limit(1).collect()
    return latest[0]["run_id"] if latest else None


def state_of_run(
    spark: SparkSession, producer_state: str, run_id: str, warehouse: bool = False
) -> DataFrame:
    """The rows of one run in a `producer_state` Delta table (read on the executors).

    `warehouse`: see `_read_delta`.
    """
    table = _read_delta(spark, producer_state, PRODUCER_STATE.fieldNames(), warehouse)
    return table.where(F.col("run_id") == run_id)


def latest_state(
    spark: SparkSession,
    producer_state: str,
    exclude_run_id: str | None = None,
    keep: Keep | None = None,
    warehouse: bool = False,
) -> SeedState | None:
    """The latest finished run's state in a `producer_state` table, or None when there is none.

    Args:
        spark: the session.
        producer_state: the table (a path, or catalog_schema.producer_state).
        exclude_run_id: the run being made, which must not seed itself.
        keep: see `check_seeds`.
        warehouse: the table is the run's own warehouse's (`--since-state`), read as the run
            writes it; else a `--producer-state` input (see `_read_delta`).

    Raises:
        ConfigError: the table has rows of several runs but no `audit_runs` table beside it to
            tell which is the latest.
    """
    if "/" in producer_state or fsys.is_delta_table(producer_state):
        audit_runs = fsys.join(fsys.dirname(producer_state.rstrip("/")), "audit_runs")
        has_runs = fsys.is_delta_table(audit_runs)
    else:  # catalog_schema.producer_state
        audit_runs = producer_state.rsplit(".", 1)[0] + ".audit_runs"
        has_runs = spark.catalog.tableExists(audit_runs)
    if has_runs:
        run_id = latest_finished_run(spark, audit_runs, exclude_run_id, warehouse)
    else:
        # Distinct run ids of a state table: one per run, a handful of rows.
        ids = [
            r["run_id"]
            for r in _read_delta(spark, producer_state, ["run_id"], warehouse).distinct().collect()
            if r["run_id"] != exclude_run_id
        ]
        if len(ids) > 1:
            raise ConfigError(
                f"{producer_state} holds the state of {len(ids)} runs and there is no audit_runs "
                "table beside it to tell which finished last: pass one run's state as a Parquet "
                "file to --producer-state"
            )
        run_id = ids[0] if ids else None
    if run_id is None:
        return None
    # The warehouse's own state is input too: a row damaged since it was written (or written by
    # a faulty version) is quarantined, not trusted.
    checked = check_seeds(
        state_of_run(spark, producer_state, run_id, warehouse),
        location=F.format_string(
            "%s run %s: producer %s of %s-%s",
            F.lit(producer_state),
            F.lit(run_id),
            F.coalesce(F.col("producer_id").cast("string"), F.lit("null")),
            F.coalesce(F.col("topic"), F.lit("null")),
            F.coalesce(F.col("partition").cast("string"), F.lit("null")),
        ),
        keep=keep,
    )
    seeds = checked.seeds
    covered = (
        seeds.groupBy("topic", "partition")
        .agg(F.max("state_offset").alias("covered_end"))
        .where(F.col("covered_end").isNotNull())
    )
    return SeedState(run_id=run_id, seeds=seeds, covered=covered, problems=checked.problems)


def warehouse_state(
    spark: SparkSession,
    warehouse: str,
    catalog_schema: str,
    run_id: str,
    keep: Keep | None = None,
) -> SeedState | None:
    """--since-state: the state the warehouse's latest finished run (not this one) ended in.

    Returns None on the first night (no `producer_state` table yet, or no finished run), which
    is logged: every batch is audited, and producers met mid-stream start unknown. `keep`: see
    `check_seeds`.
    """
    if catalog_schema:
        location = f"{catalog_schema}.producer_state"
        exists = spark.catalog.tableExists(location)
    else:
        location = table_location(warehouse, "producer_state")
        exists = fsys.is_delta_table(location)
    state = (
        latest_state(spark, location, exclude_run_id=run_id, keep=keep, warehouse=True)
        if exists
        else None
    )
    if state is None:
        log.info(
            "run %s: --since-state: no finished run's producer_state in %s yet (a first night): "
            "auditing every batch",
            run_id,
            location,
        )
    else:
        log.info(
            "run %s: --since-state: seeded with run %s's producer_state; batches below the "
            "offsets it covers are skipped",
            run_id,
            state.run_id,
        )
    return state


def read_producer_state(
    spark: SparkSession, paths: tuple[str, ...] | list[str], keep: Keep | None = None
) -> SeedRead:
    """The `--producer-state` inputs, checked (`check_seeds`, with `keep`).

    Each path is Parquet or JSON lines in the producer_state contract, or a `producer_state`
    Delta table an earlier run wrote (its latest finished run's rows: the state that run's replay
    ended in, `latest_state`).

    Raises:
        InputSchemaError: a path is in no such format, or its columns are not the contract's.
    """
    read = SeedRead()
    for path in paths:
        if fsys.is_delta_table(path):
            check_table(path, "--producer-state")
            state = latest_state(spark, path, keep=keep)
            if state is not None:
                read = read.add(SeedRead(state.seeds, state.problems))
            continue
        fmt = detect_format(path)
        if fmt not in ("parquet", "json"):
            raise InputSchemaError(
                f"--producer-state {path}: expected Parquet or JSON lines in the producer_state "
                "contract (schemas/producer_state.json), or a producer_state Delta table"
            )
        read = read.add(check_seeds(read_seed_files(spark, path, fmt), keep=keep))
    return read


def seed_inputs(
    spark: SparkSession,
    export_seeds: DataFrame | None,
    paths: tuple[str, ...] | list[str],
    keep: Keep | None = None,
) -> SeedRead:
    """Every seed a run is given, checked: the export's snapshots and `--producer-state`.

    Args:
        spark: the session.
        export_seeds: the seeds a record-batch input gave (segment exports' `.snapshot` files).
        paths: the `--producer-state` paths.
        keep: see `check_seeds`.
    """
    return check_seeds(export_seeds, keep=keep).add(read_producer_state(spark, paths, keep))
