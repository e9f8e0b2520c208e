"""The audit's output records: what the replay emitted, as rows of the tables they become.

`replay_plan.audit` returns one record per row: `kind`, the name of the output (the table) it
belongs to, and one struct of that same name; every other struct is null. The runner tags what it
emits with the same names (`replay.runner.OUTPUT_ARROW`, after `replay.state.OUTPUTS`); here each
kind of kernel record is decoded into its table's struct (`decoded`), and an audit's records are
sliced back into one table's rows (`findings_of`, ...). The pipeline stages the records as
Parquet, partitioned by `kind`, and writes each table from its slice.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eos_audit.replay.runner import FILE_COUNTS
from eos_audit.replay.state import OUTPUTS as KERNEL_OUTPUTS
from eos_audit.replay.wire import ControlType
from eos_audit.schemas import FINDINGS, PARTITION_STATS, PRODUCER_STATE, QUARANTINE, TRANSACTIONS
from eos_audit.sources.kafka.dump_log import LINE_INPUT, UNKNOWN_LINE
from eos_audit.sql_text import cast, cast_text, ident, lookup, sql_type, string_literal

# Every output an audit's records hold: the kernel's, then the batches quarantined as they were
# read and each input file's counts of batches (the input_files table).
OUTPUTS = (*KERNEL_OUTPUTS, "quarantine", "input_files")


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
# The kernel's statistics of one partition, which summaries.partition_summary completes, and what
# the processing checks read of the exported log (`processing.exported_logs`), which no table
# shows: the spans of offsets it could not count, and, with --since-state, the offset the seeded
# state covers and the extent of the batches below it, skipped.
PARTITION_STATS_N = _nullable(
    T.StructType(
        [
            *PARTITION_STATS.fields,
            *[
                T.StructField(name, T.LongType(), True)
                for name in ("producers", "uncounted_from", "uncounted_to", "unattributed_from",
                             "unattributed_to", "log_start_checkpoint", "covered_end",
                             "skipped_from", "skipped_to", "skipped_max_timestamp")
            ],
        ]
    )
)  # fmt: skip
# One partial summary of a producer epoch (the kernel flushes one whenever a producer's epoch
# changes); `producer_sessions_of` merges the partials of one epoch.
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
# The struct of each output, under its name.
STRUCTS = {
    "findings": FINDINGS_N,
    "transactions": TRANSACTION_STRUCT,
    "producer_sessions": SESSION_STRUCT,
    "partition_summary": PARTITION_STATS_N,
    "producer_state": PRODUCER_STATE_N,
    "quarantine": QUARANTINE_N,
    "input_files": FILE_STATS,
}
OUTPUT_RECORD = T.StructType(
    [T.StructField("kind", T.StringType(), False)]
    + [T.StructField(name, STRUCTS[name], True) for name in OUTPUTS]
)


def record(kind: str, value: Column, nulls: dict[str, Column] | None = None) -> Column:
    """One output record: `kind` and that output's struct, every other struct null.

    Args:
        kind: the output (one of `OUTPUTS`).
        value: its struct.
        nulls: typed nulls of every output's struct, to reuse across records (`typed_nulls`).
    """
    nulls = nulls or typed_nulls()
    fields = [F.lit(kind).alias("kind")]
    # Every output's struct is nullable throughout (`_nullable`), so its SQL type text, whose
    # fields Spark parses as nullable, names exactly that type: one call into Spark to cast.
    for field in OUTPUT_RECORD.fields[1:]:
        struct = value.cast(sql_type(field.dataType)) if field.name == kind else nulls[field.name]
        fields.append(struct.alias(field.name))
    return F.struct(*fields)


def record_text(kind: str, value: str) -> list[str]:
    """`record` as select expressions: `value`, SQL text of `kind`'s struct, and typed nulls.

    For values that are columns of known names: one call into Spark instead of a few per field.
    """
    return [
        f"{string_literal(kind)} AS kind",
        *[
            f"{cast_text(value if f.name == kind else 'NULL', f.dataType)} AS {ident(f.name)}"
            for f in OUTPUT_RECORD.fields[1:]
        ],
    ]


def typed_nulls() -> dict[str, Column]:
    """A null of each output's struct type, by output name (built once, used in every record)."""
    return {f.name: F.expr(cast_text("NULL", f.dataType)) for f in OUTPUT_RECORD.fields[1:]}


def name_of(code: Column, enum: type) -> Column:
    """An enum code as its name; NONE (0), a code of no member and null as null."""
    return lookup(code, {m.value: m.name for m in enum if m.value != 0})


# ------------------------------------------------------------------------------------------------
# The runner's records as output records
# ------------------------------------------------------------------------------------------------
def _transactions(run_id: str) -> Column:
    t = F.col("transactions")
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
        "outcome": name_of(t["outcome"], ControlType),
    }
    return F.struct(
        *[
            cast(values[f.name] if f.name in values else t[f.name], f.dataType).alias(f.name)
            for f in TRANSACTION_STRUCT.fields
        ]
    )


def _with_topic(name: str) -> Column:
    """The runner's struct `name` with its record's topic and partition, in the output's struct."""
    s = F.col(name)
    values = {"topic": F.col("topic"), "partition": F.col("partition")}
    return F.struct(
        *[
            cast(values[f.name] if f.name in values else s[f.name], f.dataType).alias(f.name)
            for f in STRUCTS[name].fields
        ]
    )


def _producer_state() -> Column:
    s = F.col("producer_state")
    values = {
        "topic": F.col("topic"),
        "partition": F.col("partition"),
        "source": F.lit("replay"),
        "run_id": F.lit(None),
    }
    return F.struct(
        *[
            cast(values[f.name] if f.name in values else s[f.name], f.dataType).alias(f.name)
            for f in PRODUCER_STATE_N.fields
        ]
    )


def _quarantine(run_id: str) -> Column:
    q = F.col("quarantine")
    return F.struct(
        F.sha2(F.concat_ws("|", q["raw"], F.col("source")), 256)
        .substr(1, 32)
        .alias("quarantine_id"),
        F.lit(run_id).alias("run_id"),
        # A dump text's line that is no part of the tool's output is a line, not a batch.
        F.when(q["reason"].startswith(UNKNOWN_LINE), F.lit(LINE_INPUT))
        .otherwise(F.lit("record_batch"))
        .alias("input"),
        q["reason"].alias("reason"),
        F.col("source"),
        F.col("topic"),
        F.col("partition"),
        q["base_offset"],
        q["raw"],
    ).cast(QUARANTINE_N)


def decoded(emitted: DataFrame, findings: Column, run_id: str) -> DataFrame:
    """The runner's records (`runner.OUTPUT_ARROW`) as output records (`OUTPUT_RECORD`).

    Args:
        emitted: what `replay.runner.replay_partitions` emitted.
        findings: the findings-table struct of a record of kind findings (`replay_plan`, through the
            one finding builder).
        run_id: the run id stamped on every row.
    """
    values = {
        "findings": findings,
        "transactions": _transactions(run_id),
        "producer_sessions": _with_topic("producer_sessions"),
        "partition_summary": _with_topic("partition_summary"),
        "producer_state": _producer_state(),
        "quarantine": _quarantine(run_id),
        "input_files": F.col("input_files"),
    }
    kind = F.col("kind")
    nulls = typed_nulls()
    first, *others = OUTPUTS
    out = F.when(kind == first, record(first, values[first], nulls))
    for name in others:
        out = out.when(kind == name, record(name, values[name], nulls))
    return emitted.select(out.alias("r")).select("r.*")


# ------------------------------------------------------------------------------------------------
# Slices of the output records: one table's rows
# ------------------------------------------------------------------------------------------------
def rows_of(records_df: DataFrame, name: str) -> DataFrame:
    """The rows of the output `name` (one of `OUTPUTS`) among an audit's records."""
    return records_df.where(F.col("kind") == name).select(f"{name}.*")


def findings_of(records_df: DataFrame) -> DataFrame:
    """The findings table rows of an `audit` result."""
    return rows_of(records_df, "findings")


def quarantine_of(records_df: DataFrame) -> DataFrame:
    """The quarantine table rows of an `audit` result."""
    return rows_of(records_df, "quarantine")


def transactions_of(records_df: DataFrame) -> DataFrame:
    """The transactions table rows of an `audit` result."""
    return rows_of(records_df, "transactions")


def producer_state_of(records_df: DataFrame) -> DataFrame:
    """The final producer state of an `audit` result (schemas.PRODUCER_STATE)."""
    return rows_of(records_df, "producer_state")


def partition_summary_of(records_df: DataFrame) -> DataFrame:
    """The per-partition statistics of an `audit` result (summaries.partition_summary's input)."""
    return rows_of(records_df, "partition_summary")


def input_file_counts_of(records_df: DataFrame) -> DataFrame:
    """The batches of each input file an `audit` result counted: file_id and `FILE_COUNTS`."""
    counts = rows_of(records_df, "input_files")
    return counts.groupBy("file_id").agg(*[F.sum(c).alias(c) for c in FILE_COUNTS])


SESSION_KEYS = ["topic", "partition", "producer_id", "producer_epoch"]


def merged_session_columns() -> list[Column]:
    """The aggregates that merge the partial summaries of one producer epoch.

    Applied grouped by `SESSION_KEYS`; rows of other kinds in a group (these columns null)
    change nothing.
    """
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
    return [
        F.min("first_offset").alias("first_offset"),
        F.max("last_offset").alias("last_offset"),
        first["first_sequence"].alias("first_sequence"),
        last["last_sequence"].alias("last_sequence"),
        F.sum("batches").alias("batches"),
        F.sum("records").alias("records"),
        F.min("first_timestamp").alias("first_timestamp"),
        F.max("last_timestamp").alias("last_timestamp"),
    ]


def producer_sessions_of(records_df: DataFrame) -> DataFrame:
    """One summary per producer epoch of an `audit` result (its partial summaries merged)."""
    return (
        rows_of(records_df, "producer_sessions")
        .groupBy(*SESSION_KEYS)
        .agg(*merged_session_columns())
    )


# ------------------------------------------------------------------------------------------------
# Output records from outside the replay
# ------------------------------------------------------------------------------------------------
def problem_records(problems_df: DataFrame, run_id: str) -> DataFrame:
    """Quarantine records for unusable non-batch inputs (corrupt snapshot, bad checkpoint line).

    Args:
        problems_df: (input, source, reason) rows.
        run_id: the run id.

    Returns:
        Output records of kind quarantine, to union with `audit`'s.
    """
    quarantine_id = "substring(sha2(concat_ws('|', `input`, `source`, `reason`), 256), 1, 32)"
    quarantine = (
        f"named_struct('quarantine_id', {quarantine_id}, "
        f"'run_id', {string_literal(run_id)}, 'input', `input`, 'reason', `reason`, "
        "'source', `source`, 'topic', CAST(NULL AS string), 'partition', CAST(NULL AS bigint), "
        "'base_offset', CAST(NULL AS bigint), 'raw', CAST(NULL AS string))"
    )
    return problems_df.selectExpr(*record_text("quarantine", quarantine))


def finding_records_of(findings_df: DataFrame) -> DataFrame:
    """Output records of kind findings for rows already in the findings contract."""
    fields = ", ".join(f"{string_literal(n)}, {ident(n)}" for n in FINDINGS.fieldNames())
    return findings_df.selectExpr(*record_text("findings", f"named_struct({fields})"))
