"""Seeded producer state: `--producer-state` files, and the checks every seed passes.

A seed is the state a partition leader held for one producer before the audited log
(schemas/producer_state.json): its epoch, its last (at most 5) cached batches, its coordinator
epoch and open transaction. The replay trusts it as the broker trusts its snapshot, so a seed with
an impossible value would turn every later batch of that producer into a false verdict (an epoch
of 40000 makes each real batch look like a zombie write, FENCED_PRODUCER_EPOCH). Every seed source
therefore goes through `check_seeds` before the replay sees it: `--producer-state` files and
Delta tables, `--since-state` (the warehouse's own `producer_state`), and the `.snapshot` files of
segment exports. A row outside Kafka's own ranges (ProducerStateEntry and the snapshot format,
docs/formats.md#producer-snapshot; docs/nightly.md lists them) is quarantined
(`input = producer_state`) with its reasons and never used. Which `--producer-state` path is a
table, and which earlier run's state a table gives, is the run's seeding step's to decide
(`eos_audit.audit.since_state`); the files are read here.

Whole-file problems are the user's to fix (exit 2): a Parquet file without the contract's columns
(a record-batch file passed by mistake) or with a column of an unusable type is refused naming
them, through the same contract reader as every other tabular input
(`eos_audit.sources.tabular.contract_reader`). A malformed JSON line is quarantined with its
file, line and text, as in `--batches`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eos_audit.errors import InputSchemaError
from eos_audit.schemas import PRODUCER_STATE, SEED_BATCH
from eos_audit.sources.files.input_files import followed_paths
from eos_audit.sources.tabular import contract_reader as cr
from eos_audit.sources.tabular.canonical import SOURCE_ERROR, is_integer_type, reason_when

INPUT = "producer_state"
# Kafka's ranges (ProducerStateEntry, docs/formats.md#producer-snapshot): an epoch is a
# short, -1 for an entry without one; a sequence and a coordinator epoch are ints, -1 when absent;
# offsets are non-negative longs.
MAX_EPOCH = 32767
MAX_INT = 2147483647
MAX_LONG = 9223372036854775807
NUM_BATCHES_TO_RETAIN = 5  # ProducerStateEntry keeps the last 5 batches of an epoch
BATCH_FIELDS = tuple(SEED_BATCH.fieldNames())
_INTEGERS = tuple(
    f.name for f in PRODUCER_STATE.fields if isinstance(f.dataType, T.IntegerType | T.LongType)
)
_LOCATION = "_seed_location"
CONTRACT = cr.TableContract(
    label="producer-state",
    columns=tuple(PRODUCER_STATE.fieldNames()),
    # The key of a producer's state and its cached batches (an empty list when it has none):
    # without them a row is no producer state (a record-batch file has the key columns only).
    required=("topic", "partition", "producer_id", "producer_epoch", "batches"),
    integer_columns=_INTEGERS,
    string_columns=("topic",),
    time_columns=(),
    required_note=" (schemas/producer_state.json; batches may be an empty list)",
)
_TEXT_BATCH = T.ArrayType(T.StructType([T.StructField(n, T.StringType()) for n in BATCH_FIELDS]))


@dataclass
class SeedRead:
    """Checked seeds and the rows that failed the checks.

    Attributes:
        seeds: rows in the `PRODUCER_STATE` contract that passed every check, or None.
        problems: (input, source, reason) rows of the seeds that did not, or None.
    """

    seeds: DataFrame | None = None
    problems: DataFrame | None = None

    def add(self, other: SeedRead) -> SeedRead:
        """Both reads' seeds and problems together."""
        return SeedRead(_union(self.seeds, other.seeds), _union(self.problems, other.problems))


def _union(a: DataFrame | None, b: DataFrame | None) -> DataFrame | None:
    if a is None:
        return b
    return a if b is None else a.unionByName(b)


# ------------------------------------------------------------------------------------------------
# The checks (column expressions over any integer width: arithmetic on longs never overflows)
# ------------------------------------------------------------------------------------------------
def _outside(name: str, value: Column, low: int, high: int, *, nullable: bool) -> Column:
    """A reason when `value` is null (and must not be) or outside [low, high], else null."""
    missing = reason_when(value.isNull(), f"null {name}") if not nullable else F.lit(None)
    return F.coalesce(
        missing,
        reason_when(
            (value < low) | (value > high),
            cr.format_reason(f"{name} %s is outside {low}..{high}", value),
        ),
    )


def seed_reasons(df: DataFrame) -> list[Column]:
    """Every check of a seed row, each a reason or null (the ranges docs/nightly.md lists).

    Args:
        df: seed rows: the `PRODUCER_STATE` columns (integers of any width; `batches` a list of
            structs of integers), some of them possibly absent (null).

    Returns:
        Reason columns, null where the check passes.
    """

    def col(name: str) -> Column:
        return F.col(name) if name in df.columns else F.lit(None)

    topic = col("topic")
    batches = col("batches")
    reasons = [
        reason_when(topic.isNull(), "null topic"),
        reason_when(
            ~topic.rlike(cr.LEGAL_TOPIC),
            cr.format_reason("topic %s is not a legal Kafka topic name", topic),
        ),
        _outside("partition", col("partition"), 0, MAX_INT, nullable=False),
        # -1 is "no producer id": such a batch has no producer state to seed.
        _outside("producer_id", col("producer_id"), 0, MAX_LONG, nullable=False),
        _outside("producer_epoch", col("producer_epoch"), -1, MAX_EPOCH, nullable=False),
        _outside("coordinator_epoch", col("coordinator_epoch"), -1, MAX_INT, nullable=True),
        # null means no open transaction (a snapshot's -1 is read as null).
        _outside("txn_first_offset", col("txn_first_offset"), 0, MAX_LONG, nullable=True),
        _outside("last_timestamp", col("last_timestamp"), -1, MAX_LONG, nullable=True),
        _outside("state_offset", col("state_offset"), 0, MAX_LONG, nullable=True),
        reason_when(
            F.size(batches) > NUM_BATCHES_TO_RETAIN,
            cr.format_reason(
                f"%s cached batches, more than the {NUM_BATCHES_TO_RETAIN} a producer's state "
                "keeps",
                F.size(batches),
            ),
        ),
        _batch_reason(batches),
    ]
    return reasons


def _batch_reason(batches: Column) -> Column:
    """The first impossible cached batch, described, or null when all are possible."""

    def problem(b: Column) -> Column:
        in_range = (
            (b["base_offset"] >= 0)
            & (b["base_offset"] <= b["last_offset"])
            & b["last_sequence"].between(0, MAX_INT)
        )
        # Only where the offsets and the sequence are in range: the arithmetic then never
        # overflows (Spark's ANSI mode would fail the task).
        span = F.when(in_range, b["last_offset"] - b["base_offset"])
        last_seq = b["last_sequence"]
        # BatchMetadata.firstSeq = decrementSequence(lastSeq, offsetDelta): the cache takes the
        # sequence span to be the offset span (docs/formats.md#sequence-arithmetic).
        first_seq = F.when(last_seq < span, MAX_INT - (span - last_seq) + 1).otherwise(
            last_seq - span
        )
        return F.coalesce(
            reason_when(b.isNull(), "a cached batch is null"),
            *[reason_when(b[n].isNull(), f"a cached batch has a null {n}") for n in BATCH_FIELDS],
            _outside("cached base_sequence", b["base_sequence"], 0, MAX_INT, nullable=True),
            _outside("cached last_sequence", b["last_sequence"], 0, MAX_INT, nullable=True),
            _outside("cached base_offset", b["base_offset"], 0, MAX_LONG, nullable=True),
            _outside("cached last_offset", b["last_offset"], 0, MAX_LONG, nullable=True),
            reason_when(
                b["base_offset"] > b["last_offset"],
                cr.format_reason(
                    "a cached batch's base_offset %s is above its last_offset %s",
                    b["base_offset"],
                    b["last_offset"],
                ),
            ),
            reason_when(
                b["base_sequence"] != first_seq,
                cr.format_reason(
                    "a cached batch spans sequences %s..%s but offsets %s..%s (Kafka's cache "
                    "takes both spans to be equal)",
                    b["base_sequence"],
                    b["last_sequence"],
                    b["base_offset"],
                    b["last_offset"],
                ),
            ),
        )

    found = F.filter(F.transform(batches, problem), lambda r: r.isNotNull())
    return F.when(F.size(found) > 0, found[0])


# Materializes a DataFrame once (the pipeline stages it, `eos_audit.audit.pipeline.checked_once`).
Keep = Callable[[DataFrame], DataFrame]


def check_seeds(
    df: DataFrame | None, location: Column | None = None, keep: Keep | None = None
) -> SeedRead:
    """Split seed rows into those every check passes and quarantine problems.

    Args:
        df: seed rows (see `seed_reasons`), optionally with `_source_error` (a reason a reader
            found already, such as a malformed JSON line) and `_seed_location` (where the row was
            read); None: nothing.
        location: where a row is, for the quarantine's `source`; default its `_seed_location`,
            else its `source` with the producer it is about.
        keep: applied to the checked rows before they are split: the run stages them, so that
            the valid rows, the problems and what the run derives from them (the offsets a state
            covers) read the checks' result instead of each planning the checks again.

    Returns:
        The valid rows in the `PRODUCER_STATE` contract and (input, source, reason) rows.
    """
    if df is None:
        return SeedRead()
    upstream = F.col(SOURCE_ERROR) if SOURCE_ERROR in df.columns else F.lit(None)
    # A row a reader could not parse gets that reason, not its consequences.
    reason = F.coalesce(
        upstream.cast("string"), F.nullif(F.concat_ws("; ", *seed_reasons(df)), F.lit(""))
    )
    if location is None:
        location = (
            F.col(_LOCATION)
            if _LOCATION in df.columns
            else F.concat_ws(
                " ",
                F.coalesce(F.col("source"), F.lit(INPUT))
                if "source" in df.columns
                else F.lit(INPUT),
                F.lit("producer"),
                F.coalesce(F.col("producer_id").cast("string"), F.lit("null")),
                F.lit("of"),
                F.concat_ws(
                    "-",
                    F.coalesce(F.col("topic"), F.lit("null")),
                    F.coalesce(F.col("partition").cast("string"), F.lit("null")),
                ),
            )
        )
    checked = df.select("*", reason.alias("_seed_reason"), location.alias("_seed_where"))
    if keep is not None:
        checked = keep(checked)
    good = checked.where(F.col("_seed_reason").isNull())
    valid = good.select(
        *[
            (F.col(f.name) if f.name in df.columns else F.lit(None)).cast(f.dataType).alias(f.name)
            for f in PRODUCER_STATE.fields
        ]
    )
    problems = checked.where(F.col("_seed_reason").isNotNull()).select(
        F.lit(INPUT).alias("input"),
        F.col("_seed_where").cast("string").alias("source"),
        F.col("_seed_reason").alias("reason"),
    )
    return SeedRead(valid, problems)


# ------------------------------------------------------------------------------------------------
# Reading --producer-state
# ------------------------------------------------------------------------------------------------
def check_batches_type(data_type: T.DataType, where: str) -> None:
    """Refuse a `batches` column that is not a list of {base_sequence, ...} integer structs.

    Raises:
        InputSchemaError: naming the column and the type it should have.
    """
    element = data_type.elementType if isinstance(data_type, T.ArrayType) else None
    ok = isinstance(element, T.StructType) and all(
        n in element.fieldNames()
        and (is_integer_type(element[n].dataType) or isinstance(element[n].dataType, T.StringType))
        for n in BATCH_FIELDS
    )
    if not ok:
        raise InputSchemaError(
            f"{CONTRACT.label} input {where}: column 'batches' has type "
            f"{data_type.simpleString()}, expected a list of structs of integers "
            f"{list(BATCH_FIELDS)} (schemas/producer_state.json)"
        )


def check_seed_schema(schema: T.StructType, where: str) -> None:
    """The whole-file checks of a typed (Parquet) seed file: columns present and usable.

    Raises:
        InputSchemaError: a required column is missing or a column has an unusable type.
    """
    cr.require_columns(schema.fieldNames(), CONTRACT.required, where, CONTRACT)
    for field in schema.fields:
        name, data_type = field.name, field.dataType
        if name in CONTRACT.integer_columns and not (
            is_integer_type(data_type) or isinstance(data_type, T.StringType)
        ):
            raise InputSchemaError(
                f"{CONTRACT.label} input {where}: column {name!r} has type "
                f"{data_type.simpleString()}, expected an integer type (any width)"
            )
        if name in CONTRACT.string_columns and not isinstance(data_type, T.StringType):
            raise InputSchemaError(
                f"{CONTRACT.label} input {where}: column {name!r} has type "
                f"{data_type.simpleString()}, expected string"
            )
    check_batches_type(schema["batches"].dataType, where)


def _as_longs(df: DataFrame, batches: Column) -> DataFrame:
    """Contract columns as longs (any width or text), `batches` as structs of longs.

    A value that is no integer becomes a reason in `_source_error`; the range checks then see
    longs, so a value too wide for its contract type is a reason, never a wrapped number.
    """
    values, problems = {}, []
    for name in _INTEGERS:
        values[name], problem = cr.parse_integer(df, name)
        problems.append(problem)
    for name in ("topic", "source", "run_id"):
        values[name] = cr.parse_text(df, name)

    def as_long(b: Column) -> Column:
        return F.struct(*[b[n].cast("string").try_cast("long").alias(n) for n in BATCH_FIELDS])

    def not_integer(b: Column) -> Column:
        return F.exists(
            F.array(*[b[n] for n in BATCH_FIELDS]),
            lambda v: v.isNotNull() & v.cast("string").try_cast("long").isNull(),
        )

    problems.append(
        reason_when(
            F.exists(batches, not_integer), "a cached batch holds a value that is no integer"
        )
    )
    upstream = F.col(SOURCE_ERROR) if SOURCE_ERROR in df.columns else F.lit(None)
    reason = F.coalesce(upstream.cast("string"), F.nullif(F.concat_ws("; ", *problems), F.lit("")))
    return df.select(
        *[v.alias(n) for n, v in values.items()],
        F.transform(batches, as_long).alias("batches"),
        reason.alias(SOURCE_ERROR),
        F.col(cr.DEFAULT_SOURCE).alias(_LOCATION),
    ).withColumn("source", F.coalesce(F.col("source"), F.col(_LOCATION)))


def read_seed_files(spark: SparkSession, path: str, fmt: str) -> DataFrame:
    """One `--producer-state` Parquet or JSON-lines path as seed rows for `check_seeds`.

    A symbolic link in a directory is followed only inside it (`followed_paths`).

    Raises:
        InputSchemaError: a file is not Parquet, or lacks a required column, or has a column of
            an unusable type (a record-batch file, for example).
    """
    paths = followed_paths([path], fmt)
    if fmt == "parquet":
        df = cr.read_parquet_table(spark, paths, CONTRACT)
        check_seed_schema(df.schema, path)
        return _as_longs(df, F.col("batches"))
    df = cr.read_json_lines(spark, paths, CONTRACT, CONTRACT.required, line_numbers=True)
    batches = F.from_json(F.col("batches"), _TEXT_BATCH)
    malformed = reason_when(
        F.col("batches").isNotNull() & batches.isNull(),
        cr.format_reason("batches %s is not a list of cached batches", F.col("batches")),
    )
    df = df.withColumn(SOURCE_ERROR, F.coalesce(F.col(SOURCE_ERROR), malformed))
    # A malformed line is located with its text, as in --batches.
    location = F.when(
        F.col(cr.MALFORMED_LINE).isNotNull(),
        F.concat(F.col(cr.DEFAULT_SOURCE), F.lit(": "), F.col(cr.MALFORMED_LINE).substr(1, 200)),
    ).otherwise(F.col(cr.DEFAULT_SOURCE))
    return _as_longs(df.withColumn(cr.DEFAULT_SOURCE, location), batches)
