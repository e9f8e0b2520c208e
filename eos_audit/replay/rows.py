"""What the replay reads: the kinds of rows, their order, and the columns the kernel receives.

Every input of a run enters the one pass as rows of one narrow shape (`REPLAY_SCHEMA`), is shuffled
once by (topic, partition) and sorted into `REPLAY_ORDER`: first the partition's preamble (what the
replay must know before the log: checkpoint values, acknowledgements to look for, seeded producer
state), then the log in offset order. Row kinds are an enum whose values are that order.
"""

from __future__ import annotations

from enum import IntEnum

from pyspark.sql import types as T


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
# strings the kernel never reads: the few emitted rows pick them up by row index.
REPLAY_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType(), True),
        T.StructField("partition", T.LongType(), True),
        T.StructField("kind", T.LongType(), False),
        T.StructField("base_offset", T.LongType(), True),
        T.StructField("last_offset", T.LongType(), True),
        T.StructField("producer_id", T.LongType(), True),
        T.StructField("producer_epoch", T.LongType(), True),
        T.StructField("base_sequence", T.LongType(), True),
        T.StructField("last_sequence", T.LongType(), True),
        T.StructField("record_count", T.LongType(), True),
        T.StructField("is_transactional", T.BooleanType(), True),
        T.StructField("is_control", T.BooleanType(), True),
        T.StructField("control_type", T.LongType(), True),
        T.StructField("coordinator_epoch", T.LongType(), True),
        T.StructField("leader_epoch", T.LongType(), True),
        T.StructField("magic", T.LongType(), True),
        T.StructField("timestamp", T.LongType(), True),
        T.StructField("crc_valid", T.BooleanType(), True),
        # Per kind: a checkpoint's offset, an acknowledgement's time, a seeded entry's open
        # transaction, a leader-epoch entry's epoch, a seeded batch's state offset; for a batch
        # located by reference (sources.row_reference), its row in `source_file`.
        T.StructField("value", T.LongType(), True),
        T.StructField("source", T.StringType(), True),
        # The id of the file a batch was read from, when `source` is null (row_reference).
        T.StructField("source_file", T.LongType(), True),
        T.StructField("replica", T.StringType(), True),
        # Quarantined rows ride along only to be written to quarantine (never replayed).
        T.StructField("quarantine_reason", T.StringType(), True),
        T.StructField("raw", T.StringType(), True),
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
# `engine.wire_rows` (Spark), `kernel.unpack_rows` and `runner.pack` (NumPy, for the kernel's
# tests) are the only code that knows this layout; tests/spark/test_wire.py checks they agree.
KIND_SHIFT = 56  # the kind in the header's top bits: ordering by header orders by kind first
# The small codes in the header: name -> (shift, mask).
HEADER_CODES = {"control_type": (0, 0b111), "magic": (3, 0b11)}
TRANSACTIONAL_BIT = 1 << 5
CONTROL_BIT = 1 << 6
# The CRC verdict: 0 not checked (null), 1 failed, 2 valid.
CRC_SHIFT, CRC_MASK = 7, 0b11
# One "is null" bit per value that travels in the header or in a pair.
NULL_BITS = {
    name: 1 << (9 + k)
    for k, name in enumerate(
        ("control_type", "magic", "producer_epoch", "coordinator_epoch", "base_sequence",
         "last_sequence", "leader_epoch", "record_count")
    )
}  # fmt: skip
# A quarantined row (never replayed, written to quarantine as it is).
QUARANTINED_BIT = 1 << 17
# A row located by reference: the id of its file (CRC-32) in the header's bits 20 to 51, its
# row in `value`. The text `<file>:row <n>` is written for emitted rows only.
SOURCE_FILE_BIT = 1 << 19
SOURCE_FILE_SHIFT, SOURCE_FILE_MASK = 20, 0xFFFFFFFF
# The int32 pairs: (wire field, value in the high half, value in the low half).
PAIRS = (
    ("epochs", "producer_epoch", "coordinator_epoch"),
    ("sequences", "base_sequence", "last_sequence"),
    ("counts", "leader_epoch", "record_count"),
)
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
WIRE_SCHEMA = T.StructType(
    [T.StructField("header", T.LongType(), False)]
    + [T.StructField(name, T.LongType(), False) for name, _, _ in PAIRS]
    + [T.StructField(name, REPLAY_SCHEMA[name].dataType, True) for name in PLAIN_FIELDS]
    + [T.StructField(DETAIL, T.StringType(), True)]
)
NULL_TEXT, LAST_TEXT = "-", "="


def detail_of(*texts: str | None) -> str | None:
    """The `detail` of a row with these `DETAIL_TEXTS` (what `engine.wire_rows` builds in Spark)."""
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
# independent of the input order. The sort reads packed values through `engine.sort_key`.
REPLAY_ORDER = [
    "topic", "partition", "order_kind", "base_offset", "kind", "last_offset", "producer_id",
    "producer_epoch", "base_sequence", "is_control", "is_transactional", "control_type",
    "coordinator_epoch", "leader_epoch", "timestamp", "record_count", "magic", "crc_valid",
    "detail", "source_file", "value",
]  # fmt: skip
