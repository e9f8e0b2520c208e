"""The report of the demo's audit: what it reads from the tables, and the file it writes."""

import re
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from eos_audit.errors import ConfigError, InputNotFoundError
from eos_audit.report import ReportLimits, build, report_path, run_overview, write_report
from eos_audit.report.data import collect_report_data, left_out
from eos_audit.report.partitions import query_partition_timelines
from eos_audit.report.tables import TableLocation, read_table, resolve_run_id, run_tables
from eos_audit.schemas import OUTPUT_TABLES
from tests.integration.test_readme_queries import run_query

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def report_with_data(spark, warehouse):
    """Write the latest run's report; (the data it was drawn from, the page's path)."""
    collected = []
    real = build.collect_report_data
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            build,
            "collect_report_data",
            lambda *a, **k: collected.append(real(*a, **k)) or collected[-1],
        )
        path = write_report(spark, warehouse)
    (data,) = collected
    return data, path


@pytest.fixture(scope="module")
def report(spark, demo_run):
    """The demo run's report, written once for the module, and the data it was drawn from."""
    result, faults, warehouse, _ = demo_run
    data, path = report_with_data(spark, warehouse)
    return data, path, result, faults, warehouse


def test_write_report_writes_the_latest_run_next_to_the_tables(report):
    _, path, _, _, warehouse = report
    assert path == warehouse / "reports" / "night-1.html" == report_path(warehouse, "night-1")
    html = path.read_text()
    assert "<title>eos-audit run night-1</title>" in html
    assert not list(path.parent.glob("*.partial"))
    # Small: the demo's report is tens of kilobytes.
    assert len(html) < 200_000


def test_the_run_reconciles(report):
    data, _, result, _, _ = report
    o = data.overview
    assert (o.run_id, o.status) == ("night-1", result.status)
    assert [c.statement for c in o.checks if not c.ok] == []
    assert o.findings_by_severity == {"CRITICAL": 5, "ERROR": 1, "WARNING": 1, "INFO": 2}
    assert o.coverage.partitions == 5 and o.coverage.partitions_below_full == 2
    assert o.inputs["list_offsets"] and o.inputs["acks"]
    assert ("run.fail_on", "critical") in o.configuration


def test_findings_by_type_match_the_planted_faults(report):
    data, _, _, faults, _ = report
    planted: dict[tuple[str, str], int] = {}
    for f in faults:
        planted[(f.finding_type, f.severity)] = planted.get((f.finding_type, f.severity), 0) + 1
    counted = {(t.finding_type, s): n for t in data.matrix.types for s, n in t.counts.items()}
    assert counted == planted
    # Every demo finding is listed with its evidence, so nothing is left out.
    assert sum(len(g.items) for g in data.groups) == len(faults)
    assert left_out(data) == []
    (duplicate,) = next(g for g in data.groups if g.finding_type == "DUPLICATE_BATCH").items
    assert duplicate.batch == "payments-0 offsets 18–20, sequences 12–14"
    assert duplicate.earlier == "offset 12: the earlier batch"
    assert duplicate.earlier_href == "p-payments-0"


def test_partition_timelines_put_the_worst_partitions_first(report):
    data, _, _, _, _ = report
    t = data.timelines
    assert [(x.topic, x.partition) for x in t.timelines] == [
        ("ledger", 0),
        ("payments", 1),
        ("payments", 0),
        ("orders", 0),
        ("ledger", 1),
    ]
    ledger0 = t.timelines[0]
    assert [(s.label, s.lane) for s in ledger0.epochs] == [
        ("producer 2001 epoch 4", 0),
        ("producer 2001 epoch 5", 1),
    ]
    assert sorted((m.finding_type, m.start) for m in ledger0.marks) == [
        ("FENCED_PRODUCER_EPOCH", 13),
        ("INVALID_TXN_STATE", 17),
    ]
    (aborted,) = t.timelines[4].transactions
    assert (aborted.kind, aborted.start, aborted.end) == ("ABORT", 20, 22)


def test_epoch_plots_show_the_gap_the_duplicate_and_the_zombie(report):
    data, _, _, _, _ = report
    plots = {(p.topic, p.partition, p.producer_id, p.producer_epoch): p for p in data.epochs.plots}
    assert data.epochs.total_with_findings == 5 and data.epochs.omitted == 0
    gap_epoch = plots[("payments", 1, 1002, 0)]
    assert {(m.kind, m.offset, m.expected_sequence) for m in gap_epoch.marks} == {
        ("gap", 9, 9),
        ("lost", 9, None),
    }
    assert (6, 8) in {(p.offset, p.sequence) for p in gap_epoch.points if p.role == "earlier"}
    (duplicate,) = plots[("payments", 0, 1001, 0)].marks
    assert (duplicate.kind, duplicate.previous_offset, duplicate.sequence) == ("duplicate", 12, 12)
    (zombie,) = plots[("ledger", 0, 2001, 4)].marks
    assert (zombie.kind, zombie.offset) == ("fenced", 13)
    assert plots[("orders", 0, 3001, 2)].unplaced == 1  # the failed send has no offset


def test_transactions_and_list_offsets(report):
    data, _, _, _, _ = report
    a = data.transactions
    assert a.totals == {"COMMIT": 8, "ABORT": 1, "UNKNOWN": 0, "OPEN": 0, "HANGING": 0}
    assert sum(sum(b.counts.values()) for b in a.buckets) == 9
    assert [(s.kind, s.first_offset, s.marker_offset) for s in a.spans] == [("ABORT", 20, 22)]
    v = data.list_offsets
    (series,) = v.series
    assert (series.topic, series.partition) == ("payments", 0)
    (line,) = series.lines
    assert (line.spec, line.isolation) == ("latest", "read_uncommitted")
    assert [p.high for p in line.points] == [30, 25, 36, 43]  # the failed answer has no offset
    (mark,) = series.marks
    assert (mark.offset, mark.earlier_offset, mark.severity) == (25, 30, "WARNING")
    assert mark.recovered_ms == line.points[2].time_ms
    assert [e.error for e in series.errors] == ["OFFSET_NOT_AVAILABLE"]
    assert v.observations_note.startswith("observations read again from ")


def test_top_offenders(report):
    data, _, _, _, _ = report
    producers = {o.label: o.findings for o in data.offenders.producers}
    assert producers == {
        "producer 1002": 2,
        "producer 2001": 2,
        "producer 3001": 2,
        "producer 1001": 1,
    }
    assert data.offenders.partitions[0].label == "ledger-0"
    assert data.offenders.partitions[0].href == "p-ledger-0"


def test_reads_are_bounded_by_the_limits(spark, demo_run):
    _, _, warehouse, _ = demo_run
    tables = run_tables(spark, TableLocation(str(warehouse)), "night-1")
    raw = query_partition_timelines(
        tables, ReportLimits(partitions=2, spans_per_partition=1, marks_per_chart=1)
    )
    assert [(p["topic"], p["partition"]) for p in raw["partitions"]] == [
        ("ledger", 0),
        ("payments", 1),
    ]
    assert len(raw["epochs"]) == 2 and len(raw["marks"]) == 2
    # The counts say how much was cut: ledger-0 has two epochs and two findings on its log.
    assert raw["counts"]["epochs"][("ledger", 0)] == 2
    assert raw["counts"]["marks"][("ledger", 0)] == 2


def test_unknown_runs(spark, demo_run, tmp_path):
    _, _, warehouse, _ = demo_run
    with pytest.raises(InputNotFoundError, match=re.escape("run 'night-0' is not recorded in")):
        write_report(spark, warehouse, "night-0")
    with pytest.raises(InputNotFoundError, match="no finished run in"):
        resolve_run_id(spark, TableLocation(str(tmp_path)), None)


def test_report_path_is_local_or_on_the_warehouse_store():
    assert (
        str(report_path("file:///lake/wh", "2026-11-21/x")) == "/lake/wh/reports/2026-11-21_x.html"
    )
    # On an object store, next to the tables (written there through pyarrow.fs).
    assert report_path("s3a://b/wh/", "2026-11-21/x") == "s3a://b/wh/reports/2026-11-21_x.html"
    with pytest.raises(ConfigError, match=re.escape("cannot write the report under dbfs:/wh")):
        report_path("dbfs:/wh", "r")


def _databricks_queries() -> list[str]:
    text = (REPO / "docs" / "databricks.md").read_text()
    section = text.split("## Queries in Databricks SQL", 1)[1]
    return re.findall(r"```sql\n(.*?)```", section, flags=re.S)


def test_the_databricks_sql_queries_answer_on_the_demo(spark, demo_run):
    _, _, warehouse, _ = demo_run
    queries = _databricks_queries()
    assert len(queries) == 5
    latest, by_type, nights, producers, broken = (run_query(spark, warehouse, q) for q in queries)
    assert [r["run_id"] for r in latest] == ["night-1"]
    assert sum(r["findings"] for r in by_type) == 9
    assert [(r["runs"], r["critical"]) for r in nights] == [(1, 5)]
    assert {r["producer_id"]: r["violated_epochs"] for r in producers} == {
        2001: 2,
        1001: 1,
        1002: 1,
    }
    assert [(r["finding_type"], r["previous_offset"], r["epoch_first_offset"]) for r in broken] == [
        ("DUPLICATE_BATCH", 12, 0),
        ("SEQUENCE_GAP", 6, 0),
    ]


def test_tables_in_a_catalog_schema(spark, demo_run, tmp_path):
    # Databricks writes managed tables into a catalog schema; a local database stands in for it.
    _, _, warehouse, _ = demo_run
    spark.sql(f"CREATE DATABASE report_catalog LOCATION '{tmp_path / 'db'}'")
    try:
        for table in ("audit_runs", "findings", "quarantine", "partition_summary"):
            read_table(spark, TableLocation(str(warehouse)), table).write.saveAsTable(
                f"report_catalog.{table}"
            )
        o = run_overview(spark, tmp_path, catalog_schema="report_catalog")
        assert o.run_id == "night-1" and [c for c in o.checks if not c.ok] == []
        # A table never written (transactions here) reads as empty, with its columns.
        where = TableLocation(str(tmp_path), "report_catalog")
        assert (
            read_table(spark, where, "transactions").columns == OUTPUT_TABLES["transactions"].names
        )
    finally:
        spark.sql("DROP DATABASE report_catalog CASCADE")


def test_findings_carry_their_batch_time(spark, report):
    data, _, _, _, warehouse = report
    findings = read_table(spark, TableLocation(str(warehouse)), "findings")
    rows = findings.select("batch_time", "batch_timestamp").collect()
    assert rows and all(r.batch_timestamp is not None for r in rows)
    # The same instant in both columns (the session is UTC, as eos-audit's sessions are).
    mismatched = findings.where(F.unix_millis("batch_time") != F.col("batch_timestamp")).count()
    assert mismatched == 0
    stamps = [r.batch_timestamp for r in rows]
    assert min(t.first_ms for t in data.matrix.types) == min(stamps)
    assert max(t.last_ms for t in data.matrix.types) == max(stamps)
    assert all(f.batch_ms is not None for g in data.groups for f in g.items)
    # The strips and sequence plots of the demo are placed in time too.
    assert all(t.first_ms is not None for t in data.timelines.timelines if t.epochs)
    assert all(p.first_ms is not None for p in data.epochs.plots)


def test_the_history_of_a_warehouse_with_one_run(report):
    data, path, _, _, _ = report
    h = data.history
    assert [(r.run_id, r.is_current) for r in h.runs] == [("night-1", True)]
    assert (h.compared, h.omitted) == ([], 0)
    html = path.read_text()
    assert 'id="history"' in html and "No earlier finished run to compare" in html
    assert '<span id="verdict" class="verdict CRITICAL">CRITICAL: 5 violations' in html


@pytest.mark.cost(15)  # two audits and two reports
def test_two_nights_give_a_history_and_mark_what_is_new(spark, demo_run, tmp_path):
    """Night 2 audits the same export; night 1, as written here, did not report the gap."""
    import shutil

    from deltalake import DeltaTable

    from eos_audit.audit.pipeline import run_audit
    from eos_audit.config import AuditConfig

    _, _, demo, inputs = demo_run
    warehouse = tmp_path / "wh"
    shutil.copytree(demo, warehouse, ignore=shutil.ignore_patterns("reports"))
    DeltaTable(str(warehouse / "findings")).delete("finding_type = 'SEQUENCE_GAP'")
    run_audit(spark, inputs, AuditConfig(), str(warehouse), run_id="night-2")
    # Finding ids are deterministic: the same input gives night-2 the ids night-1 got (the
    # demo's own warehouse, untouched), in another run of another warehouse.
    night_2 = DeltaTable(str(warehouse / "findings")).to_pyarrow_table(
        columns=["finding_id"], filters=[("run_id", "=", "night-2")]
    )
    night_1 = DeltaTable(str(demo / "findings")).to_pyarrow_table(columns=["finding_id"])
    assert sorted(night_2.column(0).to_pylist()) == sorted(night_1.column(0).to_pylist())

    data, path = report_with_data(spark, warehouse)
    h = data.history
    assert [(r.run_id, r.is_current) for r in h.runs] == [("night-1", False), ("night-2", True)]
    assert [r.findings["CRITICAL"] for r in h.runs] == [5, 5]
    assert all(r.batches_audited > 0 and r.duration_s >= 0 for r in h.runs)
    assert h.compared == ["night-1"]
    assert {t: n for t, n in h.new_by_type.items() if n} == {"SEQUENCE_GAP": 1}
    assert h.seen_total == data.matrix.total - 1
    flags = {f.finding_type: f.seen_before for g in data.groups for f in g.items}
    assert flags["SEQUENCE_GAP"] is False and flags["DUPLICATE_BATCH"] is True
    html = path.read_text()
    group = html.split('id="t-SEQUENCE_GAP"', 1)[1].split("</table>", 1)[0]
    assert "new in this run" in group and "seen before" not in group

    # Bounded: a window of one run shows this run alone, says what it left out, compares nothing.
    small = collect_report_data(
        spark, TableLocation(str(warehouse)), "night-2", ReportLimits(history_runs=1)
    )
    assert [r.run_id for r in small.history.runs] == ["night-2"]
    assert (small.history.omitted, small.history.compared) == (1, [])
    assert left_out(small)[0].startswith("history: 1 earlier runs not shown")
