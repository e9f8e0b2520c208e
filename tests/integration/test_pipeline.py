"""The whole pipeline in-process: demo export -> audit -> Delta tables -> run record."""

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

from eos_audit.audit.pipeline import AuditInputs, run_audit
from eos_audit.config import AuditConfig
from eos_audit.demo import build_demo_export
from tests.run_once import once_per_run

pytestmark = pytest.mark.slow


def _sql(path, sql):
    return pa.table(
        QueryBuilder().register("t", DeltaTable(path)).execute(sql).read_all()
    ).to_pylist()


def test_every_injected_fault_is_found_once_and_nothing_else(demo_run):
    result, faults, warehouse, _ = demo_run
    found = _sql(
        str(warehouse / "findings"),
        "SELECT finding_type, severity, topic, partition, base_offset FROM t",
    )
    expected = [
        {
            "finding_type": f.finding_type,
            "severity": f.severity,
            "topic": f.topic,
            "partition": f.partition,
            "base_offset": f.base_offset,
        }
        for f in faults
    ]
    key = lambda r: (r["topic"], r["partition"], r["base_offset"], r["finding_type"])  # noqa: E731
    assert sorted(found, key=key) == sorted(expected, key=key)


def test_counts_reconcile_and_the_run_is_recorded(demo_run):
    result, _, warehouse, _ = demo_run
    rows, _, bad_rows = build_demo_export()
    assert result.batches_read == len(rows) + len(bad_rows)
    assert result.batches_audited == len(rows)
    assert result.batches_quarantined == len(bad_rows)
    (run,) = _sql(str(warehouse / "audit_runs"), "SELECT * FROM t")
    # The demo plants 1 malformed row in 62: more than the default 1% a clean night may have.
    assert run["status"] == "QUARANTINE_EXCEEDED" and run["run_id"] == "night-1"
    assert run["error"].startswith("quarantined 1 of 62 record batches (1.6%)")
    assert run["batches_read"] == run["batches_audited"] + run["batches_quarantined"]
    counts = ("findings_critical", "findings_error", "findings_warning", "findings_info")
    assert tuple(run[c] for c in counts) == (5, 1, 1, 2)
    (q,) = _sql(str(warehouse / "quarantine"), "SELECT reason, source, raw FROM t")
    assert "negative base_offset -7" in q["reason"] and q["source"] == "demo:bad-row"
    assert '"base_offset":-7' in q["raw"]


def test_rerunning_the_same_run_replaces_its_rows(spark, demo_run):
    result, faults, warehouse, inputs = demo_run
    again = run_audit(spark, inputs, AuditConfig(), str(warehouse), run_id="night-1")
    assert again.findings_by_severity == result.findings_by_severity
    counts = _sql(str(warehouse / "findings"), "SELECT count(*) AS n FROM t")
    assert counts == [{"n": len(faults)}]
    assert _sql(str(warehouse / "audit_runs"), "SELECT count(*) AS n FROM t") == [{"n": 1}]
    for table in ("producer_sessions", "list_offsets_errors", "partition_summary"):
        runs = _sql(str(warehouse / table), "SELECT DISTINCT run_id FROM t")
        assert runs == [{"run_id": "night-1"}], table


# A run id as a user may give one, with a quote and a backslash: the rows the run makes of its
# unusable evidence carry it in SQL text (eos_audit.sql_text.string_literal).
EVIDENCE_RUN_ID = "ops' re-run \\ 2026-11-21"


@pytest.fixture(scope="session")
def evidence_run(spark, demo_run, tmp_path_factory):
    """The demo's export audited with one file of ListOffsets observations and one of send
    results (acknowledgements), each with a line the run cannot use: one audit for the whole run
    (tests/run_once.py) and the two tests below, each of which checks what its own evidence did
    (findings, quarantine rows). Read only.
    """
    _, _, _, inputs = demo_run
    return once_per_run(
        tmp_path_factory, "evidence", lambda root: _audit_with_evidence(spark, inputs, root)
    )


def _audit_with_evidence(spark, inputs: AuditInputs, root: Path):
    (export,) = inputs.batches
    observed = root / "offsets.txt"
    observed.write_text(
        "# observed_at: 2026-11-21T01:00:00Z\npayments:1:15\n"
        "# observed_at: 2026-11-21T02:00:00Z\npayments:1:12\n"  # went back, same leader epoch
        "# observed_at: 2026-11-21T03:00:00Z\npayments:1:30\n"  # the export ends at 21
        "not an offset line\n"
    )
    acks = root / "acks.jsonl"
    # the second send result has neither an offset nor an error
    acks.write_text(
        '{"event_time": "2026-11-21T00:00:10Z", "topic": "payments", "partition": 1, '
        '"producer_id": 1002, "producer_epoch": 0, "base_sequence": 0, "offset": 0}\n'
        '{"event_time": "2026-11-21T00:00:11Z", "topic": "payments", "partition": 1, '
        '"producer_id": 1002, "producer_epoch": 0, "base_sequence": 3}\n'
    )
    warehouse = root / "wh"
    result = run_audit(
        spark,
        AuditInputs(batches=(str(export),), list_offsets=(str(observed),), acks=(str(acks),)),
        AuditConfig(),
        str(warehouse),
        run_id=EVIDENCE_RUN_ID,
    )
    return result, warehouse


def test_list_offsets_observations_are_audited_with_the_log(evidence_run):
    result, warehouse = evidence_run
    found = _sql(
        str(warehouse / "findings"),
        "SELECT finding_type, severity, cause, base_offset FROM t "
        "WHERE finding_type IN ('LIST_OFFSETS_REGRESSION', 'ACKED_DATA_MISSING_FROM_LOG') "
        "ORDER BY finding_type",
    )
    assert found == [
        {
            "finding_type": "ACKED_DATA_MISSING_FROM_LOG",
            "severity": "CRITICAL",
            "cause": None,
            "base_offset": 30,
        },
        {
            "finding_type": "LIST_OFFSETS_REGRESSION",
            "severity": "CRITICAL",
            "cause": "TRUNCATION",
            "base_offset": 12,
        },
    ]
    # the bad observation line is quarantined as list_offsets (the acks row is the acks file's)
    rejected = _sql(str(warehouse / "quarantine"), "SELECT input FROM t ORDER BY input")
    assert [r["input"] for r in rejected] == ["acks", "list_offsets", "record_batch"]
    # the bad observation line is not a batch: the batch counts still reconcile
    assert result.batches_quarantined == 1
    # the demo's batches alone give 4 CRITICAL; the observations 2; the acks none
    assert result.findings_by_severity["CRITICAL"] == 4 + 2


def test_partition_summary_counts_producers_findings_and_coverage(demo_run):
    _, _, warehouse, _ = demo_run
    rows = _sql(
        str(warehouse / "partition_summary"),
        "SELECT topic, partition, first_offset, batches, producers, batches_with_producer_id, "
        "coverage, findings_critical, findings_error, findings_info FROM t "
        "ORDER BY topic, partition",
    )
    by_key = {(r["topic"], r["partition"]): r for r in rows}
    assert set(by_key) == {
        ("ledger", 0),
        ("ledger", 1),
        ("orders", 0),
        ("payments", 0),
        ("payments", 1),
    }
    payments0 = by_key[("payments", 0)]
    # 11 idempotent batches of producer 1001 (one of them the duplicate) and 5 without an id
    assert (payments0["batches"], payments0["producers"]) == (16, 1)
    assert payments0["batches_with_producer_id"] == 11
    assert payments0["coverage"] == pytest.approx(11 / 16)
    assert (payments0["findings_critical"], payments0["findings_info"]) == (1, 0)
    orders0 = by_key[("orders", 0)]
    assert (orders0["first_offset"], orders0["producers"]) == (5_000, 2)
    # corrupt batch; unknown producer and the client's UNKNOWN_PRODUCER_ID, both after retention
    assert (orders0["findings_error"], orders0["findings_info"]) == (1, 2)
    assert by_key[("ledger", 1)]["coverage"] == 1.0


def test_producer_sessions_summarise_each_producer_epoch(demo_run):
    _, _, warehouse, _ = demo_run
    rows = _sql(
        str(warehouse / "producer_sessions"),
        "SELECT topic, partition, producer_id, producer_epoch, first_offset, first_sequence, "
        "last_sequence, batches, records, transactions, status FROM t",
    )
    by_key = {(r["topic"], r["partition"], r["producer_id"], r["producer_epoch"]): r for r in rows}
    duplicated = by_key[("payments", 0, 1001, 0)]
    # ten sends of 3 records plus the duplicate of one of them
    assert (duplicated["batches"], duplicated["records"], duplicated["status"]) == (
        11,
        33,
        "violated",
    )
    assert (duplicated["first_sequence"], duplicated["last_sequence"]) == (0, 29)
    assert by_key[("orders", 0, 3001, 2)]["status"] == "benign"  # retention, on both sides
    assert by_key[("orders", 0, 3002, 0)]["status"] == "clean"
    # transactions v1: three committed at epoch 4; the fenced zombie wrote at epoch 4 too
    assert (
        by_key[("ledger", 0, 2001, 4)]["transactions"],
        by_key[("ledger", 0, 2001, 4)]["status"],
    ) == (3, "violated")
    # transactions v2: one transaction per epoch, its marker at the next epoch
    assert [by_key[("ledger", 1, 2002, e)]["transactions"] for e in range(10, 16)] == [1] * 5 + [0]
    assert by_key[("ledger", 1, 2002, 15)]["batches"] == 1  # only the ABORT marker
    assert {r["status"] for k, r in by_key.items() if k[:3] == ("ledger", 1, 2002)} == {"clean"}
    findings = _sql(
        str(warehouse / "producer_sessions"),
        "SELECT findings FROM t WHERE topic = 'payments' AND partition = 1",
    )
    assert [sorted(dict(f["findings"]).items()) for f in findings] == [
        [("ACKED_WRITE_LOST", 1), ("SEQUENCE_GAP", 1)]
    ]


def test_list_offsets_errors_are_counted_per_partition(demo_run):
    _, _, warehouse, _ = demo_run
    rows = _sql(
        str(warehouse / "list_offsets_errors"),
        "SELECT topic, partition, spec, error, observations FROM t",
    )
    assert rows == [
        {
            "topic": "payments",
            "partition": 0,
            "spec": "latest",
            "error": "OFFSET_NOT_AVAILABLE",
            "observations": 1,
        }
    ]


def test_unusable_acknowledgements_are_quarantined_not_counted_as_batches(evidence_run):
    result, warehouse = evidence_run
    rejected = _sql(
        str(warehouse / "quarantine"), "SELECT input, reason, run_id FROM t ORDER BY input"
    )
    assert [r["input"] for r in rejected] == ["acks", "list_offsets", "record_batch"]
    assert {r["run_id"] for r in rejected} == {EVIDENCE_RUN_ID} == {result.run_id}
    assert "offset" in rejected[0]["reason"]
    assert result.batches_quarantined == 1  # the demo's bad batch row only
    # The one usable send result (offset 0, in the log) gives no ACKED_* finding: the only one is
    # the ListOffsets observation of offset 30, past the log's end.
    acked = _sql(
        str(warehouse / "findings"),
        "SELECT finding_type, base_offset FROM t WHERE finding_type LIKE 'ACKED%'",
    )
    assert acked == [{"finding_type": "ACKED_DATA_MISSING_FROM_LOG", "base_offset": 30}]
