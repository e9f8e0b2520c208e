"""The replay kernel: the partition leader's producer-state validation, one row at a time.

Plain sequential Python that mirrors the broker, written in the subset numba compiles: the same
functions run compiled for an audit (this module compiles the kernel's modules on import as one
program, `_compile`) and uncompiled for debugging (`EOS_AUDIT_JIT=0`, `runner.uncompiled_kernel`).
Each check is named after the Kafka method it replays and cites the section of docs/rules.md that
states the rule; the edge cases are docs/replay_semantics.md.

The kernel's modules, leaf first, each along the Kafka class it replays:

- `basics`: constants (finding codes, causes, errors, row kinds, wire readers) and small helpers;
- `unpack`: the wire into the kernel's rows;
- `producer_entry`: ProducerStateEntry (the batch cache, the epoch) and its expiry;
- `emit`: findings and the other records the kernel writes;
- `lookups`: the producers' entry slots and the acknowledgements, by key;
- `append_info`: ProducerAppendInfo's checks (`validate_*`) and updates (`append_*`);
- `producer_state_manager`: one producer row, validated, then applied;
- `partition_log`: UnifiedLog's checks of the log itself (offsets, leader epochs, replicas);
- `acks`: client acknowledgements;
- this module: the loop over a batch's rows and the end of a partition.

As in Kafka, an audited batch is checked against the producer's entry as it stands and only an
applied batch changes it. The rows of a partition arrive in `wire.REPLAY_ORDER`; state lives in
record arrays (`replay.state`) and is carried from one Arrow batch to the next. Memory grows with
the producers (and acknowledgements) of the partition being replayed, never with its batches.
"""

from __future__ import annotations

from eos_audit.replay.acks import (
    judge_acks,
    match_acks,
    register_ack,
)
from eos_audit.replay.basics import (
    ACK,
    AUDITED,
    FINDINGS,
    HIGH_WATERMARK_CHECKPOINT,
    LEADER_EPOCH_ENTRY,
    LOG_START_CHECKPOINT,
    OFFSET_OVERLAP,
    PARTITION_SUMMARY,
    PRODUCER_SESSIONS,
    PRODUCER_STATE,
    REPLICA,
    ROW_ROOM,
    SEED_BATCH,
    SEED_STATE,
    STATE_COVERAGE,
    TRANSACTIONS,
    log_start_of,
    max_or_null,
)
from eos_audit.replay.emit import (
    emit,
    emit_final_state,
    emit_open_transaction,
    flush_summary,
)
from eos_audit.replay.lookups import (
    find_slot,
)
from eos_audit.replay.partition_log import (
    begin_partition,
    check_audited_batch,
    check_replica_batch,
    count_audited_batch,
    count_occurrence,
    in_snapshot,
    is_same_batch,
)
from eos_audit.replay.producer_state_manager import (
    remember_corrupt_claim,
    replay_producer_row,
    takes_part_in_replay,
)
from eos_audit.replay.state import (
    ACKS_SEEN,
    NULL,
    ROOM_NEEDED,
)


# ------------------------------------------------------------------------------------------------
# The end of a partition: what is still open, the summaries and the final producer state
# ------------------------------------------------------------------------------------------------
def room_to_finish(part):
    """Events the end of the partition may emit into any one output."""
    return part.producers + part.acks + 2


def finish_partition(part, entries, slots, acks, ack_index, params, out, tp_row, is_compacted):
    """Emit the partition's end-of-log records and forget its state."""
    judge_acks(part, acks, out, tp_row, is_compacted)
    clock = params.as_of_ms if params.as_of_ms != NULL else part.latest_timestamp
    log_end = part.max_last_offset + 1 if part.max_last_offset != NULL else NULL
    # With --since-state the seeded state may cover more than this export holds.
    log_end = max_or_null(log_end, part.covered_end)
    for slot in range(part.producers):
        e = entries[slot]
        flush_summary(e, out, tp_row, part)
        if e.txn_open and e.has_audited:
            emit_open_transaction(e, part, out, tp_row, clock, params)
        emit_final_state(e, part, out, tp_row, log_end)
    if part.batches + part.replica_batches + part.skipped_batches > 0:
        p = out.partition_summary[out.counts[PARTITION_SUMMARY]]
        out.counts[PARTITION_SUMMARY] += 1
        p.tp_row = tp_row
        p.partition = part.partition
        p.first_offset = part.first_offset
        p.last_offset = part.max_last_offset
        p.batches = part.batches
        p.replica_batches = part.replica_batches
        p.batches_with_producer_id = part.batches_with_producer_id
        p.records = part.records if part.batches > 0 else NULL
        p.markers = part.markers if part.batches > 0 else NULL
        p.uncounted_from = part.uncounted_from
        p.uncounted_to = part.uncounted_to
        p.unattributed_from = part.unattributed_from
        p.unattributed_to = part.unattributed_to
        p.log_start_offset = log_start_of(part)
        p.log_start_checkpoint = part.log_start_checkpoint
        p.max_timestamp = part.max_timestamp
        p.producers = part.audited_producers
        p.batches_skipped = part.skipped_batches
        p.covered_end = part.covered_end
        p.skipped_from = part.skipped_from
        p.skipped_to = part.skipped_to
        p.skipped_max_timestamp = part.skipped_max_timestamp
    slots[:, 1] = -1
    if part.acks > 0:
        ack_index[:, 3] = -1
    part.active = False


# ------------------------------------------------------------------------------------------------
# The loop
# ------------------------------------------------------------------------------------------------
def has_room(out, room):
    """Whether every output has room for `room` more events."""
    counts = out.counts
    return (
        len(out.findings) - counts[FINDINGS] >= room
        and len(out.transactions) - counts[TRANSACTIONS] >= room
        and len(out.producer_sessions) - counts[PRODUCER_SESSIONS] >= room
        and len(out.partition_summary) - counts[PARTITION_SUMMARY] >= room
        and len(out.producer_state) - counts[PRODUCER_STATE] >= room
    )


def replay(
    rows, start, previous_compacted, params, partition_state, entries, slots, acks, ack_index, out
):
    """Replay rows[start:] of one Arrow batch; state carries over to the next batch.

    Returns the index of the first row not replayed: the number of rows when all were, else the
    row at which an output, the producer entries or the acknowledgements ran out of room
    (`out.counts[ROOM_NEEDED]` says how much output room it needs); the caller drains or grows them
    and calls again from there.
    """
    part = partition_state[0]
    n = len(rows)
    for i in range(start, n):
        row = rows[i]
        room = ROW_ROOM
        if row.tp_start and part.active:
            room += room_to_finish(part)
        if not has_room(out, room):
            out.counts[ROOM_NEEDED] = room
            return i
        if row.tp_start:
            if part.active:
                compacted = rows[i - 1].is_compacted if i > 0 else previous_compacted
                finish_partition(
                    part, entries, slots, acks, ack_index, params, out, i - 1, compacted
                )
            begin_partition(part, row.partition)
            part.first_ack_ordinal = out.counts[ACKS_SEEN]
        kind = row.kind
        if kind == LOG_START_CHECKPOINT:
            part.log_start_checkpoint = max_or_null(part.log_start_checkpoint, row.value)
        elif kind == HIGH_WATERMARK_CHECKPOINT:
            part.high_watermark = max_or_null(part.high_watermark, row.value)
        elif kind == ACK:
            if not register_ack(row, part, acks, ack_index, out.counts):
                out.counts[ROOM_NEEDED] = 0
                return i
        elif kind == SEED_BATCH or kind == SEED_STATE:  # noqa: SIM109 - plain ints compile best
            if not replay_producer_row(row, part, entries, slots, params, out):
                out.counts[ROOM_NEEDED] = 0
                return i
        elif kind == STATE_COVERAGE:
            part.covered_end = max_or_null(part.covered_end, row.value)
        elif kind == LEADER_EPOCH_ENTRY:
            part.epoch_entry_epoch = row.value
            part.epoch_entry_start = row.base_offset
        elif kind == AUDITED:
            if in_snapshot(row, part):
                continue
            if (
                part.producers >= len(entries)
                and takes_part_in_replay(row)
                and find_slot(slots, row.producer_id) < 0
            ):
                out.counts[ROOM_NEEDED] = 0
                return i
            if part.first_offset == NULL:
                part.first_offset = row.base_offset  # the exported log starts here
            count_occurrence(part, row.base_offset)
            closed = out.counts[TRANSACTIONS]
            if is_same_batch(row, part):
                # The export holds the batch before it twice (ties are ordered by every field,
                # so the copies are adjacent). A log holds one batch at an offset: this is a
                # bad export (OFFSET_OVERLAP), not a second write of the batch's records, and
                # the copy is not replayed again (docs/replay_semantics.md, Scope).
                emit(out, OFFSET_OVERLAP, row, part, previous=part.max_last_offset)
            else:
                check_audited_batch(row, part, out)
                if takes_part_in_replay(row):
                    replay_producer_row(row, part, entries, slots, params, out)
                elif row.crc_valid == 0:
                    remember_corrupt_claim(row, entries, slots)
                match_acks(row, part, acks, ack_index)
            count_audited_batch(row, part, out.counts[TRANSACTIONS] > closed)
        elif kind == REPLICA:
            if in_snapshot(row, part):
                continue
            count_occurrence(part, row.base_offset)
            check_replica_batch(row, part, out)
    return n


def finish(partition_state, entries, slots, acks, ack_index, params, out, tp_row, is_compacted):
    """The end of the input: finish the partition being replayed.

    Returns False when the outputs lack room (`out.counts[ROOM_NEEDED]` says how much).
    """
    part = partition_state[0]
    if not part.active:
        return True
    room = room_to_finish(part)
    if not has_room(out, room):
        out.counts[ROOM_NEEDED] = room
        return False
    finish_partition(part, entries, slots, acks, ack_index, params, out, tp_row, is_compacted)
    return True


# What every row calls with arrays among its arguments. Compiled as functions of their own, each
# call copied the descriptor of every array it was passed (7 words each) onto the stack, and the
# calls of a row passed about 200 words: that was more than half the kernel's time. numba inlines
# these into their callers instead (measured on 100,000 rows of 40 producers: 85 ns a row before,
# 35-40 after; a process compiles the kernel in 14-15.5 s instead of 10). Helpers that take only
# scalars and records (passed as one pointer) are left to LLVM, which inlines the small ones.
# Measured on 2M rows of 40 producers (alternated, best of 3 each): check_sequence, which takes
# records only since it returns its verdict (report_sequence emits the finding), replays in
# 37.7-39.9 ns a row compiled apart against 42.8-44.5 inlined; the functions of this list that
# take only records since they take the row record (in_snapshot, takes_part_in_replay,
# is_client_append, record_estimate, is_same_batch, append_data_batch, remember_log_row,
# count_audited_batch) stay inlined: compiled apart, 41.7 ns a row against 37.7 (though the
# kernel then compiled in 13.9 s against about 20).
INLINED_PER_ROW = frozenset({
    "has_room", "in_snapshot", "takes_part_in_replay", "find_slot", "slot_position",
    "slot_of", "check_audited_batch", "replay_producer_row", "match_acks", "count_audited_batch",
    "is_client_append", "validate_data_batch", "validate_end_txn_marker", "check_producer_epoch",
    "check_coordinator_epoch", "append_data_batch", "append_end_txn_marker",
    "remember_log_row", "summarise", "record_estimate", "is_same_batch", "find_duplicate_batch",
})  # fmt: skip


def _compile() -> list[str]:
    """Compile the kernel's modules as one program; this module gets every compiled function.

    The runner calls the kernel through this module (`kernel.replay`, `kernel.unpack_rows`...),
    so each function of each module is here by its name, compiled (`kernel_cache.compile_program`,
    which also keys numba's cache). The modules themselves stay plain Python. `EOS_AUDIT_JIT=0`
    (or numba missing) leaves the plain functions, which is what the unit tests of the state
    machine exercise.

    Returns:
        The names of the kernel's functions.
    """
    import importlib

    from eos_audit.replay.kernel_cache import KERNEL_MODULES, compile_program

    # This module last, whatever its name (runner.uncompiled_kernel loads a copy under another).
    *others, last = KERNEL_MODULES
    assert last == "eos_audit.replay.kernel", last
    namespace = globals()
    modules = [*(vars(importlib.import_module(name)) for name in others), namespace]
    for module in modules:  # every function of the kernel by its name here, compiled or not
        for name, value in module.items():
            if callable(value) and getattr(value, "__module__", None) == module["__name__"]:
                namespace.setdefault(name, value)
    return compile_program(modules, namespace, INLINED_PER_ROW)


KERNEL_FUNCTIONS = _compile()
COMPILED = hasattr(globals()["replay"], "py_func")
