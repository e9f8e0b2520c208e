"""`kafka-dump-log.sh` text output → the canonical one-row-per-record-batch DataFrame.

Every version's format of docs/formats.md#dump-log is accepted: batch lines of 0.11 to 4.x (with or
without `count:`, `isControl:`, `deleteHorizonMs:`, `isvalid:` in the middle or at the end,
upper- or lower-case codec), magic 0/1 `offset:` lines, record lines (`| ` prefix, `keysize` or
`keySize`, the 2.8 superset line, `--skip-record-metadata`), and the 0.11–2.1 deep-iteration format
that prints only per-record lines (records are grouped into batches by their shared `position:`).
A control record's `endTxnMarker: COMMIT|ABORT coordinatorEpoch: N` sets the control fields of the
batch it belongs to (the first record of a control batch is the marker,
docs/formats.md#control-batches).

Parsing runs on the executors in the `kafka_dump_log` format (`file_source`), each file whole in
one task (small files share one: `file_source.pack_files`). Each file is split into lines once;
every line is classified and its fields extracted with pyarrow.compute regular expressions over
the whole array of lines, and the relations between lines
(section of a `Dumping` line, batch of a record line, records of one position) are computed with
numpy running maxima and cumulative sums. No loop runs over lines in Python.

Lines that match no known format (an excerpt's `...`, a pasted shell prompt, a continuation line of
a payload that contained a newline) become `_source_error` rows with "<file>:line <n>"; the line's
text is never copied (it may be record data). Payloads (`key:`, `payload:` tails of
`--print-data-log`) are matched and discarded: no output column and no log line ever holds them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T

from eos_audit.errors import InputNotFoundError
from eos_audit.sources.files import filesystems as fsys
from eos_audit.sources.files.arrow_text import parse_int
from eos_audit.sources.files.file_source import FileFormat, load_files
from eos_audit.sources.files.input_files import followed_paths
from eos_audit.sources.kafka.segments import (
    ARROW_SCHEMA,
    SOURCE_ERROR_COL,
    error_batch,
    source_schema,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

FORMAT_NAME = "kafka_dump_log"

_TS = r"(?P<ts_type>CreateTime|LogAppendTime|NoTimestampType): (?P<ts>-?\d+)"
_TS_ANON = r"(?:CreateTime|LogAppendTime|NoTimestampType): -?\d+"
_BOOL = r"(?:true|false)"
_HEADERS = r"headerKeys: \[[^\]]*\]"
# What the tool prints after the metadata of a control record (DLS: endTxnMarker for COMMIT/ABORT,
# JSON for the KRaft types, `controlType: NAME(id)` otherwise).
_CONTROL = (
    r"(?P<ctl> endTxnMarker: (?:COMMIT|ABORT) coordinatorEpoch: -?\d+"
    r"| controlType: \w+\(-?\d+\)"
    r"| (?:LeaderChange|SnapshotHeader|SnapshotFooter|KRaftVersion|KRaftVoters):? .*)?"
)
# `--print-data-log` tails; matched so the line is recognised, never extracted.
_DATA_TAIL = r"(?: key: .*| payload: .*)?"

# Batch line, magic 2, every version (docs/formats.md#dump-log).
BATCH_V2 = (
    r"^baseOffset: (?P<base>-?\d+) lastOffset: (?P<last>-?\d+)(?: count: (?P<count>\d+|null))?"
    r" baseSequence: (?P<bseq>-?\d+) lastSequence: (?P<lseq>-?\d+)"
    r" producerId: (?P<pid>-?\d+) producerEpoch: (?P<pepoch>-?\d+)"
    r" partitionLeaderEpoch: (?P<ple>-?\d+) isTransactional: (?P<txn>" + _BOOL + r")"
    r"(?: isControl: (?P<ctl>" + _BOOL + r"))?"
    r"(?: deleteHorizonMs: OptionalLong(?:\.empty|\[-?\d+\]))?"
    r" position: (?P<pos>\d+) " + _TS + r"(?: isvalid: (?P<valid1>" + _BOOL + r"))?"
    r" size: (?P<size>\d+) magic: (?P<magic>\d+) compresscodec: (?P<codec>\w+)"
    r" crc: (?P<crc>-?\d+)(?: isvalid: (?P<valid2>" + _BOOL + r"))?\s*$"
)
# Batch line, magic 0/1 (the last offset only).
BATCH_LEGACY = (
    r"^offset: (?P<off>-?\d+) position: (?P<pos>\d+) "
    + _TS
    + r"(?: isvalid: (?P<valid1>"
    + _BOOL
    + r"))?"
    r" size: (?P<size>\d+) magic: (?P<magic>[01]) compresscodec: (?P<codec>\w+)"
    r" crc: (?P<crc>-?\d+)(?: isvalid: (?P<valid2>" + _BOOL + r"))?\s*$"
)
# 0.11–2.1 with --deep-iteration: one line per record, no batch line.
OLD_RECORD = (
    r"^offset: (?P<off>-?\d+) position: (?P<pos>\d+) "
    + _TS
    + r" isvalid: (?P<valid>"
    + _BOOL
    + r") keysize: -?\d+ valuesize: -?\d+"
    r" magic: (?P<magic>\d+) compresscodec: \w+"
    r"(?: producerId: (?P<pid>-?\d+) producerEpoch: (?P<pepoch>-?\d+)"
    r" sequence: (?P<seq>-?\d+) isTransactional: (?P<txn>" + _BOOL + r") " + _HEADERS + r")?"
    r"(?: crc: (?:\d+|null))?" + _CONTROL + _DATA_TAIL + r"\s*$"
)
# Record lines (`| ` prefix): 2.2–4.x, with an optional legacy `isValid … crc: N}` tail.
RECORD = (
    r"^\| offset: (?P<off>-?\d+) " + _TS_ANON + r" key[sS]ize: -?\d+ value[sS]ize: -?\d+"
    r"(?: sequence: -?\d+ "
    + _HEADERS
    + r")?(?: isValid: "
    + _BOOL
    + r" crc: (?:\d+|null)\}?)?"
    + _CONTROL
    + _DATA_TAIL
    + r"\s*$"
)
# The 2.8 superset record line (KAFKA-6181, reverted in 3.0).
RECORD_28 = (
    r"^\| offset: (?P<off>-?\d+) isValid: " + _BOOL + r" crc: (?:\d+|null)"
    r" key[sS]ize: -?\d+ value[sS]ize: -?\d+ "
    + _TS_ANON
    + r" baseOffset: -?\d+ lastOffset: -?\d+ baseSequence: -?\d+ lastSequence: -?\d+"
    r" producerEpoch: -?\d+ partitionLeaderEpoch: -?\d+ batchSize: \d+ magic: \d+"
    r" compressType: \w+ position: \d+ sequence: -?\d+ "
    + _HEADERS
    + _CONTROL
    + _DATA_TAIL
    + r"\s*$"
)
# --skip-record-metadata: only the data.
RECORD_DATA_ONLY = r"^\| (?:key|payload): "
CONTROL_DETAIL = (
    r"^ (?:endTxnMarker: (?P<marker>COMMIT|ABORT) coordinatorEpoch: (?P<cepoch>-?\d+)"
    r"|controlType: \w+\((?P<cid>-?\d+)\)"
    r"|(?P<kraft>LeaderChange|SnapshotHeader|SnapshotFooter|KRaftVersion|KRaftVoters).*)$"
)
_KRAFT_TYPE_IDS = {
    "LeaderChange": 2,
    "SnapshotHeader": 3,
    "SnapshotFooter": 4,
    "KRaftVersion": 5,
    "KRaftVoters": 6,
}
DUMPING = r"^Dumping (?P<path>.+?)\s*$"
START = r"^(?:Log starting|Starting) offset: -?\d+\s*$"
INVALID_BYTES = r"^Found (?P<n>\d+) invalid bytes at the end of (?P<file>.+?)\s*$"
# The tool's "Non-consecutive offsets in <file>" block (stderr, often pasted with 2>&1). Offsets
# of a healthy log are not consecutive across batches of compacted topics and around transaction
# markers, and the audit checks continuity itself from the batches; so the block is ignored.
NON_CONSECUTIVE = r"^(?:Non-consecutive offsets in .*|\s+-?\d+ is followed by -?\d+)\s*$"
BLANK = r"^\s*$"
# The reason of a line that is no part of the tool's output (a shell prompt, a `...` where an
# excerpt was cut). Such a line is accounted as a text line, not as a batch: its quarantine row's
# input is `dump_log_line` (eos_audit.audit.output_records) and its bytes count against the file
# (eos_audit.audit.accounting), so one pasted `...` is not one batch in nine.
UNKNOWN_LINE = "line matches no known kafka-dump-log.sh format"
LINE_INPUT = "dump_log_line"
# How a batch line starts, magic 2 or older: an unknown line that starts so is a batch line cut or
# damaged (a copy cut mid-line), and stands for a batch: quarantined as one.
DAMAGED_BATCH_LINE = r"^(?:baseOffset: -?\d|offset: -?\d+ position: )"
_PARTITION_FROM_PATH = r"(?:^|[/\\])(?P<topic>[A-Za-z0-9._-]+)-(?P<partition>\d+)[/\\][^/\\]+$"


# ------------------------------------------------------------------------------------------------
# Vectorised helpers
# ------------------------------------------------------------------------------------------------
def _take(arr: pa.Array, idx: np.ndarray) -> pa.Array:
    return arr.take(pa.array(idx, pa.int64()))


def _int(strings: pa.Array, typ: pa.DataType | None = None) -> pa.Array:
    """Strings of digits to integers, never raising.

    Empty (an optional group absent), 'null' and numbers that do not fit the type become null;
    `_Numbers` also reports the latter.
    """
    return parse_int(strings, typ)[0]


# The tool's names of the numeric groups, for the message of a number out of its field's range.
_FIELD_NAMES = {
    "base": "baseOffset",
    "last": "lastOffset",
    "count": "count",
    "bseq": "baseSequence",
    "lseq": "lastSequence",
    "pid": "producerId",
    "pepoch": "producerEpoch",
    "ple": "partitionLeaderEpoch",
    "magic": "magic",
    "ts": "timestamp",
    "off": "offset",
    "pos": "position",
    "seq": "sequence",
    "cepoch": "coordinatorEpoch",
}


class _Numbers:
    """The numeric fields of matched lines, remembering which held a number beyond its type."""

    def __init__(self, match: pa.StructArray):
        self.match = match
        self.bad: list[tuple[str, pa.Array]] = []

    def get(self, group: str, typ: pa.DataType | None = None) -> pa.Array:
        values, bad = parse_int(pc.struct_field(self.match, group), typ)
        self.add(group, bad)
        return values

    def add(self, group: str, bad: pa.Array) -> None:
        self.bad.append((_FIELD_NAMES.get(group, group), bad))

    def any_bad(self) -> np.ndarray:
        out = np.zeros(len(self.match), dtype=bool)
        for _, bad in self.bad:
            out |= _np(bad, False).astype(bool)
        return out

    def error(self) -> pa.Array:
        """Per line: null, or which fields hold a number out of their range (line quarantined)."""
        masks = [(name, _np(bad, False).astype(bool)) for name, bad in self.bad]
        messages: list[str | None] = [None] * len(self.match)
        # Rare (a damaged line): a Python loop over the bad lines only.
        for i in np.flatnonzero(self.any_bad()).tolist():
            fields = ", ".join(name for name, mask in masks if mask[i])
            messages[i] = f"number out of range for its field: {fields}"
        return pa.array(messages, pa.string())


def _bool(strings: pa.Array) -> pa.Array:
    present = pc.match_substring_regex(strings, r"^(true|false)$")
    return pc.if_else(present, pc.equal(strings, "true"), pa.scalar(None, pa.bool_()))


def _np(arr: pa.Array, fill: int = 0) -> np.ndarray:
    return pc.fill_null(arr, fill).to_numpy(zero_copy_only=False)


def _line_sources(path: str, line_idx: np.ndarray) -> pa.Array:
    nums = pc.cast(pa.array(np.asarray(line_idx, dtype=np.int64) + 1), pa.string())
    prefix = pa.array([path + ":line "], pa.string()).take(
        pa.array(np.zeros(len(nums), dtype=np.int32))
    )
    return pc.binary_join_element_wise(prefix, nums, "")


def _matches(lines: pa.Array, pattern: str) -> np.ndarray:
    return _np(pc.match_substring_regex(lines, pattern), False).astype(bool)


def _split_lines(data: bytes) -> pa.Array:
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":  # the newline after the last line does not open a line
        lines.pop()
    arr = pa.array(lines, pa.string())
    return pc.utf8_rtrim(arr, characters="\r")


def _control_fields(ctl: pa.Array) -> tuple[pa.Array, pa.Array, pa.Array]:
    """(control_type, coordinator_epoch, epoch out of range) from record lines' control part."""
    d = pc.extract_regex(ctl, CONTROL_DETAIL)
    marker = pc.struct_field(d, "marker")
    cid = pc.struct_field(d, "cid")
    kraft = pc.struct_field(d, "kraft")
    kraft_id = pc.cast(pc.index_in(kraft, value_set=pa.array(list(_KRAFT_TYPE_IDS))), pa.int64())
    kraft_id = pc.add(kraft_id, 2)  # ids 2..6 in _KRAFT_TYPE_IDS order
    other_id = pc.coalesce(_int(cid), kraft_id)
    unknown = pc.binary_join_element_wise(
        pa.array(["UNKNOWN("] * len(ctl), pa.string()),
        pc.cast(other_id, pa.string()),
        pa.array([")"] * len(ctl), pa.string()),
        "",
    )
    has_marker = pc.fill_null(pc.match_substring_regex(marker, r"^(COMMIT|ABORT)$"), False)
    ctype = pc.if_else(has_marker, marker, unknown)
    epoch, epoch_bad = parse_int(pc.struct_field(d, "cepoch"), pa.int32())
    cepoch = pc.if_else(has_marker, epoch, None)
    return ctype, pc.cast(cepoch, pa.int32()), pc.and_(has_marker, epoch_bad)


# ------------------------------------------------------------------------------------------------
# The parser
# ------------------------------------------------------------------------------------------------
def parse_dump_log(
    data: bytes,
    *,
    path: str,
    topic: str | None = None,
    partition: int | None = None,
) -> pa.Table:
    """Parse one `kafka-dump-log.sh` output file into the reader output schema.

    Pure function (no Spark); the reader calls it on executors.

    Args:
        data: the file content.
        path: the file path, used in `source` ("<path>:line <n>").
        topic: topic of every batch; default: from the `Dumping <dir>/<topic>-<p>/<file>` line.
        partition: partition of every batch; default: from the `Dumping` line.

    Returns:
        One row per batch (in line order), and one `_source_error` row per line that is not a
        known format, per `Found N invalid bytes` line, per record line without a batch line, and
        per batch whose topic/partition is unknown.

    """
    parsed = parse_dump_log_lines(data, path=path, topic=topic, partition=partition)
    # A line gives one row at most, so ordering by line (batches first where equal, as before)
    # puts every row where its line is.
    keys = np.concatenate([parsed.batch_lines, parsed.error_lines])
    table = pa.concat_tables([parsed.batches, parsed.errors])
    return table.take(pa.array(np.argsort(keys, kind="stable")))


@dataclass(frozen=True)
class DumpLogLines:
    """One dump file's lines and the rows `parse_dump_log` makes of them, by line.

    The decoders of the coordinator topics (`coordinator_dump_log`) read the record lines' text
    themselves and take each record's batch (producer id, epoch, flags) from the batch row whose
    line governs it: the last of `batch_lines` at or before the record's line.

    Attributes:
        lines: the file's lines (without their newline).
        batch_lines: the line (0-based) of each batch row, ascending; a 0.11-2.1 batch, printed
            as record lines only, is at its first record's line.
        batches: the batch rows (`ARROW_SCHEMA`), in line order.
        error_lines: the line of each error row, ascending.
        errors: the rows of lines that are no batch (`_source_error` set), in line order.
        record_lines: the record lines that have a batch line before them in their section
            (`| offset: ...`, `| key: ...` and the 0.11-2.1 `offset: ... position: ...` lines),
            ascending; those without one are error rows.
    """

    lines: pa.Array
    batch_lines: np.ndarray
    batches: pa.Table
    error_lines: np.ndarray
    errors: pa.Table
    record_lines: np.ndarray


def _in_line_order(parts: list[tuple[np.ndarray, pa.RecordBatch]]) -> tuple[np.ndarray, pa.Table]:
    if not parts:
        return np.empty(0, dtype=np.int64), ARROW_SCHEMA.empty_table()
    keys = np.concatenate([p[0] for p in parts]).astype(np.int64)
    order = np.argsort(keys, kind="stable")
    table = pa.Table.from_batches([p[1] for p in parts], schema=ARROW_SCHEMA)
    return keys[order], table.take(pa.array(order))


def parse_dump_log_lines(
    data: bytes,
    *,
    path: str,
    topic: str | None = None,
    partition: int | None = None,
) -> DumpLogLines:
    """Parse one `kafka-dump-log.sh` output file, keeping each row's line (`DumpLogLines`).

    Args:
        data: the file content.
        path: the file path, used in `source` ("<path>:line <n>").
        topic: topic of every batch; default: from the `Dumping <dir>/<topic>-<p>/<file>` line.
        partition: partition of every batch; default: from the `Dumping` line.

    Returns:
        The lines, the batch rows and the error rows of `parse_dump_log`, each with its line,
        and the record lines.
    """
    lines = _split_lines(data)
    n = len(lines)
    if n == 0:
        none = np.empty(0, dtype=np.int64)
        empty = ARROW_SCHEMA.empty_table()
        return DumpLogLines(lines, none, empty, none, empty, none)
    idx = np.arange(n, dtype=np.int64)

    is_blank = _matches(lines, BLANK)
    is_dump = _matches(lines, DUMPING)
    is_start = _matches(lines, START)
    is_v2 = _matches(lines, BATCH_V2)
    is_legacy = _matches(lines, BATCH_LEGACY) & ~is_v2
    is_old = _matches(lines, OLD_RECORD) & ~is_legacy
    is_rec = _matches(lines, RECORD) | _matches(lines, RECORD_28)
    is_rec_data = _matches(lines, RECORD_DATA_ONLY) & ~is_rec
    is_invalid = _matches(lines, INVALID_BYTES)
    is_noise = _matches(lines, NON_CONSECUTIVE)
    known = (
        is_blank
        | is_dump
        | is_start
        | is_v2
        | is_legacy
        | is_old
        | is_rec
        | is_rec_data
        | is_invalid
        | is_noise
    )

    # Section of each line: the latest `Dumping` line before it (-1: none).
    section = np.maximum.accumulate(np.where(is_dump, idx, -1))
    sec_topic, sec_partition = _section_partitions(lines, is_dump, section, topic, partition)

    parts: list[tuple[np.ndarray, pa.RecordBatch]] = []

    # --- batch lines (magic 2 and legacy) -----------------------------------------------------
    is_batch_line = is_v2 | is_legacy
    governing = np.maximum.accumulate(np.where(is_batch_line, idx, -1))
    rec_idx = np.flatnonzero(is_rec | is_rec_data)
    rec_batch = governing[rec_idx]
    orphan = rec_batch <= section[rec_idx]  # no batch line in this section before the record
    ctl_batch_lines = np.array([], dtype=np.int64)
    ctl_rec_lines = np.array([], dtype=np.int64)
    if len(rec_idx):
        good = ~orphan
        # The marker is the first record of a control batch (docs/formats.md#control-batches).
        batch_of, first = np.unique(rec_batch[good], return_index=True)
        ctl_batch_lines = batch_of
        ctl_rec_lines = rec_idx[good][first]

    v2_idx = np.flatnonzero(is_v2)
    if len(v2_idx):
        parts.append((v2_idx, _v2_rows(lines, v2_idx, ctl_batch_lines, ctl_rec_lines, path)))
    lg_idx = np.flatnonzero(is_legacy)
    if len(lg_idx):
        parts.append((lg_idx, _legacy_rows(lines, lg_idx, path)))
    old_idx = np.flatnonzero(is_old)
    if len(old_idx):
        first_lines, batch = _old_rows(lines, old_idx, is_old, path)
        parts.append((first_lines, batch))

    # Topic and partition of every batch row (from its section, or the options).
    rows: list[tuple[np.ndarray, pa.RecordBatch]] = []
    for line_idx, b in parts:
        rows.append(
            (
                line_idx,
                _with_partition(b, line_idx, section, sec_topic, sec_partition, topic, partition),
            )
        )

    # --- error rows --------------------------------------------------------------------------
    error_rows: list[tuple[np.ndarray, pa.RecordBatch]] = []

    def errors(where: np.ndarray, messages: pa.Array | list[str]) -> None:
        if not len(where):
            return
        t = _take(sec_topic, np.maximum(section[where], 0)) if len(sec_topic) else None
        p = _take(sec_partition, np.maximum(section[where], 0)) if len(sec_partition) else None
        b = error_batch(
            topic=None,
            partition=None,
            sources=_line_sources(path, where).to_pylist(),
            errors=messages if isinstance(messages, list) else messages.to_pylist(),
        )
        if t is not None:
            has = section[where] >= 0
            b = b.set_column(0, "topic", pc.if_else(pa.array(has), t, _opt(topic, len(where))))
            b = b.set_column(
                1,
                "partition",
                pc.if_else(pa.array(has), p, _opt_int(partition, len(where))),
            )
        else:
            b = b.set_column(0, "topic", _opt(topic, len(where)))
            b = b.set_column(1, "partition", _opt_int(partition, len(where)))
        error_rows.append((where, b))

    damaged = ~known & _matches(lines, DAMAGED_BATCH_LINE)
    errors(
        np.flatnonzero(damaged),
        ["batch line matches no known kafka-dump-log.sh format (cut or damaged?)"]
        * int(damaged.sum()),
    )
    unknown = np.flatnonzero(~known & ~damaged)
    if len(unknown):
        # Its bytes in the file, newline included (the text is not copied: it may be data).
        sizes = _np(pc.binary_length(pc.cast(_take(lines, unknown), pa.binary()))) + 1
        errors(unknown, [f"{UNKNOWN_LINE} ({n} bytes, content not copied)" for n in sizes])
    orphans = rec_idx[orphan]
    errors(orphans, ["record line with no batch line before it (excerpt cut?)"] * len(orphans))
    inv = np.flatnonzero(is_invalid)
    if len(inv):
        m = pc.extract_regex(_take(lines, inv), INVALID_BYTES)
        msg = pc.binary_join_element_wise(
            pa.array(["kafka-dump-log.sh found "] * len(inv)),
            pc.struct_field(m, "n"),
            pa.array(
                [" invalid bytes at the end of the segment (truncated or corrupt tail)"] * len(inv)
            ),
            "",
        )
        errors(inv, msg)

    batch_lines, batches = _in_line_order(rows)
    error_lines, error_table = _in_line_order(error_rows)
    record_lines = np.sort(np.concatenate([rec_idx[~orphan], old_idx]))
    return DumpLogLines(lines, batch_lines, batches, error_lines, error_table, record_lines)


def _opt(value: str | None, n: int) -> pa.Array:
    return pa.array([value] * n, pa.string())


def _opt_int(value: int | None, n: int) -> pa.Array:
    return pa.array([value] * n, pa.int32())


def _section_partitions(
    lines: pa.Array,
    is_dump: np.ndarray,
    section: np.ndarray,
    topic: str | None,
    partition: int | None,
) -> tuple[pa.Array, pa.Array]:
    """Topic and partition per line index of a `Dumping` line (arrays indexed by line)."""
    n = len(lines)
    if not is_dump.any():
        return pa.array([], pa.string()), pa.array([], pa.int32())
    paths = pc.struct_field(pc.extract_regex(lines, DUMPING), "path")
    tp = pc.extract_regex(paths, _PARTITION_FROM_PATH)
    t = pc.struct_field(tp, "topic") if topic is None else _opt(topic, n)
    p = (
        _int(pc.struct_field(tp, "partition"), pa.int32())
        if partition is None
        else _opt_int(partition, n)
    )
    return t, p


def _with_partition(
    b: pa.RecordBatch,
    line_idx: np.ndarray,
    section: np.ndarray,
    sec_topic: pa.Array,
    sec_partition: pa.Array,
    topic: str | None,
    partition: int | None,
) -> pa.RecordBatch:
    sec = section[line_idx]
    m = len(line_idx)
    t, p = _opt(topic, m), _opt_int(partition, m)
    if len(sec_topic):
        has = pa.array(sec >= 0)
        safe = np.maximum(sec, 0)
        t = pc.if_else(has, _take(sec_topic, safe), t)
        p = pc.if_else(has, _take(sec_partition, safe), p)
    missing = pc.or_(pc.is_null(t), pc.is_null(p))
    err = pc.if_else(
        missing,
        pa.scalar(
            "topic and partition unknown: no 'Dumping <dir>/<topic>-<partition>/<file>' line; "
            "pass topic= and partition=",
            pa.string(),
        ),
        pa.nulls(m, pa.string()),
    )
    b = b.set_column(0, "topic", t)
    b = b.set_column(1, "partition", pc.cast(p, pa.int32()))
    earlier = b.column(len(ARROW_SCHEMA) - 1)
    return b.set_column(len(ARROW_SCHEMA) - 1, SOURCE_ERROR_COL, pc.coalesce(earlier, err))


def _base_columns(n: int, topic: str | None = None, partition: int | None = None) -> dict:
    return {"topic": _opt(topic, n), "partition": _opt_int(partition, n)}


def _assemble(cols: dict, n: int) -> pa.RecordBatch:
    arrays = []
    for f in ARROW_SCHEMA:
        v = cols.get(f.name)
        if v is None:
            arrays.append(pa.nulls(n, f.type))
        elif isinstance(v, np.ndarray):
            arrays.append(pa.array(v, f.type))
        else:
            arrays.append(v if v.type == f.type else pc.cast(v, f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


def _v2_rows(
    lines: pa.Array,
    v2_idx: np.ndarray,
    ctl_batch_lines: np.ndarray,
    ctl_rec_lines: np.ndarray,
    path: str,
) -> pa.RecordBatch:
    m = pc.extract_regex(_take(lines, v2_idx), BATCH_V2)
    n = len(v2_idx)
    num = _Numbers(m)
    pid = num.get("pid")
    bseq = num.get("bseq", pa.int32())
    txn = _bool(pc.struct_field(m, "txn"))
    ctl = _bool(pc.struct_field(m, "ctl"))
    # 0.11–2.1 batch lines have no isControl. A transactional batch with a producer id and no
    # sequence can only be a marker: the leader rejects such data batches
    # (docs/formats.md#dump-log).
    inferred = pc.and_(pc.and_(txn, pc.equal(bseq, -1)), pc.greater_equal(pid, 0))
    is_control = pc.coalesce(ctl, inferred)
    valid = pc.coalesce(_bool(pc.struct_field(m, "valid2")), _bool(pc.struct_field(m, "valid1")))

    control_type = pa.nulls(n, pa.string())
    coord = pa.nulls(n, pa.int32())
    if len(ctl_batch_lines):
        # Position of each batch line among v2_idx, and its first record line (if any).
        pos_in = np.searchsorted(v2_idx, ctl_batch_lines)
        pos_in = np.minimum(pos_in, n - 1)
        hit = v2_idx[pos_in] == ctl_batch_lines
        rec_for = np.full(n, -1, dtype=np.int64)
        rec_for[pos_in[hit]] = ctl_rec_lines[hit]
        has_rec = rec_for >= 0
        rec_lines = _take(lines, np.maximum(rec_for, 0))
        ctl_part = pc.coalesce(
            pc.struct_field(pc.extract_regex(rec_lines, RECORD), "ctl"),
            pc.struct_field(pc.extract_regex(rec_lines, RECORD_28), "ctl"),
            pa.scalar("", pa.string()),
        )
        # Only a record that belongs to a control batch carries a marker.
        use = pc.and_(pa.array(has_rec), pc.fill_null(is_control, False))
        use = pc.and_(use, pc.not_equal(ctl_part, ""))
        ctype, cepoch, cepoch_bad = _control_fields(ctl_part)
        control_type = pc.if_else(use, ctype, control_type)
        coord = pc.if_else(use, cepoch, coord)
        num.add("cepoch", pc.and_(use, cepoch_bad))

    cols = {
        **_base_columns(n),
        "base_offset": num.get("base"),
        "last_offset": num.get("last"),
        "producer_id": pid,
        "producer_epoch": num.get("pepoch", pa.int32()),
        "base_sequence": bseq,
        "last_sequence": num.get("lseq", pa.int32()),
        "record_count": num.get("count", pa.int32()),
        "is_transactional": txn,
        "is_control": is_control,
        "control_type": control_type,
        "coordinator_epoch": coord,
        "partition_leader_epoch": num.get("ple", pa.int32()),
        "magic": num.get("magic", pa.int32()),
        "max_timestamp": num.get("ts"),
        "crc_valid": valid,
        "source": _line_sources(path, v2_idx),
    }
    cols[SOURCE_ERROR_COL] = num.error()
    return _assemble(cols, n)


def _legacy_rows(lines: pa.Array, lg_idx: np.ndarray, path: str) -> pa.RecordBatch:
    """Magic 0/1 entries: same canonical values as the segment reader gives them."""
    m = pc.extract_regex(_take(lines, lg_idx), BATCH_LEGACY)
    n = len(lg_idx)
    num = _Numbers(m)
    off = num.get("off")
    minus1 = np.full(n, -1, dtype=np.int64)
    cols = {
        **_base_columns(n),
        "base_offset": off,
        "last_offset": off,
        "producer_id": minus1,
        "producer_epoch": minus1,
        "base_sequence": minus1,
        "last_sequence": minus1,
        "is_transactional": np.zeros(n, dtype=bool),
        "is_control": np.zeros(n, dtype=bool),
        "partition_leader_epoch": minus1,
        "magic": num.get("magic", pa.int32()),
        "max_timestamp": num.get("ts"),
        "crc_valid": pc.coalesce(
            _bool(pc.struct_field(m, "valid2")), _bool(pc.struct_field(m, "valid1"))
        ),
        "source": _line_sources(path, lg_idx),
    }
    cols[SOURCE_ERROR_COL] = num.error()
    return _assemble(cols, n)


def _old_rows(
    lines: pa.Array, old_idx: np.ndarray, is_old: np.ndarray, path: str
) -> tuple[np.ndarray, pa.RecordBatch]:
    """0.11–2.1 deep iteration: consecutive record lines with one `position:` are one batch."""
    m = pc.extract_regex(_take(lines, old_idx), OLD_RECORD)
    num = _Numbers(m)
    pos = _np(num.get("pos"), -1)
    prev_is_old = np.concatenate([[False], is_old[:-1]])[old_idx]
    prev_pos = np.concatenate([[-1], pos[:-1]])
    prev_line = np.concatenate([[-2], old_idx[:-1]])
    starts_group = ~prev_is_old | (prev_pos != pos) | (prev_line != old_idx - 1)
    starts = np.flatnonzero(starts_group)
    ends = np.concatenate([starts[1:], [len(old_idx)]]) - 1
    g = len(starts)

    off = _np(num.get("off"))
    ts = _np(num.get("ts"))
    valid = _np(_bool(pc.struct_field(m, "valid")), False).astype(bool)
    magic = _np(num.get("magic", pa.int32()))
    pid = _np(num.get("pid"), -1)
    pepoch = _np(num.get("pepoch"), -1)
    seq = _np(num.get("seq"), -1)
    txn = _np(_bool(pc.struct_field(m, "txn")), False).astype(bool)
    ctl_part = pc.struct_field(m, "ctl")
    has_ctl = _np(pc.not_equal(ctl_part, ""), False).astype(bool)
    ctype, cepoch, cepoch_bad = _control_fields(_take(ctl_part, starts))
    # A group is quarantined when any of its record lines holds a number beyond its field.
    bad = np.logical_or.reduceat(num.any_bad(), starts) if g else np.zeros(0, dtype=bool)
    bad |= _np(cepoch_bad, False).astype(bool)

    legacy = magic[starts] < 2
    count = (ends - starts + 1).astype(np.int64)
    base = np.where(legacy, off[ends], off[starts])
    cols = {
        **_base_columns(g),
        # A legacy compressed wrapper's offset is its last inner offset
        # (docs/formats.md#legacy-entries).
        "base_offset": base,
        "last_offset": off[ends],
        "producer_id": pid[starts],
        "producer_epoch": pepoch[starts],
        "base_sequence": seq[starts],
        "last_sequence": seq[ends],
        "record_count": pa.array(count, pa.int32(), mask=legacy),
        "is_transactional": txn[starts],
        "is_control": has_ctl[starts],
        "control_type": pc.if_else(pa.array(has_ctl[starts]), ctype, None),
        "coordinator_epoch": pc.if_else(pa.array(has_ctl[starts]), cepoch, None),
        # Not printed by these versions; legacy entries have none (-1 in Kafka).
        "partition_leader_epoch": pa.array(
            np.full(g, -1, dtype=np.int32), pa.int32(), mask=~legacy
        ),
        "magic": magic[starts],
        "max_timestamp": np.maximum.reduceat(ts, starts) if g else ts[:0],
        "crc_valid": np.logical_and.reduceat(valid, starts) if g else valid[:0],
        "source": _line_sources(path, old_idx[starts]),
        SOURCE_ERROR_COL: pa.array(
            np.where(bad, "number out of range for its field in the batch's record lines", None),
            pa.string(),
        ),
    }
    return old_idx[starts], _assemble(cols, g)


# ------------------------------------------------------------------------------------------------
# The format read on the executors
# ------------------------------------------------------------------------------------------------
class KafkaDumpLogFormat(FileFormat):
    """The `kafka_dump_log` format: each text file whole in one task.

    Files: `{"path": ...}`.

    Options:
        topic: topic for every batch (overrides the `Dumping` line).
        partition: partition for every batch (overrides the `Dumping` line).
    """

    format_name = FORMAT_NAME

    def schema(self) -> T.StructType:
        """The reader output schema (`RECORD_BATCH` + `_source_error`)."""
        return source_schema()

    def _topic_partition(self) -> tuple[str | None, int | None]:
        part = self.options.get("partition")
        return self.options.get("topic") or None, int(part) if part not in (None, "") else None

    def parse(self, file: dict, data: bytes | memoryview) -> Iterator[pa.RecordBatch]:
        """The rows of one dump file (`parse_dump_log`)."""
        topic, partition = self._topic_partition()
        table = parse_dump_log(bytes(data), path=file["path"], topic=topic, partition=partition)
        yield from table.to_batches(max_chunksize=65536)

    def unreadable(self, file: dict, reason: str) -> Iterator[pa.RecordBatch]:
        """One error row at line 0 of the file."""
        topic, partition = self._topic_partition()
        yield error_batch(
            topic=topic, partition=partition, sources=[f"{file['path']}:line 0"], errors=[reason]
        )


def dump_log_files(paths: list[str]) -> list[str]:
    """The text files under `paths` (files, or directories whose files are all dump-log output).

    A symbolic link in a directory is followed only inside it (`followed_paths`).

    Args:
        paths: text files or directories.

    Returns:
        The files' absolute paths, sorted, each once.

    Raises:
        InputNotFoundError: a path does not exist or holds no file.
    """
    if isinstance(paths, str):
        paths = [paths]
    paths = followed_paths(paths, "dump-log")
    files: list[str] = []
    for p in paths:
        full = fsys.abspath(p)
        if fsys.isdir(full):
            for dirpath, _, names in fsys.walk(full):
                files.extend(fsys.join(dirpath, f) for f in names if not f.startswith("."))
        elif fsys.isfile(full):
            files.append(full)
        else:
            raise InputNotFoundError(f"kafka-dump-log output not found: {p}")
    if not files:
        raise InputNotFoundError("no kafka-dump-log output file under " + ", ".join(paths))
    return sorted(set(files))


def read_dump_log(
    spark: SparkSession,
    paths: list[str],
    *,
    topic: str | None = None,
    partition: int | None = None,
) -> DataFrame:
    """Read `kafka-dump-log.sh` output files (any Kafka version from 0.11).

    Args:
        spark: the session.
        paths: text files, or directories whose files are all dump-log output (a symbolic
            link in one is followed only inside it, `followed_paths`).
        topic: topic of every batch, when the text has no usable `Dumping` line.
        partition: partition of every batch, likewise.

    Returns:
        `RECORD_BATCH` columns plus `_source_error`; `source` is "<file>:line <n>".

    Raises:
        InputNotFoundError: a path does not exist or holds no file.

    """
    files = dump_log_files(paths)
    options = {"topic": topic or "", "partition": "" if partition is None else str(int(partition))}
    log.info("reading %d kafka-dump-log files", len(files))
    return load_files(spark, KafkaDumpLogFormat, [{"path": f} for f in files], **options)
