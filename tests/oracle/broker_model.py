"""Sequential reference model of a Kafka partition leader's producer-state validation.

This is the oracle of the differential test of the Spark engine
(`eos_audit.replay`, the compiled kernel). It implements `docs/replay_semantics.md` (cited as "doc")
literally, as a plain loop over the batches of each topic-partition in log order with a dict of
per-producer state objects. It is deliberately naive: no windows, no vectorisation, nothing clever.
Broker background: ../shared/reference/kafka_rules.md (cited as §n). It imports nothing from
`eos_audit`, so a bug there cannot leak in.

Places where the doc can be read more than one way are marked `# AMBIGUITY:` with the reading
chosen.
"""

from __future__ import annotations

import fnmatch
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields

MAX_SEQUENCE = 2147483647  # Int.MAX_VALUE, §1.5 sequence arithmetic
NUM_BATCHES_TO_RETAIN = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN, §1.2
# Doc "Verdict of a data batch", step 2: duplicates are looked for among the last 64 applied data
# batches of the session (docs/rules.md#duplicate-batch), a bounded window.
DUPLICATE_LOOKBACK = 64

# Finding types.
OFFSET_OVERLAP = "OFFSET_OVERLAP"
OFFSET_GAP = "OFFSET_GAP"
LEADER_EPOCH_REGRESSION = "LEADER_EPOCH_REGRESSION"
CORRUPT_BATCH = "CORRUPT_BATCH"
DUPLICATE_BATCH = "DUPLICATE_BATCH"
SEQUENCE_GAP = "SEQUENCE_GAP"
SEQUENCE_OVERLAP = "SEQUENCE_OVERLAP"
SEQUENCE_RESET = "SEQUENCE_RESET"
NEW_EPOCH_NONZERO_SEQUENCE = "NEW_EPOCH_NONZERO_SEQUENCE"
UNKNOWN_PRODUCER = "UNKNOWN_PRODUCER"
FENCED_PRODUCER_EPOCH = "FENCED_PRODUCER_EPOCH"
COORDINATOR_FENCED = "COORDINATOR_FENCED"
INVALID_TXN_STATE = "INVALID_TXN_STATE"

PARTITION_TYPES = frozenset(
    {OFFSET_OVERLAP, OFFSET_GAP, LEADER_EPOCH_REGRESSION, CORRUPT_BATCH}
)
PRODUCER_STATE_TYPES = frozenset(
    {
        DUPLICATE_BATCH,
        SEQUENCE_GAP,
        SEQUENCE_OVERLAP,
        SEQUENCE_RESET,
        NEW_EPOCH_NONZERO_SEQUENCE,
        UNKNOWN_PRODUCER,
        FENCED_PRODUCER_EPOCH,
        COORDINATOR_FENCED,
        INVALID_TXN_STATE,
    }
)

# Causes (doc "Causes and severity").
LOG_START = "LOG_START"
PRODUCER_EXPIRY = "PRODUCER_EXPIRY"
COMPACTION = "COMPACTION"
UNEXPLAINED = "UNEXPLAINED"

# Kafka error names (Errors.java, §0).
OUT_OF_ORDER_SEQUENCE_NUMBER = "OUT_OF_ORDER_SEQUENCE_NUMBER"
UNKNOWN_PRODUCER_ID = "UNKNOWN_PRODUCER_ID"
INVALID_PRODUCER_EPOCH = "INVALID_PRODUCER_EPOCH"
TRANSACTION_COORDINATOR_FENCED = "TRANSACTION_COORDINATOR_FENCED"
CORRUPT_MESSAGE = "CORRUPT_MESSAGE"
# INVALID_TXN_STATE is both a finding type and the Kafka error name.

DEFAULT_SEVERITIES: dict[str, str] = {
    OFFSET_OVERLAP: "CRITICAL",
    OFFSET_GAP: "CRITICAL",
    LEADER_EPOCH_REGRESSION: "ERROR",
    CORRUPT_BATCH: "ERROR",
    DUPLICATE_BATCH: "CRITICAL",
    SEQUENCE_GAP: "CRITICAL",
    SEQUENCE_OVERLAP: "ERROR",
    SEQUENCE_RESET: "ERROR",
    NEW_EPOCH_NONZERO_SEQUENCE: "ERROR",
    UNKNOWN_PRODUCER: "CRITICAL",
    FENCED_PRODUCER_EPOCH: "CRITICAL",
    COORDINATOR_FENCED: "ERROR",
    INVALID_TXN_STATE: "CRITICAL",
}


# ------------------------------------------------------------------------------------------------
# Sequence arithmetic (§1.5, DefaultRecordBatch)
# ------------------------------------------------------------------------------------------------
def increment_sequence(sequence: int, increment: int) -> int:
    """DefaultRecordBatch.incrementSequence: `s + k` wrapping past Int.MAX_VALUE to 0."""
    if sequence > MAX_SEQUENCE - increment:
        return increment - (MAX_SEQUENCE - sequence) - 1
    return sequence + increment


def in_sequence(last_sequence: int, next_sequence: int) -> bool:
    """ProducerAppendInfo.inSequence (§1.5): n == l + 1, or n == 0 after Int.MAX_VALUE."""
    return next_sequence == last_sequence + 1 or (
        next_sequence == 0 and last_sequence == MAX_SEQUENCE
    )


def expected_after(last_sequence: int) -> int:
    """The sequence a leader expects after `last_sequence`: +1 wrapped, 0 after -1 (doc step 3)."""
    if last_sequence in (-1, MAX_SEQUENCE):
        return 0
    return last_sequence + 1


# ------------------------------------------------------------------------------------------------
# Inputs and outputs
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Batch:
    """One row of the canonical input (eos_audit.schemas.RECORD_BATCH_COLUMNS)."""

    topic: str
    partition: int
    base_offset: int
    last_offset: int
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    last_sequence: int | None = None
    record_count: int | None = None
    is_transactional: bool = False
    is_control: bool = False
    control_type: str | None = None
    coordinator_epoch: int | None = None
    partition_leader_epoch: int | None = None
    magic: int | None = 2
    max_timestamp: int | None = None
    crc_valid: bool | None = None
    source: str | None = None

    def as_row(self) -> dict:
        """The batch as a dict of the canonical input columns, in column order."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def effective_last_sequence(self) -> int:
        """last_sequence, derived from base_sequence and the offset delta when absent (§1.5)."""
        if self.last_sequence is not None:
            return self.last_sequence
        if self.base_sequence == -1:
            return -1
        return increment_sequence(self.base_sequence, self.last_offset - self.base_offset)

    @property
    def effective_magic(self) -> int:
        """Null magic means 2 (doc "Scope")."""
        return 2 if self.magic is None else self.magic

    @property
    def is_empty_control(self) -> bool:
        """A control batch with no records (cleaned by compaction): changes nothing (§1.7)."""
        return self.is_control and self.record_count == 0

    @property
    def is_marker(self) -> bool:
        """A non-empty control batch: a transaction marker (§1.7)."""
        # AMBIGUITY: a control batch with record_count null counts as non-empty (a marker): the doc
        # only excludes `record_count = 0`.
        return self.is_control and not self.is_empty_control


@dataclass(frozen=True)
class SeedBatch:
    """One cached data batch of a seeded producer state (doc "Seeded state")."""

    base_sequence: int
    last_sequence: int
    base_offset: int
    last_offset: int


@dataclass(frozen=True)
class Seed:
    """Optional initial state of one producer on one partition (schemas.PRODUCER_STATE)."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int | None = None
    txn_first_offset: int | None = None
    last_timestamp: int | None = None
    batches: tuple[SeedBatch, ...] = ()
    # Exclusive end offset the state covers (a snapshot's offset); None: right before the log.
    state_offset: int | None = None

    def as_row(self) -> dict:
        """The seed as a dict of the producer_state columns."""
        return {
            "topic": self.topic,
            "partition": self.partition,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "coordinator_epoch": self.coordinator_epoch,
            "txn_first_offset": self.txn_first_offset,
            "last_timestamp": self.last_timestamp,
            "batches": [
                {
                    "base_sequence": sb.base_sequence,
                    "last_sequence": sb.last_sequence,
                    "base_offset": sb.base_offset,
                    "last_offset": sb.last_offset,
                }
                for sb in self.batches
            ],
            "state_offset": self.state_offset,
            "source": None,
        }


@dataclass(frozen=True, order=True)
class Finding:
    """One finding, reduced to the columns the differential test compares."""

    topic: str
    partition: int
    base_offset: int
    last_offset: int
    finding_type: str
    severity: str
    cause: str | None
    kafka_error: str | None
    producer_id: int | None
    expected_sequence: int | None
    previous_offset: int | None

    def sort_key(self) -> tuple:
        """A total order that tolerates None (None sorts first)."""
        return tuple((value is not None, value) for value in _finding_values(self))


def _finding_values(finding: Finding) -> tuple:
    return tuple(getattr(finding, f.name) for f in fields(finding))


# ------------------------------------------------------------------------------------------------
# Per-producer state
# ------------------------------------------------------------------------------------------------
@dataclass
class DataRange:
    """A data batch as remembered by the state: epoch, sequence range and offsets (§1.2 BM)."""

    epoch: int
    base_sequence: int
    last_sequence: int
    base_offset: int
    last_offset: int


@dataclass
class ProducerState:
    """The state of one producer inside one session (doc "State inside a session").

    A new session starts from `ProducerState()`: epoch -1, no cached batches, no transaction, no
    coordinator epoch (doc "Sessions and expiry").
    """

    # current_epoch: the highest epoch among the session's earlier rows (§1.2 producerEpoch).
    epoch: int = -1
    # last_sequence of the most recent applied data batch of epoch `epoch`, -1 if none (§1.5), and
    # the base offset of that batch (previous_offset of GAP/OVERLAP/RESET).
    last_sequence: int = -1
    last_sequence_offset: int | None = None
    # The 5 most recent applied data batches (§1.2 batchMetadata; window of the duplicate rule).
    cache: deque[DataRange] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    # The last DUPLICATE_LOOKBACK applied data batches of the session, oldest first (doc verdict
    # step 2 looks back over them, not only over the 5 cached ones).
    session_data: deque[DataRange] = field(
        default_factory=lambda: deque(maxlen=DUPLICATE_LOOKBACK)
    )
    # The sequences a batch that failed its CRC claimed, as (epoch, base, last), or None
    # (doc "Corrupt batches": a gap of exactly that range is that batch).
    corrupt_claim: tuple[int, int, int] | None = None
    # Coordinator epoch of the most recent applied marker with a non-null one (or the seed's),
    # else -1.
    coordinator_epoch: int = -1
    # First offset of the open transaction, None when no transaction is open (§1.6, §1.7).
    txn_first_offset: int | None = None
    # Where the log known to the state ends after the batch that set last_sequence: its
    # last_offset + 1, or a seed's state_offset (None: the seed stands right before the log).
    # Read by the LOG_START cause of SEQUENCE_GAP / SEQUENCE_RESET (doc "Causes").
    last_sequence_coverage_end: int | None = None


@dataclass
class ProducerLog:
    """What the expiry rule reads from the log, across sessions and whatever the verdicts.

    Doc "Sessions and expiry": the previous row `p` of the producer (any verdict) and whether a
    transaction was "open after p", read from the log (the most recent transactional data row comes
    after the most recent non-empty control row; a seed with txn_first_offset counts as open).
    """

    # AMBIGUITY: a producer's "rows" are the rows that take part in the replay (plus the seed's
    # batches and state entry): an empty control batch or a batch that failed its CRC is not a row,
    # so it neither restarts the expiry clock nor opens/closes a transaction in the log view.

    has_rows: bool = False
    previous_timestamp: int | None = None
    # base_offset of the previous row; None when it is the seed's state entry (no offset).
    previous_offset: int | None = None
    txn_open_in_log: bool = False


@dataclass
class Producer:
    """One producer id on one partition: its current session state and its log history."""

    state: ProducerState = field(default_factory=ProducerState)
    log: ProducerLog = field(default_factory=ProducerLog)
    # Doc "Verdict of a data batch" step 3a: a seed, or an applied data batch with sequence checks,
    # gave the producer a sequence (in any session).
    sequences_seen: bool = False


@dataclass(frozen=True)
class PartitionContext:
    """Per-partition facts the verdicts and causes need."""

    topic: str
    partition: int
    log_start: int
    compacted: bool
    coordinator_topic: bool
    kafka_version: tuple[int, ...]
    severities: Mapping[str, str]


@dataclass(frozen=True)
class Verdict:
    """The producer-state finding of one batch, before it becomes a Finding."""

    finding_type: str
    kafka_error: str | None = None
    cause: str | None = None
    expected_sequence: int | None = None
    previous_offset: int | None = None


def _make_finding(ctx: PartitionContext, batch: Batch, verdict: Verdict) -> Finding:
    severity = ctx.severities[verdict.finding_type]
    if verdict.cause is not None and verdict.cause != UNEXPLAINED:
        severity = "INFO"  # doc: a benign cause lowers the severity to INFO
    return Finding(
        topic=batch.topic,
        partition=batch.partition,
        base_offset=batch.base_offset,
        last_offset=batch.last_offset,
        finding_type=verdict.finding_type,
        severity=severity,
        cause=verdict.cause,
        kafka_error=verdict.kafka_error,
        producer_id=batch.producer_id,
        expected_sequence=verdict.expected_sequence,
        previous_offset=verdict.previous_offset,
    )


# ------------------------------------------------------------------------------------------------
# Scope
# ------------------------------------------------------------------------------------------------
def takes_part_in_replay(batch: Batch) -> bool:
    """Doc "Scope": producer id, magic >= 2, CRC not failed, not an empty control batch."""
    return (
        batch.producer_id >= 0
        and batch.effective_magic >= 2
        and batch.crc_valid is not False
        and not batch.is_empty_control
    )


def sequence_checks_apply(ctx: PartitionContext, batch: Batch) -> bool:
    """No duplicate/sequence checks on coordinator topics (§1.9) nor coordinator appends (§7.8)."""
    return not ctx.coordinator_topic and batch.base_sequence >= 0


def is_coordinator_append(batch: Batch) -> bool:
    """A data batch with a producer id but no sequence: written by a coordinator (§7 rule 8)."""
    return not batch.is_control and batch.base_sequence < 0


def _matches(topic: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(topic, pattern) for pattern in patterns)


# ------------------------------------------------------------------------------------------------
# Verdict of a data batch (doc "Verdict of a data batch b"); first match wins.
# ------------------------------------------------------------------------------------------------
def check_fenced(state: ProducerState, batch: Batch) -> Verdict | None:
    """Step 1 (data) / step 1 (marker): epoch below the current epoch (§1.4)."""
    if batch.producer_epoch < state.epoch:
        return Verdict(FENCED_PRODUCER_EPOCH, kafka_error=INVALID_PRODUCER_EPOCH)
    return None


def check_duplicate(ctx: PartitionContext, state: ProducerState, batch: Batch) -> Verdict | None:
    """Step 2: exact repeat (same epoch, same base and last sequence) in the session (§1.3)."""
    if not sequence_checks_apply(ctx, batch):
        return None
    first_match = None
    for earlier in state.session_data:
        if (
            earlier.epoch == batch.producer_epoch
            and earlier.base_sequence == batch.base_sequence
            and earlier.last_sequence == batch.effective_last_sequence
        ):
            first_match = earlier
            break
    if first_match is None:
        return None
    # §1.3: the leader deduplicates only against its 5 cached batches; an older repeat falls through
    # to the sequence check and is rejected with OUT_OF_ORDER_SEQUENCE_NUMBER.
    # AMBIGUITY: "that earlier batch" is read as the *first* matching batch (the one whose offset is
    # previous_offset); within a session only one applied batch can carry a given (epoch, s, l).
    in_cache = any(cached is first_match for cached in state.cache)
    if not in_cache and in_sequence(state.last_sequence, batch.base_sequence):
        # The leader searches only its cache, then accepts the next sequence (doc step 2).
        return None
    return Verdict(
        DUPLICATE_BATCH,
        kafka_error=None if in_cache else OUT_OF_ORDER_SEQUENCE_NUMBER,
        previous_offset=first_match.base_offset,
    )


def check_sequence(ctx: PartitionContext, state: ProducerState, batch: Batch) -> Verdict | None:
    """Step 3: same epoch, base sequence not the next one (§1.5 step 3)."""
    if not sequence_checks_apply(ctx, batch) or batch.producer_epoch != state.epoch:
        return None
    # AMBIGUITY: a batch with a producer id but producer_epoch -1 as the first row of a session has
    # e == current_epoch == -1, so step 3 (not step 5) is reached first: SEQUENCE_GAP / RESET
    # instead of UNKNOWN_PRODUCER. Literal order of the steps; such batches do not occur in real
    # logs.
    s = batch.base_sequence
    if in_sequence(state.last_sequence, s):
        return None
    expected = expected_after(state.last_sequence)
    claim = state.corrupt_claim
    if (
        claim is not None
        and claim[0] == batch.producer_epoch
        and claim[1] == expected
        and expected_after(claim[2]) == s
    ):
        return None  # the missing sequences are the corrupt batch's: CORRUPT_BATCH says it
    distance = (s - expected) % (2**31)
    previous_offset = state.last_sequence_offset if state.last_sequence != -1 else None
    if s == 0:  # expected != 0 here, else s would be in sequence
        return Verdict(
            SEQUENCE_RESET,
            kafka_error=OUT_OF_ORDER_SEQUENCE_NUMBER,
            cause=_reset_cause(ctx, state),
            expected_sequence=expected,
            previous_offset=previous_offset,
        )
    if state.last_sequence >= 0 and distance >= 2**30:
        return Verdict(
            SEQUENCE_OVERLAP,
            kafka_error=OUT_OF_ORDER_SEQUENCE_NUMBER,
            expected_sequence=expected,
            previous_offset=previous_offset,
        )
    return Verdict(
        SEQUENCE_GAP,
        kafka_error=OUT_OF_ORDER_SEQUENCE_NUMBER,
        cause=_gap_cause(ctx, state),
        expected_sequence=expected,
        previous_offset=previous_offset,
    )


def check_new_epoch(ctx: PartitionContext, state: ProducerState, batch: Batch) -> Verdict | None:
    """Step 4: a higher epoch must start at sequence 0 when the producer is known (§1.5 step 2)."""
    if (
        sequence_checks_apply(ctx, batch)
        and batch.producer_epoch > state.epoch >= 0
        and batch.base_sequence != 0
    ):
        return Verdict(
            NEW_EPOCH_NONZERO_SEQUENCE,
            kafka_error=OUT_OF_ORDER_SEQUENCE_NUMBER,
            expected_sequence=0,
        )
    return None


def _unknown_producer_error(ctx: PartitionContext) -> str | None:
    """The answer to a producer without state by version (§1.5 history table)."""
    if ctx.kafka_version < (1, 0):
        return OUT_OF_ORDER_SEQUENCE_NUMBER
    if ctx.kafka_version < (2, 5):
        return UNKNOWN_PRODUCER_ID
    return None  # KIP-360: 2.5+ accepts any sequence from an unknown producer


def check_sequences_lost(
    ctx: PartitionContext,
    state: ProducerState,
    batch: Batch,
    *,
    sequences_seen: bool,
    previous_row_offset: int | None,
) -> Verdict | None:
    """Step 3a: known from markers only, on a log starting above 0 (§1.12 audit consequence).

    The producer's data lay in deleted segments; since 2.4 the leader kept its state, which the
    log no longer shows: the batch is judged as a producer without state would be (step 5).
    """
    if not (
        sequence_checks_apply(ctx, batch)
        and batch.producer_epoch == state.epoch >= 0
        and batch.base_sequence != 0
        and not sequences_seen
        and ctx.log_start > 0
    ):
        return None
    return Verdict(
        UNKNOWN_PRODUCER,
        kafka_error=_unknown_producer_error(ctx),
        cause=LOG_START,
        expected_sequence=0,
        previous_offset=previous_row_offset,
    )


def check_unknown_producer(
    ctx: PartitionContext,
    state: ProducerState,
    batch: Batch,
    *,
    started_by_expiry: bool,
    previous_row_offset: int | None,
) -> Verdict | None:
    """Step 5: no state (first row of the session) and a non-zero sequence (§1.5 history table)."""
    if not (sequence_checks_apply(ctx, batch) and state.epoch == -1 and batch.base_sequence != 0):
        return None
    return Verdict(
        UNKNOWN_PRODUCER,
        kafka_error=_unknown_producer_error(ctx),
        cause=_unknown_producer_cause(ctx, started_by_expiry),
        expected_sequence=0,
        previous_offset=previous_row_offset,
    )


def check_txn_state(state: ProducerState, batch: Batch) -> Verdict | None:
    """Step 6: non-transactional data while a transaction is open (§1.6; every origin)."""
    if not batch.is_transactional and state.txn_first_offset is not None:
        return Verdict(
            INVALID_TXN_STATE, kafka_error=INVALID_TXN_STATE, previous_offset=state.txn_first_offset
        )
    return None


def data_verdict(
    ctx: PartitionContext,
    state: ProducerState,
    batch: Batch,
    *,
    started_by_expiry: bool,
    previous_row_offset: int | None,
    sequences_seen: bool,
) -> Verdict | None:
    """The verdict of a data batch: steps 1-6 in order, first match wins."""
    return (
        check_fenced(state, batch)
        or check_duplicate(ctx, state, batch)
        or check_sequences_lost(
            ctx,
            state,
            batch,
            sequences_seen=sequences_seen,
            previous_row_offset=previous_row_offset,
        )
        or check_sequence(ctx, state, batch)
        or check_new_epoch(ctx, state, batch)
        or check_unknown_producer(
            ctx,
            state,
            batch,
            started_by_expiry=started_by_expiry,
            previous_row_offset=previous_row_offset,
        )
        or check_txn_state(state, batch)
    )


# ------------------------------------------------------------------------------------------------
# Verdict of a marker (doc "Verdict of a marker m")
# ------------------------------------------------------------------------------------------------
def check_coordinator_fenced(state: ProducerState, batch: Batch) -> Verdict | None:
    """Step 2 (marker): coordinator epoch below the state's (§1.7)."""
    # AMBIGUITY: a marker with a null coordinator_epoch is never COORDINATOR_FENCED (nothing to
    # compare) and does not change the state's coordinator epoch ("most recent applied marker with
    # a non-null coordinator epoch").
    if batch.coordinator_epoch is not None and batch.coordinator_epoch < state.coordinator_epoch:
        return Verdict(COORDINATOR_FENCED, kafka_error=TRANSACTION_COORDINATOR_FENCED)
    return None


def marker_verdict(state: ProducerState, batch: Batch) -> Verdict | None:
    """The verdict of a marker: fencing first, then coordinator fencing. No sequence checks."""
    return check_fenced(state, batch) or check_coordinator_fenced(state, batch)


# ------------------------------------------------------------------------------------------------
# Causes (doc "Causes and severity")
# ------------------------------------------------------------------------------------------------
def _previous_applied_below_log_start(ctx: PartitionContext, state: ProducerState) -> bool:
    # Doc "Causes": the missing batches lie after the coverage end of the batch that set
    # last_sequence; some of them may have been deleted only if that end is below the log start.
    end = state.last_sequence_coverage_end
    return end is not None and end < ctx.log_start


def _gap_cause(ctx: PartitionContext, state: ProducerState) -> str:
    if ctx.compacted:
        return COMPACTION  # §1.12: whole batches disappear from compacted topics
    if _previous_applied_below_log_start(ctx, state):
        return LOG_START
    return UNEXPLAINED


def _reset_cause(ctx: PartitionContext, state: ProducerState) -> str:
    if _previous_applied_below_log_start(ctx, state):
        return LOG_START  # §7 rule 2a
    return UNEXPLAINED


def _unknown_producer_cause(ctx: PartitionContext, started_by_expiry: bool) -> str:
    if started_by_expiry:
        return PRODUCER_EXPIRY
    if ctx.log_start > 0:
        return LOG_START
    if ctx.compacted:
        return COMPACTION
    return UNEXPLAINED


# ------------------------------------------------------------------------------------------------
# Applying a row to the state (doc "Applied")
# ------------------------------------------------------------------------------------------------
def _raise_epoch(state: ProducerState, epoch: int) -> None:
    """current_epoch is the highest epoch seen; a new epoch empties last_sequence (§1.2)."""
    if epoch > state.epoch:
        state.epoch = epoch
        state.last_sequence = -1
        state.last_sequence_offset = None
        state.last_sequence_coverage_end = None


def apply_data_batch(
    state: ProducerState,
    rng: DataRange,
    *,
    transactional: bool,
    coordinator_append: bool,
    coverage_end: int | None,
) -> None:
    """Apply a data batch (audited or seed batch) as the broker does when it loads a log (§1.6)."""
    _raise_epoch(state, rng.epoch)
    # AMBIGUITY: a coordinator append (base_sequence < 0) "does not enter the sequence cache"; it is
    # read as: it is not one of the 5 cached batches and does not set last_sequence either (in the
    # broker last_sequence is the cache's last entry). It still raises the epoch, opens a
    # transaction when transactional, and counts as the previous applied batch for causes.
    if not coordinator_append:
        state.cache.append(rng)
        state.session_data.append(rng)
        state.corrupt_claim = None
        state.last_sequence = rng.last_sequence
        state.last_sequence_offset = rng.base_offset
        state.last_sequence_coverage_end = coverage_end
    if transactional and state.txn_first_offset is None:
        state.txn_first_offset = rng.base_offset  # §1.6: the first data batch opens the txn


def apply_marker(state: ProducerState, batch: Batch) -> None:
    """Apply a marker (§1.7): epoch, coordinator epoch, txn closed; same epoch keeps sequences."""
    _raise_epoch(state, batch.producer_epoch)
    if batch.coordinator_epoch is not None:
        state.coordinator_epoch = batch.coordinator_epoch
    state.txn_first_offset = None


def _data_range(batch: Batch) -> DataRange:
    return DataRange(
        epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        last_sequence=batch.effective_last_sequence,
        base_offset=batch.base_offset,
        last_offset=batch.last_offset,
    )


# ------------------------------------------------------------------------------------------------
# Seeds (doc "Seeded state"): cached batches first, then the state entry; session 0.
# ------------------------------------------------------------------------------------------------
def producer_from_seed(seed: Seed) -> Producer:
    """A producer whose session 0 is the seed: its batches, then its state entry."""
    producer = Producer()
    state, log = producer.state, producer.log
    for sb in seed.batches:  # oldest first; applied data batches of the seed's epoch
        rng = DataRange(
            epoch=seed.producer_epoch,
            base_sequence=sb.base_sequence,
            last_sequence=sb.last_sequence,
            base_offset=sb.base_offset,
            last_offset=sb.last_offset,
        )
        apply_data_batch(
            state, rng, transactional=False, coordinator_append=False,
            coverage_end=seed.state_offset,
        )
        log.has_rows = True
        log.previous_timestamp = seed.last_timestamp
        log.previous_offset = sb.base_offset
    # The state entry: epoch, coordinator epoch, open transaction, last timestamp.
    _raise_epoch(state, seed.producer_epoch)
    if seed.coordinator_epoch is not None:
        state.coordinator_epoch = seed.coordinator_epoch
    state.txn_first_offset = seed.txn_first_offset
    log.has_rows = True
    log.previous_timestamp = seed.last_timestamp
    log.previous_offset = None
    log.txn_open_in_log = seed.txn_first_offset is not None
    producer.sequences_seen = True  # the seed is the broker's state, with sequences or without
    return producer


# ------------------------------------------------------------------------------------------------
# The replay
# ------------------------------------------------------------------------------------------------
def _starts_new_session_by_expiry(log: ProducerLog, batch: Batch, expiration_ms: int) -> bool:
    """Doc "Sessions and expiry": time since the previous row >= expiration and no open txn."""
    if not log.has_rows:
        return False
    if batch.max_timestamp is None or log.previous_timestamp is None:
        return False
    return batch.max_timestamp - log.previous_timestamp >= expiration_ms and not log.txn_open_in_log


def replay_producer_batch(
    ctx: PartitionContext, producer: Producer, batch: Batch, expiration_ms: int
) -> Finding | None:
    """One row of the producer replay: session boundary, verdict, state update, log update."""
    log = producer.log
    started_by_expiry = _starts_new_session_by_expiry(log, batch, expiration_ms)
    if started_by_expiry:
        producer.state = ProducerState()  # a new session starts empty
    state = producer.state
    previous_row_offset = log.previous_offset if log.has_rows else None

    if batch.is_marker:
        verdict = marker_verdict(state, batch)
        if verdict is None or verdict.finding_type != FENCED_PRODUCER_EPOCH:
            apply_marker(state, batch)  # COORDINATOR_FENCED markers are still applied
    else:
        verdict = data_verdict(
            ctx,
            state,
            batch,
            started_by_expiry=started_by_expiry,
            previous_row_offset=previous_row_offset,
            sequences_seen=producer.sequences_seen,
        )
        rng = _data_range(batch)
        # Rejected without a change of state (doc "Applied"): a repeat, a zombie, an overlap.
        rejected = (DUPLICATE_BATCH, FENCED_PRODUCER_EPOCH, SEQUENCE_OVERLAP)
        if verdict is None or verdict.finding_type not in rejected:
            apply_data_batch(
                state,
                rng,
                transactional=batch.is_transactional,
                coordinator_append=is_coordinator_append(batch),
                coverage_end=batch.last_offset + 1,
            )
            if sequence_checks_apply(ctx, batch):
                producer.sequences_seen = True

    # The log-based view used by the expiry rule (any verdict).
    log.has_rows = True
    log.previous_timestamp = batch.max_timestamp
    log.previous_offset = batch.base_offset
    if batch.is_marker:
        log.txn_open_in_log = False
    elif batch.is_transactional:
        log.txn_open_in_log = True

    return None if verdict is None else _make_finding(ctx, batch, verdict)


def remember_corrupt_claim(
    producers: dict[int, Producer],
    seeds_by_key: Mapping[tuple[str, int, int], Seed],
    topic: str,
    partition: int,
    batch: Batch,
) -> None:
    """Doc "Corrupt batches": a known producer's corrupt data batch claims its sequence range;
    consecutive corrupt batches of one epoch claim one range together."""
    pid = batch.producer_id
    if pid < 0 or batch.base_sequence < 0 or batch.is_control:
        return
    if pid not in producers:
        seed = seeds_by_key.get((topic, partition, pid))
        if seed is None:
            return  # an unknown producer: the untrusted header creates no state
        producers[pid] = producer_from_seed(seed)
    state = producers[pid].state
    claim = state.corrupt_claim
    last = batch.effective_last_sequence
    if (
        claim is not None
        and claim[0] == batch.producer_epoch
        and expected_after(claim[2]) == batch.base_sequence
    ):
        state.corrupt_claim = (claim[0], claim[1], last)
    else:
        state.corrupt_claim = (batch.producer_epoch, batch.base_sequence, last)


# Doc "Scope": the header a batch is told by; a row repeating the one before it is the same batch.
BATCH_HEADER_FIELDS = (
    "base_offset", "last_offset", "producer_id", "producer_epoch", "base_sequence", "is_control",
    "is_transactional", "record_count",
)  # fmt: skip


def repeats(previous: Batch | None, batch: Batch) -> bool:
    """Doc "Scope": the export holds the batch before it twice (ties sort the copies together)."""
    return previous is not None and all(
        getattr(previous, name) == getattr(batch, name) for name in BATCH_HEADER_FIELDS
    )


def partition_findings(ctx: PartitionContext, ordered: list[Batch]) -> list[Finding]:
    """Doc "Partition-level rules": over every audited batch of the partition, in log order."""
    findings = []
    max_last_offset: int | None = None
    max_leader_epoch: int | None = None
    previous: Batch | None = None
    for batch in ordered:
        if repeats(previous, batch):
            # Doc "Scope": the same batch exported twice gets OFFSET_OVERLAP and nothing else.
            findings.append(
                _make_finding(ctx, batch, Verdict(OFFSET_OVERLAP, previous_offset=max_last_offset))
            )
            continue
        previous = batch
        if max_last_offset is not None and batch.base_offset <= max_last_offset:
            findings.append(
                _make_finding(ctx, batch, Verdict(OFFSET_OVERLAP, previous_offset=max_last_offset))
            )
        elif (
            max_last_offset is not None
            and batch.base_offset > max_last_offset + 1
            and batch.effective_magic >= 2
        ):
            # Doc "Offset gap": a leader gives out every offset; only the cleaner leaves holes.
            cause = COMPACTION if ctx.compacted else UNEXPLAINED
            verdict = Verdict(OFFSET_GAP, cause=cause, previous_offset=max_last_offset)
            findings.append(_make_finding(ctx, batch, verdict))
        # Only v2 batches carry a partition leader epoch (§2.1; a v0/v1 entry has none).
        leader_epoch = batch.partition_leader_epoch if batch.effective_magic >= 2 else None
        if leader_epoch is not None and leader_epoch >= 0:
            if max_leader_epoch is not None and leader_epoch < max_leader_epoch:
                findings.append(_make_finding(ctx, batch, Verdict(LEADER_EPOCH_REGRESSION)))
            max_leader_epoch = (
                leader_epoch if max_leader_epoch is None else max(max_leader_epoch, leader_epoch)
            )
        if batch.crc_valid is False:
            findings.append(
                _make_finding(ctx, batch, Verdict(CORRUPT_BATCH, kafka_error=CORRUPT_MESSAGE))
            )
        max_last_offset = (
            batch.last_offset
            if max_last_offset is None
            else max(max_last_offset, batch.last_offset)
        )
    return findings


# Doc "Log order": every field after the offsets breaks ties, nulls first, so only identical rows
# keep their input order (and identical rows cannot be told apart).
LOG_ORDER_FIELDS = (
    "base_offset", "last_offset", "producer_id", "producer_epoch", "base_sequence", "is_control",
    "is_transactional", "control_type", "coordinator_epoch", "partition_leader_epoch",
    "max_timestamp", "record_count", "magic", "crc_valid", "source",
)  # fmt: skip


def log_order_key(batch: Batch) -> tuple:
    """The sort key of a batch in its partition's log (nulls before values)."""
    values = [
        batch.effective_magic if name == "magic" else getattr(batch, name)
        for name in LOG_ORDER_FIELDS
    ]
    return tuple((value is not None, value) for value in values)


def replay(
    batches: Iterable[Batch],
    *,
    seeds: Iterable[Seed] = (),
    expiration_ms: int = 86_400_000,
    kafka_version: tuple[int, ...] = (3, 7),
    compacted_topics: Iterable[str] = (),
    coordinator_topics: Iterable[str] = ("__consumer_offsets", "__transaction_state"),
    log_start_offsets: Mapping[tuple[str, int], int] | None = None,
    severities: Mapping[str, str] | None = None,
) -> list[Finding]:
    """Replay every topic-partition of `batches` and return all findings, sorted."""
    batches = list(batches)
    compacted_topics = tuple(compacted_topics)
    coordinator_topics = tuple(coordinator_topics)
    all_severities = {**DEFAULT_SEVERITIES, **(severities or {})}

    seeds_by_key: dict[tuple[str, int, int], Seed] = {}
    for seed in seeds:
        key = (seed.topic, seed.partition, seed.producer_id)
        # AMBIGUITY: two seeds for the same (topic, partition, producer_id) have no meaning in the
        # doc; the model refuses them rather than guess.
        if key in seeds_by_key:
            raise ValueError(f"two seeds for {key}")
        seeds_by_key[key] = seed

    by_partition: dict[tuple[str, int], list[tuple[int, Batch]]] = {}
    for position, batch in enumerate(batches):
        by_partition.setdefault((batch.topic, batch.partition), []).append((position, batch))

    findings: list[Finding] = []
    for (topic, partition), rows in by_partition.items():
        # Log order: (base_offset, last_offset), then input position.
        # Doc "Log order": ties (overlapping exports) are broken on stable batch fields, then input.
        rows.sort(key=lambda row: (log_order_key(row[1]), row[0]))
        ordered = [batch for _, batch in rows]
        # Doc "Causes": the exported log starts at its first batch; a checkpoint (DeleteRecords) may
        # put the log start above it, never below what was exported.
        log_start = min(batch.base_offset for batch in ordered)
        if log_start_offsets is not None and (topic, partition) in log_start_offsets:
            log_start = max(log_start, log_start_offsets[(topic, partition)])
        ctx = PartitionContext(
            topic=topic,
            partition=partition,
            log_start=log_start,
            compacted=_matches(topic, compacted_topics),
            coordinator_topic=_matches(topic, coordinator_topics),
            kafka_version=tuple(kafka_version),
            severities=all_severities,
        )
        findings.extend(partition_findings(ctx, ordered))

        producers: dict[int, Producer] = {}
        previous: Batch | None = None
        for batch in ordered:
            if repeats(previous, batch):
                continue  # doc "Scope": the copy takes no part in the replay
            previous = batch
            if batch.crc_valid is False:
                remember_corrupt_claim(producers, seeds_by_key, topic, partition, batch)
            if not takes_part_in_replay(batch):
                continue
            pid = batch.producer_id
            if pid not in producers:
                seed = seeds_by_key.get((topic, partition, pid))
                producers[pid] = producer_from_seed(seed) if seed is not None else Producer()
            finding = replay_producer_batch(ctx, producers[pid], batch, expiration_ms)
            if finding is not None:
                findings.append(finding)

    return sorted(findings, key=Finding.sort_key)
