"""Every SQL example of README's "Queries people run", run against the demo's warehouse."""

import re
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

from eos_audit.schemas import OUTPUT_TABLES
from eos_audit.session import session_has_delta

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[2] / "README.md"


def _queries_section() -> str:
    return README.read_text().split("## Queries people run", 1)[1].split("\n## ", 1)[0]


def readme_queries() -> list[str]:
    return re.findall(r"```sql\n(.*?)```", _queries_section(), flags=re.S)


def run_query(spark, warehouse: Path, sql: str) -> list[dict]:
    """Through Spark when the session reads Delta, else through delta-rs's SQL (DataFusion)."""
    tables = [t for t in OUTPUT_TABLES if (warehouse / t).exists()]
    if session_has_delta(spark):
        for table in tables:
            spark.read.format("delta").load(str(warehouse / table)).createOrReplaceTempView(table)
        return [r.asDict() for r in spark.sql(sql).collect()]
    builder = QueryBuilder()
    for table in tables:
        builder = builder.register(table, DeltaTable(str(warehouse / table)))
    return pa.table(builder.execute(sql).read_all()).to_pylist()


def test_the_readme_has_its_queries():
    queries = readme_queries()
    assert len(queries) == 8
    for table in ("findings", "producer_sessions", "transactions", "audit_runs"):
        assert any(f"FROM {table}" in q for q in queries), table


@pytest.mark.parametrize("index", range(8))
def test_each_readme_query_answers_on_the_demo(spark, demo_run, index):
    _, _, warehouse, _ = demo_run
    rows = run_query(spark, warehouse, readme_queries()[index])
    assert rows, readme_queries()[index]


def test_the_queries_answer_what_they_ask(spark, demo_run):
    _, _, warehouse, _ = demo_run
    lost, violated, regressed, transactions, trend, coverage, window, new = (
        run_query(spark, warehouse, q) for q in readme_queries()
    )
    assert {(r["topic"], r["partition"], r["finding_type"]) for r in lost} == {
        ("payments", 0, "DUPLICATE_BATCH"),
        ("payments", 1, "SEQUENCE_GAP"),
        ("payments", 1, "ACKED_WRITE_LOST"),
    }
    assert {(r["topic"], r["producer_id"], r["producer_epoch"]) for r in violated} == {
        ("payments", 1001, 0),
        ("payments", 1002, 0),
        ("ledger", 2001, 4),
        ("ledger", 2001, 5),
    }
    assert [(r["finding_type"], r["cause"], r["severity"]) for r in regressed] == [
        ("LIST_OFFSETS_REGRESSION", "LEADER_CHANGE_TRANSIENT", "WARNING")
    ]
    # ledger-1's last transaction (transactions v2) aborted
    assert [(r["topic"], r["partition"], r["outcome"]) for r in transactions] == [
        ("ledger", 1, "ABORT")
    ]
    assert [r["findings_critical"] for r in trend] == [5]
    # payments-0 has a producer without idempotence; orders-0 a corrupt batch without an id
    assert [(r["topic"], r["partition"]) for r in coverage] == [("payments", 0), ("orders", 0)]
    # The demo's batches carry times from 2026-11-21 00:00:00 UTC: the first ten seconds hold
    # six findings; the fenced write (00:00:11), the transaction (00:00:13) and the ListOffsets
    # regression (observed at 00:03:00) fall outside the window.
    assert sorted(r["finding_type"] for r in window) == [
        "ACKED_WRITE_LOST",
        "CLIENT_SEQUENCE_ERROR",
        "CORRUPT_BATCH",
        "DUPLICATE_BATCH",
        "SEQUENCE_GAP",
        "UNKNOWN_PRODUCER",
    ]
    assert [r["batch_time"] for r in window] == sorted(r["batch_time"] for r in window)
    # The demo's warehouse has one run: everything in it is new.
    assert len(new) == 9


def test_the_delta_rs_snippet_reads_the_tables_without_spark(demo_run):
    _, _, warehouse, _ = demo_run
    (snippet,) = [
        block
        for block in re.findall(r"```python\n(.*?)```", _queries_section(), flags=re.S)
        if "QueryBuilder" in block
    ]
    assert 'warehouse = "/lake/eos_audit"' in snippet
    code = snippet.replace('"/lake/eos_audit"', repr(str(warehouse))).replace("print(rows)", "")
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - README's own example
    rows = pa.table(namespace["rows"]).to_pylist()
    assert sum(r["findings"] for r in rows) == 9
    assert all(r["first_batch"] <= r["last_batch"] for r in rows)


def table_of(path: Path) -> pa.Table:
    # QueryBuilder, not DeltaTable.to_pyarrow_table (delta-rs issue 2184 aborts at exit).
    return pa.table(
        QueryBuilder().register("t", DeltaTable(str(path))).execute("SELECT * FROM t").read_all()
    )


def test_the_queries_count_only_finished_runs(spark, demo_run, tmp_path):
    """A run that died RUNNING (or FAILED) after writing findings changes no answer."""
    import datetime as dt
    import shutil

    from deltalake import write_deltalake

    _, _, demo, _ = demo_run
    warehouse = tmp_path / "wh"
    shutil.copytree(demo, warehouse)

    def answers():  # as sets of rows: ties in ORDER BY may come back in any order
        return [sorted(repr(sorted(r.items())) for r in run_query(spark, warehouse, q))
                for q in readme_queries()]  # fmt: skip

    before = answers()
    for table in ("findings", "producer_sessions", "transactions", "partition_summary"):
        rows = table_of(warehouse / table)
        dead = rows.set_column(
            rows.schema.get_field_index("run_id"), "run_id", pa.array(["dead"] * len(rows))
        )
        write_deltalake(str(warehouse / table), dead, mode="append")
    runs = table_of(warehouse / "audit_runs")
    later = dt.datetime(2099, 1, 1, tzinfo=dt.UTC)
    for run_id, status in (("dead", "RUNNING"), ("failed", "FAILED")):
        row = runs.to_pylist()[0] | {"run_id": run_id, "status": status, "finished_at": later}
        write_deltalake(
            str(warehouse / "audit_runs"), pa.Table.from_pylist([row], runs.schema), mode="append"
        )
    assert answers() == before
