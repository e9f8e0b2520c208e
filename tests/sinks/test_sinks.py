import datetime as dt

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eos_audit.errors import SinkError
from eos_audit.schemas import FINDINGS
from eos_audit.session import session_has_delta
from eos_audit.sinks import delta as sinks_delta
from eos_audit.sinks.delta import (
    DeltaRsWriter,
    SparkDeltaWriter,
    TableRows,
    choose_writer,
    with_commit_retries,
)


def _findings(spark, run_id: str, n: int):
    return spark.createDataFrame([_findings_row(run_id, i) for i in range(n)], FINDINGS)


def _findings_row(run_id: str, i: int) -> tuple:
    return (
        f"id{run_id}{i}",
        run_id,
        "SEQUENCE_GAP",
        "CRITICAL",
        "UNEXPLAINED",
        "OUT_OF_ORDER_SEQUENCE_NUMBER",
        "t",
        0,
        7,
        1,
        i * 10,
        i * 10 + 2,
        5,
        7,
        3,
        4,
        "a sentence",
        "§1.5",
        {"missing_sequences": "2"},
        1_000,
        dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC),
        "src",
    )


def _read(path: str, sql: str) -> list[dict]:
    # QueryBuilder, not DeltaTable.to_pyarrow_table (delta-rs issue 2184 aborts at exit).
    reader = QueryBuilder().register("t", DeltaTable(path)).execute(sql)
    return pa.table(reader.read_all()).to_pylist()


def test_delta_rs_writer_round_trip_with_contract_schema(spark, warehouse):
    writer = DeltaRsWriter(str(warehouse))
    location = writer.replace_run("findings", _findings(spark, "a", 3), FINDINGS, "a")
    table = DeltaTable(location)
    fields = {f.name: f for f in table.schema().fields}
    assert list(fields) == FINDINGS.fieldNames()
    assert fields["finding_id"].nullable is False and fields["cause"].nullable is True
    result = _read(location, "SELECT base_offset, evidence FROM t ORDER BY base_offset")
    assert [r["base_offset"] for r in result] == [0, 10, 20]


def test_rerunning_a_run_replaces_its_rows_and_keeps_other_runs(spark, warehouse):
    writer = DeltaRsWriter(str(warehouse))
    location = writer.replace_run("findings", _findings(spark, "a", 3), FINDINGS, "a")
    writer.replace_run("findings", _findings(spark, "b", 2), FINDINGS, "b")
    writer.replace_run("findings", _findings(spark, "a", 4), FINDINGS, "a")
    writer.replace_run("findings", _findings(spark, "a", 4), FINDINGS, "a")
    counts = _read(location, "SELECT run_id, count(*) AS n FROM t GROUP BY run_id ORDER BY run_id")
    assert counts == [{"run_id": "a", "n": 4}, {"run_id": "b", "n": 2}]


def test_empty_run_creates_an_empty_table(spark, warehouse):
    location = DeltaRsWriter(str(warehouse)).replace_run(
        "findings", _findings(spark, "a", 0), FINDINGS, "a"
    )
    assert _read(location, "SELECT count(*) AS n FROM t") == [{"n": 0}]


def test_staging_is_removed_after_writing(spark, warehouse):
    DeltaRsWriter(str(warehouse)).replace_run("findings", _findings(spark, "a", 2), FINDINGS, "a")
    staging = warehouse / "_staging"
    assert not staging.exists() or not any(staging.iterdir())


def test_run_id_with_a_quote_is_safe(spark, warehouse):
    writer = DeltaRsWriter(str(warehouse))
    location = writer.replace_run("findings", _findings(spark, "x'y", 1), FINDINGS, "x'y")
    writer.replace_run("findings", _findings(spark, "x'y", 1), FINDINGS, "x'y")
    assert _read(location, "SELECT count(*) AS n FROM t") == [{"n": 1}]


def test_writer_choice(spark, warehouse):
    assert isinstance(
        choose_writer(spark, str(warehouse), "auto", "", has_delta=False), DeltaRsWriter
    )
    assert isinstance(
        choose_writer(spark, str(warehouse), "auto", "", has_delta=True), SparkDeltaWriter
    )
    with pytest.raises(SinkError, match="has no Delta Lake"):
        choose_writer(spark, str(warehouse), "spark", "", has_delta=False)
    with pytest.raises(SinkError, match="catalog_schema needs Spark's Delta writer"):
        choose_writer(spark, str(warehouse), "delta-rs", "main.eos", has_delta=False)
    catalog = choose_writer(spark, str(warehouse), "auto", "main.eos", has_delta=True)
    assert catalog.location("findings") == "main.eos.findings"


def spark_delta_round_trip(spark, warehouse: str) -> dict:
    """The Spark writer's round trip, in a session with Delta's jars: what it saw, for the test.

    Runs in the subprocess of `test_spark_delta_writer_round_trip`: the suite's session must not
    get Delta's jars, or every test would write through Spark instead of delta-rs.
    """
    writer = SparkDeltaWriter(warehouse)
    location = writer.replace_run("findings", _findings(spark, "a", 3), FINDINGS, "a")
    writer.replace_run("findings", _findings(spark, "a", 3), FINDINGS, "a")  # a re-run: replaced
    writer.replace_run("findings", _findings(spark, "it's", 2), FINDINGS, "it's")
    writer.replace_run_rows("findings", [_findings_row("b", 7)], FINDINGS, "b")
    back = spark.read.format("delta").load(location)
    return {
        "has_delta": session_has_delta(spark),
        "location": location,
        "rows": back.count(),
        "finding_id_nullable": back.schema["finding_id"].nullable,
    }


_ROUND_TRIP = """
import json, sys
from pyspark.sql import SparkSession
from tests.sinks.test_sinks import spark_delta_round_trip
spark = SparkSession.builder.master("local[1]").config(map=json.loads(sys.argv[1])).getOrCreate()
print(json.dumps(spark_delta_round_trip(spark, sys.argv[2])))
spark.stop()
"""


@pytest.mark.slow
@pytest.mark.cost(15)  # a JVM of its own with Delta's jars
def test_spark_delta_writer_round_trip(spark, warehouse):
    """Spark's Delta writer replaces a run's rows, and delta-rs reads and replaces after it."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from tests.conftest import REPO, TINY_QUERIES
    from tests.jars import DELTA_SPARK_JARS, HOW_TO_FETCH, required

    assert not session_has_delta(spark)  # the suite's session writes with delta-rs
    if not DELTA_SPARK_JARS.present():
        reason = f"delta-spark's jars ({DELTA_SPARK_JARS.name}) are not fetched: {HOW_TO_FETCH}"
        if required():
            pytest.fail(f"CI needs Spark's Delta writer: {reason}", pytrace=False)
        pytest.skip(reason)
    settings = {
        **TINY_QUERIES,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.jars": ",".join(str(jar) for jar in DELTA_SPARK_JARS.jars()),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        # Delta rebuilds a table's state in 50 partitions by default: 50 tasks for a few rows.
        "spark.databricks.delta.snapshotPartitions": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", _ROUND_TRIP, json.dumps(settings), str(warehouse)],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["has_delta"] is True  # eos_audit.session finds the jars spark.jars added
    assert (seen["rows"], seen["finding_id_nullable"]) == (6, False)
    location = seen["location"]
    commits = sorted(Path(location, "_delta_log").glob("*.json"))
    engines = {json.loads(line)["commitInfo"]["engineInfo"] for c in commits
               for line in c.read_text().splitlines() if "commitInfo" in line}  # fmt: skip
    assert len(engines) == 1 and "Delta-Lake/" in engines.pop()  # Spark's Delta wrote them all
    counts = _read(location, "SELECT run_id, count(*) AS n FROM t GROUP BY run_id ORDER BY run_id")
    assert counts == [{"run_id": "a", "n": 3}, {"run_id": "b", "n": 1}, {"run_id": "it's", "n": 2}]
    # delta-rs reads the table Spark wrote, and replaces a run in it.
    fields = {f.name: f.nullable for f in DeltaTable(location).schema().fields}
    assert fields == {f.name: f.nullable for f in FINDINGS.fields}  # the contract's, as delta-rs'
    DeltaRsWriter(str(warehouse)).replace_run("findings", _findings(spark, "a", 1), FINDINGS, "a")
    counts = _read(location, "SELECT run_id, count(*) AS n FROM t GROUP BY run_id ORDER BY run_id")
    assert counts == [{"run_id": "a", "n": 1}, {"run_id": "b", "n": 1}, {"run_id": "it's", "n": 2}]


@pytest.mark.parametrize("run_id", ["night-1", "ops' re-run", "a\\b", "it''s", "\\'; x"])
def test_the_spark_writers_replace_where_selects_exactly_the_runs_rows(spark, run_id):
    """What Spark's parser makes of the replaceWhere (runs without Delta's jars too)."""
    others = ["night-2", "ops re-run", "its"]
    runs = spark.createDataFrame([(r,) for r in [run_id, *others]], "run_id string")
    selected = runs.where(F.expr(sinks_delta.spark_run_predicate(run_id)))
    assert [r.run_id for r in selected.collect()] == [run_id]


class CommitFailedError(Exception):
    """delta-rs's name for a lost optimistic-concurrency race."""


def test_a_lost_commit_race_is_retried_and_other_errors_are_not(monkeypatch):
    monkeypatch.setattr(sinks_delta.time, "sleep", lambda seconds: None)
    attempts = []

    def flaky():
        attempts.append(1)
        if len(attempts) < 3:
            raise CommitFailedError("a concurrent transaction added new data")

    with_commit_retries(flaky, "t")
    assert len(attempts) == 3

    def broken():
        attempts.append(1)
        raise ValueError("not a race")

    attempts.clear()
    with pytest.raises(ValueError, match="not a race"):
        with_commit_retries(broken, "t")
    assert len(attempts) == 1


def test_driver_rows_replace_a_run_without_spark(warehouse):
    writer = DeltaRsWriter(warehouse=str(warehouse))
    rows = [tuple(_findings_row(run_id, i)) for run_id in ("a", "b") for i in range(2)]
    writer.replace_run_rows("findings", rows[:2], FINDINGS, "a")
    writer.replace_run_rows("findings", rows[2:], FINDINGS, "b")
    writer.replace_run_rows("findings", rows[:1], FINDINGS, "a")
    got = _read(str(warehouse / "findings"), "SELECT run_id, count(*) AS n FROM t GROUP BY run_id")
    assert sorted((r["run_id"], r["n"]) for r in got) == [("a", 1), ("b", 2)]


def test_several_tables_in_one_staging_job_land_as_one_by_one(spark, warehouse):
    writer = DeltaRsWriter(str(warehouse), staging_dir=str(warehouse / "_staging" / "run"))
    other = T.StructType(
        [T.StructField("run_id", T.StringType(), False), T.StructField("n", T.LongType(), True)]
    )
    written = []
    tables = [
        TableRows("findings", _findings(spark, "a", 3), FINDINGS),
        TableRows("empty", None, other),
        TableRows("counts", spark.createDataFrame([("a", 7), ("a", None)], other), other),
    ]
    places = writer.replace_runs(tables, "a", lambda t, where: written.append(t))
    assert written == ["findings", "empty", "counts"]  # in order, one commit each
    assert places["counts"] == str(warehouse / "counts")
    assert _read(str(warehouse / "findings"), "SELECT count(*) AS n FROM t") == [{"n": 3}]
    assert _read(places["empty"], "SELECT count(*) AS n FROM t") == [{"n": 0}]
    rows = _read(places["counts"], "SELECT run_id, n FROM t ORDER BY n")
    assert rows == [{"run_id": "a", "n": 7}, {"run_id": "a", "n": None}]
    fields = {f.name: f.nullable for f in DeltaTable(places["counts"]).schema().fields}
    assert fields == {"run_id": False, "n": True}  # the contract's nullability, not Spark's
    assert not (warehouse / "_staging" / "run").exists() or not any(
        (warehouse / "_staging" / "run").iterdir()
    )


def test_tables_of_a_row_per_input_record_are_staged_apart_and_land_in_order(
    spark, warehouse, monkeypatch
):
    """A table with a row per input record is staged in a job of its own (packed beside the
    others, each of its rows would carry their columns too): every table still lands in order,
    with its rows, and no staged file is left."""
    writer = DeltaRsWriter(str(warehouse), staging_dir=str(warehouse / "_staging" / "run"))
    other = T.StructType(
        [T.StructField("run_id", T.StringType(), False), T.StructField("n", T.LongType(), True)]
    )
    groups = []
    stage_packed = sinks_delta._stage_packed

    def recorded(tables, staging):
        groups.append([t.table for t in tables])
        return stage_packed(tables, staging)

    monkeypatch.setattr(sinks_delta, "_stage_packed", recorded)
    rows = {"offsets": [("a", 1), ("a", 2)], "counts": [("a", 7)], "log": [("a", 5)]}
    tables = [
        TableRows("findings", _findings(spark, "a", 3), FINDINGS),
        *[
            TableRows(
                name,
                spark.createDataFrame(rows[name], other),
                other,
                per_input_record=name != "counts",
            )
            for name in ("offsets", "counts", "log")
        ],
    ]
    written = []
    places = writer.replace_runs(tables, "a", lambda t, where: written.append(t))
    assert groups == [["findings", "counts"], ["offsets", "log"]]
    assert written == ["findings", "offsets", "counts", "log"]
    assert _read(places["findings"], "SELECT count(*) AS n FROM t") == [{"n": 3}]
    for name, expected in rows.items():
        got = _read(places[name], "SELECT run_id, n FROM t ORDER BY n")
        assert [(r["run_id"], r["n"]) for r in got] == expected
    staging = warehouse / "_staging" / "run"
    assert not staging.exists() or not any(staging.iterdir())


def test_rows_the_driver_made_go_straight_into_their_table(spark, warehouse):
    """input_files' rows are made on the driver: written as they are, in the tables' order, both
    beside tables staged in one job and where each table is written on its own."""
    writer = DeltaRsWriter(str(warehouse), staging_dir=str(warehouse / "_staging" / "run"))
    other = T.StructType(
        [T.StructField("run_id", T.StringType(), False), T.StructField("n", T.LongType(), True)]
    )
    files = TableRows("files", None, other, driver_rows=[("a", 1), ("a", None)])
    staged_beside = [
        TableRows("findings", _findings(spark, "a", 3), FINDINGS),
        files,
        TableRows("counts", spark.createDataFrame([("a", 7)], other), other),
    ]
    written = []
    writer.replace_runs(staged_beside, "a", lambda t, where: written.append(t))
    assert written == ["findings", "files", "counts"]
    rows = _read(str(warehouse / "files"), "SELECT run_id, n FROM t ORDER BY n")
    assert rows == [{"run_id": "a", "n": 1}, {"run_id": "a", "n": None}]
    # One DataFrame: each table on its own; the run's rows replaced, another run's kept.
    writer.replace_run_rows("files", [("b", 5)], other, "b")
    alone = [TableRows("findings", _findings(spark, "a", 1), FINDINGS),
             TableRows("files", None, other, driver_rows=[("a", 9)])]  # fmt: skip
    writer.replace_runs(alone, "a", lambda t, where: None)
    rows = _read(str(warehouse / "files"), "SELECT run_id, n FROM t ORDER BY n")
    assert rows == [{"run_id": "b", "n": 5}, {"run_id": "a", "n": 9}]


def test_a_table_written_before_a_new_column_takes_rows_with_it(spark, warehouse):
    """A warehouse an older eos-audit wrote (audit_runs without batches_skipped and
    seeded_from_run) keeps working: the new columns are added, old rows read null."""
    from eos_audit.schemas import AUDIT_RUNS

    old = T.StructType(
        [f for f in AUDIT_RUNS.fields if f.name not in ("batches_skipped", "seeded_from_run")]
    )
    writer = DeltaRsWriter(warehouse=str(warehouse))
    when = dt.datetime(2026, 11, 21, tzinfo=dt.UTC)
    values = {"run_id": "old", "started_at": when, "finished_at": when, "status": "SUCCEEDED",
              "package_version": "0.1.0", "spark_version": "4.2.0", "writer": "delta-rs",
              "inputs": "{}", "configuration": "{}", "batches_read": 5, "batches_audited": 5,
              "batches_quarantined": 0, "batches_skipped": 2, "seeded_from_run": "old",
              "findings_critical": 0, "findings_error": 0, "findings_warning": 0,
              "findings_info": 0, "error": None}  # fmt: skip
    writer.replace_run_rows("audit_runs", [tuple(values[f.name] for f in old)], old, "old")
    new_row = tuple({**values, "run_id": "new"}[f.name] for f in AUDIT_RUNS)
    writer.replace_run_rows("audit_runs", [new_row], AUDIT_RUNS, "new")
    got = _read(
        str(warehouse / "audit_runs"),
        "SELECT run_id, batches_skipped, seeded_from_run FROM t ORDER BY run_id",
    )
    assert got == [
        {"run_id": "new", "batches_skipped": 2, "seeded_from_run": "old"},
        {"run_id": "old", "batches_skipped": None, "seeded_from_run": None},
    ]
