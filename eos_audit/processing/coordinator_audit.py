"""The processing audit as Spark work: the coordinator replay per partition, and its tables.

The decoded coordinator records and markers (`sources.kafka.coordinator_*`, the
coordinator_records contract) are shuffled once by `__consumer_offsets` partition, sorted by
offset within it, and replayed inside `mapInArrow` by the compiled loop of `offset_kernel` (the
rule of `offset_metadata_manager`, its reference, over columns): a partition's records never
meet the driver. The
`__transaction_state` records need no replay: each is a state transition of its transactional.id
and becomes one `transaction_log` row, with the state before it from a window over the id.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from eos_audit.findings import REGISTRY
from eos_audit.processing.offset_metadata_manager import (
    ABORTED,
    APPLIED,
    CLEARED,
    CONSUMER_GROUP_TYPES_WITHOUT_MEMBERS,
    DELETED,
    READ_TYPES,
    REPLACED,
    SKIPPED,
)
from eos_audit.processing.offset_runner import replay_batches
from eos_audit.schemas import CONSUMER_OFFSETS_COLUMNS, OUTPUT_TABLES
from eos_audit.sinks.finding_rows import coded_finding_struct
from eos_audit.sources.kafka.coordinator_keys import (
    CONSUMER_OFFSETS_TOPIC as CONSUMER_OFFSETS,
)
from eos_audit.sources.kafka.coordinator_keys import (
    TRANSACTION_STATE_TOPIC as TRANSACTION_STATE,
)
from eos_audit.sql_text import lookup

if TYPE_CHECKING:
    from eos_audit.config import AuditConfig

SOURCE_ERROR = "_source_error"
# The finding types the replay of the offsets raises (the others of the processing audit join
# its records with the partitions' transactions).
REPLAY_TYPES = ("OFFSET_REWIND", "MIXED_OFFSET_COMMITS", "CONCURRENT_OFFSET_OWNERS")
_EVENTS = T.StructType(
    [
        T.StructField("coordinator_partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
        T.StructField("producer_id", T.LongType()),
        T.StructField("producer_epoch", T.IntegerType()),
        T.StructField("control_type", T.StringType()),
        T.StructField("record_type", T.IntegerType()),
        T.StructField("is_tombstone", T.BooleanType()),
        T.StructField("is_skipped", T.BooleanType()),
        T.StructField("group_id", T.StringType()),
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("committed_offset", T.LongType()),
        T.StructField("leader_epoch", T.IntegerType()),
        T.StructField("metadata", T.StringType()),
        T.StructField("commit_timestamp_ms", T.LongType()),
        T.StructField("member_count", T.IntegerType()),
        T.StructField("member_id", T.StringType()),
        T.StructField("timestamp", T.LongType()),
        T.StructField("source", T.StringType()),
    ]
)
_FINDING = T.StructType(
    [
        T.StructField("finding_type", T.StringType()),
        T.StructField("cause", T.StringType()),
        T.StructField("previous_committed_offset", T.LongType()),
        T.StructField("previous_record_offset", T.LongType()),
        T.StructField("other_producer_id", T.LongType()),
        T.StructField("other_record_offset", T.LongType()),
        T.StructField("aborted_from", T.LongType()),
        T.StructField("aborted_to", T.LongType()),
    ]
)
# The replay's output: consumer_offsets' columns (times as epoch ms) and the findings of the row.
_HISTORY = T.StructType(
    [
        *[_EVENTS[name] for name in ("group_id", "topic", "partition", "committed_offset")],
        *[_EVENTS[name] for name in ("leader_epoch", "metadata", "commit_timestamp_ms")],
        T.StructField("kind", T.StringType()),
        T.StructField("outcome", T.StringType()),
        T.StructField("previous_committed_offset", T.LongType()),
        _EVENTS["producer_id"],
        _EVENTS["producer_epoch"],
        T.StructField("marker_offset", T.LongType()),
        _EVENTS["coordinator_partition"],
        T.StructField("record_offset", T.LongType()),
        _EVENTS["timestamp"],
        _EVENTS["source"],
        T.StructField("findings", T.ArrayType(_FINDING)),
    ]
)
_HISTORY_ARROW = to_arrow_schema(_HISTORY)
# The coordinator records' columns that nothing reads after the records are staged (the replay's
# events, the transaction log, the rules over `__transaction_state`, the quarantine): the stage
# leaves them out, as it writes every other column of every record. A rule that reads one of
# them takes it off this list.
UNREAD_COLUMNS = frozenset(
    {"base_offset", "is_transactional", "record_type_name", "value_version",
     "expire_timestamp_ms", "topic_id", "protocol_type", "generation", "protocol", "leader",
     "current_state_timestamp_ms"}
)  # fmt: skip


def plain_encoded(*columns: str) -> dict[str, str]:
    """Parquet writer options that store `columns` without a dictionary.

    For a stage's offsets and times, whose values hardly repeat, and its `source` (a file and
    position per row): their dictionary costs the writer a hash of every value (measured, 0.5-0.7
    of the 3.6-4.6 JVM CPU-s of staging the bench's records or history), and where the values
    are many (a cluster's offsets) Parquet drops it for plain values once it outgrows its page.
    """
    return {f"parquet.enable.dictionary#{name}": "false" for name in columns}


# How the records and the replay's history are staged (`pipeline._stage_processing`).
STAGED_RECORDS_OPTIONS = plain_encoded(
    "offset", "timestamp", "committed_offset", "commit_timestamp_ms", "source"
)
STAGED_HISTORY_OPTIONS = plain_encoded(
    "record_offset", "timestamp", "committed_offset", "commit_timestamp_ms",
    "previous_committed_offset", "marker_offset", "source",
)  # fmt: skip


def staged_records(records: DataFrame) -> DataFrame:
    """The coordinator records as the processing audit stages them: without `UNREAD_COLUMNS`."""
    return records.select(*[name for name in records.columns if name not in UNREAD_COLUMNS])


def offset_events(records: DataFrame) -> DataFrame:
    """The `__consumer_offsets` records and markers the replay reads, in `_EVENTS` columns.

    The records of the types it reads, and those whose members it cannot see, which it counts
    as such (`offset_metadata_manager.reads_no_membership`, whose rule this filter is): skipped
    records and records of other types, but a KIP-848 consumer group's records other than its
    members'.

    Args:
        records: decoded coordinator records and markers (coordinator_records contract,
            `_source_error` null on the rows to use), one replica of each partition.
    """
    record_type, skipped = F.col("record_type"), F.coalesce(F.col("is_skipped"), F.lit(False))
    read = record_type.isin(*READ_TYPES) & ~skipped
    unread = (skipped | ((record_type >= 0) & ~record_type.isin(*READ_TYPES))) & ~F.coalesce(
        record_type.isin(*CONSUMER_GROUP_TYPES_WITHOUT_MEMBERS), F.lit(False)
    )
    wanted = F.col("control_type").isin("COMMIT", "ABORT") | (
        F.col("control_type").isNull() & (read | unread)
    )
    # A record that did not decode (quarantined) may have been any group's membership record:
    # an unread record without a group, so that no group of the partition is taken for a simple
    # one from then on.
    undecoded = (
        F.col(SOURCE_ERROR).isNotNull()
        & F.col("coordinator_partition").isNotNull()
        & F.col("offset").isNotNull()
    )
    usable = records.where(
        (F.col("coordinator_topic") == CONSUMER_OFFSETS)
        & ((F.col(SOURCE_ERROR).isNull() & wanted) | undecoded)
    )
    renamed = {
        "producer_id": "batch_producer_id",
        "producer_epoch": "batch_producer_epoch",
        "topic": "committed_topic",
        "partition": "committed_partition",
    }
    as_undecoded = {"is_skipped": F.lit(True), "is_tombstone": F.lit(False)}
    kept = ("coordinator_partition", "offset", "timestamp", "source")

    def event_column(field: T.StructField) -> Column:
        column = F.col(renamed.get(field.name, field.name))
        if field.name not in kept:
            column = F.when(undecoded, as_undecoded.get(field.name, F.lit(None))).otherwise(column)
        return column.cast(field.dataType).alias(field.name)

    return usable.select(*[event_column(f) for f in _EVENTS])


def _replay_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow: each `__consumer_offsets` partition's events, sorted, replayed in turn.

    A task's rows are sorted by (partition, offset), so a partition's events arrive together
    and in order, and the replay runs as they stream, compiled (`offset_runner`, `offset_kernel`:
    `offset_metadata_manager`'s rule over columns): its memory is the partition's keys and open
    transactions, never its records.
    """
    yield from replay_batches(batches, _HISTORY_ARROW)


def replay_offsets(events: DataFrame) -> DataFrame:
    """Every OffsetCommit record with its outcome and findings (`_HISTORY`), one shuffle."""
    return (
        events.repartition("coordinator_partition")
        .sortWithinPartitions("coordinator_partition", "offset")
        .mapInArrow(_replay_batches, _HISTORY)
    )


def consumer_offsets_table(history: DataFrame, run_id: str) -> DataFrame:
    """The consumer_offsets table's rows of a run."""
    values = {
        "run_id": F.lit(run_id),
        "commit_time": F.timestamp_millis(F.col("commit_timestamp_ms")),
    }
    table = OUTPUT_TABLES["consumer_offsets"]
    return history.select(
        *[
            (values[c.name] if c.name in values else F.col(c.name))
            .cast(table[c.name].dataType)
            .alias(c.name)
            for c in CONSUMER_OFFSETS_COLUMNS
        ]
    )


def transaction_log_table(records: DataFrame, run_id: str) -> DataFrame:
    """The transaction_log table's rows: each `__transaction_state` record, its state before."""
    rows = records.where(
        (F.col("coordinator_topic") == TRANSACTION_STATE)
        & F.col(SOURCE_ERROR).isNull()
        & F.col("transactional_id").isNotNull()
    )
    by_id = Window.partitionBy("transactional_id").orderBy("coordinator_partition", "offset")
    values = {
        "run_id": F.lit(run_id),
        "state": F.col("transaction_status"),
        "previous_state": F.lag("transaction_status").over(by_id),
        "partitions": F.col("transaction_partitions"),
        "timeout_ms": F.col("transaction_timeout_ms"),
        "start_time": F.timestamp_millis(F.col("start_timestamp_ms")),
        "last_update_time": F.timestamp_millis(F.col("last_update_timestamp_ms")),
        "record_offset": F.col("offset"),
    }
    table = OUTPUT_TABLES["transaction_log"]
    return rows.select(
        *[
            (values[f.name] if f.name in values else F.col(f.name)).cast(f.dataType).alias(f.name)
            for f in table.fields
        ]
    )


# The outcomes of a transactional commit that never became the group's offset: its transaction
# aborted; the same producer wrote the key again before its marker (only the last applies); a
# tombstone removed it while pending; the stored value was a later record's when its marker
# came (`OffsetMetadataManager.replayEndTransactionMarker`).
NEVER_THE_GROUPS_OFFSET = (ABORTED, REPLACED, CLEARED, SKIPPED)


def counted_commit() -> Column:
    """An offset commit with an offset whose own row does not say its transaction aborted.

    An aborted transaction's outputs went with it. A commit the same producer replaced before
    its marker, one a tombstone cleared, or one its marker skipped never became the group's
    offset, but still shows how far the consumer had read, and its transaction's outputs may
    have committed. READ_PAST_LSO takes these commits less those whose transaction aborted
    though their own row does not say so (`read_past_lso_commits`); COMMIT_BEYOND_LOG those
    that became the group's offset (`group_offset_commit`); COMMIT_BELOW_LOG_START the offset
    standing at the end (`standing_offsets`).
    """
    return F.col("committed_offset").isNotNull() & (F.col("outcome") != ABORTED)


def group_offset_commit() -> Column:
    """An offset commit that became, or may yet become (PENDING), the group's offset.

    One with an offset whose outcome is none of `NEVER_THE_GROUPS_OFFSET`: a consumer of the
    group may resume from it, and skip what later takes the offsets below it.
    """
    never = F.col("outcome").isin(*NEVER_THE_GROUPS_OFFSET)
    return F.col("committed_offset").isNotNull() & ~never


def read_past_lso_commits(history: DataFrame, records: DataFrame) -> DataFrame:
    """The commits READ_PAST_LSO judges: `counted_commit`, less those whose transaction aborted.

    A commit the same producer replaced before its marker is in the replay's history before its
    marker came (REPLACED, no marker): its transaction's outcome is that of the last of its
    replacements, the next commit of its key by its producer in its partition that was not
    replaced (the producer's pending offsets are all decided at its marker). Where that one
    was ABORTED, the transaction's outputs went with it. A commit a tombstone cleared while
    pending (CLEARED, or replaced by one CLEARED) never met its marker either: its transaction
    ended at its producer's first marker after it in its `__consumer_offsets` partition (the
    marker `OffsetMetadataManager.replayEndTransactionMarker` would have decided it at), and
    where that one is an ABORT it is not judged. A chain that ends PENDING, or a cleared one
    with no marker after it, or one with a record that did not decode between it and that
    ABORT (which may be its own marker), leaves the outcome unknown: judged. Like the replay,
    it takes the export of the partition to be whole between a commit and its marker.

    Args:
        history: replay history rows, whole chains of each key (all of a key's rows, or none).
        records: decoded coordinator records and markers (coordinator_records contract), the
            replay's input.
    """
    chain = (
        Window.partitionBy("coordinator_partition", "producer_id", "group_id", "topic", "partition")
        .orderBy("record_offset")
        .rowsBetween(1, Window.unboundedFollowing)
    )
    last = F.first(F.when(F.col("outcome") != REPLACED, F.col("outcome")), ignorenulls=True)
    # The outcome the history gives the commit's transaction: a replaced one's is its chain's.
    ends = F.when(F.col("outcome") == REPLACED, last.over(chain)).otherwise(F.col("outcome"))
    # The chain's rows first, its ABORTED last among them, then the commits counted.
    flagged = history.withColumn("_ends", ends).where(
        counted_commit() & ~F.coalesce(F.col("_ends") == ABORTED, F.lit(False))
    )
    is_cleared = F.coalesce(F.col("_ends") == CLEARED, F.lit(False))
    cleared = flagged.where(is_cleared)
    at = ["coordinator_partition", "producer_id", "record_offset"]
    of_committed = cleared.join(_cleared_by_abort(cleared, records), at, "left_anti")
    return flagged.where(~is_cleared).unionByName(of_committed).drop("_ends")


def _cleared_by_abort(cleared: DataFrame, records: DataFrame) -> DataFrame:
    """The cleared commits whose producer's next marker in their partition is surely an ABORT.

    (coordinator_partition, producer_id, record_offset) of each: not where a record that did
    not decode may be the commit's own marker (`read_past_lso_commits`).
    """
    at = ["coordinator_partition", "producer_id", "record_offset"]
    in_offsets = F.col("coordinator_topic") == CONSUMER_OFFSETS
    markers = records.where(
        in_offsets & F.col(SOURCE_ERROR).isNull() & F.col("control_type").isin("COMMIT", "ABORT")
    ).select(
        "coordinator_partition",
        F.col("batch_producer_id").alias("producer_id"),
        F.col("offset").alias("_at"),
        F.col("control_type").alias("_marker"),
    )
    # Only the producers with a cleared commit: few, where the markers are as many as the
    # transactions.
    producers = cleared.select("coordinator_partition", "producer_id").distinct()
    markers = markers.join(
        F.broadcast(producers), ["coordinator_partition", "producer_id"], "left_semi"
    )
    # Each cleared commit among its producer's markers in its partition, in offset order: the
    # nearest marker after it. Descending, so that the frame is a running one (linear).
    stream = (
        cleared.select(
            "coordinator_partition", "producer_id", F.col("record_offset").alias("_at"),
            F.lit(None).cast("string").alias("_marker"),
        )
        .distinct()
        .unionByName(markers)
    )  # fmt: skip
    after = Window.partitionBy("coordinator_partition", "producer_id").orderBy(F.col("_at").desc())
    next_marker = F.last(
        F.when(F.col("_marker").isNotNull(), F.struct(F.col("_at").alias("at"), "_marker")),
        ignorenulls=True,
    ).over(after.rowsBetween(Window.unboundedPreceding, -1))
    ended = stream.select(
        "coordinator_partition", "producer_id", F.col("_at").alias("record_offset"),
        "_marker", next_marker.alias("_next"),
    ).where(F.col("_marker").isNull() & (F.col("_next._marker") == "ABORT"))  # fmt: skip
    # A record of the partition that did not decode may be the commit's own marker, a COMMIT:
    # one of the producer or of no known producer, where it lies between or its offset is not
    # known; and any record that did not decode whose partition is not known.
    undecoded = records.where(
        (in_offsets | F.col("coordinator_topic").isNull()) & F.col(SOURCE_ERROR).isNotNull()
    )
    placed = undecoded.where(F.col("coordinator_partition").isNotNull()).select(
        F.col("coordinator_partition").alias("_in_partition"),
        F.col("batch_producer_id").alias("_by_producer"),
        F.col("offset").alias("_undecoded_at"),
    )
    maybe_between = (
        (F.col("_in_partition") == F.col("coordinator_partition"))
        & (F.col("_by_producer").isNull() | (F.col("_by_producer") == F.col("producer_id")))
        & (
            F.col("_undecoded_at").isNull()
            | (
                (F.col("_undecoded_at") > F.col("record_offset"))
                & (F.col("_undecoded_at") < F.col("_next.at"))
            )
        )
    )
    # One row: how many records that did not decode have no known partition.
    unplaced = undecoded.where(F.col("coordinator_partition").isNull()).agg(
        F.count(F.lit(1)).alias("_unplaced")
    )
    return (
        ended.join(placed, maybe_between, "left_anti")
        .crossJoin(unplaced)
        .where(F.col("_unplaced") == 0)
        .select(*at)
    )


def standing_offsets(history: DataFrame) -> DataFrame:
    """Each group's offset of each partition as it stands at the end: COMMIT_BELOW_LOG_START's.

    The last offset applied (a transactional one at its marker), unless a tombstone deleted it
    after: at most one row per (group, topic, partition), never a pending one.

    Args:
        history: replay history rows, all of a key's or none.
    """
    last = Window.partitionBy("group_id", "topic", "partition").orderBy(
        F.col("coordinator_partition"),
        F.coalesce("marker_offset", "record_offset").desc(),
    )
    return (
        history.where(F.col("outcome").isin(APPLIED, DELETED))
        .withColumn("_rank", F.row_number().over(last))
        .where((F.col("_rank") == 1) & (F.col("outcome") == APPLIED))
        .drop("_rank")
    )


def commit_record_values(of: Callable[[str], Column]) -> dict[str, Column]:
    """The findings columns and evidence of a finding about one OffsetCommit record.

    Where it is (its `__consumer_offsets` partition and offset), its producer and time, and
    which group committed which offset of which input partition, from the replay history's
    columns as `of(name)` gives them.
    """
    return {
        "topic": F.lit(CONSUMER_OFFSETS),
        "partition": of("coordinator_partition"),
        "producer_id": of("producer_id"),
        "producer_epoch": of("producer_epoch"),
        "base_offset": of("record_offset"),
        "last_offset": of("record_offset"),
        "batch_timestamp": of("timestamp"),
        "source": of("source"),
        "group_id": of("group_id"),
        "committed_topic": of("topic"),
        "committed_partition": of("partition"),
        "committed_offset": of("committed_offset"),
        "kind": of("kind"),
    }


def processing_findings(history: DataFrame, config: AuditConfig, run_id: str) -> DataFrame:
    """The findings of the coordinator replay, in the FINDINGS contract."""
    exploded = history.select("*", F.explode("findings").alias("f")).drop("findings")
    f = F.col("f")
    aborted = f["cause"] == "ABORTED_RANGE_COMMITTED"
    values = {
        **commit_record_values(F.col),
        "cause": f["cause"],
        "previous_offset": F.coalesce(f["previous_record_offset"], f["other_record_offset"]),
        "previous_committed_offset": f["previous_committed_offset"],
        "marker_offset": F.col("marker_offset"),
        "other_producer_id": f["other_producer_id"],
        "aborted_from": f["aborted_from"],
        "aborted_to": f["aborted_to"],
        "aborted_range": F.when(
            aborted,
            F.format_string(
                ", a plain commit passing offsets %s-%s whose transaction aborted: that input "
                "was committed and never processed", f["aborted_from"], f["aborted_to"] - 1,
            ),
        ).otherwise(F.lit("")),
    }  # fmt: skip
    identity = [F.col("coordinator_partition"), F.col("record_offset"), f["cause"]]
    # One struct for every type, chosen by code: one pass over the history, not one per type.
    code = lookup(f["finding_type"], {name: REGISTRY[name].code for name in REPLAY_TYPES})
    finding = coded_finding_struct(
        code, REPLAY_TYPES, config, run_id,
        identity=identity, values=values, type_values=lambda _kind: {},
    )  # fmt: skip
    return exploded.select(finding.alias("f")).select("f.*")
