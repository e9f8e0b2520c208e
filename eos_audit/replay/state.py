"""The state the replay keeps, declared once, as NumPy record types the compiled kernel shares.

Each record type is named after its Kafka counterpart and documented field by field. A record
array is what both the compiled kernel (numba) and plain Python index: `entries[slot].epoch`.
Integers that may be absent hold `NULL` (the smallest int64), because compiled code has no None.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from eos_audit.findings import FACTS_PER_FINDING

NULL = np.iinfo(np.int64).min  # "no value" in every int64 field and output column
# Sequences are int32 and wrap from INT32_MAX to 0 (docs/rules.md#sequence-gap).
INT32_MAX = 2_147_483_647
SEQUENCE_SPACE = 2_147_483_648
# ProducerStateEntry.NUM_BATCHES_TO_RETAIN (docs/rules.md#duplicate-batch).
NUM_BATCHES_TO_RETAIN = 5
# How many applied data batches of a producer's session the duplicate rule looks back over: the
# broker's 5 and more, bounded so that memory grows with producers, never with batches
# (docs/rules.md#duplicate-batch).
DUPLICATE_LOOKBACK = 64

# One replay row as the kernel reads it (`rows[i].base_offset`): the fields of `wire.REPLAY_SCHEMA`
# it reads, unpacked from the wire, plus what the runner derives per row. One record array per
# Arrow batch, not one array per field: compiled, every array handed to a function is reference
# counted on each call, and a row of 21 separate arrays made the counting most of the kernel's
# time (measured: 1.5 us a row against 0.37 us as one record array).
REPLAY_ROW = np.dtype(
    [
        ("position", np.int64),  # its index in the Arrow batch: a finding names its row by it
        ("tp_start", np.bool_),  # the first row of a (topic, partition)
        ("kind", np.int64),  # wire.RowKind
        ("partition", np.int64),
        ("base_offset", np.int64),
        ("last_offset", np.int64),
        ("producer_id", np.int64),
        ("producer_epoch", np.int64),
        ("base_sequence", np.int64),
        ("last_sequence", np.int64),
        ("record_count", np.int64),
        ("is_transactional", np.bool_),
        ("is_control", np.bool_),
        ("control_type", np.int64),  # wire.ControlType
        ("coordinator_epoch", np.int64),
        ("leader_epoch", np.int64),
        ("magic", np.int64),
        ("timestamp", np.int64),
        ("crc_valid", np.int64),  # 1 valid, 0 failed, -1 not checked
        ("value", np.int64),  # per kind: see wire.REPLAY_SCHEMA
        ("is_compacted", np.bool_),  # its topic matches [topics] compacted
        ("is_coordinator_topic", np.bool_),  # its topic matches [topics] coordinator
        ("follows_quarantined", np.bool_),  # quarantined rows of its partition came right before
        ("below_snapshot", np.bool_),  # the seeded state holds it already (runner.below_snapshot)
    ],
    align=True,
)

# ProducerStateEntry (docs/rules.md#producer-state-entry), one per producer id of the partition
# being replayed, plus what the audit needs beside the broker's fields.
PRODUCER_STATE_ENTRY = np.dtype(
    [
        ("producer_id", np.int64),
        # -- the broker's entry, for the current session (an expiry starts a new one) --
        ("epoch", np.int64),  # producerEpoch: highest epoch of the session's rows, -1 if none
        ("coordinator_epoch", np.int64),  # of the last applied marker (or the seed), -1 if none
        ("txn_open", np.bool_),  # currentTxnFirstOffset is set
        ("txn_first_offset", np.int64),  # currentTxnFirstOffset
        ("last_timestamp", np.int64),  # lastTimestamp: of the last applied row
        # batchMetadata and the duplicate look-back: the last DUPLICATE_LOOKBACK applied data
        # batches with sequences, in a ring (the newest at ring_next - 1); the broker's cache is
        # the newest NUM_BATCHES_TO_RETAIN of them.
        ("ring_size", np.int64),
        ("ring_next", np.int64),
        # How many of the newest cached batches form one rising run: one epoch, no batch wrapping
        # past INT32_MAX, each starting above the last sequence of the one before. When the run
        # is the whole ring, a batch of another epoch, or starting above the newest's last
        # sequence, repeats none of them (kernel.find_duplicate_batch skips the scan).
        ("ring_run", np.int64),
        ("ring_epoch", np.int64, (DUPLICATE_LOOKBACK,)),
        ("ring_base_sequence", np.int64, (DUPLICATE_LOOKBACK,)),
        ("ring_last_sequence", np.int64, (DUPLICATE_LOOKBACK,)),
        ("ring_base_offset", np.int64, (DUPLICATE_LOOKBACK,)),
        ("ring_last_offset", np.int64, (DUPLICATE_LOOKBACK,)),
        # lastSeq of the most recent applied data batch of the session, with its epoch, offset and
        # where the log known to the state ends after it (the LOG_START cause reads it).
        ("has_last_data", np.bool_),
        ("last_data_epoch", np.int64),
        ("last_data_sequence", np.int64),
        ("last_data_offset", np.int64),
        ("last_data_coverage_end", np.int64),
        # -- read from the log whatever the verdicts: what producer expiry looks at --
        ("has_rows", np.bool_),
        # a seed or an applied data batch gave the producer a sequence (in any session): until
        # then a producer known from markers only may have lost its sequences to retention
        ("sequences_seen", np.bool_),
        ("previous_timestamp", np.int64),  # timestamp of the producer's previous row
        ("previous_offset", np.int64),  # its base offset (NULL for a seeded state entry)
        ("log_txn_open", np.bool_),  # its last transactional event in the log opened one
        # -- the sequences a batch that failed its CRC claimed (docs/rules.md#corrupt-batch) --
        ("corrupt_claim", np.bool_),
        ("corrupt_epoch", np.int64),
        ("corrupt_base_sequence", np.int64),
        ("corrupt_last_sequence", np.int64),
        # -- the open transaction, for the transactions table --
        ("txn_first_last_offset", np.int64),
        ("txn_first_timestamp", np.int64),
        ("txn_start_epoch", np.int64),
        ("txn_batches", np.int64),
        ("txn_records", np.int64),  # NULL when the transaction began before the replayed log
        ("txn_first_occurrence", np.int64),
        # -- the producer epoch being summarised (producer_sessions), flushed when it changes --
        ("has_audited", np.bool_),
        ("summary_open", np.bool_),
        ("summary_epoch", np.int64),
        ("summary_first_offset", np.int64),
        ("summary_last_offset", np.int64),
        ("summary_first_sequence_offset", np.int64),
        ("summary_first_sequence", np.int64),
        ("summary_last_sequence_offset", np.int64),
        ("summary_last_sequence", np.int64),
        ("summary_batches", np.int64),
        ("summary_records", np.int64),
        ("summary_first_timestamp", np.int64),
        ("summary_last_timestamp", np.int64),
    ],
    align=True,
)

# The partition being replayed (UnifiedLog's view of it, plus running statistics).
PARTITION_STATE = np.dtype(
    [
        ("active", np.bool_),
        ("partition", np.int64),
        ("first_offset", np.int64),  # the exported log's first base offset
        ("max_last_offset", np.int64),  # highest last offset so far (OFFSET_OVERLAP)
        ("max_leader_epoch", np.int64),  # highest leader epoch so far
        ("log_start_checkpoint", np.int64),  # highest log-start-offset checkpoint value
        ("high_watermark", np.int64),  # highest replication-offset checkpoint value
        ("epoch_entry_epoch", np.int64),  # leader-epoch checkpoint entry in force
        ("epoch_entry_start", np.int64),
        # the audited replica's latest batch, compared with other replicas' copies
        ("primary_base_offset", np.int64),
        ("primary_last_offset", np.int64),
        ("primary_producer_id", np.int64),
        ("primary_producer_epoch", np.int64),
        ("primary_base_sequence", np.int64),
        ("primary_is_control", np.bool_),
        ("primary_is_transactional", np.bool_),
        ("primary_record_count", np.int64),
        # occurrence of a base offset among the log's rows (keeps finding ids unique)
        ("previous_base_offset", np.int64),
        ("occurrence", np.int64),
        ("previous_ack_offset", np.int64),
        ("ack_occurrence", np.int64),
        # --since-state: the log below this offset is in the seeded state already
        ("covered_end", np.int64),
        ("skipped_batches", np.int64),  # batches below it, not replayed again
        ("skipped_from", np.int64),  # their first offset, last offset and latest timestamp
        ("skipped_to", np.int64),
        ("skipped_max_timestamp", np.int64),
        # statistics
        ("batches", np.int64),
        ("replica_batches", np.int64),
        ("batches_with_producer_id", np.int64),
        ("records", np.int64),
        ("markers", np.int64),  # control batches (transaction markers)
        # The span of the offsets the export does not hold one record at (compaction, a batch
        # not read: a hole between batches, a batch with fewer records than offsets, batches
        # overlapping), and that of the markers that closed no transaction: the one-to-one
        # check counts a range's input records by offset only outside them.
        ("uncounted_from", np.int64),
        ("uncounted_to", np.int64),
        ("unattributed_from", np.int64),
        ("unattributed_to", np.int64),
        ("max_timestamp", np.int64),
        ("latest_timestamp", np.int64),  # highest non-negative timestamp: the log's clock
        ("producers", np.int64),  # producer slots in use
        ("audited_producers", np.int64),
        ("acks", np.int64),  # acknowledgements registered
        ("first_ack_ordinal", np.int64),  # the task-wide ordinal of its first acknowledgement
    ],
    align=True,
)

# A client acknowledgement waiting for the end of its partition (docs/rules.md#acked-write-lost).
ACK = np.dtype(
    [
        ("producer_id", np.int64),
        ("producer_epoch", np.int64),
        ("base_sequence", np.int64),
        ("last_sequence", np.int64),
        ("offset", np.int64),
        ("last_offset", np.int64),
        ("acknowledged_ms", np.int64),
        ("occurrence", np.int64),
        ("ordinal", np.int64),  # task-wide: the runner keeps its source under this number
        ("next_same_batch", np.int64),  # next acknowledgement of the same batch, -1 at the end
        ("log_batches", np.int64),  # batches of the log with its producer, epoch and sequence
        ("log_min_offset", np.int64),
        ("log_has_exact", np.bool_),  # one of them is at the acknowledged offset
    ],
    align=True,
)

# ---- what the kernel emits; every field is int64 (NULL when absent) or bool ----
FINDING_EVENT = np.dtype(
    [
        ("finding_code", np.int64),
        ("cause", np.int64),
        ("kafka_error", np.int64),
        ("row", np.int64),  # the row of the input batch it is about, -1 when none
        ("tp_row", np.int64),  # a row of its partition in the input batch, -1: the previous one
        ("partition", np.int64),
        ("producer_id", np.int64),
        ("producer_epoch", np.int64),
        ("base_offset", np.int64),
        ("last_offset", np.int64),
        ("base_sequence", np.int64),
        ("last_sequence", np.int64),
        ("timestamp", np.int64),
        ("expected_sequence", np.int64),
        ("previous_offset", np.int64),
        ("occurrence", np.int64),
        ("ack_ordinal", np.int64),  # the acknowledgement it is about (its source), NULL if none
        ("facts", np.int64, (FACTS_PER_FINDING,)),  # named per type by findings.REGISTRY[...].facts
    ],
    align=True,
)

TRANSACTION_EVENT = np.dtype(
    [
        ("tp_row", np.int64),
        ("partition", np.int64),
        ("producer_id", np.int64),
        ("start_epoch", np.int64),
        ("end_epoch", np.int64),
        ("first_offset", np.int64),
        ("marker_offset", np.int64),
        ("outcome", np.int64),  # ControlType code, or OPEN
        ("hanging", np.bool_),
        ("batches", np.int64),
        ("records", np.int64),
        ("first_timestamp", np.int64),
        ("end_timestamp", np.int64),
        ("duration_ms", np.int64),
        ("coordinator_epoch", np.int64),
    ],
    align=True,
)

SESSION_EVENT = np.dtype(
    [
        ("tp_row", np.int64),
        ("partition", np.int64),
        ("producer_id", np.int64),
        ("producer_epoch", np.int64),
        ("first_offset", np.int64),
        ("last_offset", np.int64),
        ("first_sequence_offset", np.int64),
        ("first_sequence", np.int64),
        ("last_sequence_offset", np.int64),
        ("last_sequence", np.int64),
        ("batches", np.int64),
        ("records", np.int64),
        ("first_timestamp", np.int64),
        ("last_timestamp", np.int64),
    ],
    align=True,
)

PARTITION_EVENT = np.dtype(
    [
        ("tp_row", np.int64),
        ("partition", np.int64),
        ("first_offset", np.int64),
        ("last_offset", np.int64),
        ("batches", np.int64),
        ("replica_batches", np.int64),
        ("batches_with_producer_id", np.int64),
        ("records", np.int64),
        ("markers", np.int64),
        ("uncounted_from", np.int64),
        ("uncounted_to", np.int64),
        ("unattributed_from", np.int64),
        ("unattributed_to", np.int64),
        ("log_start_offset", np.int64),  # basics.log_start_of: checkpoints included
        ("log_start_checkpoint", np.int64),  # the log-start-offset-checkpoint's value alone
        ("max_timestamp", np.int64),
        ("producers", np.int64),
        ("batches_skipped", np.int64),
        ("covered_end", np.int64),
        ("skipped_from", np.int64),
        ("skipped_to", np.int64),
        ("skipped_max_timestamp", np.int64),
    ],
    align=True,
)

# The final state of a producer: a row of the producer_state table, which seeds the next run.
STATE_EVENT = np.dtype(
    [
        ("tp_row", np.int64),
        ("partition", np.int64),
        ("producer_id", np.int64),
        ("producer_epoch", np.int64),
        ("coordinator_epoch", np.int64),
        ("txn_first_offset", np.int64),
        ("last_timestamp", np.int64),
        ("state_offset", np.int64),
        ("cached", np.int64),
        ("base_sequence", np.int64, (NUM_BATCHES_TO_RETAIN,)),
        ("last_sequence", np.int64, (NUM_BATCHES_TO_RETAIN,)),
        ("base_offset", np.int64, (NUM_BATCHES_TO_RETAIN,)),
        ("last_offset", np.int64, (NUM_BATCHES_TO_RETAIN,)),
    ],
    align=True,
)

# What the kernel emits: one record array per output, each under the name of the table it becomes
# (sinks.run_record.TABLE_SCHEMAS), the one name the kernel's state, the runner and the engine
# use. The kernel gets them in one `Outputs`, in this order, and counts each one's events at its
# position.
OUTPUT_DTYPES = {
    "findings": FINDING_EVENT,
    "transactions": TRANSACTION_EVENT,
    "producer_sessions": SESSION_EVENT,
    "partition_summary": PARTITION_EVENT,
    "producer_state": STATE_EVENT,
}
OUTPUTS = tuple(OUTPUT_DTYPES)
# The kernel's `counts`: the events written to each output (`COUNT_OF[name]`), then the room a
# stop asked for, then the acknowledgements registered by the task so far (the next one's ordinal).
COUNT_OF = {name: index for index, name in enumerate(OUTPUTS)}
ROOM_NEEDED = len(OUTPUTS)
ACKS_SEEN = ROOM_NEEDED + 1
COUNTS = ACKS_SEEN + 1


class Outputs(NamedTuple):
    """What the kernel writes, handed to it whole: one record array per output, and `counts`.

    The kernel's checks take it as one argument (`out`) and write `out.findings[...]`; numba
    compiles a named tuple of arrays as its fields, so it costs what the arrays passed one by one
    did. The runner builds it by field name and replaces it when an output grows.
    """

    findings: np.ndarray  # FINDING_EVENT
    transactions: np.ndarray  # TRANSACTION_EVENT
    producer_sessions: np.ndarray  # SESSION_EVENT
    partition_summary: np.ndarray  # PARTITION_EVENT
    producer_state: np.ndarray  # STATE_EVENT
    counts: np.ndarray  # int64[COUNTS]: the events of each output (COUNT_OF), then the others


# The bundle's arrays are the outputs, in their order: `counts` counts them by position.
assert Outputs._fields == (*OUTPUTS, "counts"), Outputs._fields
