"""The compiled segment walk and CRC give what the plain Python gives, byte for byte."""

from __future__ import annotations

import random

import crc32c
import numpy as np
import pytest

from eos_audit.sources.kafka import segment_walk
from tests.fuzz import corpus

if not segment_walk.COMPILED:
    pytest.skip(
        "the walk runs uncompiled here (EOS_AUDIT_JIT=0 or no numba)", allow_module_level=True
    )


def _inputs() -> list[bytes]:
    rng = random.Random(28)
    out = [b"", bytes(16), bytes(61)]
    for segment in corpus.seed_segments():
        data = segment.data
        out += [data, data + bytes(40), data + corpus.random_header(rng)]
        out += [data[:cut] for cut in range(0, len(data), 7)]
        for _ in range(200):
            flipped = bytearray(data)
            flipped[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            out.append(bytes(flipped))
    return out


def _walk(walk, buf: np.ndarray, chunk: int) -> list:
    found, start, status = [], 0, segment_walk.WALK_FULL
    while status == segment_walk.WALK_FULL:
        positions, ends = np.empty(chunk, np.int64), np.empty(chunk, np.int64)
        legacy = np.empty(chunk, np.bool_)
        k, start, status = walk(buf, start, positions, ends, legacy)
        found += zip(positions[:k].tolist(), ends[:k].tolist(), legacy[:k].tolist(), strict=True)
    return [found, int(start), int(status)]


def test_the_compiled_walk_frames_what_the_plain_python_frames():
    for data in _inputs():
        buf = np.frombuffer(data, dtype=np.uint8)
        for chunk in (1, 3, 65536):  # full outputs resume where they stopped
            expected = _walk(segment_walk.walk.py_func, buf, chunk)
            assert _walk(segment_walk.walk, buf, chunk) == expected


@pytest.mark.skipif(not segment_walk.COMPILED_CRC, reason="crc32c's C function was not found")
def test_the_compiled_crc_is_crc32cs():
    data = b"".join(segment.data for segment in corpus.seed_segments())
    buf = np.frombuffer(data, dtype=np.uint8)
    positions, ends, legacy, _ = segment_walk.frames(buf)
    positions, ends = positions[~legacy], ends[~legacy]
    computed = [crc32c.crc32c(data[p + 21 : e]) for p, e in zip(positions, ends, strict=True)]
    # Every other stored CRC is wrong, so both answers are checked.
    stored = np.array([c if i % 2 else c ^ 1 for i, c in enumerate(computed)], dtype=np.uint32)
    valid = segment_walk.crc_valid(memoryview(data), buf, positions, ends, stored)
    assert valid.tolist() == [bool(i % 2) for i in range(len(computed))]
    assert len(computed) > 5


def _decode(decode, buf: np.ndarray, positions: np.ndarray, ends: np.ndarray) -> dict:
    out = {name: np.zeros(len(positions), dtype) for name, dtype in segment_walk.DECODE_V2_OUTPUTS}
    decode(buf, positions, ends, *out.values())
    # What a reader keeps of a marker it could not read is nothing: compare only what it reads.
    out["control_code"] = np.where(out["control_read"], out["control_code"], 0)
    out["coordinator_epoch"] = np.where(out["epoch_read"], out["coordinator_epoch"], 0)
    return {name: values.tolist() for name, values in out.items()}


def test_the_compiled_header_decode_reads_what_the_plain_python_reads():
    # Damaged copies included: flipped bits inside a control batch's marker make a varint, the
    # key or the value end short of the batch, or the key name another control type.
    decoded, markers = 0, set()
    for data in _inputs():
        buf = np.frombuffer(data, dtype=np.uint8)
        positions, ends, legacy, _ = segment_walk.frames(buf)
        positions, ends = positions[~legacy], ends[~legacy]
        expected = _decode(segment_walk.decode_v2.py_func, buf, positions, ends)
        assert _decode(segment_walk.decode_v2, buf, positions, ends) == expected
        decoded += len(positions)
        control = [a & 0x20 != 0 for a in expected["attributes"]]
        markers |= {
            (read, type_ in (0, 1), epoch)
            for is_control, read, type_, epoch in zip(
                control, expected["control_read"], expected["control_code"],
                expected["epoch_read"], strict=True,
            )
            if is_control
        }  # fmt: skip
    assert decoded > 1500
    # Markers read whole, a key of another type, a value cut short, a key cut short.
    assert {
        (True, True, True),
        (True, False, False),
        (True, True, False),
        (False, True, False),
    } <= markers
