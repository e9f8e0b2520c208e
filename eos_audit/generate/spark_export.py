"""A synthetic export computed by Spark: batches, acknowledgements, ListOffsets, ground truth.

Everything is a column expression over `spark.range`, so the export scales with the cluster and
nothing of it passes through the driver; every placement is a hash of the seed and the row's
coordinates, so the same plan gives the same export on any cluster.

Layout. Row `i` of `spark.range(batches)` is one *batch slot*: the hot partition takes the first
`hot_partition_share` of the slots, the others take the rest round-robin. A partition's batches
take its offsets one after the other from its first offset, as a leader gives them out
(docs/rules.md#offset-gap): a slot's base offset is the sum of the record counts of the
partition's slots before it. A slot that holds no batch takes no offset (a lost batch's offsets
went to the next batch), except on a compacted topic, where a batch the cleaner removed leaves
its hole. Slot `j` is written at `START_MS + 10 ms * j`. The producers of a
partition take the slots in a fixed cycle in which the hot producers appear `hot_weight` times.
A producer's own slots form its *stream*, cut into sessions of `session_blocks` blocks of
`block_batches` batches; every session is one producer id (a producer that restarted got a new
id). Faults are planted inside one session so that nothing cascades:

- the first block may hold a session-level start fault (retention-evicted producer, wraparound);
- each middle block may hold one block fault (duplicate, lost batch, acknowledged write lost), in
  a template that uses exactly the sequences a clean block uses (the batch after a duplicate
  carries two batches' records), so the blocks after it are clean;
- the last block may hold a session-level end fault (zombie after an epoch bump, sequence reset,
  expiry, hanging transaction), after which the producer id writes no more.

Transactional producers make every block one transaction ending in a COMMIT or ABORT marker
(transactions v1: same epoch, sequences continue; v2: the marker is one epoch up and the next
transaction restarts at 0, docs/rules.md#transactions). Slots after a producer's last complete
session are clean batches of a fresh producer id, except a transactional producer's, which stay
empty (its unfinished last transaction would be open at the end of the log).

Each fault's findings are derived from the very slot columns the batches come from, so the ground
truth cannot drift from the data.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from eos_audit.config import DEFAULT_SEVERITIES
from eos_audit.findings import CAUSE_CEILING, severity_for
from eos_audit.generate.plan import (
    FIRST_OFFSET,
    MAX_SEQUENCE,
    SLOT_MS,
    START_MS,
    GenerationPlan,
)
from eos_audit.schemas import ACKS, GROUND_TRUTH, LIST_OFFSETS, RECORD_BATCH
from eos_audit.session import default_parallelism, jit_sized_code, session_has_delta
from eos_audit.sinks.delta import choose_writer

log = logging.getLogger(__name__)

SEQUENCE_SPACE = MAX_SEQUENCE + 1
# Producer kinds (the `producer_kind` slot column).
IDEMPOTENT, TXN_V1, TXN_V2, PLAIN = 0, 1, 2, 3
# Block faults, session start faults and session end faults (slot columns `block_fault`,
# `start_fault`, `end_fault`); 0 is none.
DUP_IN_CACHE, DUP_BEYOND_CACHE, LOST_BATCH, ACKED_LOST = 1, 2, 3, 4
RETENTION, WRAPAROUND = 1, 2
ZOMBIE, RESET, EXPIRED, HANGING = 1, 2, 3, 4
# Where in its block a template acts (slot index within the block).
ZOMBIE_BUMP_SLOT = 2  # the new instance's first batch; the zombie writes right after it
WRAP_LOST_SLOT = 3  # the batch starting at sequence 0 after 2147483647
COORDINATOR_EPOCH = 3
# Producer-id layout: (topic-partition, producer) in the high bits, the session below.
SESSION_BITS = 24
LIST_OFFSETS_LAG_MS = 1
ACK_LAG_MS = 5
TABLES = ("batches", "acks", "list_offsets", "ground_truth")
# What the batch fields and the ground truth are derived from: the slot's coordinates and its
# placed faults (the columns `slots` hands to its `placed` step).
PLACED_COLUMNS = (
    "j", "tp", "producer", "producer_kind", "records", "q", "c", "s", "data_slots", "in_session",
    "is_txn", "is_plain", "topic_index", "compacted", "start_fault", "end_fault", "block_fault",
    "dup_distance", "is_dup", "is_absorber", "is_lost", "is_gap", "is_wrap", "is_first",
    "end_block", "is_marker", "is_zombie", "is_bumped", "is_reset_after",
)  # fmt: skip


@dataclass(frozen=True)
class Geometry:
    """The driver-side constants of a plan's layout: a few small lists, never per batch."""

    slots_by_index: list[int]  # batch slots of each partition index (0 is the hot partition)
    hot_tp: int  # the topic-partition the hot partition index maps to
    cycle: list[int]  # producer of each position of a partition's cycle
    ranks: list[int]  # how many times that producer appeared earlier in the cycle
    weights: list[int]  # per producer
    kinds: list[int]  # per producer: IDEMPOTENT, TXN_V1, TXN_V2, PLAIN
    records: list[int]  # records per batch, per producer

    @property
    def cycle_length(self) -> int:
        """Slots of one cycle of a partition's producers."""
        return len(self.cycle)


def producer_kind(producer: int, hot_producers: int) -> int:
    """Hot producers are idempotent; the others cycle idem, idem, v1, v2, idem, plain."""
    if producer < hot_producers:
        return IDEMPOTENT
    return (IDEMPOTENT, IDEMPOTENT, TXN_V1, TXN_V2, IDEMPOTENT, PLAIN)[
        (producer - hot_producers) % 6
    ]


def geometry(plan: GenerationPlan) -> Geometry:
    """The plan's layout constants."""
    n, tps = plan.batches, plan.topic_partitions
    if tps == 1:
        slots = [n]
    else:
        hot = max(int(n * plan.hot_partition_share), n // tps)
        rest = n - hot
        slots = [hot] + [
            rest // (tps - 1) + (1 if i < rest % (tps - 1) else 0) for i in range(tps - 1)
        ]
    weights = [plan.hot_weight if p < plan.hot_producers else 1 for p in range(plan.producers)]
    cycle, ranks, seen = [], [], [0] * plan.producers
    # Hot producers spread over the cycle rather than bunched: round r takes every producer
    # whose weight exceeds r.
    for rnd in range(plan.hot_weight):
        for p in range(plan.producers):
            if rnd < weights[p]:
                cycle.append(p)
                ranks.append(seen[p])
                seen[p] += 1
    return Geometry(
        slots_by_index=slots,
        hot_tp=plan.seed % tps,
        cycle=cycle,
        ranks=ranks,
        weights=weights,
        kinds=[producer_kind(p, plan.hot_producers) for p in range(plan.producers)],
        records=[1 + p % 3 for p in range(plan.producers)],
    )


def _at(values: Sequence[int], index: Column) -> Column:
    """`values[index]` for a small driver-side list, as a column (a literal array lookup)."""
    return F.element_at(F.array(*[F.lit(int(v)) for v in values]), (index + 1).cast("int"))


def _div(a: Column, b: Column | int) -> Column:
    """Floor division of non-negative longs, exactly (Spark's `/` is a double)."""
    b = F.lit(b) if isinstance(b, int) else b
    return ((a - F.pmod(a, b)) / b).cast("long")


def _hash(seed: int, salt: int, *cols: Column) -> Column:
    """A non-negative 53-bit hash of the seed, a salt and the coordinates."""
    return F.pmod(F.xxhash64(F.lit(seed), F.lit(salt), *cols), F.lit(1 << 53))


def _uniform(seed: int, salt: int, *cols: Column) -> Column:
    """A deterministic uniform number in [0, 1) from the seed, a salt and the coordinates."""
    return _hash(seed, salt, *cols) / float(1 << 53)


def _choose(u: Column, choices: list[tuple[int, float]]) -> Column:
    """The code whose cumulative rate band `u` falls in, else 0."""
    out, bound = None, 0.0
    for code, rate in choices:
        bound += rate
        out = F.when(u < bound, code) if out is None else out.when(u < bound, code)
    return F.lit(0) if out is None else out.otherwise(0)


def start_offset(tp: Column | int) -> Column | int:
    """First offset of a partition's log (above 0: retention already ran)."""
    return FIRST_OFFSET * (tp + 1)


# Slots per chunk of the offsets' running sum when a partition has more (`with_log_offsets`):
# each chunk is summed by its own window (one task for a partition's chunk, never for a whole hot
# partition), then the chunks' totals, a small table, are summed the same way once more.
CHUNK_SLOTS = 1 << 18
# What removed the batches of a hole in a compacted topic's offsets (`cleaned` columns); 0 none.
CLEANED_KINDS = ("compacted_gap", "acked_write_lost", "wraparound")


def with_log_offsets(
    df: DataFrame, partition_slots: int, chunk_slots: int = CHUNK_SLOTS
) -> DataFrame:
    """The slots with their `base_offset` and `cleaned_before`, the offsets given out in order.

    `cleaned_before` says what removed the batches of the hole right before the slot (an index
    into CLEANED_KINDS plus one; 0: no hole). A slot takes `record_count` offsets when it holds a
    batch or, on a compacted topic, when the cleaner removed its batch (`cleaned` > 0, a hole);
    none otherwise. Both are running values over the partition's slots in order.

    Args:
        df: the slots, with `tp`, `j`, `record_count`, `keep` and `cleaned`.
        partition_slots: the most slots a partition has.
        chunk_slots: above this many slots in a partition, the running values are computed in
            chunks of this many slots and carried from chunk to chunk through the chunks' small
            table, so that no task holds a whole partition; at or below it, by one window over
            each partition (one sort, none of the chunks' three extra stages).
    """
    width = F.when(F.col("keep") | (F.col("cleaned") > 0), F.col("record_count")).otherwise(0)
    chunked = partition_slots > chunk_slots
    chunk = _div(F.col("j"), chunk_slots) if chunked else F.lit(0).cast("long")
    df = df.withColumns({"width": width, "chunk": chunk})
    # The last slot before that takes offsets: its `cleaned` (null when none does).
    last_taking = F.last(F.when(F.col("width") > 0, F.col("cleaned")), ignorenulls=True)
    in_chunk = Window.partitionBy("tp", "chunk").orderBy("j").rowsBetween(
        Window.unboundedPreceding, -1
    )
    df = df.withColumns(
        {
            "offsets_before": F.coalesce(F.sum("width").over(in_chunk), F.lit(0)),
            "cleaned_in_chunk": last_taking.over(in_chunk),
        }
    )
    if chunked:
        before_chunk = Window.partitionBy("tp").orderBy("chunk").rowsBetween(
            Window.unboundedPreceding, -1
        )
        chunks = df.groupBy("tp", "chunk").agg(
            F.sum("width").alias("chunk_width"),
            F.max_by(F.col("cleaned"), F.when(F.col("width") > 0, F.col("j"))).alias(
                "chunk_cleaned"
            ),
        )
        chunks = chunks.select(
            "tp",
            "chunk",
            F.coalesce(F.sum("chunk_width").over(before_chunk), F.lit(0)).alias("chunk_start"),
            F.last("chunk_cleaned", ignorenulls=True).over(before_chunk).alias(
                "cleaned_at_start"
            ),
        )
        df = df.join(F.broadcast(chunks), ["tp", "chunk"])
    else:
        df = df.withColumns(
            {"chunk_start": F.lit(0).cast("long"), "cleaned_at_start": F.lit(None).cast("int")}
        )
    return df.withColumns(
        {
            "base_offset": start_offset(F.col("tp")) + F.col("chunk_start")
            + F.col("offsets_before"),
            "cleaned_before": F.coalesce(
                F.col("cleaned_in_chunk"), F.col("cleaned_at_start"), F.lit(0)
            ),
        }
    ).drop("width", "chunk", "chunk_start", "offsets_before", "cleaned_in_chunk",
           "cleaned_at_start")  # fmt: skip


def slots(spark: SparkSession, plan: GenerationPlan) -> DataFrame:
    """One row per batch slot with every column the batches, acks and ground truth come from.

    Args:
        spark: the session.
        plan: what to generate.

    Returns:
        The slots, lazily: `keep` says whether the slot holds a batch, `truth` names the finding
        a fault planted at the slot must raise (null when none).
    """
    g = geometry(plan)
    seed, tps, rates = plan.seed, plan.topic_partitions, plan.rates
    block, blocks = plan.block_batches, plan.session_blocks
    session = block * blocks
    n_hot = g.slots_by_index[0]
    i = F.col("id")
    partitions = max(1, plan.batches // 1_000_000) * default_parallelism(spark)
    df = spark.range(0, plan.batches, 1, numPartitions=min(partitions, 4096))
    if tps == 1:
        index, j = F.lit(0).cast("long"), i
    else:
        index = F.when(i < n_hot, F.lit(0)).otherwise(1 + F.pmod(i - n_hot, F.lit(tps - 1)))
        j = F.when(i < n_hot, i).otherwise(_div(i - n_hot, tps - 1))
    df = df.select(index.cast("long").alias("index"), j.alias("j"))
    cyc = g.cycle_length
    df = df.withColumns(
        {
            "tp": F.pmod(F.col("index") + g.hot_tp, F.lit(tps)),
            "producer": _at(g.cycle, F.pmod(F.col("j"), F.lit(cyc))),
            "rank": _at(g.ranks, F.pmod(F.col("j"), F.lit(cyc))),
            "n_slots": _at(g.slots_by_index, F.col("index")).cast("long"),
        }
    )
    p = F.col("producer")
    df = df.withColumns(
        {
            "weight": _at(g.weights, p),
            "producer_kind": _at(g.kinds, p),
            "records": _at(g.records, p).cast("long"),
            "k": _div(F.col("j"), cyc) * _at(g.weights, p) + F.col("rank"),
            # Stream slots in complete sessions: only the partition's full cycles count.
            "full_k": _div(_div(F.col("n_slots"), cyc) * _at(g.weights, p), session) * session,
        }
    )
    k, tp = F.col("k"), F.col("tp")
    df = df.withColumns(
        {
            "q": _div(k, session),
            "t": F.pmod(k, F.lit(session)),
            "in_session": k < F.col("full_k"),
            "is_txn": F.col("producer_kind").isin(TXN_V1, TXN_V2),
            "is_plain": F.col("producer_kind") == PLAIN,
            "topic_index": _div(tp, plan.partitions),
        }
    )
    q, t = F.col("q"), F.col("t")
    df = df.withColumns(
        {
            "c": _div(t, block),
            "s": F.pmod(t, F.lit(block)),
            # Data slots per block: a transaction's last slot is its marker.
            "data_slots": F.when(F.col("is_txn"), block - 1).otherwise(block).cast("long"),
            "compacted": F.col("topic_index") >= plan.topics - plan.compacted_topics,
        }
    )
    c, s, d_slots = F.col("c"), F.col("s"), F.col("data_slots")
    is_idem = (F.col("producer_kind") == IDEMPOTENT) & F.col("in_session")
    is_txn_session = F.col("is_txn") & F.col("in_session")
    middle = F.col("in_session") & ~F.col("is_plain") & (c >= 1) & (c <= blocks - 2)
    df = df.withColumns(
        {
            "start_fault": F.when(
                is_idem,
                _choose(
                    _uniform(seed, 1, tp, p, q),
                    [(RETENTION, rates.retention_evicted_producer), (WRAPAROUND, rates.wraparound)],
                ),
            ).otherwise(0),
            "end_fault": F.when(
                is_idem,
                _choose(
                    _uniform(seed, 2, tp, p, q),
                    [
                        (ZOMBIE, rates.zombie_producer),
                        (RESET, rates.sequence_reset),
                        (EXPIRED, rates.expired_producer),
                    ],
                ),
            )
            .when(
                is_txn_session,
                _choose(_uniform(seed, 2, tp, p, q), [(HANGING, rates.hanging_transaction)]),
            )
            .otherwise(0),
            "block_fault": F.when(
                middle,
                _choose(
                    _uniform(seed, 3, tp, p, q, c),
                    [
                        (DUP_IN_CACHE, rates.duplicate_in_cache),
                        (DUP_BEYOND_CACHE, rates.duplicate_beyond_cache),
                        (LOST_BATCH, rates.lost_batch),
                        (ACKED_LOST, rates.acked_write_lost),
                    ],
                ),
            ).otherwise(0),
        }
    )
    blk, start, end = F.col("block_fault"), F.col("start_fault"), F.col("end_fault")
    last_block = c == blocks - 1
    lost_at = _div(d_slots, 2)
    mid_slot = block // 2
    h_distance = _hash(seed, 4, tp, p, q, c)
    df = df.withColumns(
        {
            # How many batches back the duplicate's first copy is, among the producer's own
            # batches: 0-4 is inside the leader's 5-batch cache (docs/rules.md#duplicate-batch),
            # 5+ beyond it but inside the audit's 64-batch look-back.
            "dup_distance": F.when(blk == DUP_IN_CACHE, F.pmod(h_distance, F.lit(5))).otherwise(
                5 + F.pmod(h_distance, d_slots - 7)
            ),
            "is_dup": blk.isin(DUP_IN_CACHE, DUP_BEYOND_CACHE) & (s == d_slots - 2),
            "is_absorber": blk.isin(DUP_IN_CACHE, DUP_BEYOND_CACHE) & (s == d_slots - 1),
            "is_lost": blk.isin(LOST_BATCH, ACKED_LOST) & (s == lost_at),
            "is_gap": blk.isin(LOST_BATCH, ACKED_LOST) & (s == lost_at + 1),
            "is_wrap": (start == WRAPAROUND) & (c == 0),
            "is_first": (c == 0) & (s == 0),
            "end_block": last_block & (end != 0),
            "is_marker": is_txn_session & (s == block - 1) & ~(last_block & (end == HANGING)),
        }
    )
    end_block = F.col("end_block")
    is_zombie = end_block & (end == ZOMBIE) & (s == ZOMBIE_BUMP_SLOT + 1)
    df = df.withColumns(
        {
            "is_zombie": is_zombie,
            # The new instance's batches after the epoch bump, and the batches after a reset.
            "is_bumped": end_block & (end == ZOMBIE) & (s >= ZOMBIE_BUMP_SLOT) & ~is_zombie,
            "is_reset_after": end_block & (end == RESET) & (s >= mid_slot),
        }
    ).select(*PLACED_COLUMNS)
    is_zombie, bumped = F.col("is_zombie"), F.col("is_bumped")
    is_reset_after = F.col("is_reset_after")
    records = F.col("records")
    own = (
        F.when(F.col("is_dup"), (d_slots - 3 - F.col("dup_distance")) * records)
        .when(F.col("is_absorber"), (d_slots - 2) * records)
        .when(is_zombie, ZOMBIE_BUMP_SLOT * records)
        .otherwise(s * records)
    )
    base0 = (
        F.when(start == RETENTION, records * (1 + F.pmod(_hash(seed, 7, tp, p, q), F.lit(100_000))))
        .when(start == WRAPAROUND, SEQUENCE_SPACE - 3 * records)
        .otherwise(0)
    )
    sequence = (
        F.when(F.col("is_plain") | F.col("is_marker"), F.lit(-1))
        # One record more per batch after the reset, so no batch after it repeats an earlier
        # batch's exact range (that would be a duplicate, docs/rules.md#duplicate-batch).
        .when(is_reset_after, (s - mid_slot) * (records + 1))
        .when(
            bumped, F.when(s == ZOMBIE_BUMP_SLOT, 0).otherwise((s - ZOMBIE_BUMP_SLOT - 1) * records)
        )
        .when(F.col("producer_kind") == TXN_V2, own)
        .otherwise(F.pmod(base0 + c * d_slots * records + own, F.lit(SEQUENCE_SPACE)))
    )
    count = (
        F.when(F.col("is_marker"), 1)
        .when(F.col("is_absorber"), 2 * records)
        .when(is_reset_after, records + 1)
        .otherwise(records)
    )
    epoch = (
        F.when(F.col("is_plain"), -1)
        .when(F.col("producer_kind") == TXN_V2, F.when(F.col("is_marker"), c + 1).otherwise(c))
        .when(bumped, 1)
        .otherwise(0)
    )
    shift = F.when(
        end_block & (end == EXPIRED) & (s >= mid_slot), plan.expiration_ms + 3_600_000
    ).otherwise(0)
    df = df.withColumns(
        {
            "base_sequence": sequence.cast("long"),
            "record_count": count.cast("long"),
            "producer_epoch": epoch.cast("long"),
            "producer_id": F.when(F.col("is_plain"), F.lit(-1)).otherwise(
                F.shiftleft(tp * plan.producers + p, SESSION_BITS) + q
            ),
            "max_timestamp": START_MS + F.col("j") * SLOT_MS + shift,
            # Leader elections at fixed slots: the epoch never decreases along the log.
            "leader_epoch": _div(F.col("j"), plan.leader_epoch_span),
            "keep": ~F.col("is_lost")
            & ~(F.col("is_wrap") & (s == WRAP_LOST_SLOT))
            & ~(F.col("is_txn") & ~F.col("in_session"))
            & ~(last_block & (end == HANGING) & (s == block - 1)),
            # On a compacted topic a lost batch is the cleaner's work: its offsets stay a hole.
            "cleaned": F.when(~F.col("compacted"), 0)
            .when(F.col("is_lost") & (blk == LOST_BATCH), 1)
            .when(F.col("is_lost"), 2)
            .when(F.col("is_wrap") & (s == WRAP_LOST_SLOT), 3)
            .otherwise(0),
        }
    )
    df = with_log_offsets(df, max(g.slots_by_index))
    gap_cause = F.when(F.col("compacted"), F.lit("COMPACTION")).otherwise(F.lit("UNEXPLAINED"))
    none = F.lit(None).cast("string")

    def truth(kind: Column | str, finding_type: str, cause: Column | str | None) -> Column:
        kind = F.lit(kind) if isinstance(kind, str) else kind
        cause = none if cause is None else F.lit(cause) if isinstance(cause, str) else cause
        return F.struct(
            kind.alias("fault_kind"),
            F.lit(finding_type).alias("finding_type"),
            cause.alias("cause"),
        )

    gt = (
        F.when(
            F.col("is_dup") & (blk == DUP_IN_CACHE),
            truth("duplicate_in_cache", "DUPLICATE_BATCH", None),
        )
        .when(F.col("is_dup"), truth("duplicate_beyond_cache", "DUPLICATE_BATCH", None))
        .when(
            F.col("is_gap") & (blk == LOST_BATCH),
            truth(
                F.when(F.col("compacted"), "compacted_gap").otherwise("lost_batch"),
                "SEQUENCE_GAP",
                gap_cause,
            ),
        )
        .when(F.col("is_gap"), truth("acked_write_lost", "SEQUENCE_GAP", gap_cause))
        .when(
            F.col("is_lost") & (blk == ACKED_LOST),
            truth("acked_write_lost", "ACKED_WRITE_LOST", gap_cause),
        )
        .when(F.col("is_wrap") & (s == 0), truth("wraparound", "UNKNOWN_PRODUCER", "LOG_START"))
        .when(
            F.col("is_wrap") & (s == WRAP_LOST_SLOT + 1),
            truth("wraparound", "SEQUENCE_GAP", gap_cause),
        )
        .when(
            (start == RETENTION) & F.col("is_first"),
            truth("retention_evicted_producer", "UNKNOWN_PRODUCER", "LOG_START"),
        )
        .when(is_zombie, truth("zombie_producer", "FENCED_PRODUCER_EPOCH", None))
        .when(
            end_block & (end == RESET) & (s == mid_slot),
            truth("sequence_reset", "SEQUENCE_RESET", "UNEXPLAINED"),
        )
        .when(
            end_block & (end == EXPIRED) & (s == mid_slot),
            truth("expired_producer", "UNKNOWN_PRODUCER", "PRODUCER_EXPIRY"),
        )
        .when(
            end_block & (end == HANGING) & (s == 0),
            truth(
                F.when(F.col("producer_kind") == TXN_V1, "hanging_transaction_v1").otherwise(
                    "hanging_transaction_v2"
                ),
                "HANGING_TRANSACTION",
                None,
            ),
        )
    )
    topic_names = F.array(*[F.lit(plan.topic_name(x)) for x in range(plan.topics)])
    return df.withColumns(
        {
            "truth": gt,
            # The first batch after a hole the cleaner left (docs/rules.md#offset-gap).
            "gap_truth": F.when(
                F.col("keep") & (F.col("cleaned_before") > 0),
                truth(
                    F.element_at(
                        F.array(*[F.lit(k) for k in CLEANED_KINDS]),
                        F.col("cleaned_before").cast("int"),
                    ),
                    "OFFSET_GAP",
                    "COMPACTION",
                ),
            ),
            "topic": F.element_at(topic_names, (F.col("topic_index") + 1).cast("int")),
            "partition": F.pmod(tp, F.lit(plan.partitions)).cast("int"),
            "acked_session": _uniform(seed, 6, tp, p, q) < plan.ack_share,
            "is_aborted": _uniform(seed, 5, tp, p, q, c) < rates.aborted_transaction,
        }
    )


def batches_of(slots_df: DataFrame) -> DataFrame:
    """The record batches (schemas/record_batch.json) of the slots that hold one."""
    s = slots_df.where(F.col("keep"))
    marker = F.col("is_marker")
    last_seq = F.when(F.col("base_sequence") < 0, F.lit(-1)).otherwise(
        F.pmod(F.col("base_sequence") + F.col("record_count") - 1, F.lit(SEQUENCE_SPACE))
    )
    columns = {
        "topic": F.col("topic"),
        "partition": F.col("partition"),
        "base_offset": F.col("base_offset"),
        "last_offset": F.col("base_offset") + F.col("record_count") - 1,
        "producer_id": F.col("producer_id"),
        "producer_epoch": F.col("producer_epoch"),
        "base_sequence": F.col("base_sequence"),
        "last_sequence": last_seq,
        "record_count": F.col("record_count"),
        "is_transactional": F.col("is_txn") & ~F.col("is_plain"),
        "is_control": marker,
        "control_type": F.when(marker, F.when(F.col("is_aborted"), "ABORT").otherwise("COMMIT")),
        "coordinator_epoch": F.when(marker, F.lit(COORDINATOR_EPOCH)),
        "partition_leader_epoch": F.col("leader_epoch"),
        "magic": F.lit(2),
        "max_timestamp": F.col("max_timestamp"),
        "crc_valid": F.lit(True),
        "source": F.lit(None).cast("string"),
    }
    return s.select(*[columns[f.name].cast(f.dataType).alias(f.name) for f in RECORD_BATCH.fields])


def acks_of(slots_df: DataFrame) -> DataFrame:
    """Send results (schemas/acks.json): every batch of the acked sessions, and the lost ones.

    A duplicate is a retry of an acknowledged send, and a zombie's write was never acknowledged
    to a live producer, so neither gets a row of its own.
    """
    data = (F.col("producer_id") >= 0) & ~F.col("is_marker")
    acked = (F.col("keep") & F.col("acked_session") & ~F.col("is_dup") & ~F.col("is_zombie")) | (
        F.col("is_lost") & (F.col("block_fault") == ACKED_LOST)
    )
    columns = {
        "event_time": F.timestamp_millis(F.col("max_timestamp") + ACK_LAG_MS),
        "topic": F.col("topic"),
        "partition": F.col("partition"),
        "producer_id": F.col("producer_id"),
        "producer_epoch": F.col("producer_epoch"),
        "base_sequence": F.col("base_sequence"),
        "record_count": F.col("record_count"),
        "offset": F.col("base_offset"),
        "error": F.lit(None).cast("string"),
        "log_start_offset": start_offset(F.col("tp")),
        "source": F.lit(None).cast("string"),
    }
    return slots_df.where(data & acked).select(
        *[columns[f.name].cast(f.dataType).alias(f.name) for f in ACKS.fields]
    )


def observations(spark: SparkSession, plan: GenerationPlan, slots_df: DataFrame) -> DataFrame:
    """ListOffsets(latest) answers per partition, twice per leader epoch, with planted regressions.

    Observation `n` is taken at slot `n * span / 2` and answers the offset where that slot
    starts (its `base_offset` in `slots_df`, which has the slots' `tp`, `j` and `base_offset`);
    even `n` fall right after a leader election (the epoch rose). A planted transient
    regression answers a little below the previous observation there, and the next observation
    is back above it (LEADER_CHANGE_TRANSIENT); a planted truncation does the same on the
    partition's last observation, so it never recovers (TRUNCATION). Observations stop two
    cycles before the partition's last slot so that none is above the exported log's end.

    Returns:
        The observations (LIST_OFFSETS columns) and `truth` (the planted regression, or null).
    """
    g = geometry(plan)
    tps, half = plan.topic_partitions, plan.leader_epoch_span // 2
    last = [max(0, (n - 2 * g.cycle_length) // half) for n in g.slots_by_index]
    per_partition = max(1, max(last))
    df = spark.range(0, tps * per_partition, 1, numPartitions=1)
    index = _div(F.col("id"), per_partition)
    n = F.pmod(F.col("id"), F.lit(per_partition)) + 1
    df = df.select(index.alias("index"), n.alias("n")).where(
        F.col("n") <= _at(last, F.col("index"))
    )
    tp = F.pmod(F.col("index") + g.hot_tp, F.lit(tps))
    df = df.withColumns({"tp": tp, "n_last": _at(last, F.col("index"))})
    n, tp, n_last = F.col("n"), F.col("tp"), F.col("n_last")
    slot = n * half
    # The observations are few (two per leader epoch and partition): each looks its slot up.
    at_slot = slots_df.select(
        F.col("tp").alias("at_tp"), F.col("j").alias("at_j"), F.col("base_offset").alias("normal")
    )
    df = F.broadcast(df).join(at_slot, (F.col("at_tp") == tp) & (F.col("at_j") == slot))
    df = df.drop("at_tp", "at_j")
    normal = F.col("normal")
    # Observations n = 1, 2, ... of a partition are consecutive: the one before answered the
    # offset of slot (n - 1) * span / 2 (slot 0, the log's first offset, before the first).
    previous = F.lag(normal, 1).over(Window.partitionBy(tp).orderBy(n))
    previous = F.coalesce(previous, start_offset(tp))
    below = previous - (1 + F.pmod(_hash(plan.seed, 9, tp, n), F.lit(8)))
    rates = plan.rates
    truncated = (
        (n == n_last) & (n >= 2) & (_uniform(plan.seed, 8, tp) < rates.list_offsets_truncation)
    )
    transient = (
        (F.pmod(n, F.lit(2)) == 0)
        & (n >= 2)
        & (n < n_last - 1)
        & (_uniform(plan.seed, 7, tp, n) < rates.leader_change_transient)
    )
    topic_names = F.array(*[F.lit(plan.topic_name(x)) for x in range(plan.topics)])
    offset = F.when(truncated | transient, below).otherwise(normal)
    truth = F.when(
        truncated,
        F.struct(
            F.lit("list_offsets_truncation").alias("fault_kind"),
            F.lit("LIST_OFFSETS_REGRESSION").alias("finding_type"),
            F.lit("TRUNCATION").alias("cause"),
        ),
    ).when(
        transient,
        F.struct(
            F.lit("leader_change_transient").alias("fault_kind"),
            F.lit("LIST_OFFSETS_REGRESSION").alias("finding_type"),
            F.lit("LEADER_CHANGE_TRANSIENT").alias("cause"),
        ),
    )
    columns = {
        "observed_at": F.timestamp_millis(START_MS + slot * SLOT_MS + LIST_OFFSETS_LAG_MS),
        "topic": F.element_at(topic_names, (_div(tp, plan.partitions) + 1).cast("int")),
        "partition": F.pmod(tp, F.lit(plan.partitions)),
        "spec": F.lit("latest"),
        "isolation": F.lit("read_uncommitted"),
        "offset": offset,
        "leader_epoch": _div(slot, plan.leader_epoch_span),
        "error": F.lit(None).cast("string"),
        "source": F.lit(None).cast("string"),
    }
    return df.select(
        *[columns[f.name].cast(f.dataType).alias(f.name) for f in LIST_OFFSETS.fields],
        truth.alias("truth"),
        tp.alias("tp"),
    )


def _severity(finding_type: Column, cause: Column) -> Column:
    """The severity the audit gives a finding (config defaults, lowered by the cause's policy)."""
    level = None
    for name, severity in DEFAULT_SEVERITIES.items():
        for cause_name in CAUSE_CEILING:
            lowered = severity_for(severity, cause_name)
            if lowered != severity:
                when = (finding_type == name) & (cause == cause_name)
                level = F.when(when, lowered) if level is None else level.when(when, lowered)
        when = finding_type == name
        level = F.when(when, severity) if level is None else level.when(when, severity)
    return level


def ground_truth_of(
    slots_df: DataFrame, observations_df: DataFrame, generation_id: str
) -> DataFrame:
    """Every finding the planted faults must raise (schemas/ground_truth.json)."""
    batch = ("topic", "partition", "base_offset", "producer_id", "producer_epoch")
    from_slots = slots_df.where(F.col("truth").isNotNull()).select("truth.*", *batch)
    from_gaps = slots_df.where(F.col("gap_truth").isNotNull()).select("gap_truth.*", *batch)
    from_observations = observations_df.where(F.col("truth").isNotNull()).select(
        "truth.*",
        "topic",
        "partition",
        F.col("offset").alias("base_offset"),
        F.lit(None).cast("long").alias("producer_id"),
        F.lit(None).cast("long").alias("producer_epoch"),
    )
    rows = from_slots.unionByName(from_gaps).unionByName(from_observations)
    columns = {
        "run_id": F.lit(generation_id),
        "severity": _severity(F.col("finding_type"), F.col("cause")),
    }
    return rows.select(
        *[
            (columns[f.name] if f.name in columns else F.col(f.name)).cast(f.dataType).alias(f.name)
            for f in GROUND_TRUTH.fields
        ]
    )


@dataclass(frozen=True)
class GeneratedExport:
    """Where a generation wrote its export, and how to audit it."""

    directory: Path
    generation_id: str
    export_time: str
    batches: Path
    acks: Path
    list_offsets: Path
    ground_truth: Path
    conf: Path

    def audit_arguments(self) -> list[str]:
        """The `eos-audit audit` arguments that audit this export (without --warehouse)."""
        return [
            "--batches", str(self.batches), "--acks", str(self.acks),
            "--list-offsets", str(self.list_offsets), "--export-time", self.export_time,
            "--conf", str(self.conf),
        ]  # fmt: skip


def generation_id(plan: GenerationPlan) -> str:
    """The id of a generation: its size and seed (the ground truth's run_id)."""
    return f"gen-{plan.batches}-{plan.seed}"


def iso(ms: int) -> str:
    """Epoch milliseconds as an ISO-8601 UTC time."""
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds")


def conf_text(plan: GenerationPlan) -> str:
    """The audit configuration that matches the generated cluster (compacted topics, expiry)."""
    return (
        "# Written by eos-audit generate: the cluster the export pretends to come from.\n"
        "[cluster]\n"
        f"producer_id_expiration_ms = {plan.expiration_ms}\n\n"
        "[topics]\n"
        f'compacted = ["{plan.compacted_pattern}"]\n'
    )


def export_layout(plan: GenerationPlan, directory: str | Path) -> GeneratedExport:
    """Where the export of `plan` under `directory` puts each of its parts (nothing written)."""
    out = Path(directory).resolve()
    return GeneratedExport(
        directory=out,
        generation_id=generation_id(plan),
        export_time=iso(plan.export_time_ms()),
        batches=out / "batches",
        acks=out / "acks",
        list_offsets=out / "list_offsets",
        ground_truth=out / "ground_truth",
        conf=out / "audit.toml",
    )


# What `batches_of`, `acks_of` and `ground_truth_of` read of the slots.
EXPORTED_SLOT_COLUMNS = (
    "topic", "partition", "tp", "base_offset", "producer_id", "producer_epoch", "base_sequence",
    "record_count", "leader_epoch", "max_timestamp", "keep", "is_marker", "is_txn", "is_plain",
    "is_aborted", "acked_session", "is_dup", "is_zombie", "is_lost", "block_fault", "truth",
    "gap_truth", "j",
)  # fmt: skip


def write_export(
    spark: SparkSession, plan: GenerationPlan, directory: str | Path
) -> GeneratedExport:
    """Generate the export with Spark and write it under `directory`.

    Writes `batches/`, `acks/` and `list_offsets/` (Parquet in their published contracts),
    `ground_truth/` (a Delta table through the repository's sink), `audit.toml` (the matching
    audit configuration) and `manifest.json` (the plan, the export time, the paths).

    Args:
        spark: the session.
        plan: what to generate.
        directory: where to write it (created; earlier outputs there are replaced).

    Returns:
        The paths and the audit arguments of the export.
    """
    export = export_layout(plan, directory)
    out, gen_id = export.directory, export.generation_id
    out.mkdir(parents=True, exist_ok=True)
    # The batches, the acknowledgements and the ground truth all come from the slots: computed
    # once and kept (spilled to disk when memory is short), each write reads them instead of
    # computing (and planning) the slots' long expressions again. Only the columns those three
    # read are kept, not the slots' intermediate ones.
    # As one stage of generated code, the slots' expressions make a method of 13-14 kB of
    # bytecode, above the 8,000 bytes HotSpot compiles: the generation runs with Spark's limit at
    # the JIT's (`session.jit_sized_code`), so that stage runs each operator's own code, split into
    # small methods, instead of one interpreted method. Measured at 1M batches on 2 cores (warm
    # session): the export in 7.1-7.6 s, against 9.2-9.4 s when the placed half of the slots was
    # kept as well so that each half stayed below the limit.
    slots_df: DataFrame | None = None
    try:
        with jit_sized_code(spark):
            slots_df = slots(spark, plan).select(*EXPORTED_SLOT_COLUMNS)
            slots_df = slots_df.persist(StorageLevel.MEMORY_AND_DISK)
            observations_df = observations(spark, plan, slots_df)
            log.info("generate %s: writing %d batch slots to %s", gen_id, plan.batches, out)
            batches_of(slots_df).write.mode("overwrite").parquet(str(export.batches))
            acks_of(slots_df).write.mode("overwrite").parquet(str(export.acks))
            observations_df.drop("truth", "tp").write.mode("overwrite").parquet(
                str(export.list_offsets)
            )
            writer = choose_writer(
                spark, str(out), "auto", "", has_delta=session_has_delta(spark),
                staging_dir=str(out / "_staging"),
            )  # fmt: skip
            writer.replace_run(
                "ground_truth",
                ground_truth_of(slots_df, observations_df, gen_id),
                GROUND_TRUTH,
                gen_id,
            )
    finally:
        if slots_df is not None:
            slots_df.unpersist()
    export.conf.write_text(conf_text(plan))
    manifest = {
        "generation_id": gen_id,
        "export_time": export.export_time,
        "plan": plan.to_json(),
        "paths": {name: str(getattr(export, name)) for name in TABLES},
        "conf": str(export.conf),
        "audit": ["eos-audit", "audit", *export.audit_arguments(), "--warehouse", "<DIR>"],
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return export
