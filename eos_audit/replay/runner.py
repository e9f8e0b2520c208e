"""The Arrow side of the replay: what runs inside `mapInArrow` on the executors.

Each Spark partition holds whole (topic, partition)s, sorted in replay order. For every Arrow batch
the runner writes the quarantined rows out as they are, turns the others into NumPy columns, runs
the kernel over them with the state it carried from the previous batch, and turns what the kernel
emitted into Arrow rows, picking the strings (topic, source) of the few emitted rows by index.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from eos_audit.findings import FACTS_PER_FINDING
from eos_audit.python_workers import freeze_worker_heap
from eos_audit.replay import kernel, wire
from eos_audit.replay.state import (
    ACK,
    COUNT_OF,
    COUNTS,
    NULL,
    OUTPUT_DTYPES,
    OUTPUTS,
    PARTITION_STATE,
    PRODUCER_STATE_ENTRY,
    REPLAY_ROW,
    ROOM_NEEDED,
    Outputs,
)
from eos_audit.replay.wire import RowKind
from eos_audit.sources.files.row_reference import ROW_NUMBER

log = logging.getLogger(__name__)


class Params(NamedTuple):
    """The run's settings the kernel reads."""

    expiration_ms: int
    hanging_after_ms: int
    as_of_ms: int
    unknown_producer_error: int


@dataclass(frozen=True)
class ReplaySettings:
    """Everything the executors need, picklable."""

    expiration_ms: int
    hanging_after_ms: int
    as_of_ms: int | None
    unknown_producer_error: int
    compacted_regex: str | None
    coordinator_regex: str | None
    # The files rows are located in by reference, by id: the text written before a row's
    # position, `<file>:row ` or `<file>:` (sources.row_reference.row_prefixes).
    source_files: dict[int, str] = dataclasses.field(default_factory=dict)

    def params(self) -> Params:
        """The settings as the kernel's argument."""
        return Params(
            self.expiration_ms,
            self.hanging_after_ms,
            NULL if self.as_of_ms is None else self.as_of_ms,
            self.unknown_producer_error,
        )


_FINDING_FIELDS = [
    "finding_code", "cause", "kafka_error", "producer_id", "producer_epoch", "base_offset",
    "last_offset", "base_sequence", "last_sequence", "timestamp", "expected_sequence",
    "previous_offset", "occurrence",
]  # fmt: skip
_SEED_BATCH = pa.struct(
    [
        ("base_sequence", pa.int64()),
        ("last_sequence", pa.int64()),
        ("base_offset", pa.int64()),
        ("last_offset", pa.int64()),
    ]
)


def _fields(dtype: np.dtype, skip: tuple[str, ...] = ("tp_row", "partition")) -> list[pa.Field]:
    out = []
    for name in dtype.names:
        if name in skip:
            continue
        base = dtype.fields[name][0]
        out.append(pa.field(name, pa.bool_() if base == np.bool_ else pa.int64()))
    return out


# What is counted of each input file: its batch rows, those quarantined, those skipped
# (--since-state); the others are audited.
FILE_COUNTS = ("batches_read", "batches_quarantined", "batches_skipped")

# The structs of the outputs the runner writes in a way of its own; every other kernel output
# crosses as its event's fields (`_fields`).
_OWN_STRUCTS = {
    "findings": pa.struct(
        [pa.field(n, pa.int64()) for n in _FINDING_FIELDS]
        + [pa.field(f"fact{k}", pa.int64()) for k in range(FACTS_PER_FINDING)]
    ),
    "producer_state": pa.struct(
        [
            ("producer_id", pa.int64()),
            ("producer_epoch", pa.int64()),
            ("coordinator_epoch", pa.int64()),
            ("txn_first_offset", pa.int64()),
            ("last_timestamp", pa.int64()),
            ("state_offset", pa.int64()),
            ("batches", pa.list_(_SEED_BATCH)),
        ]
    ),
}
# What the runner emits: one row per record, `kind` the output (the table) it belongs to and the
# struct of that name set. Besides the kernel's outputs (state.OUTPUTS), the quarantined batches
# and the counts of each input file's batches (the input_files table).
OUTPUT_ARROW = pa.schema(
    [
        ("kind", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int64()),
        ("source", pa.string()),
        ("replica", pa.string()),
        ("control_type", pa.int64()),
        *[
            (name, _OWN_STRUCTS.get(name) or pa.struct(_fields(OUTPUT_DTYPES[name])))
            for name in OUTPUTS
        ],
        (
            "quarantine",
            pa.struct([("reason", pa.string()), ("raw", pa.string()), ("base_offset", pa.int64())]),
        ),
        ("input_files", pa.struct([(name, pa.int64()) for name in ("file_id", *FILE_COUNTS)])),
    ]
)


def _ints(values: np.ndarray) -> pa.Array:
    return pa.array(values, type=pa.int64(), mask=values == NULL)


# The wire fields `kernel.unpack_rows` reads, in its parameters' order.
_UNPACKED = (*wire.WORDS, "base_offset", "last_offset", "producer_id", "timestamp", "value")


def _int_column(batch: pa.RecordBatch, name: str) -> np.ndarray:
    """An int64 column as NumPy, NULL where null (without a copy when it has no nulls)."""
    column = batch.column(name)
    if column.null_count:
        column = column.fill_null(NULL)
    return column.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def _topic_flags(topics: pa.Array, regex: str | None) -> np.ndarray:
    """Whether each topic of a (dictionary) array matches the anchored regex."""
    if regex is None or len(topics) == 0:
        return np.zeros(len(topics), dtype=np.bool_)
    matches = pc.match_substring_regex(topics, pattern=f"^(?:{regex})$")
    return matches.fill_null(False).to_numpy(zero_copy_only=False)


class _Replayer:
    """The state of one task's replay, carried from Arrow batch to Arrow batch."""

    def __init__(self, settings: ReplaySettings, replay_kernel: ModuleType = kernel) -> None:
        # The compiled kernel; tests pass the plain-Python one (`uncompiled_kernel`).
        self.kernel = replay_kernel
        self.settings = settings
        self.params = settings.params()
        self.part = np.zeros(1, dtype=PARTITION_STATE).view(np.recarray)
        self.entries = np.zeros(64, dtype=PRODUCER_STATE_ENTRY).view(np.recarray)
        self.acks = np.zeros(64, dtype=ACK).view(np.recarray)
        self.slots = lookup_table(len(self.entries), 2)
        self.ack_index = lookup_table(len(self.acks), 4)
        # What the kernel writes, handed to it whole (`state.Outputs`); `grow` replaces an array.
        self.out = Outputs(
            **{
                name: np.zeros(256, dtype=OUTPUT_DTYPES[name]).view(np.recarray) for name in OUTPUTS
            },
            counts=np.zeros(COUNTS, dtype=np.int64),
        )
        # Sources of the acknowledgements of the partition being replayed, by task-wide ordinal:
        # their findings are emitted at the partition's end, when their rows' batch may be gone.
        self.ack_sources: dict[int, str | None] = {}
        self.acks_seen = 0
        self.oldest_ack_source = 0
        # The (topic, partition) of the previous batch's last row, for records of a partition
        # that began in an earlier batch.
        self.previous_topic: str | None = None
        self.previous_partition: int | None = None
        # The (topic, partition) of quarantined rows that ended the last Arrow batch: the next
        # batch's first row, when of that partition, follows them.
        self.quarantined_at_end: tuple[str, int] | None = None
        self.previous_compacted = False
        # The control type of each row of the batch being replayed (findings name it).
        self.control_types = np.zeros(0, dtype=np.int64)
        # Counts of the batches of each input file (FILE_COUNTS), by file id, and the offset the
        # seeded state covers in the partition the previous batch ended in (--since-state).
        self.file_counts: dict[int, np.ndarray] = {}
        self.covered_end = NULL

    def rows_of(self, batch: pa.RecordBatch) -> np.recarray:
        """The kernel's rows (`state.REPLAY_ROW`) of one Arrow batch in the wire layout."""
        rows = np.empty(batch.num_rows, dtype=REPLAY_ROW).view(np.recarray)
        # Topics by code: one hash per row, then the (few) distinct names are matched.
        topics = batch.column("topic")
        encoded = pc.dictionary_encode(topics)
        topic_codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False)
        partitions = _int_column(batch, "partition")
        self.kernel.unpack_rows(
            rows, *[_int_column(batch, name) for name in _UNPACKED], partitions, topic_codes,
            _topic_flags(encoded.dictionary, self.settings.compacted_regex),
            _topic_flags(encoded.dictionary, self.settings.coordinator_regex),
        )  # fmt: skip
        if batch.num_rows and self.previous_topic is not None:
            rows.tp_start[0] = not (
                topics[0].as_py() == self.previous_topic
                and int(partitions[0]) == self.previous_partition
            )
        return rows

    def run(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        batch = None
        for batch in batches:
            if batch.num_rows == 0:
                continue
            header = _int_column(batch, wire.HEADER)
            rejected = wire.flag_set(header, "quarantined")
            below = self.below_snapshot(batch, header, rejected)
            self.count_files(header, rejected, below)
            # The bits the runner sets (wire.SET_BY_THE_RUNNER), the header rewritten once.
            marked = header
            if below.any():
                marked = np.where(below, header | wire.BIT_FIELDS["below_snapshot"].bit, header)
            if rejected.any() or self.quarantined_at_end is not None:
                marked = self.mark_rows_after_quarantined(batch, marked, rejected)
            if marked is not header:
                index = batch.schema.get_field_index(wire.HEADER)
                column = pa.array(marked, pa.int64())
                batch = batch.set_column(index, batch.schema.field(index), column)
            if rejected.any():
                rejected = pa.array(rejected)
                yield self.quarantine(batch.filter(rejected))
                batch = batch.filter(pc.invert(rejected))
                if batch.num_rows == 0:
                    continue
            rows = self.rows_of(batch)
            self.control_types = rows.control_type
            self.remember_ack_sources(batch)
            start = 0
            while start < batch.num_rows:
                start = self.kernel.replay(
                    rows, start, self.previous_compacted, self.params, self.part,
                    self.entries, self.slots, self.acks, self.ack_index, self.out,
                )  # fmt: skip
                yield from self.drain(batch)
                if start < batch.num_rows:
                    self.grow()
            self.previous_topic = batch.column("topic")[-1].as_py()
            self.previous_partition = int(rows["partition"][-1])
            self.previous_compacted = bool(rows.is_compacted[-1])
        while not self.kernel.finish(
            self.part, self.entries, self.slots, self.acks, self.ack_index, self.params,
            self.out, -1, self.previous_compacted,
        ):  # fmt: skip
            self.grow()
        yield from self.drain(batch)
        if self.file_counts:
            yield self.file_stats()

    def mark_rows_after_quarantined(
        self, batch: pa.RecordBatch, header: np.ndarray, rejected: np.ndarray
    ) -> np.ndarray:
        """Set `follows_quarantined` on the rows right after quarantined rows of their partition.

        The quarantined rows are then taken out of the replay. A hole in the offsets there may be
        the quarantined batch's (docs/rules.md#offset-gap). Vectorised: quarantined rows are few,
        the rows they precede are found by a binary search.

        Args:
            batch: the Arrow batch, quarantined rows included.
            header: its wire headers.
            rejected: which of its rows are quarantined.

        Returns:
            The headers, the bit set where it applies (`header` itself when it applies nowhere).
        """
        topics = batch.column("topic")
        partitions = _int_column(batch, "partition")
        kept = np.flatnonzero(~rejected)
        marked = np.zeros(batch.num_rows, dtype=bool)
        if self.quarantined_at_end is not None and len(kept):
            first = int(kept[0])
            first_tp = (topics[first].as_py(), int(partitions[first]))
            marked[first] = first_tp == self.quarantined_at_end
            self.quarantined_at_end = None
        quarantined = np.flatnonzero(rejected)
        position = np.searchsorted(kept, quarantined)
        inside = position < len(kept)
        before, after = quarantined[inside], kept[position[inside]]
        if len(before):
            same = partitions[before] == partitions[after]
            same &= (
                pc.equal(topics.take(before), topics.take(after))
                .fill_null(False)
                .to_numpy(zero_copy_only=False)
            )
            marked[after[same]] = True
        if not inside.all():
            last = int(quarantined[-1])
            self.quarantined_at_end = (topics[last].as_py(), int(partitions[last]))
        if not marked.any():
            return header
        return np.where(marked, header | wire.BIT_FIELDS["follows_quarantined"].bit, header)

    def below_snapshot(
        self, batch: pa.RecordBatch, header: np.ndarray, rejected: np.ndarray
    ) -> np.ndarray:
        """The batches the seeded state holds already: those below their partition's covered offset.

        LogLoader's rule: a broker that loads a producer-state snapshot replays only the log above
        the snapshot's offset on top of it (docs/rules.md#seeded-state). With --since-state a
        STATE_COVERAGE row gives that offset, and the batches below it were replayed by an earlier
        run: the kernel counts them as skipped (`kernel.in_snapshot`), the input files too
        (`count_files`). Decided here only, vectorised over the Arrow batch; the offset carries to
        the next batch while its partition goes on.

        Args:
            batch: the Arrow batch, quarantined rows included.
            header: its wire headers.
            rejected: which of its rows are quarantined (never replayed, so never skipped).

        Returns:
            Whether each row is such a batch (of the audited or another replica).
        """
        kinds = wire.value_of(header, "kind")
        coverage = kinds == int(RowKind.STATE_COVERAGE)
        if not coverage.any() and self.covered_end == NULL:
            return np.zeros(batch.num_rows, dtype=bool)
        n = batch.num_rows
        topics = pc.dictionary_encode(batch.column("topic")).indices.fill_null(-1)
        codes = topics.to_numpy(zero_copy_only=False)
        partitions = _int_column(batch, "partition")
        starts = np.zeros(n, dtype=bool)
        starts[1:] = (codes[1:] != codes[:-1]) | (partitions[1:] != partitions[:-1])
        starts[0] = not (
            batch.column("topic")[0].as_py() == self.previous_topic
            and int(partitions[0]) == self.previous_partition
        )
        # The covered offset in force at each row: the last coverage row of its partition.
        marks = np.where(coverage | starts, np.arange(n), -1)
        at = np.maximum.accumulate(marks)
        offered = np.where(coverage, _int_column(batch, "value"), NULL)
        covered = np.where(at >= 0, offered[np.maximum(at, 0)], self.covered_end)
        self.covered_end = int(covered[-1])
        is_batch = (kinds == int(RowKind.AUDITED)) | (kinds == int(RowKind.REPLICA))
        base = _int_column(batch, "base_offset")
        return is_batch & ~rejected & (covered != NULL) & (base < covered)

    def count_files(self, header: np.ndarray, rejected: np.ndarray, below: np.ndarray) -> None:
        """Count the batch rows of each input file, as the kernel counts them per partition.

        Vectorised over the Arrow batch; rows without a file id (inputs located by text) are
        not counted here. A row is quarantined or skipped (`below_snapshot`), or else audited.

        Args:
            header: the Arrow batch's wire headers.
            rejected: which of its rows are quarantined.
            below: which of its rows the seeded state holds already (`below_snapshot`).
        """
        kinds = wire.value_of(header, "kind")
        has_file = wire.flag_set(header, "has_source_file")
        counted = has_file & ((kinds == int(RowKind.AUDITED)) | (kinds == int(RowKind.REPLICA)))
        if not counted.any():
            return
        ids = wire.value_of(header[counted], "source_file")
        flags = np.stack([rejected[counted], below[counted]], axis=1).astype(np.int64)
        # Rows come in log order, so a file's rows are mostly one run: sum the runs (no sort);
        # only rows of many files interleaved at the same offsets need grouping.
        starts = np.concatenate([[0], np.flatnonzero(ids[1:] != ids[:-1]) + 1])
        if len(starts) > 64:
            order = np.argsort(ids, kind="stable")
            ids, flags = ids[order], flags[order]
            starts = np.concatenate([[0], np.flatnonzero(ids[1:] != ids[:-1]) + 1])
        reads = np.diff(np.append(starts, len(ids)))
        sums = np.add.reduceat(flags, starts, axis=0)
        for file_id, read, (quarantine, skip) in zip(
            ids[starts].tolist(), reads.tolist(), sums.tolist(), strict=True
        ):
            known = self.file_counts.setdefault(file_id, np.zeros(len(FILE_COUNTS), np.int64))
            known += (read, quarantine, skip)

    def file_stats(self) -> pa.RecordBatch:
        """The task's counts of each input file, one record per file."""
        ids = sorted(self.file_counts)
        counts = np.array([self.file_counts[i] for i in ids], dtype=np.int64).reshape(-1, 3)
        struct_type = OUTPUT_ARROW.field("input_files").type
        arrays = [pa.array(ids, pa.int64())] + [
            pa.array(counts[:, k], pa.int64()) for k in range(len(FILE_COUNTS))
        ]
        n = len(ids)
        columns = {
            "kind": pa.array(["input_files"] * n, type=pa.string()),
            "input_files": pa.StructArray.from_arrays(arrays, fields=list(struct_type)),
        }
        return _batch(columns, n)

    def remember_ack_sources(self, batch: pa.RecordBatch) -> None:
        """Keep the source of each acknowledgement under the ordinal the kernel will give it.

        The kernel numbers acknowledgements in the order it registers them, which is row order.
        """
        # Read from the wire, contiguous, unlike rows.kind.
        kinds = wire.value_of(_int_column(batch, wire.HEADER), "kind")
        (ack_rows,) = np.nonzero(kinds == int(RowKind.ACK))
        if len(ack_rows) == 0:
            return
        _, sources = self.texts_at(batch, ack_rows)
        for source in sources:
            self.ack_sources[self.acks_seen] = source
            self.acks_seen += 1

    def texts_at(self, batch: pa.RecordBatch, at: np.ndarray) -> tuple[list, list]:
        """The replica and the source of the batch's rows at these indexes.

        A row located by reference gets its source written here, `<file>:row <n>` or
        `<file>:<byte>`, from the driver's listing of the input files (sources.row_reference).
        """
        take = pa.array(at, type=pa.int64())
        details = batch.column(wire.DETAIL).take(take).to_pylist()
        headers = _int_column(batch, wire.HEADER)[at]
        rows = _int_column(batch, "value")[at]
        replicas, sources = [], []
        for detail, header, row in zip(details, headers, rows, strict=True):
            _, _, replica, source = wire.texts_of(detail)
            if source is None and wire.flag_set(header, "has_source_file"):
                file_id = int(wire.value_of(header, "source_file"))
                # Only a file Spark read can be missing from the listing (its `inputFiles()`):
                # the driver names every segment file it hands to the reader.
                unlisted = f"<file with CRC-32 {file_id:#010x}>{ROW_NUMBER}"
                source = self.settings.source_files.get(file_id, unlisted) + str(int(row))
            replicas.append(replica)
            sources.append(source)
        return replicas, sources

    def grow(self) -> None:
        """Make room for what stopped the kernel: more producers, acknowledgements or events."""
        part = self.part[0]
        if part.producers >= len(self.entries):
            self.entries = _grown(self.entries, 2 * len(self.entries))
            self.slots = lookup_table(len(self.entries), 2)
            self.kernel.reindex_slots(self.slots, self.entries, part.producers)
        if part.acks >= len(self.acks):
            self.acks = _grown(self.acks, 2 * len(self.acks))
            self.ack_index = lookup_table(len(self.acks), 4)
            self.kernel.reindex_acks(self.ack_index, self.acks, part.acks)
        need = int(self.out.counts[ROOM_NEEDED])
        for name in OUTPUTS:
            events = getattr(self.out, name)
            if len(events) < need:
                bigger = np.zeros(2 * need, dtype=events.dtype).view(np.recarray)
                self.out = self.out._replace(**{name: bigger})

    def drain(self, batch: pa.RecordBatch | None) -> Iterator[pa.RecordBatch]:
        """Turn the kernel's events into output rows, and empty the event arrays."""
        counts = self.out.counts
        for name in OUTPUTS:
            n = int(counts[COUNT_OF[name]])
            if n == 0:
                continue
            counts[COUNT_OF[name]] = 0
            yield self.records(name, getattr(self.out, name)[:n].copy(), batch)
        # Acknowledgements of finished partitions are judged: forget their sources.
        # Ordinals are consecutive, so the oldest are dropped from the front.
        first_kept = int(self.part[0].first_ack_ordinal) if self.part[0].active else self.acks_seen
        while self.oldest_ack_source < first_kept:
            self.ack_sources.pop(self.oldest_ack_source, None)
            self.oldest_ack_source += 1

    def _partition_columns(self, events: np.ndarray, batch: pa.RecordBatch | None):
        """Topic of each event: from its row of the batch, or the previous batch's last row."""
        tp_rows = np.asarray(events["tp_row"])
        known = tp_rows >= 0
        if batch is None or not known.any():
            topic = pa.array([self.previous_topic] * len(events), type=pa.string())
        else:
            picked = batch.column("topic").take(pa.array(np.where(known, tp_rows, 0)))
            topic = pc.if_else(pa.array(known), picked, pa.scalar(self.previous_topic, pa.string()))
        return topic, _ints(np.asarray(events["partition"]))

    def records(
        self, name: str, events: np.ndarray, batch: pa.RecordBatch | None
    ) -> pa.RecordBatch:
        """The output rows of one kind of event."""
        n = len(events)
        topic, partition = self._partition_columns(events, batch)
        columns: dict[str, pa.Array] = {
            "kind": pa.array([name] * n, type=pa.string()),
            "topic": topic,
            "partition": partition,
        }
        if name == "findings":
            rows = np.asarray(events["row"])
            has_row = rows >= 0
            if batch is not None and has_row.any():
                replicas, sources = self.texts_at(batch, np.where(has_row, rows, 0))
                mask = pa.array(~has_row)
                for column, texts in (("source", sources), ("replica", replicas)):
                    columns[column] = pc.if_else(mask, pa.nulls(n, pa.string()),
                                                 pa.array(texts, pa.string()))  # fmt: skip
                control_types = self.control_types[np.where(has_row, rows, 0)]
                columns["control_type"] = pa.array(
                    control_types, type=pa.int64(), mask=~has_row | (control_types == NULL)
                )
            ack_ordinals = np.asarray(events["ack_ordinal"])
            if (ack_ordinals != NULL).any():
                from_acks = pa.array(
                    [self.ack_sources.get(int(o)) if o != NULL else None for o in ack_ordinals],
                    type=pa.string(),
                )
                columns["source"] = pc.coalesce(
                    columns.get("source", pa.nulls(n, pa.string())), from_acks
                )
            facts = np.asarray(events["facts"])
            struct_fields = [_ints(np.asarray(events[f])) for f in _FINDING_FIELDS] + [
                _ints(facts[:, k]) for k in range(FACTS_PER_FINDING)
            ]
            columns[name] = pa.StructArray.from_arrays(
                struct_fields, fields=list(OUTPUT_ARROW.field(name).type)
            )
        elif name == "producer_state":
            columns[name] = _state_struct(events)
        else:
            struct_type = OUTPUT_ARROW.field(name).type
            arrays = []
            for field in struct_type:
                values = np.asarray(events[field.name])
                arrays.append(
                    pa.array(values, type=pa.bool_()) if field.type == pa.bool_() else _ints(values)
                )
            columns[name] = pa.StructArray.from_arrays(arrays, fields=list(struct_type))
        return _batch(columns, n)

    def quarantine(self, rejected: pa.RecordBatch) -> pa.RecordBatch:
        """Rejected batches of the audited or another replica go to quarantine as they are."""
        kinds = wire.value_of(_int_column(rejected, wire.HEADER), "kind")
        is_batch = (kinds == RowKind.AUDITED) | (kinds == RowKind.REPLICA)
        rejected = rejected.filter(pa.array(is_batch))
        n = rejected.num_rows
        reasons, raws, sources = [], [], []
        for detail in rejected.column(wire.DETAIL).to_pylist():
            # Spark writes the source of every quarantined row (canonical.to_canonical).
            reason, raw, _, source = wire.texts_of(detail)
            reasons.append(reason)
            raws.append(raw)
            sources.append(source)
        columns = {
            "kind": pa.array(["quarantine"] * n, type=pa.string()),
            "topic": rejected.column("topic"),
            "partition": rejected.column("partition"),
            "source": pa.array(sources, pa.string()),
            "quarantine": pa.StructArray.from_arrays(
                [
                    pa.array(reasons, pa.string()),
                    pa.array(raws, pa.string()),
                    rejected.column("base_offset"),
                ],
                fields=list(OUTPUT_ARROW.field("quarantine").type),
            ),
        }
        return _batch(columns, n)


def _state_struct(events: np.ndarray) -> pa.StructArray:
    cached = np.asarray(events["cached"])
    offsets = np.concatenate([[0], np.cumsum(cached)]).astype(np.int32)
    take = np.arange(cached.max() if len(cached) else 0)
    keep = take[None, :] < cached[:, None] if len(take) else np.zeros((len(cached), 0), bool)
    batch_fields = [
        np.asarray(events[f])[:, : keep.shape[1]][keep]
        for f in ("base_sequence", "last_sequence", "base_offset", "last_offset")
    ]
    items = pa.StructArray.from_arrays(
        [pa.array(v, type=pa.int64()) for v in batch_fields], fields=list(_SEED_BATCH)
    )
    cached_batches = pa.ListArray.from_arrays(pa.array(offsets), items)
    struct_type = OUTPUT_ARROW.field("producer_state").type
    arrays = [_ints(np.asarray(events[f.name])) for f in struct_type if f.name != "batches"] + [
        cached_batches
    ]
    return pa.StructArray.from_arrays(arrays, fields=list(struct_type))


def _batch(columns: dict[str, pa.Array], n: int) -> pa.RecordBatch:
    arrays = [columns[f.name] if f.name in columns else pa.nulls(n, f.type) for f in OUTPUT_ARROW]
    return pa.RecordBatch.from_arrays(arrays, schema=OUTPUT_ARROW)


def _grown(records: np.ndarray, size: int) -> np.ndarray:
    bigger = np.zeros(size, dtype=records.dtype).view(np.recarray)
    bigger[: len(records)] = records
    return bigger


def lookup_table(indexed: int, width: int) -> np.ndarray:
    """An empty lookup table of the kernel (`kernel.slot_position`, `kernel.ack_position`).

    Args:
        indexed: how many items it may hold, a power of two (it gets twice the places).
        width: int64 values per place, the last being the value (-1: the place is free).
    """
    if indexed <= 0 or indexed & (indexed - 1):
        raise ValueError(f"a lookup table indexes a power of two of items, not {indexed}")
    return np.full((2 * indexed, width), -1, dtype=np.int64)


def uncompiled_kernel() -> ModuleType:
    """A second copy of the kernel module, left as plain Python (for tests and debugging)."""
    return uncompiled_copy(kernel, "eos_audit.replay._kernel_uncompiled")


def uncompiled_copy(compiled: ModuleType, name: str) -> ModuleType:
    """A plain-Python copy of a module that compiles itself on import.

    Loaded as `name` with compiling off (`EOS_AUDIT_JIT=0`): the same functions, uncompiled.

    Args:
        compiled: the module (the replay kernel, the offset kernel).
        name: the copy's module name.
    """
    spec = importlib.util.spec_from_file_location(name, compiled.__file__)
    module = importlib.util.module_from_spec(spec)
    previous = os.environ.get("EOS_AUDIT_JIT")
    os.environ["EOS_AUDIT_JIT"] = "0"
    try:
        spec.loader.exec_module(module)
    finally:
        if previous is None:
            del os.environ["EOS_AUDIT_JIT"]
        else:
            os.environ["EOS_AUDIT_JIT"] = previous
    return module


def replay_partitions(
    settings: ReplaySettings,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function `mapInArrow` runs over each Spark partition of sorted replay rows."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        started = time.perf_counter()
        yield from _Replayer(settings).run(batches)
        log.debug("replayed a task in %.2f s", time.perf_counter() - started)
        freeze_worker_heap("replay")

    return run
