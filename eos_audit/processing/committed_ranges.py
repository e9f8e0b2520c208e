"""A committed offset outside its partition's log (COMMIT_BEYOND_LOG, COMMIT_BELOW_LOG_START).

A consumer fetches from its group's committed offset, and a partition leader serves only offsets
from the log start to the log end (`UnifiedLog.read` throws `OffsetOutOfRangeException`
beyond them; the consumer then resets by `auto.offset.reset`). A group commits the position
after what it consumed, so a committed offset above the partition's log end claims progress over
records that were never there: their real successors will be skipped when they arrive
(COMMIT_BEYOND_LOG). A group whose committed offset is below the log start will restart from
`auto.offset.reset`: the records between were deleted before it read them, or it will read them
again from the start (COMMIT_BELOW_LOG_START) (docs/rules.md#commit-beyond-log,
docs/rules.md#commit-below-log-start).

The log end is the export's: a commit is judged against it only where the partition holds a
batch written after the commit (so the export of the partition was taken later, and its end is
at least the end the group saw). The log start is the broker's `log-start-offset-checkpoint`
where it has one (higher than the export's first offset after DeleteRecords, lower on a tiered
topic), else the export's first offset; on a compacted topic only the checkpoint's,
and so in an incremental run (seeded by an earlier run's state, --since-state), whose exports
may start anywhere: where the seeded state covers a partition, below that state's end; where it
covers none (no idempotent producer wrote it), where the last export ended. The batches such a
run skips are exported all the same, and count in the log's end and in its latest batch
(`exported_logs`).
Only the group's last applied offset is judged against it: an older commit may have been above
the log start of its time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from eos_audit.findings import REGISTRY
from eos_audit.processing.coordinator_audit import (
    commit_record_values,
    group_offset_commit,
    standing_offsets,
)
from eos_audit.processing.exported_logs import (
    exported_logs,
    has_exported_log,
    log_start_offset,
)
from eos_audit.sinks.finding_rows import coded_finding_struct

if TYPE_CHECKING:
    from eos_audit.config import AuditConfig

RANGE_TYPES = ("COMMIT_BEYOND_LOG", "COMMIT_BELOW_LOG_START")


def offset_out_of_range(
    history: DataFrame,
    partitions: DataFrame,
    config: AuditConfig,
    run_id: str,
    incremental: bool = False,
) -> DataFrame:
    """COMMIT_BEYOND_LOG and COMMIT_BELOW_LOG_START findings of the groups' commits.

    Named after the leader's answer to a fetch outside its log (`OffsetOutOfRangeException`).

    Args:
        history: the offset replay's history (`coordinator_audit.replay_offsets`).
        partitions: the audit's partition statistics of every exported partition (kernel
            partials, as `exported_logs` reads them).
        config: the run configuration (`processing.clock_skew_ms`, severities).
        run_id: the run id.
        incremental: the run is seeded by an earlier run's state (--since-state): its export
            of a partition may start anywhere (it overlaps the last one's end), so the export's
            first offset is not the log's start.

    Returns:
        FINDINGS rows.
    """
    # A partition with no log in the export is not judged (`unexported_input_partitions`).
    logs = exported_logs(partitions).where(has_exported_log())
    logs = logs.select(
        "topic",
        "partition",
        # Null where the export was cut (a compacted topic, an incremental run) and holds no
        # checkpoint: there no standing offset is judged below it.
        log_start_offset(config, incremental).alias("log_start_offset"),
        # The seeded state's run saw the log up to its covered offset: the log reached it.
        F.greatest("log_end", "covered_end").alias("log_end_offset"),
        "written_until",
    )
    counted = history.where(group_offset_commit()).withColumn(
        "committed_at", F.coalesce("commit_timestamp_ms", "timestamp")
    )
    judged = counted.join(logs, ["topic", "partition"])
    later = F.col("written_until") >= F.col("committed_at") + F.lit(config.processing.clock_skew_ms)
    beyond = judged.where(later & (F.col("committed_offset") > F.col("log_end_offset")))
    # A key's rows all share its partition: those of partitions the export does not hold are left
    # out before the window's shuffle, by the partitions' few keys.
    exported = F.broadcast(logs.select("topic", "partition"))
    standing = (
        standing_offsets(history.join(exported, ["topic", "partition"], "left_semi"))
        .withColumn("committed_at", F.coalesce("commit_timestamp_ms", "timestamp"))
        .join(logs, ["topic", "partition"])
        .where(F.col("committed_offset") < F.col("log_start_offset"))
    )
    return _findings(
        beyond.withColumn("finding_type", F.lit("COMMIT_BEYOND_LOG")).unionByName(
            standing.withColumn("finding_type", F.lit("COMMIT_BELOW_LOG_START"))
        ),
        config,
        run_id,
    )


def _findings(judged: DataFrame, config: AuditConfig, run_id: str) -> DataFrame:
    values = {
        **commit_record_values(F.col),
        "committed_at": F.col("committed_at"),
        "log_start_offset": F.col("log_start_offset"),
        "log_end_offset": F.col("log_end_offset"),
    }
    code = F.when(
        F.col("finding_type") == "COMMIT_BEYOND_LOG", REGISTRY["COMMIT_BEYOND_LOG"].code
    ).otherwise(REGISTRY["COMMIT_BELOW_LOG_START"].code)
    identity = [F.col("coordinator_partition"), F.col("record_offset")]
    finding = coded_finding_struct(
        code, RANGE_TYPES, config, run_id,
        identity=identity, values=values, type_values=lambda _kind: {},
    )  # fmt: skip
    return judged.select(finding.alias("f")).select("f.*")
