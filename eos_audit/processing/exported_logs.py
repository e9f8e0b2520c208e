"""What the export holds of each partition, and what it cannot decide for lack of it.

A compacted topic's cleaner keeps only a key's last record (`LogCleaner`), so a partition it
cleaned has offsets no batch holds, and `__consumer_offsets` is compacted: a group's commits
between two retained ones are gone, and a rewind among them cannot be seen. The replay of each
partition keeps the span of offsets where its batches do not hold one record per offset, and the
checks that count records by offset say UNVERIFIABLE where they meet it
(docs/rules.md#unverifiable).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from eos_audit.config import globs_to_java_regex
from eos_audit.findings import REGISTRY
from eos_audit.processing.coordinator_audit import (
    SOURCE_ERROR,
    group_offset_commit,
    read_past_lso_commits,
    standing_offsets,
)
from eos_audit.processing.offset_metadata_manager import ABORTED, APPLIED, SKIPPED, TRANSACTIONAL
from eos_audit.sinks.finding_rows import finding_struct
from eos_audit.sources.kafka.coordinator_keys import (
    CONSUMER_OFFSETS_TOPIC as CONSUMER_OFFSETS,
)
from eos_audit.sources.kafka.coordinator_keys import (
    TRANSACTION_STATE_TOPIC as TRANSACTION_STATE,
)

if TYPE_CHECKING:
    from eos_audit.config import AuditConfig

# UNVERIFIABLE's causes.
TRANSACTION_LOG_NOT_WHOLE = "TRANSACTION_LOG_NOT_WHOLE"
EXPORT_DOES_NOT_SPAN = "EXPORT_DOES_NOT_SPAN"
KEYLESS_TOMBSTONES = "KEYLESS_TOMBSTONES"
PARTITION_NOT_EXPORTED = "PARTITION_NOT_EXPORTED"
# What became of a transactional offset commit once its transaction's marker was written.
_DECIDED = (APPLIED, SKIPPED, ABORTED)


def exported_logs(partitions: DataFrame) -> DataFrame:
    """Each exported partition's offsets, and where its records cannot be counted by offset.

    Args:
        partitions: the audit's partition statistics (kernel partials: topic, partition,
            first_offset, last_offset, max_timestamp, log_start_checkpoint, the spans below, and
            covered_end, skipped_from, skipped_to, skipped_max_timestamp).

    Returns:
        topic, partition, `log_start` and `log_end` (the first exported offset and the last + 1),
        `written_until` (the latest batch timestamp), `log_start_checkpoint`, `covered_end`,
        `uncounted_from`/`uncounted_to` and `unattributed_from`/`unattributed_to` (null: none).

    The exported log is every batch the export holds, replayed or not: with --since-state the
    batches below the offset the seeded state covers (`covered_end`) are skipped, not replayed
    (docs/nightly.md), and are in the export all the same. What the replay alone knows (the
    spans, the transactions) stops at `covered_end`, and such an export may start anywhere
    below it (an incremental export overlaps the last one's end), so its first offset is not the
    log's start there.

    Uncounted: the first and last offset where the export does not hold one record per offset
    (a hole between batches or inside one, batches overlapping); outside that span the batches'
    records fill their offsets. Unattributed: the first and last marker that closed no
    transaction of the transactions table (its transaction's data is not in the export), which
    a count of data records by offset would take for a record. Spans, not lists: a cleaned
    partition's holes lie below the cleaner's position, so a processor's recent ranges, above
    them, are still counted.
    """
    return partitions.groupBy("topic", "partition").agg(
        F.least(F.min("first_offset"), F.min("skipped_from")).alias("log_start"),
        (F.greatest(F.max("last_offset"), F.max("skipped_to")) + 1).alias("log_end"),
        F.greatest(F.max("max_timestamp"), F.max("skipped_max_timestamp")).alias("written_until"),
        F.max("log_start_checkpoint").alias("log_start_checkpoint"),
        F.max("covered_end").alias("covered_end"),
        F.min("uncounted_from").alias("uncounted_from"),
        F.max("uncounted_to").alias("uncounted_to"),
        F.min("unattributed_from").alias("unattributed_from"),
        F.max("unattributed_to").alias("unattributed_to"),
    )


def log_start_offset(config: AuditConfig, incremental: bool) -> Column:
    """The partition's log start at the export, over `exported_logs`' columns; null: unknown.

    The broker's log-start-offset-checkpoint, where it has one, is the log start: above the first
    exported offset where DeleteRecords moved the start inside the first segment
    (docs/rules.md#causes), below it on a tiered topic, whose log starts in remote storage
    (`LogLoader`), or where the export left out the first segments. Without one, the first
    exported offset, except where the export was cut: the cleaner removes a compacted log's
    first batches and never moves its start (a topic of `[topics] compacted`), and an
    incremental export (`incremental`: the run is seeded by an earlier run's state,
    --since-state) starts anywhere; there the start is unknown.
    """
    pattern = globs_to_java_regex(config.topics.compacted)
    compacted = F.lit(False) if pattern is None else F.col("topic").rlike(pattern)
    cut = F.lit(True) if incremental else compacted
    return F.when(cut, F.col("log_start_checkpoint")).otherwise(
        F.coalesce("log_start_checkpoint", "log_start")
    )


def unverifiable_finding(
    check: str | Column,
    values: dict[str, Column],
    identity: list[Column],
    config: AuditConfig,
    run_id: str,
) -> Column:
    """One UNVERIFIABLE finding of `check`, as a FINDINGS struct.

    It names no batch (`base_offset` -1); the evidence a check does not know (its transactions,
    its group) stays out.

    Args:
        check: the check that cannot be decided (`evidence.check`), or a column naming it.
        values: the finding's columns and evidence: `cause`, `topic`, `partition`, `reason`,
            `scope` (what the finding covers, for its `detail`), and what else the check knows.
        identity: what makes the finding unique and stable across runs.
        config: the run configuration (severities).
        run_id: the run id.
    """
    unknown = {name: F.lit(None) for name in REGISTRY["UNVERIFIABLE"].evidence}
    filled = {
        **unknown,
        "base_offset": F.lit(-1),
        "last_offset": F.lit(-1),
        "check": check if isinstance(check, Column) else F.lit(check),
        **values,
    }
    return finding_struct("UNVERIFIABLE", config, run_id, identity=identity, values=filled)


def has_exported_log() -> Column:
    """Whether an `exported_logs` row's partition has a log in the export to judge against.

    One with offsets: a batch audited, or skipped below a seeded state. A partition with
    statistics and no offsets (its batches all on a replica not read) has none, and counts as
    one not exported.
    """
    return F.col("log_end").isNotNull()


def distinct_count(column: str) -> Column:
    """The number of distinct non-null values of `column` in a group, where they are few.

    As the size of the group's set, not `count_distinct`: several distinct counts in one
    aggregation make Spark expand every row once per counted column and shuffle twice. For
    the counts of groups and producer ids per `__consumer_offsets` partition, whose sets hold
    thousands at most, never one per record.
    """
    return F.size(F.collect_set(column))


def offsets_logs(records: DataFrame) -> DataFrame:
    """Each `__consumer_offsets` partition the decoded records show, and whether it is whole.

    Judged from the records themselves (one row per record and per marker, whichever reader gave
    them), so Parquet in the coordinator_records contract is judged as segments are.

    Args:
        records: decoded coordinator records (coordinator_records contract).

    Returns:
        coordinator_partition, `first_offset`, `last_offset`, `offsets_whole` (every offset from
        0 to the last holds a record), `keyless_tombstones`: tombstones whose key the export
        does not show (`kafka-dump-log.sh` 2.4 and older prints none), so which commit or group
        each removed is unknown, and `undecoded`: the records that did not decode (quarantined).
    """
    keyless = (
        F.col("is_tombstone")
        & F.col("record_type").isNull()
        & F.col("control_type").isNull()
        & F.col(SOURCE_ERROR).isNull()
    )
    offset = F.col("offset")
    # The distinct offsets (a record handed in twice must not fill a gap) as bitmaps of 32,768
    # offsets each, counted exactly: each task ORs its records into its partitions' bitmaps, so
    # the shuffle carries a row per partition and bitmap, where `count_distinct` shuffled a row
    # per record (at the benchmark's 1M records: 0.47 s against 0.73 s, alone, warm).
    buckets = (
        records.where(F.col("coordinator_topic") == CONSUMER_OFFSETS)
        .groupBy("coordinator_partition", F.bitmap_bucket_number(offset).alias("bucket"))
        .agg(
            F.min(offset).alias("first_offset"),
            F.max(offset).alias("last_offset"),
            F.bitmap_count(F.bitmap_construct_agg(F.bitmap_bit_position(offset))).alias("offsets"),
            F.count(F.when(keyless, F.lit(1))).alias("keyless_tombstones"),
            F.min(F.when(keyless, offset)).alias("first_keyless_tombstone"),
            F.count(F.when(F.col(SOURCE_ERROR).isNotNull(), F.lit(1))).alias("undecoded"),
        )
    )
    stats = buckets.groupBy("coordinator_partition").agg(
        F.min("first_offset").alias("first_offset"),
        F.max("last_offset").alias("last_offset"),
        F.sum("offsets").alias("offsets"),
        F.sum("keyless_tombstones").alias("keyless_tombstones"),
        F.min("first_keyless_tombstone").alias("first_keyless_tombstone"),
        F.sum("undecoded").alias("undecoded"),
    )
    whole = (F.col("first_offset") == 0) & (F.col("offsets") == F.col("last_offset") + 1)
    return stats.select(
        "coordinator_partition", "first_offset", "last_offset", whole.alias("offsets_whole"),
        "keyless_tombstones", "first_keyless_tombstone", "undecoded",
    )  # fmt: skip


def cleaned_offset_partitions(
    history: DataFrame, records: DataFrame, config: AuditConfig, run_id: str
) -> DataFrame:
    """UNVERIFIABLE (OFFSET_REWIND): `__consumer_offsets` partitions the export cannot replay whole.

    One finding per partition that holds some group's commits, with the number of those groups,
    where the replay's rewind check saw only part of what the coordinator did: the partition is
    not whole from offset 0 (OFFSETS_NOT_WHOLE: the cleaner kept only some commits), or the
    export shows tombstones without their key (KEYLESS_TOMBSTONES: `kafka-dump-log.sh` 2.4 and
    older prints none, so the replay cannot remove what each removed, and a later commit below
    a removed value, an expired offset's restart, cannot be told from a rewind).

    Args:
        history: the offset replay's history (`coordinator_audit.replay_offsets`).
        records: decoded coordinator records (coordinator_records contract).
        config: the run configuration (severities).
        run_id: the run id.

    Returns:
        FINDINGS rows.
    """
    logs = offsets_logs(records).withColumn(
        "cause",
        F.when(~F.col("offsets_whole"), F.lit("OFFSETS_NOT_WHOLE")).when(
            F.col("keyless_tombstones") > 0, F.lit(KEYLESS_TOMBSTONES)
        ),
    )
    groups = history.groupBy("coordinator_partition").agg(
        distinct_count("group_id").alias("groups")
    )
    judged = logs.where(F.col("cause").isNotNull()).join(groups, "coordinator_partition")
    values = {
        "cause": F.col("cause"),
        "topic": F.lit(CONSUMER_OFFSETS),
        "partition": F.col("coordinator_partition"),
        "reason": F.when(
            F.col("cause") == "OFFSETS_NOT_WHOLE",
            F.format_string(
                "the export holds records from offset %d to %d of it, not one at every offset "
                "(the cleaner keeps a key's last commit only): a rewind among commits it removed "
                "cannot be seen",
                "first_offset", "last_offset",
            ),
        ).otherwise(
            F.format_string(
                "the export shows %d tombstone(s) without their key, the first at offset %d "
                "(kafka-dump-log.sh 2.4 and older prints none): which commits they removed is "
                "unknown, so a commit below a removed value, a restart from an expired offset, "
                "cannot be told from a rewind",
                "keyless_tombstones", "first_keyless_tombstone",
            )
        ),
        "scope": F.format_string("%d group(s) committed there", "groups"),
        "groups": F.col("groups"),
    }  # fmt: skip
    identity = [F.col("coordinator_partition"), F.col("cause")]
    finding = unverifiable_finding("OFFSET_REWIND", values, identity, config, run_id)
    return judged.select(finding.alias("f")).select("f.*")


def partition_count(configured: int, highest: Column) -> Column:
    """A coordinator topic's partition count: `configured`, or more where the export shows more.

    Kafka numbers a topic's partitions from 0, so an exported partition `highest` at or above
    the configured count says the topic has at least `highest` + 1 (a null `highest`: none).
    """
    return F.greatest(F.lit(configured), F.coalesce(highest + 1, F.lit(0)))


def transaction_log_held(
    records: DataFrame, partitions: int, listed: Collection[tuple[str, int]]
) -> DataFrame:
    """One row: the partitions `__transaction_state` has, how many the export holds, its latest.

    `log_partitions_held` counts those the export lists (`listed`) or holds records of, less
    those holding a record that did not decode (quarantined): the rest of such a partition is
    unknown (a dump's decoder that stopped, a segment walk cut short), and so is whether a
    transactional id is in it. `log_partitions_undecoded` lists those.
    `log_partitions` is `partitions` (`processing.transaction_state_partitions`), or more where
    the export holds a higher one: Kafka numbers a topic's partitions from 0, so a configured
    count below the cluster's never makes a partial export look whole.
    `log_latest`: the exported record of the log with the latest time (partition, offset,
    timestamp; null for none), how far the log's export is known to reach; `log_records`: how
    many records of it decoded.
    """
    named = sorted({p for t, p in listed if t == TRANSACTION_STATE and p >= 0})
    decoded = F.col(SOURCE_ERROR).isNull()
    in_records = records.where(
        (F.col("coordinator_topic") == TRANSACTION_STATE) & (F.col("coordinator_partition") >= 0)
    ).agg(
        F.collect_set("coordinator_partition").alias("held"),
        F.collect_set(F.when(~decoded, F.col("coordinator_partition"))).alias("undecoded"),
        F.max_by(
            F.when(decoded, F.struct("coordinator_partition", "offset", "timestamp")),
            F.when(decoded, F.col("timestamp")),
        ).alias("log_latest"),
        F.count(F.when(decoded, F.lit(1))).alias("log_records"),
    )
    listed_column = F.array(*[F.lit(p) for p in named]).cast("array<int>")
    held = F.array_union(F.col("held"), listed_column)
    return in_records.select(
        partition_count(partitions, F.array_max(held)).alias("log_partitions"),
        F.size(F.array_except(held, F.col("undecoded"))).alias("log_partitions_held"),
        F.array_sort("undecoded").alias("log_partitions_undecoded"),
        "log_latest",
        "log_records",
    )


def transaction_log_held_reason(config: AuditConfig) -> Column:
    """How much of `__transaction_state` the export holds, for an UNVERIFIABLE reason.

    From `transaction_log_held`'s columns: "the export holds 3 of its 50 partitions
    (processing.transaction_state_partitions)", or, where the export holds a partition beyond
    the configured count, "of its at least N partitions (it holds __transaction_state-M, ...)";
    then the partitions not counted for a record that did not decode, if any.
    """
    # The export holds a partition the configured count does not have: the count is too low.
    beyond_configured = F.col("log_partitions") > F.lit(
        config.processing.transaction_state_partitions
    )
    undecoded = F.col("log_partitions_undecoded")
    return F.format_string(
        "the export holds %d of its %s partitions (%s)%s",
        "log_partitions_held",
        F.concat(
            F.when(beyond_configured, F.lit("at least ")).otherwise(F.lit("")),
            F.col("log_partitions").cast("string"),
        ),
        F.when(
            beyond_configured,
            F.format_string(
                "it holds __transaction_state-%d, beyond processing.transaction_state_partitions",
                F.col("log_partitions") - 1,
            ),
        ).otherwise(F.lit("processing.transaction_state_partitions")),
        F.when(
            F.size(undecoded) > 0,
            F.format_string(
                ", not counting __transaction_state-%s, whose records did not all decode",
                F.array_join(undecoded.cast("array<string>"), ", __transaction_state-"),
            ),
        ).otherwise(F.lit("")),
    )


def transaction_log_reach_reason(commits: str) -> Column:
    """Why `transaction_log_held`'s `log_latest` does not show the log copied after `commits`.

    For an UNVERIFIABLE reason: the export holds no record of the log, none with a time, or
    its latest ("the log's latest exported record (__transaction_state-3 offset 7) is no later
    than <commits> by the tolerated clock skew").
    """
    return (
        F.when(F.col("log_records") == 0, F.lit("the export holds no record of the log"))
        .when(F.col("log_latest").isNull(), F.lit("no exported record of the log has a time"))
        .otherwise(
            F.format_string(
                "the log's latest exported record (__transaction_state-%s offset %s) is no later "
                f"than {commits} by the tolerated clock skew",
                "log_latest.coordinator_partition", "log_latest.offset",
            )
        )
    )  # fmt: skip


def unlogged_offset_transactions(
    history: DataFrame,
    records: DataFrame,
    config: AuditConfig,
    run_id: str,
    partitions_listed: Collection[tuple[str, int]] = (),
    as_of_ms: int | None = None,
) -> DataFrame:
    """UNVERIFIABLE (TORN_TRANSACTION, ZOMBIE_COMMIT): offset commits the transaction log misses.

    Both checks start from `__transaction_state`: a torn transaction from the partitions its
    PrepareCommit or PrepareAbort record lists, a zombie commit from the producer ids and epochs
    its records give a transactional id. A transactional offset commit whose marker was written
    (applied, skipped or aborted), by a producer id no exported record of the transaction log
    has, is judged by neither. Where the export does not hold every partition of the log (or
    holds one with a record that did not decode, `transaction_log_held`), the producer's
    transactional id may be in one it lacks: one finding per `__consumer_offsets`
    partition and check, with the commits, producers and groups it covers
    (TRANSACTION_LOG_NOT_WHOLE). Where it holds the whole log but not one copied after the
    producer's first such commit there (the id's records, InitProducerId and the Ongoing one
    AddOffsetsToTxn writes, come before it): EXPORT_DOES_NOT_SPAN, as HANGING_OFFSET_TRANSACTION
    decides it (`--export-time` says the log was copied then; without it, a record of the log,
    of any id and partition, later than the commit by the clock skew). Where the whole log was
    copied after it, the id's records are gone (an expired transactional id, its records
    cleaned), older than what the log can show: not raised.

    Args:
        history: the offset replay's history (`coordinator_audit.replay_offsets`).
        records: decoded coordinator records (coordinator_records contract, `_source_error`).
        config: the run configuration (`processing.transaction_state_partitions`, severities).
        run_id: the run id.
        partitions_listed: the (topic, partition) pairs the export lists, with or without
            records (`BatchRead.partitions_listed`).
        as_of_ms: the export's time (`--export-time`), if given.

    Returns:
        FINDINGS rows.
    """
    logged = (
        records.where(
            (F.col("coordinator_topic") == TRANSACTION_STATE)
            & F.col(SOURCE_ERROR).isNull()
            & F.col("producer_id").isNotNull()
        )
        .select("producer_id")
        .distinct()
    )
    decided = history.where(
        (F.col("kind") == TRANSACTIONAL) & F.col("outcome").isin(*_DECIDED)
    ).join(logged, "producer_id", "left_anti")
    held = transaction_log_held(
        records, config.processing.transaction_state_partitions, partitions_listed
    )
    # Per producer first (a few rows per producer, aggregated where the commits are): its
    # first such commit, as its transactional id's records came before it.
    first_record = F.struct("record_offset", "producer_id", "group_id")
    producers = decided.groupBy("coordinator_partition", "producer_id").agg(
        F.count(F.lit(1)).alias("commits"),
        F.collect_set("group_id").alias("group_ids"),
        F.min_by(first_record, "record_offset").alias("first"),
        F.min("timestamp").alias("first_commit_at"),
    )
    skew = F.lit(config.processing.clock_skew_ms)
    log_reaches = (
        F.lit(True)
        if as_of_ms is not None
        else F.coalesce(
            F.col("log_latest.timestamp") >= F.col("first_commit_at") + skew, F.lit(False)
        )
    )
    whole = F.col("log_partitions_held") >= F.col("log_partitions")
    cause = F.when(~whole, F.lit(TRANSACTION_LOG_NOT_WHOLE)).when(
        ~log_reaches, F.lit(EXPORT_DOES_NOT_SPAN)
    )
    # The one row of `held` on each producer: the log's reach, for the cause and its reason.
    with_cause = producers.crossJoin(held).withColumn("cause", cause)
    judged = (
        with_cause.where(F.col("cause").isNotNull())
        .groupBy("coordinator_partition", "cause")
        .agg(
            F.sum("commits").alias("commits"),
            F.count(F.lit(1)).alias("producers"),
            F.size(F.array_distinct(F.flatten(F.collect_list("group_ids")))).alias("groups"),
            F.min_by("first", "first.record_offset").alias("first"),
            *[
                F.first(name).alias(name)
                for name in ("log_partitions", "log_partitions_held", "log_partitions_undecoded",
                             "log_latest", "log_records")
            ],
        )
    )  # fmt: skip
    first = F.col("first")
    reason = F.when(
        F.col("cause") == TRANSACTION_LOG_NOT_WHOLE,
        F.concat(
            F.lit("no exported record of __transaction_state has their producer ids, and "),
            transaction_log_held_reason(config),
            F.lit(": their transactional ids, with the partitions and epochs the check reads, "
                  "may be in one the export lacks"),
        ),
    ).otherwise(
        F.concat(
            F.lit("no exported record of __transaction_state has their producer ids, and "),
            transaction_log_reach_reason("their producer's first commit"),
            F.lit(": its export may end before their transactional ids were written "
                  "(InitProducerId, before a producer's first commit)"),
        )
    )  # fmt: skip
    values = {
        "cause": F.col("cause"),
        "topic": F.lit(CONSUMER_OFFSETS),
        "partition": F.col("coordinator_partition"),
        "producer_id": first["producer_id"],
        "group_id": first["group_id"],
        "groups": F.col("groups"),
        "scope": F.format_string(
            "%d transactional offset commit(s) of %d producer(s) and %d group(s), the first at "
            "record %d",
            "commits", "producers", "groups", first["record_offset"],
        ),
        "reason": reason,
    }  # fmt: skip
    checks = F.explode(F.array(F.lit("TORN_TRANSACTION"), F.lit("ZOMBIE_COMMIT"))).alias("check")
    per_check = judged.select("*", checks)
    identity = [F.col("coordinator_partition"), F.col("check"), F.col("cause")]
    finding = unverifiable_finding(F.col("check"), values, identity, config, run_id)
    return per_check.select(finding.alias("f")).select("f.*")


def unexported_input_partitions(
    history: DataFrame,
    records: DataFrame,
    partitions: DataFrame,
    config: AuditConfig,
    run_id: str,
) -> DataFrame:
    """UNVERIFIABLE (READ_PAST_LSO and others): commits of a partition of a topic it holds.

    READ_PAST_LSO, COMMIT_BEYOND_LOG and COMMIT_BELOW_LOG_START judge a commit against its input
    partition's exported log. A topic the export holds none of is out of its scope (an export
    holds the topics its user audits, and most groups read others): its commits are not judged,
    and not reported. A topic it holds a partition of (one with statistics) is in scope, and a
    partition of it without a log in the export (`has_exported_log`: a broker not copied, a
    directory left out, a partition empty in the export, its batches all on a replica not
    read) leaves the commits of it unjudged: one finding per such partition and
    check, with the commits and groups it would have judged (PARTITION_NOT_EXPORTED):
    READ_PAST_LSO's (`read_past_lso_commits`), COMMIT_BEYOND_LOG's (`group_offset_commit`),
    COMMIT_BELOW_LOG_START's (`standing_offsets`); a check with none there says nothing.
    ABORTED_READ is READ_PAST_LSO's graver form.

    Args:
        history: the offset replay's history (`coordinator_audit.replay_offsets`).
        records: the decoded coordinator records the replay read, for READ_PAST_LSO's commits.
        partitions: the audit's partition statistics (kernel partials, as `exported_logs`
            reads them).
        config: the run configuration (severities).
        run_id: the run id.

    Returns:
        FINDINGS rows.
    """
    key = ["topic", "partition"]
    held = exported_logs(partitions).where(has_exported_log()).select(*key)
    # The topics the export holds, a partition of which has statistics at least.
    in_scope = partitions.select("topic").distinct()
    # Every row of a key is in one partition: the unexported ones' rows are whole keys. One
    # shuffle by partition serves the windows of both sets below (each is clustered by keys
    # that include it), so that the history is read once here.
    unexported = (
        history.join(F.broadcast(in_scope), "topic", "left_semi")
        .join(F.broadcast(held), key, "left_anti")
        .repartition(*key)
    )
    each = [*key, "group_id", "coordinator_partition", "record_offset"]
    judged = (
        read_past_lso_commits(unexported, records)
        .select(*each, F.lit("READ_PAST_LSO").alias("check"))
        .unionByName(
            unexported.where(group_offset_commit()).select(
                *each, F.lit("COMMIT_BEYOND_LOG").alias("check")
            )
        )
        .unionByName(
            standing_offsets(unexported).select(
                *each, F.lit("COMMIT_BELOW_LOG_START").alias("check")
            )
        )
    )
    first = F.struct("coordinator_partition", "record_offset", "group_id")
    missing = judged.groupBy(*key, "check").agg(
        F.count(F.lit(1)).alias("commits"),
        distinct_count("group_id").alias("groups"),
        F.min_by(first, F.struct("coordinator_partition", "record_offset")).alias("first"),
    )
    values = {
        "cause": F.lit(PARTITION_NOT_EXPORTED),
        "topic": F.col("topic"),
        "partition": F.col("partition"),
        "group_id": F.col("first.group_id"),
        "groups": F.col("groups"),
        "scope": F.format_string(
            "%d commit(s) of %d group(s), the first at %s-%d offset %d",
            "commits", "groups", F.lit(CONSUMER_OFFSETS), "first.coordinator_partition",
            "first.record_offset",
        ),
        "reason": F.lit(
            "the export holds other partitions of the topic and no audited batch of this one, "
            "whose log the check judges the commits against"
        ),
    }  # fmt: skip
    identity = [F.col("topic"), F.col("partition"), F.col("check"), F.lit(PARTITION_NOT_EXPORTED)]
    finding = unverifiable_finding(F.col("check"), values, identity, config, run_id)
    return missing.select(finding.alias("f")).select("f.*")
