"""The seed checks (sources.tabular.producer_state): Kafka's ranges, row by row, as columns.

Each impossible value of kafka_rules.md §1.2 / §3.2 is quarantined with its reason; a row with
every value at its limit passes unchanged.
"""

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eos_audit.errors import InputSchemaError
from eos_audit.schemas import PRODUCER_STATE
from eos_audit.sources.tabular.producer_state import check_seed_schema, check_seeds
from tests.builders import seeds_df

GOOD_BATCH = {"base_sequence": 3, "last_sequence": 5, "base_offset": 10, "last_offset": 12}
# Wrapping: a batch starting at sequence 2147483646 ends at 1 (decrementSequence, §1.5).
WRAPPED = {"base_sequence": 2147483646, "last_sequence": 1, "base_offset": 20, "last_offset": 23}


def _batch(**fields):
    return {**GOOD_BATCH, **fields}


CASES = [
    ({"producer_id": 1, "producer_epoch": 32767, "batches": [GOOD_BATCH, WRAPPED]}, None),
    ({"producer_id": 2, "producer_epoch": -1, "coordinator_epoch": -1, "last_timestamp": -1}, None),
    ({"producer_id": 3, "producer_epoch": 5, "txn_first_offset": 0, "state_offset": 0}, None),
    ({"producer_id": 4, "producer_epoch": -2}, "producer_epoch -2 is outside -1..32767"),
    ({"producer_id": 5, "producer_epoch": 40000}, "producer_epoch 40000 is outside -1..32767"),
    ({"producer_id": -1, "producer_epoch": 0}, "producer_id -1 is outside 0..9223372036854775807"),
    ({"producer_id": 7, "producer_epoch": None}, "null producer_epoch"),
    ({"producer_id": 8, "producer_epoch": 0, "partition": -3}, "partition -3 is outside"),
    ({"producer_id": 9, "producer_epoch": 0, "topic": "a b"}, "topic a b is not a legal"),
    ({"producer_id": 10, "producer_epoch": 0, "coordinator_epoch": -2}, "coordinator_epoch -2"),
    ({"producer_id": 11, "producer_epoch": 0, "txn_first_offset": -1}, "txn_first_offset -1"),
    ({"producer_id": 12, "producer_epoch": 0, "state_offset": -5}, "state_offset -5"),
    ({"producer_id": 13, "producer_epoch": 0, "last_timestamp": -2}, "last_timestamp -2"),
    ({"producer_id": 14, "producer_epoch": 0, "batches": [GOOD_BATCH] * 6}, "6 cached batches"),
    (
        {"producer_id": 15, "producer_epoch": 0, "batches": [_batch(base_offset=-3)]},
        "cached base_offset -3 is outside",
    ),
    (
        {"producer_id": 16, "producer_epoch": 0, "batches": [_batch(base_offset=13)]},
        "base_offset 13 is above its last_offset 12",
    ),
    (
        {"producer_id": 17, "producer_epoch": 0, "batches": [_batch(last_sequence=-1)]},
        "cached last_sequence -1 is outside",
    ),
    (
        {"producer_id": 18, "producer_epoch": 0, "batches": [_batch(base_sequence=0)]},
        "spans sequences 0..5 but offsets 10..12",
    ),
    (
        {"producer_id": 19, "producer_epoch": 0, "batches": [GOOD_BATCH, None]},
        "a cached batch is null",
    ),
    (
        {"producer_id": 20, "producer_epoch": 0, "batches": [_batch(last_offset=None)]},
        "a cached batch has a null last_offset",
    ),
]


def _wide_seeds(spark, rows):
    """Seeds with every integer as a long: values outside the contract's int types fit."""
    longs = T.StructType(
        [
            T.StructField(
                f.name,
                T.LongType()
                if isinstance(f.dataType, T.IntegerType)
                else T.ArrayType(
                    T.StructType(
                        [
                            T.StructField(n, T.LongType())
                            for n in f.dataType.elementType.fieldNames()
                        ]
                    )
                )
                if isinstance(f.dataType, T.ArrayType)
                else f.dataType,
                True,
            )
            for f in PRODUCER_STATE
        ]
    )
    base = seeds_df(spark, []).schema  # column order
    full = []
    for r in rows:
        row = {"topic": "t", "partition": 0, "batches": [], "source": "test-seed"} | r
        full.append(tuple(row.get(n) for n in base.fieldNames()))
    return spark.createDataFrame(full, longs)


def test_each_impossible_value_is_quarantined_with_its_reason(spark):
    read = check_seeds(_wide_seeds(spark, [row for row, _ in CASES]))
    problem_rows = read.problems.collect()
    problems = {r["source"]: r["reason"] for r in problem_rows}
    assert {r["producer_id"] for r in read.seeds.collect()} == {
        row["producer_id"] for row, reason in CASES if reason is None
    }
    expected = {row["producer_id"]: reason for row, reason in CASES if reason is not None}
    assert len(problems) == len(expected)
    for source, reason in problems.items():
        pid = int(source.split(" producer ")[1].split(" ")[0])
        assert expected[pid] in reason, (source, reason)
    assert {r["input"] for r in problem_rows} == {"producer_state"}


def test_valid_seeds_pass_unchanged_in_the_contract(spark):
    seeds = seeds_df(
        spark,
        [{"producer_id": 1, "producer_epoch": 3, "batches": [GOOD_BATCH], "state_offset": 13}],
    )
    read = check_seeds(seeds)
    assert_df_equality(
        read.seeds,
        seeds.select(*[F.col(f.name).cast(f.dataType) for f in PRODUCER_STATE]),
        ignore_nullable=True,
    )
    assert read.problems.count() == 0


def test_a_record_batch_schema_is_refused_naming_the_missing_columns():
    schema = T.StructType(
        [
            T.StructField(n, T.LongType())
            for n in ("partition", "producer_id", "producer_epoch", "base_offset")
        ]
        + [T.StructField("topic", T.StringType())]
    )
    with pytest.raises(InputSchemaError, match=r"missing required column\(s\) \['batches'\]"):
        check_seed_schema(schema, "x.parquet")


def test_a_batches_column_of_another_shape_is_refused():
    schema = seeds_df.__globals__["NULLABLE_STATE"]
    bad = T.StructType(
        [f if f.name != "batches" else T.StructField("batches", T.StringType()) for f in schema]
    )
    with pytest.raises(InputSchemaError, match=r"column 'batches' has type string"):
        check_seed_schema(bad, "x.parquet")
    check_seed_schema(schema, "x.parquet")  # the contract itself passes
