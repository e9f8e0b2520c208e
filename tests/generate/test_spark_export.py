"""The generator's placement and its small-size Kafka files, checked with Spark."""

import pytest
from chispa import assert_df_equality
from pyspark.sql import Window
from pyspark.sql import functions as F

from eos_audit.generate.files import write_files
from eos_audit.generate.plan import FaultRates, GenerationPlan
from eos_audit.generate.spark_export import (
    EXPORTED_SLOT_COLUMNS,
    batches_of,
    geometry,
    ground_truth_of,
    observations,
    slots,
    with_log_offsets,
    write_export,
)
from eos_audit.schemas import RECORD_BATCH
from eos_audit.session import jit_sized_code
from eos_audit.sources.formats import BatchOptions, read_batches
from tests.audit.test_replay_plan import (  # the JIT's limit, and code generation on for one test
    HUGE_METHOD_BYTES,
    _largest_generated_method,
    generated_code,  # noqa: F401 - a fixture
)

HUGE_METHOD_LIMIT = "spark.sql.codegen.hugeMethodLimit"
SMALL = dict(block_batches=12, session_blocks=3, topics=2, partitions=2, producers=8)


def _truth(spark, plan, slots_df=None):
    """The plan's ground truth, materialized, from its slots (materialized too, unless given).

    As in write_export, which reads the ground truth off its persisted slots: over the slots'
    query itself the optimizer pushes `truth IS NOT NULL` down into the slot expressions and
    plans for seconds more (measured on a cold session: 8-10 s against 3.4 s this way).
    """
    if slots_df is None:
        slots_df = slots(spark, plan).localCheckpoint()
    return ground_truth_of(slots_df, observations(spark, plan, slots_df), "g").localCheckpoint()


@pytest.mark.cost(15)  # three generations
def test_same_seed_same_ground_truth_other_seed_other_placement(spark):
    plan = GenerationPlan(batches=6_000, rates=FaultRates().scaled(5), **SMALL)
    first, again = _truth(spark, plan), _truth(spark, plan)
    assert_df_equality(first, again, ignore_row_order=True)
    reseeded = GenerationPlan(batches=6_000, rates=FaultRates().scaled(5), seed=1, **SMALL)
    other = _truth(spark, reseeded)
    assert first.exceptAll(other).count() > 0


def test_slots_fill_each_partition_as_the_geometry_says(spark):
    plan = GenerationPlan(batches=5_000, seed=3, **SMALL)
    g = geometry(plan)
    got = {
        r["tp"]: r["n"]
        for r in slots(spark, plan).groupBy("tp").agg(F.count("*").alias("n")).collect()
    }
    tps = plan.topic_partitions
    assert got == {(i + g.hot_tp) % tps: n for i, n in enumerate(g.slots_by_index)}


def test_faults_land_where_their_findings_point(spark):
    plan = GenerationPlan(batches=8_000, rates=FaultRates().scaled(10), **SMALL)
    s = slots(spark, plan).localCheckpoint()
    all_batches = batches_of(s).localCheckpoint()
    batches = all_batches.select("topic", "partition", "base_offset")
    truth = _truth(spark, plan, s)
    on_batches = truth.where(
        ~F.col("finding_type").isin("ACKED_WRITE_LOST", "LIST_OFFSETS_REGRESSION")
    )
    # Every batch-level finding points at a batch of the export...
    assert on_batches.join(batches, ["topic", "partition", "base_offset"], "left_anti").count() == 0
    # ... and an acknowledged lost write at an offset where the export holds no batch of that
    # producer, epoch and sequence: another batch took its offsets.
    lost = truth.where(F.col("finding_type") == "ACKED_WRITE_LOST")
    assert lost.count() > 0
    lost_sends = s.where(F.col("is_lost") & (F.col("block_fault") == 4))
    identity = ["topic", "partition", "producer_id", "producer_epoch", "base_sequence"]
    assert lost_sends.count() == lost.count()
    assert lost_sends.join(all_batches, identity, "left_semi").count() == 0
    # Offsets are given out one after the other: a hole only where the cleaner removed a batch,
    # and there the ground truth has its OFFSET_GAP (COMPACTION).
    by_partition = Window.partitionBy("topic", "partition").orderBy("base_offset")
    holes = all_batches.withColumn(
        "end_before", F.lag(F.col("last_offset") + 1).over(by_partition)
    ).where(F.col("base_offset") != F.col("end_before"))
    gaps = truth.where(F.col("finding_type") == "OFFSET_GAP")
    assert holes.count() == gaps.count() > 0
    assert holes.join(gaps, ["topic", "partition", "base_offset"], "left_anti").count() == 0
    assert {r["cause"] for r in gaps.select("cause").distinct().collect()} == {"COMPACTION"}
    assert holes.where(~F.col("topic").startswith("compacted-")).count() == 0
    # Duplicates repeat a range 0-4 (in the cache) or 5+ (beyond) of the producer's batches back.
    distances = {
        (r["block_fault"], r["dup_distance"])
        for r in s.where("is_dup").select("block_fault", "dup_distance").distinct().collect()
    }
    assert {d for b, d in distances if b == 1} <= set(range(5))
    assert {d for b, d in distances if b == 2} and min(d for b, d in distances if b == 2) >= 5


def test_offsets_summed_in_chunks_equal_offsets_summed_over_each_partition(spark):
    # Large partitions are summed in chunks (CHUNK_SLOTS); here small chunks stand for them.
    plan = GenerationPlan(batches=4_000, rates=FaultRates().scaled(10), **SMALL)
    placed = slots(spark, plan).select("tp", "j", "record_count", "keep", "cleaned")
    placed = placed.localCheckpoint()
    most = max(geometry(plan).slots_by_index)
    columns = ["tp", "j", "base_offset", "cleaned_before"]
    whole = with_log_offsets(placed, most).select(*columns)
    chunked = with_log_offsets(placed, most, chunk_slots=16).select(*columns)
    assert placed.where("cleaned > 0").count() > 0  # holes the chunks must carry over
    assert_df_equality(chunked, whole, ignore_row_order=True, ignore_nullable=True)


@pytest.mark.usefixtures("generated_code")
def test_the_slots_run_as_code_the_jit_compiles(spark):
    # As one stage of whole-stage generated code, the slots make a method (13-14 kB) above the
    # bytecode HotSpot compiles: run that way, every slot would go through the JVM's interpreter.
    # Only code is generated here.
    derived = slots(spark, GenerationPlan(batches=1_000_000)).select(*EXPORTED_SLOT_COLUMNS)
    assert _largest_generated_method(derived) > HUGE_METHOD_BYTES
    # write_export generates with Spark's limit at the JIT's, so Spark runs such a stage as each
    # operator's own code (split into small methods), and gives the session its setting back.
    before = spark.conf.get(HUGE_METHOD_LIMIT, None)
    with jit_sized_code(spark):
        assert int(spark.conf.get(HUGE_METHOD_LIMIT)) <= HUGE_METHOD_BYTES
    assert spark.conf.get(HUGE_METHOD_LIMIT, None) == before


@pytest.fixture(scope="module")
def small_export(spark, tmp_path_factory):
    plan = GenerationPlan(batches=3_000, rates=FaultRates().scaled(10), **SMALL)
    export = write_export(spark, plan, tmp_path_factory.mktemp("gen") / "export")
    return export, write_files(spark, export)


@pytest.mark.parametrize("fmt", ["segments", "dump-log"])
def test_files_read_back_by_the_repo_readers_as_the_parquet_batches(spark, small_export, fmt):
    export, files = small_export
    path = files.segments if fmt == "segments" else files.dump_log
    read = read_batches(spark, [str(path)], fmt, BatchOptions())
    columns = [f.name for f in RECORD_BATCH.fields if f.name != "source"]
    expected = spark.read.schema(RECORD_BATCH).parquet(str(export.batches)).select(*columns)
    got = read.batches.select(*[F.col(c).cast(RECORD_BATCH[c].dataType) for c in columns])
    assert_df_equality(
        got, expected, ignore_row_order=True, ignore_nullable=True, ignore_metadata=True
    )
