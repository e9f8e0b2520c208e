"""Fuzz inputs for the three Kafka readers and the invariants every parse must keep.

Shared by the in-suite property tests (`tests/fuzz/test_fuzz_readers.py`, hypothesis, a few
hundred inputs) and the large corpus (`bench/fuzz_corpus.py`, 100k+ inputs through the parsers
without Spark). Each `check_*` function parses one input with the pure parser and returns the
violated invariants as sentences (empty: all kept), so the corpus can count and show them:

- no exception escapes a parser;
- every valid batch (snapshot entry, checkpoint line) before the damage is read, unchanged;
- what cannot be read becomes one row with the file and byte position (segments) or line
  (text), never a silent drop: the rows reconcile with the input.
"""

from __future__ import annotations

import random
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import pyarrow as pa

from eos_audit.sources.kafka import dump_log as dl
from eos_audit.sources.kafka.dump_log import parse_dump_log
from eos_audit.sources.kafka.segments import SOURCE_ERROR_COL, parse_segment
from eos_audit.sources.kafka.state_files import (
    PROBLEM_COL,
    parse_leader_epoch_checkpoint,
    parse_offset_checkpoint,
    parse_snapshot,
)
from tests.fixtures.segment_builder import (
    SnapshotEntry,
    checkpoint_text,
    control_batch,
    data_batch,
    format_dump_log,
    legacy_entry,
    snapshot_bytes,
)

SEGMENT_PATH = "/export/1/orders-0/00000000000000000000.log"
SNAPSHOT_PATH = "/export/1/orders-0/00000000000000000042.snapshot"
CHECKPOINT_PATH = "/export/1/orders-0/leader-epoch-checkpoint"
DUMP_PATH = "/dumps/orders-0.txt"
_POSITION = re.compile(r"^" + re.escape(SEGMENT_PATH) + r":(\d+)$")


# ------------------------------------------------------------------------------------------------
# Valid seeds: real Kafka bytes (kafka-python's builder) and their dump-log text
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Segment:
    """A valid segment and where each of its batches starts and ends."""

    data: bytes
    bounds: tuple[tuple[int, int], ...]


def _segment(parts: list[bytes]) -> Segment:
    bounds, pos = [], 0
    for part in parts:
        bounds.append((pos, pos + len(part)))
        pos += len(part)
    return Segment(b"".join(parts), tuple(bounds))


@cache
def seed_segments() -> tuple[Segment, ...]:
    """A few valid multi-batch segments: idempotent and transactional data, markers, legacy."""
    mixed = [
        data_batch(0, 3, producer_id=7, producer_epoch=0, base_sequence=0),
        data_batch(3, 2, producer_id=9, producer_epoch=1, base_sequence=0, is_transactional=True),
        control_batch(5, producer_id=9, producer_epoch=1, commit=True, coordinator_epoch=3),
        data_batch(6, 1, producer_id=7, producer_epoch=0, base_sequence=3, keys=True),
        control_batch(7, producer_id=9, producer_epoch=1, commit=False, control_type=5),
        data_batch(8, 4, leader_epoch=2),
    ]
    legacy = [legacy_entry(0, magic=0), legacy_entry(1, magic=1), data_batch(2, 2)]
    wrap = [
        data_batch(1 << 40, 2, producer_id=1, producer_epoch=0, base_sequence=2147483646),
        control_batch((1 << 40) + 2, producer_id=1, producer_epoch=0, leader_epoch=7),
    ]
    return (_segment(mixed), _segment(legacy), _segment(wrap))


@cache
def seed_dump_texts() -> tuple[bytes, ...]:
    """The seed segments as `kafka-dump-log.sh` prints them (with and without records)."""
    out = []
    for seg in seed_segments():
        out.append(format_dump_log(SEGMENT_PATH, seg.data).encode())
        out.append(format_dump_log(SEGMENT_PATH, seg.data, deep_iteration=False).encode())
    return tuple(out)


@cache
def seed_snapshot() -> bytes:
    """A valid producer snapshot of three entries."""
    return snapshot_bytes(
        [
            SnapshotEntry(7, 0, last_sequence=4, last_offset=6, offset_delta=0),
            SnapshotEntry(
                9,
                1,
                last_sequence=1,
                last_offset=4,
                offset_delta=1,
                coordinator_epoch=3,
                txn_first_offset=3,
            ),  # fmt: skip
            SnapshotEntry(11, 2),
        ]
    )


@cache
def seed_checkpoint() -> bytes:
    """A valid leader-epoch checkpoint."""
    return checkpoint_text([(0, 0), (2, 8), (7, 1 << 40)]).encode()


# ------------------------------------------------------------------------------------------------
# Mutations
# ------------------------------------------------------------------------------------------------
def flip(data: bytes, position: int, bit: int) -> bytes:
    """One bit of one byte inverted."""
    out = bytearray(data)
    out[position] ^= 1 << bit
    return bytes(out)


def random_header(rng: random.Random) -> bytes:
    """A batch header with random length and magic, then random bytes of random length."""
    length = rng.choice([rng.randint(-(1 << 31), (1 << 31) - 1), rng.randint(-5, 200)])
    magic = rng.choice([0, 1, 2, 3, -1, rng.randint(-128, 127)])
    head = struct.pack(">qiib", rng.randint(-(1 << 63), (1 << 63) - 1), length,
                       rng.randint(-(1 << 31), (1 << 31) - 1), magic)  # fmt: skip
    return head + rng.randbytes(rng.randint(0, 300))


def random_text(rng: random.Random) -> bytes:
    """Lines of random text: printable, control bytes, invalid UTF-8, very long lines."""
    kind = rng.randrange(5)
    if kind == 0:
        return rng.randbytes(rng.randint(0, 2000))
    if kind == 1:  # one very long line
        return (
            rng.choice(["x", "baseOffset: 1 ", "| offset: 9 ", "9"]) * rng.randint(1, 20_000)
        ).encode()
    alphabet = "abcdefghijklmnop: |-0123456789\t\r{}[]()=,.éß\U0001f600\x00\x1b"
    lines = [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 120)))
        for _ in range(rng.randint(0, 40))
    ]
    text = "\n".join(lines).encode()
    if kind == 3:  # invalid UTF-8 sprinkled in
        text = bytes(
            b if rng.random() > 0.02 else rng.choice([0xFF, 0xC3, 0x80, 0xFE]) for b in text
        )
    return text


_NUMBER = re.compile(rb"-?\d+")


def mutate_lines(rng: random.Random, text: bytes) -> bytes:
    """A valid dump or checkpoint text with a few line-level faults."""
    lines = text.split(b"\n")
    for _ in range(rng.randint(1, 4)):
        if not lines:
            break
        i = rng.randrange(len(lines))
        kind = rng.randrange(7)
        if kind == 0:
            del lines[i]
        elif kind == 1:
            lines.insert(i, lines[i])
        elif kind == 2:
            lines[i] = lines[i][: rng.randint(0, len(lines[i]))]
        elif kind == 3:  # a number far outside every field's range
            huge = rng.choice([b"99999999999999999999999", b"-9223372036854775809",
                               b"9223372036854775807", b"2147483648", b"4294967296"])  # fmt: skip
            matches = list(_NUMBER.finditer(lines[i]))
            if matches:
                m = rng.choice(matches)
                lines[i] = lines[i][: m.start()] + huge + lines[i][m.end() :]
        elif kind == 4:
            lines.insert(i, rng.randbytes(rng.randint(0, 80)).replace(b"\n", b""))
        elif kind == 5:
            lines[i] = lines[i] + b" " + rng.randbytes(rng.randint(1, 20)).replace(b"\n", b"")
        else:
            lines[i] = lines[i].upper() if rng.random() < 0.5 else lines[i].replace(b": ", b":")
    return b"\n".join(lines)


# ------------------------------------------------------------------------------------------------
# Invariants
# ------------------------------------------------------------------------------------------------
def _guard(parse: Callable[[], object]) -> tuple[object | None, list[str]]:
    try:
        return parse(), []
    except Exception as exc:  # noqa: BLE001 - the invariant under test
        return None, [f"{type(exc).__name__} escaped: {str(exc)[:200]}"]


def _rows(table: pa.Table | pa.RecordBatch) -> list[dict]:
    return table.to_pylist()


@cache
def _seed_rows(index: int) -> tuple[dict, ...]:
    seg = seed_segments()[index]
    return tuple(_rows(parse_segment(seg.data, topic="orders", partition=0, path=SEGMENT_PATH)))


def check_segment(
    data: bytes, *, seed: int | None = None, damage_at: int | None = None
) -> list[str]:
    """Parse segment bytes; the invariants of the segment reader.

    Args:
        data: the bytes.
        seed: index of the valid seed segment they were made from (None: unrelated bytes).
        damage_at: first byte where they differ from the seed (a truncation's length, a flipped
            byte's position; None: none, unrelated).

    Returns:
        The violated invariants.
    """
    table, problems = _guard(
        lambda: parse_segment(data, topic="orders", partition=0, path=SEGMENT_PATH)
    )
    if table is None:
        return problems
    rows = _rows(table)
    positions = []
    for i, row in enumerate(rows):
        match = _POSITION.match(row["source"] or "")
        if not match:
            return [f"row {i} has no file:byte source: {row['source']!r}"]
        positions.append(int(match.group(1)))
        if row[SOURCE_ERROR_COL] is not None and i != len(rows) - 1:
            problems.append(f"error row {i} is not the last row")
    if positions != sorted(set(positions)) or any(p >= max(len(data), 1) for p in positions):
        problems.append(f"positions not increasing within the file: {positions[:10]}")
    errors = [r for r in rows if r[SOURCE_ERROR_COL] is not None]
    framed = [p for p, r in zip(positions, rows, strict=True) if r[SOURCE_ERROR_COL] is None]
    if errors:
        tail = data[positions[-1] :]
        if not tail.strip(b"\x00"):
            problems.append("a zero tail was reported, not ignored")
    elif framed:
        # No error: the framed entries and an all-zero tail (preallocation) cover the file.
        last = framed[-1]
        size = 12 + struct.unpack_from(">i", data, last + 8)[0]
        if data[last + size :].strip(b"\x00"):
            problems.append("bytes after the last batch neither read nor reported")
    elif data.strip(b"\x00"):
        problems.append("non-zero bytes neither read nor reported")
    if seed is None:
        return problems
    seg = seed_segments()[seed]
    expected = _seed_rows(seed)
    cut = len(seg.data) if damage_at is None else damage_at
    intact = [i for i, (_, end) in enumerate(seg.bounds) if end <= cut]
    for i in intact:
        if i >= len(rows) or rows[i] != expected[i]:
            problems.append(f"valid batch {i} before the damage at byte {cut} not read unchanged")
            break
    if damage_at is not None and len(data) == damage_at:  # a truncation
        boundary = damage_at in {0} | {end for _, end in seg.bounds}
        cut_start = next((s for s, e in seg.bounds if s < damage_at < e), None)
        zero_tail = cut_start is not None and not data[cut_start:].strip(b"\x00")
        want = len(intact) + (0 if boundary or zero_tail else 1)
        if len(rows) != want:
            problems.append(f"truncated at {damage_at}: {len(rows)} rows, expected {want}")
        elif not boundary and not zero_tail and positions[-1] != cut_start:
            problems.append(f"truncated batch reported at {positions[-1]}, not {cut_start}")
    return problems


def check_snapshot(data: bytes, *, valid: bool) -> list[str]:
    """Parse snapshot bytes: all entries, or exactly one problem row naming the file."""
    batch, problems = _guard(
        lambda: parse_snapshot(data, path=SNAPSHOT_PATH, topic="orders", partition=0, replica="1")
    )
    if batch is None:
        return problems
    rows = _rows(batch)
    bad = [r for r in rows if r[PROBLEM_COL] is not None]
    if bad:
        if len(rows) != 1 or not (bad[0]["source"] or "").startswith(SNAPSHOT_PATH):
            problems.append(f"a corrupt snapshot gave {len(rows)} rows, not one problem row")
        if valid:
            problems.append(f"a valid snapshot was refused: {bad[0][PROBLEM_COL]}")
    else:
        if not valid and data != seed_snapshot():
            # A mutation that keeps a valid CRC (2^-32) is not expected from a few flips.
            problems.append("a damaged snapshot was read as valid")
        count = struct.unpack_from(">i", data, 6)[0] if len(data) >= 10 else -1
        if len(rows) != count:
            problems.append(f"{len(rows)} entries read, the header declares {count}")
    return problems


def check_checkpoint(data: bytes) -> list[str]:
    """Parse a leader-epoch and an offset checkpoint: every body line read or reported."""
    problems: list[str] = []
    for name, parse in (
        ("leader-epoch", lambda: parse_leader_epoch_checkpoint(
            data, path=CHECKPOINT_PATH, topic="orders", partition=0, replica="1")),
        ("offset", lambda: parse_offset_checkpoint(
            data, path=CHECKPOINT_PATH, replica="1", checkpoint_kind="high_watermark")),
    ):  # fmt: skip
        batches, escaped = _guard(parse)
        if batches is None:
            problems += [f"{name}: {p}" for p in escaped]
            continue
        rows = [r for b in batches for r in _rows(b)]
        lines = data.decode("utf-8", errors="replace").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        header_ok = (
            len(lines) >= 2
            and lines[0].strip() == "0"
            and re.fullmatch(r"[0-9]+", lines[1].strip()) is not None
        )
        if not header_ok:
            if len(rows) != 1 or rows[0][PROBLEM_COL] is None:
                problems.append(f"{name}: a bad header gave {len(rows)} rows, not one problem")
            continue
        body = {f"{CHECKPOINT_PATH}:line {n}" for n in range(3, len(lines) + 1)}
        seen = [r["source"] for r in rows if r["source"] in body]
        if sorted(seen) != sorted(body):
            problems.append(f"{name}: {len(body)} body lines, {len(seen)} rows name one")
    return problems


_DUMP_PATTERNS = [
    re.compile(p, re.ASCII)
    for p in (
        dl.BLANK,
        dl.DUMPING,
        dl.START,
        dl.BATCH_V2,
        dl.BATCH_LEGACY,
        dl.OLD_RECORD,
        dl.RECORD,
        dl.RECORD_28,
        dl.RECORD_DATA_ONLY,
        dl.INVALID_BYTES,
        dl.NON_CONSECUTIVE,
    )  # fmt: skip
]
_BATCH_LINES = [re.compile(dl.BATCH_V2, re.ASCII), re.compile(dl.BATCH_LEGACY, re.ASCII)]
_DUMP_SOURCE = re.compile(r"^" + re.escape(DUMP_PATH) + r":line (\d+)$")


def check_dump_log(data: bytes) -> list[str]:
    """Parse dump-log text: every batch line gives a row, every unknown line an error row."""
    table, problems = _guard(lambda: parse_dump_log(data, path=DUMP_PATH, topic="orders",
                                                    partition=0))  # fmt: skip
    if table is None:
        return problems
    rows = _rows(table)
    lines = data.decode("utf-8", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [line.rstrip("\r") for line in lines]
    if "\x0b" in "".join(lines):  # \v: Python's \s has it, RE2's has not; no oracle then
        return problems
    at: dict[int, list[dict]] = {}
    for row in rows:
        match = _DUMP_SOURCE.match(row["source"] or "")
        if not match or not 1 <= int(match.group(1)) <= len(lines):
            return problems + [f"row without a line of the file: {row['source']!r}"]
        at.setdefault(int(match.group(1)), []).append(row)
    numbers = [int(_DUMP_SOURCE.match(r["source"]).group(1)) for r in rows]
    if numbers != sorted(numbers):
        problems.append("rows are not in line order")
    for n, line in enumerate(lines, start=1):
        if any(p.search(line) for p in _BATCH_LINES):
            if n not in at:
                problems.append(f"batch line {n} gave no row")
        elif not any(p.search(line) for p in _DUMP_PATTERNS) and not any(
            r[SOURCE_ERROR_COL] for r in at.get(n, [])
        ):
            problems.append(f"unknown line {n} was not reported")
    return problems


# ------------------------------------------------------------------------------------------------
# A corpus: every kind of input, deterministic from a seed
# ------------------------------------------------------------------------------------------------
def generate(rng: random.Random) -> tuple[str, Callable[[], list[str]]]:
    """One fuzz input and its check: (kind, check)."""
    kind = rng.randrange(10)
    segments = seed_segments()
    if kind <= 1:  # a truncation of a valid segment at any byte
        i = rng.randrange(len(segments))
        k = rng.randint(0, len(segments[i].data))
        return "segment-truncation", lambda: check_segment(segments[i].data[:k], seed=i,
                                                            damage_at=k)  # fmt: skip
    if kind == 2:  # a bit flipped anywhere
        i = rng.randrange(len(segments))
        p = rng.randrange(len(segments[i].data))
        return "segment-flip", lambda: check_segment(
            flip(segments[i].data, p, rng.randrange(8)), seed=i, damage_at=p
        )
    if kind == 3:  # random lengths and magic values, after a valid prefix or alone
        i = rng.randrange(len(segments))
        prefix = segments[i].data if rng.random() < 0.5 else b""
        data = prefix + random_header(rng)
        seed, damage = (i, len(prefix)) if prefix else (None, None)
        return "segment-header", lambda: check_segment(data, seed=seed, damage_at=damage)
    if kind == 4:
        data = rng.randbytes(rng.randint(0, 600))
        return "segment-random", lambda: check_segment(data)
    if kind == 5:
        snap = seed_snapshot()
        if rng.random() < 0.5:
            data = snap[: rng.randint(0, len(snap) - 1)]
        else:
            data = flip(snap, rng.randrange(len(snap)), rng.randrange(8))
        return "snapshot-damage", lambda: check_snapshot(data, valid=False)
    if kind == 6:
        return "snapshot-random", lambda: check_snapshot(rng.randbytes(rng.randint(0, 200)),
                                                         valid=False)  # fmt: skip
    if kind == 7:
        data = mutate_lines(rng, seed_checkpoint()) if rng.random() < 0.6 else random_text(rng)
        return "checkpoint", lambda: check_checkpoint(data)
    texts = seed_dump_texts()
    data = mutate_lines(rng, rng.choice(texts)) if kind == 8 else random_text(rng)
    return "dump-log", lambda: check_dump_log(data)
