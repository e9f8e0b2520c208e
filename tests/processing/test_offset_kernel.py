"""The compiled offset replay against its reference, `OffsetMetadataManager`, on random streams.

Seeded random streams stand for `__consumer_offsets` partitions: plain and transactional
commits of a few keys by several producers, tombstones, GroupMetadata records (member counts,
deletions), consumer groups' member records (members joining, leaving, leaving unseen), COMMIT
and ABORT markers (of producers with and without pending offsets), records
the replay ignores, records whose members it cannot see (skipped or of types it does not read,
of a group or of none), and nulls where the contract allows them. Each stream is cut into Arrow
batches at random places and replayed by the runner (`offset_runner`, compiled and as plain
Python, with arrays that start at one element so that every one of them grows), and row by row
by the reference, as `coordinator_audit` ran it before; every output row, its findings in order,
must be the same.

The seeds are fixed so CI is repeatable; set EOS_DIFF_RANDOM=1 (and EOS_DIFF_N) to explore new
streams locally. A difference fails with the stream's seed and events, ready for a unit test.
(Random streams rather than Hypothesis: drawing each field through Hypothesis took 80% of the
test's time.)
"""

from __future__ import annotations

import os
import random
from dataclasses import asdict, replace

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from eos_audit.processing import offset_kernel, offset_runner
from eos_audit.processing.coordinator_audit import _EVENTS, _HISTORY_ARROW
from eos_audit.processing.offset_metadata_manager import (
    Event,
    OffsetMetadataManager,
    OffsetRow,
    reads_no_membership,
)
from tests.processing.test_offset_metadata_manager import (
    GROUP,
    commit,
    marker,
    member,
    members,
    tombstone,
    unread,
)

EVENTS_ARROW = to_arrow_schema(_EVENTS)
N = int(os.environ.get("EOS_DIFF_N", "500"))
RANDOM = os.environ.get("EOS_DIFF_RANDOM") == "1"
UNCOMPILED = offset_runner.uncompiled_kernel()


# ------------------------------------------------------------------------------------------------
# The reference, row by row (what coordinator_audit._replay_batches did before the kernel)
# ------------------------------------------------------------------------------------------------
def _history_row(row: OffsetRow, coordinator_partition: int) -> dict:
    event = row.event
    return {
        "group_id": event.group_id,
        "topic": event.topic,
        "partition": event.partition,
        "committed_offset": event.committed_offset,
        "leader_epoch": event.leader_epoch,
        "metadata": event.metadata,
        "commit_timestamp_ms": event.commit_timestamp_ms,
        "kind": row.kind,
        "outcome": row.outcome,
        "previous_committed_offset": row.previous_committed_offset,
        "producer_id": event.producer_id,
        "producer_epoch": event.producer_epoch,
        "marker_offset": row.marker_offset,
        "coordinator_partition": coordinator_partition,
        "record_offset": event.offset,
        "timestamp": event.timestamp,
        "source": event.source,
        "findings": [asdict(f) for f in row.findings],
    }


def _event(values: dict) -> Event:
    if values["producer_id"] is None:
        values["producer_id"] = -1
    if values["producer_epoch"] is None:
        values["producer_epoch"] = -1
    values["is_tombstone"] = bool(values["is_tombstone"])
    values["is_skipped"] = bool(values["is_skipped"])
    return Event(**values)


def reference_rows(batches: list[pa.RecordBatch]) -> list[dict]:
    out: list[dict] = []
    current = manager = None
    for batch in batches:
        for values in batch.to_pylist():
            partition = values.pop("coordinator_partition")
            if partition != current:
                if manager is not None:
                    out += [_history_row(r, current) for r in manager.finish()]
                current, manager = partition, OffsetMetadataManager()
            out += [_history_row(r, partition) for r in manager.apply(_event(values))]
    if manager is not None:
        out += [_history_row(r, current) for r in manager.finish()]
    return out


def kernel_rows(batches: list[pa.RecordBatch], kernel=offset_kernel, initial: int = 1):
    replayer = offset_runner.OffsetReplayer(_HISTORY_ARROW, kernel, initial=initial)
    out = list(replayer.run(iter(batches)))
    assert all(b.schema == _HISTORY_ARROW for b in out)
    return pa.Table.from_batches(out, schema=_HISTORY_ARROW).to_pylist(), replayer


def in_order(rows: list[dict]) -> list[dict]:
    """Rows by (coordinator partition, record offset): a record is one row, decided in any order."""
    return sorted(rows, key=lambda r: (r["coordinator_partition"], r["record_offset"]))


# ------------------------------------------------------------------------------------------------
# Streams
# ------------------------------------------------------------------------------------------------
# Few keys, mostly one, so that the rules meet: weights by repetition.
PRODUCERS = [-1, 7, 8, 9, 3000000000]
GROUPS = ["copier"] * 8 + ["reader", None]
TOPICS = ["input"] * 8 + ["other", "", None]
PARTITIONS = [0] * 8 + [1, None, -1]
MEMBERS = ["m-1"] * 3 + ["m-2", "m-3", None]


def event_values(rng: random.Random, producers: list[int], one_key: bool) -> dict:
    """One event's `_EVENTS` values (offsets and partitions set by the stream)."""
    what = rng.choice(
        ["commit"] * 6
        + ["marker"] * 3
        + ["tombstone", "members", "member", "member", "ignored", "unread"]
    )
    values = dict.fromkeys(EVENTS_ARROW.names)
    values["is_tombstone"] = False
    values["is_skipped"] = False
    if what == "marker":
        values["producer_id"] = rng.choice(producers)
        values["producer_epoch"] = 1
        values["control_type"] = rng.choice(["COMMIT", "COMMIT", "ABORT", "X"])
        return values
    values["producer_id"] = rng.choice([*producers, None])
    values["producer_epoch"] = None if values["producer_id"] is None else 0
    values["group_id"] = GROUPS[0] if one_key else rng.choice(GROUPS)
    if what == "members":
        values["record_type"] = 2
        values["is_tombstone"] = rng.random() < 0.25
        values["member_count"] = rng.choice([0, 1, 2, None])
        return values
    if what == "member":
        values["record_type"] = 5
        values["is_tombstone"] = rng.random() < 0.45
        values["member_id"] = rng.choice(MEMBERS)
        return values
    if what == "unread":
        # Skipped by the decoders, or of a type the replay does not read (Parquet); of the
        # partition's group, another, or none shown (`kafka-dump-log.sh` 3.5-3.7).
        values["record_type"] = rng.choice([5, 17, 17, 300, 3, 8, None])
        values["is_skipped"] = rng.random() < 0.7
        values["is_tombstone"] = rng.random() < 0.3
        values["group_id"] = rng.choice([GROUPS[0], "reader", None])
        return values
    values["record_type"] = rng.choice([0, 1, 1, 1] if what != "ignored" else [3, None])
    values["topic"] = TOPICS[0] if one_key else rng.choice(TOPICS)
    values["partition"] = PARTITIONS[0] if one_key else rng.choice(PARTITIONS)
    if what == "tombstone":
        values["is_tombstone"] = True
        return values
    values["committed_offset"] = rng.choice([*range(41), None, 2**63 - 1, -5])
    values["leader_epoch"] = rng.choice([None, -1, 3])
    values["metadata"] = rng.choice([None, "", "m"])
    values["commit_timestamp_ms"] = rng.choice([None, 1_700_000_000_000])
    return values


def stream(rng: random.Random) -> list[pa.RecordBatch]:
    """A task's events sorted by (coordinator partition, offset), cut into Arrow batches."""
    rows = []
    producers = [-1, *rng.sample(PRODUCERS, rng.randint(2, 4))]
    for partition in sorted(rng.sample(range(50), rng.randint(1, 3))):
        offset = rng.randint(0, 5)
        # Some partitions commit one key only, where the rules meet most.
        one_key = rng.random() < 0.5
        for _ in range(rng.randint(1, 80)):
            values = event_values(rng, producers, one_key)
            offset += rng.choice([1, 1, 1, 2])
            rows.append(
                {
                    **values,
                    "coordinator_partition": partition,
                    "offset": offset,
                    "timestamp": 1_700_000_000_000 + offset,
                    "source": f"f:{offset}",
                }
            )
    table = pa.Table.from_pylist(rows, schema=EVENTS_ARROW)
    cuts = sorted(rng.sample(range(1, len(rows)), min(len(rows) - 1, rng.randint(0, 6))))
    bounds = [0, *cuts, len(rows)]
    return [
        table.slice(a, b - a).combine_chunks().to_batches()[0]
        for a, b in zip(bounds, bounds[1:], strict=False)
    ]


def _batches(events: list[Event]) -> list[pa.RecordBatch]:
    rows = [{**asdict(e), "coordinator_partition": 0} for e in events]
    return pa.Table.from_pylist(rows, schema=EVENTS_ARROW).to_batches()


# Streams whose last row's findings the group's membership decides: (name, events, causes).
REWIND = [commit(10, 50), commit(11, 20)]
LEFT = [member(0, "m-1"), member(1, "m-1", left=True)]
MEMBERSHIP_CASES = [
    ("simple group", REWIND, ["ADMIN_RESET"]),
    ("classic group with a member", [members(0, 1), *REWIND], ["LATE_COMMIT"]),
    ("classic group emptied", [members(0, 1), members(1, 0), *REWIND], ["ADMIN_RESET"]),
    ("consumer group emptied", [*LEFT, unread(2, 3), *REWIND], ["ADMIN_RESET"]),
    ("a member's tombstone only", [member(0, "m-1", left=True), *REWIND], ["LATE_COMMIT"]),
    ("a streams group's record", [unread(0, 17), *REWIND], ["LATE_COMMIT"]),
    ("a type not read, not skipped", [unread(0, 20, skipped=False), *REWIND], ["LATE_COMMIT"]),
    ("3.7 text's member record", [unread(0, 5, group=None), *REWIND], ["LATE_COMMIT"]),
    ("another group's streams record", [unread(0, 17, "other"), *REWIND], ["ADMIN_RESET"]),
    ("consumer group's other records", [unread(0, 8, None), unread(1, 16), *REWIND],
     ["ADMIN_RESET"]),
    ("classic group emptied, 3.7 member records", [unread(0, 5, None), members(1, 0), *REWIND],
     ["ADMIN_RESET"]),
    ("consumer group emptied, 3.7 member records", [*LEFT, unread(2, 5, None), *REWIND],
     ["LATE_COMMIT"]),
    ("deleted, then a streams group", [replace(members(0, 0), is_tombstone=True),
                                       unread(1, 17), *REWIND], ["LATE_COMMIT"]),
    ("simple group's plain commit in a transaction",
     [commit(0, 10, pid=7), marker(1, 7), commit(2, 20, pid=7), commit(3, 15)],
     ["PLAIN_AND_TRANSACTIONAL"]),
]  # fmt: skip


@pytest.mark.parametrize("kernel", [offset_kernel, UNCOMPILED], ids=["compiled", "uncompiled"])
@pytest.mark.parametrize(
    ("events", "causes"),
    [pytest.param(events, causes, id=name) for name, events, causes in MEMBERSHIP_CASES],
)
def test_the_kernel_judges_a_groups_membership_as_the_reference_does(kernel, events, causes):
    batches = _batches(events)
    expected = in_order(reference_rows(batches))
    assert [f["cause"] for f in expected[-1]["findings"]] == causes
    assert in_order(kernel_rows(batches, kernel)[0]) == expected


@pytest.mark.parametrize("kernel", [offset_kernel, UNCOMPILED], ids=["compiled", "uncompiled"])
def test_the_kernel_reads_no_membership_of_the_records_the_reference_does_not(kernel):
    cases = [
        (record_type, is_skipped, control_type)
        for record_type in (None, *range(-1, 40), 300, 32767)
        for is_skipped in (False, True)
        for control_type in (None, "COMMIT")
    ]
    events = np.zeros(len(cases), dtype=offset_kernel.OFFSET_EVENT).view(np.recarray)
    for i, (record_type, is_skipped, control_type) in enumerate(cases):
        events[i].record_type = -1 if record_type is None else record_type
        events[i].is_skipped = is_skipped
        events[i].is_marker = control_type is not None
    expected = [
        reads_no_membership(Event(0, record_type=t, is_skipped=k, control_type=c, group_id=GROUP))
        for t, k, c in cases
    ]
    assert [bool(kernel.reads_no_membership(e)) for e in events] == expected
    assert any(expected) and not all(expected)


@pytest.mark.parametrize("kernel", [offset_kernel, UNCOMPILED], ids=["compiled", "uncompiled"])
def test_the_kernel_gives_the_references_rows_and_findings(kernel):
    if kernel is offset_kernel and not offset_kernel.COMPILED:
        # numba is installed with eos-audit: only a run that turned compiling off may skip.
        assert os.environ.get("EOS_AUDIT_JIT") == "0", "the offset kernel did not compile"
        pytest.skip("EOS_AUDIT_JIT=0: compiling is off by request")
    first = random.randrange(2**32) if RANDOM else 0
    seen: set[tuple] = set()
    for seed in range(first, first + (N if kernel is offset_kernel else N // 5)):
        batches = stream(random.Random(seed))
        expected = in_order(reference_rows(batches))
        got = in_order(kernel_rows(batches, kernel)[0])
        if got != expected:
            events = [row for batch in batches for row in batch.to_pylist()]
            cuts = [b.num_rows for b in batches]
            differ = [(g, e) for g, e in zip(got, expected, strict=False) if g != e][:1]
            pytest.fail(
                f"stream {seed} ({len(events)} events in batches of {cuts}): {len(got)} rows, "
                f"the reference {len(expected)}; first different (ours, reference): {differ}; "
                f"events: {events}"
            )
        seen |= {
            (r["outcome"], f["finding_type"], f["cause"]) for r in expected for f in r["findings"]
        }
    # The streams reach every finding type with every cause, and the outcomes that carry them.
    assert {f[1:] for f in seen} == {
        ("OFFSET_REWIND", "TRANSACTIONAL"),
        ("OFFSET_REWIND", "LATE_COMMIT"),
        ("OFFSET_REWIND", "ADMIN_RESET"),
        ("OFFSET_REWIND", "EXPIRED_RESET"),
        ("MIXED_OFFSET_COMMITS", "PLAIN_AND_TRANSACTIONAL"),
        ("MIXED_OFFSET_COMMITS", "ABORTED_RANGE_COMMITTED"),
        ("CONCURRENT_OFFSET_OWNERS", None),
    }
    assert {f[0] for f in seen} >= {"APPLIED", "ABORTED", "PENDING", "REPLACED", "CLEARED"}


# Two producers' pending offsets of one key (CONCURRENT_OFFSET_OWNERS): (name, events, the
# findings by the record offset of their row, the second committed of the pair).
BEFORE = [commit(0, 10, pid=7), commit(1, 11, pid=9)]
LATER = [commit(4, 12, pid=7), commit(5, 13, pid=8), marker(6, 8)]
OWNERS_CASES = [
    ("both committed", [*BEFORE, marker(2, 7), marker(3, 9)],
     {1: [("CONCURRENT_OFFSET_OWNERS", 7, 0)]}),
    ("the other aborted after", [*BEFORE, marker(2, 7), marker(3, 9, "ABORT"), *LATER,
                                 marker(7, 7, "ABORT")], {}),
    ("the other aborted before", [*BEFORE, marker(2, 9, "ABORT"), marker(3, 7), *LATER,
                                  marker(7, 7, "ABORT")], {}),
    ("a tombstone cleared the other", [*BEFORE, marker(2, 7), tombstone(3), *LATER,
                                       marker(7, 7, "ABORT")], {}),
    ("the later pair committed", [*BEFORE, marker(2, 7), marker(3, 9, "ABORT"), *LATER,
                                  marker(7, 7)], {4: [("CONCURRENT_OFFSET_OWNERS", 8, 5)]}),
]  # fmt: skip


@pytest.mark.parametrize("kernel", [offset_kernel, UNCOMPILED], ids=["compiled", "uncompiled"])
@pytest.mark.parametrize(
    ("events", "expected"),
    [pytest.param(events, expected, id=name) for name, events, expected in OWNERS_CASES],
)
def test_the_kernel_pairs_overlapping_offsets_as_the_reference_does(kernel, events, expected):
    batches = _batches(events)
    for rows in (in_order(kernel_rows(batches, kernel)[0]), in_order(reference_rows(batches))):
        found = {
            r["record_offset"]: [
                (f["finding_type"], f["other_producer_id"], f["other_record_offset"])
                for f in r["findings"]
            ]
            for r in rows
            if r["findings"]
        }
        assert found == expected


def test_overlapping_offsets_hold_no_memory_once_decided():
    """3,000 rounds of two producers' overlapping offsets of one key, one committed and the
    other aborted, or cleared by a tombstone: the pools of overlaps stay at their first size."""
    events, offset = [], 0
    for round_ in range(3_000):
        events += [commit(offset, round_, pid=7), commit(offset + 1, round_, pid=8)]
        if round_ % 2:
            events += [marker(offset + 2, 7), marker(offset + 3, 8, "ABORT")]
        else:
            events += [marker(offset + 2, 7), tombstone(offset + 3), marker(offset + 4, 8)]
        offset += 5
    got, replayer = kernel_rows(_batches(events), initial=16)
    assert not any(r["findings"] for r in got)
    assert len(replayer.state.owned) == 16 and len(replayer.state.overlaps) == 16


def test_memory_grows_with_keys_and_open_transactions_not_records():
    """200,000 commits of 8 keys, one transaction open at a time: the arrays stay small."""
    rows, offset = [], 0
    for i in range(25_000):
        for partition in range(4):
            for pid in (-1, 7):
                rows.append(
                    {
                        "coordinator_partition": 3,
                        "offset": offset,
                        "producer_id": pid,
                        "record_type": 1,
                        "is_tombstone": False,
                        "group_id": "g",
                        "topic": "t",
                        "partition": partition,
                        "committed_offset": i,
                    }
                )
                offset += 1
        rows.append(
            {
                "coordinator_partition": 3,
                "offset": offset,
                "producer_id": 7,
                "control_type": "COMMIT",
                "is_tombstone": False,
            }
        )
        offset += 1
    table = pa.Table.from_pylist(rows, schema=EVENTS_ARROW)
    got, replayer = kernel_rows(table.to_batches(max_chunksize=10_000), initial=16)
    assert len(got) == 200_000
    assert replayer.state.task[0].keys == 4 and len(replayer.state.keys) == 16
    assert len(replayer.state.entries) <= 16 and len(replayer.state.history) <= 2**15
    assert replayer.carried.num_rows == 0
