"""Partition-level rules: OFFSET_OVERLAP, OFFSET_GAP, LEADER_EPOCH_REGRESSION and CORRUPT_BATCH.

Every scenario is on its own topic and all of them are audited by `replay_plan.audit` in ONE Spark
job (the module fixture `audited`); each test reads its own topic's findings, quarantined rows and
partition statistics. A DataFrame-level test checks one topic's findings table with chispa.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eos_audit.audit import replay_plan
from eos_audit.audit.output_records import findings_of
from eos_audit.config import AuditConfig, TopicsConfig
from eos_audit.sources.tabular.canonical import to_canonical
from tests.builders import batch, batches_df, data, seeds_df

CONFIG = AuditConfig(topics=TopicsConfig(compacted=("gap-compacted",)))
HUGE = 10**12
OVERLAP = "OFFSET_OVERLAP"
GAP = "OFFSET_GAP"
REGRESSION = "LEADER_EPOCH_REGRESSION"
CORRUPT = "CORRUPT_BATCH"
PARTITION_TYPES = (OVERLAP, GAP, REGRESSION, CORRUPT)

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
        batch(7, 7, partition_leader_epoch=0),
    ],
    # OFFSET_GAP (overlap-none above has one too: 10-19)
    "gap-contiguous": [batch(0, 4), batch(5, 5), batch(6, 9), data(10, pid=3)],
    "gap-running-max": [batch(0, 20), batch(10, 12), batch(21, 22), batch(30, 30)],
    "gap-compacted": [batch(0, 4), batch(8, 9)],
    # A v0/v1 entry's offset is its last record's: no hole is judged before it, and its last
    # offset is right, so the v2 batch after it is judged.
    "gap-magic-1": [batch(0, 0, magic=1), batch(5, 5, magic=1), batch(6, 6), batch(9, 9)],
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
    # The findings table of an audit (DataFrame level, chispa).
    "table": [
        batch(0, 9, partition_leader_epoch=2),
        batch(5, 6, partition_leader_epoch=2),  # overlaps 0-9
        batch(20, 29, partition_leader_epoch=3),  # 10-19 missing: OFFSET_GAP
        batch(30, 30, partition_leader_epoch=1, crc_valid=False),  # regression and corrupt
        batch(31, HUGE, producer_id=-2),  # quarantined: no overlap for 40; it explains 31-39
        batch(40, 40, partition_leader_epoch=3),
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


@dataclass(frozen=True)
class Audited:
    """One audit of every scenario: its output records (materialized) and their rows by topic."""

    records: DataFrame
    findings: dict[str, list]
    quarantined: dict[str, list]
    stats: dict[str, list]


@pytest.fixture(scope="module")
def audited(spark) -> Audited:
    rows = [{**r, "topic": topic} for topic, rs in SCENARIOS.items() for r in rs]
    records = replay_plan.audit(
        to_canonical(batches_df(spark, rows)), CONFIG, "r", seeds_df=seeds_df(spark, SEEDS)
    )
    # Materialized once: every test (and chispa's row-order sort) reads the checkpoint instead of
    # running the audit again.
    records = records.localCheckpoint()
    by_kind: dict[str, dict[str, list]] = {
        "findings": {},
        "quarantine": {},
        "partition_summary": {},
    }
    for r in records.collect():
        if r.kind in by_kind:
            row = r[r.kind]
            by_kind[r.kind].setdefault(row.topic, []).append(row)
    stats = by_kind["partition_summary"]
    return Audited(records, by_kind["findings"], by_kind["quarantine"], stats)


def found(audited: Audited, topic: str, *types: str) -> set[tuple]:
    """(finding_type, base_offset, last_offset, previous_offset) of the topic's findings of the
    given types (default: the partition rules')."""
    types = types or PARTITION_TYPES
    return {
        (f.finding_type, f.base_offset, f.last_offset, f.previous_offset)
        for f in audited.findings.get(topic, [])
        if f.finding_type in types
    }


def finding_at(audited: Audited, topic: str, finding_type: str, base_offset: int):
    (row,) = [
        f
        for f in audited.findings.get(topic, [])
        if f.finding_type == finding_type and f.base_offset == base_offset
    ]
    return row


def stats_of(audited: Audited, topic: str):
    (row,) = audited.stats[topic]
    return row


def test_every_scenario_row_was_audited_or_quarantined(audited):
    assert set(audited.stats) == set(SCENARIOS)
    for topic, rows in SCENARIOS.items():
        stats = stats_of(audited, topic)
        quarantined = len(audited.quarantined.get(topic, []))
        assert stats.batches + quarantined == len(rows), topic
        assert stats.replica_batches == 0, topic


# ------------------------------------------------------------------------------------------------
# OFFSET_OVERLAP
# ------------------------------------------------------------------------------------------------
def test_offset_overlap_passes_gaps_between_batches(audited):
    assert found(audited, "overlap-none", OVERLAP) == set()


# ------------------------------------------------------------------------------------------------
# OFFSET_GAP
# ------------------------------------------------------------------------------------------------
def test_offset_gap_names_the_missing_offsets(audited):
    assert found(audited, "overlap-none") == {(GAP, 20, 25, 9)}
    f = finding_at(audited, "overlap-none", GAP, 20)
    assert (f.severity, f.cause, f.kafka_error) == ("CRITICAL", "UNEXPLAINED", None)
    assert f.evidence == {"first_missing_offset": "10", "last_missing_offset": "19"}
    assert f.spec_ref == "docs/rules.md#offset-gap"
    assert "Offsets 10-19 are in no batch: batch 20-25 follows offset 9" in f.detail


def test_offset_gap_passes_a_contiguous_log_and_uses_the_running_maximum(audited):
    assert found(audited, "gap-contiguous") == set()
    # 21 follows 0-20 (10-12 lies inside it): no hole; 23-29 is one.
    assert found(audited, "gap-running-max", GAP) == {(GAP, 30, 30, 22)}


def test_offset_gap_on_a_compacted_topic_is_the_cleaners_work(audited):
    f = finding_at(audited, "gap-compacted", GAP, 8)
    assert (f.severity, f.cause) == ("INFO", "COMPACTION")
    assert f.evidence == {"first_missing_offset": "5", "last_missing_offset": "7"}


def test_offset_gap_judges_v2_batches_only(audited):
    assert found(audited, "gap-magic-1") == {(GAP, 9, 9, 6)}


def test_offset_overlap_fails_and_carries_the_highest_earlier_last_offset(audited):
    assert found(audited, "overlap-touching", OVERLAP) == {(OVERLAP, 9, 12, 9)}  # base == last
    f = finding_at(audited, "overlap-touching", OVERLAP, 9)
    assert (f.severity, f.previous_offset) == ("CRITICAL", 9)
    assert (f.cause, f.kafka_error, f.expected_sequence, f.evidence) == (None, None, None, None)
    assert f.spec_ref == "docs/rules.md#offset-overlap"
    assert "Batch 9-12 starts at or below offset 9" in f.detail


def test_offset_overlap_uses_the_running_maximum(audited):
    # 15-15 does not overlap 10-12 just before it, but it overlaps 0-20.
    assert found(audited, "overlap-running-max", OVERLAP) == {
        (OVERLAP, 10, 12, 20),
        (OVERLAP, 15, 15, 20),
    }


def test_offset_overlap_equal_base_offsets(audited):
    # Log order breaks the tie on last_offset: 0-2 first, then 0-4 overlaps it.
    assert found(audited, "overlap-equal-base", OVERLAP) == {(OVERLAP, 0, 4, 2)}


def test_offset_overlap_same_batch_twice_and_first_batch_is_not_flagged(audited):
    # The first batch of a partition has no earlier batch; the second copy (source b) overlaps.
    assert [
        (f.source, f.base_offset, f.last_offset, f.previous_offset)
        for f in audited.findings.get("overlap-same-batch-twice", [])
        if f.finding_type == OVERLAP
    ] == [("b", 7, 9, 9)]


def test_quarantined_rows_never_take_part_in_partition_rules(audited):
    # No finding on the quarantined rows, none caused by them on 6 and 7 (HUGE last offset,
    # leader epoch 99, failed CRC). Offset 5 is in no audited batch: the quarantined batch there
    # explains the hole, so no verdict rests on it.
    assert found(audited, "overlap-quarantined") == {(GAP, 6, 6, 4)}
    f = finding_at(audited, "overlap-quarantined", GAP, 6)
    assert (f.severity, f.cause) == ("INFO", "QUARANTINED_BATCH")
    assert sorted(
        (q.source, q.base_offset) for q in audited.quarantined["overlap-quarantined"]
    ) == [("bad", 5), ("bad-overlapping", 2)]
    stats = stats_of(audited, "overlap-quarantined")
    assert (stats.first_offset, stats.last_offset, stats.batches) == (0, 7, 3)


def test_seeded_rows_do_not_take_part_in_partition_rules(audited):
    assert found(audited, "overlap-seeded") == set()
    # The seed was read (sequence 10 of producer 7 continues it: no producer finding at all) ...
    assert audited.findings.get("overlap-seeded", []) == []
    # ... but its batches are not batches of the exported log.
    stats = stats_of(audited, "overlap-seeded")
    assert (stats.first_offset, stats.last_offset, stats.batches) == (3, 6, 2)


# ------------------------------------------------------------------------------------------------
# LEADER_EPOCH_REGRESSION
# ------------------------------------------------------------------------------------------------
def test_leader_epoch_regression_passes_when_epochs_rise(audited):
    assert found(audited, "epoch-rising", REGRESSION) == set()


def test_leader_epoch_regression_against_the_highest_earlier_epoch(audited):
    # epochs 3 5 4 4 5 6: the second 4 is not below the 4 just before it, but below the maximum 5
    assert found(audited, "epoch-regression", REGRESSION) == {
        (REGRESSION, 2, 2, None),
        (REGRESSION, 3, 3, None),
    }
    f = finding_at(audited, "epoch-regression", REGRESSION, 3)
    assert (f.severity, f.previous_offset, f.kafka_error) == ("ERROR", None, None)
    assert f.evidence == {"max_leader_epoch": "5", "leader_epoch": "4"}
    assert f.spec_ref == "docs/rules.md#leader-epoch-regression"
    assert "leader epoch 4, below leader epoch 5" in f.detail


def test_leader_epoch_regression_ignores_null_minus_one_and_magic_1(audited):
    assert found(audited, "epoch-ignored", REGRESSION) == {(REGRESSION, 7, 7, None)}
    assert finding_at(audited, "epoch-ignored", REGRESSION, 7).evidence == {
        "max_leader_epoch": "4",
        "leader_epoch": "2",
    }


# ------------------------------------------------------------------------------------------------
# CORRUPT_BATCH
# ------------------------------------------------------------------------------------------------
def test_corrupt_batch_only_when_crc_is_false(audited):
    assert found(audited, "crc", CORRUPT) == {(CORRUPT, 2, 2, None), (CORRUPT, 3, 3, None)}
    f = finding_at(audited, "crc", CORRUPT, 2)
    assert (f.severity, f.kafka_error, f.previous_offset) == ("ERROR", "CORRUPT_MESSAGE", None)
    assert f.spec_ref == "docs/rules.md#corrupt-batch"
    assert "Batch 2-2 failed CRC-32C verification" in f.detail


def test_rules_leave_unrelated_scenarios_alone(audited):
    # No rule fires on the scenarios that are about another rule.
    for topic in ("overlap-none", "overlap-running-max", "epoch-rising", "crc"):
        assert found(audited, topic, REGRESSION) == set(), topic
    for topic in ("epoch-regression", "epoch-ignored", "crc"):
        assert found(audited, topic, OVERLAP) == set(), topic
    for topic in ("overlap-running-max", "epoch-regression"):
        assert found(audited, topic, CORRUPT) == set(), topic


# ------------------------------------------------------------------------------------------------
# Log order
# ------------------------------------------------------------------------------------------------
def test_tied_copies_of_a_batch_are_judged_the_same_whatever_the_input_order(audited):
    # (type, offsets, timestamp of the judged copy) per topic: the same for every topic.
    outcomes = {
        topic: frozenset(
            (f.finding_type, f.base_offset, f.last_offset, f.previous_offset, f.batch_timestamp)
            for f in audited.findings.get(topic, [])
        )
        for topic in TIE_TOPICS
    }
    assert len(set(outcomes.values())) == 1, outcomes
    for topic in TIE_TOPICS:
        assert stats_of(audited, topic).batches == 2, topic


# ------------------------------------------------------------------------------------------------
# DataFrame level: the findings table of an audit
# ------------------------------------------------------------------------------------------------
def test_audit_findings_of_partition_rules(spark, audited):
    columns = ["finding_type", "severity", "base_offset", "previous_offset", "kafka_error"]
    actual = (
        findings_of(audited.records).where(F.col("topic") == "table").select(*columns)
    )
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
            ("OFFSET_GAP", "CRITICAL", 20, 9, None),
            ("LEADER_EPOCH_REGRESSION", "ERROR", 30, None, None),
            ("CORRUPT_BATCH", "ERROR", 30, None, "CORRUPT_MESSAGE"),
            ("OFFSET_GAP", "INFO", 40, 30, None),  # the quarantined batch's hole
        ],
        schema,
    )
    # ignore_nullable: the engine leaves every output column nullable (the sinks pin the
    # contract's nullability); ignore_row_order: findings come out of a shuffle, in no set order.
    assert_df_equality(actual, expected, ignore_nullable=True, ignore_row_order=True)
