"""The wire in Spark: the replay rows' schemas as Spark types, packed and sorted as Spark columns.

The layout itself is `replay.wire`'s (`BIT_FIELDS`, `REPLAY_ARROW`, `WIRE_ARROW`), which the
kernel reads without PySpark; this module builds the same layout's Spark side from it: the engine
projects its rows to `REPLAY_SCHEMA`, packs them (`wire_rows`, what `wire.pack` does in NumPy) and
sorts them by `REPLAY_ORDER` read from the packed words (`sort_key`). tests/replay/test_wire.py
checks both sides agree.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from eos_audit.replay.wire import (
    BIT_FIELDS,
    DETAIL,
    DETAIL_TEXTS,
    HEADER,
    LAST_TEXT,
    NULL_TEXT,
    NULLABLE,
    PLAIN_FIELDS,
    REPLAY_ARROW,
    REPLAY_ORDER,
    WIRE_ARROW,
    WORDS,
    ControlType,
    RowKind,
    null_flag,
    words_of,
)
from eos_audit.sql_text import cast, ident

# What the engine builds the replay from takes these names from here, the Spark side, along with
# the Spark columns of the wire.
__all__ = [
    "REPLAY_ORDER", "REPLAY_SCHEMA", "WIRE_SCHEMA", "ControlType", "RowKind", "field_column",
    "flag_column", "sort_key", "wire_rows",
]  # fmt: skip

# The replay rows (`wire.REPLAY_ARROW`) and the wire (`wire.WIRE_ARROW`) as Spark types.
REPLAY_SCHEMA = from_arrow_schema(REPLAY_ARROW)
WIRE_SCHEMA = from_arrow_schema(WIRE_ARROW)


# -- reading, in Spark --
def field_column(word: Column, name: str) -> Column:
    """The field `name` of `BIT_FIELDS` in a column of wire words (what `field_value` reads)."""
    left, right, mask = BIT_FIELDS[name].reader
    value = F.shiftleft(word, left) if left else word
    value = F.shiftright(value, right) if right else value
    return value.bitwiseAND(F.lit(mask)) if mask != -1 else value


def flag_column(word: Column, name: str) -> Column:
    """The one-bit field `name` in a column of wire words: 0 when clear, non-zero when set."""
    return word.bitwiseAND(F.lit(BIT_FIELDS[name].bit))


# -- packing, in Spark --
def _bits_column(value: Column, name: str) -> Column:
    field = BIT_FIELDS[name]
    if not field.at_top:  # at the top, the bits above the field's are shifted out
        value = value.bitwiseAND(F.lit(field.mask))
    return F.shiftleft(value, field.shift) if field.shift else value


def wire_rows(rows_df: DataFrame) -> DataFrame:
    """Replay rows in the wire layout (`WIRE_SCHEMA`): flags packed, int32 values paired.

    Args:
        rows_df: rows in `REPLAY_SCHEMA`.
    """

    # SQL text: one call into Spark per column instead of a few per function (sql_text).
    def long_or_zero(name: str) -> Column:
        return F.expr(f"coalesce(CAST({ident(name)} AS bigint), 0)")

    def flag(condition: str, name: str) -> Column:
        bit = BIT_FIELDS[name].bit
        return F.expr(f"CAST(CASE WHEN {condition} THEN {bit} ELSE 0 END AS bigint)")

    crc = F.expr("CASE WHEN crc_valid THEN 2 WHEN NOT crc_valid THEN 1 ELSE 0 END")
    bits = {
        "kind": _bits_column(F.col("kind").cast("long"), "kind"),
        "crc_valid": _bits_column(crc.cast("long"), "crc_valid"),
        "source_file": _bits_column(long_or_zero("source_file"), "source_file"),
        **{name: _bits_column(long_or_zero(name), name) for name in NULLABLE},
        "is_transactional": flag("coalesce(is_transactional, false)", "is_transactional"),
        "is_control": flag("coalesce(is_control, false)", "is_control"),
        "quarantined": flag("quarantine_reason IS NOT NULL", "quarantined"),
        "has_source_file": flag("source_file IS NOT NULL", "has_source_file"),
        **{null_flag(name): flag(f"{ident(name)} IS NULL", null_flag(name)) for name in NULLABLE},
    }  # fmt: skip
    words = words_of(bits, Column.bitwiseOR)
    plain = [cast(F.col(name), WIRE_SCHEMA[name].dataType) for name in PLAIN_FIELDS]
    texts = [F.col(name) for name in DETAIL_TEXTS]
    *prefixed, last = texts
    null_text = F.lit(NULL_TEXT)
    written = [  # detail_of
        F.coalesce(F.concat(F.length(text).cast("string"), F.lit(":"), text), null_text)
        for text in prefixed
    ] + [F.coalesce(F.concat(F.lit(LAST_TEXT), last), null_text)]
    any_text = texts[0].isNotNull()
    for text in texts[1:]:
        any_text = any_text | text.isNotNull()
    detail = F.when(any_text, F.concat(*written))
    return rows_df.select(
        *[words[word].alias(word) for word in WORDS], *plain, detail.alias(DETAIL)
    )


def sort_key(name: str) -> Column:
    """A field of `REPLAY_ORDER` read from the wire layout (nulls stay null: they sort first).

    Only the first keys are read for most rows; the others break ties of identical offsets.
    """
    header = F.col(HEADER)
    if name in PLAIN_FIELDS or name == DETAIL:
        return F.col(name)
    if name == "order_kind":
        # Computed where the sort compares rather than shuffled as a column of its own
        # (measured at 10M batches: the transfer line 8.66 s with the column, 8.50 s without).
        return F.least(field_column(header, "kind"), F.lit(int(RowKind.LEADER_EPOCH_ENTRY)))
    if name in ("is_control", "is_transactional"):
        return flag_column(header, name)
    if name == "source_file":
        return F.when(flag_column(header, "has_source_file") != 0, field_column(header, name))
    if name in ("kind", "crc_valid"):  # never null (crc_valid: 0 not checked, 1 failed, 2 valid)
        return field_column(header, name)
    value = field_column(F.col(BIT_FIELDS[name].word), name)
    return F.when(flag_column(header, null_flag(name)) == 0, value)
