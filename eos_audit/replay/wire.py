"""What the replay reads: the kinds of rows, their order, and the columns the kernel receives.

Every input of a run enters the one pass as rows of one narrow shape (`REPLAY_ARROW`), is shuffled
once by (topic, partition) and sorted into `REPLAY_ORDER`: first the partition's preamble (what the
replay must know before the log: checkpoint values, acknowledgements to look for, seeded producer
state), then the log in offset order. Row kinds are an enum whose values are that order.

Between Spark and the kernel the rows cross in fewer, packed fields (`WIRE_ARROW`); this module
is the one layout of that wire: where each value lies (`BIT_FIELDS`), how it is packed and read
back in NumPy and in the compiled kernel. It imports no PySpark, so neither does the kernel; the
Spark side of the same layout (the schemas as Spark types, the packing and the sort keys as Spark
columns) is `replay.wire_columns`, built from what is declared here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import pyarrow as pa

try:  # the compiled kernel reads the wire through `field_value`, compiled into its callers
    from numba.extending import register_jitable as _compilable
except ImportError:  # no numba: the kernel runs as plain Python (replay.runner says so once)

    def _compilable(function: Callable) -> Callable:
        return function


class RowKind(IntEnum):
    """Kinds of replay rows, numbered in the order the replay meets them within a partition."""

    # -- the preamble, before the log --
    LOG_START_CHECKPOINT = 0  # log-start-offset checkpoint value (value: the offset)
    HIGH_WATERMARK_CHECKPOINT = 1  # replication-offset checkpoint value (value: the offset)
    ACK = 2  # a successful client acknowledgement (value: its time, epoch ms)
    SEED_BATCH = 3  # a cached batch of seeded producer state (value: the state's offset)
    SEED_STATE = 4  # the seeded entry itself (value: its open transaction's first offset)
    # --since-state: the seeded state already covers the log below this offset (value: it)
    STATE_COVERAGE = 5
    # -- the log, by offset; at one offset in this order --
    LEADER_EPOCH_ENTRY = 6  # leader-epoch checkpoint entry (value: the epoch)
    AUDITED = 7  # a batch of the audited replica
    REPLICA = 8  # the same offset in another replica, compared with the audited one


PREAMBLE_KINDS = (
    RowKind.LOG_START_CHECKPOINT,
    RowKind.HIGH_WATERMARK_CHECKPOINT,
    RowKind.ACK,
    RowKind.SEED_BATCH,
    RowKind.SEED_STATE,
    RowKind.STATE_COVERAGE,
)


class ControlType(IntEnum):
    """A marker's type (ControlRecordType), as the kernel carries it; OPEN for a transaction.

    OPEN and UNKNOWN are transaction outcomes only, never on the wire: OPEN a transaction still
    open at the end of the log, UNKNOWN one closed by a marker whose type the export does not
    show (docs/rules.md#transactions: the broker took it as an end-transaction marker all the same).
    """

    NONE = 0
    COMMIT = 1
    ABORT = 2
    OTHER = 3
    OPEN = 4
    UNKNOWN = 5


# The replay rows as the engine builds them: one readable field per value. Integers are int64
# here (nulls become NULL in the kernel), flags boolean. `topic`, `source` and `replica` are
# strings the kernel never reads: the few emitted rows pick them up by row index. Spark's
# `wire_columns.REPLAY_SCHEMA` is this schema.
REPLAY_ARROW = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int64()),
        pa.field("kind", pa.int64(), nullable=False),
        pa.field("base_offset", pa.int64()),
        pa.field("last_offset", pa.int64()),
        pa.field("producer_id", pa.int64()),
        pa.field("producer_epoch", pa.int64()),
        pa.field("base_sequence", pa.int64()),
        pa.field("last_sequence", pa.int64()),
        pa.field("record_count", pa.int64()),
        pa.field("is_transactional", pa.bool_()),
        pa.field("is_control", pa.bool_()),
        pa.field("control_type", pa.int64()),
        pa.field("coordinator_epoch", pa.int64()),
        pa.field("leader_epoch", pa.int64()),
        pa.field("magic", pa.int64()),
        pa.field("timestamp", pa.int64()),
        pa.field("crc_valid", pa.bool_()),
        # Per kind: a checkpoint's offset, an acknowledgement's time, a seeded entry's open
        # transaction, a leader-epoch entry's epoch, a seeded batch's state offset; for a batch
        # located by reference (sources.row_reference), its row in `source_file`.
        pa.field("value", pa.int64()),
        pa.field("source", pa.string()),
        # The id of the file a batch was read from, when `source` is null (row_reference).
        pa.field("source_file", pa.int64()),
        pa.field("replica", pa.string()),
        # Quarantined rows ride along only to be written to quarantine (never replayed).
        pa.field("quarantine_reason", pa.string()),
        pa.field("raw", pa.string()),
    ]
)

# ------------------------------------------------------------------------------------------------
# The wire: the replay rows as they cross from the JVM to Python
# ------------------------------------------------------------------------------------------------
# Spark's Arrow writer costs about the same per field whatever its width (measured: 12 int64
# fields take as long as 12 int32 ones, and 24 take more than twice as long), so what crosses is
# as few fields as the values allow: the flags and small codes of a row in one `header`, and the
# int32 values in pairs, one per half of an int64. Every paired value is int32 by contract
# (schemas.py types them IntegerType), so a half holds it exactly; a null is a bit in the header.
#
# This section is the one codec of that layout: `BIT_FIELDS` says where each value lies, and the
# functions below pack it (`pack` in NumPy; `wire_columns.wire_rows` in Spark) and read it back
# (`field_value` in NumPy and in the compiled kernel's `unpack_rows`; `wire_columns.sort_key` in
# Spark). Other code names fields, never a shift or a mask; tests/replay/test_wire.py checks the
# Spark and NumPy sides agree.
HEADER = "header"
# The int32 pairs: (wire field, value in the high half, value in the low half).
PAIRS = (
    ("epochs", "producer_epoch", "coordinator_epoch"),
    ("sequences", "base_sequence", "last_sequence"),
    ("counts", "leader_epoch", "record_count"),
)
# The values that travel in the header or in a pair: each has an "is null" bit in the header.
NULLABLE = ("control_type", "magic", *[name for _, high, low in PAIRS for name in (high, low)])


@dataclass(frozen=True)
class BitField:
    """Where a value lies on the wire: `width` bits from bit `shift` of the int64 field `word`."""

    word: str
    shift: int
    width: int
    signed: bool = False  # read back sign-extended from its width (an int32 half)

    @property
    def mask(self) -> int:
        """The field's bits, shifted down to bit 0."""
        return (1 << self.width) - 1

    @property
    def bit(self) -> int:
        """The field's lowest bit in its word: a one-bit field's value when set."""
        return 1 << self.shift

    @property
    def at_top(self) -> bool:
        """Whether the field ends at its word's top bit (nothing above it to mask off)."""
        return self.shift + self.width == 64

    @property
    def reader(self) -> tuple[int, int, int]:
        """How `field_value` reads the field: (left shift, arithmetic right shift, mask).

        A signed field is shifted up to the word's top and arithmetically down again, which
        extends its sign; an unsigned one is shifted down and masked. A shift of 0 or a mask of
        -1 is an operation left out, in NumPy, in compiled code and in Spark alike.
        """
        if self.signed:
            return 64 - self.shift - self.width, 64 - self.width, -1
        return 0, self.shift, self.mask


def null_flag(name: str) -> str:
    """The name of the header bit that says the value `name` (one of `NULLABLE`) is null."""
    return f"{name}_is_null"


BIT_FIELDS: dict[str, BitField] = {
    # -- the header: a row's small codes and flags, its null bits, and its kind --
    "control_type": BitField(HEADER, 0, 3),  # wire.ControlType, as Spark codes it
    "magic": BitField(HEADER, 3, 2),
    "is_transactional": BitField(HEADER, 5, 1),
    "is_control": BitField(HEADER, 6, 1),
    "crc_valid": BitField(HEADER, 7, 2),  # the CRC verdict: 0 not checked (null), 1 failed, 2 valid
    **{null_flag(name): BitField(HEADER, 9 + k, 1) for k, name in enumerate(NULLABLE)},
    # A quarantined row (never replayed, written to quarantine as it is).
    "quarantined": BitField(HEADER, 17, 1),
    # The first row the replay gets after quarantined rows of its partition (set by the runner,
    # which takes quarantined rows out): the offsets before it held a batch nobody could read.
    "follows_quarantined": BitField(HEADER, 18, 1),
    # A row located by reference: the id of its file here (sources.files.row_reference), its
    # position in `value`. The text (`<file>:row <n>`, `<file>:<byte>`) is written for emitted
    # rows only.
    "has_source_file": BitField(HEADER, 19, 1),
    "source_file": BitField(HEADER, 20, 32),
    # A batch below the offset its partition's seeded state covers (set by the runner, which
    # decides it for the whole Arrow batch at once: runner.below_snapshot): not replayed again.
    "below_snapshot": BitField(HEADER, 52, 1),
    # The kind in the top bits: ordering by header orders by kind first.
    "kind": BitField(HEADER, 56, 8, signed=True),
    # -- the int32 pairs --
    **{high: BitField(word, 32, 32, signed=True) for word, high, _ in PAIRS},
    **{low: BitField(word, 0, 32, signed=True) for word, _, low in PAIRS},
}
# Fields the wire leaves 0: the runner sets them on the rows it hands the replay.
SET_BY_THE_RUNNER = frozenset({"follows_quarantined", "below_snapshot"})
WORDS = (HEADER, *[word for word, _, _ in PAIRS])


def check_layout(fields: Mapping[str, BitField]) -> None:
    """Check that every field fits in its 64-bit word and that no two fields share a bit.

    Args:
        fields: a layout, name -> field (`BIT_FIELDS` is checked at import).

    Raises:
        ValueError: naming the first field that does not fit or overlaps another.
    """
    taken: dict[str, int] = {}
    for name, field in fields.items():
        if field.width < 1 or field.shift < 0 or field.shift + field.width > 64:
            raise ValueError(
                f"wire field {name}: bits {field.shift} to {field.shift + field.width - 1} "
                "do not fit in an int64"
            )
        if field.at_top and not field.signed:
            # An arithmetic shift would read its top bit back as a sign.
            raise ValueError(f"wire field {name}: a field at the top bit must be signed")
        bits = field.mask << field.shift
        if taken.get(field.word, 0) & bits:
            raise ValueError(f"wire field {name} overlaps another field of `{field.word}`")
        taken[field.word] = taken.get(field.word, 0) | bits


check_layout(BIT_FIELDS)


# -- reading, in NumPy and in the compiled kernel --
@_compilable
def field_value(word, reader):
    """A field of wire words (`BitField.reader`): an int64 or a NumPy array of them.

    Written in the subset numba compiles: the kernel's `unpack_rows` calls it with the reader as a
    module constant, which the compiler folds into the few operations the field needs.
    """
    left, right, mask = reader
    value = word
    if left:
        value = value << left
    if right:
        value = value >> right
    if mask != -1:
        value = value & mask
    return value


def value_of(words: np.ndarray, name: str) -> np.ndarray:
    """The field `name` of `BIT_FIELDS` in wire words."""
    return field_value(words, BIT_FIELDS[name].reader)


def flag_set(words: np.ndarray, name: str) -> np.ndarray:
    """Whether the one-bit field `name` of `BIT_FIELDS` is set in wire words."""
    return (words & BIT_FIELDS[name].bit) != 0


# -- packing, in NumPy (wire_columns packs in Spark, from the same `BIT_FIELDS`) --
def bits_of(value: np.ndarray, name: str) -> np.ndarray:
    """The value `name` of `BIT_FIELDS` packed into its place in its wire word."""
    field = BIT_FIELDS[name]
    if not field.at_top:
        value = value & field.mask
    return value << field.shift if field.shift else value


def words_of(bits: dict[str, object], combine: Callable) -> dict[str, object]:
    """Each wire word as the combination of its fields' packed bits, in `BIT_FIELDS` order.

    Args:
        bits: every field the wire carries (all but `SET_BY_THE_RUNNER`), packed (`bits_of`).
        combine: how two packed parts combine: a bitwise or (NumPy's, or Spark's).
    """
    words: dict[str, object] = {}
    for name, field in BIT_FIELDS.items():
        if name in SET_BY_THE_RUNNER:
            continue
        part = bits[name]
        words[field.word] = part if field.word not in words else combine(words[field.word], part)
    return words


# Fields that cross as they are.
PLAIN_FIELDS = (
    "topic", "partition", "base_offset", "last_offset", "producer_id", "timestamp", "value",
)  # fmt: skip
# The rare texts of a row in one field, null for most rows: a string field costs Spark's Arrow
# writer about as much when null as when set (measured: three separate, mostly null fields were
# an eighth of the hand-over's CPU). Each text but the last is written `<length>:<text>`, or `-`
# when null; the last, the row's source, is written `=<text>`, or `-` when null, and runs to the
# end, so that rows alike in their other texts sort by `detail` as by their source, nulls first
# ('-' sorts before '='), which is the last tie-break of the log order (REPLAY_ORDER).
DETAIL = "detail"
DETAIL_TEXTS = ("quarantine_reason", "raw", "replica", "source")
# The wire's fields: the packed words, the plain fields, the texts. Spark's
# `wire_columns.WIRE_SCHEMA` is this schema.
WIRE_ARROW = pa.schema(
    [pa.field(word, pa.int64(), nullable=False) for word in WORDS]
    + [pa.field(name, REPLAY_ARROW.field(name).type) for name in PLAIN_FIELDS]
    + [pa.field(DETAIL, pa.string())]
)
NULL_TEXT, LAST_TEXT = "-", "="


def pack(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Replay rows in `REPLAY_ARROW` as the wire carries them, in NumPy.

    What `wire_columns.wire_rows` does in Spark, for driving the replay without Spark (the
    kernel's tests, debugging).
    """

    def ints(name: str) -> tuple[np.ndarray, np.ndarray]:
        column = batch.column(name)
        return column.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64), (
            column.is_null().to_numpy(zero_copy_only=False)
        )

    def flag(condition: np.ndarray, name: str) -> np.ndarray:
        return np.where(condition, BIT_FIELDS[name].bit, 0)

    def is_true(name: str) -> np.ndarray:
        return batch.column(name).fill_null(False).to_numpy(zero_copy_only=False).astype(bool)

    crc_null = batch.column("crc_valid").is_null().to_numpy(zero_copy_only=False)
    source_file, no_file = ints("source_file")
    reasons = batch.column("quarantine_reason").is_null().to_numpy(zero_copy_only=False)
    bits = {
        "kind": bits_of(ints("kind")[0], "kind"),
        "crc_valid": bits_of(np.where(crc_null, 0, np.where(is_true("crc_valid"), 2, 1)),
                           "crc_valid"),
        "source_file": bits_of(source_file, "source_file"),
        "is_transactional": flag(is_true("is_transactional"), "is_transactional"),
        "is_control": flag(is_true("is_control"), "is_control"),
        "quarantined": flag(~reasons, "quarantined"),
        "has_source_file": flag(~no_file, "has_source_file"),
    }  # fmt: skip
    for name in NULLABLE:
        value, null = ints(name)
        bits[name] = bits_of(value, name)
        bits[null_flag(name)] = flag(null, null_flag(name))
    words = words_of(bits, np.bitwise_or)
    arrays = {word: pa.array(words[word], pa.int64()) for word in WORDS}
    for name in PLAIN_FIELDS:
        arrays[name] = batch.column(name).cast(WIRE_ARROW.field(name).type)
    texts = [batch.column(name).to_pylist() for name in DETAIL_TEXTS]
    details = [detail_of(*row_texts) for row_texts in zip(*texts, strict=True)]
    arrays[DETAIL] = pa.array(details, pa.string())
    return pa.RecordBatch.from_arrays([arrays[f.name] for f in WIRE_ARROW], schema=WIRE_ARROW)


def detail_of(*texts: str | None) -> str | None:
    """The `detail` of a row with these `DETAIL_TEXTS` (what `wire_columns.wire_rows` builds)."""
    if all(text is None for text in texts):
        return None
    *prefixed, last = texts
    written = [NULL_TEXT if text is None else f"{len(text)}:{text}" for text in prefixed]
    written.append(NULL_TEXT if last is None else f"{LAST_TEXT}{last}")
    return "".join(written)


def texts_of(detail: str | None) -> tuple[str | None, ...]:
    """The `DETAIL_TEXTS` of a row's `detail`, in their order."""
    if detail is None:
        return (None,) * len(DETAIL_TEXTS)
    texts: list[str | None] = []
    at = 0
    for _ in DETAIL_TEXTS[:-1]:
        if detail[at] == NULL_TEXT:
            texts.append(None)
            at += 1
            continue
        colon = detail.index(":", at)
        end = colon + 1 + int(detail[at:colon])
        texts.append(detail[colon + 1 : end])
        at = end
    texts.append(None if detail[at] == NULL_TEXT else detail[at + 1 :])
    return tuple(texts)


# Sorted within (topic, partition): preamble kinds first, then the log by offset. `order_kind`
# is the kind in the preamble and LEADER_EPOCH_ENTRY for the whole log, so log rows sort by
# offset first and by kind second. Ties of identical offsets are broken on every other field,
# nulls first, and last on the row's texts (`detail`: its source last) and its location by
# reference (docs/replay_semantics.md#scope), so the replay (and every finding id) is
# independent of the input order. The sort reads packed values through `wire_columns.sort_key`.
REPLAY_ORDER = [
    "topic", "partition", "order_kind", "base_offset", "kind", "last_offset", "producer_id",
    "producer_epoch", "base_sequence", "is_control", "is_transactional", "control_type",
    "coordinator_epoch", "leader_epoch", "timestamp", "record_count", "magic", "crc_valid",
    "detail", "source_file", "value",
]  # fmt: skip
