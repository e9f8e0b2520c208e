"""Spark SQL text for projections built in one call: quoted names, types, casts.

On a classic session every Column built in Python is a few Py4J round trips (a function looked
up, a type parsed, a proxy released later); a projection of dozens of casts and typed nulls
written as SQL text is one. The plans are the same: Spark parses the text into the same
expressions (`CAST(x AS INT)` is `Column.cast("int")`).
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T


def ident(name: str) -> str:
    """`name` as a quoted SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def sql_type(data_type: T.DataType) -> str:
    """`data_type` in Spark SQL's type syntax, with struct field names quoted.

    Args:
        data_type: any Spark data type.

    Returns:
        The type as CAST accepts it, e.g. ``ARRAY<STRUCT<`a`: int>>``.
    """
    if isinstance(data_type, T.StructType):
        fields = ", ".join(f"{ident(f.name)}: {sql_type(f.dataType)}" for f in data_type)
        return f"STRUCT<{fields}>"
    if isinstance(data_type, T.ArrayType):
        return f"ARRAY<{sql_type(data_type.elementType)}>"
    if isinstance(data_type, T.MapType):
        return f"MAP<{sql_type(data_type.keyType)}, {sql_type(data_type.valueType)}>"
    # Named exactly: a bare TIMESTAMP means TIMESTAMP_NTZ where spark.sql.timestampType says so.
    if isinstance(data_type, T.TimestampType):
        return "TIMESTAMP_LTZ"
    if isinstance(data_type, T.TimestampNTZType):
        return "TIMESTAMP_NTZ"
    return data_type.simpleString()


def cast(column: Column, data_type: T.DataType) -> Column:
    """`column.cast(data_type)`, with an atomic type given as text.

    The same cast: `Column.cast` with a DataType serialises it to JSON, asks the session to parse
    it and looks up the active session, five round trips more than the type's name. Complex types
    stay DataTypes, since their text would not keep the nullability of their fields.

    Args:
        column: what to cast.
        data_type: the type to cast to.

    Returns:
        The cast column.
    """
    if isinstance(data_type, (T.StructType, T.ArrayType, T.MapType)):
        return column.cast(data_type)
    return column.cast(sql_type(data_type))


def cast_as(field: T.StructField, present: bool = True) -> str:
    """`field`'s column cast to its type (a typed NULL when not `present`), named after it.

    Args:
        field: the output column's name and type.
        present: whether the input has a column of that name to cast.

    Returns:
        A select expression, e.g. ``CAST(`a` AS int) AS `a` ``.
    """
    value = ident(field.name) if present else "NULL"
    return f"{cast_text(value, field.dataType)} AS {ident(field.name)}"


def cast_text(value: str, data_type: T.DataType) -> str:
    """The SQL expression `value` cast to `data_type`, e.g. ``CAST(NULL AS bigint)``."""
    return f"CAST({value} AS {sql_type(data_type)})"


def string_literal(value: str) -> str:
    """`value` as a Spark SQL string literal, quote and backslash escaped.

    Spark's parser reads backslash escapes in string literals (spark.sql.parser.
    escapedStringLiterals is false by default): backslashes and quotes are escaped.
    """
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def literal(value: object) -> str:
    """A Python value as a Spark SQL literal: NULL, an integer, a string, or an array of them.

    An empty list is an empty array of strings (`array()` alone would be an array of nulls).
    """
    if value is None:
        return "NULL"
    if isinstance(value, (list, tuple)):
        if not value:
            return "CAST(array() AS ARRAY<STRING>)"
        return f"array({', '.join(literal(v) for v in value)})"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return string_literal(str(value))


def lookup(key: Column, table: dict) -> Column:
    """`table[key]`, null for a key not in it, as one SQL map literal.

    One call into Spark however large the table (`F.create_map` of literals is two per entry).

    Args:
        key: the column to look up.
        table: keys and values as `literal` writes them; an empty table gives null.

    Returns:
        The value for each row's key, or null.
    """
    if not table:
        return F.lit(None)
    entries = ", ".join(f"{literal(k)}, {literal(v)}" for k, v in table.items())
    return F.try_element_at(F.expr(f"map({entries})"), key)
