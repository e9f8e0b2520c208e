"""The batch data is shuffled exactly once for the whole audit (engine issue)."""

import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from eos_audit.audit import replay_plan
from eos_audit.config import AuditConfig
from eos_audit.schemas import RECORD_BATCH
from eos_audit.session import replay_arrow_settings
from eos_audit.sources.kafka.export import read_kafka_export
from eos_audit.sources.tabular.canonical import to_canonical
from eos_audit.sources.tabular.record_batches import read_tabular
from tests.builders import batches_df, data, seeds_df
from tests.fixtures.segment_builder import data_batch as segment_data_batch
from tests.fixtures.segment_builder import write_partition_dir

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
    records = replay_plan.audit(batches, AuditConfig(), "r", seeds_df=seeds, log_starts_df=starts)
    plan = _plan(records)
    shuffles = SHUFFLE.findall(plan)
    assert len(shuffles) == 1, plan
    assert "hashpartitioning(topic" in plan
    # the replay runs in one mapInArrow over that exchange; no window operator is left
    assert plan.count("MapInArrow") == 1, plan
    assert "Window [" not in plan


def test_the_plan_check_can_see_a_second_shuffle(spark):
    batches = to_canonical(batches_df(spark, [data(0, seq=0)]))
    records = replay_plan.audit(batches, AuditConfig(), "r").repartition(3, "kind")
    assert len(SHUFFLE.findall(_plan(records))) == 2


@pytest.mark.parametrize(
    ("key", "value"),
    [("spark.sql.execution.arrow.maxBytesPerBatch", str(2**31 - 1)),  # Spark's "no byte limit"
     ("spark.sql.execution.arrow.maxRecordsPerBatch", "100000")],
)  # fmt: skip
def test_the_replay_settings_hold_for_the_run_only(spark, key, value):
    spark.conf.set(key, "1234")
    try:
        with replay_arrow_settings(spark):
            assert spark.conf.get(key) == value
        assert spark.conf.get(key) == "1234"
        spark.conf.unset(key)
        default = spark.conf.get(key)
        with replay_arrow_settings(spark):
            assert spark.conf.get(key) == value
        assert spark.conf.get(key) == default != value
    finally:
        spark.conf.unset(key)


# HotSpot compiles no method larger than this many bytes of bytecode (-XX:+DontCompileHugeMethods,
# on by default); a larger one runs interpreted.
HUGE_METHOD_BYTES = 8000


def _largest_generated_method(df) -> int:
    stages = df._jdf.queryExecution().debug().codegenToSeq()
    return max(stages.apply(i)._3().maxMethodCodeSize() for i in range(stages.size()))


@pytest.fixture
def generated_code(spark):
    """Whole-stage code generation on, as in a real session.

    The suite's session turns code generation off (conftest), so it is on here only, and adaptive
    execution off, which would plan the stages only when the query runs.
    """
    settings = {
        "spark.sql.codegen.wholeStage": "true",
        "spark.sql.codegen.factoryMode": "FALLBACK",
        "spark.sql.adaptive.enabled": "false",
    }
    for key, value in settings.items():
        spark.conf.set(key, value)
    yield
    for key in settings:
        spark.conf.unset(key)


def test_the_hand_over_to_the_replay_compiles_to_methods_the_jit_compiles(
    spark, tmp_path, generated_code
):
    # Spark generates the reader's validation and the wire projection as one stage; measured, a
    # method of that stage over the limit made the hand-over to the replay twice as slow.
    pq.write_table(
        pa.Table.from_pylist([data(0, seq=0)], schema=to_arrow_schema(RECORD_BATCH)),
        tmp_path / "batches.parquet",
    )
    rows = replay_plan.replay_rows(read_tabular(spark, [str(tmp_path)], "parquet"))
    assert 0 < _largest_generated_method(rows) < HUGE_METHOD_BYTES


def test_the_hand_over_of_a_broker_export_compiles_to_methods_the_jit_compiles(
    spark, tmp_path, generated_code
):
    # The segment reader's rows carry `_source_error`; validating them once took a 24 kB method
    # (interpreted: 5M batches validated in 29 s instead of 3.5 s).
    write_partition_dir(
        tmp_path / "export", "broker-1", "orders", 0, segment_data_batch(0, 1, producer_id=1)
    )
    export = read_kafka_export(spark, [str(tmp_path / "export")])
    rows = replay_plan.replay_rows(export.batches, log_starts_df=export.log_starts)
    assert 0 < _largest_generated_method(rows) < HUGE_METHOD_BYTES
