import re

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eos_audit.errors import InputSchemaError
from eos_audit.schemas import RECORD_BATCH
from eos_audit.sources.tabular.canonical import increment_sequence, to_canonical
from tests.builders import batch, batches_df, data


def reasons(spark, rows):
    out = to_canonical(batches_df(spark, rows)).orderBy("source")
    return [r.quarantine_reason for r in out.select("source", "quarantine_reason").collect()]


def test_valid_rows_pass_and_keep_contract_types(spark):
    out = to_canonical(batches_df(spark, [data(0, 3, seq=0), batch(4)]))
    assert [f.dataType for f in out.schema.fields[: len(RECORD_BATCH)]] == [
        f.dataType for f in RECORD_BATCH
    ]
    assert out.where(F.col("quarantine_reason").isNotNull()).count() == 0
    assert out.where(F.col("raw").isNotNull()).count() == 0


IMPOSSIBLE = (
    (batch(0, topic=None), "null topic"),
    (batch(0, topic=" "), "empty topic"),
    (batch(0, topic=""), "empty topic"),
    (batch(0, topic="  "), "empty topic"),
    (batch(0, topic=" t "), None),  # spaces around a name: not empty
    (batch(0, partition=None), "null partition"),
    (batch(-3, 0), "negative base_offset -3"),
    (batch(10, 5), "last_offset 5 below base_offset 10"),
    (batch(0, 3_000_000_000), "offset span 3000000000 exceeds the int32 lastOffsetDelta"),
    (batch(0, producer_id=-2), "producer_id -2 below -1"),
    (batch(0, producer_id=None), "null producer_id"),
    (data(0, epoch=-4), "producer_epoch -4 below -1"),
    (data(0, epoch=-1), "producer_id 1 without a producer_epoch"),
    (data(0, seq=-7), "base_sequence -7 out of range"),
    (
        data(0, 3, seq=0, last_sequence=5),
        "last_sequence 5 does not match base_sequence 0 plus the offset delta (2)",
    ),
    (data(0, 3, record_count=9), "record_count 9 impossible for offsets 0-2"),
    (batch(0, magic=3), "unknown magic 3"),
    (batch(0, is_control=None), "null is_control"),
    (batch(0, partition_leader_epoch=-9), "partition_leader_epoch -9 out of range"),
)


def test_impossible_values_are_quarantined_with_a_reason(spark):
    # One DataFrame, one Spark job: each row carries its case number in `source`.
    rows = [dict(row, source=f"case{i:02d}") for i, (row, _) in enumerate(IMPOSSIBLE)]
    assert reasons(spark, rows) == [reason for _, reason in IMPOSSIBLE]


def test_several_problems_are_all_reported(spark):
    (reason,) = reasons(spark, [batch(-1, -5, producer_id=-3)])
    assert reason == (
        "negative base_offset -1; last_offset -5 below base_offset -1; producer_id -3 below -1"
    )


def test_epoch_outside_int16_from_a_wide_source(spark):
    df = batches_df(spark, [data(0)]).withColumn("producer_epoch", F.lit(40_000).cast("long"))
    (row,) = to_canonical(df).collect()
    assert row.quarantine_reason == "producer_epoch 40000 outside int16"


def test_integer_columns_of_any_width_are_accepted(spark):
    narrow = batches_df(spark, [data(5, 2, seq=1)]).select(
        *[
            F.col(c).cast("tinyint")
            if c in ("partition", "producer_epoch")
            else F.col(c).cast("decimal(20,0)")
            if c == "base_offset"
            else F.col(c).cast("smallint")
            if c == "base_sequence"
            else F.col(c)
            for c in RECORD_BATCH.fieldNames()
        ]
    )
    expected = to_canonical(batches_df(spark, [data(5, 2, seq=1)]))
    assert_df_equality(to_canonical(narrow), expected)


def test_a_decimal_beyond_the_long_range_is_quarantined_and_a_long_column_is_not_checked(spark):
    rows = batches_df(spark, [data(0, source="small"), data(5, source="huge")])
    huge = F.lit(str(10**19)).cast("decimal(20,0)")
    wide = rows.withColumn(
        "base_offset",
        F.when(F.col("source") == "huge", huge)
        .otherwise(F.col("base_offset").cast("decimal(20,0)")),
    )  # fmt: skip
    out = to_canonical(wide).orderBy("source").select("source", "quarantine_reason").collect()
    assert [(r.source, r.quarantine_reason) for r in out] == [
        ("huge", "base_offset exceeds the long range"),
        ("small", None),
    ]
    # A column of a Spark integer type always fits a long: its reason is not even planned.
    plan = to_canonical(rows)._jdf.queryExecution().analyzed().toString()
    assert "exceeds the long range" not in plan


def test_missing_required_column_fails_fast_naming_it(spark):
    df = batches_df(spark, [data(0)]).drop("producer_epoch")
    with pytest.raises(
        InputSchemaError, match=re.escape("missing required column(s) ['producer_epoch']")
    ):
        to_canonical(df)


def test_mistyped_column_fails_fast_naming_it(spark):
    df = batches_df(spark, [data(0)]).withColumn("producer_id", F.lit("p-1"))
    with pytest.raises(InputSchemaError, match=re.escape("column 'producer_id' has type string")):
        to_canonical(df)


def test_optional_columns_may_be_absent(spark):
    df = batches_df(spark, [data(0, 2, seq=4)]).drop(
        "last_sequence",
        "record_count",
        "magic",
        "crc_valid",
        "source",
        "control_type",
        "coordinator_epoch",
        "partition_leader_epoch",
        "max_timestamp",
    )
    (row,) = to_canonical(df).collect()
    assert row.quarantine_reason is None
    assert (row.last_sequence, row.magic, row.record_count) == (5, 2, None)


def test_text_values_that_are_not_numbers_are_quarantined(spark):
    schema = T.StructType([T.StructField(n, T.StringType()) for n in RECORD_BATCH.fieldNames()])
    values = {k: (None if v is None else str(v).lower()) for k, v in data(0).items()}
    values["producer_epoch"] = "zero"
    df = spark.createDataFrame([tuple(values[n] for n in schema.fieldNames())], schema)
    (row,) = to_canonical(df, text_input=True).collect()
    assert row.quarantine_reason == "producer_epoch zero is not an integer"
    assert '"producer_epoch":"zero"' in row.raw


@pytest.mark.parametrize(
    ("base", "delta", "expected"),
    [
        (0, 0, 0),
        (5, 3, 8),
        (2_147_483_637, 20, 9),  # PSMT testProducerSequenceWithWrapAroundBatchRecord
        (2_147_483_647, 1, 0),
        (2_147_483_646, 1, 2_147_483_647),
    ],
)
def test_increment_sequence_wraps_like_kafka(spark, base, delta, expected):
    value = (
        spark.range(1)
        .select(increment_sequence(F.lit(base).cast("long"), F.lit(delta).cast("long")).alias("s"))
        .head()
        .s
    )
    assert value == expected


def test_last_sequence_is_derived_with_wraparound(spark):
    row = data(100, 21, seq=2_147_483_637)
    (out,) = to_canonical(batches_df(spark, [row])).collect()
    assert out.quarantine_reason is None
    assert out.last_sequence == 9


def test_source_error_rows_are_quarantined_with_the_source_reason(spark):
    df = batches_df(spark, [batch(0)]).withColumn(
        "_source_error", F.lit("truncated batch at byte 4096")
    )
    (row,) = to_canonical(df).collect()
    assert row.quarantine_reason == "truncated batch at byte 4096"


LONG_MAX = 9_223_372_036_854_775_807
LONG_MIN = -9_223_372_036_854_775_808
LONG_COLUMNS = ("base_offset", "last_offset", "base_sequence", "last_sequence", "record_count")


def test_offsets_at_the_long_limits_are_quarantined_not_fatal(spark):
    # Issue 12, case 1: `record_count > span + 1` overflowed on last_offset = Long.MAX_VALUE and
    # failed the whole job (ARITHMETIC_OVERFLOW). Every row must be audited or quarantined.
    wide = T.StructType(
        [
            T.StructField(f.name, T.LongType() if f.name in LONG_COLUMNS else f.dataType, True)
            for f in RECORD_BATCH
        ]
    )
    cases = [
        (batch(0, LONG_MAX), f"last_offset {LONG_MAX} leaves no next offset"),
        (data(LONG_MAX - 5, 6, max_timestamp=0), f"last_offset {LONG_MAX} leaves no next offset"),
        (batch(0, LONG_MAX, record_count=LONG_MIN), "record_count"),
        (batch(LONG_MIN, LONG_MAX, max_timestamp=0), "negative base_offset"),
        (batch(5, LONG_MIN), "below base_offset"),
        (data(0, 2, seq=LONG_MAX, last_sequence=LONG_MIN), "base_sequence"),
        (data(0, 2, seq=LONG_MIN, record_count=LONG_MAX), "base_sequence"),
        (
            data(LONG_MAX - 1, max_timestamp=0),
            None,
        ),  # the highest last offset that still has a next offset
    ]
    rows = [dict(row, source=f"case{i}") for i, (row, _) in enumerate(cases)]
    df = spark.createDataFrame([tuple(r[f.name] for f in wide) for r in rows], wide)
    out = to_canonical(df).orderBy("source").select("quarantine_reason").collect()
    for (_, expected), row in zip(cases, out, strict=True):
        if expected is None:
            assert row.quarantine_reason is None
        else:
            assert expected in (row.quarantine_reason or ""), row.quarantine_reason
