"""The Arrow side of the offset replay: what `coordinator_audit` runs inside `mapInArrow`.

A task's events arrive sorted by (coordinator partition, offset), in Arrow batches. For each
batch the runner turns the columns the rule reads into one `offset_kernel.OFFSET_EVENT` record
per event, with vectorised Arrow and NumPy (group ids and topics numbered through a dictionary
per batch, a Python dict over its distinct values only, so a task's numbering is the same in
every batch), runs the compiled loop over them with the state it carried from the previous
batch, and builds the output (`coordinator_audit._HISTORY`) column by column: the record's own
columns taken from the Arrow rows by the rows the kernel names, kinds and outcomes by code, the
findings as a list array over the kernel's finding rows.

A transactional record is decided at its marker, often in a later batch: the rows of the still
pending records (the open transactions) are taken out of each batch and carried to the next, so
what the runner holds grows with the open transactions, never with the records.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from eos_audit.processing import offset_kernel

# The columns of the output that are the record's own, as the events have them.
OWN_COLUMNS = (
    "group_id",
    "topic",
    "partition",
    "committed_offset",
    "leader_epoch",
    "metadata",
    "commit_timestamp_ms",
    "producer_id",
    "producer_epoch",
    "coordinator_partition",
    "offset",
    "timestamp",
    "source",
)
_INITIAL = 256


def _filled(batch: pa.RecordBatch, name: str, value: int) -> np.ndarray:
    """An integer column as int64 NumPy, `value` where null."""
    column = batch.column(name)
    if column.null_count:
        column = column.fill_null(value)
    return column.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def _flags(array: pa.Array) -> np.ndarray:
    """A boolean array as NumPy, False where null."""
    if array.null_count:
        array = array.fill_null(False)
    return array.to_numpy(zero_copy_only=False).astype(np.bool_, copy=False)


def _grown(records: np.ndarray, size: int) -> np.ndarray:
    bigger = np.zeros(size, dtype=records.dtype).view(np.recarray)
    bigger[: len(records)] = records
    return bigger


def _records(dtype: np.dtype, size: int) -> np.recarray:
    return np.zeros(size, dtype=dtype).view(np.recarray)


def _index(slots: int, width: int) -> np.ndarray:
    """An empty lookup table for `slots` slots: a power of two of places, at least twice as many."""
    places = 1 << max(1, (2 * slots - 1).bit_length())
    return np.full((places, width), -1, dtype=np.int64)


def _ints(values: np.ndarray) -> pa.Array:
    return pa.array(values, type=pa.int64(), mask=values == offset_kernel.NULL)


class _Numbering:
    """Task-wide numbers of the strings of one column (group ids, topics), by batch dictionary."""

    def __init__(self, null_as: str | None) -> None:
        self.numbers: dict[str, int] = {}
        # What a null stands for ("" for a topic, as the reference's key has it), else -1.
        self.null_as = null_as

    def __len__(self) -> int:
        return len(self.numbers)

    def of(self, column: pa.Array) -> np.ndarray:
        """Each row's number (-1 for a null the column has no stand-in for)."""
        encoded = pc.dictionary_encode(column)
        if isinstance(encoded, pa.ChunkedArray):
            encoded = encoded.combine_chunks()
        numbers = self.numbers
        known = [numbers.setdefault(text, len(numbers)) for text in encoded.dictionary.to_pylist()]
        lookup = np.array([*known, -1], dtype=np.int64)
        indices = encoded.indices
        if indices.null_count:
            if self.null_as is not None:
                lookup[-1] = numbers.setdefault(self.null_as, len(numbers))
            indices = indices.fill_null(len(known))
        return lookup[indices.to_numpy(zero_copy_only=False)]


class OffsetReplayer:
    """One task's replay, carried from Arrow batch to Arrow batch."""

    def __init__(
        self, schema: pa.Schema, kernel: ModuleType = offset_kernel, initial: int = _INITIAL
    ) -> None:
        """A task's replay.

        Args:
            schema: the output's Arrow schema (`coordinator_audit._HISTORY`).
            kernel: the compiled kernel; tests pass the plain-Python one (`uncompiled_kernel`).
            initial: the first size of every array (tests start at 1, to grow each).
        """
        self.kernel = kernel
        self.schema = schema
        k = offset_kernel
        task = _records(k.TASK_STATE, 1)
        task[0].entries_free = task[0].overlaps_free = task[0].owned_free = -1
        self.state = k.State(
            task=task,
            keys=_records(k.KEY_STATE, initial),
            key_index=_index(initial, 4),
            producers=_records(k.PRODUCER, initial),
            producer_index=_index(initial, 2),
            members=np.full(initial, -1, dtype=np.int64),
            live_members=np.full(initial, -1, dtype=np.int64),
            group_flags=np.zeros(initial, dtype=np.int64),
            member_index=_index(initial, 3),
            entries=_records(k.ENTRY, initial),
            overlaps=_records(k.OVERLAP, initial),
            owned=_records(k.OWNED, initial),
            history=_records(k.HISTORY, initial),
            findings=_records(k.FINDING, initial),
        )
        self.groups = _Numbering(null_as=None)
        self.topics = _Numbering(null_as="")
        self.member_ids = _Numbering(null_as=None)
        # The own columns of the rows the kernel may name: the carried rows of pending records
        # first, then the batch being replayed.
        self.carried = self.own_columns(
            pa.RecordBatch.from_pylist(
                [],
                schema=pa.schema(
                    [
                        (n, self.schema.field("record_offset" if n == "offset" else n).type)
                        for n in OWN_COLUMNS
                    ]
                ),
            )
        )
        self.rows = self.carried

    # --- input ----------------------------------------------------------------------------------
    def events_of(self, batch: pa.RecordBatch) -> np.recarray:
        """The kernel's events of one Arrow batch (`offset_kernel.OFFSET_EVENT`)."""
        events = np.empty(batch.num_rows, dtype=offset_kernel.OFFSET_EVENT).view(np.recarray)
        for name in ("coordinator_partition", "offset"):
            events[name] = _filled(batch, name, 0)
        events.producer_id = _filled(batch, "producer_id", offset_kernel.NO_PRODUCER_ID)
        control = batch.column("control_type")
        events.is_marker = _flags(pc.is_valid(control))
        events.is_commit = _flags(pc.equal(control, "COMMIT"))
        events.record_type = _filled(batch, "record_type", -1)
        events.is_tombstone = _flags(batch.column("is_tombstone"))
        events.is_skipped = _flags(batch.column("is_skipped"))
        events.group = self.groups.of(batch.column("group_id"))
        events.topic = self.topics.of(batch.column("topic"))
        events.partition = _filled(batch, "partition", 0)
        events.committed_offset = _filled(batch, "committed_offset", 0)
        events.member_count = _filled(batch, "member_count", 0)
        events.member = self.member_ids.of(batch.column("member_id"))
        if len(self.groups) > len(self.state.members):
            grown = {}
            for name, empty in (("members", -1), ("live_members", -1), ("group_flags", 0)):
                by_group = np.full(2 * len(self.groups), empty, dtype=np.int64)
                by_group[: len(self.state.members)] = getattr(self.state, name)
                grown[name] = by_group
            self.state = self.state._replace(**grown)
        return events

    def own_columns(self, batch: pa.RecordBatch) -> pa.Table:
        """The batch's own columns, the producer's -1 where null (as `Event` has them)."""
        columns = []
        for name in OWN_COLUMNS:
            column = batch.column(name)
            if name in ("producer_id", "producer_epoch") and column.null_count:
                column = column.fill_null(-1)
            wanted = self.schema.field("record_offset" if name == "offset" else name).type
            if column.type != wanted:  # e.g. Spark's large strings, when it hands those
                column = column.cast(wanted)
            columns.append(column)
        return pa.Table.from_arrays(columns, names=list(OWN_COLUMNS))

    # --- the loop -------------------------------------------------------------------------------
    def run(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """The output batches of a task's input batches."""
        k = self.kernel
        for batch in batches:
            if batch.num_rows == 0:
                continue
            events = self.events_of(batch)
            # Room for the rows of one call per batch, most often: each event decides at most
            # one record of its own, and a marker or the partition's end the pending ones.
            rows = len(events) + int(self.state.task[0].entries_used)
            if len(self.state.history) < rows:
                history = _records(offset_kernel.HISTORY, 1 << (rows - 1).bit_length())
                self.state = self.state._replace(history=history)
            first_row = self.carried.num_rows
            self.rows = pa.concat_tables([self.carried, self.own_columns(batch)])
            start = 0
            while start < len(events):
                start = k.replay(events, start, first_row, self.state)
                yield from self.drain()
                if start < len(events):
                    self.grow()
            self.carry()
        while not k.finish(self.state):
            yield from self.drain()
            self.grow()
        yield from self.drain()

    def carry(self) -> None:
        """Keep the rows of the pending records only, renumbered in the entries."""
        entries = self.state.entries[: self.state.task[0].entries_hwm]
        (pending,) = np.nonzero(entries.in_use)
        self.carried = self.rows.take(pa.array(entries.row[pending], type=pa.int64()))
        self.state.entries.row[pending] = np.arange(len(pending), dtype=np.int64)
        self.rows = self.carried

    def grow(self) -> None:
        """Make room for what stopped the kernel (`TASK_STATE.need_*`); outputs are drained."""
        state, k = self.state, offset_kernel
        task = state.task[0]
        grown: dict[str, np.ndarray] = {}
        if len(state.history) < task.need_rows:
            grown["history"] = _records(k.HISTORY, 2 * int(task.need_rows))
        if len(state.findings) < task.need_findings:
            grown["findings"] = _records(k.FINDING, 2 * int(task.need_findings))
        for name, used, need in (
            ("entries", task.entries_used, task.need_entries),
            ("overlaps", task.overlaps_used, task.need_overlaps),
            ("owned", task.owned_used, task.need_owned),
        ):
            pool = getattr(state, name)
            if len(pool) - used < need:
                grown[name] = _grown(pool, 2 * (len(pool) + int(need)))
        if len(state.keys) - task.keys < task.need_keys:
            grown["keys"] = _grown(state.keys, 2 * len(state.keys))
            grown["key_index"] = _index(len(grown["keys"]), 4)
            self.kernel.reindex_keys(grown["key_index"], grown["keys"], task.keys)
        if len(state.producers) - task.producers < task.need_producers:
            grown["producers"] = _grown(state.producers, 2 * len(state.producers))
            grown["producer_index"] = _index(len(grown["producers"]), 2)
            self.kernel.reindex_producers(
                grown["producer_index"], grown["producers"], task.producers
            )
        capacity = len(state.member_index) // 2
        if capacity - task.member_keys < task.need_members:
            grown["member_index"] = _index(2 * (capacity + int(task.need_members)), 3)
            self.kernel.reindex_members(grown["member_index"], state.member_index)
        self.state = state._replace(**grown)

    # --- output ---------------------------------------------------------------------------------
    def drain(self) -> Iterator[pa.RecordBatch]:
        """The rows the kernel wrote, as one output batch; the output arrays emptied."""
        task = self.state.task[0]
        n, found = int(task.rows), int(task.findings)
        if n == 0:
            return
        task.rows = task.findings = 0
        history = self.state.history[:n]
        own = self.rows.take(pa.array(history.row, type=pa.int64()))
        counts = history.findings
        offsets = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(counts, out=offsets[1:])
        assert offsets[-1] == found, (offsets[-1], found)
        columns = {name: own.column(name).combine_chunks() for name in OWN_COLUMNS}
        columns["record_offset"] = columns.pop("offset")
        columns["kind"] = _names(offset_kernel.KIND_NAMES, history.kind)
        columns["outcome"] = _names(offset_kernel.OUTCOME_NAMES, history.outcome)
        columns["previous_committed_offset"] = _ints(history.previous_committed_offset)
        columns["marker_offset"] = _ints(history.marker_offset)
        columns["findings"] = self.finding_lists(offsets, self.state.findings[:found])
        yield pa.RecordBatch.from_arrays([columns[f.name] for f in self.schema], schema=self.schema)

    def finding_lists(self, offsets: np.ndarray, findings: np.recarray) -> pa.Array:
        """Each row's findings, a list of structs, from the kernel's finding rows in row order."""
        struct_type = self.schema.field("findings").type.value_type
        causes = findings.cause
        values = [
            _names(offset_kernel.FINDING_NAMES, findings.finding_type),
            _names(offset_kernel.CAUSE_NAMES, np.maximum(causes, 0), mask=causes < 0),
            *[_ints(np.asarray(findings[f.name])) for f in list(struct_type)[2:]],
        ]
        items = pa.StructArray.from_arrays(values, fields=list(struct_type))
        return pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()), items)


def _names(names: tuple[str, ...], codes: np.ndarray, mask: np.ndarray | None = None) -> pa.Array:
    """The strings of codes (null where `mask`)."""
    indices = pa.array(np.ascontiguousarray(codes, dtype=np.int32), mask=mask)
    return pa.array(names, type=pa.string()).take(indices)


def replay_batches(
    batches: Iterator[pa.RecordBatch], schema: pa.Schema, kernel: ModuleType = offset_kernel
) -> Iterator[pa.RecordBatch]:
    """Every OffsetCommit row of a task's events (sorted by coordinator partition and offset)."""
    yield from OffsetReplayer(schema, kernel).run(batches)


def uncompiled_kernel() -> ModuleType:
    """A second copy of the offset kernel, left as plain Python (for tests and debugging)."""
    # Here, not at the top: the replay's runner compiles the broker kernel as it is imported,
    # which an offset replay on an executor must not wait for.
    from eos_audit.replay.runner import uncompiled_copy

    return uncompiled_copy(offset_kernel, "eos_audit.processing._offset_kernel_uncompiled")
