"""The replay kernel's plain Python, driven directly with Arrow batches (no Spark, no compiler).

These are the state machine's edge cases (docs/replay_semantics.md): sequence wraparound, the
5-batch cache and the duplicate look-back, markers of transactions v1 and v2, expiry, seeded state,
coordinator appends, corrupt batches, and state carried from one Arrow batch to the next. The
same functions run compiled in every Spark test; here they run as written.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from eos_audit.findings import BY_CODE, Cause, KafkaError
from eos_audit.replay.runner import ReplaySettings, _Replayer, uncompiled_kernel
from eos_audit.replay.state import DUPLICATE_LOOKBACK
from eos_audit.replay.wire import REPLAY_ARROW, ControlType, RowKind, pack

ARROW = REPLAY_ARROW
REPO = Path(__file__).resolve().parents[2]
KERNEL = uncompiled_kernel()
MAX = 2_147_483_647
DAY = 86_400_000
TS = 1_700_000_000_000
SETTINGS = ReplaySettings(
    expiration_ms=DAY,
    hanging_after_ms=1_200_000,
    as_of_ms=None,
    unknown_producer_error=int(KafkaError.NONE),
    compacted_regex=None,
    coordinator_regex="__consumer_offsets|__transaction_state",
)


def test_the_kernel_under_test_is_plain_python():
    assert not KERNEL.COMPILED
    assert not hasattr(KERNEL.replay, "py_func")


def test_the_kernel_imports_no_pyspark():
    # The kernel and the wire layout it reads run without Spark: replay.wire_columns is the wire's
    # Spark side, and nothing the kernel imports may import it (or PySpark) again.
    code = (
        "import sys, eos_audit.replay.kernel as k; "
        "assert k.__file__.startswith(sys.argv[1]), k.__file__; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pyspark'))"
    )
    env = {**os.environ, "EOS_AUDIT_JIT": "0", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code, str(REPO)], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["[]"]


def test_every_function_inlined_per_row_is_a_kernel_function():
    # A renamed function left in the list would silently be compiled apart again (slower).
    assert KERNEL.INLINED_PER_ROW.issubset(KERNEL.KERNEL_FUNCTIONS)
    assert "replay" not in KERNEL.INLINED_PER_ROW  # the entry point the runner calls


def row(kind=RowKind.AUDITED, **values) -> dict:
    out = dict.fromkeys(ARROW.names)
    out.update(topic="t", partition=0, kind=int(kind), is_transactional=False, is_control=False)
    out.update(values)
    return out


def data(offset, seq, n=1, *, pid=1, epoch=0, ts=None, txn=False, **values) -> dict:
    last_seq = seq if seq < 0 else (seq + n - 1) % (MAX + 1)
    return row(
        base_offset=offset, last_offset=offset + n - 1, producer_id=pid, producer_epoch=epoch,
        base_sequence=seq, last_sequence=last_seq, record_count=n, magic=2,
        timestamp=TS + offset if ts is None else ts, is_transactional=txn, **values,
    )


def marker(offset, *, pid=1, epoch=0, coordinator=0, commit=True) -> dict:
    kind = ControlType.COMMIT if commit else ControlType.ABORT
    return row(
        base_offset=offset, last_offset=offset, producer_id=pid, producer_epoch=epoch,
        base_sequence=-1, last_sequence=-1, record_count=1, magic=2, timestamp=TS + offset,
        is_transactional=True, is_control=True, control_type=int(kind),
        coordinator_epoch=coordinator,
    )


def replay(rows: list[dict], *, batch_size: int | None = None, settings=SETTINGS) -> dict:
    """Run the uncompiled kernel; return its records by kind (findings as readable tuples)."""
    size = batch_size or max(len(rows), 1)
    batches = [
        pack(pa.RecordBatch.from_pylist(rows[i : i + size], schema=ARROW))
        for i in range(0, len(rows), size)
    ]
    out: dict[str, list] = {}
    for batch in _Replayer(settings, KERNEL).run(iter(batches)):
        for record in batch.to_pylist():
            kind = record["kind"]
            if kind == "findings":
                f = record["findings"]
                out.setdefault(kind, []).append(
                    (
                        BY_CODE[f["finding_code"]].name,
                        f["base_offset"],
                        Cause(f["cause"]).name if f["cause"] else None,
                        KafkaError(f["kafka_error"]).name if f["kafka_error"] else None,
                        f["expected_sequence"],
                        f["previous_offset"],
                    )
                )
            else:
                out.setdefault(kind, []).append(record)
    return out


def findings(rows, **kw) -> list[tuple]:
    return replay(rows, **kw).get("findings", [])


OOS = "OUT_OF_ORDER_SEQUENCE_NUMBER"


def test_a_clean_producer_gives_nothing_whatever_the_arrow_batch_size():
    rows = [data(i * 2, i * 2, n=2) for i in range(10)]
    for size in (1, 3, 10):
        assert findings(rows, batch_size=size) == []


def test_wraparound_continues_at_zero_and_a_skip_past_it_is_a_gap():
    assert findings([data(0, MAX - 1, n=2), data(2, 0, n=3)]) == [
        ("UNKNOWN_PRODUCER", 0, "UNEXPLAINED", None, 0, None)
    ]
    # MAX then 2: sequences 0 and 1 are missing, a gap (not an overlap) measured modulo 2^31
    assert findings([data(0, MAX - 1, n=2), data(2, 2)])[1:] == [
        ("SEQUENCE_GAP", 2, "UNEXPLAINED", OOS, 0, 0)
    ]


def test_the_five_batch_cache_decides_the_kafka_error_of_a_duplicate():
    rows = [data(i, i) for i in range(7)]
    in_cache = findings([*rows, data(7, 2)])  # 5th most recent: still cached
    beyond = findings([*rows, data(7, 1)])  # 6th most recent: evicted, the leader says OOS
    assert in_cache == [("DUPLICATE_BATCH", 7, None, None, None, 2)]
    assert beyond == [("DUPLICATE_BATCH", 7, None, OOS, None, 1)]


def test_a_repeat_beyond_the_look_back_is_what_the_broker_sees():
    rows = [data(i, i) for i in range(DUPLICATE_LOOKBACK + 2)]
    end = len(rows)
    assert findings([*rows, data(end, 2)]) == [("DUPLICATE_BATCH", end, None, OOS, None, 2)]
    assert findings([*rows, data(end, 1)]) == [("SEQUENCE_OVERLAP", end, None, OOS, end, end - 1)]


def test_a_batch_that_follows_on_can_still_repeat_one_cached_before_a_reset_or_a_wrap():
    # The look-back skips its scan while the cache is one rising run (kernel.find_duplicate_batch);
    # a reset or a batch wrapping past INT32_MAX ends the run, so these repeats are still found.
    after_reset = [data(0, 0, n=5), data(5, 5, n=5), data(10, 10, n=10), data(20, 0, n=10),
                   data(30, 10, n=10)]  # fmt: skip
    assert findings(after_reset) == [
        ("SEQUENCE_RESET", 20, "UNEXPLAINED", OOS, 20, 10),
        ("DUPLICATE_BATCH", 30, None, None, None, 10),
    ]
    after_wrap = [data(0, MAX - 4, n=10), data(10, 5, n=5), data(15, MAX - 4, n=10)]
    assert findings(after_wrap)[1:] == [("DUPLICATE_BATCH", 15, None, None, None, 0)]
    # Another epoch's batch with the same sequences is no repeat.
    assert findings([data(0, 0, n=5), data(5, 0, n=5, epoch=1), data(10, 5, n=5, epoch=1)]) == []


def test_markers_v1_continue_the_sequence_and_v2_restart_it():
    v1 = [data(0, 0, txn=True), marker(1), data(2, 1, txn=True), marker(3)]
    v2 = [data(0, 0, txn=True), marker(1, epoch=1), data(2, 0, epoch=1, txn=True),
          marker(3, epoch=2)]  # fmt: skip
    assert findings(v1) == []
    assert findings(v2) == []
    # after a v2 marker the old sequence does not continue: the new epoch must start at 0
    assert findings([data(0, 0, txn=True), marker(1, epoch=1), data(2, 1, epoch=1)]) == [
        ("SEQUENCE_GAP", 2, "UNEXPLAINED", OOS, 0, None)
    ]
    transactions = replay(v2)["transactions"]
    assert [(t["transactions"]["first_offset"], t["transactions"]["marker_offset"])
            for t in transactions] == [(0, 1), (2, 3)]  # fmt: skip


def test_expiry_forgets_the_producer_unless_a_transaction_is_open():
    expired = [data(0, 0, ts=TS), data(1, 5, ts=TS + DAY)]
    assert findings(expired) == [("UNKNOWN_PRODUCER", 1, "PRODUCER_EXPIRY", None, 0, 0)]
    open_txn = [data(0, 0, ts=TS, txn=True), data(1, 5, ts=TS + DAY, txn=True)]
    assert findings(open_txn) == [
        ("SEQUENCE_GAP", 1, "UNEXPLAINED", OOS, 1, 0),
        # and open for a day at the end of the log
        ("HANGING_TRANSACTION", 0, None, None, None, 0),
    ]


def test_seeded_state_continues_and_a_zombie_is_fenced():
    seed = [
        row(RowKind.SEED_BATCH, producer_id=1, producer_epoch=3, base_sequence=0,
            last_sequence=9, base_offset=0, last_offset=9, timestamp=TS, magic=2),
        row(RowKind.SEED_STATE, producer_id=1, producer_epoch=3, base_sequence=-1,
            last_sequence=-1, coordinator_epoch=7, timestamp=TS, magic=2),
    ]  # fmt: skip
    assert findings([*seed, data(10, 10, epoch=3)]) == []
    assert findings([*seed, data(10, 10, epoch=2)]) == [
        ("FENCED_PRODUCER_EPOCH", 10, None, "INVALID_PRODUCER_EPOCH", None, None)
    ]
    state = replay([*seed, data(10, 10, epoch=3)])["producer_state"][0]["producer_state"]
    assert (state["producer_epoch"], state["coordinator_epoch"]) == (3, 7)
    assert state["state_offset"] == 11
    assert [b["base_sequence"] for b in state["batches"]] == [0, 10]


def covered_seed() -> list[dict]:
    """--since-state's rows: producer 1's state after offsets 0-9, covering offsets below 10."""
    return [
        row(RowKind.SEED_BATCH, producer_id=1, producer_epoch=0, base_sequence=0,
            last_sequence=9, base_offset=0, last_offset=9, timestamp=TS, magic=2),
        row(RowKind.SEED_STATE, producer_id=1, producer_epoch=0, base_sequence=-1,
            last_sequence=-1, timestamp=TS, magic=2),
        row(RowKind.STATE_COVERAGE, value=10),
    ]  # fmt: skip


def test_since_state_skips_what_the_seed_covers_and_keeps_its_offset():
    seed = covered_seed()
    # Offsets 0-9 (the seed's own last batch, re-exported) are skipped, not a duplicate; offset
    # 10 continues the seed's sequence.
    again = data(0, 0, n=10)
    out = replay([*seed, again, data(10, 10)])
    assert out.get("findings", []) == []
    stats = out["partition_summary"][0]["partition_summary"]
    assert (stats["batches"], stats["batches_skipped"], stats["first_offset"]) == (1, 1, 10)
    # Everything covered: nothing audited, and the state still covers offset 10.
    out = replay([*seed, again])
    assert out["partition_summary"][0]["partition_summary"]["batches_skipped"] == 1
    assert out["producer_state"][0]["producer_state"]["state_offset"] == 10
    # Without the coverage row the same re-exported batch is replayed: a duplicate.
    assert [f[0] for f in findings([*seed[:2], again])] == ["DUPLICATE_BATCH"]


def _spans(rows: list[dict]) -> dict:
    stats = replay(rows)["partition_summary"][0]["partition_summary"]
    names = ("uncounted_from", "uncounted_to", "unattributed_from", "unattributed_to")
    return {name: stats[name] for name in names}


def test_offsets_above_the_covered_offset_that_no_batch_replayed_are_uncounted():
    seed = covered_seed()

    def uncounted(rows: list[dict]) -> tuple:
        spans = _spans([*seed, *rows])
        return spans["uncounted_from"], spans["uncounted_to"]

    # The export resumes where the seeded state ends: every offset is held.
    assert uncounted([data(0, 0, n=10), data(10, 10)]) == (None, None)
    assert uncounted([data(10, 10)]) == (None, None)
    # It resumes above it (a segment not exported): the offsets between held no record here,
    # and the earlier run did not count them.
    assert uncounted([data(0, 0, n=10), data(13, 10)]) == (10, 12)
    assert uncounted([data(13, 10)]) == (10, 12)
    # A skipped batch across the covered offset: its offsets above it are not replayed.
    assert uncounted([data(5, 5, n=8), data(13, 13)]) == (10, 12)
    assert uncounted([data(5, 5, n=8)]) == (10, 12)


def test_the_offsets_the_export_cannot_count_by_offset_are_kept_as_spans():
    # Whole: every offset holds one record, and the marker closes producer 1's transaction.
    whole = [data(0, -1, n=2, pid=-1), data(2, 0, n=2, txn=True), marker(4), data(5, -1, pid=-1)]
    assert _spans(whole) == dict.fromkeys(
        ("uncounted_from", "uncounted_to", "unattributed_from", "unattributed_to")
    )
    cleaned = [
        data(0, -1, n=2, pid=-1),
        {**data(2, -1, n=4, pid=-1), "record_count": 2},  # the cleaner kept 2 of 2-5's records
        data(8, -1, n=2, pid=-1),  # 6-7: a hole between batches
        data(9, -1, n=2, pid=-1),  # 9 held twice
        marker(11, pid=2),  # producer 2 has no transaction open here
        data(12, -1, pid=-1),
        marker(13, pid=3, commit=False),  # nor has producer 3
        data(14, -1, pid=-1),
    ]
    assert _spans(cleaned) == {
        "uncounted_from": 2, "uncounted_to": 9, "unattributed_from": 11, "unattributed_to": 13,
    }  # fmt: skip
    # A hole alone: its offsets only, not the batches around it.
    assert _spans([data(0, -1, n=2, pid=-1), data(5, -1, n=2, pid=-1)])["uncounted_from"] == 2
    assert _spans([data(0, -1, n=2, pid=-1), data(5, -1, n=2, pid=-1)])["uncounted_to"] == 4


def test_coordinator_appends_take_no_cache_slot_and_get_no_sequence_check():
    rows = [data(0, 0), data(1, -1), data(2, 1), data(3, -1)]
    assert findings(rows) == []
    offsets = replay(rows, settings=SETTINGS)["producer_state"][0]["producer_state"]["batches"]
    assert [b["base_offset"] for b in offsets] == [0, 2]


def test_a_corrupt_batch_explains_exactly_its_own_gap():
    corrupt = data(1, 1, n=2, crc_valid=False)
    assert findings([data(0, 0), corrupt, data(3, 3)]) == [
        ("CORRUPT_BATCH", 1, None, "CORRUPT_MESSAGE", None, None)
    ]
    # a gap larger than what the corrupt batch claims is still reported
    assert ("SEQUENCE_GAP", 3, "UNEXPLAINED", OOS, 1, 0) in findings(
        [data(0, 0), corrupt, data(3, 5)]
    )


@pytest.mark.parametrize("size", [1, 2, 3, 8])
def test_an_offset_gap_names_its_hole_unless_a_quarantined_batch_lies_in_it(size):
    quarantined = {**data(3, 3, n=2), "quarantine_reason": "cut", "producer_id": None}
    rows = [
        data(0, 0, n=3),
        quarantined,
        data(5, 5),  # 3-4: the quarantined batch
        data(9, 6),  # 6-8: nobody's
        {**data(0, 0), "partition": 1},
        {**quarantined, "partition": 1},  # the last row of partition 1: explains nothing after it
        {**data(7, 1), "partition": 2},
    ]
    gaps = [(f[0], f[1], f[2], f[5]) for f in findings(rows, batch_size=size)
            if f[0] == "OFFSET_GAP"]  # fmt: skip
    assert gaps == [
        ("OFFSET_GAP", 5, "QUARANTINED_BATCH", 2),
        ("OFFSET_GAP", 9, "UNEXPLAINED", 5),
    ]
    # v0/v1 entries are not judged (an entry's offset is its last record's)
    assert findings([data(0, 0), {**data(5, 1), "magic": 1}, data(6, 2)]) == [
        ("SEQUENCE_GAP", 6, "UNEXPLAINED", OOS, 1, 0)
    ]


def test_state_grows_with_producers_and_survives_every_arrow_batch_boundary():
    # 200 producers (beyond the 64 first allocated), each with a gap, split into batches of 7
    rows = [data(i, 0, pid=p) for i, p in enumerate(range(200))]
    rows += [data(200 + i, 2, pid=p) for i, p in enumerate(range(200))]
    found = findings(rows, batch_size=7)
    assert len(found) == 200
    assert {f[0] for f in found} == {"SEQUENCE_GAP"}
    stats = replay(rows, batch_size=7)["partition_summary"]
    assert [s["partition_summary"]["producers"] for s in stats] == [200]


@pytest.mark.parametrize("size", [1, 2, 5])
def test_partitions_split_across_arrow_batches_are_replayed_apart(size):
    rows = [data(0, 0), data(1, 1), {**data(0, 3), "partition": 1}, {**data(1, 4), "partition": 1}]
    replayed = replay(rows, batch_size=size)
    assert replayed["findings"] == [("UNKNOWN_PRODUCER", 0, "UNEXPLAINED", None, 0, None)]
    summaries = replayed["partition_summary"]
    assert [r["partition"] for r in replayed["findings"] and summaries] == [0, 1]


@pytest.mark.parametrize("size", [1, 2, 10])
def test_acknowledgement_findings_keep_the_source_of_their_acknowledgement(size):
    def ack(offset, seq, partition, source):
        return row(RowKind.ACK, partition=partition, base_offset=offset, last_offset=offset,
                   producer_id=1, producer_epoch=0, base_sequence=seq, last_sequence=seq,
                   record_count=1, value=TS, source=source)  # fmt: skip

    rows = [
        ack(1, 1, 0, "ack-lost"),
        data(0, 0),
        data(2, 2),
        ack(0, 0, 1, "ack-moved"),
        {**data(0, 5), "partition": 1},
        {**data(1, 0), "partition": 1},
    ]
    batches = [
        pack(pa.RecordBatch.from_pylist(rows[i : i + size], schema=ARROW))
        for i in range(0, len(rows), size)
    ]
    found = {
        (r["partition"], BY_CODE[r["findings"]["finding_code"]].name): r["source"]
        for b in _Replayer(SETTINGS, KERNEL).run(iter(batches))
        for r in b.to_pylist()
        if r["kind"] == "findings"
        and BY_CODE[r["findings"]["finding_code"]].name.startswith("ACKED")
    }
    assert found == {(0, "ACKED_WRITE_LOST"): "ack-lost", (1, "ACKED_OFFSET_MISMATCH"): "ack-moved"}


@pytest.mark.parametrize("size", [7, 1000])
def test_acknowledgements_beyond_the_first_allocation_are_each_matched_to_their_batch(size):
    # 150 acknowledgements (beyond the 64 first allocated), one batch identity acknowledged
    # twice: each is judged against the batches with its identity, across every growth.
    def ack(offset, pid, partition=0):
        return row(RowKind.ACK, partition=partition, base_offset=offset, last_offset=offset,
                   producer_id=pid, producer_epoch=0, base_sequence=0, last_sequence=0,
                   record_count=1, value=TS)  # fmt: skip

    acks = [ack(p, pid=p) for p in range(150)]
    acks.insert(6, ack(5, pid=0))  # the batch of producer 0 acknowledged again, at offset 5
    # odd producers' batches are missing: another producer wrote at their offsets
    log = [data(p, 0, pid=p if p % 2 == 0 else 1000 + p) for p in range(150)]
    second = [ack(0, pid=1, partition=1), {**data(0, 0, pid=2), "partition": 1},
              {**data(1, 0, pid=1), "partition": 1}]  # fmt: skip
    replayed = replay(acks + log + second, batch_size=size)["findings"]
    acked = sorted((f[0], f[1]) for f in replayed if f[0].startswith("ACKED"))
    expected = [("ACKED_OFFSET_MISMATCH", 5)] + [("ACKED_WRITE_LOST", p) for p in range(1, 150, 2)]
    expected.append(("ACKED_OFFSET_MISMATCH", 0))  # partition 1: producer 1's batch is at 1
    assert acked == sorted(expected)


def test_a_python_worker_freezes_its_heap_once_after_its_first_replay(monkeypatch):
    # PySpark's daemon runs a full collection in a reused worker after every task: what the
    # worker holds after its first replay (numba's and pyspark's modules) must not be walked
    # again each time (eos_audit.python_workers.freeze_worker_heap).
    import gc

    from eos_audit import python_workers
    from eos_audit.replay import runner

    freezes = []

    def counted_freeze() -> None:
        freezes.append(1)
        real_freeze()

    real_freeze = gc.freeze
    monkeypatch.setattr(python_workers, "_frozen", set())
    monkeypatch.setattr(runner, "_Replayer", lambda settings: _Replayer(settings, KERNEL))
    monkeypatch.setattr(gc, "freeze", counted_freeze)
    batch = pack(pa.RecordBatch.from_pylist([data(0, 0), data(1, 1)], schema=ARROW))
    gc.unfreeze()
    try:
        first = list(runner.replay_partitions(SETTINGS)(iter([batch])))
        assert len(freezes) == 1 and gc.get_freeze_count() > 0
        again = list(runner.replay_partitions(SETTINGS)(iter([batch])))
        # Counted by calls: the frozen count itself may drop when a frozen object is freed.
        assert len(freezes) == 1  # once per worker, not once per task
        assert [b.to_pylist() for b in again] == [b.to_pylist() for b in first]
    finally:
        gc.unfreeze()
