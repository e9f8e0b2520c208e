"""Transactions table and HANGING_TRANSACTION (one window pass, no new sort)."""

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from eos_audit.audit import replay_plan
from eos_audit.audit.output_records import findings_of, transactions_of
from eos_audit.config import AuditConfig
from eos_audit.sources.tabular.canonical import to_canonical
from tests.builders import batches_df, computed_once, data, marker

MIN = 60_000


def txn(offset, seq, pid, ts, **kw):
    return data(offset, seq=seq, pid=pid, is_transactional=True, max_timestamp=ts, **kw)


ROWS = [
    # producer 1, transactions v1: COMMIT at the same epoch, the next one continues at seq 2
    txn(0, 0, 1, 0),
    txn(1, 1, 1, 1_000),
    marker(2, pid=1, max_timestamp=2_000, coordinator_epoch=3),
    # producer 2, transactions v2: ABORT at epoch + 1
    txn(3, 0, 2, 3_000),
    marker(4, "ABORT", pid=2, epoch=1, max_timestamp=4_000),
    # producer 1 opens a second transaction and never finishes it (30 min before the end)
    txn(5, 2, 1, 10 * MIN),
    # producer 3: a transaction opened 15 min before the end: young, not hanging
    txn(6, 0, 3, 25 * MIN),
    # producer 4, idempotent only: no transaction
    data(7, seq=0, pid=4, max_timestamp=40 * MIN),
    # producer 5: a marker with no transaction open is legal and makes no transaction
    marker(8, pid=5, max_timestamp=40 * MIN),
]


@pytest.fixture(scope="module")
def records(spark):
    rec = replay_plan.audit(to_canonical(batches_df(spark, ROWS)), AuditConfig(), "r").cache()
    yield rec
    rec.unpersist()


def test_one_row_per_transaction(spark, records):
    actual = transactions_of(records).select(
        "producer_id",
        "start_epoch",
        "end_epoch",
        "first_offset",
        "marker_offset",
        "outcome",
        "hanging",
        "batches",
        "duration_ms",
        "coordinator_epoch",
    )
    expected = spark.createDataFrame(
        [
            (1, 0, 0, 0, 2, "COMMIT", False, 2, 2_000, 3),
            (2, 0, 1, 3, 4, "ABORT", False, 1, 1_000, 0),
            (1, 0, None, 5, None, "OPEN", True, 1, 30 * MIN, None),
            (3, 0, None, 6, None, "OPEN", False, 1, 15 * MIN, None),
        ],
        actual.schema,
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_hanging_transaction_is_reported_at_its_first_batch(records):
    (hanging,) = (
        findings_of(records).where(F.col("finding_type") == "HANGING_TRANSACTION").collect()
    )
    assert (hanging.producer_id, hanging.base_offset, hanging.previous_offset) == (1, 5, 5)
    assert hanging.severity == "ERROR"
    assert hanging.evidence["age_ms"] == str(30 * MIN)
    assert "open since offset 5" in hanging.detail


def test_nothing_else_is_flagged(records):
    types = {r.finding_type for r in findings_of(records).collect()}
    assert types == {"HANGING_TRANSACTION"}


def test_timeout_is_configurable(spark):
    config = AuditConfig().with_overrides(transactions={"max_timeout_ms": 60 * MIN})
    with computed_once(
        replay_plan.audit(to_canonical(batches_df(spark, ROWS)), config, "r")
    ) as rec:
        flagged = findings_of(rec).where(F.col("finding_type") == "HANGING_TRANSACTION").count()
        hanging = transactions_of(rec).where("hanging").count()
    assert (flagged, hanging) == (0, 0)


def test_transaction_ids_are_deterministic(spark, records):
    again = replay_plan.audit(
        to_canonical(batches_df(spark, list(reversed(ROWS)))), AuditConfig(), "x"
    )
    ids = lambda rec: sorted(r.transaction_id for r in transactions_of(rec).collect())  # noqa: E731
    assert ids(records) == ids(again)


def test_export_time_ages_open_transactions(spark):
    """Aged at the export time, producer 3's transaction (open since 25 min) hangs too."""
    batches = to_canonical(batches_df(spark, ROWS))
    export_at = 50 * MIN  # 10 minutes after the last batch of the log
    with computed_once(replay_plan.audit(batches, AuditConfig(), "r", as_of_ms=export_at)) as rec:
        hanging = findings_of(rec).where(F.col("finding_type") == "HANGING_TRANSACTION")
        by_producer = {r.producer_id: r for r in hanging.collect()}
        open_rows = transactions_of(rec).where("outcome = 'OPEN'").collect()
    assert sorted(by_producer) == [1, 3]
    assert by_producer[3].evidence["age_ms"] == str(25 * MIN)
    assert by_producer[3].evidence["age_measured_at"] == "export_time"
    assert sorted((r.producer_id, r.duration_ms) for r in open_rows) == [
        (1, 40 * MIN),
        (3, 25 * MIN),
    ]


def test_a_marker_whose_type_the_export_does_not_show_closes_its_transaction_as_unknown(spark):
    """kafka-dump-log.sh without --deep-iteration shows no type (docs/rules.md#transactions)."""
    rows = [
        txn(0, 0, 1, 0),
        marker(1, None, pid=1, coordinator_epoch=None, max_timestamp=1_000),
        txn(2, 1, 1, 2_000),
        marker(3, "ABORT", pid=1, max_timestamp=3_000),
    ]
    expected = spark.createDataFrame(
        [(0, 1, "UNKNOWN"), (2, 3, "ABORT")],
        "first_offset long, marker_offset long, outcome string",
    )
    audited = replay_plan.audit(to_canonical(batches_df(spark, rows)), AuditConfig(), "r")
    with computed_once(audited) as rec:
        actual = transactions_of(rec).select("first_offset", "marker_offset", "outcome")
        assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)
        assert findings_of(rec).count() == 0


def test_a_transaction_counts_its_data_records(spark):
    """`records`: its data batches' records (markers and other producers' batches not counted)."""
    rows = [
        txn(0, 0, 1, 0, records=3),
        data(3, 2, seq=0, pid=4, max_timestamp=500),  # another producer's batch inside its span
        txn(5, 3, 1, 1_000, records=2),
        marker(7, pid=1, max_timestamp=2_000),
        txn(8, 5, 1, 3_000, records=4),  # left open
    ]
    expected = spark.createDataFrame(
        [(0, "COMMIT", 2, 5), (8, "OPEN", 1, 4)],
        "first_offset long, outcome string, batches long, records long",
    )
    audited = replay_plan.audit(to_canonical(batches_df(spark, rows)), AuditConfig(), "r")
    with computed_once(audited) as rec:
        actual = transactions_of(rec).select("first_offset", "outcome", "batches", "records")
        assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)
