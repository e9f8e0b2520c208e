"""The audit as one Spark pass: every input as replay rows, one shuffle, one sort, the kernel.

Every row kind (audited batches, other replicas' copies, seeded producer state, checkpoint values,
leader-epoch entries, acknowledgements) is projected to the narrow `REPLAY_SCHEMA`, packed into
the fewer fields of `WIRE_SCHEMA`, repartitioned by (topic, partition), sorted within partitions
in replay order and handed to `mapInArrow`, where
the compiled kernel (`eos_audit.replay.kernel`) replays each partition sequentially, as a leader
would. Only the few records it emits come back to Spark; they become the output records (one
`kind` and one struct of that kind, `eos_audit.audit.output_records`) that the pipeline stages and
writes. The wire layout is `replay.rows`'s: this module builds the replay rows, not their codec.
"""

from __future__ import annotations

import importlib.util
import logging

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from eos_audit.audit.output_records import FINDINGS_N, decoded
from eos_audit.audit.output_records import name_of as _name_of
from eos_audit.config import AuditConfig, globs_to_java_regex
from eos_audit.findings import FACTS_PER_FINDING, REPLAYED, Cause, KafkaError
from eos_audit.replay.runner import OUTPUT_ARROW, ReplaySettings, replay_partitions
from eos_audit.replay.wire_columns import (
    REPLAY_ORDER,
    REPLAY_SCHEMA,
    ControlType,
    RowKind,
    sort_key,
    wire_rows,
)
from eos_audit.sinks.finding_rows import coded_finding_struct, fact_values
from eos_audit.sources.files import row_reference as ref
from eos_audit.sources.tabular.canonical import QUARANTINE_REASON, RAW, increment_sequence
from eos_audit.sql_text import cast_as

log = logging.getLogger(__name__)

KERNEL_OUTPUT = from_arrow_schema(OUTPUT_ARROW)


# ------------------------------------------------------------------------------------------------
# Inputs as replay rows
# ------------------------------------------------------------------------------------------------
def _control_type_code(control_type: Column) -> Column:
    return (
        F.when(control_type == "COMMIT", F.lit(int(ControlType.COMMIT)))
        .when(control_type == "ABORT", F.lit(int(ControlType.ABORT)))
        .when(control_type.isNotNull(), F.lit(int(ControlType.OTHER)))
        .otherwise(F.lit(int(ControlType.NONE)))
    )


def _replay_rows(df: DataFrame, **values: Column) -> DataFrame:
    """`df` as REPLAY_SCHEMA rows: the given values, typed; the other columns null.

    The casts and typed nulls are SQL text, one call into Spark instead of a few per column.
    """
    given = df.select(*[value.alias(name) for name, value in values.items()])
    return given.selectExpr(*[cast_as(f, present=f.name in values) for f in REPLAY_SCHEMA])


def batch_rows(batches_df: DataFrame) -> DataFrame:
    """Audited batches (and other replicas' copies, and quarantined rows) as replay rows."""
    rank = (
        F.coalesce(F.col("_replica_rank"), F.lit(0))
        if "_replica_rank" in batches_df.columns
        else F.lit(0)
    )
    replica = F.col("_replica") if "_replica" in batches_df.columns else F.lit(None)
    # Rows located by reference carry their file's id and their row number instead of a text;
    # segment rows carry their file's id beside their text (input_files counts by it).
    located = ref.SOURCE_ROW in batches_df.columns
    has_file = ref.SOURCE_FILE in batches_df.columns
    return _replay_rows(
        batches_df,
        topic=F.col("topic"),
        partition=F.col("partition"),
        kind=F.when(rank > 0, F.lit(int(RowKind.REPLICA))).otherwise(F.lit(int(RowKind.AUDITED))),
        base_offset=F.col("base_offset"),
        last_offset=F.col("last_offset"),
        producer_id=F.col("producer_id"),
        producer_epoch=F.col("producer_epoch"),
        base_sequence=F.col("base_sequence"),
        last_sequence=F.col("last_sequence"),
        record_count=F.col("record_count"),
        is_transactional=F.col("is_transactional"),
        is_control=F.col("is_control"),
        control_type=_control_type_code(F.col("control_type")),
        coordinator_epoch=F.col("coordinator_epoch"),
        leader_epoch=F.col("partition_leader_epoch"),
        magic=F.col("magic"),
        timestamp=F.col("max_timestamp"),
        crc_valid=F.col("crc_valid"),
        source=F.col("source"),
        source_file=F.col(ref.SOURCE_FILE) if has_file else F.lit(None),
        value=F.col(ref.SOURCE_ROW) if located else F.lit(None),
        replica=replica,
        quarantine_reason=F.col(QUARANTINE_REASON),
        raw=F.col(RAW),
    )


def seed_rows(seeds_df: DataFrame) -> DataFrame:
    """Seeded producer state: each cached batch, then the entry itself (docs/rules.md#seeded-state).

    The cached batches are applied data batches of the seeded epoch; the entry carries the epoch,
    coordinator epoch, open transaction and last timestamp.
    """
    common = {
        "topic": F.col("topic"),
        "partition": F.col("partition"),
        "producer_id": F.col("producer_id"),
        "producer_epoch": F.col("producer_epoch"),
        "is_transactional": F.lit(False),
        "is_control": F.lit(False),
        "magic": F.lit(2),
        "timestamp": F.col("last_timestamp"),
        "source": F.concat(F.lit("seed:"), F.coalesce(F.col("source"), F.lit("state"))),
    }
    batches = _replay_rows(
        seeds_df.select("*", F.explode("batches").alias("_b")),
        **common,
        kind=F.lit(int(RowKind.SEED_BATCH)),
        base_offset=F.col("_b.base_offset"),
        last_offset=F.col("_b.last_offset"),
        base_sequence=F.col("_b.base_sequence"),
        last_sequence=F.col("_b.last_sequence"),
        value=F.col("state_offset"),
    )
    entries = _replay_rows(
        seeds_df,
        **common,
        kind=F.lit(int(RowKind.SEED_STATE)),
        base_sequence=F.lit(-1),
        last_sequence=F.lit(-1),
        coordinator_epoch=F.col("coordinator_epoch"),
        value=F.col("txn_first_offset"),
    )
    return batches.unionByName(entries)


def epoch_entry_rows(leader_epochs_df: DataFrame) -> DataFrame:
    """Leader-epoch checkpoint entries, each at its start offset.

    See docs/rules.md#leader-epoch-mismatch.
    """
    return _replay_rows(
        leader_epochs_df,
        topic=F.col("topic"),
        partition=F.col("partition"),
        kind=F.lit(int(RowKind.LEADER_EPOCH_ENTRY)),
        base_offset=F.col("start_offset"),
        value=F.col("leader_epoch"),
        source=F.lit("leader-epoch-checkpoint"),
    )


def checkpoint_rows(log_starts_df: DataFrame | None, high_watermarks_df: DataFrame | None):
    """Log-start and high-watermark checkpoint values, at the start of their partition."""
    frames = []
    for df, kind, column in (
        (log_starts_df, RowKind.LOG_START_CHECKPOINT, "log_start_offset"),
        (high_watermarks_df, RowKind.HIGH_WATERMARK_CHECKPOINT, "high_watermark"),
    ):
        if df is not None:
            frames.append(
                _replay_rows(
                    df,
                    topic=F.col("topic"),
                    partition=F.col("partition"),
                    kind=F.lit(int(kind)),
                    value=F.col(column),
                    source=F.lit(f"checkpoint:{column}"),
                )
            )
    return frames


def coverage_rows(covered_df: DataFrame) -> DataFrame:
    """--since-state: where the seeding run's state ends, at the start of its partition.

    Batches below it are counted as skipped, not replayed (docs/nightly.md).
    """
    return _replay_rows(
        covered_df,
        topic=F.col("topic"),
        partition=F.col("partition"),
        kind=F.lit(int(RowKind.STATE_COVERAGE)),
        value=F.col("covered_end"),
        source=F.lit("producer_state"),
    )


def ack_rows(acks_df: DataFrame) -> DataFrame:
    """Successful client acknowledgements (docs/rules.md#acked-write-lost), before the log.

    Failed sends are classified from the acknowledgements alone (evidence_rules.acks).
    """
    count = F.coalesce(F.col("record_count"), F.lit(1))
    return _replay_rows(
        acks_df.where(F.col("offset").isNotNull() & F.col("error").isNull()),
        topic=F.col("topic"),
        partition=F.col("partition"),
        kind=F.lit(int(RowKind.ACK)),
        base_offset=F.col("offset"),
        # The acks source quarantines offsets that would overflow; try_add keeps it that way.
        last_offset=F.try_add(F.col("offset"), count - 1),
        producer_id=F.col("producer_id"),
        producer_epoch=F.col("producer_epoch"),
        base_sequence=F.col("base_sequence"),
        last_sequence=F.when(
            F.col("base_sequence") >= 0, increment_sequence(F.col("base_sequence"), count - 1)
        ).otherwise(F.lit(-1)),
        record_count=count,
        value=F.unix_millis(F.col("event_time")),
        source=F.col("source"),
    )


def replay_rows(
    batches_df: DataFrame,
    *,
    seeds_df: DataFrame | None = None,
    log_starts_df: DataFrame | None = None,
    high_watermarks_df: DataFrame | None = None,
    leader_epochs_df: DataFrame | None = None,
    acks_df: DataFrame | None = None,
    covered_df: DataFrame | None = None,
) -> DataFrame:
    """Every input as replay rows, shuffled once by (topic, partition) and sorted in replay order.

    Returns:
        Rows in `wire.WIRE_SCHEMA`, each (topic, partition) whole inside one Spark partition.
    """
    rows = batch_rows(batches_df)
    extra = [
        seed_rows(seeds_df) if seeds_df is not None else None,
        epoch_entry_rows(leader_epochs_df) if leader_epochs_df is not None else None,
        *checkpoint_rows(log_starts_df, high_watermarks_df),
        ack_rows(acks_df) if acks_df is not None else None,
        coverage_rows(covered_df) if covered_df is not None else None,
    ]
    for more in extra:
        if more is not None:
            rows = rows.unionByName(more)
    return (
        wire_rows(rows)
        .repartition("topic", "partition")
        .sortWithinPartitions(*[sort_key(name) for name in REPLAY_ORDER])
    )


def replay_settings(
    config: AuditConfig, as_of_ms: int | None, source_files: dict[int, str] | None = None
) -> ReplaySettings:
    """The run's configuration as the executors' kernel reads it.

    Args:
        config: the run configuration.
        as_of_ms: the export time in epoch ms, when known.
        source_files: the files rows are located in by reference, by id: the text before a
            row's position (`row_reference.row_prefixes`).
    """
    version = config.cluster.version
    if version < (1, 0):
        unknown_error = KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER
    elif version < (2, 5):
        unknown_error = KafkaError.UNKNOWN_PRODUCER_ID
    else:  # KIP-360: accepted since 2.5 (docs/rules.md#unknown-producer)
        unknown_error = KafkaError.NONE
    return ReplaySettings(
        expiration_ms=config.cluster.effective_expiration_ms,
        hanging_after_ms=config.transactions.max_timeout_ms + config.transactions.grace_ms,
        as_of_ms=as_of_ms,
        unknown_producer_error=int(unknown_error),
        compacted_regex=globs_to_java_regex(config.topics.compacted),
        coordinator_regex=globs_to_java_regex(config.topics.coordinator),
        source_files=source_files or {},
    )


_warned_uncompiled = False


def _warn_if_uncompiled() -> None:
    global _warned_uncompiled
    if importlib.util.find_spec("numba") is None and not _warned_uncompiled:
        _warned_uncompiled = True
        log.warning(
            "numba is not installed: the replay kernel runs as plain Python, several times slower "
            "(pip install numba, or the eos-audit[local] extra)"
        )


# ------------------------------------------------------------------------------------------------
# Kernel records as output records (eos_audit.audit.output_records decodes the others)
# ------------------------------------------------------------------------------------------------
def _finding_values() -> dict[str, Column]:
    f = F.col("findings")
    values = {
        "topic": F.col("topic"),
        "partition": F.col("partition"),
        "source": F.col("source"),
        "replica": F.col("replica"),
        "control_type": F.coalesce(
            _name_of(F.col("control_type"), ControlType), F.lit("Transaction")
        ),
        "cause": _name_of(f["cause"], Cause),
        "kafka_error": _name_of(f["kafka_error"], KafkaError),
        "batch_timestamp": f["timestamp"],
    }
    for name in ("producer_id", "producer_epoch", "base_offset", "last_offset", "base_sequence",
                 "last_sequence", "expected_sequence", "previous_offset"):  # fmt: skip
        values[name] = f[name]
    return values


def _finding_of(config: AuditConfig, run_id: str) -> Column:
    """The findings-table struct of a kernel finding, through the one finding builder."""
    f = F.col("findings")
    # The kernel's facts are positional; the registry names them and says how they show.
    slots = [f[f"fact{k}"] for k in range(FACTS_PER_FINDING)]
    return coded_finding_struct(
        f["finding_code"],
        REPLAYED,
        config,
        run_id,
        identity=[F.col("topic"), F.col("partition"), f["base_offset"], f["occurrence"]],
        values=_finding_values(),
        type_values=lambda kind: fact_values(kind, slots),
    ).cast(FINDINGS_N)


def audit(
    batches_df: DataFrame,
    config: AuditConfig,
    run_id: str,
    *,
    seeds_df: DataFrame | None = None,
    log_starts_df: DataFrame | None = None,
    high_watermarks_df: DataFrame | None = None,
    leader_epochs_df: DataFrame | None = None,
    acks_df: DataFrame | None = None,
    as_of_ms: int | None = None,
    covered_df: DataFrame | None = None,
    source_files: dict[int, str] | None = None,
) -> DataFrame:
    """Replay every partition and return the tagged output records.

    Args:
        batches_df: `to_canonical` output (canonical columns, `quarantine_reason`, `raw`, and for
            broker exports `_replica` and `_replica_rank`).
        config: the run configuration.
        run_id: the run id stamped on every row.
        seeds_df: optional producer state (schemas.PRODUCER_STATE) that precedes the audited log.
        log_starts_df: optional (topic, partition, log_start_offset) from log-start checkpoints.
        high_watermarks_df: optional (topic, partition, high_watermark) from replication-offset
            checkpoints; bounds the REPLICA_DIVERGENCE comparison.
        leader_epochs_df: optional (topic, partition, leader_epoch, start_offset) from the audited
            replica's leader-epoch checkpoint (LEADER_EPOCH_MISMATCH).
        acks_df: optional client acknowledgements in the acks contract (valid rows only):
            ACKED_WRITE_LOST and ACKED_OFFSET_MISMATCH.
        as_of_ms: the export time in epoch ms, when known: the age of open transactions.
        covered_df: optional (topic, partition, covered_end): the seeded state covers the log
            below covered_end already, so batches there are counted as skipped, not replayed.
        source_files: for rows located by reference in files the reader was given by the driver
            (Kafka segments), the text before a row's position by file id
            (`row_reference.row_prefixes`); otherwise taken from Spark's listing of the input.

    Returns:
        One row per output record (`output_records.OUTPUT_RECORD`): `kind`, one of
        `output_records.OUTPUTS`, and the non-null struct of that name.
    """
    _warn_if_uncompiled()
    rows = replay_rows(
        batches_df,
        seeds_df=seeds_df,
        log_starts_df=log_starts_df,
        high_watermarks_df=high_watermarks_df,
        leader_epochs_df=leader_epochs_df,
        acks_df=acks_df,
        covered_df=covered_df,
    )
    # The driver's listing of the input files names the rows findings point at (row_reference).
    if source_files is None and ref.SOURCE_ROW in batches_df.columns:
        source_files = ref.row_prefixes(ref.file_ids(batches_df.inputFiles()) or {})
    settings = replay_settings(config, as_of_ms, source_files)
    emitted = rows.mapInArrow(replay_partitions(settings), KERNEL_OUTPUT)
    return decoded(emitted, _finding_of(config, run_id), run_id)
