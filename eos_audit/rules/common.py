"""What every rule shares: the finding struct, the log order, and the row classification.

A rule is a function returning a Column that is null when the batch passes and a `finding` struct
when it fails; `finding()` builds that struct so every rule has the same shape, and all rules of a
batch are evaluated in one projection (see `eos_audit.engine`).
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eos_audit.config import AuditConfig, glob_to_java_regex

INT32_MAX = 2_147_483_647

# Row kinds, in the order a producer's rows are replayed: seeded batches, the seeded state entry,
# then the audited batches (the engine issue: "state enters as rows ahead of the audited batches").
KIND_SEED_BATCH = 0
KIND_SEED_STATE = 1
KIND_AUDITED = 2
# Rows that only the partition rules read: a leader-epoch checkpoint entry, and a batch of another
# replica of the partition (compared with the audited, primary replica).
KIND_EPOCH_ENTRY = 3
KIND_REPLICA = 4
# A log-start or high-watermark checkpoint value of the partition.
KIND_CHECKPOINT = 5
# A client acknowledgement (--acks), compared with the batches of the log.
KIND_ACK = 6

# Log order inside a partition. base_offset alone is not a total order when an export holds two
# batches at the same offset (OFFSET_OVERLAP), so ties are broken on every other batch field: rows
# that still tie are identical, and their order cannot change any verdict or finding id.
LOG_ORDER = [
    "base_offset", "last_offset", "producer_id", "producer_epoch", "base_sequence",
    "is_control", "is_transactional", "control_type", "coordinator_epoch",
    "partition_leader_epoch", "max_timestamp", "record_count", "magic", "crc_valid", "source",
]  # fmt: skip

FINDING_STRUCT = T.StructType(
    [
        T.StructField("finding_type", T.StringType(), False),
        T.StructField("severity", T.StringType(), False),
        T.StructField("cause", T.StringType(), True),
        T.StructField("kafka_error", T.StringType(), True),
        T.StructField("expected_sequence", T.IntegerType(), True),
        T.StructField("previous_offset", T.LongType(), True),
        T.StructField("detail", T.StringType(), False),
        T.StructField("spec_ref", T.StringType(), False),
        T.StructField("evidence", T.MapType(T.StringType(), T.StringType(), True), True),
        # When the finding is about another batch than the row that found it (a hanging
        # transaction is found at the producer's last row, reported at its first batch).
        T.StructField("at_base_offset", T.LongType(), True),
        T.StructField("at_last_offset", T.LongType(), True),
    ]
)

BENIGN_CAUSES = ("LOG_START", "PRODUCER_EXPIRY", "COMPACTION")
UNEXPLAINED = "UNEXPLAINED"


def _as(value: Column | str | int | None, data_type: T.DataType) -> Column:
    if isinstance(value, Column):
        return value.cast(data_type)
    return F.lit(value).cast(data_type)


def finding(
    finding_type: str,
    config: AuditConfig,
    *,
    detail: Column,
    spec_ref: str,
    cause: Column | None = None,
    kafka_error: Column | str | None = None,
    expected_sequence: Column | int | None = None,
    previous_offset: Column | None = None,
    evidence: dict[str, Column] | None = None,
    at_offsets: tuple[Column, Column] | None = None,
) -> Column:
    """Build the finding struct of one rule.

    Args:
        finding_type: UPPER_SNAKE type, a key of the configured severities.
        config: the run configuration (severities).
        detail: one readable sentence.
        spec_ref: the rule's section in kafka_rules.md.
        cause: why it happened; a benign cause lowers the severity to INFO.
        kafka_error: the error a leader would have returned.
        expected_sequence: the sequence the leader expected.
        previous_offset: the offset of the earlier batch the finding relates to.
        evidence: further named evidence.
        at_offsets: (base, last) offsets of the batch the finding is about, when it is not the
            row's own batch.

    Returns:
        A struct column of type `FINDING_STRUCT`.

    """
    severity = F.lit(config.severity[finding_type])
    if cause is not None:
        severity = F.when(cause.isin(*BENIGN_CAUSES), F.lit("INFO")).otherwise(severity)
    evidence_col = (
        F.create_map(*[item for k, v in evidence.items() for item in (F.lit(k), v.cast("string"))])
        if evidence
        else F.lit(None).cast(T.MapType(T.StringType(), T.StringType(), True))
    )
    return F.struct(
        F.lit(finding_type).alias("finding_type"),
        severity.alias("severity"),
        _as(cause, T.StringType()).alias("cause"),
        _as(kafka_error, T.StringType()).alias("kafka_error"),
        _as(expected_sequence, T.IntegerType()).alias("expected_sequence"),
        _as(previous_offset, T.LongType()).alias("previous_offset"),
        detail.alias("detail"),
        F.lit(spec_ref).alias("spec_ref"),
        evidence_col.alias("evidence"),
        _as(at_offsets[0] if at_offsets else None, T.LongType()).alias("at_base_offset"),
        _as(at_offsets[1] if at_offsets else None, T.LongType()).alias("at_last_offset"),
    )


def when_true(condition: Column, value: Column) -> Column:
    """`value` where `condition` is true; null where it is false or null."""
    return F.when(F.coalesce(condition, F.lit(False)), value)


def sentence(template: str, *cols: Column) -> Column:
    """A readable sentence from a printf template; nulls print as 'none'."""
    return F.format_string(template, *[F.coalesce(c.cast("string"), F.lit("none")) for c in cols])


def topic_matches(patterns: tuple[str, ...]) -> Column:
    """Whether the row's topic matches any of the wildcard patterns."""
    if not patterns:
        return F.lit(False)
    regex = "|".join(f"({glob_to_java_regex(p)})" for p in patterns)
    return F.col("topic").rlike(regex)
