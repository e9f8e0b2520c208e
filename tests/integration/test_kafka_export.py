"""Broker exports end to end: real segment bytes, snapshots, checkpoints and several replicas."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

from eos_audit.audit import replay_plan
from eos_audit.audit.output_records import findings_of
from eos_audit.audit.pipeline import AuditInputs, read_inputs, run_audit
from eos_audit.cli import main
from eos_audit.config import AuditConfig
from eos_audit.sources.kafka.dump_log import read_dump_log
from eos_audit.sources.tabular.canonical import to_canonical
from tests.builders import batches_df
from tests.cli_runs import no_html_report  # noqa: F401 (an autouse fixture)
from tests.fixtures.segment_builder import (
    SnapshotEntry,
    checkpoint_text,
    control_batch,
    data_batch,
    format_dump_log,
    kafka_python_view,
    snapshot_bytes,
    split_entries,
    write_partition_dir,
    write_tree,
)

pytestmark = pytest.mark.slow


def _sql(path, sql):
    table = QueryBuilder().register("t", DeltaTable(str(path))).execute(sql).read_all()
    return pa.table(table).to_pylist()


def test_cli_audits_a_clean_multi_broker_tree_reconciles_and_finds_nothing(spark, tmp_path, capsys):
    # Through the CLI: its exit code and summary are what a nightly job sees, and the summary
    # line carries the run's counts (batches read = audited + quarantined).
    tree = write_tree(
        tmp_path / "export", brokers=3, partitions=2, replication=2, batches_per_partition=15
    )
    code = main(
        [
            "audit",
            "--batches",
            str(tmp_path / "export"),
            "--batches-format",
            "segments",
            "--warehouse",
            str(tmp_path / "wh"),
            "--run-id",
            "tree",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    copies = sum(len(h.batches) * len(tree.replicas[k]) for k, h in tree.histories.items())
    assert f"batches read {copies} = audited {copies} + quarantined 0\n" in out
    assert "no findings" in out
    assert _sql(tmp_path / "wh" / "findings", "SELECT count(*) AS n FROM t") == [{"n": 0}]


def _primary_partition(root, *, tail_cut: bool):
    """orders-0 on broker-1 (primary) and broker-2 (a diverged follower)."""
    batches = [
        data_batch(100, 2, producer_id=7, producer_epoch=0, base_sequence=10, leader_epoch=0),
        data_batch(102, 1, producer_id=8, producer_epoch=0, base_sequence=5, leader_epoch=0),
        data_batch(103, 2, producer_id=7, producer_epoch=0, base_sequence=12, leader_epoch=1),
        control_batch(105, producer_id=9, producer_epoch=3, coordinator_epoch=2, leader_epoch=1),
        data_batch(106, 1, producer_id=7, producer_epoch=0, base_sequence=14, leader_epoch=0),
        data_batch(107, 1, producer_id=7, producer_epoch=0, base_sequence=15, leader_epoch=1),
    ]
    snapshot = snapshot_bytes(
        [SnapshotEntry(7, 0, last_sequence=9, last_offset=95, offset_delta=1)]
    )
    primary = write_partition_dir(
        root,
        "broker-1",
        "orders",
        0,
        *batches,
        snapshots={100: snapshot},
        leader_epochs=[(0, 100), (1, 103)],
    )
    if tail_cut:
        segment = next(primary.glob("*.log"))
        extra = data_batch(108, 3, producer_id=7, producer_epoch=0, base_sequence=16)
        segment.write_bytes(segment.read_bytes() + extra[: len(extra) // 2])
    diverged = list(batches)
    diverged[2] = data_batch(
        103, 2, producer_id=7, producer_epoch=0, base_sequence=40, leader_epoch=1
    )
    write_partition_dir(root, "broker-2", "orders", 0, *diverged[:5])
    for broker in ("broker-1", "broker-2"):
        (root / broker / "log-start-offset-checkpoint").write_text(
            checkpoint_text([("orders", 0, 100)])
        )
        (root / broker / "replication-offset-checkpoint").write_text(
            checkpoint_text([("orders", 0, 108)])
        )
    return batches


def test_export_findings_use_snapshots_checkpoints_and_replicas(spark, tmp_path):
    root = tmp_path / "export"
    _primary_partition(root, tail_cut=True)
    warehouse = tmp_path / "wh"
    result = run_audit(
        spark, AuditInputs(batches=(str(root),)), AuditConfig(), str(warehouse), run_id="x"
    )
    found = sorted(
        (r["finding_type"], r["base_offset"], r["severity"], r["cause"])
        for r in _sql(
            warehouse / "findings", "SELECT finding_type, base_offset, severity, cause FROM t"
        )
    )
    assert found == [
        # producer 8 is not in the snapshot and the log starts at 100: benign
        ("LEADER_EPOCH_MISMATCH", 106, "ERROR", None),  # checkpoint: epoch 1 from 103
        ("LEADER_EPOCH_REGRESSION", 106, "ERROR", None),
        ("REPLICA_DIVERGENCE", 103, "CRITICAL", None),  # broker-2 holds sequence 40 there
        ("UNKNOWN_PRODUCER", 102, "INFO", "LOG_START"),
    ]  # producer 7 continues its snapshot (last sequence 9): no UNKNOWN_PRODUCER at 100
    (q,) = _sql(warehouse / "quarantine", "SELECT input, reason, source FROM t")
    assert q["input"] == "record_batch"
    # the cut end of the last segment: recorded, not bad input (a copy of an active segment)
    assert q["reason"].startswith("TRUNCATED_TAIL: ")
    assert "truncated batch at byte" in q["reason"]
    assert "broker-1" in q["source"]
    # 6 batches on the primary, 5 on the follower, 1 truncated tail
    assert (result.batches_read, result.batches_audited, result.batches_quarantined) == (12, 11, 1)


def test_corrupt_snapshot_is_quarantined_not_fatal(spark, tmp_path):
    root = tmp_path / "export"
    write_partition_dir(
        root,
        "b1",
        "t",
        0,
        data_batch(0, 1, producer_id=1, producer_epoch=0, base_sequence=0),
        snapshots={0: b"\x00\x01garbage"},
    )
    result = run_audit(
        spark, AuditInputs(batches=(str(root),)), AuditConfig(), str(tmp_path / "wh"), run_id="x"
    )
    (q,) = _sql(tmp_path / "wh" / "quarantine", "SELECT input, reason FROM t")
    assert q["input"] == "producer_snapshot"
    assert (result.batches_read, result.batches_quarantined) == (1, 0)


def test_the_same_history_as_segments_dump_log_and_parquet_gives_the_same_findings(spark, tmp_path):
    batches = [
        data_batch(0, 2, producer_id=5, producer_epoch=1, base_sequence=0),
        data_batch(2, 2, producer_id=5, producer_epoch=1, base_sequence=2),
        data_batch(4, 2, producer_id=5, producer_epoch=1, base_sequence=2),  # duplicate
        data_batch(6, 1, producer_id=5, producer_epoch=1, base_sequence=7),  # gap (4-6 missing)
        data_batch(7, 1, producer_id=6, producer_epoch=0, base_sequence=0, is_transactional=True),
        data_batch(8, 1, producer_id=6, producer_epoch=0, base_sequence=1),  # txn still open
        control_batch(9, producer_id=6, producer_epoch=0),
        data_batch(10, 1, producer_id=5, producer_epoch=0, base_sequence=8),  # fenced
    ]
    pdir = write_partition_dir(tmp_path / "export", "b1", "ledger", 3, *batches)
    segment = next(pdir.glob("*.log"))
    dump = tmp_path / "dump.txt"
    dump.write_text(format_dump_log(str(segment), segment.read_bytes()))
    rows = []
    for pos, entry in split_entries(segment.read_bytes()):
        v = kafka_python_view(entry)
        rows.append(
            {
                "topic": "ledger",
                "partition": 3,
                "base_offset": v["base_offset"],
                "last_offset": v["last_offset"],
                "producer_id": v["producer_id"],
                "producer_epoch": v["producer_epoch"],
                "base_sequence": v["base_sequence"],
                "last_sequence": None,
                "record_count": v["record_count"],
                "is_transactional": v["is_transactional"],
                "is_control": v["is_control"],
                "control_type": v.get("control_type"),
                "coordinator_epoch": v.get("coordinator_epoch"),
                "partition_leader_epoch": v["partition_leader_epoch"],
                "magic": v["magic"],
                "max_timestamp": v["max_timestamp"],
                "crc_valid": True,
                "source": f"parquet:{pos}",
            }
        )

    def findings(batches_canonical, **kw):
        records = replay_plan.audit(batches_canonical, AuditConfig(), "rt", **kw)
        return sorted(
            (r.finding_type, r.base_offset, r.cause, r.kafka_error)
            for r in findings_of(records).collect()
        )

    segments = read_inputs(spark, AuditInputs(batches=(str(tmp_path / "export"),)))
    from_segments = findings(
        segments.batches, seeds_df=segments.seeds, log_starts_df=segments.log_starts
    )
    from_dump = findings(to_canonical(read_dump_log(spark, [str(dump)])))
    from_rows = findings(to_canonical(batches_df(spark, rows)))
    assert (
        from_segments
        == from_dump
        == from_rows
        == [
            ("DUPLICATE_BATCH", 4, None, None),
            ("FENCED_PRODUCER_EPOCH", 10, None, "INVALID_PRODUCER_EPOCH"),
            ("INVALID_TXN_STATE", 8, None, "INVALID_TXN_STATE"),
            ("SEQUENCE_GAP", 6, "UNEXPLAINED", "OUT_OF_ORDER_SEQUENCE_NUMBER"),
        ]
    )


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dump_log"


@pytest.mark.cost(10)  # two CLI audits
def test_cli_audits_dump_log_text(spark, tmp_path, capsys):
    # the real klog transactional dump (Kafka 3.0 era) names no topic: pass it
    code = main(
        [
            "audit",
            "--batches",
            str(FIXTURES / "klog_txn_3_0.txt"),
            "--batches-format",
            "dump-log",
            "--topic",
            "txn-demo",
            "--partition",
            "0",
            "--warehouse",
            str(tmp_path / "wh2"),
            "--fail-on",
            "never",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "quarantined 0" in out
    # a pasted excerpt with a shell prompt and '...': those lines are quarantined, not fatal
    code = main(
        [
            "audit",
            "--batches",
            str(FIXTURES / "excerpt_with_noise.txt"),
            "--warehouse",
            str(tmp_path / "wh3"),
            "--fail-on",
            "never",
        ]
    )
    # Mostly noise: more than the allowed share is quarantined, so the night is not clean (exit 4).
    assert code == 4
    (run,) = _sql(tmp_path / "wh3" / "audit_runs", "SELECT status FROM t")
    assert run["status"] == "QUARANTINE_EXCEEDED"
    rows = _sql(tmp_path / "wh3" / "quarantine", "SELECT reason, source FROM t")
    assert rows and all(":line " in r["source"] for r in rows)


def test_a_pasted_line_in_a_dump_is_accounted_as_a_line_not_a_batch(spark, tmp_path, capsys):
    # Kafka's own transactional dump with one `...` pasted between two batches, as a text cut
    # for a ticket: 4 batches and a line the parser does not know, of 4 bytes in 1,418.
    lines = (FIXTURES / "klog_txn_3_0.txt").read_text().splitlines(keepends=True)
    second = [i for i, line in enumerate(lines) if line.startswith("baseOffset:")][1]
    pasted = tmp_path / "pasted.txt"
    pasted.write_text("".join([*lines[:second], "...\n", *lines[second:]]))
    warehouse = tmp_path / "wh"
    code = main(["audit", "--batches", str(pasted), "--batches-format", "dump-log", "--topic",
                 "txn-demo", "--partition", "0", "--warehouse", str(warehouse),
                 "--fail-on", "never"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out  # 4 when the line was taken for one of five batches
    assert "batches read 4 = audited 4 + quarantined 0" in out
    assert "1 text line quarantined: no part of kafka-dump-log.sh's output" in out
    (run,) = _sql(warehouse / "audit_runs", "SELECT * FROM t")
    assert (run["status"], run["batches_read"], run["batches_quarantined"]) == ("SUCCEEDED", 4, 0)
    (row,) = _sql(warehouse / "quarantine", "SELECT input, reason, source FROM t")
    assert row["input"] == "dump_log_line"
    assert row["source"] == f"{pasted}:line {second + 1}"
    assert row["reason"].startswith("line matches no known kafka-dump-log.sh format (4 bytes")
    (listed,) = _sql(warehouse / "input_files", "SELECT status, reason, bytes_quarantined FROM t")
    assert (listed["status"], listed["bytes_quarantined"]) == ("DAMAGED", 4)
    assert listed["reason"].startswith("1 line matches no known kafka-dump-log.sh format")


@pytest.mark.parametrize(
    ("fixture", "marker_offset"), [("klog_txn_3_0_default.txt", 4), ("v2_0_batches.txt", 3)]
)
def test_dump_without_deep_iteration_closes_transactions_with_an_unknown_outcome(
    spark, tmp_path, capsys, fixture, marker_offset
):
    """Default kafka-dump-log.sh output shows a marker's batch but not its type (issue 27)."""
    warehouse = tmp_path / "wh"
    code = main(
        [
            "audit",
            "--batches",
            str(FIXTURES / fixture),
            "--batches-format",
            "dump-log",
            "--topic",
            "txn-demo",
            "--partition",
            "0",
            "--warehouse",
            str(warehouse),
            "--fail-on",
            "never",
        ]
    )
    assert code == 0, capsys.readouterr().err
    # (the klog dump's last batch opens a transaction its excerpt does not close: OPEN)
    sql = "SELECT marker_offset, outcome, hanging FROM t WHERE marker_offset IS NOT NULL"
    (txn,) = _sql(warehouse / "transactions", sql)
    assert (txn["marker_offset"], txn["outcome"], txn["hanging"]) == (
        marker_offset,
        "UNKNOWN",
        False,
    )
    (run,) = _sql(warehouse / "audit_runs", "SELECT status FROM t")
    assert run["status"] == "SUCCEEDED"


def test_rows_of_segments_are_named_by_file_and_byte_where_they_are_shown(spark, tmp_path):
    # The reader locates batches by their file's id and byte position (row_reference); what a
    # finding or a quarantine row shows is still `<file>:<byte>`, the position kafka-dump-log
    # prints, wherever the row was quarantined: by the reader or by validation.
    batches = [
        data_batch(0, 2, producer_id=7, producer_epoch=0, base_sequence=0),
        data_batch(2, 2, producer_id=7, producer_epoch=0, base_sequence=0),  # a duplicate
        data_batch(4, 1, producer_id=9, producer_epoch=-3, base_sequence=0),  # impossible epoch
    ]
    folder = write_partition_dir(tmp_path / "export", "broker-1", "orders", 0, *batches)
    (segment,) = folder.glob("*.log")
    segment.write_bytes(segment.read_bytes() + b"\x00\x00\x00\x00\x00\x00\x00\x05\xff")
    positions = [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    end = sum(len(b) for b in batches)
    warehouse = tmp_path / "wh"
    run_audit(
        spark,
        AuditInputs(batches=(str(tmp_path / "export"),)),
        AuditConfig(),
        str(warehouse),
        run_id="named",
    )
    findings = _sql(warehouse / "findings", "SELECT finding_type, base_offset, source FROM t")
    assert findings == [
        {"finding_type": "DUPLICATE_BATCH", "base_offset": 2, "source": f"{segment}:{positions[1]}"}
    ]
    quarantined = sorted(
        (r["source"], r["raw"] is not None and f'"source":"{segment}:{positions[2]}"' in r["raw"])
        for r in _sql(warehouse / "quarantine", "SELECT source, raw FROM t")
    )
    assert quarantined == sorted([(f"{segment}:{end}", False), (f"{segment}:{positions[2]}", True)])
