"""The replay kernel: the partition leader's producer-state validation, one row at a time.

Plain sequential Python that mirrors the broker, written in the subset numba compiles: the same
functions run compiled for an audit (this module compiles itself on import, `_compile`) and
uncompiled for debugging (`EOS_AUDIT_JIT=0`, `runner.uncompiled_kernel`). Each check is named after
the Kafka method it replays and cites the section of docs/rules.md that states the rule; the edge
cases are docs/replay_semantics.md. As in Kafka, an audited batch is checked against the producer's
entry as it stands (`validate_*`, ProducerAppendInfo's checks) and only an applied batch changes it
(`append_*`, the `updatedEntry` ProducerStateManager.update commits): `replay_producer_row`.

The rows of a partition arrive in `rows.REPLAY_ORDER`; state lives in record arrays
(`replay.state`) and is carried from one Arrow batch to the next. Memory grows with the producers
(and acknowledgements) of the partition being replayed, never with its batches.
"""

from __future__ import annotations

from eos_audit.findings import (  # noqa: F401 (FACT_*: generated from the registry)
    FACT_ACKNOWLEDGED_MS,
    FACT_AGE_MS,
    FACT_CHECKPOINT_EPOCH,
    FACT_COORDINATOR_EPOCH,
    FACT_COORDINATOR_EPOCH_SEEN,
    FACT_CURRENT_EPOCH,
    FACT_FIRST_MISSING_OFFSET,
    FACT_FIRST_OFFSET,
    FACT_HIGH_WATERMARK,
    FACT_LAST_MISSING_OFFSET,
    FACT_LEADER_EPOCH,
    FACT_LOG_BATCHES,
    FACT_LOG_END_OFFSET,
    FACT_LOG_START,
    FACT_LOG_START_OFFSET,
    FACT_MAX_LEADER_EPOCH,
    FACT_MEASURED_AT_EXPORT,
    FACT_MISSING_SEQUENCES,
    FACT_PRIMARY_BASE_SEQUENCE,
    FACT_PRIMARY_LAST_OFFSET,
    FACT_PRIMARY_PRODUCER_ID,
    FACT_STATE_LAST_SEQUENCE,
    FACTS_PER_FINDING,
    REGISTRY,
    Cause,
    KafkaError,
)
from eos_audit.replay import rows as wire
from eos_audit.replay.rows import ControlType, RowKind, field_value
from eos_audit.replay.state import (
    ACKS_SEEN,
    COUNT_OF,
    DUPLICATE_LOOKBACK,
    INT32_MAX,
    NULL,
    NUM_BATCHES_TO_RETAIN,
    ROOM_NEEDED,
    SEQUENCE_SPACE,
)

# Finding codes from the one registry (findings.REPLAYED); numba compiles module-level ints as
# constants.
OFFSET_OVERLAP = REGISTRY["OFFSET_OVERLAP"].code
OFFSET_GAP = REGISTRY["OFFSET_GAP"].code
LEADER_EPOCH_REGRESSION = REGISTRY["LEADER_EPOCH_REGRESSION"].code
CORRUPT_BATCH = REGISTRY["CORRUPT_BATCH"].code
LEADER_EPOCH_MISMATCH = REGISTRY["LEADER_EPOCH_MISMATCH"].code
REPLICA_DIVERGENCE = REGISTRY["REPLICA_DIVERGENCE"].code
DUPLICATE_BATCH = REGISTRY["DUPLICATE_BATCH"].code
SEQUENCE_GAP = REGISTRY["SEQUENCE_GAP"].code
SEQUENCE_OVERLAP = REGISTRY["SEQUENCE_OVERLAP"].code
SEQUENCE_RESET = REGISTRY["SEQUENCE_RESET"].code
NEW_EPOCH_NONZERO_SEQUENCE = REGISTRY["NEW_EPOCH_NONZERO_SEQUENCE"].code
UNKNOWN_PRODUCER = REGISTRY["UNKNOWN_PRODUCER"].code
FENCED_PRODUCER_EPOCH = REGISTRY["FENCED_PRODUCER_EPOCH"].code
COORDINATOR_FENCED = REGISTRY["COORDINATOR_FENCED"].code
INVALID_TXN_STATE = REGISTRY["INVALID_TXN_STATE"].code
HANGING_TRANSACTION = REGISTRY["HANGING_TRANSACTION"].code
ACKED_WRITE_LOST = REGISTRY["ACKED_WRITE_LOST"].code
ACKED_OFFSET_MISMATCH = REGISTRY["ACKED_OFFSET_MISMATCH"].code
# check_sequence's answer for a batch in sequence (every finding code is 0 or more).
IN_SEQUENCE = -1

NO_CAUSE = int(Cause.NONE)
LOG_START = int(Cause.LOG_START)
PRODUCER_EXPIRY = int(Cause.PRODUCER_EXPIRY)
COMPACTION = int(Cause.COMPACTION)
UNEXPLAINED = int(Cause.UNEXPLAINED)
QUARANTINED_BATCH = int(Cause.QUARANTINED_BATCH)
NO_ERROR = int(KafkaError.NONE)
OUT_OF_ORDER_SEQUENCE_NUMBER = int(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER)
INVALID_PRODUCER_EPOCH = int(KafkaError.INVALID_PRODUCER_EPOCH)
INVALID_TXN_STATE_ERROR = int(KafkaError.INVALID_TXN_STATE)
TRANSACTION_COORDINATOR_FENCED = int(KafkaError.TRANSACTION_COORDINATOR_FENCED)
CORRUPT_MESSAGE = int(KafkaError.CORRUPT_MESSAGE)

LOG_START_CHECKPOINT = int(RowKind.LOG_START_CHECKPOINT)
HIGH_WATERMARK_CHECKPOINT = int(RowKind.HIGH_WATERMARK_CHECKPOINT)
ACK = int(RowKind.ACK)
SEED_BATCH = int(RowKind.SEED_BATCH)
SEED_STATE = int(RowKind.SEED_STATE)
LEADER_EPOCH_ENTRY = int(RowKind.LEADER_EPOCH_ENTRY)
STATE_COVERAGE = int(RowKind.STATE_COVERAGE)
AUDITED = int(RowKind.AUDITED)
REPLICA = int(RowKind.REPLICA)
OPEN = int(ControlType.OPEN)
COMMIT = int(ControlType.COMMIT)
ABORT = int(ControlType.ABORT)
UNKNOWN_OUTCOME = int(ControlType.UNKNOWN)

# Indexes into `counts` (state.COUNT_OF): events written per output, by the table it becomes.
FINDINGS = COUNT_OF["findings"]
TRANSACTIONS = COUNT_OF["transactions"]
PRODUCER_SESSIONS = COUNT_OF["producer_sessions"]
PARTITION_SUMMARY = COUNT_OF["partition_summary"]
PRODUCER_STATE = COUNT_OF["producer_state"]
ROW_ROOM = 4  # the most events one row can emit into any output


# The wire's fields (rows.BIT_FIELDS) as module-level ints and tuples, which numba compiles as
# constants: each value's reader (rows.BitField.reader) and the header bit that says it is null.
KIND = wire.BIT_FIELDS["kind"].reader
CRC_VALID = wire.BIT_FIELDS["crc_valid"].reader
TRANSACTIONAL_BIT = wire.BIT_FIELDS["is_transactional"].bit
CONTROL_BIT = wire.BIT_FIELDS["is_control"].bit
FOLLOWS_QUARANTINED_BIT = wire.BIT_FIELDS["follows_quarantined"].bit
CONTROL_TYPE = wire.BIT_FIELDS["control_type"].reader
MAGIC = wire.BIT_FIELDS["magic"].reader
PRODUCER_EPOCH = wire.BIT_FIELDS["producer_epoch"].reader
COORDINATOR_EPOCH = wire.BIT_FIELDS["coordinator_epoch"].reader
BASE_SEQUENCE = wire.BIT_FIELDS["base_sequence"].reader
LAST_SEQUENCE = wire.BIT_FIELDS["last_sequence"].reader
LEADER_EPOCH = wire.BIT_FIELDS["leader_epoch"].reader
RECORD_COUNT = wire.BIT_FIELDS["record_count"].reader
CONTROL_TYPE_NULL = wire.BIT_FIELDS[wire.null_flag("control_type")].bit
MAGIC_NULL = wire.BIT_FIELDS[wire.null_flag("magic")].bit
PRODUCER_EPOCH_NULL = wire.BIT_FIELDS[wire.null_flag("producer_epoch")].bit
COORDINATOR_EPOCH_NULL = wire.BIT_FIELDS[wire.null_flag("coordinator_epoch")].bit
BASE_SEQUENCE_NULL = wire.BIT_FIELDS[wire.null_flag("base_sequence")].bit
LAST_SEQUENCE_NULL = wire.BIT_FIELDS[wire.null_flag("last_sequence")].bit
LEADER_EPOCH_NULL = wire.BIT_FIELDS[wire.null_flag("leader_epoch")].bit
RECORD_COUNT_NULL = wire.BIT_FIELDS[wire.null_flag("record_count")].bit


# ------------------------------------------------------------------------------------------------
# The wire, unpacked: one pass over a batch's columns instead of a NumPy pass per field, each of
# which wrote a strided field of the record array (measured offline: building a batch's rows went
# from 44 to 27 ns a row)
# ------------------------------------------------------------------------------------------------
def wire_value(word, header, reader, null_bit):
    """A value of the wire (rows.field_value), NULL when its null bit in the header is set."""
    return NULL if header & null_bit else field_value(word, reader)


def unpack_rows(rows, header, epochs, sequences, counts, base_offset, last_offset, producer_id,
                timestamp, value, partition, topic_code, compacted, coordinator):  # fmt: skip
    """Fill the rows from the wire (rows.py).

    The topic arrives as a code per row (-1 for none) and the topic's flags by code; a row starts
    a (topic, partition) when either differs from the row before (the batch's first row always:
    the caller compares it with the previous batch's last).
    """
    for i in range(len(rows)):
        h = header[i]
        r = rows[i]
        code = topic_code[i]
        r.tp_start = i == 0 or code != topic_code[i - 1] or partition[i] != partition[i - 1]
        r.partition = partition[i]
        r.is_compacted = code >= 0 and compacted[code]
        r.is_coordinator_topic = code >= 0 and coordinator[code]
        r.kind = field_value(h, KIND)
        r.is_transactional = (h & TRANSACTIONAL_BIT) != 0
        r.is_control = (h & CONTROL_BIT) != 0
        r.follows_quarantined = (h & FOLLOWS_QUARANTINED_BIT) != 0
        r.control_type = wire_value(h, h, CONTROL_TYPE, CONTROL_TYPE_NULL)
        r.magic = wire_value(h, h, MAGIC, MAGIC_NULL)
        r.crc_valid = field_value(h, CRC_VALID) - 1  # -1 not checked, 0 failed, 1 valid
        r.producer_epoch = wire_value(epochs[i], h, PRODUCER_EPOCH, PRODUCER_EPOCH_NULL)
        r.coordinator_epoch = wire_value(epochs[i], h, COORDINATOR_EPOCH, COORDINATOR_EPOCH_NULL)
        r.base_sequence = wire_value(sequences[i], h, BASE_SEQUENCE, BASE_SEQUENCE_NULL)
        r.last_sequence = wire_value(sequences[i], h, LAST_SEQUENCE, LAST_SEQUENCE_NULL)
        r.leader_epoch = wire_value(counts[i], h, LEADER_EPOCH, LEADER_EPOCH_NULL)
        r.record_count = wire_value(counts[i], h, RECORD_COUNT, RECORD_COUNT_NULL)
        r.base_offset = base_offset[i]
        r.last_offset = last_offset[i]
        r.producer_id = producer_id[i]
        r.timestamp = timestamp[i]
        r.value = value[i]


# ------------------------------------------------------------------------------------------------
# Small helpers
# ------------------------------------------------------------------------------------------------
def next_expected_sequence(last_sequence):
    """The sequence a leader expects after `last_sequence` (0 when there is none)."""
    if last_sequence == -1 or last_sequence == INT32_MAX:
        return 0
    return last_sequence + 1


def max_or_null(current, value):
    """The larger of two optional values (NULL is absent)."""
    if value == NULL:
        return current
    if current == NULL or value > current:
        return value
    return current


def log_start_of(part):
    """The exported log's start: its first offset, or a higher log-start checkpoint.

    docs/rules.md#causes: DeleteRecords and retention move the log start above the first segment.
    """
    return max_or_null(part.first_offset, part.log_start_checkpoint)


# ------------------------------------------------------------------------------------------------
# Emitting
# ------------------------------------------------------------------------------------------------
def finding_at(findings, counts, code, rows, i, part, cause, error, expected, previous):
    """Append a finding about row `i`; the caller fills its facts."""
    f = findings[counts[FINDINGS]]
    counts[FINDINGS] += 1
    f.finding_code = code
    f.cause = cause
    f.kafka_error = error
    f.row = i
    f.tp_row = i
    f.partition = part.partition
    f.producer_id = rows[i].producer_id
    f.producer_epoch = rows[i].producer_epoch
    f.base_offset = rows[i].base_offset
    f.last_offset = rows[i].last_offset
    f.base_sequence = rows[i].base_sequence
    f.last_sequence = rows[i].last_sequence
    f.timestamp = rows[i].timestamp
    f.expected_sequence = expected
    f.previous_offset = previous
    f.occurrence = part.occurrence
    f.ack_ordinal = NULL
    for k in range(FACTS_PER_FINDING):
        f.facts[k] = NULL
    return f


def finding_without_row(findings, counts, code, tp_row, part):
    """Append a finding found at the end of a partition (no input row of its own)."""
    f = findings[counts[FINDINGS]]
    counts[FINDINGS] += 1
    f.finding_code = code
    f.cause = NO_CAUSE
    f.kafka_error = NO_ERROR
    f.row = -1
    f.tp_row = tp_row
    f.partition = part.partition
    f.producer_id = NULL
    f.producer_epoch = NULL
    f.base_offset = NULL
    f.last_offset = NULL
    f.base_sequence = NULL
    f.last_sequence = NULL
    f.timestamp = NULL
    f.expected_sequence = NULL
    f.previous_offset = NULL
    f.occurrence = 0
    f.ack_ordinal = NULL
    for k in range(FACTS_PER_FINDING):
        f.facts[k] = NULL
    return f


# ------------------------------------------------------------------------------------------------
# ProducerStateEntry (docs/rules.md#producer-state-entry), and ProducerStateManager's expiry of it
# ------------------------------------------------------------------------------------------------
def clear_entry_session(e):
    """A new session: the empty entry a broker has for an unknown or expired producer."""
    e.epoch = -1
    e.coordinator_epoch = -1
    e.txn_open = False
    e.txn_first_offset = NULL
    e.ring_size = 0
    e.ring_next = 0
    e.ring_run = 0
    e.has_last_data = False
    e.last_data_epoch = NULL
    e.last_data_sequence = NULL
    e.last_data_offset = NULL
    e.last_data_coverage_end = NULL
    e.corrupt_claim = False


def new_entry(e, producer_id):
    """A producer seen for the first time in this partition."""
    e.producer_id = producer_id
    clear_entry_session(e)
    e.last_timestamp = NULL
    e.has_rows = False
    e.sequences_seen = False
    e.previous_timestamp = NULL
    e.previous_offset = NULL
    e.log_txn_open = False
    e.has_audited = False
    e.summary_open = False


def ring_slot(e, back):
    """The slot of the batch applied `back` batches before the entry's newest (0: the newest).

    The entry keeps its last DUPLICATE_LOOKBACK applied data batches in a ring whose newest is at
    `ring_next - 1` (state.PRODUCER_STATE_ENTRY): every read of the ring finds its slot here, and
    only add_batch moves `ring_next`. The map is its own inverse: `ring_slot(e, k)` is also how
    many batches before the newest slot k was written.
    """
    return (e.ring_next - 1 - back) % DUPLICATE_LOOKBACK


def maybe_update_producer_epoch(e, epoch):
    """ProducerStateEntry.maybeUpdateProducerEpoch: the applied append's epoch becomes the entry's.

    An applied append is never below the entry's epoch (check_producer_epoch), so the epoch only
    rises. Kafka empties its cached batches here; the ring keeps them, each slot with its epoch,
    and whoever reads the cache reads only the entry's epoch (find_duplicate_batch,
    last_sequence_of, emit_final_state).
    """
    if epoch > e.epoch:
        e.epoch = epoch


def add_batch(e, epoch, base_sequence, last_sequence, base_offset, last_offset, timestamp):
    """ProducerStateEntry.addBatch (docs/rules.md#producer-state-entry): the newest cached batch.

    Kafka drops the oldest of 6 cached batches; the ring drops the oldest of
    DUPLICATE_LOOKBACK + 1, the broker's cache being its newest NUM_BATCHES_TO_RETAIN of the
    entry's epoch. The entry's lastSeq and lastDataOffset are kept beside it (last_data_*).
    """
    maybe_update_producer_epoch(e, epoch)
    newest = ring_slot(e, 0)
    if last_sequence < base_sequence:
        e.ring_run = 0  # wraps past INT32_MAX: it starts above sequences that follow it
    elif (
        e.ring_run > 0
        and e.ring_epoch[newest] == epoch
        and base_sequence > e.ring_last_sequence[newest]
    ):
        e.ring_run = min(e.ring_run + 1, DUPLICATE_LOOKBACK)
    else:
        e.ring_run = 1
    k = e.ring_next  # the slot after the newest: the oldest batch's once the ring is full
    e.ring_epoch[k] = epoch
    e.ring_base_sequence[k] = base_sequence
    e.ring_last_sequence[k] = last_sequence
    e.ring_base_offset[k] = base_offset
    e.ring_last_offset[k] = last_offset
    e.ring_next = (k + 1) % DUPLICATE_LOOKBACK  # the ring's only move
    if e.ring_size < DUPLICATE_LOOKBACK:
        e.ring_size += 1
    e.has_last_data = True
    e.last_data_epoch = epoch
    e.last_data_sequence = last_sequence
    e.last_data_offset = base_offset
    e.last_timestamp = timestamp


def find_duplicate_batch(e, epoch, base_sequence, last_sequence):
    """ProducerStateEntry.findDuplicateBatch (docs/rules.md#duplicate-batch).

    A batch of the entry's epoch whose exact sequence range a cached batch has. Returns how many
    applied batches before this one that batch is (0: the newest), -1 when none. The broker
    searches its NUM_BATCHES_TO_RETAIN cached batches; the audit searches the look-back, so a
    retry the broker no longer recognised is still named (the caller tells the two apart).
    """
    if epoch != e.epoch:
        return -1
    if e.ring_run >= e.ring_size:
        # The whole look-back is one rising run of one epoch (add_batch): every cached batch
        # starts at or below the newest's last sequence, so a batch of another epoch, or one
        # that starts above it, matches none. This is the common case, a producer writing on.
        newest = ring_slot(e, 0)
        if (
            e.ring_size == 0
            or e.ring_epoch[newest] != epoch
            or base_sequence > e.ring_last_sequence[newest]
        ):
            return -1
    return batch_with_sequence_range(e, epoch, base_sequence, last_sequence)


def batch_with_sequence_range(e, epoch, base_sequence, last_sequence):
    """ProducerStateEntry.batchWithSequenceRange over the look-back: the newest match, -1 if none.

    The look-back's slots of older epochs are not the entry's cache: each slot's epoch is compared.
    Every slot is compared, in storage order, and the newest match kept: a loop without early
    exits or modulo per step, which the compiler turns into vector compares.
    """
    found = -1
    for k in range(e.ring_size):
        if (
            (e.ring_base_sequence[k] == base_sequence)
            & (e.ring_last_sequence[k] == last_sequence)
            & (e.ring_epoch[k] == epoch)
        ):
            back = ring_slot(e, k)  # how many batches before the newest slot k was written
            if found < 0 or back < found:
                found = back
    return found


def last_sequence_of(e):
    """ProducerStateEntry.lastSeq: of the entry's epoch, -1 when none (the next batch starts at 0).

    A marker that raised the epoch emptied the cache (docs/rules.md#transactions).
    """
    if e.has_last_data and e.last_data_epoch == e.epoch:
        return e.last_data_sequence
    return -1


def is_expired(e, timestamp, expiration_ms):
    """ProducerStateManager.isProducerExpired, read from the log (docs/rules.md#producer-expiry).

    The producer's previous row is older than the expiration and the log shows no transaction open
    after it; both timestamps must be known.
    """
    return (
        e.has_rows
        and timestamp != NULL
        and e.previous_timestamp != NULL
        and timestamp - e.previous_timestamp >= expiration_ms
        and not e.log_txn_open
    )


# ------------------------------------------------------------------------------------------------
# The producer-epoch summary (producer_sessions table)
# ------------------------------------------------------------------------------------------------
def flush_summary(e, sessions, counts, tp_row, part):
    """Emit the producer epoch's summary, if one is open."""
    if not e.summary_open:
        return
    s = sessions[counts[PRODUCER_SESSIONS]]
    counts[PRODUCER_SESSIONS] += 1
    s.tp_row = tp_row
    s.partition = part.partition
    s.producer_id = e.producer_id
    s.producer_epoch = e.summary_epoch
    s.first_offset = e.summary_first_offset
    s.last_offset = e.summary_last_offset
    s.first_sequence_offset = e.summary_first_sequence_offset
    s.first_sequence = e.summary_first_sequence
    s.last_sequence_offset = e.summary_last_sequence_offset
    s.last_sequence = e.summary_last_sequence
    s.batches = e.summary_batches
    s.records = e.summary_records
    s.first_timestamp = e.summary_first_timestamp
    s.last_timestamp = e.summary_last_timestamp
    e.summary_open = False


def summarise(e, rows, i, timestamp, sessions, counts, part):
    """Count an audited row into its producer epoch's summary."""
    epoch = rows[i].producer_epoch
    if e.summary_open and e.summary_epoch != epoch:
        flush_summary(e, sessions, counts, i, part)
    if not e.summary_open:
        e.summary_open = True
        e.summary_epoch = epoch
        e.summary_first_offset = NULL
        e.summary_last_offset = NULL
        e.summary_first_sequence_offset = NULL
        e.summary_first_sequence = NULL
        e.summary_last_sequence_offset = NULL
        e.summary_last_sequence = NULL
        e.summary_batches = 0
        e.summary_records = NULL  # markers only: no records
        e.summary_first_timestamp = NULL
        e.summary_last_timestamp = NULL
    base_offset = rows[i].base_offset
    last_offset = rows[i].last_offset
    e.summary_batches += 1
    if e.summary_first_offset == NULL or base_offset < e.summary_first_offset:
        e.summary_first_offset = base_offset
    e.summary_last_offset = max_or_null(e.summary_last_offset, last_offset)
    if timestamp != NULL:
        if e.summary_first_timestamp == NULL or timestamp < e.summary_first_timestamp:
            e.summary_first_timestamp = timestamp
        e.summary_last_timestamp = max_or_null(e.summary_last_timestamp, timestamp)
    if not rows[i].is_control:
        if e.summary_records == NULL:
            e.summary_records = 0
        e.summary_records += record_estimate(rows, i)
        if rows[i].base_sequence >= 0:
            if (
                e.summary_first_sequence_offset == NULL
                or base_offset < e.summary_first_sequence_offset
            ):
                e.summary_first_sequence_offset = base_offset
                e.summary_first_sequence = rows[i].base_sequence
            last_sequence = rows[i].last_sequence
            if (
                e.summary_last_sequence_offset == NULL
                or last_offset > e.summary_last_sequence_offset
                or (
                    last_offset == e.summary_last_sequence_offset
                    and last_sequence > e.summary_last_sequence
                )
            ):
                e.summary_last_sequence_offset = last_offset
                e.summary_last_sequence = last_sequence


def record_estimate(rows, i):
    """Records of a batch; dump-log text without a count: the offsets it spans."""
    if rows[i].record_count != NULL:
        return rows[i].record_count
    return rows[i].last_offset - rows[i].base_offset + 1


# ------------------------------------------------------------------------------------------------
# The producer replay's scope
# ------------------------------------------------------------------------------------------------
def takes_part_in_replay(rows, i):
    """Whether the batch takes part in the producer replay (docs/rules.md#replay-scope).

    Batches with a producer id, magic 2 and a CRC that did not fail; a control batch with no
    records changes nothing.
    """
    if rows[i].producer_id < 0:
        return False
    if rows[i].magic != NULL and rows[i].magic < 2:
        return False
    if rows[i].crc_valid == 0:
        return False
    return not (rows[i].is_control and rows[i].record_count == 0)


# ------------------------------------------------------------------------------------------------
# Lookups by key, in plain arrays: open-addressing tables of int64 rows (key..., value), a value of
# -1 marking a free place. A table's capacity is a power of two at least twice what it indexes, so
# it is never more than half full and a probe always ends. A numba typed dict cost three hash
# lookups, about 100 ns, per row, and being reference-counted it kept the whole kernel under
# numba's runtime (every array argument counted on every call; see kernel_cache.compile_in_place).
# ------------------------------------------------------------------------------------------------
def slot_position(slots, producer_id):
    """Where the producer's (producer id, entry slot) row is in `slots`, or its free place."""
    mask = len(slots) - 1
    k = (producer_id ^ (producer_id >> 16)) & mask
    while slots[k, 1] != -1 and slots[k, 0] != producer_id:
        k = (k + 1) & mask
    return k


def find_slot(slots, producer_id):
    """The producer's entry slot in this partition, -1 when it has none."""
    return slots[slot_position(slots, producer_id), 1]


def index_slot(slots, producer_id, slot):
    """Record that the producer's entry is `slot`."""
    k = slot_position(slots, producer_id)
    slots[k, 0] = producer_id
    slots[k, 1] = slot


def reindex_slots(slots, entries, producers):
    """Fill an empty, larger `slots` with the first `producers` entries (the entries grew)."""
    for slot in range(producers):
        index_slot(slots, entries[slot].producer_id, slot)


def ack_position(ack_index, producer_id, producer_epoch, base_sequence):
    """Where a batch identity's row is in `ack_index`, or its free place.

    A row is (producer id, epoch, base sequence, the newest acknowledgement of that batch).
    """
    mask = len(ack_index) - 1
    k = (producer_id ^ (producer_id >> 16) ^ (base_sequence << 8) ^ (producer_epoch << 24)) & mask
    while ack_index[k, 3] != -1 and not (
        ack_index[k, 0] == producer_id
        and ack_index[k, 1] == producer_epoch
        and ack_index[k, 2] == base_sequence
    ):
        k = (k + 1) & mask
    return k


def index_ack(ack_index, acks, k):
    """Make acknowledgement k the newest of its batch identity; it links to the one before."""
    a = acks[k]
    position = ack_position(ack_index, a.producer_id, a.producer_epoch, a.base_sequence)
    a.next_same_batch = ack_index[position, 3]  # -1: the first of its batch
    ack_index[position, 0] = a.producer_id
    ack_index[position, 1] = a.producer_epoch
    ack_index[position, 2] = a.base_sequence
    ack_index[position, 3] = k


def reindex_acks(ack_index, acks, count):
    """Fill an empty, larger `ack_index` with the first `count` acknowledgements (acks grew)."""
    for k in range(count):
        index_ack(ack_index, acks, k)


def slot_of(slots, entries, part, producer_id):
    """The producer's entry slot; -1 when a new producer needs a slot and none is free."""
    slot = find_slot(slots, producer_id)
    if slot >= 0:
        return slot
    if part.producers >= len(entries):
        return -1
    slot = part.producers
    index_slot(slots, producer_id, slot)
    part.producers += 1
    new_entry(entries[slot], producer_id)
    return slot


# ------------------------------------------------------------------------------------------------
# ProducerAppendInfo's checks: an audited batch against the entry as it stands. A check changes
# no state; when it fails it emits the finding that stands for the leader's exception and says so.
# ------------------------------------------------------------------------------------------------
def is_client_append(rows, i):
    """Whether a data batch was a client's produce (AppendOrigin.CLIENT).

    Only client appends are deduplicated and sequence-checked. Coordinators write the topics
    `[topics] coordinator` names and the data batches with a producer id but no sequence
    (docs/rules.md#replay-scope).
    """
    return (
        not rows[i].is_control and rows[i].base_sequence >= 0 and not rows[i].is_coordinator_topic
    )


def check_producer_epoch(e, rows, i, part, findings, counts):
    """ProducerAppendInfo.checkProducerEpoch (docs/rules.md#fenced-producer-epoch).

    A data batch or marker below the entry's epoch is a fenced producer's: INVALID_PRODUCER_EPOCH
    at a leader. Returns whether it is.
    """
    if rows[i].producer_epoch >= e.epoch:
        return False
    f = finding_at(
        findings,
        counts,
        FENCED_PRODUCER_EPOCH,
        rows,
        i,
        part,
        NO_CAUSE,
        INVALID_PRODUCER_EPOCH,
        NULL,
        NULL,
    )
    f.facts[FACT_CURRENT_EPOCH] = e.epoch
    return True


def check_sequence(e, rows, i, part, params, findings, counts, expired):
    """ProducerAppendInfo.checkSequence: the batch's first sequence against the entry.

    Kafka's cases, which exclude each other: a producer without state (epoch -1) may start
    anywhere since 2.5 (docs/rules.md#unknown-producer); a new epoch must start at 0
    (docs/rules.md#new-epoch-nonzero-sequence); at the entry's epoch the batch must continue right
    after its last sequence (docs/rules.md#sequence-gap). Returns the code of the finding emitted
    when the batch is out of sequence, IN_SEQUENCE when it is not.
    """
    sequence = rows[i].base_sequence
    if e.epoch == -1:
        # No state: both of Kafka's branches accept any sequence. Older leaders did not
        # (params.unknown_producer_error); a producer starting above 0 is reported.
        if sequence == 0:
            return IN_SEQUENCE
        unknown_producer(
            e,
            rows,
            i,
            part,
            params,
            findings,
            counts,
            unknown_producer_cause(rows, i, part, expired),
        )
        return UNKNOWN_PRODUCER
    if rows[i].producer_epoch != e.epoch:
        # A new epoch (a higher one: check_producer_epoch passed) restarts the sequence at 0.
        if sequence == 0:
            return IN_SEQUENCE
        f = finding_at(
            findings,
            counts,
            NEW_EPOCH_NONZERO_SEQUENCE,
            rows,
            i,
            part,
            NO_CAUSE,
            OUT_OF_ORDER_SEQUENCE_NUMBER,
            0,
            NULL,
        )
        f.facts[FACT_CURRENT_EPOCH] = e.epoch
        return NEW_EPOCH_NONZERO_SEQUENCE
    if sequence != 0 and sequences_lost_below_log_start(e, part):
        # Its state came from markers only: judged as a producer without state
        # (docs/replay_semantics.md, "Verdict of a data batch" step 3a).
        unknown_producer(e, rows, i, part, params, findings, counts, LOG_START)
        return UNKNOWN_PRODUCER
    # inSequence(lastSeq, firstSeq): right after the last sequence, 0 after INT32_MAX, 0 when
    # the entry has none.
    last_sequence = last_sequence_of(e)
    expected = next_expected_sequence(last_sequence)
    if sequence == expected:
        return IN_SEQUENCE
    if explained_by_corrupt_batch(e, rows[i].producer_epoch, expected, sequence):
        return IN_SEQUENCE
    return out_of_order_sequence(e, rows, i, part, findings, counts, last_sequence, expected)


def out_of_order_sequence(e, rows, i, part, findings, counts, last_sequence, expected):
    """OUT_OF_ORDER_SEQUENCE_NUMBER at the entry's epoch: a reset, an overlap or a gap.

    Kafka's one error, told apart: docs/rules.md#sequence-reset, docs/rules.md#sequence-overlap,
    docs/rules.md#sequence-gap. Returns the code of the finding.
    """
    sequence = rows[i].base_sequence
    missing = (sequence - expected) % SEQUENCE_SPACE
    previous = e.last_data_offset if last_sequence != -1 else NULL
    coverage_end = e.last_data_coverage_end if last_sequence != -1 else NULL
    # LOG_START: what followed the batch that set last_sequence may precede the exported log.
    below_log_start = coverage_end != NULL and coverage_end < log_start_of(part)
    gap_cause = LOG_START if below_log_start else UNEXPLAINED
    if sequence == 0:
        f = finding_at(
            findings,
            counts,
            SEQUENCE_RESET,
            rows,
            i,
            part,
            gap_cause,
            OUT_OF_ORDER_SEQUENCE_NUMBER,
            expected,
            previous,
        )
        f.facts[FACT_STATE_LAST_SEQUENCE] = last_sequence
        return SEQUENCE_RESET
    if last_sequence >= 0 and missing >= SEQUENCE_SPACE // 2:
        # At or below the last sequence. The distance is taken modulo 2^31, so a batch just past
        # the wrap is a gap, not an overlap.
        f = finding_at(
            findings,
            counts,
            SEQUENCE_OVERLAP,
            rows,
            i,
            part,
            NO_CAUSE,
            OUT_OF_ORDER_SEQUENCE_NUMBER,
            expected,
            previous,
        )
        f.facts[FACT_STATE_LAST_SEQUENCE] = last_sequence
        return SEQUENCE_OVERLAP
    cause = COMPACTION if rows[i].is_compacted else gap_cause
    f = finding_at(
        findings,
        counts,
        SEQUENCE_GAP,
        rows,
        i,
        part,
        cause,
        OUT_OF_ORDER_SEQUENCE_NUMBER,
        expected,
        previous,
    )
    f.facts[FACT_STATE_LAST_SEQUENCE] = last_sequence
    f.facts[FACT_MISSING_SEQUENCES] = missing
    return SEQUENCE_GAP


def explained_by_corrupt_batch(e, epoch, expected, sequence):
    """Whether a batch that failed its CRC explains the gap (docs/rules.md#corrupt-batch).

    The missing sequences are exactly those it claimed, so the gap is that batch, already
    reported as CORRUPT_BATCH.
    """
    return (
        e.corrupt_claim
        and e.corrupt_epoch == epoch
        and e.corrupt_base_sequence == expected
        and next_expected_sequence(e.corrupt_last_sequence) == sequence
    )


def sequences_lost_below_log_start(e, part):
    """Whether the producer's last sequence lay in batches retention deleted.

    Since Kafka 2.4 (KAFKA-7190) a leader keeps a producer's state when the log start passes its
    batches (docs/rules.md#causes). When the producer's first retained rows are markers, which
    carry no sequence, the log holds no last sequence for it: with no seed and no data batch of
    the producer so far, on a log that starts above 0, its sequences are not known.
    """
    log_start = log_start_of(part)
    return not e.sequences_seen and log_start != NULL and log_start > 0


def unknown_producer_cause(rows, i, part, expired):
    """Why a producer without state starts above 0 (docs/rules.md#unknown-producer), first match."""
    if expired:
        return PRODUCER_EXPIRY
    log_start = log_start_of(part)
    if log_start != NULL and log_start > 0:
        return LOG_START
    if rows[i].is_compacted:
        return COMPACTION
    return UNEXPLAINED


def unknown_producer(e, rows, i, part, params, findings, counts, cause):
    """UNKNOWN_PRODUCER: a first batch with a sequence above 0 (docs/rules.md#unknown-producer)."""
    f = finding_at(
        findings,
        counts,
        UNKNOWN_PRODUCER,
        rows,
        i,
        part,
        cause,
        params.unknown_producer_error,
        0,
        e.previous_offset,
    )
    f.facts[FACT_LOG_START] = log_start_of(part)


def check_coordinator_epoch(e, rows, i, part, findings, counts):
    """ProducerAppendInfo.checkCoordinatorEpoch (docs/rules.md#coordinator-fenced).

    A marker from a coordinator older than the one that wrote the entry's last marker:
    TRANSACTION_COORDINATOR_FENCED at a leader. A marker whose record the export does not show
    has no coordinator epoch to check (docs/rules.md#transactions). Returns whether it is fenced.
    """
    coordinator_epoch = rows[i].coordinator_epoch
    if coordinator_epoch == NULL or coordinator_epoch >= e.coordinator_epoch:
        return False
    f = finding_at(
        findings,
        counts,
        COORDINATOR_FENCED,
        rows,
        i,
        part,
        NO_CAUSE,
        TRANSACTION_COORDINATOR_FENCED,
        NULL,
        NULL,
    )
    f.facts[FACT_COORDINATOR_EPOCH] = coordinator_epoch
    f.facts[FACT_COORDINATOR_EPOCH_SEEN] = e.coordinator_epoch
    return True


def validate_data_batch(e, rows, i, part, params, findings, counts, expired):
    """The checks of an audited data batch: at most one finding, the first check that fails.

    UnifiedLog.analyzeAndValidateProducerState (the duplicate) and ProducerAppendInfo's
    maybeValidateDataBatch and appendDataBatch (the epoch, the sequence, the transaction), in the
    order of docs/replay_semantics.md ("Verdict of a data batch"); Kafka looks for the duplicate
    first, which is the same since a duplicate has the entry's epoch. Returns whether the append
    is applied: a fenced batch or a duplicate leaves the entry as it was; every other batch is
    applied whatever its finding, as a broker loading the log applies it, so one lost batch gives
    one finding and not a cascade (even INVALID_TXN_STATE, which stops such a broker:
    docs/rules.md#invalid-txn-state).
    """
    if check_producer_epoch(e, rows, i, part, findings, counts):
        return False
    if is_client_append(rows, i):
        back = find_duplicate_batch(
            e, rows[i].producer_epoch, rows[i].base_sequence, rows[i].last_sequence
        )
        if back >= NUM_BATCHES_TO_RETAIN and rows[i].base_sequence == next_expected_sequence(
            last_sequence_of(e)
        ):
            # Out of a leader's cache, and the next sequence: the leader does not find it
            # (findDuplicateBatch searches its cached batches only) and accepts it, as after a
            # reset whose batches repeat ranges written before it (docs/replay_semantics.md,
            # step 2).
            back = -1
        if back >= 0:
            # Within the cached batches the leader answers with the original's offsets and no
            # error; an older repeat fails its sequence check (docs/rules.md#duplicate-batch).
            error = NO_ERROR if back < NUM_BATCHES_TO_RETAIN else OUT_OF_ORDER_SEQUENCE_NUMBER
            finding_at(
                findings,
                counts,
                DUPLICATE_BATCH,
                rows,
                i,
                part,
                NO_CAUSE,
                error,
                NULL,
                e.ring_base_offset[ring_slot(e, back)],
            )
            return False
        verdict = check_sequence(e, rows, i, part, params, findings, counts, expired)
        if verdict != IN_SEQUENCE:
            # A leader rejects an overlap without changing its state (checkSequence throws before
            # the update): the entry keeps its last sequence. Every other verdict is applied.
            return verdict != SEQUENCE_OVERLAP
    if e.txn_open and not rows[i].is_transactional:
        # appendDataBatch: non-transactional data while the producer's transaction is open
        # (docs/rules.md#invalid-txn-state)
        finding_at(
            findings,
            counts,
            INVALID_TXN_STATE,
            rows,
            i,
            part,
            NO_CAUSE,
            INVALID_TXN_STATE_ERROR,
            NULL,
            e.txn_first_offset,
        )
    return True


def validate_end_txn_marker(e, rows, i, part, findings, counts):
    """The checks of ProducerAppendInfo.appendEndTxnMarker: the producer epoch, the coordinator's.

    docs/replay_semantics.md, "Verdict of a marker". Returns whether the marker is applied: not
    when fenced; a coordinator-fenced marker is, as a broker loading the log applies it, so its
    coordinator epoch becomes the entry's (docs/rules.md#coordinator-fenced).
    """
    if check_producer_epoch(e, rows, i, part, findings, counts):
        return False
    check_coordinator_epoch(e, rows, i, part, findings, counts)
    return True


# ------------------------------------------------------------------------------------------------
# ProducerAppendInfo's updates: an applied append committed to the entry, as
# ProducerStateManager.update commits the `updatedEntry` of an accepted append
# ------------------------------------------------------------------------------------------------
def append_data_batch(e, rows, i, part, timestamp, coverage_end):
    """ProducerAppendInfo.appendDataBatch's update: addBatch, and the transaction a batch opens.

    `coverage_end` is where the log known to the state ends after the batch, which the LOG_START
    cause reads (docs/replay_semantics.md, "Causes and severity").
    """
    epoch = rows[i].producer_epoch
    if is_client_append(rows, i):
        add_batch(
            e,
            epoch,
            rows[i].base_sequence,
            rows[i].last_sequence,
            rows[i].base_offset,
            rows[i].last_offset,
            timestamp,
        )
        e.last_data_coverage_end = coverage_end
        e.sequences_seen = True
        e.corrupt_claim = False  # applied: the gap a corrupt batch explained is closed
    else:
        # A coordinator's append takes no cache slot here (docs/rules.md#replay-scope).
        maybe_update_producer_epoch(e, epoch)
        e.last_timestamp = timestamp
    if rows[i].is_transactional:
        if not e.txn_open:
            # The first transactional batch opens a transaction (docs/rules.md#transactions).
            e.txn_open = True
            e.txn_first_offset = rows[i].base_offset
            e.txn_first_last_offset = rows[i].last_offset
            e.txn_first_timestamp = timestamp
            e.txn_start_epoch = epoch
            e.txn_batches = 0
            e.txn_first_occurrence = part.occurrence
        e.txn_batches += 1


def append_end_txn_marker(e, rows, i, part, transactions, counts, timestamp):
    """ProducerAppendInfo.appendEndTxnMarker's update (docs/rules.md#transactions).

    The open transaction, if any, completes (Kafka's CompletedTxn, a `transactions` row); then
    updatedEntry.update(epoch, coordinatorEpoch, lastTimestamp).
    """
    if e.txn_open:
        close_transaction(e, rows, i, part, transactions, counts, timestamp)
    maybe_update_producer_epoch(e, rows[i].producer_epoch)
    e.txn_open = False
    e.txn_first_offset = NULL
    if rows[i].coordinator_epoch != NULL:  # a marker without its record keeps the entry's
        e.coordinator_epoch = rows[i].coordinator_epoch
    e.last_timestamp = timestamp


def marker_outcome(control_type):
    """A transaction's outcome from its marker: COMMIT, ABORT, or UNKNOWN.

    UNKNOWN when the export does not show the type (kafka-dump-log.sh without --deep-iteration,
    0.11-2.1 dumps, an undecodable control record) or shows one that is neither: the broker took
    the control batch as an end-transaction marker all the same (docs/rules.md#transactions).
    """
    if control_type == COMMIT or control_type == ABORT:  # noqa: SIM109 - plain ints compile best
        return control_type
    return UNKNOWN_OUTCOME


def close_transaction(e, rows, i, part, transactions, counts, timestamp):
    """The CompletedTxn appendEndTxnMarker returns: the open transaction, as a `transactions` row.

    See docs/rules.md#transactions.
    """
    t = transactions[counts[TRANSACTIONS]]
    counts[TRANSACTIONS] += 1
    t.tp_row = i
    t.partition = part.partition
    t.producer_id = e.producer_id
    t.start_epoch = e.txn_start_epoch
    t.end_epoch = rows[i].producer_epoch
    t.first_offset = e.txn_first_offset
    t.marker_offset = rows[i].base_offset
    t.outcome = marker_outcome(rows[i].control_type)
    t.hanging = False
    t.batches = e.txn_batches
    t.first_timestamp = e.txn_first_timestamp
    t.end_timestamp = timestamp
    if timestamp != NULL and e.txn_first_timestamp != NULL:
        t.duration_ms = timestamp - e.txn_first_timestamp
    else:
        t.duration_ms = NULL
    t.coordinator_epoch = rows[i].coordinator_epoch


def load_seed_state(e, rows, i, timestamp):
    """The seeded entry itself, as ProducerStateManager loads it from a snapshot.

    Its epoch, coordinator epoch, open transaction and last timestamp (docs/rules.md#seeded-state);
    its cached batches came before it, as data batches (append_data_batch).
    """
    maybe_update_producer_epoch(e, rows[i].producer_epoch)
    if rows[i].coordinator_epoch != NULL:
        e.coordinator_epoch = rows[i].coordinator_epoch
    if rows[i].value != NULL:
        e.txn_open = True
        e.txn_first_offset = rows[i].value
        e.txn_first_last_offset = NULL
        e.txn_first_timestamp = timestamp
        e.txn_start_epoch = rows[i].producer_epoch
        e.txn_batches = 0
        e.txn_first_occurrence = 0
    e.last_timestamp = timestamp


# ------------------------------------------------------------------------------------------------
# One producer row: UnifiedLog.analyzeAndValidateProducerState, then ProducerStateManager.update
# ------------------------------------------------------------------------------------------------
def replay_producer_row(
    rows,
    i,
    part,
    entries,
    slots,
    params,
    out_findings,
    out_transactions,
    out_producer_sessions,
    counts,
):
    """One row of a producer: an audited batch, or a seeded batch or entry.

    An audited batch as a leader appends it: an expired entry is forgotten first
    (ProducerStateManager.removeExpiredProducers), the batch is checked against the entry as it
    stands (`validate_*`), and only an applied batch changes the entry (`append_*`), as Kafka
    commits the `updatedEntry` of an accepted append. A seed is the broker's own state: loaded,
    not judged. Then what the log shows whatever the verdict: the producer's summary and what
    expiry reads.

    Returns False when the producer needs a slot and none is free (the caller grows the entries
    and calls again).
    """
    slot = slot_of(slots, entries, part, rows[i].producer_id)
    if slot < 0:
        return False
    e = entries[slot]
    kind = rows[i].kind
    timestamp = rows[i].timestamp if rows[i].timestamp >= 0 else NULL
    if kind == AUDITED:
        expired = is_expired(e, timestamp, params.expiration_ms)
        if expired:
            clear_entry_session(e)
        if rows[i].is_control:
            if validate_end_txn_marker(e, rows, i, part, out_findings, counts):
                append_end_txn_marker(e, rows, i, part, out_transactions, counts, timestamp)
        elif validate_data_batch(e, rows, i, part, params, out_findings, counts, expired):
            append_data_batch(e, rows, i, part, timestamp, rows[i].last_offset + 1)
        if not e.has_audited:
            e.has_audited = True
            part.audited_producers += 1
        summarise(e, rows, i, timestamp, out_producer_sessions, counts, part)
    else:
        e.sequences_seen = True  # a seed's state is the broker's, sequences or not
        if kind == SEED_STATE:
            load_seed_state(e, rows, i, timestamp)
        else:
            append_data_batch(e, rows, i, part, timestamp, rows[i].value)
    remember_log_row(e, rows, i, timestamp)
    return True


def remember_log_row(e, rows, i, timestamp):
    """What producer expiry reads from the log, whatever the verdict.

    The producer's previous row, and whether the log shows its transaction open after it
    (docs/rules.md#producer-expiry).
    """
    e.has_rows = True
    e.previous_timestamp = timestamp
    if rows[i].kind == SEED_STATE:
        e.previous_offset = NULL
        if rows[i].value != NULL:
            e.log_txn_open = True
    else:
        e.previous_offset = rows[i].base_offset
        if rows[i].is_control:
            e.log_txn_open = False
        elif rows[i].is_transactional:
            e.log_txn_open = True


def remember_corrupt_claim(rows, i, entries, slots):
    """Keep the sequences a corrupt batch claims for its producer (docs/rules.md#corrupt-batch).

    Only for a producer already known: an untrusted header must not create state.
    """
    producer_id = rows[i].producer_id
    if producer_id < 0 or rows[i].base_sequence < 0 or rows[i].is_control:
        return
    slot = find_slot(slots, producer_id)
    if slot < 0:
        return
    e = entries[slot]
    epoch = rows[i].producer_epoch
    base_sequence = rows[i].base_sequence
    extends = (
        e.corrupt_claim
        and e.corrupt_epoch == epoch
        and next_expected_sequence(e.corrupt_last_sequence) == base_sequence
    )
    if not extends:
        e.corrupt_claim = True
        e.corrupt_epoch = epoch
        e.corrupt_base_sequence = base_sequence
    e.corrupt_last_sequence = rows[i].last_sequence


# ------------------------------------------------------------------------------------------------
# The partition: UnifiedLog's checks of the log itself
# ------------------------------------------------------------------------------------------------
def begin_partition(part, partition):
    """A new (topic, partition): nothing known yet."""
    part.active = True
    part.partition = partition
    part.first_offset = NULL
    part.max_last_offset = NULL
    part.max_leader_epoch = NULL
    part.log_start_checkpoint = NULL
    part.high_watermark = NULL
    part.epoch_entry_epoch = NULL
    part.epoch_entry_start = NULL
    part.primary_base_offset = NULL
    part.previous_base_offset = NULL
    part.occurrence = 0
    part.previous_ack_offset = NULL
    part.ack_occurrence = 0
    part.batches = 0
    part.replica_batches = 0
    part.batches_with_producer_id = 0
    part.records = 0
    part.max_timestamp = NULL
    part.latest_timestamp = NULL
    part.producers = 0
    part.audited_producers = 0
    part.acks = 0
    part.covered_end = NULL
    part.skipped_batches = 0


def already_in_state(rows, i, part):
    """A batch below the offset the seeded state covers: replayed by an earlier run already.

    What LogLoader does when it loads a producer-state snapshot: only the log above the snapshot's
    offset is replayed on top of it (docs/rules.md#seeded-state, --since-state).
    """
    if part.covered_end == NULL or rows[i].base_offset >= part.covered_end:
        return False
    part.skipped_batches += 1
    return True


def count_occurrence(part, base_offset):
    """How many earlier log rows start at this offset: keeps finding ids unique."""
    if part.previous_base_offset != NULL and part.previous_base_offset == base_offset:
        part.occurrence += 1
    else:
        part.occurrence = 0
    part.previous_base_offset = base_offset


def is_same_batch(rows, i, part):
    """Whether row i has the header of the audited batch at its base offset.

    The header a batch is told by: offsets, producer id, epoch, base sequence, control and
    transactional bits, record count (docs/rules.md#replica-divergence compares the same).
    """
    return (
        part.primary_base_offset != NULL
        and part.primary_base_offset == rows[i].base_offset
        and part.primary_last_offset == rows[i].last_offset
        and part.primary_producer_id == rows[i].producer_id
        and part.primary_producer_epoch == rows[i].producer_epoch
        and part.primary_base_sequence == rows[i].base_sequence
        and part.primary_is_control == rows[i].is_control
        and part.primary_is_transactional == rows[i].is_transactional
        and part.primary_record_count == rows[i].record_count
    )


def check_audited_batch(rows, i, part, findings, counts):
    """The checks of a batch of the audited replica that need no producer state."""
    base_offset = rows[i].base_offset
    leader_epoch = rows[i].leader_epoch
    magic = rows[i].magic
    has_leader_epoch = (magic == NULL or magic >= 2) and leader_epoch != NULL and leader_epoch >= 0
    if part.max_last_offset != NULL and base_offset <= part.max_last_offset:
        # docs/rules.md#offset-overlap: against the highest earlier last offset, so a batch
        # overlapping any earlier batch is found.
        finding_at(
            findings,
            counts,
            OFFSET_OVERLAP,
            rows,
            i,
            part,
            NO_CAUSE,
            NO_ERROR,
            NULL,
            part.max_last_offset,
        )
    elif (
        part.max_last_offset != NULL
        and base_offset > part.max_last_offset + 1
        and (magic == NULL or magic >= 2)
    ):
        # docs/rules.md#offset-gap: a leader assigns every offset from its log end, markers
        # included, so only the cleaner (or a lost segment) leaves a hole. A v0/v1 entry's base
        # offset is not the first of its records, so only v2 batches are judged.
        if rows[i].follows_quarantined:
            cause = QUARANTINED_BATCH
        elif rows[i].is_compacted:
            cause = COMPACTION
        else:
            cause = UNEXPLAINED
        f = finding_at(
            findings, counts, OFFSET_GAP, rows, i, part, cause, NO_ERROR, NULL, part.max_last_offset
        )
        f.facts[FACT_FIRST_MISSING_OFFSET] = part.max_last_offset + 1
        f.facts[FACT_LAST_MISSING_OFFSET] = base_offset - 1
    if has_leader_epoch and part.max_leader_epoch != NULL and leader_epoch < part.max_leader_epoch:
        # docs/rules.md#leader-epoch-regression
        f = finding_at(
            findings, counts, LEADER_EPOCH_REGRESSION, rows, i, part, NO_CAUSE, NO_ERROR, NULL, NULL
        )
        f.facts[FACT_MAX_LEADER_EPOCH] = part.max_leader_epoch
        f.facts[FACT_LEADER_EPOCH] = leader_epoch
    if (
        has_leader_epoch
        and part.epoch_entry_epoch != NULL
        and leader_epoch != part.epoch_entry_epoch
    ):
        # docs/rules.md#leader-epoch-mismatch: the checkpoint entry in force at this offset
        f = finding_at(
            findings,
            counts,
            LEADER_EPOCH_MISMATCH,
            rows,
            i,
            part,
            NO_CAUSE,
            NO_ERROR,
            NULL,
            part.epoch_entry_start,
        )
        f.facts[FACT_CHECKPOINT_EPOCH] = part.epoch_entry_epoch
        f.facts[FACT_LEADER_EPOCH] = leader_epoch
    if rows[i].crc_valid == 0:
        # DefaultRecordBatch.ensureValid (docs/rules.md#corrupt-batch)
        finding_at(
            findings, counts, CORRUPT_BATCH, rows, i, part, NO_CAUSE, CORRUPT_MESSAGE, NULL, NULL
        )
    if has_leader_epoch:
        part.max_leader_epoch = max_or_null(part.max_leader_epoch, leader_epoch)


def count_audited_batch(rows, i, part):
    """The partition's statistics and the audited replica's latest batch."""
    part.max_last_offset = max_or_null(part.max_last_offset, rows[i].last_offset)
    part.batches += 1
    if rows[i].producer_id >= 0:
        part.batches_with_producer_id += 1
    part.records += record_estimate(rows, i)
    part.max_timestamp = max_or_null(part.max_timestamp, rows[i].timestamp)
    if rows[i].timestamp != NULL and rows[i].timestamp >= 0:
        part.latest_timestamp = max_or_null(part.latest_timestamp, rows[i].timestamp)
    part.primary_base_offset = rows[i].base_offset
    part.primary_last_offset = rows[i].last_offset
    part.primary_producer_id = rows[i].producer_id
    part.primary_producer_epoch = rows[i].producer_epoch
    part.primary_base_sequence = rows[i].base_sequence
    part.primary_is_control = rows[i].is_control
    part.primary_is_transactional = rows[i].is_transactional
    part.primary_record_count = rows[i].record_count


def check_replica_batch(rows, i, part, findings, counts):
    """Compare another replica's batch with the audited one (docs/rules.md#replica-divergence).

    Below the high watermark every replica holds the same batches, so it must match the audited
    batch starting at its offset.
    """
    part.replica_batches += 1
    base_offset = rows[i].base_offset
    if part.high_watermark != NULL and base_offset >= part.high_watermark:
        return
    same_start = part.primary_base_offset != NULL and part.primary_base_offset == base_offset
    if same_start:
        differs = not is_same_batch(rows, i, part)
    else:
        # no audited batch starts here although one covers this offset
        differs = part.max_last_offset != NULL and part.max_last_offset >= base_offset
    if not differs:
        return
    f = finding_at(
        findings,
        counts,
        REPLICA_DIVERGENCE,
        rows,
        i,
        part,
        NO_CAUSE,
        NO_ERROR,
        NULL,
        part.primary_base_offset,
    )
    if part.primary_base_offset != NULL:
        f.facts[FACT_PRIMARY_LAST_OFFSET] = part.primary_last_offset
        f.facts[FACT_PRIMARY_PRODUCER_ID] = part.primary_producer_id
        f.facts[FACT_PRIMARY_BASE_SEQUENCE] = part.primary_base_sequence
    f.facts[FACT_HIGH_WATERMARK] = part.high_watermark


# ------------------------------------------------------------------------------------------------
# Client acknowledgements (docs/rules.md#acked-write-lost): registered before the log, matched
# against its batches, judged at the end of the partition.
# ------------------------------------------------------------------------------------------------
def register_ack(rows, i, part, acks, ack_index, counts):
    """Remember an acknowledgement until the end of its partition.

    Returns False when the acknowledgement array is full (the caller grows it).
    """
    if part.acks >= len(acks):
        return False
    offset = rows[i].base_offset
    if part.previous_ack_offset != NULL and part.previous_ack_offset == offset:
        part.ack_occurrence += 1
    else:
        part.ack_occurrence = 0
    part.previous_ack_offset = offset
    k = part.acks
    part.acks += 1
    a = acks[k]
    a.producer_id = rows[i].producer_id
    a.producer_epoch = rows[i].producer_epoch
    a.base_sequence = rows[i].base_sequence
    a.last_sequence = rows[i].last_sequence
    a.offset = offset
    a.last_offset = rows[i].last_offset
    a.acknowledged_ms = rows[i].value
    a.occurrence = part.ack_occurrence
    a.ordinal = counts[ACKS_SEEN]
    counts[ACKS_SEEN] += 1
    a.log_batches = 0
    a.log_min_offset = NULL
    a.log_has_exact = False
    index_ack(ack_index, acks, k)
    return True


def match_acks(rows, i, part, acks, ack_index):
    """An audited batch with a batch identity: count it for the acknowledgements of that batch."""
    if part.acks == 0 or rows[i].producer_id < 0 or rows[i].base_sequence < 0:
        return  # most audits have no acknowledgements: no key to hash
    k = ack_index[
        ack_position(ack_index, rows[i].producer_id, rows[i].producer_epoch, rows[i].base_sequence),
        3,
    ]
    base_offset = rows[i].base_offset
    while k >= 0:
        a = acks[k]
        a.log_batches += 1
        if a.log_min_offset == NULL or base_offset < a.log_min_offset:
            a.log_min_offset = base_offset
        if base_offset == a.offset:
            a.log_has_exact = True
        k = a.next_same_batch


def judge_acks(part, acks, findings, counts, tp_row, is_compacted):
    """ACKED_WRITE_LOST and ACKED_OFFSET_MISMATCH for the checkable acknowledgements.

    Checkable: inside [log start, log end) of the exported log (below it retention deleted it,
    at or past its end it was made after the export).
    """
    if part.batches == 0:
        return
    log_start = log_start_of(part)
    log_end = part.max_last_offset + 1
    for k in range(part.acks):
        a = acks[k]
        if a.producer_id < 0 or a.base_sequence < 0:
            continue
        if a.offset < log_start or a.offset >= log_end:
            continue
        if a.log_batches == 0:
            f = finding_without_row(findings, counts, ACKED_WRITE_LOST, tp_row, part)
            f.cause = COMPACTION if is_compacted else UNEXPLAINED
            f.facts[FACT_LOG_START_OFFSET] = log_start
            f.facts[FACT_LOG_END_OFFSET] = log_end
        elif not a.log_has_exact:
            f = finding_without_row(findings, counts, ACKED_OFFSET_MISMATCH, tp_row, part)
            f.previous_offset = a.log_min_offset
            f.facts[FACT_LOG_BATCHES] = a.log_batches
        else:
            continue
        f.producer_id = a.producer_id
        f.producer_epoch = a.producer_epoch
        f.base_offset = a.offset
        f.last_offset = a.last_offset
        f.base_sequence = a.base_sequence
        f.last_sequence = a.last_sequence
        f.timestamp = a.acknowledged_ms
        f.occurrence = a.occurrence
        f.ack_ordinal = a.ordinal
        f.facts[FACT_ACKNOWLEDGED_MS] = a.acknowledged_ms


# ------------------------------------------------------------------------------------------------
# The end of a partition: what is still open, the summaries and the final producer state
# ------------------------------------------------------------------------------------------------
def room_to_finish(part):
    """Events the end of the partition may emit into any one output."""
    return part.producers + part.acks + 2


def finish_partition(
    part,
    entries,
    slots,
    acks,
    ack_index,
    params,
    out_findings,
    out_transactions,
    out_producer_sessions,
    out_partition_summary,
    out_producer_state,
    counts,
    tp_row,
    is_compacted,
):
    """Emit the partition's end-of-log records and forget its state."""
    judge_acks(part, acks, out_findings, counts, tp_row, is_compacted)
    clock = params.as_of_ms if params.as_of_ms != NULL else part.latest_timestamp
    log_end = part.max_last_offset + 1 if part.max_last_offset != NULL else NULL
    # With --since-state the seeded state may cover more than this export holds.
    log_end = max_or_null(log_end, part.covered_end)
    for slot in range(part.producers):
        e = entries[slot]
        flush_summary(e, out_producer_sessions, counts, tp_row, part)
        if e.txn_open and e.has_audited:
            emit_open_transaction(
                e, part, out_findings, out_transactions, counts, tp_row, clock, params
            )
        emit_final_state(e, part, out_producer_state, counts, tp_row, log_end)
    if part.batches + part.replica_batches + part.skipped_batches > 0:
        p = out_partition_summary[counts[PARTITION_SUMMARY]]
        counts[PARTITION_SUMMARY] += 1
        p.tp_row = tp_row
        p.partition = part.partition
        p.first_offset = part.first_offset
        p.last_offset = part.max_last_offset
        p.batches = part.batches
        p.replica_batches = part.replica_batches
        p.batches_with_producer_id = part.batches_with_producer_id
        p.records = part.records if part.batches > 0 else NULL
        p.max_timestamp = part.max_timestamp
        p.producers = part.audited_producers
        p.batches_skipped = part.skipped_batches
    slots[:, 1] = -1
    if part.acks > 0:
        ack_index[:, 3] = -1
    part.active = False


def emit_open_transaction(e, part, findings, transactions, counts, tp_row, clock, params):
    """An OPEN transaction, and HANGING_TRANSACTION when it is too old.

    Too old: older than the transaction timeout plus the broker's grace
    (docs/rules.md#hanging-transaction).
    """
    age = NULL
    if clock != NULL and e.txn_first_timestamp != NULL:
        age = clock - e.txn_first_timestamp
    hanging = age != NULL and age > params.hanging_after_ms
    t = transactions[counts[TRANSACTIONS]]
    counts[TRANSACTIONS] += 1
    t.tp_row = tp_row
    t.partition = part.partition
    t.producer_id = e.producer_id
    t.start_epoch = e.txn_start_epoch
    t.end_epoch = NULL
    t.first_offset = e.txn_first_offset
    t.marker_offset = NULL
    t.outcome = OPEN
    t.hanging = hanging
    t.batches = e.txn_batches
    t.first_timestamp = e.txn_first_timestamp
    t.end_timestamp = NULL
    t.duration_ms = age
    t.coordinator_epoch = NULL
    if hanging:
        f = finding_without_row(findings, counts, HANGING_TRANSACTION, tp_row, part)
        f.producer_id = e.producer_id
        f.producer_epoch = e.txn_start_epoch
        f.base_offset = e.txn_first_offset
        f.last_offset = (
            e.txn_first_last_offset if e.txn_first_last_offset != NULL else e.txn_first_offset
        )
        f.previous_offset = e.txn_first_offset
        f.timestamp = e.txn_first_timestamp
        f.occurrence = e.txn_first_occurrence
        f.facts[FACT_AGE_MS] = age
        f.facts[FACT_FIRST_OFFSET] = e.txn_first_offset
        f.facts[FACT_MEASURED_AT_EXPORT] = 1 if params.as_of_ms != NULL else 0


def emit_final_state(e, part, states, counts, tp_row, log_end):
    """The entry as a broker would snapshot it: a producer_state row that seeds the next run."""
    s = states[counts[PRODUCER_STATE]]
    counts[PRODUCER_STATE] += 1
    s.tp_row = tp_row
    s.partition = part.partition
    s.producer_id = e.producer_id
    s.producer_epoch = e.epoch
    s.coordinator_epoch = e.coordinator_epoch if e.coordinator_epoch >= 0 else NULL
    s.txn_first_offset = e.txn_first_offset if e.txn_open else NULL
    s.last_timestamp = e.last_timestamp
    s.state_offset = log_end
    # The cache: the newest NUM_BATCHES_TO_RETAIN batches of the current epoch, oldest first.
    cached = 0
    for back in range(min(e.ring_size, NUM_BATCHES_TO_RETAIN)):
        if e.ring_epoch[ring_slot(e, back)] != e.epoch:
            break
        cached += 1
    s.cached = cached
    for j in range(NUM_BATCHES_TO_RETAIN):
        if j < cached:
            k = ring_slot(e, cached - 1 - j)
            s.base_sequence[j] = e.ring_base_sequence[k]
            s.last_sequence[j] = e.ring_last_sequence[k]
            s.base_offset[j] = e.ring_base_offset[k]
            s.last_offset[j] = e.ring_last_offset[k]
        else:
            s.base_sequence[j] = NULL
            s.last_sequence[j] = NULL
            s.base_offset[j] = NULL
            s.last_offset[j] = NULL


# ------------------------------------------------------------------------------------------------
# The loop
# ------------------------------------------------------------------------------------------------
def has_room(
    counts,
    out_findings,
    out_transactions,
    out_producer_sessions,
    out_partition_summary,
    out_producer_state,
    room,
):
    """Whether every output has room for `room` more events."""
    return (
        len(out_findings) - counts[FINDINGS] >= room
        and len(out_transactions) - counts[TRANSACTIONS] >= room
        and len(out_producer_sessions) - counts[PRODUCER_SESSIONS] >= room
        and len(out_partition_summary) - counts[PARTITION_SUMMARY] >= room
        and len(out_producer_state) - counts[PRODUCER_STATE] >= room
    )


def replay(
    rows,
    start,
    previous_compacted,
    params,
    partition_state,
    entries,
    slots,
    acks,
    ack_index,
    out_findings,
    out_transactions,
    out_producer_sessions,
    out_partition_summary,
    out_producer_state,
    counts,
):
    """Replay rows[start:] of one Arrow batch; state carries over to the next batch.

    Returns the index of the first row not replayed: the number of rows when all were, else the
    row at which an output, the producer entries or the acknowledgements ran out of room
    (`counts[ROOM_NEEDED]` says how much output room it needs); the caller drains or grows them
    and calls again from there.
    """
    part = partition_state[0]
    n = len(rows)
    for i in range(start, n):
        room = ROW_ROOM
        if rows[i].tp_start and part.active:
            room += room_to_finish(part)
        if not has_room(
            counts,
            out_findings,
            out_transactions,
            out_producer_sessions,
            out_partition_summary,
            out_producer_state,
            room,
        ):
            counts[ROOM_NEEDED] = room
            return i
        if rows[i].tp_start:
            if part.active:
                compacted = rows[i - 1].is_compacted if i > 0 else previous_compacted
                finish_partition(
                    part,
                    entries,
                    slots,
                    acks,
                    ack_index,
                    params,
                    out_findings,
                    out_transactions,
                    out_producer_sessions,
                    out_partition_summary,
                    out_producer_state,
                    counts,
                    i - 1,
                    compacted,
                )
            begin_partition(part, rows[i].partition)
            part.first_ack_ordinal = counts[ACKS_SEEN]
        kind = rows[i].kind
        if kind == LOG_START_CHECKPOINT:
            part.log_start_checkpoint = max_or_null(part.log_start_checkpoint, rows[i].value)
        elif kind == HIGH_WATERMARK_CHECKPOINT:
            part.high_watermark = max_or_null(part.high_watermark, rows[i].value)
        elif kind == ACK:
            if not register_ack(rows, i, part, acks, ack_index, counts):
                counts[ROOM_NEEDED] = 0
                return i
        elif kind == SEED_BATCH or kind == SEED_STATE:  # noqa: SIM109 - plain ints compile best
            if not replay_producer_row(
                rows,
                i,
                part,
                entries,
                slots,
                params,
                out_findings,
                out_transactions,
                out_producer_sessions,
                counts,
            ):
                counts[ROOM_NEEDED] = 0
                return i
        elif kind == STATE_COVERAGE:
            part.covered_end = max_or_null(part.covered_end, rows[i].value)
        elif kind == LEADER_EPOCH_ENTRY:
            part.epoch_entry_epoch = rows[i].value
            part.epoch_entry_start = rows[i].base_offset
        elif kind == AUDITED:
            if already_in_state(rows, i, part):
                continue
            if (
                part.producers >= len(entries)
                and takes_part_in_replay(rows, i)
                and find_slot(slots, rows[i].producer_id) < 0
            ):
                counts[ROOM_NEEDED] = 0
                return i
            if part.first_offset == NULL:
                part.first_offset = rows[i].base_offset  # the exported log starts here
            count_occurrence(part, rows[i].base_offset)
            if is_same_batch(rows, i, part):
                # The export holds the batch before it twice (ties are ordered by every field,
                # so the copies are adjacent). A log holds one batch at an offset: this is a
                # bad export (OFFSET_OVERLAP), not a second write of the batch's records, and
                # the copy is not replayed again (docs/replay_semantics.md, Scope).
                finding_at(
                    out_findings,
                    counts,
                    OFFSET_OVERLAP,
                    rows,
                    i,
                    part,
                    NO_CAUSE,
                    NO_ERROR,
                    NULL,
                    part.max_last_offset,
                )
            else:
                check_audited_batch(rows, i, part, out_findings, counts)
                if takes_part_in_replay(rows, i):
                    replay_producer_row(
                        rows,
                        i,
                        part,
                        entries,
                        slots,
                        params,
                        out_findings,
                        out_transactions,
                        out_producer_sessions,
                        counts,
                    )
                elif rows[i].crc_valid == 0:
                    remember_corrupt_claim(rows, i, entries, slots)
                match_acks(rows, i, part, acks, ack_index)
            count_audited_batch(rows, i, part)
        elif kind == REPLICA:
            if already_in_state(rows, i, part):
                continue
            count_occurrence(part, rows[i].base_offset)
            check_replica_batch(rows, i, part, out_findings, counts)
    return n


def finish(
    partition_state,
    entries,
    slots,
    acks,
    ack_index,
    params,
    out_findings,
    out_transactions,
    out_producer_sessions,
    out_partition_summary,
    out_producer_state,
    counts,
    tp_row,
    is_compacted,
):
    """The end of the input: finish the partition being replayed.

    Returns False when the outputs lack room (`counts[ROOM_NEEDED]` says how much).
    """
    part = partition_state[0]
    if not part.active:
        return True
    room = room_to_finish(part)
    if not has_room(
        counts,
        out_findings,
        out_transactions,
        out_producer_sessions,
        out_partition_summary,
        out_producer_state,
        room,
    ):
        counts[ROOM_NEEDED] = room
        return False
    finish_partition(
        part,
        entries,
        slots,
        acks,
        ack_index,
        params,
        out_findings,
        out_transactions,
        out_producer_sessions,
        out_partition_summary,
        out_producer_state,
        counts,
        tp_row,
        is_compacted,
    )
    return True


KERNEL_FUNCTIONS = [
    name
    for name, value in list(globals().items())
    if callable(value) and getattr(value, "__module__", None) == __name__
]
# What every row calls with arrays among its arguments. Compiled as functions of their own, each
# call copied the descriptor of every array it was passed (7 words each) onto the stack, and the
# calls of a row passed about 200 words: that was more than half the kernel's time. numba inlines
# these into their callers instead (measured on 100,000 rows of 40 producers: 85 ns a row before,
# 35-40 after; a process compiles the kernel in 14-15.5 s instead of 10). Helpers that take only
# scalars and records (passed as one pointer) are left to LLVM, which inlines the small ones.
INLINED_PER_ROW = frozenset({
    "has_room", "already_in_state", "takes_part_in_replay", "find_slot", "slot_position",
    "slot_of", "check_audited_batch", "replay_producer_row", "match_acks", "count_audited_batch",
    "is_client_append", "validate_data_batch", "validate_end_txn_marker", "check_producer_epoch",
    "check_sequence", "check_coordinator_epoch", "append_data_batch", "append_end_txn_marker",
    "remember_log_row", "summarise", "record_estimate", "is_same_batch", "find_duplicate_batch",
})  # fmt: skip


def _compile() -> None:
    """Replace every kernel function by its numba-compiled version, in place.

    Compiled functions call each other through this module's globals, so compiling them here,
    after all are defined, compiles the whole kernel as one program (`kernel_cache`, which also
    compiles the segment reader's walk). `EOS_AUDIT_JIT=0` (or numba missing) keeps the plain
    Python, which is what the unit tests of the state machine exercise.
    """
    try:
        from eos_audit.replay.kernel_cache import compile_in_place
    except (ImportError, AttributeError):  # no numba (replay.runner says so once), or another's
        return
    compile_in_place(globals(), KERNEL_FUNCTIONS, INLINED_PER_ROW)


COMPILED = False
_compile()
COMPILED = KERNEL_FUNCTIONS != [] and hasattr(globals()["replay"], "py_func")
