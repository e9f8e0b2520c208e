"""Producer-epoch summaries (the producer_sessions table's log side), from the one pass."""

import re

from chispa import assert_df_equality

from eos_audit.audit import replay_plan
from eos_audit.audit.output_records import producer_sessions_of
from eos_audit.config import AuditConfig
from eos_audit.sources.tabular.canonical import to_canonical
from tests.builders import batch, batches_df, data, marker, seeds_df

ROWS = [
    data(0, 2, pid=1, seq=0, record_count=2),
    data(2, 3, pid=1, seq=2, record_count=3),
    data(5, 1, pid=1, epoch=1, seq=0, record_count=1),  # epoch bump
    data(6, 2, pid=1, seq=5, record_count=2),  # a zombie of epoch 0 (fenced)
    # transactions v2: data at epoch 7, the marker at epoch 8
    data(8, 1, pid=2, epoch=7, seq=0, is_transactional=True),  # no record_count: offsets
    marker(9, pid=2, epoch=8),
    batch(10),  # no producer id: no session
    # a producer continuing from seeded state: the seed is not part of the audited summary
    data(11, 1, pid=3, epoch=2, seq=41, record_count=1),
]


def test_one_summary_per_producer_epoch(spark):
    seeds = seeds_df(
        spark,
        [
            {
                "producer_id": 3,
                "producer_epoch": 2,
                "batches": [
                    {"base_sequence": 38, "last_sequence": 40, "base_offset": -3, "last_offset": -1}
                ],
            }
        ],
    )
    rec = replay_plan.audit(
        to_canonical(batches_df(spark, ROWS)), AuditConfig(), "r", seeds_df=seeds
    )
    ts = 1_000_000
    expected = spark.createDataFrame(
        [
            ("t", 0, 1, 0, 0, 7, 0, 6, 3, 7, ts + 0, ts + 6),
            ("t", 0, 1, 1, 5, 5, 0, 0, 1, 1, ts + 5, ts + 5),
            ("t", 0, 2, 7, 8, 8, 0, 0, 1, 1, ts + 8, ts + 8),
            ("t", 0, 2, 8, 9, 9, None, None, 1, None, ts + 9, ts + 9),
            ("t", 0, 3, 2, 11, 11, 41, 41, 1, 1, ts + 11, ts + 11),
        ],
        "topic string, partition int, producer_id long, producer_epoch int, first_offset long, "
        "last_offset long, first_sequence int, last_sequence int, batches long, records long, "
        "first_timestamp long, last_timestamp long",
    )
    assert_df_equality(
        producer_sessions_of(rec), expected, ignore_row_order=True, ignore_nullable=True
    )


def test_the_summaries_need_no_sort_of_their_own(spark):
    rec = replay_plan.audit(to_canonical(batches_df(spark, ROWS)), AuditConfig(), "r")
    plan = rec._jdf.queryExecution().executedPlan().toString()
    # the replay's one sort serves every record, the summaries included
    assert len(re.findall(r"\bSort \[", plan)) == 1, plan
