"""Projections written as SQL text (eos_audit.sql_text) give the types the contracts name."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eos_audit.replay.wire_columns import REPLAY_SCHEMA
from eos_audit.sinks.run_record import TABLE_SCHEMAS
from eos_audit.sql_text import cast, cast_as

SCHEMAS = {**TABLE_SCHEMAS, "replay rows": REPLAY_SCHEMA}


def _without_nullability(data_type: T.DataType) -> T.DataType:
    if isinstance(data_type, T.StructType):
        return T.StructType(
            [T.StructField(f.name, _without_nullability(f.dataType)) for f in data_type]
        )
    if isinstance(data_type, T.ArrayType):
        return T.ArrayType(_without_nullability(data_type.elementType))
    if isinstance(data_type, T.MapType):
        return T.MapType(data_type.keyType, _without_nullability(data_type.valueType))
    return data_type


@pytest.fixture(params=["TIMESTAMP_LTZ", "TIMESTAMP_NTZ"])
def timestamp_type(spark, request):
    """Both of spark.sql.timestampType's values: a bare TIMESTAMP means the one it names."""
    before = spark.conf.get("spark.sql.timestampType", None)
    spark.conf.set("spark.sql.timestampType", request.param)
    yield request.param
    if before is None:
        spark.conf.unset("spark.sql.timestampType")
    else:
        spark.conf.set("spark.sql.timestampType", before)


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_casts_and_typed_nulls_as_text_have_the_contract_types(spark, timestamp_type, name):
    schema = SCHEMAS[name]
    nulls = spark.range(1).selectExpr(*[cast_as(f, present=False) for f in schema])
    assert _without_nullability(nulls.schema) == _without_nullability(schema)
    # A column of each type, cast again by text: still the type (a timestamp stays local time).
    again = nulls.selectExpr(*[cast_as(f) for f in schema])
    assert _without_nullability(again.schema) == _without_nullability(schema)
    by_column = nulls.select(*[cast(F.col(f.name), f.dataType).alias(f.name) for f in schema])
    assert _without_nullability(by_column.schema) == _without_nullability(schema)


def test_names_are_quoted(spark):
    odd = T.StructType([T.StructField("a`b c", T.StructType([T.StructField("x y", T.LongType())]))])
    nulls = spark.range(1).selectExpr(*[cast_as(f, present=False) for f in odd])
    (row,) = nulls.collect()
    assert row["a`b c"] is None
    assert nulls.schema[0].dataType == _without_nullability(odd[0].dataType)
