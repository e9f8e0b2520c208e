"""ProducerAppendInfo: an audited batch checked against its producer's entry, then applied.

The checks (`validate_*`, `check_*`, Kafka's `ProducerAppendInfo.checkProducerEpoch`,
`checkSequence`, `checkCoordinatorEpoch`) change no state: when one fails, the finding that stands
for the leader's exception is emitted, and the check says so. A verdict is reached first, as
Kafka reaches it; why it happened (`explain_*`, docs/rules.md#causes) is asked afterwards, of the
verdict. The updates (`append_*`) commit an applied append to the entry, as
ProducerStateManager.update commits the `updatedEntry` of an accepted append.
"""

from __future__ import annotations

from eos_audit.findings import (
    FACT_COORDINATOR_EPOCH,
    FACT_COORDINATOR_EPOCH_SEEN,
    FACT_CURRENT_EPOCH,
    FACT_LOG_START,
    FACT_MISSING_SEQUENCES,
    FACT_STATE_LAST_SEQUENCE,
)
from eos_audit.replay.basics import (
    ABORT,
    COMMIT,
    COMPACTION,
    COORDINATOR_FENCED,
    DUPLICATE_BATCH,
    FENCED_PRODUCER_EPOCH,
    IN_SEQUENCE,
    INVALID_PRODUCER_EPOCH,
    INVALID_TXN_STATE,
    INVALID_TXN_STATE_ERROR,
    LOG_START,
    NEW_EPOCH_NONZERO_SEQUENCE,
    NO_CAUSE,
    NO_ERROR,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    PRODUCER_EXPIRY,
    SEQUENCE_GAP,
    SEQUENCE_OVERLAP,
    SEQUENCE_RESET,
    TRANSACTION_COORDINATOR_FENCED,
    TRANSACTIONS,
    UNEXPLAINED,
    UNKNOWN_OUTCOME,
    UNKNOWN_PRODUCER,
    log_start_of,
    next_expected_sequence,
)
from eos_audit.replay.emit import (
    emit,
    record_estimate,
)
from eos_audit.replay.producer_entry import (
    add_batch,
    find_duplicate_batch,
    last_sequence_of,
    maybe_update_producer_epoch,
    ring_slot,
)
from eos_audit.replay.state import (
    NULL,
    NUM_BATCHES_TO_RETAIN,
    SEQUENCE_SPACE,
)


# ------------------------------------------------------------------------------------------------
# ProducerAppendInfo's checks: an audited batch against the entry as it stands. A check changes
# no state; when it fails it emits the finding that stands for the leader's exception and says so.
# ------------------------------------------------------------------------------------------------
def is_client_append(row):
    """Whether a data batch was a client's produce (AppendOrigin.CLIENT).

    Only client appends are deduplicated and sequence-checked. Coordinators write the topics
    `[topics] coordinator` names and the data batches with a producer id but no sequence
    (docs/rules.md#replay-scope).
    """
    return not row.is_control and row.base_sequence >= 0 and not row.is_coordinator_topic


def check_producer_epoch(e, row, part, out):
    """ProducerAppendInfo.checkProducerEpoch (docs/rules.md#fenced-producer-epoch).

    A data batch or marker below the entry's epoch is a fenced producer's: INVALID_PRODUCER_EPOCH
    at a leader. Returns whether it is.
    """
    if row.producer_epoch >= e.epoch:
        return False
    f = emit(out, FENCED_PRODUCER_EPOCH, row, part, error=INVALID_PRODUCER_EPOCH)
    f.facts[FACT_CURRENT_EPOCH] = e.epoch
    return True


def check_sequence(e, row, part):
    """ProducerAppendInfo.checkSequence: the batch's first sequence against the entry.

    Kafka's cases, which exclude each other: a producer without state (epoch -1) may start
    anywhere since 2.5 (docs/rules.md#unknown-producer); a new epoch must start at 0
    (docs/rules.md#new-epoch-nonzero-sequence); at the entry's epoch the batch must continue right
    after its last sequence (docs/rules.md#sequence-gap). The verdict only: `report_sequence`
    emits its finding, with the cause.

    Returns:
        IN_SEQUENCE, or the finding that stands for the leader's answer: UNKNOWN_PRODUCER,
        NEW_EPOCH_NONZERO_SEQUENCE, or OUT_OF_ORDER_SEQUENCE_NUMBER told apart (SEQUENCE_RESET,
        SEQUENCE_OVERLAP, SEQUENCE_GAP).
    """
    sequence = row.base_sequence
    if e.epoch == -1:
        # No state: both of Kafka's branches accept any sequence. Older leaders did not
        # (params.unknown_producer_error); a producer starting above 0 is reported.
        return IN_SEQUENCE if sequence == 0 else UNKNOWN_PRODUCER
    if row.producer_epoch != e.epoch:
        # A new epoch (a higher one: check_producer_epoch passed) restarts the sequence at 0.
        return IN_SEQUENCE if sequence == 0 else NEW_EPOCH_NONZERO_SEQUENCE
    if sequence != 0 and sequences_lost_below_log_start(e, part):
        # Its state came from markers only: judged as a producer without state
        # (docs/replay_semantics.md, "Verdict of a data batch" step 3a).
        return UNKNOWN_PRODUCER
    # inSequence(lastSeq, firstSeq): right after the last sequence, 0 after INT32_MAX, 0 when
    # the entry has none; or right after the sequences a corrupt batch claimed.
    last_sequence = last_sequence_of(e)
    expected = next_expected_sequence(last_sequence)
    if sequence == expected:
        return IN_SEQUENCE
    if explained_by_corrupt_batch(e, row.producer_epoch, expected, sequence):
        return IN_SEQUENCE  # the missing sequences are a corrupt batch's, reported already
    # OUT_OF_ORDER_SEQUENCE_NUMBER, Kafka's one error, told apart (docs/rules.md#sequence-reset,
    # docs/rules.md#sequence-overlap, docs/rules.md#sequence-gap).
    if sequence == 0:
        return SEQUENCE_RESET
    if last_sequence >= 0 and (sequence - expected) % SEQUENCE_SPACE >= SEQUENCE_SPACE // 2:
        # At or below the last sequence. The distance is taken modulo 2^31, so a batch just past
        # the wrap is a gap, not an overlap.
        return SEQUENCE_OVERLAP
    return SEQUENCE_GAP


def report_sequence(verdict, e, row, part, params, out, expired):
    """The finding of a batch `check_sequence` found out of sequence, with its cause and facts."""
    if verdict == UNKNOWN_PRODUCER:
        cause = explain_unknown_producer(row, part, expired)
        error = params.unknown_producer_error
        f = emit(out, verdict, row, part, cause, error, expected=0, previous=e.previous_offset)
        f.facts[FACT_LOG_START] = log_start_of(part)
        return
    if verdict == NEW_EPOCH_NONZERO_SEQUENCE:
        f = emit(out, verdict, row, part, error=OUT_OF_ORDER_SEQUENCE_NUMBER, expected=0)
        f.facts[FACT_CURRENT_EPOCH] = e.epoch
        return
    # At the entry's epoch: against its last sequence, and the batch that set it.
    last_sequence = last_sequence_of(e)
    expected = next_expected_sequence(last_sequence)
    previous = e.last_data_offset if last_sequence != -1 else NULL
    cause = explain_sequence_gap(verdict, e, row, part)
    f = emit(out, verdict, row, part, cause, OUT_OF_ORDER_SEQUENCE_NUMBER, expected, previous)
    f.facts[FACT_STATE_LAST_SEQUENCE] = last_sequence
    if verdict == SEQUENCE_GAP:
        f.facts[FACT_MISSING_SEQUENCES] = (row.base_sequence - expected) % SEQUENCE_SPACE


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


# ------------------------------------------------------------------------------------------------
# The explanations: why a verdict happened (docs/rules.md#causes), asked once it is known. Each
# returns the first cause that matches, UNEXPLAINED when none does.
# ------------------------------------------------------------------------------------------------
def explain_unknown_producer(row, part, expired):
    """Why a producer without state starts above 0 (docs/rules.md#unknown-producer).

    Its state expired (ProducerStateManager.removeExpiredProducers), retention deleted its
    batches (the log starts above 0), or the cleaner did.
    """
    if expired:
        return PRODUCER_EXPIRY
    log_start = log_start_of(part)
    if log_start != NULL and log_start > 0:
        return LOG_START
    if row.is_compacted:
        return COMPACTION
    return UNEXPLAINED


def explain_sequence_gap(verdict, e, row, part):
    """Why sequences are missing before the batch: a SEQUENCE_GAP's or a SEQUENCE_RESET's cause.

    The cleaner removed a gap's batches (COMPACTION); or what followed the batch that set the
    entry's last sequence may precede the exported log (LOG_START). An overlap misses nothing.
    """
    if verdict == SEQUENCE_OVERLAP:
        return NO_CAUSE
    if verdict == SEQUENCE_GAP and row.is_compacted:
        return COMPACTION
    coverage_end = e.last_data_coverage_end if last_sequence_of(e) != -1 else NULL
    if coverage_end != NULL and coverage_end < log_start_of(part):
        return LOG_START
    return UNEXPLAINED


def check_coordinator_epoch(e, row, part, out):
    """ProducerAppendInfo.checkCoordinatorEpoch (docs/rules.md#coordinator-fenced).

    A marker from a coordinator older than the one that wrote the entry's last marker:
    TRANSACTION_COORDINATOR_FENCED at a leader. A marker whose record the export does not show
    has no coordinator epoch to check (docs/rules.md#transactions). Returns whether it is fenced.
    """
    coordinator_epoch = row.coordinator_epoch
    if coordinator_epoch == NULL or coordinator_epoch >= e.coordinator_epoch:
        return False
    f = emit(out, COORDINATOR_FENCED, row, part, error=TRANSACTION_COORDINATOR_FENCED)
    f.facts[FACT_COORDINATOR_EPOCH] = coordinator_epoch
    f.facts[FACT_COORDINATOR_EPOCH_SEEN] = e.coordinator_epoch
    return True


def validate_data_batch(e, row, part, params, out, expired):
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
    if check_producer_epoch(e, row, part, out):
        return False
    if is_client_append(row):
        back = find_duplicate_batch(e, row.producer_epoch, row.base_sequence, row.last_sequence)
        if back >= NUM_BATCHES_TO_RETAIN and row.base_sequence == next_expected_sequence(
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
            original = e.ring_base_offset[ring_slot(e, back)]
            emit(out, DUPLICATE_BATCH, row, part, error=error, previous=original)
            return False
        verdict = check_sequence(e, row, part)
        if verdict != IN_SEQUENCE:
            report_sequence(verdict, e, row, part, params, out, expired)
            # A leader rejects an overlap without changing its state (checkSequence throws before
            # the update): the entry keeps its last sequence. Every other verdict is applied.
            return verdict != SEQUENCE_OVERLAP
    if e.txn_open and not row.is_transactional:
        # appendDataBatch: non-transactional data while the producer's transaction is open
        # (docs/rules.md#invalid-txn-state)
        opened_at = e.txn_first_offset
        emit(out, INVALID_TXN_STATE, row, part, error=INVALID_TXN_STATE_ERROR, previous=opened_at)
    return True


def validate_end_txn_marker(e, row, part, out):
    """The checks of ProducerAppendInfo.appendEndTxnMarker: the producer epoch, the coordinator's.

    docs/replay_semantics.md, "Verdict of a marker". Returns whether the marker is applied: not
    when fenced; a coordinator-fenced marker is, as a broker loading the log applies it, so its
    coordinator epoch becomes the entry's (docs/rules.md#coordinator-fenced).
    """
    if check_producer_epoch(e, row, part, out):
        return False
    check_coordinator_epoch(e, row, part, out)
    return True


# ------------------------------------------------------------------------------------------------
# ProducerAppendInfo's updates: an applied append committed to the entry, as
# ProducerStateManager.update commits the `updatedEntry` of an accepted append
# ------------------------------------------------------------------------------------------------
def append_data_batch(e, row, part, timestamp, coverage_end):
    """ProducerAppendInfo.appendDataBatch's update: addBatch, and the transaction a batch opens.

    `coverage_end` is where the log known to the state ends after the batch, which the LOG_START
    cause reads (docs/replay_semantics.md, "Causes and severity").
    """
    epoch = row.producer_epoch
    if is_client_append(row):
        add_batch(
            e,
            epoch,
            row.base_sequence,
            row.last_sequence,
            row.base_offset,
            row.last_offset,
            timestamp,
        )
        e.last_data_coverage_end = coverage_end
        e.sequences_seen = True
        e.corrupt_claim = False  # applied: the gap a corrupt batch explained is closed
    else:
        # A coordinator's append takes no cache slot here (docs/rules.md#replay-scope).
        maybe_update_producer_epoch(e, epoch)
        e.last_timestamp = timestamp
    if row.is_transactional:
        if not e.txn_open:
            # The first transactional batch opens a transaction (docs/rules.md#transactions).
            e.txn_open = True
            e.txn_first_offset = row.base_offset
            e.txn_first_last_offset = row.last_offset
            e.txn_first_timestamp = timestamp
            e.txn_start_epoch = epoch
            e.txn_batches = 0
            e.txn_records = 0
            e.txn_first_occurrence = part.occurrence
        e.txn_batches += 1
        if e.txn_records != NULL:
            e.txn_records += record_estimate(row)


def append_end_txn_marker(e, row, part, out, timestamp):
    """ProducerAppendInfo.appendEndTxnMarker's update (docs/rules.md#transactions).

    The open transaction, if any, completes (Kafka's CompletedTxn, a `transactions` row); then
    updatedEntry.update(epoch, coordinatorEpoch, lastTimestamp).
    """
    if e.txn_open:
        close_transaction(e, row, part, out, timestamp)
    maybe_update_producer_epoch(e, row.producer_epoch)
    e.txn_open = False
    e.txn_first_offset = NULL
    if row.coordinator_epoch != NULL:  # a marker without its record keeps the entry's
        e.coordinator_epoch = row.coordinator_epoch
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


def close_transaction(e, row, part, out, timestamp):
    """The CompletedTxn appendEndTxnMarker returns: the open transaction, as a `transactions` row.

    See docs/rules.md#transactions.
    """
    t = out.transactions[out.counts[TRANSACTIONS]]
    out.counts[TRANSACTIONS] += 1
    t.tp_row = row.position
    t.partition = part.partition
    t.producer_id = e.producer_id
    t.start_epoch = e.txn_start_epoch
    t.end_epoch = row.producer_epoch
    t.first_offset = e.txn_first_offset
    t.marker_offset = row.base_offset
    t.outcome = marker_outcome(row.control_type)
    t.hanging = False
    t.batches = e.txn_batches
    t.records = e.txn_records
    t.first_timestamp = e.txn_first_timestamp
    t.end_timestamp = timestamp
    if timestamp != NULL and e.txn_first_timestamp != NULL:
        t.duration_ms = timestamp - e.txn_first_timestamp
    else:
        t.duration_ms = NULL
    t.coordinator_epoch = row.coordinator_epoch


def load_seed_state(e, row, timestamp):
    """The seeded entry itself, as ProducerStateManager loads it from a snapshot.

    Its epoch, coordinator epoch, open transaction and last timestamp (docs/rules.md#seeded-state);
    its cached batches came before it, as data batches (append_data_batch).
    """
    maybe_update_producer_epoch(e, row.producer_epoch)
    if row.coordinator_epoch != NULL:
        e.coordinator_epoch = row.coordinator_epoch
    if row.value != NULL:
        e.txn_open = True
        e.txn_first_offset = row.value
        e.txn_first_last_offset = NULL
        e.txn_first_timestamp = timestamp
        e.txn_start_epoch = row.producer_epoch
        e.txn_batches = 0
        # Its records before the seed are not in this run's log: the count is unknown.
        e.txn_records = NULL
        e.txn_first_occurrence = 0
    e.last_timestamp = timestamp
