"""Integers from text, in Arrow, without ever failing: what the text readers share.

A number in a text input (a `kafka-dump-log.sh` line, a checkpoint line) may be any length; Arrow's
cast raises on one that does not fit its type, which would fail a whole Spark task on one bad
line. `parse_int` gives null for those instead and says which they were, so the caller reports the
line (issue 12: no input crashes a reader).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

_DIGITS = r"^-?[0-9]{1,19}$"  # ASCII digits only; 19 digits fit an exact decimal(20, 0)
_DECIMAL = pa.decimal128(20, 0)
_RANGE = {
    pa.int8(): (-(1 << 7), (1 << 7) - 1),
    pa.int16(): (-(1 << 15), (1 << 15) - 1),
    pa.int32(): (-(1 << 31), (1 << 31) - 1),
    pa.int64(): (-(1 << 63), (1 << 63) - 1),
}


def parse_int(strings: pa.Array, typ: pa.DataType | None = None) -> tuple[pa.Array, pa.Array]:
    """Text to integers of `typ` (default int64), never raising.

    Args:
        strings: text; empty, null and `null` are absent values.
        typ: a signed integer type.

    Returns:
        (values, out_of_range): the integers (null where absent or not a number in range) and a
        boolean mask of values that are numbers but do not fit `typ`.
    """
    typ = typ or pa.int64()
    low, high = _RANGE[typ]
    strings = pc.cast(strings, pa.string())
    digits = pc.fill_null(pc.match_substring_regex(strings, _DIGITS), False)
    number = pc.if_else(digits, strings, pa.scalar(None, pa.string()))
    exact = pc.cast(number, _DECIMAL)
    fits = pc.and_(
        pc.greater_equal(exact, pa.scalar(low, _DECIMAL)),
        pc.less_equal(exact, pa.scalar(high, _DECIMAL)),
    )
    fits = pc.fill_null(fits, False)
    values = pc.cast(pc.if_else(fits, exact, pa.scalar(None, _DECIMAL)), typ)
    # A long run of digits (20 or more) is a number too, just not one that fits.
    numeric = pc.fill_null(pc.match_substring_regex(strings, r"^-?[0-9]+$"), False)
    return values, pc.and_(numeric, pc.invert(fits))
