"""The data behind every chart of the report, built from hand-written rows (no Spark)."""

import datetime as dt
import json

from eos_audit.report.data import ReportData, left_out
from eos_audit.report.findings import (
    FindingsMatrix,
    Offenders,
    build_finding_groups,
    build_findings_matrix,
    build_offenders,
    partition_anchor,
)
from eos_audit.report.history import build_history, mark_seen_before
from eos_audit.report.limits import ReportLimits
from eos_audit.report.list_offsets import (
    ListOffsetsView,
    build_list_offsets_view,
    parse_time_ms,
)
from eos_audit.report.overview import build_overview
from eos_audit.report.partitions import (
    PartitionTimelines,
    Span,
    assign_lanes,
    build_partition_timelines,
)
from eos_audit.report.producers import EpochPlots, SeqPoint, build_epoch_plots
from eos_audit.report.transactions import (
    TransactionActivity,
    bucket_width,
    build_transaction_activity,
)

T0 = 1_795_219_200_000  # 2026-11-21T00:00:00Z


def _run_row(**over):
    row = {
        "run_id": "night-1",
        "started_at": dt.datetime(2026, 11, 21, 3, 0, tzinfo=dt.UTC),
        "finished_at": dt.datetime(2026, 11, 21, 3, 2, tzinfo=dt.UTC),
        "status": "SUCCEEDED",
        "package_version": "0.1.0",
        "spark_version": "4.2.0",
        "writer": "delta-rs",
        "inputs": json.dumps({"batches": ["/x"], "acks": [], "export_time": None}),
        "configuration": json.dumps({"run": {"fail_on": "critical"}, "topics": {"compacted": []}}),
        "batches_read": 10,
        "batches_audited": 9,
        "batches_quarantined": 1,
        "findings_critical": 2,
        "findings_error": 0,
        "findings_warning": 0,
        "findings_info": 1,
        "error": None,
    }
    row.update(over)
    return row


def _overview_raw(**run_over):
    return {
        "run": _run_row(**run_over),
        "counts": [
            {"kind": "severity", "key": "CRITICAL", "n": 2},
            {"kind": "severity", "key": "INFO", "n": 1},
            {"kind": "quarantine", "key": "record_batch", "n": 1},
            {"kind": "quarantine", "key": "acks", "n": 3},
            {"kind": "partitions", "key": "partitions", "n": 2},
            {"kind": "partitions", "key": "batches", "n": 8},
            {"kind": "partitions", "key": "replica_batches", "n": 1},
            {"kind": "partitions", "key": "batches_with_producer_id", "n": 6},
            {"kind": "partitions", "key": "partitions_below_full", "n": 1},
        ],
        "lowest_coverage": [{"topic": "t", "partition": 1, "batches": 4, "coverage": 0.5}],
    }


def test_overview_checks_reconcile_and_coverage():
    o = build_overview(_overview_raw(), "night-1")
    assert all(c.ok for c in o.checks), [c for c in o.checks if not c.ok]
    assert len(o.checks) == 8
    assert o.quarantine_by_input == {"record_batch": 1, "acks": 3}
    assert o.coverage.share == 0.75
    assert o.coverage.lowest == [("t", 1, 4, 0.5)]
    # Empty inputs are not worth a line; the configuration is flattened to keys.
    assert o.inputs == {"batches": ["/x"]}
    assert o.configuration == [("run.fail_on", "critical"), ("topics.compacted", "[]")]
    assert o.findings_total == 3 and o.versions == "eos-audit 0.1.0, Spark 4.2.0"


def test_overview_check_fails_when_counts_disagree():
    o = build_overview(_overview_raw(batches_read=11, findings_critical=3), "night-1")
    failed = {c.statement: (c.expected, c.actual) for c in o.checks if not c.ok}
    assert failed == {
        "batches read = audited + quarantined + skipped (--since-state)": (11, 10),
        "CRITICAL findings recorded = CRITICAL rows in findings": (3, 2),
    }


def test_overview_reconciles_batches_skipped_by_since_state():
    raw = _overview_raw(batches_read=13, batches_skipped=3)
    raw["counts"].append({"kind": "partitions", "key": "batches_skipped", "n": 3})
    assert all(c.ok for c in build_overview(raw, "night-2").checks)
    raw["counts"][-1]["n"] = 2  # partition_summary lost one: the check says so
    failed = [c.statement for c in build_overview(raw, "night-2").checks if not c.ok]
    assert failed == ["batches skipped = batches_skipped of partition_summary"]


def test_overview_of_an_unrecorded_run():
    raw = _overview_raw()
    raw["run"] = None
    o = build_overview(raw, "lost")
    assert (o.run_id, o.status, o.batches_read) == ("lost", "NOT RECORDED", 0)
    assert o.coverage.share == 0.75


def test_matrix_orders_by_worst_severity_then_count():
    m = build_findings_matrix(
        [
            {"finding_type": "UNKNOWN_PRODUCER", "severity": "INFO", "count": 9},
            {"finding_type": "SEQUENCE_GAP", "severity": "CRITICAL", "count": 1},
            {"finding_type": "SEQUENCE_GAP", "severity": "INFO", "count": 4},
            {"finding_type": "DUPLICATE_BATCH", "severity": "CRITICAL", "count": 3},
            {"finding_type": "CORRUPT_BATCH", "severity": "ERROR", "count": 7},
        ]
    )
    assert [t.finding_type for t in m.types] == [
        "SEQUENCE_GAP",  # CRITICAL, 5 in all
        "DUPLICATE_BATCH",  # CRITICAL, 3
        "CORRUPT_BATCH",
        "UNKNOWN_PRODUCER",
    ]
    assert m.total == 24
    assert m.by_severity() == {"CRITICAL": 4, "ERROR": 7, "WARNING": 0, "INFO": 13}
    assert m.types[0].meaning.startswith("Sequences are missing")


def test_matrix_gives_each_type_its_first_and_last_batch_time():
    m = build_findings_matrix(
        [
            {"finding_type": "SEQUENCE_GAP", "severity": "CRITICAL", "count": 1,
             "first_ms": T0 + 5_000, "last_ms": T0 + 5_000},
            {"finding_type": "SEQUENCE_GAP", "severity": "INFO", "count": 4,
             "first_ms": T0, "last_ms": T0 + 3_000},
            # Findings written before batch_time existed, without a batch timestamp.
            {"finding_type": "CORRUPT_BATCH", "severity": "ERROR", "count": 7,
             "first_ms": None, "last_ms": None},
        ]
    )  # fmt: skip
    gap, corrupt = m.types
    assert (gap.first_ms, gap.last_ms) == (T0, T0 + 5_000)
    assert (corrupt.first_ms, corrupt.last_ms) == (None, None)


def _finding(fid, ftype, offset, **over):
    row = {
        "finding_id": fid,
        "finding_type": ftype,
        "severity": "CRITICAL",
        "cause": None,
        "kafka_error": None,
        "topic": "payments",
        "partition": 0,
        "producer_id": 1001,
        "producer_epoch": 0,
        "base_offset": offset,
        "last_offset": offset + 2 if offset >= 0 else offset,
        "base_sequence": 12,
        "last_sequence": 14,
        "expected_sequence": None,
        "previous_offset": None,
        "detail": "d",
        "spec_ref": "docs/rules.md#sequence-gap",
        "evidence": None,
        "source": "s",
        "batch_ms": T0 + offset * 1_000,
    }
    row.update(over)
    return row


def test_evidence_links_the_earlier_batch():
    rows = [
        _finding("a", "DUPLICATE_BATCH", 18, previous_offset=12),
        _finding("b", "SEQUENCE_GAP", 12, previous_offset=6, expected_sequence=9),
        _finding("c", "SEQUENCE_GAP", 30, previous_offset=25, topic="ledger"),
        _finding("d", "CLIENT_SEQUENCE_ERROR", -1, severity="INFO", evidence={"z": "1", "a": "2"}),
    ]
    matrix = build_findings_matrix(
        [
            {"finding_type": "DUPLICATE_BATCH", "severity": "CRITICAL", "count": 5},
            {"finding_type": "SEQUENCE_GAP", "severity": "CRITICAL", "count": 2},
            {"finding_type": "CLIENT_SEQUENCE_ERROR", "severity": "INFO", "count": 1},
        ]
    )
    groups = build_finding_groups(rows, matrix, frozenset({partition_anchor("ledger", 0)}))
    by_type = {g.finding_type: g for g in groups}
    (dup,) = by_type["DUPLICATE_BATCH"].items
    # The duplicate's first copy at offset 12 is itself a listed finding: link to it.
    assert (dup.earlier, dup.earlier_href) == ("offset 12: the earlier batch", "f-b")
    assert dup.batch == "payments-0 offsets 18–20, sequences 12–14"
    assert dup.producer == "producer 1001 epoch 0"
    assert by_type["DUPLICATE_BATCH"].omitted == 4
    gap_payments, gap_ledger = by_type["SEQUENCE_GAP"].items
    assert gap_payments.earlier_href is None  # payments-0 has no timeline drawn
    assert gap_ledger.earlier_href == "p-ledger-0"
    assert gap_payments.expected_sequence == 9
    assert dup.batch_ms == T0 + 18_000
    assert dup.seen_before is None  # not compared with earlier runs
    (client,) = by_type["CLIENT_SEQUENCE_ERROR"].items
    assert client.batch == "payments-0, not in the log (the send failed), sequences 12–14"
    assert list(client.evidence) == ["a", "z"]
    assert [g.finding_type for g in groups] == [t.finding_type for t in matrix.types]


def test_offenders_split_partitions_by_severity():
    o = build_offenders(
        {
            "producers": [
                {
                    "producer_id": 7,
                    "findings": 3,
                    "partitions": 2,
                    "violated_epochs": 1,
                    "types": ["DUPLICATE_BATCH", "SEQUENCE_GAP"],
                }
            ],
            "partitions": [
                {
                    "topic": "t",
                    "partition": 0,
                    "findings": 3,
                    "findings_critical": 1,
                    "findings_error": 0,
                    "findings_warning": 0,
                    "findings_info": 2,
                },
                {
                    "topic": "u",
                    "partition": 1,
                    "findings": 1,
                    "findings_critical": 0,
                    "findings_error": 1,
                    "findings_warning": 0,
                    "findings_info": 0,
                },
            ],
        },
        frozenset({"p-t-0"}),
    )
    (p,) = o.producers
    assert (p.label, p.findings) == ("producer 7", 3)
    assert p.note == "2 partition(s), 1 violated epoch(s): DUPLICATE_BATCH, SEQUENCE_GAP"
    assert [(x.label, x.href, x.note) for x in o.partitions] == [
        ("t-0", "p-t-0", "1 CRITICAL, 2 INFO"),
        ("u-1", None, "1 ERROR"),
    ]
    assert o.partitions[0].counts == {"CRITICAL": 1, "ERROR": 0, "WARNING": 0, "INFO": 2}


def test_overlapping_spans_get_their_own_lanes():
    spans = assign_lanes(
        [
            Span("epoch 4", 0, 14, "violated"),
            Span("epoch 5", 12, 18, "violated"),
            Span("epoch 6", 15, 20, "clean"),
            Span("epoch 7", 21, 22, "clean"),
        ]
    )
    assert [(s.label, s.lane) for s in spans] == [
        ("epoch 4", 0),
        ("epoch 5", 1),
        ("epoch 6", 0),  # lane 0 is free again after offset 14
        ("epoch 7", 0),
    ]


def _timeline_raw():
    return {
        "partitions": [
            {
                "topic": "ledger",
                "partition": 0,
                "first_offset": 0,
                "last_offset": 18,
                "batches": 14,
                "coverage": 1.0,
                "findings": 5,
            },
            {
                "topic": "orders",
                "partition": 3,
                "first_offset": None,
                "last_offset": None,
                "batches": 0,
                "coverage": None,
                "findings": 0,
            },
        ],
        "epochs": [
            {
                "topic": "ledger",
                "partition": 0,
                "producer_id": 2001,
                "producer_epoch": 4,
                "first_offset": 0,
                "last_offset": 14,
                "status": "violated",
            },
            {
                "topic": "ledger",
                "partition": 0,
                "producer_id": 2001,
                "producer_epoch": 5,
                "first_offset": 12,
                "last_offset": 18,
                "status": "clean",
            },
        ],
        "transactions": [
            {
                "topic": "ledger",
                "partition": 0,
                "producer_id": 2001,
                "first_offset": 15,
                "marker_offset": None,
                "outcome": "OPEN",
                "hanging": True,
            }
        ],
        "marks": [
            {
                "topic": "ledger",
                "partition": 0,
                "finding_id": "x1",
                "finding_type": "FENCED_PRODUCER_EPOCH",
                "severity": "CRITICAL",
                "base_offset": 13,
                "last_offset": 14,
                "batch_ms": T0 + 13_000,
            }
        ],
        "times": [{"topic": "ledger", "partition": 0, "first_ms": T0, "last_ms": T0 + 18_000}],
        "counts": {
            "epochs": {("ledger", 0): 2},
            "transactions": {("ledger", 0): 1},
            "marks": {("ledger", 0): 4},
        },
    }


def test_partition_timeline_places_epochs_transactions_and_findings():
    t = build_partition_timelines(_timeline_raw(), total_partitions=7)
    assert t.omitted == 5
    ledger, orders = t.timelines
    assert ledger.anchor == "p-ledger-0" and ledger.lanes == 2
    assert [(s.label, s.start, s.end, s.kind) for s in ledger.epochs] == [
        ("producer 2001 epoch 4", 0, 14, "violated"),
        ("producer 2001 epoch 5", 12, 18, "clean"),
    ]
    # An open transaction reaches the end of the log it pins.
    (txn,) = ledger.transactions
    assert (txn.start, txn.end, txn.kind) == (15, 18, "HANGING")
    (mark,) = ledger.marks
    assert (mark.href, mark.start, mark.end, mark.severity) == ("f-x1", 13, 14, "CRITICAL")
    # Time at the mark and at both ends of the log, to map an incident's window to offsets.
    assert mark.time_ms == T0 + 13_000
    assert (ledger.first_ms, ledger.last_ms) == (T0, T0 + 18_000)
    assert (orders.first_ms, orders.last_ms) == (None, None)
    assert (ledger.omitted_marks, ledger.omitted_epochs, ledger.omitted_transactions) == (3, 0, 0)
    assert ledger.domain == (0, 18)
    assert orders.domain == (0, 0) and not orders.epochs


def _epoch(**over):
    row = {
        "topic": "payments",
        "partition": 1,
        "producer_id": 1002,
        "producer_epoch": 0,
        "first_offset": 0,
        "last_offset": 20,
        "first_sequence": 0,
        "last_sequence": 23,
        "status": "violated",
        "findings_total": 3,
        "first_timestamp": T0,
        "last_timestamp": T0 + 20_000,
    }
    row.update(over)
    return row


def _epoch_finding(fid, ftype, **over):
    row = {
        "topic": "payments",
        "partition": 1,
        "producer_id": 1002,
        "producer_epoch": 0,
        "finding_id": fid,
        "finding_type": ftype,
        "severity": "CRITICAL",
        "base_offset": 9,
        "last_offset": 11,
        "base_sequence": 12,
        "last_sequence": 14,
        "expected_sequence": None,
        "previous_offset": None,
        "batch_ms": T0 + 9_000,
    }
    row.update(over)
    return row


def test_epoch_plot_puts_the_evidence_batches_on_the_plot():
    raw = {
        "epochs": [_epoch()],
        "total": 4,
        "findings": [
            _epoch_finding("gap", "SEQUENCE_GAP", expected_sequence=9, previous_offset=6),
            # The acknowledged position of a lost write is not a batch of the log.
            _epoch_finding("lost", "ACKED_WRITE_LOST", base_sequence=9, last_sequence=11),
            _epoch_finding(
                "dup",
                "DUPLICATE_BATCH",
                base_offset=15,
                last_offset=15,
                base_sequence=17,
                last_sequence=17,
                previous_offset=13,
            ),  # fmt: skip
            _epoch_finding("failed", "CLIENT_SEQUENCE_ERROR", base_offset=-1, last_offset=-1),
        ],
        "counts": {("payments", 1, 1002, 0): 6},
    }
    plots = build_epoch_plots(raw)
    assert plots.omitted == 3
    (p,) = plots.plots
    assert p.anchor == "e-payments-1-1002-0"
    assert p.points == [
        SeqPoint(0, 0, 0, 0, "first"),
        SeqPoint(6, 6, 8, 8, "earlier"),  # the batch before the gap ended at expected - 1
        SeqPoint(9, 11, 12, 14, "finding"),
        SeqPoint(13, 13, 17, 17, "earlier"),  # the duplicate's first copy
        SeqPoint(15, 15, 17, 17, "finding"),
        SeqPoint(20, 20, 23, 23, "last"),
    ]
    assert [(m.kind, m.href, m.offset, m.sequence) for m in p.marks] == [
        ("gap", "f-gap", 9, 12),
        ("lost", "f-lost", 9, 9),
        ("duplicate", "f-dup", 15, 17),
    ]
    assert (p.unplaced, p.omitted_marks) == (1, 2)
    assert (p.first_ms, p.last_ms) == (T0, T0 + 20_000)
    assert {m.time_ms for m in p.marks} == {T0 + 9_000}
    assert p.x_domain == (0, 20) and p.y_domain == (0, 23)


def test_epoch_plot_of_an_unknown_producer_shows_the_sequences_below_it():
    raw = {
        "epochs": [
            _epoch(
                first_offset=5000,
                last_offset=5015,
                first_sequence=1200,
                last_sequence=1211,
                status="benign",
            )
        ],  # fmt: skip
        "total": 1,
        "findings": [
            _epoch_finding(
                "u",
                "UNKNOWN_PRODUCER",
                base_offset=5000,
                last_offset=5002,
                base_sequence=1200,
                last_sequence=1202,
                expected_sequence=0,
                severity="INFO",
            )  # fmt: skip
        ],
        "counts": {("payments", 1, 1002, 0): 1},
    }
    (p,) = build_epoch_plots(raw).plots
    (mark,) = p.marks
    assert (mark.kind, mark.expected_sequence) == ("gap", 0)
    assert p.y_domain == (0, 1211)
    # The finding's batch replaces the epoch's first batch at the same offset.
    assert [pt.role for pt in p.points] == ["finding", "last"]


def test_transaction_buckets_cover_the_whole_range():
    assert bucket_width(0, 59, 60) == 1
    assert bucket_width(0, 60, 60) == 2
    assert bucket_width(5, 5, 60) == 1
    raw = {
        "totals": [
            {"kind": "COMMIT", "count": 5},
            {"kind": "ABORT", "count": 1},
            {"kind": "HANGING", "count": 2},
        ],
        "range": {"start": T0, "end": T0 + 9_999},
        "bucket_ms": 1_000,
        "buckets": [
            {"b": 0, "kind": "COMMIT", "count": 5},
            {"b": 3, "kind": "ABORT", "count": 1},
            {"b": 9, "kind": "HANGING", "count": 2},
        ],
        "spans": [
            {
                "topic": "t",
                "partition": 0,
                "producer_id": 9,
                "start_epoch": 1,
                "kind": "HANGING",
                "first_offset": 4,
                "marker_offset": None,
                "first_timestamp": T0 + 9_000,
                "end_ms": T0 + 9_999,
                "duration_ms": 999,
            }
        ],
    }
    a = build_transaction_activity(raw)
    assert a.totals == {"COMMIT": 5, "ABORT": 1, "UNKNOWN": 0, "OPEN": 0, "HANGING": 2}
    assert a.total == 8
    assert [b.start_ms - T0 for b in a.buckets] == [i * 1_000 for i in range(10)]
    assert a.buckets[3].counts == {"COMMIT": 0, "ABORT": 1, "UNKNOWN": 0, "OPEN": 0, "HANGING": 0}
    assert a.buckets[5].counts == dict.fromkeys(a.totals, 0)
    (span,) = a.spans
    assert span.label == "t-0 producer 9 epoch 1" and span.end_ms - span.start_ms == 999
    assert a.omitted_spans == 2  # one abort and one hanging transaction not drawn one by one


def test_transactions_closed_by_an_untyped_marker_are_their_own_kind():
    raw = {
        "totals": [{"kind": "UNKNOWN", "count": 3}, {"kind": "COMMIT", "count": 1}],
        "range": {"start": T0, "end": T0 + 999},
        "bucket_ms": 1_000,
        "buckets": [
            {"b": 0, "kind": "UNKNOWN", "count": 3},
            {"b": 0, "kind": "COMMIT", "count": 1},
        ],
        "spans": [],
    }
    a = build_transaction_activity(raw)
    assert a.totals["UNKNOWN"] == 3 and a.total == 4
    assert a.buckets[0].counts["UNKNOWN"] == 3
    assert list(a.totals) == ["COMMIT", "ABORT", "UNKNOWN", "OPEN", "HANGING"]


def test_no_transactions():
    a = build_transaction_activity(
        {"totals": [], "range": {"start": None, "end": None}, "buckets": [], "spans": []}
    )
    assert a.total == 0 and a.buckets == [] and a.start_ms is None


def test_evidence_times_parse_as_utc():
    assert parse_time_ms("2026-11-21 00:01:00") == T0 + 60_000
    assert parse_time_ms("2026-11-21T00:00:03.500Z") == T0 + 3_500
    assert parse_time_ms("2026-11-21T01:00:00+01:00") == T0
    assert parse_time_ms("yesterday") is None and parse_time_ms(None) is None


def test_list_offsets_series_carry_observations_regressions_and_errors():
    raw = {
        "chosen": [("payments", 0), ("ledger", 2)],
        "marks": [
            {
                "finding_id": "r",
                "finding_type": "LIST_OFFSETS_REGRESSION",
                "severity": "WARNING",
                "cause": "LEADER_CHANGE_TRANSIENT",
                "topic": "payments",
                "partition": 0,
                "base_offset": 25,
                "previous_offset": 30,
                "batch_timestamp": T0 + 180_000,
                "evidence": {
                    "earlier_max_observed_at": "2026-11-21 00:01:00",
                    "recovered_at": "2026-11-21 00:04:00",
                },
            },
            {
                "finding_id": "m",
                "finding_type": "ACKED_DATA_MISSING_FROM_LOG",
                "severity": "CRITICAL",
                "cause": None,
                "topic": "ledger",
                "partition": 2,
                "base_offset": 90,
                "previous_offset": None,
                "batch_timestamp": T0,
                "evidence": {"exported_log_end_offset": "80"},
            },
        ],
        "marks_total": 3,
        "errors": [
            {
                "topic": "payments",
                "partition": 0,
                "spec": "latest",
                "error": "OFFSET_NOT_AVAILABLE",
                "observations": 1,
                "first_ms": T0 + 120_000,
                "last_ms": T0 + 120_000,
            }
        ],
        "errors_total": 1,
        "points": [
            {
                "topic": "payments",
                "partition": 0,
                "spec": "latest",
                "isolation": "read_uncommitted",
                "time_ms": T0 + 60_000 * i,
                "low": o,
                "high": o,
                "n": 1,
            }
            for i, o in ((4, 36), (1, 30), (3, 25))
        ],  # fmt: skip
        "partitions_observed": 5,
        "note": "observations read again from x",
    }
    v = build_list_offsets_view(raw)
    assert v.has_content and v.omitted_partitions == 3
    payments, ledger = v.series
    (line,) = payments.lines
    assert (line.spec, line.isolation) == ("latest", "read_uncommitted")
    assert [(p.time_ms - T0, p.high) for p in line.points] == [
        (60_000, 30),
        (180_000, 25),
        (240_000, 36),
    ]
    (mark,) = payments.marks
    assert (mark.href, mark.offset, mark.earlier_offset) == ("f-r", 25, 30)
    assert (mark.earlier_time_ms, mark.recovered_ms) == (T0 + 60_000, T0 + 240_000)
    assert [e.error for e in payments.errors] == ["OFFSET_NOT_AVAILABLE"]
    assert payments.time_domain == (T0 + 60_000, T0 + 240_000)
    assert payments.offset_domain == (25, 36)
    # Without observations, the chart still has the evidence of the finding.
    assert ledger.lines == [] and ledger.marks[0].log_end_offset == 80
    assert ledger.offset_domain == (80, 90)


def test_list_offsets_without_input():
    v = build_list_offsets_view(
        {
            "chosen": [],
            "marks": [],
            "marks_total": 0,
            "errors": [],
            "errors_total": 0,
            "points": [],
            "note": "the run had no --list-offsets input",
        }
    )
    assert not v.has_content and v.omitted_partitions == 0


def _data(**over):
    parts = {
        "overview": build_overview(_overview_raw(), "night-1"),
        "matrix": FindingsMatrix([]),
        "groups": [],
        "offenders": Offenders([], []),
        "timelines": PartitionTimelines([], 0),
        "epochs": EpochPlots([], 0),
        "transactions": TransactionActivity({"COMMIT": 0}),
        "list_offsets": ListOffsetsView([], 0, 0, "none"),
        "limits": ReportLimits(),
        "generated_ms": T0,
    }
    parts.update(over)
    return ReportData(**parts)


def test_left_out_says_what_the_report_does_not_show():
    assert left_out(_data()) == []
    matrix = build_findings_matrix(
        [{"finding_type": "DUPLICATE_BATCH", "severity": "CRITICAL", "count": 5}]
    )
    groups = build_finding_groups([_finding("a", "DUPLICATE_BATCH", 18)], matrix)
    data = _data(
        matrix=matrix,
        groups=groups,
        timelines=build_partition_timelines(_timeline_raw(), total_partitions=7),
        epochs=EpochPlots([], 30),
    )
    assert left_out(data) == [
        "DUPLICATE_BATCH: 4 of 5 findings not listed (the first 1 are, worst severity and "
        "lowest offset first)",
        "partitions: 5 of 7 not drawn (the 2 with the most severe findings are)",
        "ledger-0: 3 findings not drawn on its timeline",
        "producer epochs: 30 of 30 with findings not drawn (violated and most findings first)",
    ]


def test_a_run_fails_the_job_like_the_cli_exit_code():
    o = build_overview(_overview_raw(), "night-1")  # 2 CRITICAL, 1 INFO
    assert o.failure("critical") == "findings at or above critical: 2 CRITICAL"
    assert o.failure("warning") == "findings at or above warning: 2 CRITICAL"
    assert o.failure("never") is None
    info_only = build_overview(_overview_raw(findings_critical=0), "night-1")
    assert info_only.failure("warning") is None
    quarantined = build_overview(
        _overview_raw(status="QUARANTINE_EXCEEDED", error="quarantined 1 of 10"), "night-1"
    )
    assert quarantined.failure("never") == "status QUARANTINE_EXCEEDED: quarantined 1 of 10"
    assert build_overview(_overview_raw(status="FAILED"), "x").failure("never") == "status FAILED"


def _history_run(run_id, day, status="SUCCEEDED", critical=0, info=0, audited=100):
    start = T0 + day * 86_400_000 + 3 * 3_600_000
    return {"run_id": run_id, "status": status, "started_ms": start,
            "finished_ms": start + 95_000, "batches_audited": audited,
            "findings_critical": critical, "findings_error": 0, "findings_warning": 0,
            "findings_info": info}  # fmt: skip


def _history_raw():
    return {
        # Newest first, as query_history reads them; 12 runs started up to night-3.
        "runs": [
            _history_run("night-3", 2, critical=5, info=1, audited=120),
            _history_run("night-2", 1, status="FAILED"),
            _history_run("night-1", 0, critical=2, audited=90),
        ],
        "total": 12,
        "compared": ["night-1"],  # the FAILED run's tables are not complete: not compared
        "by_type": [
            {"finding_type": "SEQUENCE_GAP", "new": 3, "seen": 2},
            {"finding_type": "UNKNOWN_PRODUCER", "new": 0, "seen": 1},
        ],
    }


def test_history_shows_runs_oldest_first_and_what_is_new():
    h = build_history(_history_raw(), "night-3")
    assert [(r.run_id, r.is_current) for r in h.runs] == [
        ("night-1", False), ("night-2", False), ("night-3", True)
    ]  # fmt: skip
    night_1, _, night_3 = h.runs
    assert night_1.findings == {"CRITICAL": 2, "ERROR": 0, "WARNING": 0, "INFO": 0}
    assert (night_3.findings_total, night_3.batches_audited, night_3.duration_s) == (6, 120, 95.0)
    assert (h.new_total, h.seen_total, h.omitted) == (3, 3, 9)
    assert h.new_by_type["SEQUENCE_GAP"] == 3 and h.seen_by_type["UNKNOWN_PRODUCER"] == 1


def test_listed_findings_are_marked_new_or_seen_before():
    matrix = build_findings_matrix(
        [{"finding_type": "SEQUENCE_GAP", "severity": "CRITICAL", "count": 2}]
    )
    groups = build_finding_groups(
        [_finding("old", "SEQUENCE_GAP", 12), _finding("fresh", "SEQUENCE_GAP", 30)], matrix
    )
    h = build_history(_history_raw(), "night-3")
    marked = mark_seen_before(groups, h, {"old": 1})
    assert {f.finding_id: f.seen_before for f in marked[0].items} == {"old": True, "fresh": False}
    # The first run of a warehouse has nothing to compare with: nothing is marked.
    first = build_history({**_history_raw(), "compared": []}, "night-3")
    assert mark_seen_before(groups, first, {}) == groups


def test_left_out_says_which_runs_the_history_does_not_show():
    data = _data(history=build_history(_history_raw(), "night-3"))
    assert left_out(data) == [
        "history: 9 earlier runs not shown (the latest 3 up to this one are; findings are "
        "compared with the 1 earlier finished runs among them)"
    ]


# Long labels and close runs: what the charts must lay out without clipping or overlapping.
LONG_TOPIC = "payments.settlement.eu-west-1.v2.retry-after-dead-letter-queue.compacted-audit"


def _history_raw_minutes_apart():
    """Nightly runs days apart, then this run: a rerun of the last night four minutes after it."""
    night_3 = _history_run("night-3", 2, critical=5, info=1, audited=120)
    rerun_ms = night_3["started_ms"] + 4 * 60_000
    rerun = {
        **_history_run("night-3-rerun", 2, critical=1, audited=120),
        "started_ms": rerun_ms,
        "finished_ms": rerun_ms + 95_000,
    }
    return {
        **_history_raw(),
        "runs": [rerun, *_history_raw()["runs"]],
        "total": 13,
        "compared": ["night-3", "night-1"],
    }


def _long_labels_rows():
    """Findings matrix rows with the longest finding types of the registry."""
    return [
        {"finding_type": "NEW_EPOCH_NONZERO_SEQUENCE", "severity": "ERROR", "count": 1,
         "first_ms": T0 + 7_000, "last_ms": T0 + 7_000},
        {"finding_type": "ACKED_DATA_MISSING_FROM_LOG", "severity": "CRITICAL", "count": 1_234_567,
         "first_ms": T0, "last_ms": T0 + 9_000},
        {"finding_type": "SEQUENCE_GAP", "severity": "CRITICAL", "count": 2,
         "first_ms": T0 + 9_000, "last_ms": T0 + 9_000},
    ]  # fmt: skip


def _long_labels_data():
    """A report with long labels and two runs four minutes apart.

    A NEW_EPOCH_NONZERO_SEQUENCE finding, a partition of a long topic (offenders, a hanging
    transaction across the whole range), a count in the millions, and this run a rerun.
    """
    matrix = build_findings_matrix(_long_labels_rows())
    groups = build_finding_groups(
        [_finding("ne", "NEW_EPOCH_NONZERO_SEQUENCE", 7, severity="ERROR")], matrix
    )
    offenders = build_offenders(
        {
            "producers": [{"producer_id": 9_223_372_036_854_775_807, "findings": 1_234_570,
                           "partitions": 1, "violated_epochs": 1,
                           "types": ["NEW_EPOCH_NONZERO_SEQUENCE"]}],
            "partitions": [{"topic": LONG_TOPIC, "partition": 127, "findings": 1_234_570,
                            "findings_critical": 1_234_569, "findings_error": 1,
                            "findings_warning": 0, "findings_info": 0}],
        },
        frozenset(),
    )  # fmt: skip
    transactions = build_transaction_activity(
        {
            "totals": [{"kind": "COMMIT", "count": 4}, {"kind": "HANGING", "count": 1}],
            "range": {"start": T0, "end": T0 + 9_999},
            "bucket_ms": 1_000,
            "buckets": [{"b": 0, "kind": "COMMIT", "count": 4},
                        {"b": 1, "kind": "HANGING", "count": 1}],
            # A hanging transaction of the long topic from the start of the range to its end.
            "spans": [{"topic": LONG_TOPIC, "partition": 127, "producer_id": 9_223_372_036,
                       "start_epoch": 32_767, "kind": "HANGING", "first_offset": 4,
                       "marker_offset": None, "first_timestamp": T0 + 500, "end_ms": T0 + 9_999,
                       "duration_ms": 9_499}],
        }
    )  # fmt: skip
    history = build_history(_history_raw_minutes_apart(), "night-3-rerun")
    return _data(
        overview=build_overview(_overview_raw(run_id="night-3-rerun"), "night-3-rerun"),
        matrix=matrix,
        groups=mark_seen_before(groups, history, {}),
        offenders=offenders,
        timelines=build_partition_timelines(_timeline_raw(), 2),
        transactions=transactions,
        history=history,
    )


def test_a_rerun_minutes_after_a_night_is_a_run_of_its_own_in_the_history():
    h = build_history(_history_raw_minutes_apart(), "night-3-rerun")
    assert [(r.run_id, r.is_current) for r in h.runs] == [
        ("night-1", False), ("night-2", False), ("night-3", False), ("night-3-rerun", True)
    ]  # fmt: skip
    assert h.runs[-1].started_ms - h.runs[-2].started_ms == 4 * 60_000
    data = _long_labels_data()
    assert [t.finding_type for t in data.matrix.types] == [
        "ACKED_DATA_MISSING_FROM_LOG", "SEQUENCE_GAP", "NEW_EPOCH_NONZERO_SEQUENCE"
    ]  # fmt: skip
    assert data.offenders.partitions[0].label == f"{LONG_TOPIC}-127"
