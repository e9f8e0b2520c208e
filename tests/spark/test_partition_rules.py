"""Partition-level rules: OFFSET_OVERLAP, LEADER_EPOCH_REGRESSION and CORRUPT_BATCH.

Column-level tests evaluate each rule column on `with_rules(to_canonical(...))`; every scenario is
on its own topic and all of them share ONE Spark job (the module fixture `ruled`). A DataFrame-level
test checks the same rules through `engine.audit` with chispa.
"""

from __future__ import annotations

import pytest
from chispa import assert_df_equality
from pyspark.sql import types as T

from eos_audit import engine
from eos_audit.config import AuditConfig
from eos_audit.engine import with_rules
from eos_audit.rules.common import KIND_AUDITED
from eos_audit.rules.partition import corrupt_batch, leader_epoch_regression, offset_overlap
from eos_audit.sources.canonical import to_canonical
from tests.builders import batch, batches_df, data, seeds_df

CONFIG = AuditConfig()
HUGE = 10**12
RULES = {"overlap": offset_overlap, "regression": leader_epoch_regression, "corrupt": corrupt_batch}

# topic -> rows; each topic is one partition, independent of the others.
SCENARIOS: dict[str, list[dict]] = {
    # OFFSET_OVERLAP
    "overlap-none": [batch(0, 4), batch(5, 9), batch(20, 25), batch(26, 26)],  # 10-19: a gap
    "overlap-touching": [batch(0, 9), batch(9, 12), batch(13, 13)],
    "overlap-running-max": [batch(0, 20), batch(10, 12), batch(15, 15), batch(21, 22)],
    "overlap-equal-base": [batch(0, 2), batch(0, 4), batch(5, 5)],
    "overlap-same-batch-twice": [batch(7, 9, source="a"), batch(7, 9, source="b")],
    "overlap-quarantined": [
        batch(0, 4),
        batch(2, 3, producer_id=-2, source="bad-overlapping"),  # overlaps, but is quarantined
        # Quarantined (producer_id -2, span too large): its last offset, leader epoch and failed
        # CRC must not count.
        batch(5, HUGE, producer_id=-2, partition_leader_epoch=99, crc_valid=False, source="bad"),
        batch(6, 6, partition_leader_epoch=0),
        batch(100, 100, partition_leader_epoch=0),
    ],
    # Seeded rows (offsets 0-9 from a snapshot) are not audited batches: no overlap with them.
    "overlap-seeded": [batch(3, 5), data(6, seq=10, pid=7, epoch=0)],
    # LEADER_EPOCH_REGRESSION
    "epoch-rising": [batch(i, partition_leader_epoch=e) for i, e in enumerate([0, 0, 1, 3])],
    "epoch-regression": [
        batch(i, partition_leader_epoch=e) for i, e in enumerate([3, 5, 4, 4, 5, 6])
    ],
    "epoch-ignored": [
        batch(0, partition_leader_epoch=3),
        batch(1, partition_leader_epoch=None),
        batch(2, partition_leader_epoch=-1),
        batch(3, partition_leader_epoch=3),  # equal: no regression
        batch(4, partition_leader_epoch=1, magic=1),  # magic 1 has no leader epoch: ignored
        batch(5, partition_leader_epoch=9, magic=1),  # ...and it does not raise the maximum
        batch(6, partition_leader_epoch=4),
        data(7, pid=8, partition_leader_epoch=2),  # below 4 (with or without producer id)
    ],
    # CORRUPT_BATCH
    "crc": [
        batch(0, crc_valid=True),
        batch(1, crc_valid=None),  # not checked by the source: passes
        batch(2, crc_valid=False),
        data(3, pid=5, crc_valid=False),
    ],
}
# Two copies of batch 0-4 that differ only outside the log-order keys (a diverged replica's copy:
# another leader epoch and timestamp) and have no `source` (an optional column). Each pair is
# exported in both input orders, on its own topic.
COPY_A = batch(0, 4, source=None, partition_leader_epoch=1, max_timestamp=1_000)
COPY_B = batch(0, 4, source=None, partition_leader_epoch=2, max_timestamp=2_000)
TIE_TOPICS = [f"tie-{order}-{i}" for i in range(3) for order in ("ab", "ba")]
for _topic in TIE_TOPICS:
    SCENARIOS[_topic] = [COPY_A, COPY_B] if "-ab-" in _topic else [COPY_B, COPY_A]

SEEDS = [
    {
        "topic": "overlap-seeded",
        "producer_id": 7,
        "producer_epoch": 0,
        "batches": [{"base_sequence": 0, "last_sequence": 9, "base_offset": 0, "last_offset": 9}],
    }
]


def _log_order(r) -> tuple:
    """Log order for reading the results (seeded state rows, without offsets, first)."""
    return (r.base_offset is not None, r.base_offset or 0, r.last_offset or 0, r.source or "")


@pytest.fixture(scope="module")
def ruled(spark) -> dict[str, list]:
    """Rule columns of every audited or quarantined row, by topic, in log order."""
    rows = [{**r, "topic": topic} for topic, rs in SCENARIOS.items() for r in rs]
    df = with_rules(to_canonical(batches_df(spark, rows)), CONFIG, seeds_df=seeds_df(spark, SEEDS))
    out = df.select(
        "topic",
        "base_offset",
        "last_offset",
        "source",
        "max_timestamp",
        "_kind",
        *[rule(CONFIG).alias(name) for name, rule in RULES.items()],
    ).collect()
    by_topic: dict[str, list] = {}
    for r in sorted(out, key=_log_order):
        by_topic.setdefault(r.topic, []).append(r)
    return by_topic


def flagged(ruled, topic: str, rule: str) -> list[tuple]:
    """(base_offset, last_offset) of the rows whose `rule` column is not null."""
    return [(r.base_offset, r.last_offset) for r in ruled[topic] if r[rule] is not None]


def row_at(ruled, topic: str, base_offset: int, source: str | None = None):
    (row,) = [
        r
        for r in ruled[topic]
        if r.base_offset == base_offset and (source is None or r.source == source)
    ]
    return row


def test_every_scenario_row_was_ruled(ruled):
    assert set(ruled) == set(SCENARIOS)
    for topic, rows in SCENARIOS.items():
        audited = [r for r in ruled[topic] if r._kind == KIND_AUDITED]
        assert len(audited) == len(rows), topic


# ------------------------------------------------------------------------------------------------
# OFFSET_OVERLAP
# ------------------------------------------------------------------------------------------------
def test_offset_overlap_passes_gaps_between_batches(ruled):
    assert flagged(ruled, "overlap-none", "overlap") == []


def test_offset_overlap_fails_and_carries_the_highest_earlier_last_offset(ruled):
    assert flagged(ruled, "overlap-touching", "overlap") == [(9, 12)]  # base == earlier last
    found = row_at(ruled, "overlap-touching", 9).overlap
    assert (found.finding_type, found.severity, found.previous_offset) == (
        "OFFSET_OVERLAP",
        "CRITICAL",
        9,
    )
    assert (found.cause, found.kafka_error, found.expected_sequence, found.evidence) == (
        None,
        None,
        None,
        None,
    )
    assert found.spec_ref == "§2.1"
    assert "Batch 9-12 starts at or below offset 9" in found.detail


def test_offset_overlap_uses_the_running_maximum(ruled):
    # 15-15 does not overlap 10-12 just before it, but it overlaps 0-20.
    assert flagged(ruled, "overlap-running-max", "overlap") == [(10, 12), (15, 15)]
    assert [row_at(ruled, "overlap-running-max", o).overlap.previous_offset for o in (10, 15)] == [
        20,
        20,
    ]


def test_offset_overlap_equal_base_offsets(ruled):
    # Log order breaks the tie on last_offset: 0-2 first, then 0-4 overlaps it.
    assert flagged(ruled, "overlap-equal-base", "overlap") == [(0, 4)]
    rows = [r for r in ruled["overlap-equal-base"] if r.base_offset == 0]
    assert [(r.last_offset, r.overlap and r.overlap.previous_offset) for r in rows] == [
        (2, None),
        (4, 2),
    ]


def test_offset_overlap_same_batch_twice_and_first_batch_is_null(ruled):
    rows = ruled["overlap-same-batch-twice"]
    assert [(r.source, r.overlap and r.overlap.previous_offset) for r in rows] == [
        ("a", None),  # the first batch of a partition has no earlier batch: null
        ("b", 9),
    ]


def test_quarantined_rows_never_take_part_in_partition_rules(ruled):
    rows = ruled["overlap-quarantined"]
    assert [(r.source, r.overlap, r.regression, r.corrupt) for r in rows] == [
        ("test@0", None, None, None),
        ("bad-overlapping", None, None, None),
        ("bad", None, None, None),
        ("test@6", None, None, None),
        ("test@100", None, None, None),
    ]


def test_seeded_rows_do_not_take_part_in_partition_rules(ruled):
    rows = ruled["overlap-seeded"]
    assert any(r._kind != KIND_AUDITED for r in rows)  # the seed's rows are there ...
    assert [(r.base_offset, r.overlap) for r in rows if r.overlap is not None] == []  # ... inert


# ------------------------------------------------------------------------------------------------
# LEADER_EPOCH_REGRESSION
# ------------------------------------------------------------------------------------------------
def test_leader_epoch_regression_passes_when_epochs_rise(ruled):
    assert flagged(ruled, "epoch-rising", "regression") == []


def test_leader_epoch_regression_against_the_highest_earlier_epoch(ruled):
    # epochs 3 5 4 4 5 6: the second 4 is not below the 4 just before it, but below the maximum 5
    assert flagged(ruled, "epoch-regression", "regression") == [(2, 2), (3, 3)]
    found = row_at(ruled, "epoch-regression", 3).regression
    assert (found.finding_type, found.severity, found.previous_offset, found.kafka_error) == (
        "LEADER_EPOCH_REGRESSION",
        "ERROR",
        None,
        None,
    )
    assert found.evidence == {"max_leader_epoch": "5", "leader_epoch": "4"}
    assert "leader epoch 4, below leader epoch 5" in found.detail


def test_leader_epoch_regression_ignores_null_minus_one_and_magic_1(ruled):
    assert flagged(ruled, "epoch-ignored", "regression") == [(7, 7)]
    assert row_at(ruled, "epoch-ignored", 7).regression.evidence == {
        "max_leader_epoch": "4",
        "leader_epoch": "2",
    }


# ------------------------------------------------------------------------------------------------
# CORRUPT_BATCH
# ------------------------------------------------------------------------------------------------
def test_corrupt_batch_only_when_crc_is_false(ruled):
    assert flagged(ruled, "crc", "corrupt") == [(2, 2), (3, 3)]
    found = row_at(ruled, "crc", 2).corrupt
    assert (found.finding_type, found.severity, found.kafka_error, found.previous_offset) == (
        "CORRUPT_BATCH",
        "ERROR",
        "CORRUPT_MESSAGE",
        None,
    )
    assert "Batch 2-2 failed CRC-32C verification" in found.detail


def test_rules_leave_unrelated_rows_null(ruled):
    # Every rule is null on every row of the scenarios that are about another rule.
    for topic in ("overlap-none", "overlap-running-max", "epoch-rising", "crc"):
        assert flagged(ruled, topic, "regression") == [], topic
    for topic in ("epoch-regression", "epoch-ignored", "crc"):
        assert flagged(ruled, topic, "overlap") == [], topic
    for topic in ("overlap-running-max", "epoch-regression"):
        assert flagged(ruled, topic, "corrupt") == [], topic


# ------------------------------------------------------------------------------------------------
# Log order
# ------------------------------------------------------------------------------------------------
def test_tied_copies_of_a_batch_are_judged_the_same_whatever_the_input_order(ruled):
    # (timestamp of the copy, overlap?, regression?) per topic: the same for every topic.
    outcomes = {
        topic: tuple(
            sorted(
                (r.max_timestamp, r.overlap is not None, r.regression is not None)
                for r in ruled[topic]
            )
        )
        for topic in TIE_TOPICS
    }
    assert len(set(outcomes.values())) == 1, outcomes


# ------------------------------------------------------------------------------------------------
# DataFrame level: the findings table of an audit
# ------------------------------------------------------------------------------------------------
def test_audit_findings_of_partition_rules(spark):
    rows = [
        batch(0, 9, partition_leader_epoch=2),
        batch(5, 6, partition_leader_epoch=2),  # overlaps 0-9
        batch(20, 29, partition_leader_epoch=3),  # 10-19 missing: not a finding
        batch(30, 30, partition_leader_epoch=1, crc_valid=False),  # regression and corrupt
        batch(31, HUGE, producer_id=-2),  # quarantined: no finding and no overlap for 40
        batch(40, 40, partition_leader_epoch=3),
    ]
    columns = ["finding_type", "severity", "base_offset", "previous_offset", "kafka_error"]
    records = engine.audit(to_canonical(batches_df(spark, rows)), CONFIG, "r")
    # Materialized once: chispa's row-order sort would otherwise run the audit a second time to
    # sample the sort's range boundaries.
    actual = engine.findings_of(records).select(*columns).localCheckpoint()
    # The findings contract: type, severity and base offset are never null.
    schema = T.StructType(
        [
            T.StructField("finding_type", T.StringType(), False),
            T.StructField("severity", T.StringType(), False),
            T.StructField("base_offset", T.LongType(), False),
            T.StructField("previous_offset", T.LongType(), True),
            T.StructField("kafka_error", T.StringType(), True),
        ]
    )
    expected = spark.createDataFrame(
        [
            ("OFFSET_OVERLAP", "CRITICAL", 5, 9, None),
            ("LEADER_EPOCH_REGRESSION", "ERROR", 30, None, None),
            ("CORRUPT_BATCH", "ERROR", 30, None, "CORRUPT_MESSAGE"),
        ],
        schema,
    )
    # ignore_nullable: the engine leaves every output column nullable (the sinks pin the
    # contract's nullability); ignore_row_order: findings come out of a shuffle, in no set order.
    assert_df_equality(actual, expected, ignore_nullable=True, ignore_row_order=True)
