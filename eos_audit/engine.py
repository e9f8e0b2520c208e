"""The audit as one Spark pass: every input as replay rows, one shuffle, one sort, the kernel.

Every row kind (audited batches, other replicas' copies, seeded producer state, checkpoint values,
leader-epoch entries, acknowledgements) is projected to the narrow `REPLAY_SCHEMA`, packed into
the fewer fields of `WIRE_SCHEMA`, repartitioned by (topic, partition), sorted within partitions
in replay order and handed to `mapInArrow`, where
the compiled kernel (`eos_audit.replay.kernel`) replays each partition sequentially, as a leader
would. Only the few records it emits come back to Spark; they become the output records (one
`kind` and one struct of that kind) that the pipeline stages and writes.
"""

from __future__ import annotations

import importlib.util
import logging

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema

from eos_audit.config import AuditConfig, glob_to_java_regex
from eos_audit.findings import (
    FACTS_PER_FINDING,
    REPLAYED,
    Cause,
    KafkaError,
    coded_finding_struct,
    fact_values,
)
from eos_audit.replay import rows as wire
from eos_audit.replay.rows import REPLAY_ORDER, REPLAY_SCHEMA, ControlType, RowKind
from eos_audit.replay.runner import FILE_COUNTS, OUTPUT_ARROW, ReplaySettings, replay_partitions
from eos_audit.schemas import FINDINGS, PARTITION_STATS, PRODUCER_STATE, QUARANTINE, TRANSACTIONS
from eos_audit.sources.files import row_reference as ref
from eos_audit.sources.tabular.canonical import QUARANTINE_REASON, RAW, increment_sequence

log = logging.getLogger(__name__)

OUTPUT_KINDS = ("findings", "quarantine", "partition_stats", "transactions", "sessions",
                "producer_state", "input_files")  # fmt: skip


def _nullable(data_type: T.DataType) -> T.DataType:
    """The type with every field and element nullable, however deep.

    Spark cannot cast into non-nullable fields; the sinks pin the contract's nullability.
    """
    if isinstance(data_type, T.StructType):
        return T.StructType(
            [T.StructField(f.name, _nullable(f.dataType), True) for f in data_type.fields]
        )
    if isinstance(data_type, T.ArrayType):
        return T.ArrayType(_nullable(data_type.elementType), True)
    if isinstance(data_type, T.MapType):
        return T.MapType(data_type.keyType, _nullable(data_type.valueType), True)
    return data_type


FINDINGS_N = _nullable(FINDINGS)
QUARANTINE_N = _nullable(QUARANTINE)
TRANSACTION_STRUCT = _nullable(TRANSACTIONS)
PRODUCER_STATE_N = _nullable(PRODUCER_STATE)
PARTITION_STATS_N = _nullable(
    T.StructType([*PARTITION_STATS.fields, T.StructField("producers", T.LongType(), True)])
)
# One partial summary of a producer epoch (the kernel flushes one whenever a producer's epoch
# changes); `sessions_of` merges the partials of one epoch.
SESSION_STRUCT = T.StructType(
    [
        T.StructField("topic", T.StringType(), True),
        T.StructField("partition", T.IntegerType(), True),
        T.StructField("producer_id", T.LongType(), True),
        T.StructField("producer_epoch", T.IntegerType(), True),
        T.StructField("first_offset", T.LongType(), True),
        T.StructField("last_offset", T.LongType(), True),
        T.StructField("first_sequence_offset", T.LongType(), True),
        T.StructField("first_sequence", T.IntegerType(), True),
        T.StructField("last_sequence_offset", T.LongType(), True),
        T.StructField("last_sequence", T.IntegerType(), True),
        T.StructField("batches", T.LongType(), True),
        T.StructField("records", T.LongType(), True),
        T.StructField("first_timestamp", T.LongType(), True),
        T.StructField("last_timestamp", T.LongType(), True),
    ]
)
# One task's counts of the batches of one input file, by its id (row_reference.file_id).
FILE_STATS = T.StructType(
    [T.StructField(name, T.LongType(), True) for name in ("file_id", *FILE_COUNTS)]
)
OUTPUT_RECORD = T.StructType(
    [
        T.StructField("kind", T.StringType(), False),
        T.StructField("finding", FINDINGS_N, True),
        T.StructField("quarantine", QUARANTINE_N, True),
        T.StructField("partition_stats", PARTITION_STATS_N, True),
        T.StructField("transaction", TRANSACTION_STRUCT, True),
        T.StructField("session", SESSION_STRUCT, True),
        T.StructField("producer_state", PRODUCER_STATE_N, True),
        T.StructField("input_file", FILE_STATS, True),
    ]
)
KERNEL_OUTPUT = from_arrow_schema(OUTPUT_ARROW)


def _record(kind: str, **values: Column) -> Column:
    """One output record: `kind` and that kind's struct, every other struct null."""
    fields = [F.lit(kind).alias("kind")]
    for field in OUTPUT_RECORD.fields[1:]:
        value = values.get(field.name)
        fields.append(
            (value if value is not None else F.lit(None)).cast(field.dataType).alias(field.name)
        )
    return F.struct(*fields)


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


def _replay_row(**values: Column) -> list[Column]:
    """The REPLAY_SCHEMA columns from the given values; the others are null."""
    return [
        (values[f.name] if f.name in values else F.lit(None)).cast(f.dataType).alias(f.name)
        for f in REPLAY_SCHEMA.fields
    ]


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
    return batches_df.select(
        *_replay_row(
            topic=F.col("topic"),
            partition=F.col("partition"),
            kind=F.when(rank > 0, F.lit(int(RowKind.REPLICA))).otherwise(
                F.lit(int(RowKind.AUDITED))
            ),
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
    batches = seeds_df.select("*", F.explode("batches").alias("_b")).select(
        *_replay_row(
            **common,
            kind=F.lit(int(RowKind.SEED_BATCH)),
            base_offset=F.col("_b.base_offset"),
            last_offset=F.col("_b.last_offset"),
            base_sequence=F.col("_b.base_sequence"),
            last_sequence=F.col("_b.last_sequence"),
            value=F.col("state_offset"),
        )
    )
    entries = seeds_df.select(
        *_replay_row(
            **common,
            kind=F.lit(int(RowKind.SEED_STATE)),
            base_sequence=F.lit(-1),
            last_sequence=F.lit(-1),
            coordinator_epoch=F.col("coordinator_epoch"),
            value=F.col("txn_first_offset"),
        )
    )
    return batches.unionByName(entries)


def epoch_entry_rows(leader_epochs_df: DataFrame) -> DataFrame:
    """Leader-epoch checkpoint entries, each at its start offset.

    See docs/rules.md#leader-epoch-mismatch.
    """
    return leader_epochs_df.select(
        *_replay_row(
            topic=F.col("topic"),
            partition=F.col("partition"),
            kind=F.lit(int(RowKind.LEADER_EPOCH_ENTRY)),
            base_offset=F.col("start_offset"),
            value=F.col("leader_epoch"),
            source=F.lit("leader-epoch-checkpoint"),
        )
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
                df.select(
                    *_replay_row(
                        topic=F.col("topic"),
                        partition=F.col("partition"),
                        kind=F.lit(int(kind)),
                        value=F.col(column),
                        source=F.lit(f"checkpoint:{column}"),
                    )
                )
            )
    return frames


def coverage_rows(covered_df: DataFrame) -> DataFrame:
    """--since-state: where the seeding run's state ends, at the start of its partition.

    Batches below it are counted as skipped, not replayed (docs/nightly.md).
    """
    return covered_df.select(
        *_replay_row(
            topic=F.col("topic"),
            partition=F.col("partition"),
            kind=F.lit(int(RowKind.STATE_COVERAGE)),
            value=F.col("covered_end"),
            source=F.lit("producer_state"),
        )
    )


def ack_rows(acks_df: DataFrame) -> DataFrame:
    """Successful client acknowledgements (docs/rules.md#acked-write-lost), before the log.

    Failed sends are classified from the acknowledgements alone (rules.acks).
    """
    count = F.coalesce(F.col("record_count"), F.lit(1))
    return acks_df.where(F.col("offset").isNotNull() & F.col("error").isNull()).select(
        *_replay_row(
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
        Rows in `rows.WIRE_SCHEMA`, each (topic, partition) whole inside one Spark partition.
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


def sort_key(name: str) -> Column:
    """A field of `REPLAY_ORDER` read from the wire layout (nulls stay null: they sort first).

    Only the first keys are read for most rows; the others break ties of identical offsets.
    """
    header = F.col("header")
    if name in wire.PLAIN_FIELDS or name == wire.DETAIL:
        return F.col(name)
    if name == "kind":
        return F.shiftright(header, wire.KIND_SHIFT)
    if name == "order_kind":
        # Computed where the sort compares rather than shuffled as a column of its own
        # (measured at 10M batches: the transfer line 8.66 s with the column, 8.50 s without).
        log_kind = F.lit(int(RowKind.LEADER_EPOCH_ENTRY))
        return F.least(F.shiftright(header, wire.KIND_SHIFT), log_kind)
    if name in ("is_control", "is_transactional"):
        bit = wire.CONTROL_BIT if name == "is_control" else wire.TRANSACTIONAL_BIT
        return header.bitwiseAND(F.lit(bit))
    if name == "crc_valid":  # 0 not checked, 1 failed, 2 valid: nulls, then false, then true
        return F.shiftright(header, wire.CRC_SHIFT).bitwiseAND(F.lit(wire.CRC_MASK))
    if name == "source_file":
        file_id = F.shiftright(header, wire.SOURCE_FILE_SHIFT).bitwiseAND(
            F.lit(wire.SOURCE_FILE_MASK)
        )
        return F.when(header.bitwiseAND(F.lit(wire.SOURCE_FILE_BIT)) != 0, file_id)
    if name in wire.HEADER_CODES:
        shift, mask = wire.HEADER_CODES[name]
        value = F.shiftright(header, shift).bitwiseAND(F.lit(mask))
    else:
        field, high, _ = next(pair for pair in wire.PAIRS if name in pair[1:])
        packed = F.col(field)
        # The high half by an arithmetic shift; the low half sign-extended from 32 bits.
        low = packed.bitwiseAND(F.lit(0xFFFFFFFF)).bitwiseXOR(F.lit(0x80000000)) - 0x80000000
        value = F.shiftright(packed, 32) if name == high else low
    return F.when(header.bitwiseAND(F.lit(wire.NULL_BITS[name])) == 0, value)


def _bits(value: Column, shift: int, mask: int) -> Column:
    return F.shiftleft(F.coalesce(value.cast("long"), F.lit(0)).bitwiseAND(F.lit(mask)), shift)


def _flag(condition: Column, bit: int) -> Column:
    return F.when(condition, F.lit(bit)).otherwise(F.lit(0)).cast("long")


def _null_bit(name: str) -> Column:
    return _flag(F.col(name).isNull(), wire.NULL_BITS[name])


def wire_rows(rows_df: DataFrame) -> DataFrame:
    """Replay rows in the wire layout (`rows.WIRE_SCHEMA`): flags packed, int32 values paired.

    Args:
        rows_df: rows in `REPLAY_SCHEMA`.
    """
    crc = F.when(F.col("crc_valid"), F.lit(2)).when(~F.col("crc_valid"), F.lit(1)).otherwise(0)
    header = [
        F.shiftleft(F.col("kind").cast("long"), wire.KIND_SHIFT),
        *[_bits(F.col(name), *code) for name, code in wire.HEADER_CODES.items()],
        _flag(F.coalesce(F.col("is_transactional"), F.lit(False)), wire.TRANSACTIONAL_BIT),
        _flag(F.coalesce(F.col("is_control"), F.lit(False)), wire.CONTROL_BIT),
        _bits(crc, wire.CRC_SHIFT, wire.CRC_MASK),
        _flag(F.col("quarantine_reason").isNotNull(), wire.QUARANTINED_BIT),
        _flag(F.col("source_file").isNotNull(), wire.SOURCE_FILE_BIT),
        _bits(F.col("source_file"), wire.SOURCE_FILE_SHIFT, wire.SOURCE_FILE_MASK),
        *[_null_bit(name) for name in wire.HEADER_CODES],
        *[_null_bit(name) for _, high, low in wire.PAIRS for name in (high, low)],
    ]
    packed = header[0]
    for part in header[1:]:
        packed = packed.bitwiseOR(part)
    pairs = [
        F.shiftleft(F.coalesce(F.col(high).cast("long"), F.lit(0)), 32)
        .bitwiseOR(F.coalesce(F.col(low).cast("long"), F.lit(0)).bitwiseAND(F.lit(0xFFFFFFFF)))
        .alias(name)
        for name, high, low in wire.PAIRS
    ]
    plain = [F.col(name).cast(wire.WIRE_SCHEMA[name].dataType) for name in wire.PLAIN_FIELDS]
    texts = [F.col(name) for name in wire.DETAIL_TEXTS]
    *prefixed, last = texts
    null_text = F.lit(wire.NULL_TEXT)
    written = [  # rows.detail_of
        F.coalesce(F.concat(F.length(text).cast("string"), F.lit(":"), text), null_text)
        for text in prefixed
    ] + [F.coalesce(F.concat(F.lit(wire.LAST_TEXT), last), null_text)]
    any_text = texts[0].isNotNull()
    for text in texts[1:]:
        any_text = any_text | text.isNotNull()
    detail = F.when(any_text, F.concat(*written))
    return rows_df.select(packed.alias("header"), *pairs, *plain, detail.alias(wire.DETAIL))


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

    def regex(patterns: tuple[str, ...]) -> str | None:
        return "|".join(f"(?:{glob_to_java_regex(p)})" for p in patterns) if patterns else None

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
        compacted_regex=regex(config.topics.compacted),
        coordinator_regex=regex(config.topics.coordinator),
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
# Kernel records as output records
# ------------------------------------------------------------------------------------------------
def _name_of(code: Column, enum: type) -> Column:
    """An enum code as its name; NONE (0) and null as null."""
    out = F.lit(None).cast("string")
    for member in reversed(list(enum)):
        if member.value != 0:
            out = F.when(code == member.value, F.lit(member.name)).otherwise(out)
    return out


def _finding_values() -> dict[str, Column]:
    f = F.col("finding")
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
    f = F.col("finding")
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


def _transaction_of(run_id: str) -> Column:
    t = F.col("transaction")
    transaction_id = F.sha2(
        F.concat_ws(
            "|",
            F.col("topic"),
            F.col("partition").cast("string"),
            t["producer_id"].cast("string"),
            t["first_offset"].cast("string"),
        ),
        256,
    ).substr(1, 32)
    values = {
        "run_id": F.lit(run_id),
        "transaction_id": transaction_id,
        "topic": F.col("topic"),
        "partition": F.col("partition"),
        "outcome": _name_of(t["outcome"], ControlType),
    }
    return F.struct(
        *[
            (values[f.name] if f.name in values else t[f.name]).cast(f.dataType).alias(f.name)
            for f in TRANSACTION_STRUCT.fields
        ]
    )


def _with_topic(struct_name: str, schema: T.StructType) -> Column:
    s = F.col(struct_name)
    values = {"topic": F.col("topic"), "partition": F.col("partition")}
    return F.struct(
        *[
            (values[f.name] if f.name in values else s[f.name]).cast(f.dataType).alias(f.name)
            for f in schema.fields
        ]
    )


def _producer_state_of() -> Column:
    s = F.col("state")
    values = {
        "topic": F.col("topic"),
        "partition": F.col("partition"),
        "source": F.lit("replay"),
        "run_id": F.lit(None),
    }
    return F.struct(
        *[
            (values[f.name] if f.name in values else s[f.name]).cast(f.dataType).alias(f.name)
            for f in PRODUCER_STATE_N.fields
        ]
    )


def _quarantine_of(run_id: str) -> Column:
    q = F.col("quarantine")
    return F.struct(
        F.sha2(F.concat_ws("|", q["raw"], F.col("source")), 256).substr(1, 32).alias(
            "quarantine_id"
        ),
        F.lit(run_id).alias("run_id"),
        F.lit("record_batch").alias("input"),
        q["reason"].alias("reason"),
        F.col("source"),
        F.col("topic"),
        F.col("partition"),
        q["base_offset"],
        q["raw"],
    ).cast(QUARANTINE_N)


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
        One row per output record: `kind` (one of OUTPUT_KINDS) and one non-null struct of that
        kind's schema.
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
    record = F.col("record")
    out = (
        F.when(record == "finding", _record("findings", finding=_finding_of(config, run_id)))
        .when(record == "quarantine", _record("quarantine", quarantine=_quarantine_of(run_id)))
        .when(
            record == "partition_stats",
            _record("partition_stats", partition_stats=_with_topic("partition_stats",
                                                                   PARTITION_STATS_N)),
        )
        .when(record == "transaction", _record("transactions", transaction=_transaction_of(run_id)))
        .when(record == "session", _record("sessions", session=_with_topic("session",
                                                                           SESSION_STRUCT)))
        .when(record == "file_stats", _record("input_files", input_file=F.col("file_stats")))
        .otherwise(_record("producer_state", producer_state=_producer_state_of()))
    )
    return emitted.select(out.alias("r")).select("r.*")


# ------------------------------------------------------------------------------------------------
# Slices of the output records
# ------------------------------------------------------------------------------------------------
def findings_of(records_df: DataFrame) -> DataFrame:
    """The findings table rows of an `audit` result."""
    return records_df.where(F.col("kind") == "findings").select("finding.*")


def quarantine_of(records_df: DataFrame) -> DataFrame:
    """The quarantine table rows of an `audit` result."""
    return records_df.where(F.col("kind") == "quarantine").select("quarantine.*")


def partition_stats_of(records_df: DataFrame) -> DataFrame:
    """The per-partition statistics of an `audit` result."""
    return records_df.where(F.col("kind") == "partition_stats").select("partition_stats.*")


def input_file_counts_of(records_df: DataFrame) -> DataFrame:
    """The batches of each input file an `audit` result counted: file_id and `FILE_COUNTS`."""
    counts = records_df.where(F.col("kind") == "input_files").select("input_file.*")
    return counts.groupBy("file_id").agg(*[F.sum(c).alias(c) for c in FILE_COUNTS])


def transactions_of(records_df: DataFrame) -> DataFrame:
    """The transactions table rows of an `audit` result."""
    return records_df.where(F.col("kind") == "transactions").select("transaction.*")


def producer_state_of(records_df: DataFrame) -> DataFrame:
    """The final producer state of an `audit` result (schemas.PRODUCER_STATE)."""
    return records_df.where(F.col("kind") == "producer_state").select("producer_state.*")


SESSION_KEYS = ["topic", "partition", "producer_id", "producer_epoch"]


def sessions_of(records_df: DataFrame) -> DataFrame:
    """One summary per producer epoch of an `audit` result (its partial summaries merged)."""
    s = records_df.where(F.col("kind") == "sessions").select("session.*")
    first = F.min(
        F.when(
            F.col("first_sequence_offset").isNotNull(),
            F.struct("first_sequence_offset", "first_sequence"),
        )
    )
    last = F.max(
        F.when(
            F.col("last_sequence_offset").isNotNull(),
            F.struct("last_sequence_offset", "last_sequence"),
        )
    )
    return s.groupBy(*SESSION_KEYS).agg(
        F.min("first_offset").alias("first_offset"),
        F.max("last_offset").alias("last_offset"),
        first["first_sequence"].alias("first_sequence"),
        last["last_sequence"].alias("last_sequence"),
        F.sum("batches").alias("batches"),
        F.sum("records").alias("records"),
        F.min("first_timestamp").alias("first_timestamp"),
        F.max("last_timestamp").alias("last_timestamp"),
    )


def problem_records(problems_df: DataFrame, run_id: str) -> DataFrame:
    """Quarantine records for unusable non-batch inputs (corrupt snapshot, bad checkpoint line).

    Args:
        problems_df: (input, source, reason) rows.
        run_id: the run id.

    Returns:
        Output records of kind quarantine, to union with `audit`'s.
    """
    quarantine = F.struct(
        F.sha2(F.concat_ws("|", F.col("input"), F.col("source"), F.col("reason")), 256)
        .substr(1, 32)
        .alias("quarantine_id"),
        F.lit(run_id).alias("run_id"),
        F.col("input"),
        F.col("reason"),
        F.col("source"),
        F.lit(None).cast("string").alias("topic"),
        F.lit(None).cast("long").alias("partition"),
        F.lit(None).cast("long").alias("base_offset"),
        F.lit(None).cast("string").alias("raw"),
    ).cast(QUARANTINE_N)
    return problems_df.select(_record("quarantine", quarantine=quarantine).alias("r")).select("r.*")


def finding_records_of(findings_df: DataFrame) -> DataFrame:
    """Output records of kind findings for rows already in the findings contract."""
    finding = F.struct(*[F.col(n) for n in FINDINGS.fieldNames()])
    return findings_df.select(_record("findings", finding=finding).alias("r")).select("r.*")
