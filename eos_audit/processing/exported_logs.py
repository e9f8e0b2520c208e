"""What the export holds of each partition, and what it cannot decide for lack of it.

A compacted topic's cleaner keeps only a key's last record (`LogCleaner`), so a partition it
cleaned has offsets no batch holds, and `__consumer_offsets` is compacted: a group's commits
between two retained ones are gone, and a rewind among them cannot be seen. The replay of each
partition keeps the span of offsets where its batches do not hold one record per offset, and the
checks that count records by offset say UNVERIFIABLE where they meet it
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


def exported_logs(partitions: DataFrame) -> DataFrame:
    """Each exported partition's offsets, and where its records cannot be counted by offset.

    Args:
        partitions: the audit's partition statistics (kernel partials: topic, partition,
            first_offset, last_offset and the spans below).

    Returns:
        topic, partition, `log_start` and `log_end` (the first exported offset and the last + 1),
        `uncounted_from`/`uncounted_to` and `unattributed_from`/`unattributed_to` (null: none).

    Uncounted: the first and last offset where the export does not hold one record per offset
    (a hole between batches or inside one, batches overlapping); outside that span the batches'
    records fill their offsets. Unattributed: the first and last marker that closed no
    transaction of the transactions table (its transaction's data is not in the export), which
    a count of data records by offset would take for a record. Spans, not lists: a cleaned
    partition's holes lie below the cleaner's position, so a processor's recent ranges, above
    them, are still counted.
    """
    return partitions.groupBy("topic", "partition").agg(
        F.min("first_offset").alias("log_start"),
        (F.max("last_offset") + 1).alias("log_end"),
        F.min("uncounted_from").alias("uncounted_from"),
        F.max("uncounted_to").alias("uncounted_to"),
        F.min("unattributed_from").alias("unattributed_from"),
        F.max("unattributed_to").alias("unattributed_to"),
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
