"""ListOffsets observations: the input contract and its readers.

The rules they feed: docs/rules.md#list-offsets-regression and
docs/rules.md#acked-data-missing-from-log.

An *observation* is one answer of a partition leader to ListOffsets, recorded by an offset watcher:
when it was asked, for which partition, with which offset spec (`latest`, `earliest`,
`max_timestamp`) and isolation level, and what it answered (an offset and its leader epoch, or an
error such as OFFSET_NOT_AVAILABLE). `eos_audit.evidence_rules.list_offsets` audits them.

Formats (`fmt`):

* `parquet`, `json` (JSON lines), `csv` (with a header line): tables already in the `LIST_OFFSETS`
  contract. Integer columns may have any width (JSON and CSV values are read as text and parsed per
  row, never inferred). Columns `observed_at`, `topic`, `partition` and `offset` are required (JSON:
  checked on the first line, where `offset` may be absent because writers omit nulls); `spec` and
  `isolation` default to the `spec` / `isolation` arguments when the column is absent (JSON: when
  the value is absent or null); `error`, `leader_epoch` and `source` are optional. `observed_at`
  may be a timestamp, an ISO-8601 string (UTC when it has no zone) or epoch milliseconds.
* `get-offsets`: the text `kafka-get-offsets.sh` (GetOffsetShell) prints, typically collected by a
  loop such as ``while :; do date -u +%FT%TZ; kafka-get-offsets.sh --bootstrap-server B --time -1
  2>&1; sleep 60; done >> offsets.txt``. Recognised lines:

  - ``topic:partition:offset`` (a Kafka topic name has no ':'; the pre-3.0 tool's
    ``topic:partition:o1,o2`` list keeps its first offset; an empty offset, which the Scala tool
    printed when there was no answer, becomes error UNKNOWN_OFFSET);
  - the tool's stderr line ``Skip getting offsets for topic-partition <topic>-<partition> due to
    error: <exception>`` becomes an error row, the error named after the exception class
    (OffsetNotAvailableException → OFFSET_NOT_AVAILABLE);
  - a timestamp header that dates the lines after it, up to the next header:
    ``# observed_at: 2026-11-21T03:00:00Z`` or a line that is only an ISO-8601 timestamp (``date -u
    +%FT%TZ``, ``date -u -Iseconds``); a timestamp without a zone is UTC;
  - blank lines and other ``#`` comment lines are skipped.

  A file without any header is dated by its modification time (right for a file written by one run
  of the tool; copying files may change it, so prefer headers). In a file with headers, lines
  before the first header have no known time and are quarantined. Every other line is quarantined
  with its line number. The tool prints neither the spec, the isolation level nor the leader epoch:
  `spec` comes from the argument (the tool's ``--time -1/-2/-3`` = latest / earliest /
  max_timestamp, which are also accepted as spellings) and `isolation` from the argument, whose
  default read_uncommitted is what the tool uses (it calls Admin.listOffsets with default
  ListOffsetsOptions); `leader_epoch` is null.

  Parsing runs on the executors with Spark's text reader (`wholetext`, one row per file, so a file
  must stay below 2 GB) and column expressions: each file is split into lines once, into blocks at
  its header lines, and the blocks into lines, which keeps line numbers without a shuffle.

Nothing is dropped silently and nothing crashes on bad data: a row that cannot be an observation is
returned with `_source_error` set (all its reasons, '; '-joined) for the caller to quarantine. Bad
inputs as a whole (a missing path, a missing required column, a column of an unusable type) raise
`InputNotFoundError` / `InputSchemaError` naming them.
"""

from __future__ import annotations

import logging

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from eos_audit.errors import ConfigError
from eos_audit.schemas import LIST_OFFSETS, LIST_OFFSETS_COLUMNS  # noqa: F401 (re-exported)
from eos_audit.sources.formats import LIST_OFFSETS_FORMATS, LIST_OFFSETS_SUFFIXES
from eos_audit.sources.tabular import contract_reader as cr
from eos_audit.sources.tabular.canonical import reason_when
from eos_audit.sources.tabular.contract_reader import (  # noqa: F401 (re-exported)
    SOURCE_ERROR,
    parse_utc_time,
)
from eos_audit.sql_text import lookup

log = logging.getLogger(__name__)

SPECS = ("latest", "earliest", "max_timestamp")
ISOLATIONS = ("read_uncommitted", "read_committed")
FORMATS = LIST_OFFSETS_FORMATS
INT32_MAX = 2_147_483_647

# The published contract lives with the others in eos_audit/schemas.py (schemas/list_offsets.json).
LIST_OFFSETS_DESCRIPTIONS: dict[str, str] = {c.name: c.description for c in LIST_OFFSETS_COLUMNS}
# What a table must hold; spec and isolation fall back to the reader's arguments.
REQUIRED_COLUMNS = ["observed_at", "topic", "partition", "offset"]
_INTEGER_COLUMNS = ("partition", "offset", "leader_epoch")
_STRING_COLUMNS = ("topic", "spec", "isolation", "error", "source")
CONTRACT = cr.TableContract(
    label="ListOffsets",
    columns=tuple(LIST_OFFSETS_DESCRIPTIONS),
    required=tuple(REQUIRED_COLUMNS),
    integer_columns=_INTEGER_COLUMNS,
    string_columns=_STRING_COLUMNS,
    time_columns=("observed_at",),
    required_note=" (spec and isolation default to the reader's arguments)",
)

_SUFFIXES = LIST_OFFSETS_SUFFIXES
_FORMAT_ALIASES = {"kafka-get-offsets": "get-offsets", "text": "get-offsets", "jsonl": "json"}
_SPEC_ALIASES = {
    "latest": "latest",
    "-1": "latest",
    "earliest": "earliest",
    "-2": "earliest",
    "max_timestamp": "max_timestamp",
    "max-timestamp": "max_timestamp",
    "maxtimestamp": "max_timestamp",
    "-3": "max_timestamp",
}

# kafka-get-offsets.sh text (GetOffsetShell.java): see the module docstring.
_TIME = (
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\s*"
    r"(?:[Zz]|UTC|GMT|[+-]\d{2}(?::?\d{2})?)?"
)
HEADER = r"^\s*(?:#\s*observed[_ -]?at\s*[:=]\s*(.*?)|(" + _TIME + r"))\s*$"
DATA_LINE = r"^([A-Za-z0-9._-]+):(\d+):(-?\d+)?(?:,-?\d+)*$"
SKIP_LINE = r"^Skip getting offsets for topic-partition (\S+)-(\d+) due to error:\s*(.*)$"


# ------------------------------------------------------------------------------------------------
# Options
# ------------------------------------------------------------------------------------------------
def normalize_spec(spec: str) -> str:
    """The contract spelling of an offset spec: latest, earliest or max_timestamp.

    Args:
        spec: a contract spelling, the tool's `--time` value (-1, -2, -3) or `max-timestamp`.

    Returns:
        latest, earliest or max_timestamp.

    Raises:
        ConfigError: any other value (timestamps and tiered-storage specs are not audited).

    """
    value = _SPEC_ALIASES.get(str(spec).strip().lower())
    if value is None:
        raise ConfigError(
            f"ListOffsets spec {spec!r} is not supported; use latest (-1), earliest (-2) or "
            "max_timestamp (-3)"
        )
    return value


def _normalize_isolation(isolation: str | None, spec: str) -> str | None:
    if isolation is None or str(isolation).strip() == "":
        if spec != "earliest":
            raise ConfigError(
                f"an isolation level is required for ListOffsets spec {spec}: "
                f"{' or '.join(ISOLATIONS)}"
            )
        return None
    value = str(isolation).strip().lower()
    if value not in ISOLATIONS:
        raise ConfigError(f"ListOffsets isolation {isolation!r} is not one of {list(ISOLATIONS)}")
    return value


def detect_format(path: str) -> str:
    """Guess the ListOffsets input format of a path from its suffix or its files' suffixes.

    Args:
        path: a file or directory (a URI's format is told from its suffix only).

    Returns:
        parquet, json, csv or get-offsets.

    Raises:
        InputNotFoundError: the path does not exist or its format cannot be told.

    """
    return cr.detect_format(path, CONTRACT, _SUFFIXES, FORMATS, default="get-offsets")


def to_contract(
    df: DataFrame,
    *,
    spec: str,
    isolation: str | None,
    default_source: Column | None = None,
    null_means_default: bool = False,
) -> DataFrame:
    """Validate and cast a source DataFrame into the LIST_OFFSETS columns plus `_source_error`.

    Args:
        df: the rows as read: contract columns of any integer width or as text, optionally
            `_source_error` (a reason found while parsing).
        spec: the spec of rows whose input has no `spec` column (already normalized).
        isolation: the isolation level of rows whose input has no `isolation` column.
        default_source: where a row came from when it has no `source` value.
        null_means_default: a null spec or isolation takes the argument too (JSON lines, whose
            writers omit null fields, so an absent column cannot be told from a null value).

    Returns:
        The LIST_OFFSETS columns with contract types and `_source_error` (null for good rows).

    """
    observed_at, observed_problem = cr.parse_time(df, "observed_at")
    partition, partition_problem = cr.parse_integer(df, "partition")
    offset, offset_problem = cr.parse_integer(df, "offset")
    epoch, epoch_problem = cr.parse_integer(df, "leader_epoch")
    if "spec" in df.columns:
        raw_spec = F.lower(cr.parse_text(df, "spec"))
        if null_means_default:
            raw_spec = F.coalesce(raw_spec, F.lit(spec))
    else:
        raw_spec = F.lit(spec)
    if "isolation" in df.columns:
        iso_col = F.lower(cr.parse_text(df, "isolation"))
        if null_means_default:
            iso_col = F.coalesce(iso_col, F.lit(isolation).cast("string"))
    else:
        iso_col = F.lit(isolation).cast("string")
    error = F.upper(cr.parse_text(df, "error"))
    source = cr.parse_text(df, "source")
    if default_source is not None:
        source = F.coalesce(source, default_source)
    # Stage 1: every value parsed once (the next stage refers to these columns, so no parsing
    # expression is repeated in the plan).
    parsed = df.select(
        observed_at.alias("_observed_at"),
        observed_problem.alias("_observed_problem"),
        cr.parse_text(df, "topic").alias("_topic"),
        partition.alias("_partition"),
        partition_problem.alias("_partition_problem"),
        raw_spec.alias("_raw_spec"),
        iso_col.alias("_isolation"),
        offset.alias("_offset"),
        offset_problem.alias("_offset_problem"),
        epoch.alias("_epoch"),
        epoch_problem.alias("_epoch_problem"),
        F.when(error != "NONE", error).alias("_error"),
        source.alias("_source"),
        cr.upstream_reason(df),
    )
    parsed = parsed.withColumn("_spec", lookup(F.col("_raw_spec"), _SPEC_ALIASES))

    # Stage 2: the checks.
    topic, partition, offset, epoch = (
        F.col("_topic"), F.col("_partition"), F.col("_offset"), F.col("_epoch")
    )  # fmt: skip
    spec_col, iso_col, error = F.col("_spec"), F.col("_isolation"), F.col("_error")
    problems = [
        F.col("_observed_problem"),
        reason_when(topic.isNull(), "null topic"),
        reason_when(
            ~topic.rlike(cr.LEGAL_TOPIC),
            cr.format_reason("topic %s is not a legal Kafka topic name", topic),
        ),
        F.coalesce(F.col("_partition_problem"), reason_when(partition.isNull(), "null partition")),
        reason_when(
            (partition < 0) | (partition > INT32_MAX),
            cr.format_reason("partition %s out of range", partition),
        ),
        F.when(F.col("_raw_spec").isNull(), F.lit("null spec")).when(
            spec_col.isNull(),
            cr.format_reason(
                "spec %s is not latest, earliest or max_timestamp", F.col("_raw_spec")
            ),
        ),
        F.when(
            iso_col.isNotNull() & ~iso_col.isin(*ISOLATIONS),
            cr.format_reason("isolation %s is not read_uncommitted or read_committed", iso_col),
        ).when(
            iso_col.isNull() & spec_col.isNotNull() & (spec_col != "earliest"),
            cr.format_reason("null isolation (required for spec %s)", spec_col),
        ),
        F.coalesce(
            F.col("_offset_problem"),
            reason_when(offset.isNull() & error.isNull(), "no offset and no error"),
        ),
        reason_when(offset < 0, cr.format_reason("negative offset %s", offset)),
        F.col("_epoch_problem"),
        reason_when(
            (epoch < -1) | (epoch > INT32_MAX),
            cr.format_reason("leader_epoch %s out of range", epoch),
        ),
    ]
    values = {
        "observed_at": F.col("_observed_at"),
        "topic": topic,
        # Out-of-range values are quarantined above; null them so the casts cannot fail.
        "partition": F.when((partition >= 0) & (partition <= INT32_MAX), partition),
        "spec": spec_col,
        "isolation": iso_col,
        "offset": offset,
        # -1 is Kafka's "no leader epoch" (RecordBatch.NO_PARTITION_LEADER_EPOCH).
        "leader_epoch": F.when((epoch >= 0) & (epoch <= INT32_MAX), epoch),
        "error": error,
        "source": F.col("_source"),
    }
    # A row that failed to parse gets that reason alone, not its consequences (null columns).
    return cr.select_contract(parsed, values, problems, LIST_OFFSETS)


# ------------------------------------------------------------------------------------------------
# Readers
# ------------------------------------------------------------------------------------------------
def _read_parquet(spark: SparkSession, paths: list[str], spec: str, isolation: str | None):
    df = cr.read_parquet_table(spark, paths, CONTRACT)
    return to_contract(df, spec=spec, isolation=isolation, default_source=F.col(cr.DEFAULT_SOURCE))


def _read_json(spark: SparkSession, paths: list[str], spec: str, isolation: str | None):
    # Writers omit null fields, so only columns that are never null are required on line 1.
    df = cr.read_json_lines(spark, paths, CONTRACT, ["observed_at", "topic", "partition"])
    return to_contract(
        df,
        spec=spec,
        isolation=isolation,
        default_source=F.col(cr.DEFAULT_SOURCE),
        null_means_default=True,
    )


def _read_csv(spark: SparkSession, paths: list[str], spec: str, isolation: str | None):
    df = cr.read_csv_table(spark, paths, CONTRACT)
    return to_contract(df, spec=spec, isolation=isolation, default_source=F.col(cr.DEFAULT_SOURCE))


def _read_get_offsets(spark: SparkSession, paths: list[str], spec: str, isolation: str | None):
    files = (
        spark.read.option("recursiveFileLookup", "true")
        .text(paths, wholetext=True)
        .select(
            F.col("_metadata.file_path").alias("_file"),
            F.col("_metadata.file_modification_time").alias("_mtime"),
            F.split(F.col("value"), "\n", -1).alias("_lines"),
        )
    )
    # 0-based indices of the header lines; block j runs from header j-1 (or the file start) to
    # the line before header j (or the file end). Each step is its own projection so that no
    # expression is evaluated twice.
    files = files.withColumn(
        "_headers",
        F.filter(
            F.transform(
                "_lines", lambda line, i: F.when(line.rlike(HEADER), i).otherwise(F.lit(-1))
            ),
            lambda i: i >= 0,
        ),
    )
    blocks = F.zip_with(
        F.concat(F.array(F.lit(-1)), F.col("_headers")),
        F.concat(F.col("_headers"), F.array(F.size("_lines"))),
        lambda s, e: F.struct(
            s.alias("start"),
            F.when(s >= 0, F.element_at("_lines", s + 1)).alias("header"),
            F.slice("_lines", s + 2, e - s - 1).alias("lines"),
        ),
    )
    by_block = files.select(
        "_file",
        "_mtime",
        (F.size("_headers") > 0).alias("_has_headers"),
        F.explode(blocks).alias("_block"),
    ).select(
        "_file",
        "_mtime",
        "_has_headers",
        F.col("_block.start").alias("_start"),
        F.coalesce(
            F.nullif(F.regexp_extract("_block.header", HEADER, 1), F.lit("")),
            F.regexp_extract("_block.header", HEADER, 2),
        ).alias("_header_text"),
        F.col("_block.lines").alias("_block_lines"),
    )
    by_block = by_block.withColumn("_header_time", parse_utc_time(F.col("_header_text")))
    lines = by_block.select(
        "_file",
        "_mtime",
        "_has_headers",
        "_start",
        "_header_text",
        "_header_time",
        F.posexplode("_block_lines").alias("_k", "_raw"),
    )
    lines = lines.withColumn("_line", F.trim(F.regexp_replace("_raw", r"\r$", ""))).drop("_raw")
    line = F.col("_line")
    # Blank lines and comments are skipped (header lines start blocks, they are not in them).
    lines = lines.where((line != "") & ~line.startswith("#"))
    lines = lines.withColumn(
        "_kind", F.when(line.rlike(DATA_LINE), "data").when(line.rlike(SKIP_LINE), "skip")
    )
    is_data, is_skip = F.col("_kind") == "data", F.col("_kind") == "skip"
    error_name = cr.exception_error_name(F.regexp_extract(line, SKIP_LINE, 3))
    lines = lines.select(
        "*",
        F.when(is_data, F.regexp_extract(line, DATA_LINE, 3)).alias("_offset_text"),
        F.when(is_skip, F.coalesce(F.nullif(error_name, F.lit("")), F.lit("UNKNOWN_ERROR"))).alias(
            "_skip_error"
        ),
    )
    line_no = F.col("_start") + F.col("_k") + 2  # 1-based number of the line in its file
    offset_text = F.col("_offset_text")
    reason = F.concat_ws(
        "; ",
        F.when(
            F.col("_kind").isNull(),
            F.concat(
                F.lit("unrecognised line (expected topic:partition:offset): "),
                F.substring(line, 1, 80),
            ),
        ),
        F.when(
            (F.col("_start") >= 0) & F.col("_header_time").isNull(),
            F.format_string(
                "observation time %s of the header at line %d is not a timestamp",
                F.col("_header_text"),
                F.col("_start") + 1,
            ),
        ),
        F.when(
            (F.col("_start") < 0) & F.col("_has_headers"),
            F.lit("line precedes the file's first timestamp header: its time is unknown"),
        ),
    )
    parsed = lines.select(
        F.when(F.col("_start") >= 0, F.col("_header_time"))
        .when(~F.col("_has_headers"), F.col("_mtime"))
        .alias("observed_at"),
        F.when(is_data, F.regexp_extract(line, DATA_LINE, 1))
        .when(is_skip, F.regexp_extract(line, SKIP_LINE, 1))
        .alias("topic"),
        F.when(is_data, F.regexp_extract(line, DATA_LINE, 2))
        .when(is_skip, F.regexp_extract(line, SKIP_LINE, 2))
        .alias("partition"),
        F.nullif(offset_text, F.lit("")).alias("offset"),
        F.when(offset_text == "", F.lit("UNKNOWN_OFFSET"))
        .otherwise(F.col("_skip_error"))
        .alias("error"),
        F.concat(F.col("_file"), F.lit(":line "), line_no.cast("string")).alias("source"),
        F.nullif(reason, F.lit("")).alias(SOURCE_ERROR),
    )
    return to_contract(parsed, spec=spec, isolation=isolation)


_READERS = {
    "parquet": _read_parquet,
    "json": _read_json,
    "csv": _read_csv,
    "get-offsets": _read_get_offsets,
}


def read_list_offsets(
    spark: SparkSession,
    paths: list[str],
    *,
    fmt: str = "auto",
    spec: str = "latest",
    isolation: str | None = "read_uncommitted",
) -> DataFrame:
    """Read ListOffsets observations into the LIST_OFFSETS contract.

    Args:
        spark: the session.
        paths: files or directories (a directory is read with every file below it).
        fmt: auto (from the path), parquet, json, csv or get-offsets (kafka-get-offsets.sh text).
        spec: the offset spec of rows whose input does not say it (get-offsets text always; tables
            without a `spec` column): latest, earliest, max_timestamp, or the tool's -1/-2/-3.
        isolation: the isolation level of rows whose input does not say it: read_uncommitted
            (what kafka-get-offsets.sh uses) or read_committed; None only for earliest.

    Returns:
        The LIST_OFFSETS columns plus `_source_error`: null for an observation, else the reasons
        the row must be quarantined. Nothing is dropped.

    Raises:
        InputNotFoundError: a path does not exist, or its format cannot be told.
        InputSchemaError: a required column is missing or has an unusable type (named).
        ConfigError: fmt, spec or isolation is not a supported value.

    """
    paths = cr.input_paths(paths, CONTRACT)
    spec = normalize_spec(spec)
    isolation = _normalize_isolation(isolation, spec)
    return cr.read_by_format(
        paths,
        fmt,
        CONTRACT,
        formats=FORMATS,
        detect=detect_format,
        read=lambda group_fmt, group_paths: _READERS[group_fmt](
            spark, group_paths, spec, isolation
        ),
        aliases=_FORMAT_ALIASES,
    )
