"""What the export holds of each partition, and what it cannot decide for lack of it.

A compacted topic's cleaner keeps only a key's last record (`LogCleaner`), so a partition it
cleaned has offsets no batch holds, and `__consumer_offsets` is compacted: a group's commits
between two retained ones are gone, and a rewind among them cannot be seen. The audit's partition
statistics tell a whole partition (its batches' records add up to its offsets, from offset 0)
from a cleaned one; the checks that need every record say UNVERIFIABLE on the others
(docs/rules.md#unverifiable).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from eos_audit.findings import REGISTRY
from eos_audit.sinks.finding_rows import finding_struct
from eos_audit.sources.kafka.coordinator_keys import (
    CONSUMER_OFFSETS_TOPIC as CONSUMER_OFFSETS,
)

if TYPE_CHECKING:
    from eos_audit.config import AuditConfig


def exported_logs(partitions: DataFrame, transactions: DataFrame) -> DataFrame:
    """Each exported partition's offsets, and whether its records can be counted by offset.

    Args:
        partitions: the audit's partition statistics (kernel partials: topic, partition,
            first_offset, last_offset, records, markers).
        transactions: the audit's transactions (TRANSACTIONS columns).

    Returns:
        topic, partition, `log_start` and `log_end` (the first exported offset and the last + 1),
        `whole` and `attributed`.

    `whole`: every offset from the first to the last holds a record (the batches' records add
    up to the span); `attributed`: every marker closes a transaction of the transactions table
    (a marker of a transaction without data there closes none, and would count as a record).
    """
    closed = (
        transactions.where(F.col("marker_offset").isNotNull())
        .groupBy("topic", "partition")
        .agg(F.count(F.lit(1)).alias("closed"))
    )
    stats = partitions.groupBy("topic", "partition").agg(
        F.min("first_offset").alias("log_start"),
        (F.max("last_offset") + 1).alias("log_end"),
        F.sum("records").alias("records"),
        F.sum("markers").alias("markers"),
    )
    return stats.join(closed, ["topic", "partition"], "left").select(
        "topic",
        "partition",
        "log_start",
        "log_end",
        F.coalesce(F.col("records") == F.col("log_end") - F.col("log_start"), F.lit(False)).alias(
            "whole"
        ),
        F.coalesce(F.col("markers") == F.coalesce("closed", F.lit(0)), F.lit(False)).alias(
            "attributed"
        ),
    )


def unverifiable_finding(
    check: str,
    values: dict[str, Column],
    identity: list[Column],
    config: AuditConfig,
    run_id: str,
) -> Column:
    """One UNVERIFIABLE finding of `check`, as a FINDINGS struct.

    It names no batch (`base_offset` -1); the evidence a check does not know (its transactions,
    its group) stays out.

    Args:
        check: the check that cannot be decided (`evidence.check`).
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
        "check": F.lit(check),
        **values,
    }
    return finding_struct("UNVERIFIABLE", config, run_id, identity=identity, values=filled)


def offsets_logs(records: DataFrame) -> DataFrame:
    """Each `__consumer_offsets` partition the decoded records show, and whether it is whole.

    Judged from the records themselves (one row per record and per marker, whichever reader gave
    them), so Parquet in the coordinator_records contract is judged as segments are.

    Args:
        records: decoded coordinator records (coordinator_records contract).

    Returns:
        coordinator_partition, `first_offset`, `last_offset` and `offsets_whole`: every offset
        from 0 to the last holds a record.
    """
    stats = (
        records.where(F.col("coordinator_topic") == CONSUMER_OFFSETS)
        .groupBy("coordinator_partition")
        .agg(
            F.min("offset").alias("first_offset"),
            F.max("offset").alias("last_offset"),
            F.count_distinct("offset").alias("offsets"),
        )
    )
    whole = (F.col("first_offset") == 0) & (F.col("offsets") == F.col("last_offset") + 1)
    return stats.select(
        "coordinator_partition", "first_offset", "last_offset", whole.alias("offsets_whole")
    )


def cleaned_offset_partitions(
    history: DataFrame, records: DataFrame, config: AuditConfig, run_id: str
) -> DataFrame:
    """UNVERIFIABLE (OFFSET_REWIND): `__consumer_offsets` partitions the export holds cleaned.

    One finding per partition that is not whole from offset 0 and holds some group's commits,
    with the number of those groups: the replay's rewind check saw only the commits the cleaner
    kept.

    Args:
        history: the offset replay's history (`coordinator_audit.replay_offsets`).
        records: decoded coordinator records (coordinator_records contract).
        config: the run configuration (severities).
        run_id: the run id.

    Returns:
        FINDINGS rows.
    """
    cleaned = offsets_logs(records).where(~F.col("offsets_whole"))
    groups = history.groupBy("coordinator_partition").agg(
        F.count_distinct("group_id").alias("groups")
    )
    judged = cleaned.join(groups, "coordinator_partition")
    values = {
        "cause": F.lit("OFFSETS_NOT_WHOLE"),
        "topic": F.lit(CONSUMER_OFFSETS),
        "partition": F.col("coordinator_partition"),
        "reason": F.format_string(
            "the export holds records from offset %d to %d of it, not one at every offset (the "
            "cleaner keeps a key's last commit only): a rewind among commits it removed cannot "
            "be seen",
            "first_offset", "last_offset",
        ),
        "scope": F.format_string("%d group(s) committed there", "groups"),
        "groups": F.col("groups"),
    }  # fmt: skip
    identity = [F.col("coordinator_partition"), F.lit("OFFSETS_NOT_WHOLE")]
    finding = unverifiable_finding("OFFSET_REWIND", values, identity, config, run_id)
    return judged.select(finding.alias("f")).select("f.*")
