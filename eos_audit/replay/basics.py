"""The replay kernel's constants and its smallest helpers.

The finding codes, causes, Kafka errors, row kinds and the wire's field readers, as module-level
ints and tuples: numba compiles a module's ints as constants, so the compiled kernel compares
plain numbers. Every module of the kernel (`replay.kernel` lists them) reads them from here.
"""

from __future__ import annotations

from eos_audit.findings import (
    REGISTRY,
    Cause,
    KafkaError,
)
from eos_audit.replay import wire
from eos_audit.replay.state import (
    COUNT_OF,
    INT32_MAX,
    NULL,
)
from eos_audit.replay.wire import (
    ControlType,
    RowKind,
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


# The wire's fields (wire.BIT_FIELDS) as module-level ints and tuples, which numba compiles as
# constants: each value's reader (wire.BitField.reader) and the header bit that says it is null.
KIND = wire.BIT_FIELDS["kind"].reader
CRC_VALID = wire.BIT_FIELDS["crc_valid"].reader
TRANSACTIONAL_BIT = wire.BIT_FIELDS["is_transactional"].bit
CONTROL_BIT = wire.BIT_FIELDS["is_control"].bit
FOLLOWS_QUARANTINED_BIT = wire.BIT_FIELDS["follows_quarantined"].bit
BELOW_SNAPSHOT_BIT = wire.BIT_FIELDS["below_snapshot"].bit
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


def min_or_null(current, value):
    """The smaller of two optional values (NULL is absent)."""
    if value == NULL:
        return current
    if current == NULL or value < current:
        return value
    return current


def log_start_of(part):
    """The exported log's start: its first offset, or a higher log-start checkpoint.

    docs/rules.md#causes: DeleteRecords and retention move the log start above the first segment.
    """
    return max_or_null(part.first_offset, part.log_start_checkpoint)
