"""The batch data is shuffled exactly once for the whole audit (engine issue)."""

import re

from eos_audit import engine
from eos_audit.config import AuditConfig
from eos_audit.session import replay_arrow_settings
from eos_audit.sources.canonical import to_canonical
from tests.builders import batches_df, data, seeds_df

SHUFFLE = re.compile(
    r"\bExchange (hashpartitioning|rangepartitioning|RoundRobinPartitioning|"
    r"SinglePartition)"
)


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def test_the_whole_audit_shuffles_the_batches_once(spark):
    batches = to_canonical(batches_df(spark, [data(0, seq=0), data(1, seq=1, pid=2)]))
    seeds = seeds_df(spark, [{"producer_id": 1, "producer_epoch": 0}])
    starts = spark.createDataFrame(
        [("t", 0, 0)], "topic string, partition int, log_start_offset long"
    )
    records = engine.audit(batches, AuditConfig(), "r", seeds_df=seeds, log_starts_df=starts)
    plan = _plan(records)
    shuffles = SHUFFLE.findall(plan)
    assert len(shuffles) == 1, plan
    assert "hashpartitioning(topic" in plan
    # the replay runs in one mapInArrow over that exchange; no window operator is left
    assert plan.count("MapInArrow") == 1, plan
    assert "Window [" not in plan


def test_the_plan_check_can_see_a_second_shuffle(spark):
    batches = to_canonical(batches_df(spark, [data(0, seq=0)]))
    records = engine.audit(batches, AuditConfig(), "r").repartition(3, "kind")
    assert len(SHUFFLE.findall(_plan(records))) == 2


def test_the_replay_settings_hold_for_the_run_only(spark):
    key = "spark.sql.execution.arrow.maxBytesPerBatch"
    spark.conf.set(key, "1234")
    try:
        with replay_arrow_settings(spark):
            assert spark.conf.get(key) == str(2**31 - 1)  # Spark's "no byte limit" value
        assert spark.conf.get(key) == "1234"
        spark.conf.unset(key)
        default = spark.conf.get(key)
        with replay_arrow_settings(spark):
            assert spark.conf.get(key) == str(2**31 - 1)
        assert spark.conf.get(key) == default != str(2**31 - 1)
    finally:
        spark.conf.unset(key)
