"""ACKED_WRITE_LOST and ACKED_OFFSET_MISMATCH: acknowledgements checked in the one pass."""

import datetime as dt
import re

from chispa import assert_df_equality
from pyspark.sql import functions as F

from eos_audit.audit import replay_plan
from eos_audit.audit.output_records import findings_of
from eos_audit.config import AuditConfig
from eos_audit.schemas import ACKS
from eos_audit.sources.tabular.canonical import to_canonical
from tests.builders import batches_df, data

AT = dt.datetime(2026, 11, 21, 3, 0)
LOG = [
    # partition t-0, offsets 100..111 (the log starts above 0: retention)
    data(100, 3, seq=0),
    data(103, 3, seq=3),
    data(106, 3, seq=6),
    data(109, 3, seq=6),  # the same batch written twice (a duplicate)
    data(112, 2, seq=0, pid=2, epoch=3),
]


def ack(offset, seq, *, pid=1, epoch=0, count=3, error=None, topic="t", partition=0, name=""):
    return (AT, topic, partition, pid, epoch, seq, count, offset, error, 0, name or f"ack@{offset}")


def findings(spark, acks, config=None):
    rec = replay_plan.audit(
        to_canonical(batches_df(spark, LOG)),
        config or AuditConfig(),
        "r",
        acks_df=spark.createDataFrame(acks, ACKS),
    )
    rows = findings_of(rec).where(F.col("finding_type").startswith("ACKED")).collect()
    return sorted(rows, key=lambda r: (r.source or "", r.finding_type))


def test_acknowledged_where_the_log_holds_it_is_fine(spark):
    acks = [
        ack(100, 0),
        ack(103, 3),
        ack(106, 6),
        ack(109, 6),  # the retry's acknowledgement: the log holds the batch there too
        ack(112, 0, pid=2, epoch=3, count=2),
    ]
    assert findings(spark, acks) == []


def test_lost_write_inside_the_log_range(spark):
    (lost,) = findings(spark, [ack(106, 9)])
    assert (lost.finding_type, lost.severity, lost.cause) == (
        "ACKED_WRITE_LOST",
        "CRITICAL",
        "UNEXPLAINED",
    )
    assert (lost.producer_id, lost.base_sequence, lost.last_sequence) == (1, 9, 11)
    assert (lost.base_offset, lost.last_offset, lost.source) == (106, 108, "ack@106")
    assert lost.evidence["log_start_offset"] == "100"
    assert lost.evidence["log_end_offset"] == "114"
    assert lost.evidence["acknowledged_at"] == "2026-11-21T03:00:00.000Z"
    assert "acknowledged write is lost" in lost.detail


def test_another_epoch_or_producer_does_not_count(spark):
    lost = findings(spark, [ack(100, 0, epoch=1, name="epoch"), ack(100, 0, pid=3, name="pid")])
    assert [(r.finding_type, r.source) for r in lost] == [
        ("ACKED_WRITE_LOST", "epoch"),
        ("ACKED_WRITE_LOST", "pid"),
    ]


def test_batch_at_another_offset(spark):
    (moved,) = findings(spark, [ack(101, 3)])
    assert (moved.finding_type, moved.severity) == ("ACKED_OFFSET_MISMATCH", "CRITICAL")
    assert moved.previous_offset == 103
    assert "holds that batch at offset 103" in moved.detail
    # a duplicated batch acknowledged at neither of its offsets
    (dup,) = findings(spark, [ack(107, 6)])
    assert (dup.finding_type, dup.previous_offset, dup.evidence["log_batches"]) == (
        "ACKED_OFFSET_MISMATCH",
        106,
        "2",
    )


UNCHECKABLE = [
    ack(90, 0, name="below-start"),  # below the log start: retention deleted it
    ack(114, 9, name="at-end"),  # at the log end: written after the export
    ack(500, 9, name="past-end"),
    ack(0, 0, topic="not-exported", name="other-partition"),  # not in the export
    ack(None, 9, error="NOT_LEADER_OR_FOLLOWER", name="failed"),  # not an acknowledgement
    ack(106, -1, pid=-1, epoch=-1, name="no-idempotence"),  # nothing identifies the batch
]


def test_acknowledgements_that_cannot_be_checked(spark):
    # One audit for all: an acknowledgement's verdict never depends on another acknowledgement
    # (only the log's batches count as "in the log"), so together they must still give nothing.
    assert findings(spark, UNCHECKABLE) == []


def test_compacted_topics_may_drop_whole_batches(spark):
    config = AuditConfig().with_overrides(topics={"compacted": ["t"]})
    (lost,) = findings(spark, [ack(106, 9)], config)
    assert (lost.finding_type, lost.cause, lost.severity) == (
        "ACKED_WRITE_LOST",
        "COMPACTION",
        "INFO",
    )


def test_acknowledgements_change_nothing_else(spark):
    batches = to_canonical(batches_df(spark, LOG))
    without = replay_plan.audit(batches, AuditConfig(), "r")
    with_acks = replay_plan.audit(
        batches, AuditConfig(), "r", acks_df=spark.createDataFrame([ack(106, 9)], ACKS)
    )

    def others(rec):
        rows = rec.where(
            ~((F.col("kind") == "findings") & F.col("findings.finding_type").startswith("ACKED"))
        )
        return sorted(map(str, rows.collect()))

    assert others(with_acks) == others(without)


def test_acknowledgements_ride_the_one_shuffle(spark):
    rec = replay_plan.audit(
        to_canonical(batches_df(spark, LOG)),
        AuditConfig(),
        "r",
        acks_df=spark.createDataFrame([ack(106, 9)], ACKS),
    )
    plan = rec._jdf.queryExecution().executedPlan().toString()
    assert len(re.findall(r"\bExchange hashpartitioning", plan)) == 1, plan


def test_findings_rows(spark):
    acks = [ack(106, 9, name="lost"), ack(101, 3, name="moved"), ack(100, 0, name="fine")]
    rec = replay_plan.audit(
        to_canonical(batches_df(spark, LOG)),
        AuditConfig(),
        "r",
        acks_df=spark.createDataFrame(acks, ACKS),
    )
    columns = ["finding_type", "severity", "cause", "producer_id", "base_offset", "previous_offset"]
    actual = (
        findings_of(rec).where(F.col("finding_type").startswith("ACKED")).select(*columns)
    )
    expected = spark.createDataFrame(
        [
            ("ACKED_WRITE_LOST", "CRITICAL", "UNEXPLAINED", 1, 106, None),
            ("ACKED_OFFSET_MISMATCH", "CRITICAL", None, 1, 101, 103),
        ],
        actual.schema,
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)
