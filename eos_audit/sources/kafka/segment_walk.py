"""The segment reader's per-batch work, compiled: the framing walk, the header decode, the CRC-32C.

A segment is a run of entries framed by their header (docs/formats.md#segment-layout: base offset
int64, length int32, and the magic byte at 16). Walking it is one step per batch, and in Python
that step (an unpack, two appends) was most of the reader's time: 440,000 batches a second per
core with the CRC, whose per-batch call from Python cost as much again. Here both loops are plain
Python in the subset numba compiles, compiled like the replay kernel (`kernel_cache`: cached by
the source's content, `EOS_AUDIT_JIT=0` or no numba keeps the plain Python, which gives the same
rows). The CRC itself stays the `crc32c` library's C function (hardware CRC-32C where the CPU has
it), called from the compiled loop; where its symbol cannot be found, `crc32c.crc32c` is called
per batch from Python, as before.

The header decode (`decode_v2`) reads every v2 header field of a batch, and the transaction marker
of a control batch, in one pass over the batch's bytes (docs/formats.md#record-batch-v2 and
#control-batches). It replaced some thirty numpy passes over a copied header matrix plus a
vectorised varint reader, which cost 139 ns a batch on one core against about 30 for the walk and
the CRC together.

What a walk finds and where it stops is decided here; what to say about a stop (truncated,
garbage, zero padding) stays in `segments.py`, and so do the Arrow columns made of the decode.
"""

from __future__ import annotations

import ctypes
import logging

import crc32c
import numpy as np

log = logging.getLogger(__name__)

# Framing (docs/formats.md#segment-layout); segments.py holds the same numbers as names for the
# messages. Module-level ints, which numba compiles as constants.
LOG_OVERHEAD = 12
MIN_V2_LENGTH = 49
MIN_V0_LENGTH = 14
MIN_V1_LENGTH = 22
# Where the part of a v2 batch its CRC covers starts (after the crc field).
CRC_FROM = 21

# The v2 header (docs/formats.md#record-batch-v2): where each field starts in a batch.
LEADER_EPOCH_AT = 12
MAGIC_AT = 16
CRC_AT = 17
ATTRIBUTES_AT = 21
LAST_OFFSET_DELTA_AT = 23
MAX_TIMESTAMP_AT = 35
PRODUCER_ID_AT = 43
PRODUCER_EPOCH_AT = 51
BASE_SEQUENCE_AT = 53
RECORD_COUNT_AT = 57
RECORDS_AT = 61
COMPRESSION_MASK = 0x07
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
MAX_SEQUENCE = 2147483647
# A varint holds at most 10 bytes (docs/formats.md#record-batch-v2).
MAX_VARINT_BYTES = 10

# How a call of `walk` ended.
WALK_DONE = 0  # every byte framed
WALK_FULL = 1  # the output arrays are full: call again from the position returned
WALK_STOPPED = 2  # the bytes at the position returned are not a whole entry


def read_int32(buf, at):
    """The big-endian signed int32 at `at`."""
    value = (
        (np.int64(buf[at]) << 24)
        | (np.int64(buf[at + 1]) << 16)
        | (np.int64(buf[at + 2]) << 8)
        | np.int64(buf[at + 3])
    )
    if value >= 2147483648:
        value -= 4294967296
    return value


def read_int16(buf, at):
    """The big-endian signed int16 at `at`."""
    value = (np.int64(buf[at]) << 8) | np.int64(buf[at + 1])
    if value >= 32768:
        value -= 65536
    return value


def read_int64(buf, at):
    """The big-endian signed int64 at `at` (two's complement: the shifts wrap, as in Java)."""
    value = np.int64(0)
    for i in range(8):
        value = (value << 8) | np.int64(buf[at + i])
    return value


def read_varint(buf, at, end):
    """The zig-zag varint at `at`, read only below `end`: (value, where the next field starts).

    Where it does not end within `end` or within MAX_VARINT_BYTES bytes, the position is -1.
    """
    raw = np.uint64(0)
    for i in range(MAX_VARINT_BYTES):
        if at + i >= end:
            return np.int64(0), np.int64(-1)
        byte = np.uint64(buf[at + i])
        raw |= (byte & np.uint64(0x7F)) << np.uint64(7 * i)
        if (byte & np.uint64(0x80)) == 0:
            value = np.int64(raw >> np.uint64(1)) ^ -np.int64(raw & np.uint64(1))
            return value, np.int64(at + i + 1)
    return np.int64(0), np.int64(-1)


def increment_sequence(sequence, delta):
    """Kafka's `DefaultRecordBatch.incrementSequence` (docs/formats.md#sequence-arithmetic)."""
    if sequence > MAX_SEQUENCE - delta:
        return delta - (MAX_SEQUENCE - sequence) - 1
    return sequence + delta


def control_marker(buf, start, end):
    """The transaction marker in a control batch's first record (docs/formats.md#control-batches).

    Args:
        buf: the segment's bytes.
        start: where the first record starts (the batch's RECORDS_AT).
        end: where the batch ends: nothing at or after it is read.

    Returns:
        (control type, whether the key could be read, coordinator epoch, whether the value could
        be read). The value is read only for a COMMIT (1) or ABORT (0) key.
    """
    # length, attributes (int8), timestamp delta, offset delta, key length: each must end in the
    # batch, and the key (version int16, type int16) must too.
    cur = read_varint(buf, start, end)[1]
    if cur >= 0:
        cur = read_varint(buf, cur + 1, end)[1]
    if cur >= 0:
        cur = read_varint(buf, cur, end)[1]
    key_length = np.int64(0)
    if cur >= 0:
        key_length, cur = read_varint(buf, cur, end)
    if cur < 0 or key_length < 4 or cur + key_length > end:
        return np.int64(0), False, np.int64(0), False
    control_type = read_int16(buf, cur + 2)
    if control_type != 0 and control_type != 1:
        return control_type, True, np.int64(0), False
    value_length, value_at = read_varint(buf, cur + key_length, end)
    if value_at < 0 or value_length < 6 or value_at + value_length > end:
        return control_type, True, np.int64(0), False
    return control_type, True, read_int32(buf, value_at + 2), True


# What `decode_v2` writes, in the order of its arguments after `ends`: one array a field, one
# element a batch (named as the reader's columns where the field is one).
DECODE_V2_OUTPUTS = (
    ("base_offset", np.int64), ("last_offset", np.int64), ("partition_leader_epoch", np.int32),
    ("magic", np.int32), ("stored_crc", np.uint32), ("attributes", np.int16),
    ("max_timestamp", np.int64), ("producer_id", np.int64), ("producer_epoch", np.int32),
    ("base_sequence", np.int32), ("last_sequence", np.int32), ("record_count", np.int32),
    ("control_code", np.int16), ("control_read", np.bool_), ("coordinator_epoch", np.int32),
    ("epoch_read", np.bool_),
)  # fmt: skip


def decode_v2(
    buf, positions, ends, base_offset, last_offset, partition_leader_epoch, magic, stored_crc,
    attributes, max_timestamp, producer_id, producer_epoch, base_sequence, last_sequence,
    record_count, control_code, control_read, coordinator_epoch, epoch_read,
):  # fmt: skip
    """Decode the header of each v2 batch (and a control batch's marker) into the arrays given.

    Every output array has one element per batch, written at the batch's index; their types
    are `DECODE_V2_OUTPUTS`'s.

    Args:
        buf: the segment's bytes (uint8).
        positions: where each batch starts (framed by `walk`).
        ends: where each ends.
        base_offset: the base offset.
        last_offset: base offset + last offset delta.
        partition_leader_epoch: the partition leader epoch.
        magic: the magic byte.
        stored_crc: the CRC the header holds (`crc_valid` compares it).
        attributes: the attributes (int16).
        max_timestamp: the max timestamp.
        producer_id: the producer id.
        producer_epoch: the producer epoch.
        base_sequence: the base sequence.
        last_sequence: the base sequence incremented by the last offset delta; -1 where the base
            sequence is -1.
        record_count: the record count.
        control_code: the marker's control type, where `control_read`.
        control_read: whether the batch is an uncompressed, non-empty control batch whose marker
            key could be read (a compacted or compressed control batch keeps none).
        coordinator_epoch: the marker's coordinator epoch, where `epoch_read`.
        epoch_read: whether the marker's value could be read (COMMIT and ABORT only).
    """
    for i in range(positions.shape[0]):
        at = positions[i]
        base = read_int64(buf, at)
        delta = read_int32(buf, at + LAST_OFFSET_DELTA_AT)
        flags = read_int16(buf, at + ATTRIBUTES_AT)
        sequence = read_int32(buf, at + BASE_SEQUENCE_AT)
        count = read_int32(buf, at + RECORD_COUNT_AT)
        base_offset[i] = base
        last_offset[i] = base + delta
        partition_leader_epoch[i] = read_int32(buf, at + LEADER_EPOCH_AT)
        magic[i] = buf[at + MAGIC_AT]
        stored_crc[i] = read_int32(buf, at + CRC_AT) & 0xFFFFFFFF
        attributes[i] = flags
        max_timestamp[i] = read_int64(buf, at + MAX_TIMESTAMP_AT)
        producer_id[i] = read_int64(buf, at + PRODUCER_ID_AT)
        producer_epoch[i] = read_int16(buf, at + PRODUCER_EPOCH_AT)
        base_sequence[i] = sequence
        last_sequence[i] = -1 if sequence == -1 else increment_sequence(sequence, delta)
        record_count[i] = count
        marker = np.int64(0), False, np.int64(0), False
        if (flags & CONTROL_FLAG) != 0 and (flags & COMPRESSION_MASK) == 0 and count > 0:
            marker = control_marker(buf, at + RECORDS_AT, ends[i])
        control_code[i], control_read[i], coordinator_epoch[i], epoch_read[i] = marker


def walk(buf, start, positions, ends, legacy):
    """Frame the entries of `buf` from byte `start`, into `positions`, `ends` and `legacy`.

    Args:
        buf: the segment's bytes (uint8).
        start: where to begin: 0, or the position a full call returned.
        positions: where each entry starts (int64, filled from 0).
        ends: where each ends (int64).
        legacy: whether each is a legacy magic 0/1 entry rather than a v2 batch (bool).

    Returns:
        (entries written, the position reached, WALK_DONE / WALK_FULL / WALK_STOPPED).
    """
    n = buf.shape[0]
    capacity = positions.shape[0]
    pos = start
    k = 0
    while pos < n:
        if k == capacity:
            return k, pos, WALK_FULL
        if n - pos < 17:
            return k, pos, WALK_STOPPED
        length = read_int32(buf, pos + 8)
        magic = buf[pos + 16]
        end = pos + LOG_OVERHEAD + length
        if end > n:
            return k, pos, WALK_STOPPED
        if magic == 2 and length >= MIN_V2_LENGTH:
            legacy[k] = False
        elif (magic == 0 and length >= MIN_V0_LENGTH) or (magic == 1 and length >= MIN_V1_LENGTH):
            legacy[k] = True
        else:
            return k, pos, WALK_STOPPED
        positions[k] = pos
        ends[k] = end
        k += 1
        pos = end
    return k, pos, WALK_DONE


# The C CRC-32C as compiled code calls it (`_bind_c_crc32c`); None where it is not bound, and
# then `crc_matches` is never called.
_crc32c_c = None


def crc_matches(address, positions, ends, stored, out):
    """Whether each v2 batch's CRC-32C equals the one stored in its header (compiled only).

    Args:
        address: the address of the segment's first byte.
        positions: where each batch starts.
        ends: where each ends.
        stored: the CRC each header holds.
        out: set to the comparison, one per batch.
    """
    for i in range(positions.shape[0]):
        begin = positions[i] + CRC_FROM
        crc = _crc32c_c(np.uint32(0xFFFFFFFF), address + begin, ends[i] - begin)
        out[i] = (crc ^ np.uint32(0xFFFFFFFF)) == stored[i]


COMPILED_FUNCTIONS = [
    "read_int32", "read_int16", "read_int64", "read_varint", "increment_sequence",
    "control_marker", "decode_v2", "walk", "crc_matches",
]  # fmt: skip


def _c_crc32c() -> tuple[str, int] | None:
    """The symbol and address of the C function `crc32c.crc32c` calls, or None if not found.

    The `crc32c` extension chose the function when it was imported (hardware or software); its
    module exports the implementations under their own names. The one picked is checked against
    `crc32c.crc32c` before it is used.
    """
    # The extension is `crc32c._crc32c` since crc32c 2.5, the top module itself before.
    extension = getattr(crc32c, "_crc32c", crc32c)
    try:
        library = ctypes.CDLL(extension.__file__)
    except (OSError, TypeError):  # not a shared library (another implementation of the module)
        return None
    # The hardware functions only where the extension found the CPU has the instruction: called
    # elsewhere they would stop the process.
    hardware = (
        ("_crc32c_hw_adler", "_crc32c_hw_arm64") if getattr(crc32c, "hardware_based", False) else ()
    )
    check = b"123456789" * 7
    for name in (*hardware, "_crc32c_sw_slicing_by_8"):
        function = getattr(library, name, None)
        if function is None:
            continue
        function.restype = ctypes.c_uint32
        function.argtypes = (ctypes.c_uint32, ctypes.c_char_p, ctypes.c_ulong)
        if function(0xFFFFFFFF, check, len(check)) ^ 0xFFFFFFFF == crc32c.crc32c(check):
            return name, ctypes.cast(function, ctypes.c_void_p).value
    return None


def _bind_c_crc32c() -> bool:
    """Make the C CRC-32C callable from compiled code as `_crc32c_c`; whether it could be.

    numba calls an external function by symbol name, resolved when the code is linked, also when
    it comes from the cache; the symbol is registered with LLVM under a name of ours.
    """
    found = _c_crc32c()
    if found is None:
        return False
    try:
        import llvmlite.binding
        import numba
    except ImportError:
        return False
    llvmlite.binding.add_symbol("eos_audit_crc32c", found[1])
    globals()["_crc32c_c"] = numba.types.ExternalFunction(
        "eos_audit_crc32c", numba.types.uint32(numba.types.uint32, numba.types.intp,
                                                numba.types.intp)
    )  # fmt: skip
    return True


def _compile() -> tuple[bool, bool]:
    try:
        from eos_audit.replay.kernel_cache import compile_in_place
    except (ImportError, AttributeError):  # no numba (or another's internals): plain Python
        return False, False
    names = [name for name in COMPILED_FUNCTIONS if name != "crc_matches"]
    crc = _bind_c_crc32c()
    if not compile_in_place(globals(), names + (["crc_matches"] if crc else [])):
        return False, False
    return True, crc


COMPILED, COMPILED_CRC = _compile()


def frames(buf: np.ndarray, chunk: int = 65536) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Every entry `buf` frames, in file order, and where the framing stopped.

    Args:
        buf: the segment's bytes (uint8).
        chunk: entries framed per call of `walk` (bounds the memory a call asks for).

    Returns:
        (positions, ends, legacy mask, stop): stop is -1 when every byte was framed, else the
        position of the bytes that are not a whole entry (a truncated tail, zero padding or
        garbage: segments.py says which).
    """
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    start, status = 0, WALK_FULL
    while status == WALK_FULL:
        positions = np.empty(chunk, dtype=np.int64)
        ends = np.empty(chunk, dtype=np.int64)
        legacy = np.empty(chunk, dtype=np.bool_)
        k, start, status = walk(buf, start, positions, ends, legacy)
        parts.append((positions[:k], ends[:k], legacy[:k]))
    stop = -1 if status == WALK_DONE else int(start)
    if len(parts) == 1:
        return (*parts[0], stop)
    return (*(np.concatenate(column) for column in zip(*parts, strict=True)), stop)


def crc_valid(
    data: memoryview, buf: np.ndarray, positions: np.ndarray, ends: np.ndarray, stored: np.ndarray
) -> np.ndarray:
    """Whether each v2 batch's CRC-32C (bytes 21 to its end) equals the `stored` one.

    Args:
        data: the segment's bytes.
        buf: the same bytes as a uint8 array.
        positions: where each batch starts.
        ends: where each ends.
        stored: the CRC of each header (uint32 values).

    Returns:
        A bool array, one per batch.
    """
    stored = stored.astype(np.uint32)
    if COMPILED_CRC and len(positions):
        out = np.empty(len(positions), dtype=np.bool_)
        crc_matches(buf.ctypes.data, positions, ends, stored, out)
        return out
    c = crc32c.crc32c
    computed = np.fromiter(
        (c(data[p + CRC_FROM : e]) for p, e in zip(positions.tolist(), ends.tolist(), strict=True)),
        dtype=np.uint32,
        count=len(positions),
    )
    return computed == stored
