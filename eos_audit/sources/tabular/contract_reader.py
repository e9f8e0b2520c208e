"""Reading a table that already follows a published input contract (schemas/*.json).

What the contract readers share (`eos_audit.sources.evidence.list_offsets`,
`eos_audit.sources.evidence.acks`): telling a path's format from its name, the Parquet, JSON lines
and CSV readers, and the per-row parsing of values into contract types, where a bad value becomes a
reason and never an exception.

Every format reads integers of any width: Parquet columns keep their own type (range-checked by
the caller), JSON and CSV values are read as text and parsed per row (never inferred, so one bad
value cannot turn a column into strings or fail the read). Times may be timestamps, ISO-8601 text
(UTC when it has no zone) or epoch milliseconds. Whole-input problems (a missing path, a missing
required column, a column of an unusable type) raise `InputNotFoundError` / `InputSchemaError`
naming them, with the contract's label (for example "ListOffsets input x.csv is missing ...").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eos_audit.errors import ConfigError, InputNotFoundError, InputSchemaError
from eos_audit.sources import formats
from eos_audit.sources.files import row_reference
from eos_audit.sources.files.input_files import followed_paths
from eos_audit.sources.tabular.canonical import SOURCE_ERROR, is_integer_type, reason_when

DEFAULT_SOURCE = "_default_source"
_CORRUPT = "_corrupt_record"
_UPSTREAM = "_upstream"
# A topic name Kafka accepts (Topic.java: at most 249 of [a-zA-Z0-9._-]).
LEGAL_TOPIC = r"^[A-Za-z0-9._-]{1,249}$"
# File suffixes of the tabular formats every contract reader accepts (the registry's).
TABLE_SUFFIXES = formats.TABLE_SUFFIXES
_HAS_ZONE = r"(?i)\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?\s*(?:Z|UTC|GMT|[+-]\d{2}(?::?\d{2})?)$"
# A Java exception's toString(): optional package, the class name, optionally ": message".
_EXCEPTION_CLASS = r"^(?:[\w$]+\.)*(\w+)Exception\b"


@dataclass(frozen=True)
class TableContract:
    """How one input contract is read and how its problems are worded.

    Attributes:
        label: the input's name in messages ("ListOffsets", "acks").
        columns: every contract column, in contract order (what JSON lines are read with).
        required: the columns a table must have.
        integer_columns: columns holding integers (any width, or text parsed per row).
        string_columns: columns holding text.
        time_columns: columns holding an instant (timestamp, ISO-8601 text or epoch millis).
        required_note: appended to the missing-column message (what the missing ones default to).

    """

    label: str
    columns: tuple[str, ...]
    required: tuple[str, ...]
    integer_columns: tuple[str, ...]
    string_columns: tuple[str, ...]
    time_columns: tuple[str, ...]
    required_note: str = ""


# ------------------------------------------------------------------------------------------------
# Paths and formats
# ------------------------------------------------------------------------------------------------
def is_uri(path: str) -> bool:
    """Whether a path is a URI (s3a://, abfss://, dbfs:): it cannot be checked on the driver."""
    return "://" in path or path.startswith("dbfs:")


def detect_format(
    path: str,
    contract: TableContract,
    suffixes: Mapping[str, str],
    formats: Iterable[str],
    default: str | None = None,
) -> str:
    """Guess the format of a path from its suffix or its files' suffixes.

    Args:
        path: a file or directory (a URI's format is told from its suffix only).
        contract: the input (its label names it in messages).
        suffixes: format by lower-case file suffix (".jsonl" -> "json").
        formats: every format the input accepts (listed in the message when none is told).
        default: the format of a local file or directory whose suffixes say nothing; None: raise.

    Returns:
        The format.

    Raises:
        InputNotFoundError: the path does not exist or its format cannot be told.

    """
    unknown = InputNotFoundError(
        f"cannot tell the format of {contract.label} input {path} from its name; pass fmt "
        f"(one of {list(formats)})"
    )
    suffix = Path(path.rstrip("/")).suffix.lower()
    if is_uri(path):
        if suffix in suffixes:
            return suffixes[suffix]
        raise unknown
    p = Path(path)
    if not p.exists():
        raise InputNotFoundError(f"{contract.label} input {path} does not exist")
    if p.is_file():
        found = suffixes.get(suffix, default)
    else:
        # Spark's own markers (_SUCCESS, .crc files) say nothing about the format.
        files = sorted(f for f in p.rglob("*") if f.is_file() and not f.name.startswith((".", "_")))
        if not files:
            raise InputNotFoundError(f"{contract.label} input directory {path} holds no files")
        found = next(
            (suffixes[f.suffix.lower()] for f in files if f.suffix.lower() in suffixes), default
        )
    if found is None:
        raise unknown
    return found


def input_paths(paths: list[str] | str, contract: TableContract) -> list[str]:
    """The paths as a list (one path may be given as a string); none at all is an error."""
    if isinstance(paths, str):
        paths = [paths]
    if not paths:
        raise InputNotFoundError(f"no {contract.label} input paths given")
    return list(paths)


def read_by_format(
    paths: list[str],
    fmt: str,
    contract: TableContract,
    *,
    formats: tuple[str, ...],
    detect: Callable[[str], str],
    read: Callable[[str, list[str]], DataFrame],
    aliases: Mapping[str, str] | None = None,
) -> DataFrame:
    """Read paths in one format (`fmt`) or each in its detected format, as one DataFrame.

    Args:
        paths: files or directories (checked to exist unless they are URIs); symbolic links
            in a directory are followed only inside it (`followed_paths`).
        fmt: "auto" or a format (or an alias of one).
        contract: the input (its label names it in messages).
        formats: the formats `read` knows.
        detect: the format of one path.
        read: reads (format, paths of that format) into the caller's contract columns.
        aliases: other spellings of formats ("jsonl" -> "json").

    Returns:
        The union (by name) of every format group's rows.

    Raises:
        InputNotFoundError: a path does not exist, or its format cannot be told.
        ConfigError: fmt is not a known format.

    """
    missing = [p for p in paths if not is_uri(p) and not Path(p).exists()]
    if missing:
        raise InputNotFoundError(f"{contract.label} input(s) {missing} do not exist")
    fmt = (aliases or {}).get(fmt, fmt)
    if fmt != "auto" and fmt not in formats:
        raise ConfigError(
            f"unknown {contract.label} format {fmt!r}; expected auto or one of {formats}"
        )
    groups: dict[str, list[str]] = {}
    for path in paths:
        groups.setdefault(detect(path) if fmt == "auto" else fmt, []).append(path)
    frames = []
    for group_fmt, group_paths in groups.items():
        try:
            frames.append(read(group_fmt, followed_paths(group_paths, group_fmt)))
        except AnalysisException as e:
            # A URI that does not exist is only found out by Spark.
            if "PATH_NOT_FOUND" in str(e) or "Path does not exist" in str(e):
                raise InputNotFoundError(
                    f"{contract.label} input(s) {group_paths} do not exist: {e}"
                ) from e
            raise
    result = frames[0]
    for other in frames[1:]:
        result = result.unionByName(other)
    return result


# ------------------------------------------------------------------------------------------------
# Whole-input checks
# ------------------------------------------------------------------------------------------------
def require_columns(
    columns: Iterable[str], required: Iterable[str], where: str, contract: TableContract
) -> None:
    """Raise naming them when any of `required` is not among `columns`.

    Raises:
        InputSchemaError: a required column is missing.

    """
    present = set(columns)
    missing = [c for c in required if c not in present]
    if missing:
        raise InputSchemaError(
            f"{contract.label} input {where} is missing required column(s) {missing}; the "
            f"contract requires {list(contract.required)}{contract.required_note}"
        )


def check_types(df: DataFrame, where: str, contract: TableContract) -> None:
    """Raise naming the column when a typed input (Parquet) has a column of an unusable type.

    Raises:
        InputSchemaError: an integer column holds neither integers nor text, a text column is not
            a string, or a time column is neither a timestamp, text nor integers.

    """
    for field in df.schema.fields:
        name, data_type = field.name, field.dataType
        prefix = f"{contract.label} input {where}: column {name!r} has type "
        if name in contract.integer_columns and not (
            is_integer_type(data_type) or isinstance(data_type, T.StringType)
        ):
            raise InputSchemaError(
                f"{prefix}{data_type.simpleString()}, expected an integer type (any width)"
            )
        if name in contract.string_columns and not isinstance(data_type, T.StringType):
            raise InputSchemaError(f"{prefix}{data_type.simpleString()}, expected string")
        if name in contract.time_columns and not (
            isinstance(data_type, T.TimestampType | T.TimestampNTZType | T.StringType)
            or is_integer_type(data_type)
        ):
            raise InputSchemaError(
                f"{prefix}{data_type.simpleString()}, expected a timestamp, an ISO-8601 string or "
                "epoch milliseconds"
            )


# ------------------------------------------------------------------------------------------------
# Values, parsed per row
# ------------------------------------------------------------------------------------------------
def format_reason(template: str, *cols: Column) -> Column:
    """A reason from a printf template; nulls print as 'null'."""
    # One literal for every argument, and ifnull (coalesce of two, without a list to build):
    # fewer calls into Spark per argument on a classic session (eos_audit.sql_text).
    null = F.lit("null")
    return F.format_string(template, *[F.ifnull(c.cast("string"), null) for c in cols])


def parse_utc_time(text: Column) -> Column:
    """A timestamp from ISO-8601 text (UTC when it has no zone) or epoch milliseconds; else null."""
    t = F.trim(text)
    return (
        F.when(t.rlike(r"^\d{1,15}$"), F.timestamp_millis(t.try_cast("long")))
        .when(t.rlike(_HAS_ZONE), t.try_cast("timestamp"))
        .otherwise(F.concat(t, F.lit("Z")).try_cast("timestamp"))
    )


def parse_time(df: DataFrame, name: str) -> tuple[Column, Column]:
    """(the instant, problem) of a time column whatever its type; a missing column is a problem."""
    if name not in df.columns:
        return F.lit(None).cast("timestamp"), F.lit(f"missing {name}")
    raw = F.col(name)
    data_type = df.schema[name].dataType
    if isinstance(data_type, T.TimestampType):
        parsed = raw
    elif isinstance(data_type, T.TimestampNTZType):  # a wall-clock time: read it as UTC
        parsed = F.concat(raw.cast("string"), F.lit("Z")).try_cast("timestamp")
    elif is_integer_type(data_type):
        parsed = F.timestamp_millis(raw.try_cast("long"))
    else:
        parsed = parse_utc_time(raw.cast("string"))
    problem = F.when(raw.isNull(), F.lit(f"null {name}")).when(
        parsed.isNull(), format_reason(f"{name} %s is not a timestamp", raw)
    )
    return parsed, problem


def parse_integer(df: DataFrame, name: str) -> tuple[Column, Column]:
    """(value as long, problem) for an integer column of any width, or text; absent: null."""
    if name not in df.columns:
        return F.lit(None).cast("long"), F.lit(None).cast("string")
    raw = F.col(name)
    if isinstance(df.schema[name].dataType, T.StringType):
        text = F.trim(raw)
        text = F.when(text != "", text)
        value = text.try_cast("long")
        problem = reason_when(
            text.isNotNull() & value.isNull(), format_reason(f"{name} %s is not an integer", raw)
        )
    else:
        value = raw.try_cast("long")
        problem = reason_when(raw.isNotNull() & value.isNull(), f"{name} exceeds the long range")
    return value, problem


def parse_text(df: DataFrame, name: str) -> Column:
    """A text column trimmed, blank as null; absent: null."""
    if name not in df.columns:
        return F.lit(None).cast("string")
    value = F.trim(F.col(name).cast("string"))
    return F.when(value != "", value)


def exception_error_name(text: Column) -> Column:
    """Kafka's upper-snake name of a Java exception class, "" when the text names none.

    `org.apache.kafka.common.errors.UnknownProducerIdException: ...` -> UNKNOWN_PRODUCER_ID. The
    name is the class name's words; where Kafka's `Errors` enum spells it otherwise (the exception
    of OUT_OF_ORDER_SEQUENCE_NUMBER is OutOfOrderSequenceException) the caller maps it.
    """
    exception = F.regexp_extract(text, _EXCEPTION_CLASS, 1)
    return F.upper(F.regexp_replace(exception, "([a-z0-9])([A-Z])", "$1_$2"))


# ------------------------------------------------------------------------------------------------
# Contract rows
# ------------------------------------------------------------------------------------------------
def upstream_reason(df: DataFrame) -> Column:
    """The reason a reader already found for the row (a malformed line), else null."""
    if SOURCE_ERROR in df.columns:
        return F.col(SOURCE_ERROR).cast("string").alias(_UPSTREAM)
    return F.lit(None).cast("string").alias(_UPSTREAM)


def select_contract(
    parsed: DataFrame,
    values: Mapping[str, Column],
    problems: list[Column],
    schema: T.StructType,
) -> DataFrame:
    """The contract columns in order and types, plus `_source_error` (null for good rows).

    Args:
        parsed: rows with the parsed values and `_upstream` (`upstream_reason`).
        values: the value of every contract column (out-of-range values already nulled or
            try-cast: the casts here must not fail).
        problems: reason columns, null when the check passes.
        schema: the contract.

    Returns:
        The contract columns plus `_source_error`: all reasons '; '-joined, or the upstream reason
        alone (a row that failed to parse gets that reason, not its consequences).

    """
    reason = F.coalesce(F.col(_UPSTREAM), F.concat_ws("; ", *problems))
    return parsed.select(
        *[values[f.name].cast(f.dataType).alias(f.name) for f in schema.fields],
        F.nullif(reason, F.lit("")).alias(SOURCE_ERROR),
    )


# ------------------------------------------------------------------------------------------------
# Readers: rows as read plus `_default_source` (and `_source_error` for malformed lines)
# ------------------------------------------------------------------------------------------------
def file_source(with_row_index: bool = False) -> Column:
    """The file a row was read from, with its row number when the format has one (Parquet)."""
    path = F.col("_metadata.file_path")
    if with_row_index:
        return row_reference.source_text(path, F.col("_metadata.row_index"))
    return path


def string_schema(names: Iterable[str]) -> T.StructType:
    """Every column as nullable text: JSON and CSV values are parsed per row, never inferred."""
    return T.StructType([T.StructField(n, T.StringType(), True) for n in names])


PARQUET_MAGIC = b"PAR1"
MALFORMED_LINE = "_malformed_line"
_READ_ERROR = "_read_error"


def check_parquet_files(paths: list[str], contract: TableContract) -> None:
    """Refuse local files that cannot be Parquet (empty, or without the PAR1 magic at both ends).

    Spark finds them out only inside a task, with hundreds of lines of JVM stack (issue 12,
    case 5); eight bytes per file on the driver name the file instead.

    Raises:
        InputSchemaError: naming the first file that is not Parquet.
    """
    for path in paths:
        if is_uri(path):
            continue
        root = Path(path)
        files = (
            [root]
            if root.is_file()
            else sorted(f for f in root.rglob("*") if f.is_file() and not _is_marker(f, root))
        )
        for file in files:
            size = file.stat().st_size
            if size < 2 * len(PARQUET_MAGIC) + 4:
                raise InputSchemaError(
                    f"{contract.label} input {file} is not a Parquet file: {size} bytes, too "
                    "short for one; remove it or pass the right file"
                )
            with open(file, "rb") as fh:
                head = fh.read(len(PARQUET_MAGIC))
                fh.seek(-len(PARQUET_MAGIC), 2)
                tail = fh.read(len(PARQUET_MAGIC))
            if head != PARQUET_MAGIC or tail != PARQUET_MAGIC:
                raise InputSchemaError(
                    f"{contract.label} input {file} is not a Parquet file (no PAR1 marker at its "
                    "start and end); remove it or pass the right file and --batches-format"
                )


def _is_marker(file: Path, root: Path) -> bool:
    """Spark's markers and hidden files (_SUCCESS, .crc, _delta_log/...), which Spark skips too."""
    return any(part.startswith(("_", ".")) for part in file.relative_to(root).parts)


def read_parquet_table(
    spark: SparkSession, paths: list[str], contract: TableContract, *, by_reference: bool = False
) -> DataFrame:
    """Parquet files with the contract's columns in their own types.

    Args:
        spark: the session.
        paths: files or directories.
        contract: the input.
        by_reference: locate rows by (file id, row) rather than by a text (`row_reference`),
            unless two files share an id or the files have columns of those names.

    Returns:
        The rows as read plus `_default_source`, `<file>:row <n>`; or, located by reference,
        plus `row_reference.SOURCE_PATH`, `SOURCE_FILE` and `SOURCE_ROW`.

    Raises:
        InputSchemaError: a file is not Parquet, a required column is missing or a column has
            an unusable type.

    """
    check_parquet_files(paths, contract)
    df = spark.read.parquet(*paths)
    where = ", ".join(paths)
    require_columns(df.columns, contract.required, where, contract)
    check_types(df, where, contract)
    # A file with columns of the same names (an export's own) keeps them, located by text.
    clash = set(df.columns) & set(row_reference.COLUMNS)
    if by_reference and not clash and row_reference.file_ids(df.inputFiles()) is not None:
        path = F.col("_metadata.file_path")
        return df.select(
            "*",
            path.alias(row_reference.SOURCE_PATH),
            row_reference.file_id(path).alias(row_reference.SOURCE_FILE),
            F.col("_metadata.row_index").alias(row_reference.SOURCE_ROW),
        )
    return df.withColumn(DEFAULT_SOURCE, file_source(with_row_index=True))


def _json_options() -> dict[str, str]:
    return {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT}


def read_json_lines(
    spark: SparkSession,
    paths: list[str],
    contract: TableContract,
    first_line: Iterable[str],
    *,
    line_numbers: bool = False,
) -> DataFrame:
    """JSON lines read as text columns; a malformed line keeps its row with a reason.

    A malformed line keeps its text in `_malformed_line`. With `line_numbers`, local files are
    read as numbered lines (eos_audit.sources.files.text_lines) and every row's default source is
    `<file>:line <n>` (issue 12, case 4); otherwise, and for URIs, Spark's JSON reader splits
    the files and the default source is the file.

    Args:
        spark: the session.
        paths: files or directories.
        contract: the input.
        first_line: the columns the first well-formed line must hold. Writers omit null fields,
            so only columns that are never null can be required (checked on one line only: the
            other lines are checked per row). A malformed line is no evidence of the columns: it
            is quarantined like any other malformed line.
        line_numbers: number the lines (each file read whole by one task; local files only).

    Raises:
        InputSchemaError: the first well-formed line lacks one of `first_line`.

    """
    schema = string_schema([*contract.columns, _CORRUPT])
    if not line_numbers or any(is_uri(p) for p in paths):
        df = spark.read.schema(schema).options(**_json_options()).json(paths)
        df = df.select("*", file_source().alias(DEFAULT_SOURCE), F.lit(None).alias(_READ_ERROR))
        keys = spark.read.text(paths).select(F.json_object_keys("value").alias("k"))
    else:
        from eos_audit.sources.files import text_lines as tl

        lines = tl.read_text_lines(spark, paths).where(
            F.col(tl.ERROR).isNotNull() | (F.trim(F.col(tl.VALUE)) != "")
        )
        df = lines.select(
            F.from_json(F.col(tl.VALUE), schema, _json_options()).alias("_json"),
            F.concat(F.col(tl.PATH), F.lit(":line "), F.col(tl.LINE).cast("string")).alias(
                DEFAULT_SOURCE
            ),
            F.col(tl.ERROR).alias(_READ_ERROR),
        ).select("_json.*", DEFAULT_SOURCE, _READ_ERROR)
        keys = lines.select(F.json_object_keys(tl.VALUE).alias("k"))
    first = keys.where(F.col("k").isNotNull()).limit(1).head()
    if first is not None:
        require_columns(set(first[0]), first_line, paths[0], contract)
    malformed = F.when(F.col(_CORRUPT).isNotNull(), F.lit("malformed JSON line"))
    return (
        df.withColumn(SOURCE_ERROR, F.coalesce(F.col(_READ_ERROR).cast("string"), malformed))
        .withColumn(MALFORMED_LINE, F.col(_CORRUPT))
        .drop(_CORRUPT, _READ_ERROR)
    )


def read_csv_table(spark: SparkSession, paths: list[str], contract: TableContract) -> DataFrame:
    """CSV files with a header line, read as text columns; a malformed line keeps a reason.

    Raises:
        InputSchemaError: the header lacks a required column.

    """
    header = spark.read.option("header", "true").csv(paths).columns
    require_columns(header, contract.required, paths[0], contract)
    # Every file's header must name the same columns in the same order (enforceSchema=false makes
    # Spark check it) so that no file is read under another file's header.
    df = (
        spark.read.schema(string_schema([*header, _CORRUPT]))
        .option("header", "true")
        .option("enforceSchema", "false")
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", _CORRUPT)
        .csv(paths)
    )
    return (
        df.withColumn(
            SOURCE_ERROR, F.when(F.col(_CORRUPT).isNotNull(), F.lit("malformed CSV line"))
        )
        .withColumn(DEFAULT_SOURCE, file_source())
        .withColumn(MALFORMED_LINE, F.col(_CORRUPT))
        .drop(_CORRUPT)
    )
