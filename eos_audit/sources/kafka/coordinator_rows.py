"""The rows the coordinator record readers yield: the `COORDINATOR_RECORDS` contract plus an error.

Both readers, `coordinator_segments` (`.log` files) and `coordinator_dump_log` (`kafka-dump-log.sh`
decoder text), decode one record at a time in Python (`coordinator_records`, `coordinator_text`),
so their rows are gathered here column by column and handed to Spark as Arrow batches.

A record or a batch that cannot be decoded is never dropped: it is a row whose `_source_error` says
why, with what is known of it (its coordinator partition, its batch's offset and producer, its own
offset) and a `source` that names its position, as the batch readers' error rows are
(`segments.SOURCE_ERROR_COL`); the caller turns them into quarantine rows. So every column is
nullable here, as in `segments.source_schema`: the contract's non-null columns hold for the other
rows.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping

import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from eos_audit.schemas import COORDINATOR_RECORDS
from eos_audit.sources.kafka.coordinator_keys import (
    CONSUMER_OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
)
from eos_audit.sources.kafka.coordinator_records import DECODED_FIELDS, DecodedRecord
from eos_audit.sources.kafka.segments import SOURCE_ERROR_COL

COORDINATOR_TOPICS = (CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)
# Rows per Arrow batch handed to Spark, as the batch readers' (segments.CHUNK_ROWS).
CHUNK_ROWS = 65536

# The batch's and the record's context: the contract's columns before the decoded fields.
CONTEXT_FIELDS = (
    "coordinator_topic",
    "coordinator_partition",
    "offset",
    "base_offset",
    "batch_producer_id",
    "batch_producer_epoch",
    "is_transactional",
    "control_type",
    "timestamp",
    "source",
)
assert COORDINATOR_RECORDS.names == [*CONTEXT_FIELDS, *DECODED_FIELDS]


def coordinator_source_schema() -> T.StructType:
    """The schema both coordinator readers return: `COORDINATOR_RECORDS` plus `_source_error`.

    Names, types and order are the contract's; every column is nullable, because an error row
    carries only what could be read.

    Returns:
        The Spark schema of the readers' output.
    """
    fields = [
        T.StructField(f.name, f.dataType, True, f.metadata) for f in COORDINATOR_RECORDS.fields
    ]
    fields.append(T.StructField(SOURCE_ERROR_COL, T.StringType(), True))
    return T.StructType(fields)


ARROW_SCHEMA = to_arrow_schema(coordinator_source_schema())


# Where each column is in a row (rows are tuples in `ARROW_SCHEMA` order until a batch is made).
_NAMES = ARROW_SCHEMA.names
_PARTITIONS_AT = _NAMES.index("transaction_partitions")
_DECODED = operator.attrgetter(*DECODED_FIELDS)
_NO_RECORD = (None,) * len(DECODED_FIELDS)

# The binary decoders read fixed widths that fit their columns, but kafka-dump-log text holds
# numbers of any size (`offset: 99999999999999999999`) and its JSON strings may hold what UTF-8
# cannot encode (a lone surrogate, "\ud800"). Such a value makes its row an error row, rather than
# fail the Arrow batch and with it the whole file; rows are checked one by one only when a batch
# cannot be made, so the check costs nothing otherwise.
_INT_RANGES = [
    (i, -(1 << (field.type.bit_width - 1)), (1 << (field.type.bit_width - 1)) - 1)
    for i, field in enumerate(ARROW_SCHEMA)
    if pa.types.is_integer(field.type)
]
_STRINGS = [i for i, field in enumerate(ARROW_SCHEMA) if pa.types.is_string(field.type)]
_PARTITION_RANGE = (-(1 << 31), (1 << 31) - 1)
UNFIT_VALUE = "a value that does not fit its column (a number out of range, or not UTF-8 text)"


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _unfit(row: tuple) -> list[int]:
    """Where a row holds a value Arrow cannot hold in the column's type."""
    bad = [i for i, low, high in _INT_RANGES if row[i] is not None and not low <= row[i] <= high]
    bad += [i for i in _STRINGS if row[i] is not None and not _is_text(row[i])]
    partitions = row[_PARTITIONS_AT]
    low, high = _PARTITION_RANGE
    if partitions and not all(low <= p <= high and _is_text(t) for t, p in partitions):
        bad.append(_PARTITIONS_AT)
    return bad


def _fitted(row: tuple) -> tuple:
    """The row, or where a value does not fit, an error row of the context values that do."""
    bad = _unfit(row)
    if not bad:
        return row
    context = [None if i in bad else row[i] for i in range(len(CONTEXT_FIELDS))]
    reason = f"{UNFIT_VALUE}: {', '.join(_NAMES[i] for i in bad)}"
    error = row[-1]
    return (*context, *_NO_RECORD, reason if error is None else f"{error}; {reason}")


def _partitions(value: tuple[tuple[str, int], ...] | None) -> list[dict] | None:
    return None if value is None else [{"topic": t, "partition": p} for t, p in value]


def _to_batch(rows: list[tuple]) -> pa.RecordBatch:
    columns = [list(column) for column in zip(*rows, strict=True)] or [[] for _ in _NAMES]
    columns[_PARTITIONS_AT] = [_partitions(value) for value in columns[_PARTITIONS_AT]]
    return pa.RecordBatch.from_arrays(
        [pa.array(values, field.type) for values, field in zip(columns, ARROW_SCHEMA, strict=True)],
        schema=ARROW_SCHEMA,
    )


class CoordinatorRows:
    """Rows gathered one at a time, handed out as Arrow batches in `ARROW_SCHEMA`."""

    def __init__(self) -> None:
        self._rows: list[tuple] = []

    def __len__(self) -> int:
        return len(self._rows)

    def add(
        self,
        context: Mapping[str, object],
        record: DecodedRecord | None = None,
        error: str | None = None,
    ) -> None:
        """Add one row: a decoded record, or an error that says why there is none.

        Args:
            context: the `CONTEXT_FIELDS` known (a missing one is null).
            record: the decoded record; None for an error row.
            error: the reason of an error row.
        """
        decoded = _NO_RECORD if record is None else _DECODED(record)
        self._rows.append((*[context.get(name) for name in CONTEXT_FIELDS], *decoded, error))

    def take(self) -> pa.RecordBatch:
        """The rows gathered since the last call, as one Arrow batch."""
        rows, self._rows = self._rows, []
        try:
            return _to_batch(rows)
        except (OverflowError, ValueError, pa.ArrowException):
            # A value that does not fit (module comment above): find it row by row. Anything
            # else raises again here, as it should.
            return _to_batch([_fitted(row) for row in rows])
