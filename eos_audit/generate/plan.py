"""What a synthetic export holds: its shape, its skew, its fault rates, and the fault kinds.

Every fault kind names the findings the audit must report for it, with their cause: that is the
ground truth `eos-audit score` checks the audit against. The layout the kinds are planted in is
described in `eos_audit.generate.spark_export`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from eos_audit.errors import ConfigError
from eos_audit.findings import REGISTRY

MAX_SEQUENCE = 2147483647
START_MS = 1_795_219_200_000  # 2026-11-21T00:00:00Z, as the demo
# Milliseconds between two batch slots of one partition: a producer's batches stay far closer
# together than any producer-id expiration (docs/rules.md#producer-expiry).
SLOT_MS = 10
# A log start above 0 everywhere: retention already ran, as on any long-lived cluster, so a
# producer whose earlier batches were deleted is benign (cause LOG_START, docs/rules.md#causes).
FIRST_OFFSET = 10_000


@dataclass(frozen=True)
class FaultKind:
    """One kind of injected fault and what the audit must report for it.

    Attributes:
        name: snake_case name, the `fault_kind` of the ground truth.
        unit: what the rate is per: block (of `block_batches` batches of one producer), session
            (one producer id's stream), leader_change (a ListOffsets observation right after a
            leader election) or partition.
        findings: (finding_type, cause) of each finding the scenario produces; `cause` None for
            finding types without one. COMPACTION replaces UNEXPLAINED on compacted topics where
            the kind's story says so.
        story: one sentence: what happened.
    """

    name: str
    unit: str
    findings: tuple[tuple[str, str | None], ...]
    story: str


FAULT_KINDS: dict[str, FaultKind] = {
    k.name: k
    for k in [
        FaultKind(
            "duplicate_in_cache", "block", (("DUPLICATE_BATCH", None),),
            "an acknowledgement was lost and the retried send was written again; the first copy "
            "was among the producer's 5 latest batches",
        ),
        FaultKind(
            "duplicate_beyond_cache", "block", (("DUPLICATE_BATCH", None),),
            "a retried send was written again 6 to 14 batches after the first copy, beyond the "
            "leader's 5-batch cache (kafka_error OUT_OF_ORDER_SEQUENCE_NUMBER)",
        ),
        FaultKind(
            "lost_batch", "block", (("SEQUENCE_GAP", "UNEXPLAINED"),),
            "a batch never reached the log: the producer's next batch is a gap",
        ),
        FaultKind(
            "compacted_gap", "block",
            (("SEQUENCE_GAP", "COMPACTION"), ("OFFSET_GAP", "COMPACTION")),
            "the cleaner removed a whole batch of a compacted topic: a benign gap in the sequences "
            "and a hole in the offsets (INFO)",
        ),
        FaultKind(
            "acked_write_lost", "block",
            (("ACKED_WRITE_LOST", "UNEXPLAINED"), ("SEQUENCE_GAP", "UNEXPLAINED")),
            "a batch was acknowledged at an offset and then lost: the acknowledgement names a "
            "batch the log does not hold (its offsets went to the next batch), and the producer's "
            "next batch is a gap (COMPACTION for both on a compacted topic, where the batch's "
            "offsets stay a hole: an OFFSET_GAP, COMPACTION)",
        ),
        FaultKind(
            "retention_evicted_producer", "session", (("UNKNOWN_PRODUCER", "LOG_START"),),
            "a long-lived producer whose earlier batches retention deleted: its first batch in the "
            "export starts above sequence 0 (benign, INFO)",
        ),
        FaultKind(
            "wraparound", "session",
            (("UNKNOWN_PRODUCER", "LOG_START"), ("SEQUENCE_GAP", "UNEXPLAINED")),
            "a long-lived producer near sequence 2147483647 wraps to 0, and the batch starting at "
            "0 is lost: benign first batch, then a gap across the wrap (COMPACTION on a "
            "compacted topic, with an OFFSET_GAP, COMPACTION, where the batch was)",
        ),
        FaultKind(
            "zombie_producer", "session", (("FENCED_PRODUCER_EPOCH", None),),
            "after an epoch bump (the producer restarted at epoch 1, sequence 0) the old instance "
            "wrote once more at epoch 0",
        ),
        FaultKind(
            "sequence_reset", "session", (("SEQUENCE_RESET", "UNEXPLAINED"),),
            "the producer restarted at sequence 0 without an epoch bump",
        ),
        FaultKind(
            "expired_producer", "session", (("UNKNOWN_PRODUCER", "PRODUCER_EXPIRY"),),
            "an idempotent producer was idle past the producer-id expiration and continued its "
            "sequence: the leader had forgotten it (benign, INFO)",
        ),
        FaultKind(
            "hanging_transaction_v1", "session", (("HANGING_TRANSACTION", None),),
            "a transactions-v1 producer (same-epoch markers) left its last transaction open",
        ),
        FaultKind(
            "hanging_transaction_v2", "session", (("HANGING_TRANSACTION", None),),
            "a transactions-v2 producer (epoch + 1 at every marker) left its last transaction "
            "open",
        ),
        FaultKind(
            "leader_change_transient", "leader_change",
            (("LIST_OFFSETS_REGRESSION", "LEADER_CHANGE_TRANSIENT"),),
            "right after a leader election the new leader answered a lower latest offset, and "
            "caught up by the next observation (pre-KIP-207, WARNING)",
        ),
        FaultKind(
            "list_offsets_truncation", "partition",
            (("LIST_OFFSETS_REGRESSION", "TRUNCATION"),),
            "the last latest-offset observation of the partition fell below an earlier one and "
            "never recovered",
        ),
    ]
}  # fmt: skip
for _kind in FAULT_KINDS.values():
    assert all(t in REGISTRY for t, _ in _kind.findings), _kind.name


@dataclass(frozen=True)
class FaultRates:
    """How often each fault kind is planted, per unit of its kind (see `FaultKind.unit`).

    Block and session kinds are drawn per block or session from one uniform number, so the
    rates of one unit add up to at most 1. `aborted_transaction` is not a fault: the share of
    transactions that end with an ABORT marker, which must raise no finding.
    """

    duplicate_in_cache: float = 0.003
    duplicate_beyond_cache: float = 0.003
    lost_batch: float = 0.003
    acked_write_lost: float = 0.002
    retention_evicted_producer: float = 0.04
    wraparound: float = 0.04
    zombie_producer: float = 0.04
    sequence_reset: float = 0.04
    expired_producer: float = 0.04
    hanging_transaction: float = 0.08
    leader_change_transient: float = 0.3
    list_offsets_truncation: float = 0.4
    aborted_transaction: float = 0.2

    def scaled(self, factor: float) -> FaultRates:
        """Every fault rate times `factor` (capped so each unit's rates still sum to 1)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out = {k: (v if k == "aborted_transaction" else v * factor) for k, v in values.items()}
        return FaultRates(**out)._capped()

    def _capped(self) -> FaultRates:
        groups = (
            ("duplicate_in_cache", "duplicate_beyond_cache", "lost_batch", "acked_write_lost"),
            ("retention_evicted_producer", "wraparound"),
            ("zombie_producer", "sequence_reset", "expired_producer"),
        )
        out = {f.name: min(1.0, getattr(self, f.name)) for f in dataclasses.fields(self)}
        for group in groups:
            total = sum(out[k] for k in group)
            if total > 1.0:
                for k in group:
                    out[k] /= total
        return FaultRates(**out)


@dataclass(frozen=True)
class GenerationPlan:
    """The shape of a synthetic export.

    Attributes:
        batches: batch slots to generate (the export holds slightly fewer rows: lost batches and
            the unfinished last transaction of each transactional producer leave theirs empty).
        topics: topics; the last `compacted_topics` are named `compacted-<n>` and configured as
            compacted in the generated `audit.toml`.
        partitions: partitions per topic.
        producers: producers per partition (2 transactional kinds, one producer without
            idempotence, the rest idempotent; see spark_export).
        hot_producers: producers writing `hot_weight` times as often as the others.
        hot_weight: how much more often a hot producer writes.
        hot_partition_share: share of all batches in the one hot partition (chosen by the seed).
        compacted_topics: how many topics are compacted.
        seed: every placement derives from it; the same plan gives the same export.
        rates: fault rates.
        ack_share: share of producer sessions whose send results are in the acks file.
        block_batches: batches of one producer per fault block (a transaction for transactional
            producers).
        session_blocks: blocks per producer id (a producer restarts with a new id after them).
        leader_epoch_batches: batch slots of a partition per leader epoch; 0 picks one so that
            every partition sees about ten leader elections.
        expiration_ms: producer.id.expiration.ms of the generated cluster.
    """

    batches: int
    topics: int = 4
    partitions: int = 4
    producers: int = 12
    hot_producers: int = 2
    hot_weight: int = 8
    hot_partition_share: float = 0.25
    compacted_topics: int = 1
    seed: int = 0
    rates: FaultRates = field(default_factory=FaultRates)
    ack_share: float = 0.1
    block_batches: int = 16
    session_blocks: int = 16
    leader_epoch_batches: int = 0
    expiration_ms: int = 86_400_000

    def __post_init__(self) -> None:
        """Reject plans the layout cannot honour, naming the parameter."""
        checks = [
            (self.batches >= 1, "batches must be at least 1"),
            (self.topics >= 1 and self.partitions >= 1, "topics and partitions must be >= 1"),
            (0 <= self.compacted_topics <= self.topics, "compacted_topics must be <= topics"),
            (self.producers >= 1, "producers must be >= 1"),
            (0 <= self.hot_producers <= self.producers, "hot_producers must be <= producers"),
            (self.hot_weight >= 1, "hot_weight must be >= 1"),
            (0.0 <= self.hot_partition_share < 1.0, "hot_partition_share must be in [0, 1)"),
            # The duplicate beyond the cache repeats a batch 6+ batches back in its own block,
            # and the zombie, reset and expiry need room after their slot.
            (self.block_batches >= 12, "block_batches must be >= 12"),
            (self.session_blocks >= 3, "session_blocks must be >= 3 (first, middle, last)"),
            (self.session_blocks < 32767, "session_blocks must be < 32767 (int16 epochs)"),
            (0.0 <= self.ack_share <= 1.0, "ack_share must be in [0, 1]"),
            (self.expiration_ms > 0, "expiration_ms must be positive"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(f"generate: {message}")

    @property
    def topic_partitions(self) -> int:
        """Topic-partitions of the export."""
        return self.topics * self.partitions

    @property
    def leader_epoch_span(self) -> int:
        """Batch slots per leader epoch (even, so ListOffsets is observed mid-epoch too)."""
        if self.leader_epoch_batches:
            return max(2, self.leader_epoch_batches // 2 * 2)
        per_partition = self.batches // self.topic_partitions
        return max(64, per_partition // 10 // 2 * 2)

    def topic_name(self, topic: int) -> str:
        """The name of topic number `topic`: the last ones are compacted."""
        if topic >= self.topics - self.compacted_topics:
            return f"compacted-{topic}"
        return f"topic-{topic}"

    @property
    def compacted_pattern(self) -> str:
        """The `[topics] compacted` wildcard that names the compacted topics."""
        return "compacted-*"

    def export_time_ms(self) -> int:
        """When the export was taken: after every batch, even an expired producer's late ones.

        Open transactions are aged at it (docs/rules.md#hanging-transaction), so every
        transaction left open is hanging and no other transaction is open.
        """
        return START_MS + (self.batches + 1) * SLOT_MS + self.expiration_ms + 2 * 3_600_000

    def to_json(self) -> dict:
        """The plan as JSON-ready values (written to the export's manifest)."""
        return dataclasses.asdict(self)
