"""The sequential reference model (tests/oracle/broker_model.py) vs docs/replay_semantics.md."""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from tests.oracle.broker_model import (
    MAX_SEQUENCE,
    PRODUCER_STATE_TYPES,
    Batch,
    Finding,
    Seed,
    SeedBatch,
    increment_sequence,
    replay,
)
from tests.oracle.histories import History, histories, many_histories

T = "orders"
DAY = 86_400_000
TS = 1_700_000_000_000


def data(off, *, pid=1, epoch=0, seq=0, n=1, txn=False, ts=None, topic=T, partition=0, **kw):
    """A data batch of `n` records at offsets off..off+n-1, sequences seq..seq+n-1."""
    return Batch(
        topic,
        partition,
        off,
        off + n - 1,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        record_count=n,
        is_transactional=txn,
        max_timestamp=ts,
        **kw,
    )


def marker(off, *, pid=1, epoch=0, coord=0, kind="COMMIT", ts=None, topic=T, partition=0, **kw):
    """A transaction marker (one control record)."""
    kw.setdefault("record_count", 1)
    return Batch(
        topic,
        partition,
        off,
        off,
        producer_id=pid,
        producer_epoch=epoch,
        is_transactional=True,
        is_control=True,
        control_type=kind,
        coordinator_epoch=coord,
        max_timestamp=ts,
        **kw,
    )


def kinds(findings):
    return [(f.finding_type, f.base_offset) for f in findings]


def only(findings):
    assert len(findings) == 1, findings
    return findings[0]


# ------------------------------------------------------------------------------------------------
# Sequence arithmetic and input helpers
# ------------------------------------------------------------------------------------------------
def test_increment_sequence_wraps_like_kafka():
    assert increment_sequence(MAX_SEQUENCE - 10, 20) == 9  # PSMT testProducerSequenceWith...
    assert increment_sequence(MAX_SEQUENCE, 1) == 0
    assert increment_sequence(5, 3) == 8
    b = Batch(T, 0, 100, 120, producer_id=1, producer_epoch=0, base_sequence=2147483637)
    assert b.effective_last_sequence == 9
    assert Batch(T, 0, 0, 3).effective_last_sequence == -1
    assert dataclasses.replace(b, last_sequence=42).effective_last_sequence == 42


def test_as_row_gives_the_canonical_columns_in_order():
    row = data(0, n=2).as_row()
    assert list(row) == [
        "topic", "partition", "base_offset", "last_offset", "producer_id", "producer_epoch",
        "base_sequence", "last_sequence", "record_count", "is_transactional", "is_control",
        "control_type", "coordinator_epoch", "partition_leader_epoch", "magic", "max_timestamp",
        "crc_valid", "source",
    ]  # fmt: skip
    assert row["last_offset"] == 1 and row["magic"] == 2 and row["last_sequence"] is None
    seed = Seed(T, 0, 7, 3, batches=(SeedBatch(0, 1, 10, 11),))
    assert seed.as_row() == {
        "topic": T,
        "partition": 0,
        "producer_id": 7,
        "producer_epoch": 3,
        "coordinator_epoch": None,
        "txn_first_offset": None,
        "last_timestamp": None,
        "batches": [{"base_sequence": 0, "last_sequence": 1, "base_offset": 10, "last_offset": 11}],
        "state_offset": None,
        "source": None,
    }


# ------------------------------------------------------------------------------------------------
# Clean logs
# ------------------------------------------------------------------------------------------------
def test_in_sequence_idempotent_producer_has_no_findings():
    assert replay([data(0, seq=0, n=3), data(3, seq=3, n=2), data(5, seq=5)]) == []


def test_klog_example_tv1_sequences_continue_across_same_epoch_commits():
    # kafka_rules.md §4.3 / §1.7: seq 0-1, 2, 3, COMMIT, 4, COMMIT, all at epoch 0.
    log = [
        data(0, seq=0, n=2, txn=True),
        data(2, seq=2, txn=True),
        data(3, seq=3, txn=True),
        marker(4, coord=4),
        data(5, seq=4, txn=True),
        marker(6, coord=4),
    ]
    assert replay(log) == []


def test_tv2_markers_at_epoch_plus_one_and_restarts_at_zero():
    log = [
        data(0, epoch=0, seq=0, n=2, txn=True),
        marker(2, epoch=1, coord=3),
        data(3, epoch=1, seq=0, txn=True),
        data(4, epoch=1, seq=1, n=3, txn=True),
        marker(7, epoch=2, coord=3, kind="ABORT"),
        data(8, epoch=2, seq=0, txn=True),
        marker(9, epoch=3, coord=3),
        marker(10, epoch=3, coord=3),  # KIP-1228 idempotent retry of a marker: no txn open, legal
    ]
    assert replay(log) == []


def test_markers_without_open_transaction_are_legal():
    assert (
        replay([marker(0, epoch=2, coord=1), marker(1, epoch=2, coord=1), data(2, epoch=2)]) == []
    )


def test_client_epoch_bump_restarts_at_zero():
    log = [data(0, seq=0, n=3), data(3, epoch=1, seq=0), data(4, epoch=5, seq=0)]
    assert replay(log) == []


def test_tv1_abort_at_bumped_epoch_then_restart_at_zero():
    log = [data(0, seq=0, txn=True), marker(1, epoch=1, kind="ABORT"), data(2, epoch=1, seq=0)]
    assert replay(log) == []


def test_batches_without_producer_id_and_magic_1_are_not_replayed():
    log = [
        Batch(T, 0, 0, 4),
        Batch(T, 0, 5, 6, producer_id=3, producer_epoch=0, base_sequence=9, magic=1),
        data(7, pid=3, seq=0),
        data(8, pid=3, seq=1, magic=None),  # null magic means 2
    ]
    assert replay(log) == []


# ------------------------------------------------------------------------------------------------
# Every finding type
# ------------------------------------------------------------------------------------------------
def test_lost_batch_gives_exactly_one_gap_and_no_cascade():
    log = [data(0, seq=0), data(1, seq=1, n=2), data(3, seq=5), data(4, seq=6), data(5, seq=7)]
    f = only(replay(log))
    assert f == Finding(
        T, 0, 3, 3, "SEQUENCE_GAP", "CRITICAL", "UNEXPLAINED", "OUT_OF_ORDER_SEQUENCE_NUMBER", 1,
        3, 1,
    )  # fmt: skip


def test_sequence_overlap():
    f = only(replay([data(0, seq=0, n=5), data(5, seq=2)]))
    assert (f.finding_type, f.severity, f.cause, f.kafka_error) == (
        "SEQUENCE_OVERLAP", "ERROR", None, "OUT_OF_ORDER_SEQUENCE_NUMBER"
    )  # fmt: skip
    assert (f.expected_sequence, f.previous_offset) == (5, 0)


def test_sequence_reset_unexplained():
    f = only(replay([data(0, seq=0, n=5), data(5, seq=5), data(6, seq=0)]))
    assert (f.finding_type, f.severity, f.cause, f.expected_sequence, f.previous_offset) == (
        "SEQUENCE_RESET", "ERROR", "UNEXPLAINED", 6, 5
    )  # fmt: skip


def test_sequence_reset_log_start_when_previous_batch_below_log_start():
    log = [data(0, seq=0, n=5), data(5, seq=0)]
    f = only(replay(log, log_start_offsets={(T, 0): 8}))
    assert (f.finding_type, f.severity, f.cause) == ("SEQUENCE_RESET", "INFO", "LOG_START")
    # A previous batch straddling the log start does not lie below it.
    f = only(replay(log, log_start_offsets={(T, 0): 4}))
    assert f.cause == "UNEXPLAINED"


def test_gap_log_start_cause():
    log = [data(0, seq=0, n=5), data(5, seq=8)]
    f = only(replay(log, log_start_offsets={(T, 0): 7}))
    assert (f.finding_type, f.severity, f.cause) == ("SEQUENCE_GAP", "INFO", "LOG_START")


def test_gap_on_compacted_topic_is_compaction():
    # The cleaner dropped offsets 5-9 with sequences 5-7: both holes are its work.
    log = [data(0, seq=0, n=5, topic="compacted.users"), data(10, seq=8, topic="compacted.users")]
    found = replay(log, compacted_topics=["compacted.*"])
    assert [(f.finding_type, f.severity, f.cause) for f in found] == [
        ("OFFSET_GAP", "INFO", "COMPACTION"),
        ("SEQUENCE_GAP", "INFO", "COMPACTION"),
    ]
    # fnmatch is case-sensitive
    found = replay(log, compacted_topics=["Compacted.*"])
    assert [(f.finding_type, f.severity, f.cause) for f in found] == [
        ("OFFSET_GAP", "CRITICAL", "UNEXPLAINED"),
        ("SEQUENCE_GAP", "CRITICAL", "UNEXPLAINED"),
    ]


def test_new_epoch_nonzero_sequence():
    f = only(replay([data(0, seq=0), data(1, epoch=1, seq=3)]))
    assert (f.finding_type, f.severity, f.kafka_error, f.expected_sequence, f.previous_offset) == (
        "NEW_EPOCH_NONZERO_SEQUENCE", "ERROR", "OUT_OF_ORDER_SEQUENCE_NUMBER", 0, None
    )  # fmt: skip


def test_new_epoch_nonzero_sequence_is_still_applied():
    assert len(replay([data(0, seq=0), data(1, epoch=1, seq=3), data(2, epoch=1, seq=4)])) == 1


def test_first_write_loss_is_unknown_producer_unexplained():
    f = only(replay([data(0, seq=5), data(1, seq=6)]))
    assert f == Finding(
        T, 0, 0, 0, "UNKNOWN_PRODUCER", "CRITICAL", "UNEXPLAINED", None, 1, 0, None
    )  # fmt: skip


def test_unknown_producer_log_start_above_zero_is_info():
    f = only(replay([data(100, seq=5)]))
    assert (f.severity, f.cause) == ("INFO", "LOG_START")
    # a checkpoint never puts the log start below the exported log's first offset
    f = only(replay([data(100, seq=5)], log_start_offsets={(T, 0): 0}))
    assert f.cause == "LOG_START"
    # from the checkpoint: log start above 0 although the export starts at 0
    f = only(replay([data(0, seq=5)], log_start_offsets={(T, 0): 3}))
    assert f.cause == "LOG_START"
    # a batch without producer id at offset 0 keeps the log start at 0
    f = only(replay([Batch(T, 0, 0, 99), data(100, seq=5)]))
    assert f.cause == "UNEXPLAINED"


def test_unknown_producer_compaction_when_log_starts_at_zero():
    f = only(replay([data(0, seq=5, topic="c1")], compacted_topics=["c?"]))
    assert (f.severity, f.cause) == ("INFO", "COMPACTION")


@pytest.mark.parametrize(
    ("version", "error"),
    [
        ((0, 11), "OUT_OF_ORDER_SEQUENCE_NUMBER"),
        ((1, 0), "UNKNOWN_PRODUCER_ID"),
        ((2, 4), "UNKNOWN_PRODUCER_ID"),
        ((2, 4, 1), "UNKNOWN_PRODUCER_ID"),
        ((2, 5), None),
        ((3, 7), None),
    ],
)
def test_unknown_producer_kafka_error_by_version(version, error):
    assert only(replay([data(0, seq=5)], kafka_version=version)).kafka_error == error


def test_duplicate_within_cache_has_no_kafka_error_and_leaves_state_unchanged():
    log = [data(0, seq=0), data(1, seq=1, n=2), data(3, seq=3), data(4, seq=1, n=2), data(6, seq=4)]
    f = only(replay(log))
    assert f == Finding(T, 0, 4, 5, "DUPLICATE_BATCH", "CRITICAL", None, None, 1, None, 1)


def test_duplicate_beyond_five_batch_cache_is_out_of_order():
    log = [data(i, seq=i) for i in range(6)] + [data(6, seq=0), data(7, seq=1), data(8, seq=6)]
    found = replay(log)
    assert [(f.finding_type, f.base_offset, f.kafka_error, f.previous_offset) for f in found] == [
        ("DUPLICATE_BATCH", 6, "OUT_OF_ORDER_SEQUENCE_NUMBER", 0),
        ("DUPLICATE_BATCH", 7, None, 1),  # seq 1 is the 5th most recent applied batch: cached
    ]


def test_duplicate_of_a_duplicate_points_at_the_original():
    log = [data(0, seq=0), data(1, seq=0), data(2, seq=0)]
    assert [(f.finding_type, f.previous_offset) for f in replay(log)] == [
        ("DUPLICATE_BATCH", 0),
        ("DUPLICATE_BATCH", 0),
    ]


def test_duplicate_of_transactional_batch_does_not_reopen_the_transaction():
    log = [data(0, seq=0, txn=True), marker(1), data(2, seq=0, txn=True), data(3, seq=1)]
    assert kinds(replay(log)) == [("DUPLICATE_BATCH", 2)]


def test_duplicate_across_same_epoch_marker():
    log = [data(0, seq=0, txn=True), marker(1), data(2, seq=0, txn=True)]
    assert kinds(replay(log)) == [("DUPLICATE_BATCH", 2)]


def test_fenced_data_batch_leaves_state_unchanged():
    log = [data(0, epoch=1, seq=0), data(1, epoch=0, seq=7), data(2, epoch=1, seq=1)]
    f = only(replay(log))
    assert (f.finding_type, f.severity, f.kafka_error, f.base_offset) == (
        "FENCED_PRODUCER_EPOCH", "CRITICAL", "INVALID_PRODUCER_EPOCH", 1
    )  # fmt: skip


def test_fenced_marker_is_not_applied():
    log = [
        data(0, epoch=1, seq=0, txn=True),
        marker(1, epoch=0, coord=9),  # zombie marker: does not close the transaction
        data(2, epoch=1, seq=1),
        marker(3, epoch=1, coord=5),  # coordinator epoch 9 was not applied: not fenced
    ]
    assert kinds(replay(log)) == [("FENCED_PRODUCER_EPOCH", 1), ("INVALID_TXN_STATE", 2)]


def test_coordinator_fenced_marker_is_still_applied():
    log = [
        data(0, seq=0, txn=True),
        marker(1, coord=5),
        data(2, seq=1, txn=True),
        marker(3, coord=3),
        data(4, seq=2),  # the fenced marker closed the transaction: no INVALID_TXN_STATE
        marker(5, coord=4),  # state now has coordinator epoch 3: 4 is fine
    ]
    f = only(replay(log))
    assert (f.finding_type, f.severity, f.kafka_error, f.base_offset) == (
        "COORDINATOR_FENCED", "ERROR", "TRANSACTION_COORDINATOR_FENCED", 3
    )  # fmt: skip


def test_marker_with_null_coordinator_epoch_is_not_compared():
    log = [marker(0, coord=5), marker(1, coord=None), marker(2, coord=5)]
    assert replay(log) == []


def test_seed_coordinator_epoch_fences_markers():
    seed = Seed(T, 0, 1, producer_epoch=0, coordinator_epoch=7)
    assert kinds(replay([marker(0, coord=6)], seeds=[seed])) == [("COORDINATOR_FENCED", 0)]


def test_invalid_txn_state():
    log = [data(0, seq=0, txn=True), data(1, seq=1, n=2, txn=True), data(3, seq=3)]
    f = only(replay(log))
    assert f == Finding(
        T, 0, 3, 3, "INVALID_TXN_STATE", "CRITICAL", None, "INVALID_TXN_STATE", 1, None, 0
    )  # fmt: skip


def test_invalid_txn_state_transaction_start_is_first_data_after_marker():
    log = [data(0, seq=0, txn=True), marker(1), data(2, seq=1, txn=True), data(3, seq=2)]
    assert only(replay(log)).previous_offset == 2


def test_invalid_txn_state_applies_to_coordinator_appends():
    log = [
        data(0, seq=-1, txn=True, topic="__consumer_offsets"),
        data(1, seq=-1, topic="__consumer_offsets"),
    ]
    assert kinds(replay(log)) == [("INVALID_TXN_STATE", 1)]


# ------------------------------------------------------------------------------------------------
# Precedence (first match wins, at most one producer-state finding per batch)
# ------------------------------------------------------------------------------------------------
def test_fenced_beats_everything_for_data():
    log = [data(0, epoch=2, seq=0, txn=True), data(1, epoch=1, seq=0)]
    assert kinds(replay(log)) == [("FENCED_PRODUCER_EPOCH", 1)]


def test_fenced_beats_coordinator_fenced_for_markers():
    log = [marker(0, epoch=2, coord=5), marker(1, epoch=1, coord=1)]
    assert kinds(replay(log)) == [("FENCED_PRODUCER_EPOCH", 1)]


def test_duplicate_beats_sequence_and_txn_checks():
    # The repeat of seq 0-4 would be a SEQUENCE_RESET and, being non-transactional inside an open
    # transaction, an INVALID_TXN_STATE: the duplicate wins.
    log = [data(0, seq=0, n=5), data(5, seq=5, txn=True), data(6, seq=0, n=5)]
    assert kinds(replay(log)) == [("DUPLICATE_BATCH", 6)]


def test_sequence_finding_beats_invalid_txn_state():
    log = [data(0, seq=0, txn=True), data(1, seq=3)]
    assert kinds(replay(log)) == [("SEQUENCE_GAP", 1)]


def test_new_epoch_beats_invalid_txn_state():
    log = [data(0, seq=0, txn=True), data(1, epoch=1, seq=3)]
    assert kinds(replay(log)) == [("NEW_EPOCH_NONZERO_SEQUENCE", 1)]


def test_invalid_txn_state_after_new_epoch_zero():
    log = [data(0, seq=0, txn=True), data(1, epoch=1, seq=0)]
    assert kinds(replay(log)) == [("INVALID_TXN_STATE", 1)]


def test_duplicate_of_an_older_epoch_is_fenced():
    log = [data(0, epoch=0, seq=0), data(1, epoch=1, seq=0), data(2, epoch=0, seq=0)]
    assert kinds(replay(log)) == [("FENCED_PRODUCER_EPOCH", 2)]


def test_partition_findings_and_producer_finding_on_one_batch():
    log = [data(0, seq=0, n=5, partition_leader_epoch=3), data(4, seq=9, partition_leader_epoch=2)]
    assert sorted(kinds(replay(log))) == [
        ("LEADER_EPOCH_REGRESSION", 4),
        ("OFFSET_OVERLAP", 4),
        ("SEQUENCE_GAP", 4),
    ]


# ------------------------------------------------------------------------------------------------
# Epochs and the cache
# ------------------------------------------------------------------------------------------------
def test_marker_at_new_epoch_clears_the_cache():
    log = [data(0, seq=0, n=5, txn=True), marker(5, epoch=1), data(6, epoch=1, seq=5)]
    f = only(replay(log))
    assert (f.finding_type, f.expected_sequence, f.previous_offset) == ("SEQUENCE_GAP", 0, None)


def test_producer_known_only_from_marker_must_start_at_zero():
    f = only(replay([marker(0, epoch=3), data(1, epoch=3, seq=4)]))
    assert (f.finding_type, f.expected_sequence, f.previous_offset) == ("SEQUENCE_GAP", 0, None)


def test_producer_known_from_a_marker_on_a_log_after_retention_is_without_state():
    # Doc step 3a: its sequences 0-9 lay in deleted segments; the leader (2.4+) kept them.
    log = [marker(100, coord=4), data(101, seq=10, txn=True), data(102, seq=11, txn=True)]
    f = only(replay(log))
    assert (f.finding_type, f.severity, f.cause, f.kafka_error) == (
        "UNKNOWN_PRODUCER", "INFO", "LOG_START", None
    )
    assert (f.base_offset, f.expected_sequence, f.previous_offset) == (101, 0, 100)
    # an untyped marker is a marker all the same
    assert only(replay([marker(100, kind=None, coord=None), data(101, seq=10)])).cause == (
        "LOG_START"
    )
    # a seed is the broker's state: a marker-only seed means 0 was expected
    seed = Seed(T, 0, 1, producer_epoch=0)
    assert only(replay(log, seeds=[seed])).finding_type == "SEQUENCE_GAP"
    # once the producer has written a sequence, an expiry does not make it unknown again
    later = [data(100, ts=TS), marker(101, ts=TS + DAY), data(102, seq=5, ts=TS + DAY)]
    assert only(replay(later)).finding_type == "SEQUENCE_GAP"


def test_a_batch_exported_twice_is_an_offset_overlap_and_nothing_else():
    repeated = data(0, n=5)
    log = [repeated, repeated, data(5, seq=5), data(6, n=5)]
    assert kinds(replay(log)) == [("OFFSET_OVERLAP", 0), ("DUPLICATE_BATCH", 6)]
    zombie = data(1, epoch=0, seq=3)
    log = [data(0, epoch=1), zombie, zombie]
    assert kinds(replay(log)) == [("FENCED_PRODUCER_EPOCH", 1), ("OFFSET_OVERLAP", 1)]


def test_wraparound():
    seed = Seed(T, 0, 1, producer_epoch=0, batches=(SeedBatch(2147483630, 2147483636, 0, 6),))
    log = [
        data(10, seq=2147483637, n=21),  # last sequence 9, derived with wraparound
        data(31, seq=10),
        data(32, seq=11, n=2147483647 - 11 + 1),  # 11..2147483647
    ]
    log.append(data(log[-1].last_offset + 1, seq=0))  # in sequence after 2147483647
    assert replay(log, seeds=[seed]) == []


def test_gap_just_past_the_wrap_is_a_gap_not_an_overlap():
    seed = Seed(T, 0, 1, producer_epoch=0, batches=(SeedBatch(2147483640, 2147483640, 0, 0),))
    f = only(replay([data(10, seq=5)], seeds=[seed]))
    assert (f.finding_type, f.expected_sequence) == ("SEQUENCE_GAP", 2147483641)
    seed = Seed(T, 0, 1, producer_epoch=0, batches=(SeedBatch(2147483647, 2147483647, 0, 0),))
    f = only(replay([data(10, seq=2147483646)], seeds=[seed]))
    assert (f.finding_type, f.expected_sequence) == ("SEQUENCE_OVERLAP", 0)


def test_explicit_last_sequence_is_used_for_duplicates():
    log = [data(0, seq=0, n=3, last_sequence=2), data(3, seq=0, n=3, last_sequence=1)]
    assert kinds(replay(log)) == [("SEQUENCE_RESET", 3)]


# ------------------------------------------------------------------------------------------------
# Scope
# ------------------------------------------------------------------------------------------------
def test_empty_control_batch_is_a_no_op():
    log = [
        data(0, seq=0, txn=True),
        marker(1, epoch=0, coord=0, record_count=0),  # cleaned marker: does not close the txn
        marker(2, epoch=9, coord=99, record_count=0),  # nor raise the epoch
        data(3, seq=1),
    ]
    assert kinds(replay(log)) == [("INVALID_TXN_STATE", 3)]


def test_control_batch_with_null_record_count_is_a_marker():
    log = [data(0, seq=0, txn=True), marker(1, record_count=None), data(2, seq=1)]
    assert replay(log) == []


def test_corrupt_batch_is_only_corrupt_and_out_of_the_replay():
    log = [data(0, seq=0), data(1, seq=1, crc_valid=False, epoch=77), data(2, seq=2)]
    found = replay(log)
    assert [(f.finding_type, f.base_offset, f.kafka_error, f.severity) for f in found] == [
        ("CORRUPT_BATCH", 1, "CORRUPT_MESSAGE", "ERROR"),
        ("SEQUENCE_GAP", 2, "OUT_OF_ORDER_SEQUENCE_NUMBER", "CRITICAL"),
    ]


def test_coordinator_topic_has_no_sequence_findings():
    log = [
        data(0, seq=0, topic="__consumer_offsets"),
        data(1, seq=0, topic="__consumer_offsets"),  # would be a duplicate
        data(2, seq=9, topic="__consumer_offsets"),  # would be a gap
        data(3, epoch=1, seq=4, topic="__consumer_offsets"),  # would be NEW_EPOCH_NONZERO
        data(4, pid=2, seq=4, topic="__consumer_offsets"),  # would be UNKNOWN_PRODUCER
    ]
    assert replay(log) == []
    log.append(data(5, epoch=0, seq=5, topic="__consumer_offsets"))  # fencing still applies
    assert kinds(replay(log)) == [("FENCED_PRODUCER_EPOCH", 5)]


def test_coordinator_topics_are_patterns():
    log = [data(0, seq=0, topic="_internal.x"), data(1, seq=5, topic="_internal.x")]
    assert replay(log, coordinator_topics=["_internal.*"]) == []
    assert len(replay(log)) == 1


def test_coordinator_append_in_regular_topic_skips_sequence_checks_and_cache():
    log = [
        data(0, seq=0),
        data(1, seq=-1, n=3),  # coordinator append: no checks, not cached, last_sequence kept
        data(4, seq=1),
        data(5, epoch=1, seq=-1),  # raises the epoch: the next batch must start at 0
        data(6, epoch=1, seq=0),
    ]
    assert replay(log) == []


# ------------------------------------------------------------------------------------------------
# Sessions and expiry
# ------------------------------------------------------------------------------------------------
def test_expiry_resets_state_unknown_producer_is_info():
    log = [data(0, seq=0, ts=TS), data(1, seq=1, ts=TS + DAY)]
    f = only(replay(log))
    assert f == Finding(
        T, 0, 1, 1, "UNKNOWN_PRODUCER", "INFO", "PRODUCER_EXPIRY", None, 1, 0, 0
    )  # fmt: skip


def test_expiry_boundary_and_configurable_expiration():
    log = [data(0, seq=0, ts=TS), data(1, seq=1, ts=TS + DAY - 1)]
    assert replay(log) == []
    assert len(replay(log, expiration_ms=DAY - 1)) == 1


def test_expiry_needs_both_timestamps():
    assert replay([data(0, seq=0, ts=None), data(1, seq=1, ts=TS + 9 * DAY)]) == []
    assert replay([data(0, seq=0, ts=TS), data(1, seq=1, ts=None)]) == []


def test_expired_producer_restarting_at_zero_is_fine_and_epoch_forgotten():
    log = [data(0, epoch=5, seq=0, ts=TS), data(1, epoch=2, seq=0, ts=TS + DAY)]
    assert replay(log) == []


def test_open_transaction_prevents_expiry():
    log = [data(0, seq=0, txn=True, ts=TS), data(1, seq=1, txn=True, ts=TS + 3 * DAY)]
    assert replay(log) == []


def test_expiry_after_commit():
    log = [data(0, seq=0, txn=True, ts=TS), marker(1, ts=TS + 1), data(2, seq=1, ts=TS + 1 + DAY)]
    f = only(replay(log))
    assert (f.finding_type, f.cause, f.previous_offset) == (
        "UNKNOWN_PRODUCER",
        "PRODUCER_EXPIRY",
        1,
    )


def test_expiry_reads_open_transaction_from_the_log_whatever_the_verdict():
    # The zombie transactional batch is fenced (not applied) but the log shows a transaction open
    # after it, so the producer does not expire.
    log = [
        data(0, epoch=1, seq=0, ts=TS),
        data(1, epoch=0, seq=0, txn=True, ts=TS + 1),
        data(2, epoch=1, seq=1, ts=TS + 1 + DAY),
    ]
    assert kinds(replay(log)) == [("FENCED_PRODUCER_EPOCH", 1)]


def test_expiry_previous_row_is_any_verdict():
    log = [data(0, epoch=1, seq=0, ts=TS), data(1, epoch=0, seq=3, ts=TS + 9 * DAY)]
    assert kinds(replay(log)) == [("UNKNOWN_PRODUCER", 1)]
    # the fenced row restarts the clock: the next batch is not expired relative to it
    log = [
        data(0, epoch=1, seq=0, ts=TS),
        data(1, epoch=0, seq=3, ts=TS + DAY - 10),
        data(2, epoch=1, seq=1, ts=TS + DAY + 10),
    ]
    assert kinds(replay(log)) == [("FENCED_PRODUCER_EPOCH", 1)]


def test_duplicate_detection_does_not_cross_sessions():
    log = [data(0, seq=0, n=3, ts=TS), data(3, seq=0, n=3, ts=TS + DAY)]
    assert replay(log) == []


# ------------------------------------------------------------------------------------------------
# Seeds
# ------------------------------------------------------------------------------------------------
SEED = Seed(
    T,
    0,
    1,
    producer_epoch=2,
    coordinator_epoch=4,
    last_timestamp=TS,
    batches=(SeedBatch(0, 4, 40, 44), SeedBatch(5, 9, 45, 49)),
)


def test_seed_state_continues():
    assert replay([data(100, epoch=2, seq=10, ts=TS + 5)], seeds=[SEED]) == []


def test_seed_batch_is_duplicated():
    f = only(replay([data(100, epoch=2, seq=0, n=5, ts=TS + 5)], seeds=[SEED]))
    assert (f.finding_type, f.kafka_error, f.previous_offset) == ("DUPLICATE_BATCH", None, 40)


def test_seed_gap_previous_offset_and_log_start_cause():
    # A seed without state_offset stands right before the log: the gap is in the retained log.
    f = only(replay([data(100, epoch=2, seq=12, ts=TS + 5)], seeds=[SEED]))
    assert (f.finding_type, f.expected_sequence, f.previous_offset, f.cause) == (
        "SEQUENCE_GAP", 10, 45, "UNEXPLAINED"
    )  # fmt: skip
    # State that ends at offset 60 while the log starts at 100: the missing batches may have
    # been deleted with offsets 60-99.
    older = dataclasses.replace(SEED, state_offset=60)
    f = only(replay([data(100, epoch=2, seq=12, ts=TS + 5)], seeds=[older]))
    assert (f.finding_type, f.severity, f.cause) == ("SEQUENCE_GAP", "INFO", "LOG_START")
    # A snapshot taken exactly at the log start covers everything before it: still a loss.
    exact = dataclasses.replace(SEED, state_offset=100)
    assert only(replay([data(100, epoch=2, seq=12, ts=TS + 5)], seeds=[exact])).cause == (
        "UNEXPLAINED"
    )


def test_seed_epoch_fences_and_does_not_make_producer_unknown():
    assert kinds(replay([data(100, epoch=1, seq=0)], seeds=[SEED])) == [
        ("FENCED_PRODUCER_EPOCH", 100)
    ]
    seed = Seed(T, 0, 1, producer_epoch=2)  # no batches: sequences must restart at 0
    assert replay([data(100, epoch=2, seq=0)], seeds=[seed]) == []
    f = only(replay([data(100, epoch=2, seq=3)], seeds=[seed]))
    assert (f.finding_type, f.previous_offset) == ("SEQUENCE_GAP", None)


def test_seed_with_open_transaction():
    seed = Seed(T, 0, 1, producer_epoch=0, txn_first_offset=37, last_timestamp=TS - 30 * DAY)
    f = only(replay([data(100, seq=0, ts=TS)], seeds=[seed]))  # open txn: never expires
    assert (f.finding_type, f.previous_offset) == ("INVALID_TXN_STATE", 37)
    log = [
        data(100, seq=0, txn=True, ts=TS),
        data(101, seq=1, txn=True),
        marker(102),
        data(103, seq=2),
    ]
    assert replay(log, seeds=[seed]) == []


def test_seed_far_in_the_past_expires():
    seed = dataclasses.replace(SEED, last_timestamp=TS - 2 * DAY)
    f = only(replay([data(100, epoch=2, seq=10, ts=TS)], seeds=[seed]))
    assert (f.finding_type, f.cause, f.previous_offset) == (
        "UNKNOWN_PRODUCER", "PRODUCER_EXPIRY", None
    )  # fmt: skip


def test_seed_of_another_partition_is_ignored():
    seed = dataclasses.replace(SEED, partition=1)
    assert kinds(replay([data(100, epoch=2, seq=10)], seeds=[seed])) == [("UNKNOWN_PRODUCER", 100)]


def test_two_seeds_for_one_producer_are_refused():
    with pytest.raises(ValueError, match="two seeds"):
        replay([], seeds=[SEED, SEED])


# ------------------------------------------------------------------------------------------------
# Partition-level rules, log order, several partitions
# ------------------------------------------------------------------------------------------------
def test_offset_overlap_uses_the_running_maximum():
    log = [Batch(T, 0, 0, 9), Batch(T, 0, 10, 11), Batch(T, 0, 5, 5, magic=1)]
    # log order: 0-9, 5-5, 10-11 -> 5-5 overlaps (max 9); 10-11 does not
    assert [
        (f.finding_type, f.base_offset, f.previous_offset, f.severity) for f in replay(log)
    ] == [("OFFSET_OVERLAP", 5, 9, "CRITICAL")]
    # 15-15 overlaps the first batch, not the one just before it
    log = [Batch(T, 0, 0, 20), Batch(T, 0, 15, 15), Batch(T, 0, 10, 12)]
    assert [(f.base_offset, f.previous_offset) for f in replay(log)] == [(10, 20), (15, 20)]


def test_leader_epoch_regression_ignores_null_and_negative():
    log = [
        Batch(T, 0, 0, 0, partition_leader_epoch=3),
        Batch(T, 0, 1, 1, partition_leader_epoch=None),
        Batch(T, 0, 2, 2, partition_leader_epoch=-1),
        Batch(T, 0, 3, 3, partition_leader_epoch=3),
        Batch(T, 0, 4, 4, partition_leader_epoch=2, producer_id=8),
    ]
    f = only(replay(log))
    assert (f.finding_type, f.base_offset, f.severity, f.producer_id) == (
        "LEADER_EPOCH_REGRESSION", 4, "ERROR", 8
    )  # fmt: skip


def test_input_order_does_not_matter_and_ties_are_broken_on_batch_fields():
    log = [data(0, seq=0), data(1, seq=1), data(2, seq=2, n=3), data(5, seq=5)]
    shuffled = [log[2], log[0], log[3], log[1]]
    assert replay(shuffled) == replay(log) == []
    # two rows with the same offsets: ordered by producer id, then base sequence (doc "Log
    # order"), whatever the input order
    a, b = data(6, seq=6, ts=1), data(6, seq=7, ts=2)
    assert kinds(replay([*log, a, b])) == kinds(replay([*log, b, a])) == [("OFFSET_OVERLAP", 6)]
    # the same header twice (only the timestamp differs): one batch exported twice, in either
    # order an OFFSET_OVERLAP and nothing else (doc "Scope")
    c, d = data(6, seq=6, ts=3), data(6, seq=6, ts=4)
    assert kinds(replay([*log, c, d])) == kinds(replay([*log, d, c])) == [("OFFSET_OVERLAP", 6)]


def test_partitions_are_independent_and_findings_sorted():
    log = [
        data(1, seq=3, partition=1),
        data(0, seq=0, partition=1),
        data(0, seq=0, topic="b"),
        data(1, seq=0, topic="b"),
        data(0, seq=2, topic="a"),
    ]
    found = replay(log)
    assert [(f.topic, f.partition, f.base_offset, f.finding_type) for f in found] == [
        ("a", 0, 0, "UNKNOWN_PRODUCER"),
        ("b", 0, 1, "DUPLICATE_BATCH"),
        (T, 1, 1, "SEQUENCE_GAP"),
    ]


def test_severities_can_be_overridden_but_benign_causes_stay_info():
    sev = {"SEQUENCE_GAP": "WARNING", "UNKNOWN_PRODUCER": "ERROR"}
    assert only(replay([data(0, seq=0), data(1, seq=5)], severities=sev)).severity == "WARNING"
    assert only(replay([data(100, seq=5)], severities=sev)).severity == "INFO"
    assert only(replay([data(0, seq=5)], severities=sev)).severity == "ERROR"


# ------------------------------------------------------------------------------------------------
# Properties over generated histories
# ------------------------------------------------------------------------------------------------
PROPERTY = settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def run(history: History):
    return replay(history.batches, seeds=history.seeds, log_start_offsets=history.log_start_offsets)


@PROPERTY
@given(histories())
def test_generated_histories_model_never_raises_at_most_one_producer_finding_per_batch(history):
    found = run(history)
    per_batch: dict[tuple, int] = {}
    for f in found:
        if f.finding_type in PRODUCER_STATE_TYPES:
            key = (f.base_offset, f.last_offset, f.producer_id)
            per_batch[key] = per_batch.get(key, 0) + 1
    for key, count in per_batch.items():
        rows = [b for b in history.batches if (b.base_offset, b.last_offset, b.producer_id) == key]
        assert count <= len(rows)
    assert found == sorted(found, key=Finding.sort_key)
    assert all(f.topic == history.topic and f.partition == history.partition for f in found)
    assert_within_kafka_int_ranges(history)


def assert_within_kafka_int_ranges(history: History) -> None:
    assert 0 < len(history.batches) <= 40
    int16, int32, int64 = 2**15 - 1, 2**31 - 1, 2**63 - 1
    for b in history.batches:
        assert 0 <= b.base_offset <= b.last_offset <= int64
        assert -1 <= b.producer_id <= int64
        assert -1 <= b.producer_epoch <= int16
        assert -1 <= b.base_sequence <= int32
        assert b.last_sequence is None or -1 <= b.last_sequence <= int32
        assert b.record_count is None or 0 <= b.record_count <= int32
        assert b.coordinator_epoch is None or 0 <= b.coordinator_epoch <= int32
        assert b.partition_leader_epoch is None or 0 <= b.partition_leader_epoch <= int32
        assert 0 <= b.partition <= int32
        assert b.max_timestamp is None or 0 <= b.max_timestamp <= int64
    first_offset = min(b.base_offset for b in history.batches)
    for s in history.seeds:
        assert 0 <= s.producer_epoch <= int16 and 0 <= s.producer_id <= int64
        assert s.txn_first_offset is None or 0 <= s.txn_first_offset < first_offset
        for sb in s.batches:
            assert 0 <= sb.base_sequence <= int32 and 0 <= sb.last_sequence <= int32
            assert 0 <= sb.base_offset <= sb.last_offset < first_offset


@PROPERTY
@given(histories(faults=False))
def test_clean_histories_have_no_findings(history):
    assert run(history) == []


@settings(PROPERTY, max_examples=60)
@given(histories(topic="__consumer_offsets"))
def test_coordinator_topic_histories_have_no_sequence_findings(history):
    sequence_types = {
        "DUPLICATE_BATCH",
        "SEQUENCE_GAP",
        "SEQUENCE_OVERLAP",
        "SEQUENCE_RESET",
        "NEW_EPOCH_NONZERO_SEQUENCE",
        "UNKNOWN_PRODUCER",
    }
    assert not {f.finding_type for f in run(history)} & sequence_types


@settings(PROPERTY, max_examples=25)
@given(many_histories(4), st.randoms(use_true_random=False))
def test_partitions_replay_independently(hs, rnd):
    assert len({(h.topic, h.partition) for h in hs}) == 4
    # Interleave the partitions at random, keeping each partition's input order (ties in log order
    # are broken by input position).
    queues = [list(h.batches) for h in hs]
    batches = []
    while any(queues):
        queue = rnd.choice([q for q in queues if q])
        batches.append(queue.pop(0))
    combined = replay(
        batches,
        seeds=[s for h in hs for s in h.seeds],
        log_start_offsets={k: v for h in hs for k, v in (h.log_start_offsets or {}).items()},
    )
    separate = sorted((f for h in hs for f in run(h)), key=Finding.sort_key)
    assert combined == separate


def test_generator_produces_every_finding_type_and_cause():
    wanted = {(t, None) for t in PRODUCER_STATE_TYPES} | {
        ("OFFSET_OVERLAP", None),
        ("LEADER_EPOCH_REGRESSION", None),
        ("CORRUPT_BATCH", None),
        ("UNKNOWN_PRODUCER", "PRODUCER_EXPIRY"),
        ("UNKNOWN_PRODUCER", "LOG_START"),
        ("UNKNOWN_PRODUCER", "UNEXPLAINED"),
        ("SEQUENCE_GAP", "LOG_START"),
        ("SEQUENCE_GAP", "UNEXPLAINED"),
        ("SEQUENCE_RESET", "LOG_START"),
        ("DUPLICATE_BATCH", "OUT_OF_ORDER_SEQUENCE_NUMBER"),
    }
    seen: set[tuple] = set()

    def everything_seen(history: History) -> bool:
        for f in run(history):
            seen.update({(f.finding_type, None), (f.finding_type, f.cause)})
            seen.add((f.finding_type, f.kafka_error))
        return wanted <= seen

    find(
        histories(),
        everything_seen,
        settings=settings(max_examples=3000, phases=[Phase.generate], database=None, deadline=None),
        random=random.Random(0),
    )
