"""Producer sessions: one summary per (topic, partition, producer id, epoch) of the audited log.

The summary is computed in the one pass by a window over (topic, partition, producer, epoch)
ordered like the duplicate window (`producer_state.duplicate_window`), so it needs no sort of its
own, and it is emitted once, at the group's latest audited batch in the log. Findings and
transactions are added per session by the pipeline from the staged records, which are few.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eos_audit.rules.common import KIND_AUDITED
from eos_audit.rules.producer_state import PRODUCER_KEYS, REPLAY_ORDER

SESSION_STRUCT = T.StructType(
    [
        T.StructField("topic", T.StringType(), True),
        T.StructField("partition", T.IntegerType(), True),
        T.StructField("producer_id", T.LongType(), True),
        T.StructField("producer_epoch", T.IntegerType(), True),
        T.StructField("first_offset", T.LongType(), True),
        T.StructField("last_offset", T.LongType(), True),
        T.StructField("first_sequence", T.IntegerType(), True),
        T.StructField("last_sequence", T.IntegerType(), True),
        T.StructField("batches", T.LongType(), True),
        T.StructField("records", T.LongType(), True),
        T.StructField("first_timestamp", T.LongType(), True),
        T.StructField("last_timestamp", T.LongType(), True),
    ]
)


def session_window() -> WindowSpec:
    """The rows of one producer epoch, in the duplicate window's order (no extra sort)."""
    return Window.partitionBy(*PRODUCER_KEYS, "producer_epoch").orderBy(
        "_session", "_dup_key", *REPLAY_ORDER
    )


def _audited_producer_row() -> Column:
    return (F.col("_kind") == KIND_AUDITED) & F.col("_pkey").isNotNull()


def with_sessions_summary(df: DataFrame) -> DataFrame:
    """Add `_producer_session`: the epoch's summary on its latest audited row, else null."""
    window = session_window()
    whole = window.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    row = _audited_producer_row()
    data = row & F.col("_is_data")
    sequenced = data & (F.col("base_sequence") >= 0)
    first = F.min(F.when(sequenced, F.struct("base_offset", "base_sequence"))).over(whole)
    last = F.max(F.when(sequenced, F.struct("last_offset", "last_sequence"))).over(whole)
    total = F.count(F.when(row, 1)).over(whole)
    # Dump-log text without a count: the offsets a data batch spans are its records.
    records = F.coalesce(
        F.col("record_count").cast("long"), F.col("last_offset") - F.col("base_offset") + 1
    )
    summary = F.struct(
        F.col("topic"),
        F.col("partition"),
        F.col("producer_id"),
        F.col("producer_epoch"),
        F.min(F.when(row, F.col("base_offset"))).over(whole).alias("first_offset"),
        F.max(F.when(row, F.col("last_offset"))).over(whole).alias("last_offset"),
        first["base_sequence"].alias("first_sequence"),
        last["last_sequence"].alias("last_sequence"),
        total.alias("batches"),
        F.sum(F.when(data, records)).over(whole).alias("records"),
        F.min(F.when(row, F.col("_ts"))).over(whole).alias("first_timestamp"),
        F.max(F.when(row, F.col("_ts"))).over(whole).alias("last_timestamp"),
    ).cast(SESSION_STRUCT)
    # Exactly one audited row of the group emits the summary: the one latest in the log
    # (`_p_row` is unique within the partition). A whole-frame maximum keeps the summary in one
    # Window operator; a running "last row" test would add a second one (whole rows copied again).
    emits = row & (F.col("_p_row") == F.max(F.when(row, F.col("_p_row"))).over(whole))
    return df.withColumn("_producer_session", F.when(emits, summary))
