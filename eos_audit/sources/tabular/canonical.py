"""Validation into the canonical record-batch schema.

Every source hands over a DataFrame whose canonical columns may have any integer width (or be
strings, for text formats) plus an optional `_source_error`. This module range-checks every value,
derives `last_sequence` with Kafka's wraparound rule, casts to the contract types and marks each row
either valid or quarantined with all its reasons. Nothing is dropped: the caller splits on
`quarantine_reason`.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eos_audit.errors import InputSchemaError
from eos_audit.schemas import RECORD_BATCH_COLUMNS, REQUIRED_INPUT_COLUMNS

INT32_MAX = 2_147_483_647
INT32_MIN = -2_147_483_648
INT16_MAX = 32_767
INT16_MIN = -32_768
SOURCE_ERROR = "_source_error"
QUARANTINE_REASON = "quarantine_reason"
RAW = "raw"

_INTEGER_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_INT_COLUMNS = [
    c.name for c in RECORD_BATCH_COLUMNS if isinstance(c.data_type, T.IntegerType | T.LongType)
]
_BOOL_COLUMNS = [c.name for c in RECORD_BATCH_COLUMNS if isinstance(c.data_type, T.BooleanType)]
_STRING_COLUMNS = [c.name for c in RECORD_BATCH_COLUMNS if isinstance(c.data_type, T.StringType)]


LONG_MAX = 9_223_372_036_854_775_807


def _sub(a: Column, b: Column | int) -> Column:
    """The difference, null instead of an overflow error (Spark ANSI mode raises on overflow)."""
    return F.try_subtract(a, b if isinstance(b, Column) else F.lit(b))


def _add(a: Column, b: Column | int) -> Column:
    """The sum, null instead of an overflow error."""
    return F.try_add(a, b if isinstance(b, Column) else F.lit(b))


def increment_sequence(base: Column, delta: Column) -> Column:
    """Kafka's `incrementSequence` on long columns (docs/formats.md#sequence-arithmetic).

    `s > MAX - k ? k - (MAX - s) - 1 : s + k`, i.e. the sequence wraps from 2147483647 to 0.
    Every step is overflow-safe: inputs far outside the int32 range give null, never an error, so
    a row with impossible values reaches quarantine instead of failing the whole job.
    """
    limit = F.lit(INT32_MAX)
    wrapped = _sub(_sub(delta, _sub(limit, base)), 1)
    return F.when(base > _sub(limit, delta), wrapped).otherwise(_add(base, delta))


def is_integer_type(data_type: T.DataType) -> bool:
    """Whether a column type holds integers: any width, or a decimal with scale 0."""
    if isinstance(data_type, _INTEGER_TYPES):
        return True
    return isinstance(data_type, T.DecimalType) and data_type.scale == 0


def check_columns(df: DataFrame, *, text_input: bool) -> None:
    """Fail fast, naming the column, when a required column is missing or has an unusable type.

    Args:
        df: the DataFrame as read.
        text_input: True for JSON/CSV read as strings (types are then checked per row).

    Raises:
        InputSchemaError: a required column is missing, or a column has a type that cannot hold
            its values (for example a string producer_id in a Parquet file).

    """
    fields = {f.name: f.dataType for f in df.schema.fields}
    missing = [name for name in REQUIRED_INPUT_COLUMNS if name not in fields]
    if missing:
        raise InputSchemaError(
            f"input is missing required column(s) {missing}; the record-batch contract "
            f"(schemas/record_batch.json) requires {REQUIRED_INPUT_COLUMNS}"
        )
    if text_input:
        return
    for name, data_type in fields.items():
        if name in _INT_COLUMNS and not is_integer_type(data_type):
            raise InputSchemaError(
                f"column {name!r} has type {data_type.simpleString()}, expected an integer type "
                "(any width); fix the export or cast the column"
            )
        if name in _BOOL_COLUMNS and not isinstance(data_type, T.BooleanType):
            raise InputSchemaError(
                f"column {name!r} has type {data_type.simpleString()}, expected boolean"
            )
        if name in _STRING_COLUMNS and not isinstance(data_type, T.StringType):
            raise InputSchemaError(
                f"column {name!r} has type {data_type.simpleString()}, expected string"
            )


def reason_when(condition: Column, message: Column | str) -> Column:
    """A reason string when `condition` holds, else null (null conditions count as false).

    CASE WHEN takes a null condition as false, so `condition` needs no coalesce.
    """
    text = F.lit(message) if isinstance(message, str) else message
    return F.when(condition, text)


def _fmt(template: str, *cols: Column) -> Column:
    return F.format_string(template, *[c.cast("string") for c in cols])


def to_canonical(
    df: DataFrame,
    *,
    text_input: bool = False,
    keep: tuple[str, ...] = (),
    source_fallback: Column | None = None,
    fallback_columns: tuple[str, ...] = (),
) -> DataFrame:
    """Range-check, derive and cast a source DataFrame into the canonical schema.

    Args:
        df: a source DataFrame with at least the required canonical columns; integer columns of any
            width (or strings when `text_input`), optional `_source_error`.
        text_input: whether values arrive as strings (JSON lines, CSV).
        keep: further columns of `df` to carry through unchanged (for example a replica id).
        source_fallback: where a row was read, for rows without a `source` of their own, when
            the rows are otherwise located by reference (`row_reference`): it is evaluated for
            quarantined rows only (their `source` and `raw`), never for the others.
        fallback_columns: columns of `df` that only `source_fallback` reads: neither carried
            through nor part of `raw`.

    Returns:
        The canonical columns with contract types, plus `quarantine_reason` (null for valid rows)
        and `raw` (the row as read, as JSON, only on quarantined rows).

    """
    check_columns(df, text_input=text_input)
    present = set(df.columns)
    given_source = F.col("source") if "source" in present else F.lit(None).cast("string")
    # Referenced only under `quarantined` below, so that Spark builds it for quarantined
    # rows alone (a column computed beforehand would be built for every row).
    shown_source = (
        given_source if source_fallback is None else F.coalesce(given_source, source_fallback)
    )
    raw_fields = [
        (shown_source if c == "source" else F.col(c)).alias(c)
        for c in df.columns
        if c != SOURCE_ERROR and c not in keep and c not in fallback_columns
    ]
    if source_fallback is not None and "source" not in present:
        raw_fields.append(shown_source.alias("source"))
    raw_json = F.to_json(F.struct(*raw_fields))
    source_error = F.col(SOURCE_ERROR) if SOURCE_ERROR in present else F.lit(None).cast("string")

    problems: list[Column] = []
    wide: dict[str, Column] = {}
    for name in _INT_COLUMNS:
        raw = F.col(name) if name in present else F.lit(None)
        if text_input and name in present:
            parsed = F.trim(raw.cast("string")).try_cast("long")
            problems.append(
                reason_when(
                    raw.isNotNull() & parsed.isNull(), _fmt(f"{name} %s is not an integer", raw)
                )
            )
            wide[name] = parsed
        elif name not in present:
            wide[name] = raw
        elif isinstance(df.schema[name].dataType, _INTEGER_TYPES):
            # Spark's integer types are 64 bits at most: widening one cannot fail, so the row
            # needs no check (one condition less per column and row on typed input).
            wide[name] = raw.cast("long")
        else:  # a decimal of scale 0 may exceed the long range
            wide[name] = raw.try_cast("long")
            problems.append(
                reason_when(raw.isNotNull() & wide[name].isNull(), f"{name} exceeds the long range")
            )
    for name in _BOOL_COLUMNS:
        raw = F.col(name) if name in present else F.lit(None)
        if text_input and name in present:
            text = F.lower(F.trim(raw.cast("string")))
            parsed = F.when(text.isin("true", "1"), True).when(text.isin("false", "0"), False)
            problems.append(
                reason_when(
                    raw.isNotNull() & parsed.isNull(), _fmt(f"{name} %s is not a boolean", raw)
                )
            )
            wide[name] = parsed
        else:
            wide[name] = raw.cast("boolean")
    strings = {
        n: (F.col(n).cast("string") if n in present else F.lit(None).cast("string"))
        for n in _STRING_COLUMNS
    }
    # Markers are spelled COMMIT / ABORT by Kafka's tools; accept any case from hand-made exports.
    strings["control_type"] = F.upper(F.trim(strings["control_type"]))

    topic, partition = strings["topic"], wide["partition"]
    base, last = wide["base_offset"], wide["last_offset"]
    pid, epoch = wide["producer_id"], wide["producer_epoch"]
    bseq, lseq = wide["base_sequence"], wide["last_sequence"]
    count, magic = wide["record_count"], F.coalesce(wide["magic"], F.lit(2))
    # Every arithmetic on input values is overflow-safe (null on overflow): Spark's ANSI mode
    # would otherwise fail the whole job on one row (issue 12, case 1). A null span can only come
    # from offsets of opposite signs, which the offset checks below already reject.
    span = _sub(last, base)

    for name in REQUIRED_INPUT_COLUMNS:
        problems.append(reason_when(F.col(name).isNull(), f"null {name}"))
    problems += [
        # Only a topic that starts with a space is trimmed: trimming every row's topic copied it.
        reason_when((topic == "") | (topic.startswith(" ") & (F.trim(topic) == "")), "empty topic"),
        reason_when(
            (partition < 0) | (partition > INT32_MAX), _fmt("partition %s out of range", partition)
        ),
        reason_when(base < 0, _fmt("negative base_offset %s", base)),
        reason_when(last < base, _fmt("last_offset %s below base_offset %s", last, base)),
        # The log end offset (last + 1) must exist: Kafka's offsets are longs below Long.MAX_VALUE.
        reason_when(last == F.lit(LONG_MAX), _fmt("last_offset %s leaves no next offset", last)),
        reason_when(
            span > INT32_MAX, _fmt("offset span %s exceeds the int32 lastOffsetDelta", span)
        ),
        reason_when(pid < -1, _fmt("producer_id %s below -1", pid)),
        reason_when(
            (epoch < INT16_MIN) | (epoch > INT16_MAX),
            _fmt("producer_epoch %s outside int16", epoch),
        ),
        reason_when((epoch >= INT16_MIN) & (epoch < -1), _fmt("producer_epoch %s below -1", epoch)),
        # An idempotent batch always carries an epoch (InitProducerId assigns both together).
        reason_when(
            (pid >= 0) & (epoch == -1), _fmt("producer_id %s without a producer_epoch", pid)
        ),
        reason_when((bseq < -1) | (bseq > INT32_MAX), _fmt("base_sequence %s out of range", bseq)),
        reason_when((lseq < -1) | (lseq > INT32_MAX), _fmt("last_sequence %s out of range", lseq)),
        reason_when(
            (count < 0) | (_sub(count, 1) > span),
            _fmt("record_count %s impossible for offsets %s-%s", count, base, last),
        ),
        reason_when(~magic.isin(0, 1, 2), _fmt("unknown magic %s", magic)),
    ]
    for name in ("coordinator_epoch", "partition_leader_epoch"):
        value = wide[name]
        problems.append(
            reason_when((value < -1) | (value > INT32_MAX), _fmt(f"{name} %s out of range", value))
        )

    # Only derived where both inputs are in Kafka's ranges (else the row is quarantined anyway).
    derived_last_seq = F.when(bseq < 0, F.lit(-1)).when(
        (bseq <= INT32_MAX) & (span >= 0) & (span <= INT32_MAX), increment_sequence(bseq, span)
    )
    problems.append(
        reason_when(
            lseq.isNotNull()
            & (bseq >= -1)
            & (bseq <= INT32_MAX)
            & (span <= INT32_MAX)
            & (lseq != derived_last_seq),
            _fmt(
                "last_sequence %s does not match base_sequence %s plus the offset delta (%s)",
                lseq,
                bseq,
                derived_last_seq,
            ),
        )
    )
    # A row the reader could not parse gets that reason alone, not its consequences (every
    # column null), as the other contract readers do.
    checks = F.concat_ws("; ", *problems)
    # Two differently shaped tests of `checks` on purpose: Spark's common-subexpression
    # elimination then builds `checks` once per row and every use reads it. With one shape
    # (`reason.isNotNull()` everywhere) only the test is shared and the reason's text is generated
    # a second time, which pushed the stage's generated method past the 8,000 bytes of bytecode
    # HotSpot compiles (interpreted, the hand-over to the replay ran twice as long);
    # tests/audit/test_replay_plan.py checks the method size. For the same reason `checks` is tested
    # before a reader's own error is taken: inside `coalesce(source_error, ...)` Spark did not
    # share it, and the segment reader's stage (which has `_source_error`) grew to 24 kB of
    # bytecode and validated 5M batches in 29 s instead of 3.5 s.
    reason = F.when(F.length(checks) > 0, F.coalesce(source_error, checks)).otherwise(source_error)
    quarantined = source_error.isNotNull() | (checks != "")

    out: dict[str, Column] = {}
    for column in RECORD_BATCH_COLUMNS:
        name = column.name
        if name == "last_sequence":
            value = F.coalesce(lseq, derived_last_seq)
        elif name == "magic":
            value = magic
        elif name in wide:
            value = wide[name]
        elif name == "source" and source_fallback is not None:
            value = F.when(quarantined, shown_source).otherwise(given_source)
        else:
            value = strings[name]
        # try_cast: out-of-range values are already reasons; the row is quarantined either way.
        out[name] = value.try_cast(column.data_type)
    return df.select(
        *[out[c.name].alias(c.name) for c in RECORD_BATCH_COLUMNS],
        reason.alias(QUARANTINE_REASON),
        F.when(quarantined, raw_json).alias(RAW),
        *keep,
    )
