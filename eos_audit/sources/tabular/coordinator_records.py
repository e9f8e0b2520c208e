"""Decoded coordinator records handed in as Parquet (schemas/coordinator_records.json).

Users who already decode `__consumer_offsets` and `__transaction_state` (a connector, a stream of
the console consumer's formatter) give the processing audit their rows and markers in the
contract instead of the topics' segments. The columns keep their Parquet types (any integer
width, range-checked), missing nullable columns are null, and a row that breaks the contract is
kept with its reasons in `_source_error`, to be quarantined: a consumer group's member record
(record_type 5, not skipped) without its group_id or member_id breaks it, as the replay cannot
count the group's members without them.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eos_audit.schemas import COORDINATOR_RECORDS, COORDINATOR_RECORDS_COLUMNS
from eos_audit.sources.kafka.coordinator_keys import CONSUMER_OFFSETS_TOPIC
from eos_audit.sources.kafka.coordinator_records import CONSUMER_GROUP_MEMBER_TYPE
from eos_audit.sources.kafka.coordinator_rows import COORDINATOR_TOPICS
from eos_audit.sources.tabular import contract_reader as cr

_INTEGERS = (T.IntegerType, T.LongType)
CONTRACT = cr.TableContract(
    label="coordinator records",
    columns=tuple(c.name for c in COORDINATOR_RECORDS_COLUMNS),
    required=tuple(c.name for c in COORDINATOR_RECORDS_COLUMNS if not c.nullable),
    integer_columns=tuple(
        c.name for c in COORDINATOR_RECORDS_COLUMNS if isinstance(c.data_type, _INTEGERS)
    ),
    string_columns=tuple(
        c.name for c in COORDINATOR_RECORDS_COLUMNS if isinstance(c.data_type, T.StringType)
    ),
    time_columns=(),
)


def _value(df: DataFrame, field: T.StructField) -> tuple[Column, Column | None]:
    """A contract column's value, and the reason when the row's value does not fit its type."""
    if field.name not in df.columns:
        return F.lit(None).cast(field.dataType), None
    given = F.col(field.name)
    # try_cast takes atomic types; the partition list is cast (a struct of another shape fails
    # the read, naming the column).
    atomic = not isinstance(field.dataType, T.ArrayType)
    value = given.try_cast(field.dataType) if atomic else given.cast(field.dataType)
    unfit = F.when(
        given.isNotNull() & value.isNull(),
        F.lit(f"{field.name} does not fit {field.dataType.simpleString()}"),
    )
    return value, unfit


def read_coordinator_records_table(spark: SparkSession, paths: list[str]) -> DataFrame:
    """Read Parquet in the coordinator_records contract.

    Args:
        spark: the session.
        paths: Parquet files or directories.

    Returns:
        The contract's columns plus `_source_error` (null for a usable row).

    Raises:
        InputNotFoundError: a path does not exist.
        InputSchemaError: a file is not Parquet, a required column is missing or has an
            unusable type.
    """
    df = cr.read_parquet_table(spark, cr.input_paths(paths, CONTRACT), CONTRACT)
    values: dict[str, Column] = {}
    problems: list[Column] = []
    for field in COORDINATOR_RECORDS.fields:
        values[field.name], unfit = _value(df, field)
        if unfit is not None:
            problems.append(unfit)
        if not field.nullable:
            problems.append(F.when(values[field.name].isNull(), F.lit(f"{field.name} is null")))
    values["source"] = F.coalesce(values["source"], F.col(cr.DEFAULT_SOURCE))
    topic = values["coordinator_topic"]
    problems.append(
        F.when(
            ~topic.isin(*COORDINATOR_TOPICS),
            F.format_string("coordinator_topic %s is not a coordinator topic", topic),
        )
    )
    # The replay counts a consumer group's members by their ids: a member record it could not
    # place would leave the group's membership wrong, so it is quarantined, not guessed.
    is_member = (
        (topic == CONSUMER_OFFSETS_TOPIC)
        & values["control_type"].isNull()
        & (values["record_type"] == CONSUMER_GROUP_MEMBER_TYPE)
        & ~F.coalesce(values["is_skipped"], F.lit(False))
    )
    problems.append(
        F.when(
            is_member & (values["group_id"].isNull() | values["member_id"].isNull()),
            F.lit("a ConsumerGroupMemberMetadata record needs group_id and member_id"),
        )
    )
    parsed = df.select("*", cr.upstream_reason(df))
    return cr.select_contract(parsed, values, problems, COORDINATOR_RECORDS)
