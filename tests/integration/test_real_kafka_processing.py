"""Exactly-once processing on real brokers: the coordinator readers on logs Kafka wrote.

The processing scenarios (`tests/kafka/processing.py`) run Kafka's own TransactionalMessageCopier
(bounced with SIGTERM and SIGKILL), operators' offset resets (back to the start, and forward past
unread input), plain consumers (one of them committing beyond its input's end, one whose offset
DeleteRecords passed; on 4.x one of a KIP-848 consumer group, reset once it left) and librdkafka
transactions on a Kafka 4.x cluster (transactions v2) and a 3.9 one (v1). One export per
release (`Built.processing`) holds their input and output topics and
every partition of `__consumer_offsets` and `__transaction_state`, as segments and as
`kafka-dump-log.sh --offsets-decoder` / `--transaction-log-decoder` text. The coordinator readers
(`coordinator_segments`, `coordinator_dump_log`) decode both forms; what they decode must agree
between the forms, with the transaction markers the batch readers read, and with what Kafka did
and reported.

`replay` is a reference written for these tests: Kafka's rule for which offset a group has
committed (eos_processing.md §1.3, `OffsetMetadataManager.replay` and
`replayEndTransactionMarker`), applied to the decoded records and the markers. It is compared
with the offsets Kafka's admin API listed at the end of each scenario.
"""

from __future__ import annotations

import shutil
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from eos_audit.sources.kafka.coordinator_dump_log import (
    parse_coordinator_dump_log,
    read_coordinator_dump_log,
)
from eos_audit.sources.kafka.coordinator_keys import partition_for
from eos_audit.sources.kafka.coordinator_segments import (
    parse_coordinator_segment,
    read_coordinator_segments,
)
from eos_audit.sources.kafka.dump_log import parse_dump_log
from eos_audit.sources.kafka.segments import SOURCE_ERROR_COL, parse_segment
from tests.fixtures.segment_builder import split_entries
from tests.jars import KAFKA_3, KAFKA_4
from tests.kafka import tamper
from tests.kafka.cluster import BROKER_SETTINGS
from tests.kafka.processing import SHIFT_BY, TRANSACTION_TIMEOUT_MS, Played
from tests.kafka.scenarios import Export

pytestmark = [pytest.mark.slow, pytest.mark.kafka]

RELEASE_4 = f"kafka-{KAFKA_4}"
RELEASE_3 = f"kafka-{KAFKA_3}"
RELEASES = (RELEASE_4, RELEASE_3)
CO = "__consumer_offsets"
TS = "__transaction_state"
# The test clusters' partition counts of the two topics (Kafka's default is 50).
CO_PARTITIONS = int(BROKER_SETTINGS["offsets.topic.num.partitions"])
TS_PARTITIONS = int(BROKER_SETTINGS["transaction.state.log.num.partitions"])
FORMS = ("segments", "dump")
# What each release's decoder text leaves out of a record that the segments hold: 3.9 prints a
# transaction's state as `producerId:..,state=..,partitions=[..]` text, without the value's
# version or the transaction's start time.
NOT_PRINTED = {
    RELEASE_4: {},
    RELEASE_3: {"TransactionLog": {"value_version", "start_timestamp_ms"}},
}
# The states a transaction may come from, by state: `TransactionState.VALID_PREVIOUS_STATES` of
# Kafka 4.1's transaction coordinator, less PrepareEpochFence, the coordinator's step before a
# fencing PrepareAbort, which these logs do not hold.
VALID_PREVIOUS = {
    "Empty": {"Empty", "CompleteCommit", "CompleteAbort"},
    "Ongoing": {"Ongoing", "Empty", "CompleteCommit", "CompleteAbort"},
    "PrepareCommit": {"Ongoing"},
    "PrepareAbort": {"Ongoing", "Empty", "CompleteCommit", "CompleteAbort"},
    "CompleteCommit": {"PrepareCommit"},
    "CompleteAbort": {"PrepareAbort"},
    "Dead": {"Empty", "CompleteCommit", "CompleteAbort"},
}


@dataclass(frozen=True)
class Decoded:
    """One form of a processing export, decoded: the coordinator readers' rows (both topics, in
    log order: records, and a row per transaction marker) and the batch reader's rows of every
    partition, markers among them."""

    rows: tuple[dict, ...]
    batches: tuple[dict, ...]

    def records(self, topic: str, **equal: object) -> list[dict]:
        """The decoded records (not the markers) of `topic` whose columns have the values given."""
        return [
            r for r in self.rows
            if r["coordinator_topic"] == topic and r["control_type"] is None
            and all(r[k] == v for k, v in equal.items())
        ]  # fmt: skip

    def markers(self, topic: str, partition: int, producer_id: int | None = None) -> list[dict]:
        """The control batches of one partition (of one producer), in log order."""
        return [
            b for b in self.batches
            if b["topic"] == topic and b["partition"] == partition and b["is_control"]
            and producer_id in (None, b["producer_id"])
        ]  # fmt: skip


def _first_replica(segments: str) -> Path:
    """The first broker's folder of an export's segments (`<node-id>/`)."""
    return min(p for p in Path(segments).iterdir() if p.is_dir())


def _log_order(row: dict) -> tuple:
    return row["coordinator_topic"], row["coordinator_partition"], row["offset"]


@cache
def _decode(segments: str, dump: str, form: str) -> Decoded:
    rows: list[dict] = []
    batches: list[dict] = []
    if form == "segments":
        for log in sorted(_first_replica(segments).glob("*-*/*.log")):
            topic, _, partition = log.parent.name.rpartition("-")
            data = log.read_bytes()
            place = {"topic": topic, "partition": int(partition), "path": str(log)}
            batches += parse_segment(data, **place).to_pylist()
            if topic in (CO, TS):
                rows += parse_coordinator_segment(data, **place).to_pylist()
    else:
        for text in sorted(Path(dump).glob("*.txt")):
            data = text.read_bytes()
            batches += parse_dump_log(data, path=str(text)).to_pylist()
            rows += parse_coordinator_dump_log(data, path=str(text)).to_pylist()
    return Decoded(tuple(sorted(rows, key=_log_order)), tuple(batches))


def decoded(export: Export, form: str) -> Decoded:
    """The export's `form` (segments or dump), decoded once per process (pure Python)."""
    return _decode(export.segments, export.dump, form)


def played(export: Export, scenario: str) -> Played:
    """What a processing scenario did (the export's facts)."""
    return export.facts[scenario]


def happened(play: Played, what: str) -> list[tuple[int, dict]]:
    """(time in ms, details) of each event `what` of a scenario, in order."""
    return [(at, details) for at, event, details in play.events if event == what]


@pytest.fixture(scope="module")
def processing(real_kafka) -> dict[str, Export]:
    """The processing export of each release."""
    assert set(real_kafka.processing) == set(RELEASES)
    return real_kafka.processing


# --- the reference replay ---------------------------------------------------------------------


@dataclass(frozen=True)
class Applied:
    """An offset Kafka's rule makes a group's committed offset: at which record or marker of
    the coordinator partition, from a plain or a transactional commit."""

    at: int
    key: tuple[str, str, int]  # group, topic, partition
    offset: int
    transactional: bool


def replay(decoded_form: Decoded) -> list[Applied]:
    """Kafka's materialization of committed offsets, record by record and marker by marker.

    A plain OffsetCommit applies at once. A transactional one waits in its producer id's pending
    offsets (the producer id, not the epoch); that producer's COMMIT marker in the same partition
    applies each one whose record offset is above that of the stored value's record (KAFKA-14505),
    and its ABORT marker drops them. A tombstone removes the stored value and every pending one of
    its key (`OffsetMetadataManager.replay`, `replayEndTransactionMarker`).

    Returns:
        Each offset applied, in log order (per coordinator partition).
    """
    applied: list[Applied] = []
    stored: dict[tuple[str, str, int], tuple[int, int]] = {}  # key: (offset, record offset)
    pending: dict[tuple[int, int], dict] = {}  # (partition, producer id): {key: (offset, at)}
    events = [
        (r["coordinator_partition"], r["offset"], None, r)
        for r in decoded_form.records(CO, record_type_name="OffsetCommit")
    ] + [
        (b["partition"], b["base_offset"], b["control_type"], b)
        for b in decoded_form.batches if b["topic"] == CO and b["is_control"]
    ]  # fmt: skip
    for partition, at, marker, event in sorted(events, key=lambda e: e[:2]):
        if marker is not None:
            ended = pending.pop((partition, event["producer_id"]), {})
            for key, (offset, record_at) in ended.items():
                if marker == "COMMIT" and record_at > stored.get(key, (0, -1))[1]:
                    stored[key] = (offset, record_at)
                    applied.append(Applied(at, key, offset, True))
            continue
        key = (event["group_id"], event["committed_topic"], event["committed_partition"])
        if event["is_tombstone"]:
            stored.pop(key, None)
            for of_producer in pending.values():
                of_producer.pop(key, None)
        elif event["is_transactional"]:
            of_producer = pending.setdefault((partition, event["batch_producer_id"]), {})
            of_producer[key] = (event["committed_offset"], at)
        else:
            stored[key] = (event["committed_offset"], at)
            applied.append(Applied(at, key, event["committed_offset"], False))
    return applied


def committed(applied: list[Applied], group: str) -> dict[str, int]:
    """A group's committed offsets after `applied`, as "topic:partition": offset."""
    last = {a.key: a.offset for a in applied if a.key[0] == group}
    return {f"{topic}:{partition}": offset for (_, topic, partition), offset in last.items()}


# --- the tests --------------------------------------------------------------------------------


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("release", RELEASES)
def test_the_coordinator_readers_decode_every_record_of_real_logs(processing, release, form):
    export = processing[release]
    found = decoded(export, form)
    assert [r for r in found.rows if r[SOURCE_ERROR_COL]] == []
    assert [b for b in found.batches if b[SOURCE_ERROR_COL]] == []
    # Every record of every data batch of the coordinator partitions is a row, and no other;
    # every control batch a marker row with the batch reader's control type.
    records = [r for r in found.rows if r["control_type"] is None]
    in_batches = {
        (b["topic"], b["partition"], offset)
        for b in found.batches
        if b["topic"] in (CO, TS) and not b["is_control"]
        for offset in range(b["base_offset"], b["last_offset"] + 1)
    }
    assert {(r["coordinator_topic"], r["coordinator_partition"], r["offset"])
            for r in records} == in_batches  # fmt: skip
    assert len(records) == len(in_batches)
    marker_rows = [
        (r["coordinator_topic"], r["coordinator_partition"], r["offset"], r["control_type"],
         r["batch_producer_id"], r["record_type"])
        for r in found.rows if r["control_type"] is not None
    ]  # fmt: skip
    assert sorted(marker_rows) == sorted(
        (b["topic"], b["partition"], b["base_offset"], b["control_type"], b["producer_id"], None)
        for b in found.batches if b["topic"] in (CO, TS) and b["is_control"]
    )  # fmt: skip
    # What each release writes: OffsetCommit values v4 (flexible, KIP-915) on 4.1 and v3 on 3.9;
    # the transaction log's values v1 (with transactions v2's tagged fields) and v0.
    kinds = {
        (r["record_type_name"], r["value_version"])
        for topic in (CO, TS) for r in decoded(export, "segments").records(topic)
    }  # fmt: skip
    # On 4.x also the KIP-848 group's member records (value version 0, and the tombstone), and
    # its other records, skipped: the group's epoch (3), its target assignment (6, 7), the
    # member's assignment (8). The deleted group's tombstones have no value version.
    deleted = {("OffsetCommit", None), ("GroupMetadata", None)}
    assert kinds == deleted | (
        {("OffsetCommit", 4), ("GroupMetadata", 3), ("TransactionLog", 1),
         ("ConsumerGroupMemberMetadata", 0), ("ConsumerGroupMemberMetadata", None),
         ("ConsumerGroupMetadata", None),
         ("ConsumerGroupTargetAssignmentMetadata", None),
         ("ConsumerGroupTargetAssignmentMember", None),
         ("ConsumerGroupCurrentMemberAssignment", None)}
        if release == RELEASE_4
        else {("OffsetCommit", 3), ("GroupMetadata", 3), ("TransactionLog", 0)}
    )  # fmt: skip
    assert {r["record_type"] for r in found.rows if r["is_skipped"]} <= {3, 6, 7, 8}
    # The only tombstones are the deleted group's (its offset and its group metadata) and the
    # leaving member's: its records of types 8, 7 and 5.
    assert {r["record_type"] for r in found.rows if r["is_tombstone"]} == {1, 2} | (
        {5, 7, 8} if release == RELEASE_4 else set()
    )


@pytest.mark.parametrize("release", RELEASES)
def test_the_decoded_fields_hold_what_the_scenarios_set(processing, release):
    export = processing[release]
    found = decoded(export, "segments")
    plays = {play.group: play for play in export.facts.values()}
    by_id = {tid: play for play in export.facts.values() for tid in play.transactional_ids}
    # Each offset is a scenario's, for its input, committed when the broker wrote it (the
    # coordinator stamps the commit, then appends): a field read at a wrong place would not be.
    commits = found.records(CO, record_type_name="OffsetCommit")
    assert {r["group_id"] for r in commits} == set(plays)
    for r in commits:
        play = plays[r["group_id"]]
        assert r["committed_topic"] == play.input_topic, r
        assert 0 <= r["committed_partition"] < play.partitions, r
        if r["is_tombstone"]:
            assert play.scenario == "expired_reset", r  # the deleted group's: no value
            continue
        # At most the input's log end: its records, and its markers where transactions wrote it;
        # beyond it only where the scenario committed there on purpose.
        end = play.log_end.get(f"{play.input_topic}:{r['committed_partition']}")
        if play.scenario == "commit_beyond_log":
            assert r["committed_offset"] > end, r
        else:
            assert 0 <= r["committed_offset"] <= (end or play.input_records // play.partitions), r
        assert (r["metadata"], r["expire_timestamp_ms"], r["topic_id"]) == ("", None, None), r
        assert 0 <= r["timestamp"] - r["commit_timestamp_ms"] < 60_000, r
    # The transactions of the scenarios' producers: the timeout they asked for, and times that
    # follow one another.
    states = [r for r in found.records(TS) if r["transactional_id"] in by_id]
    assert {r["transactional_id"] for r in states} == set(by_id)
    for r in states:
        assert r["transaction_timeout_ms"] == by_id[r["transactional_id"]].transaction_timeout_ms
        assert 0 <= r["timestamp"] - r["last_update_timestamp_ms"] < 60_000, r
        if r["transaction_status"] != "Empty":
            assert r["start_timestamp_ms"] <= r["last_update_timestamp_ms"], r
    # Group metadata for the classic groups that had members: not those whose consumers are
    # assigned their partition and commit for a group they never join, nor the KIP-848 group,
    # whose members have records of their own.
    groups = found.records(CO, record_type_name="GroupMetadata")
    assigned = ("copier", "aborted_read", "two_owners", "skipped_owner", "commit_beyond_log",
                "commit_below_log_start", "transactional_rewind", "aborted_range",
                "compacted_input", "unowned_commit", "two_phase_commit")  # fmt: skip
    joined = {group for group, play in plays.items()
              if play.scenario not in (*assigned, "consumer_protocol_reset")}  # fmt: skip
    assert {r["group_id"] for r in groups} == joined
    for r in groups:
        if r["is_tombstone"]:
            assert plays[r["group_id"]].scenario == "expired_reset", r  # the deleted group's
            continue
        assert 0 <= r["timestamp"] - r["current_state_timestamp_ms"] < 60_000, r


@pytest.mark.parametrize("release", RELEASES)
def test_segments_and_decoder_dumps_give_the_same_records(processing, release):
    segments, dump = (decoded(processing[release], form).rows for form in FORMS)
    assert len(segments) == len(dump)
    for of_segments, of_dump in zip(segments, dump, strict=True):
        kind = of_segments["record_type_name"]
        left_out = NOT_PRINTED[release].get(kind, set())
        # 3.9 prints a transaction's partitions as a Scala Set, in the set's order, and a list
        # Kafka stored as null (an Empty transaction's) as `partitions=[]`.
        as_set = release == RELEASE_3 and kind == "TransactionLog"
        for column, value in of_segments.items():
            printed = of_dump[column]
            if column == "source":
                continue
            if column in left_out:
                assert printed is None, (column, of_dump)
            elif column == "transaction_partitions" and as_set:
                assert sorted(printed, key=str) == sorted(value or [], key=str), of_dump
            else:
                assert printed == value, (column, of_segments, of_dump)


def _copier_ids(export: Export) -> tuple[Played, int]:
    """The copier scenario's facts and the producer id the transaction log gave its id."""
    play = played(export, "copier")
    (transactional_id,) = play.transactional_ids
    ids = {r["producer_id"] for r in decoded(export, "segments").records(
        TS, transactional_id=transactional_id)}  # fmt: skip
    assert len(ids) == 1, ids  # one producer id, its epoch bumped by every restart
    return play, ids.pop()


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("release", RELEASES)
def test_the_copiers_offsets_are_transactional_commits_each_ended_by_its_marker(
    processing, release, form
):
    export = processing[release]
    play, producer_id = _copier_ids(export)
    found = decoded(export, form)
    partition = partition_for(play.group, CO_PARTITIONS)
    commits = found.records(CO, group_id=play.group)
    assert {r["coordinator_partition"] for r in commits} == {partition}
    assert {(r["record_type_name"], r["batch_producer_id"], r["is_transactional"],
             r["committed_topic"], r["committed_partition"]) for r in commits} == {
        ("OffsetCommit", producer_id, True, play.input_topic, 0)
    }  # fmt: skip
    # Each transaction's offsets are followed by its marker before the next one's offsets: the
    # copier commits its offsets last, and a random third of its transactions abort. (A
    # transaction may have a marker and no offsets: one that added the partition and ended.)
    markers = found.markers(CO, partition, producer_id)
    steps = sorted([(r["offset"], "offsets") for r in commits]
                   + [(m["base_offset"], m["control_type"]) for m in markers])  # fmt: skip
    outcome = {}
    for (at, kind), (_, after) in zip(steps, steps[1:], strict=False):
        if kind == "offsets":
            assert after != "offsets", steps
            outcome[at] = after
    assert steps[-1][1] == "COMMIT"
    assert set(outcome.values()) == {"COMMIT", "ABORT"}
    # The committed transactions' offsets only go up, to the input's end.
    done = [r["committed_offset"] for r in commits if outcome[r["offset"]] == "COMMIT"]
    assert done == sorted(done) and done[-1] == play.input_records


def _transaction_log(export: Export, transactional_id: str, form: str = "segments") -> list[dict]:
    return decoded(export, form).records(TS, transactional_id=transactional_id)


@pytest.mark.parametrize("release", RELEASES)
def test_the_copiers_transaction_log_goes_through_kafkas_states(processing, release):
    export = processing[release]
    play, producer_id = _copier_ids(export)
    (transactional_id,) = play.transactional_ids
    states = _transaction_log(export, transactional_id)
    assert {r["coordinator_partition"] for r in states} == {
        partition_for(transactional_id, TS_PARTITIONS)
    }
    names = [r["transaction_status"] for r in states]
    assert set(names) == {
        "Empty", "Ongoing", "PrepareCommit", "CompleteCommit", "PrepareAbort", "CompleteAbort"
    }  # fmt: skip
    assert names[0] == "Empty"
    for before, after in zip(names, names[1:], strict=False):
        assert before in VALID_PREVIOUS[after], (before, after)
    # One session per copier process (its initTransactions): three, unless one had to restart.
    assert names.count("Empty") == len(happened(play, "copier started")) >= 3
    assert {r["producer_id"] for r in states} == {producer_id}
    # Where the epoch goes up by one, and nowhere else: at each initTransactions (Empty); under
    # transactions v2 (4.x, client version 2) at each end of a transaction too (Prepare*); under
    # v1 (3.9) only where the coordinator aborts for the producer, fencing it (its timeout).
    versions = {r["client_transaction_version"] for r in states}
    assert versions == ({0, 2} if release == RELEASE_4 else {None}), versions
    assert states[0]["producer_epoch"] == 0
    bumped = {"Empty", "PrepareCommit", "PrepareAbort"} if release == RELEASE_4 else {"Empty"}
    for before, after in zip(states, states[1:], strict=False):
        step = after["producer_epoch"] - before["producer_epoch"]
        status = after["transaction_status"]
        if status in bumped:
            assert step == 1, (before, after)
        elif status == "PrepareAbort":
            assert step in (0, 1), (before, after)
        else:
            assert step == 0, (before, after)
    fenced = [
        after for before, after in zip(states, states[1:], strict=False)
        if after["transaction_status"] == "PrepareAbort"
        and after["producer_epoch"] > before["producer_epoch"]
    ]  # fmt: skip
    if release == RELEASE_3:
        assert fenced  # the killed copier's transaction at least


@pytest.mark.parametrize("release", RELEASES)
def test_each_marker_is_the_one_the_transaction_log_prepared(processing, release):
    """The k-th Prepare{Commit,Abort} listing a partition is its k-th marker of that producer:
    the same outcome at the same epoch, in the coordinator partition and the output alike."""
    export = processing[release]
    play, producer_id = _copier_ids(export)
    (transactional_id,) = play.transactional_ids
    found = decoded(export, "segments")
    prepared = [r for r in _transaction_log(export, transactional_id)
                if r["transaction_status"] in ("PrepareCommit", "PrepareAbort")]  # fmt: skip
    for topic, partition in (
        (CO, partition_for(play.group, CO_PARTITIONS)), (play.output_topic, 0)
    ):
        listed = [
            ("COMMIT" if r["transaction_status"] == "PrepareCommit" else "ABORT",
             r["producer_epoch"])
            for r in prepared
            if {"topic": topic, "partition": partition} in r["transaction_partitions"]
        ]  # fmt: skip
        written = [(m["control_type"], m["producer_epoch"])
                   for m in found.markers(topic, partition, producer_id)]  # fmt: skip
        assert written == listed, topic
    # Each transactional batch of offsets is in a transaction the log had Ongoing at its epoch,
    # with the coordinator partition listed; under v2 its marker's epoch is one above.
    ongoing = {
        r["producer_epoch"] for r in _transaction_log(export, transactional_id)
        if r["transaction_status"] == "Ongoing"
        and {"topic": CO, "partition": partition_for(play.group, CO_PARTITIONS)}
        in r["transaction_partitions"]
    }  # fmt: skip
    commits = found.records(CO, group_id=play.group)
    assert {r["batch_producer_epoch"] for r in commits} <= ongoing
    if release == RELEASE_4:
        markers = found.markers(CO, partition_for(play.group, CO_PARTITIONS), producer_id)
        following = {m["base_offset"]: m["producer_epoch"] for m in markers}
        for r in commits:
            after = min(offset for offset in following if offset > r["offset"])
            assert following[after] == r["batch_producer_epoch"] + 1, r


@pytest.mark.parametrize("release", RELEASES)
def test_a_killed_copiers_transaction_is_aborted_by_the_coordinator_at_its_timeout(
    processing, release
):
    export = processing[release]
    play, _ = _copier_ids(export)
    (transactional_id,) = play.transactional_ids
    ((killed_at, kill),) = happened(play, "copier killed")
    assert (kill["signal"], kill["exit"], kill["left_open"]) == ("SIGKILL", -9, True)
    states = _transaction_log(export, transactional_id)
    before = [r for r in states if r["timestamp"] <= killed_at]
    after = [r for r in states if r["timestamp"] > killed_at]
    # The killed producer's transaction was Ongoing, with the output written.
    assert before[-1]["transaction_status"] == "Ongoing"
    # Nobody ended it until its timeout passed: the coordinator aborted it then, with the epoch
    # bumped (fencing the dead producer); the copier was restarted after that (the scenario waits
    # for the abort), and its initTransactions began a session at a higher epoch (Empty).
    aborted, completed, restarted = after[:3]
    assert [r["transaction_status"] for r in after[:3]] == [
        "PrepareAbort", "CompleteAbort", "Empty"
    ]  # fmt: skip
    assert aborted["producer_epoch"] == before[-1]["producer_epoch"] + 1
    assert aborted["timestamp"] - before[-1]["start_timestamp_ms"] >= TRANSACTION_TIMEOUT_MS
    assert restarted["producer_epoch"] > aborted["producer_epoch"]
    assert aborted["transaction_partitions"] == before[-1]["transaction_partitions"]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("release", RELEASES)
def test_kafkas_rule_on_the_decoded_log_gives_the_offsets_kafka_listed(processing, release, form):
    export = processing[release]
    applied = replay(decoded(export, form))
    for play in export.facts.values():
        assert committed(applied, play.group) == play.committed, play.scenario
    assert played(export, "copier").committed == played(export, "copier").log_end


@pytest.mark.parametrize("release", RELEASES)
def test_an_operators_reset_is_a_plain_commit_while_the_group_is_empty(processing, release):
    export = processing[release]
    play = played(export, "admin_reset")
    found = decoded(export, "segments")
    records = found.records(CO, group_id=play.group)
    commits = [r for r in records if r["record_type_name"] == "OffsetCommit"]
    groups = [r for r in records if r["record_type_name"] == "GroupMetadata"]
    # The reset: one plain batch (no producer) of the two partitions, at offset 0, written after
    # the copier ended, as kafka-consumer-groups printed it.
    reset = [r for r in commits if not r["is_transactional"]]
    assert sorted((r["batch_producer_id"], r["committed_partition"], r["committed_offset"])
                  for r in reset) == [(-1, 0, 0), (-1, 1, 0)]  # fmt: skip
    assert len({r["base_offset"] for r in reset}) == 1
    assert reset == commits[-2:]
    ((finished_at, _),) = happened(play, "copier finished")
    assert reset[0]["commit_timestamp_ms"] >= finished_at
    # GROUP TOPIC PARTITION NEW-OFFSET, a row per partition (3.9 prints no line breaks).
    words = play.tool_output["reset"].split()
    assert words[:4] == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    printed = sorted(tuple(words[i : i + 4]) for i in range(4, len(words), 4))
    assert printed == [(play.group, play.input_topic, "0", "0"), (play.group, play.input_topic,
                                                                  "1", "0")]  # fmt: skip
    # Before it, the group had the copier's consumer as its member, which left: the last
    # GroupMetadata record before the reset says Empty (no member), at a later generation.
    before = [g for g in groups if g["offset"] < reset[0]["offset"]]
    member = next(g for g in before if g["member_count"] == 1)
    assert (member["protocol_type"], member["protocol"]) == ("consumer", "range")
    assert member["leader"].startswith(f"consumer-{play.group}-")
    assert (before[-1]["member_count"], before[-1]["protocol"]) == (0, None)
    assert before[-1]["generation"] == member["generation"] + 1
    # The offsets went down from the input's end to 0: what an audit calls a rewind.
    (copied,) = [details["committed"] for _, details in happened(play, "copied")]
    assert copied == play.log_end and play.committed == dict.fromkeys(copied, 0)


def test_a_kip_848_groups_member_leaves_by_its_records_tombstone_before_the_reset(processing):
    export = processing[RELEASE_4]
    play = played(export, "consumer_protocol_reset")
    records = decoded(export, "segments").records(CO, group_id=play.group)
    # No GroupMetadata: the group's one member is its ConsumerGroupMemberMetadata records, the
    # last of them the tombstone Kafka writes when it leaves. Its other records (its epoch, its
    # assignments) are skipped, and keep the group's id.
    assert {r["record_type_name"] for r in records if not r["is_skipped"]} == {
        "ConsumerGroupMemberMetadata", "OffsetCommit"
    }  # fmt: skip
    assert {r["record_type"] for r in records if r["is_skipped"]} <= {3, 6, 7, 8}
    members = [r for r in records if r["record_type_name"] == "ConsumerGroupMemberMetadata"]
    assert len({r["member_id"] for r in members}) == 1
    assert [r["is_tombstone"] for r in members] == [False] * (len(members) - 1) + [True]
    # Its plain commit of what it read, then the reset of both partitions to 0, after it left.
    commits = [r for r in records if r["record_type_name"] == "OffsetCommit"]
    assert {(r["batch_producer_id"], r["committed_offset"]) for r in commits[-2:]} == {(-1, 0)}
    order = [members[0], commits[0], members[-1], commits[-2]]
    assert [r["offset"] for r in order] == sorted(r["offset"] for r in order)
    ((_, closed),) = happened(play, "consumer closed")
    assert closed["committed"] == play.log_end and play.committed == dict.fromkeys(play.log_end, 0)


@pytest.mark.parametrize("release", RELEASES)
def test_a_plain_consumer_commits_after_the_copier_in_the_same_group(processing, release):
    export = processing[release]
    play = played(export, "auto_commit")
    found = decoded(export, "segments")
    commits = found.records(CO, group_id=play.group, record_type_name="OffsetCommit")
    transactional = [r for r in commits if r["is_transactional"]]
    plain = [r for r in commits if not r["is_transactional"]]
    assert transactional and plain
    # The copier's transactional commits, then librdkafka's plain ones (no producer; a leader
    # epoch, which the copier does not send), up to the input's end.
    assert max(r["offset"] for r in transactional) < min(r["offset"] for r in plain)
    assert {(r["batch_producer_id"], r["leader_epoch"]) for r in plain} == {(-1, 0)}
    assert {r["leader_epoch"] for r in transactional} == {-1}
    assert plain[-1]["committed_offset"] == play.input_records
    (copied,) = [details["committed"] for _, details in happened(play, "copied")]
    applied = replay(found)
    by_source = {a.transactional: a.offset for a in applied if a.key[0] == play.group}
    assert by_source == {True: copied[f"{play.input_topic}:0"], False: play.input_records}
    member = next(r for r in found.records(CO, group_id=play.group) if r["member_count"])
    assert member["leader"].startswith("rdkafka-")


@pytest.mark.parametrize("release", RELEASES)
def test_a_forward_reset_moves_the_group_past_input_no_copier_read(processing, release):
    export = processing[release]
    play = played(export, "forward_reset")
    ((_, reset),) = happened(play, "offsets reset")
    ((key, (first, end)),) = reset["skipped"].items()
    assert key == f"{play.input_topic}:0" and end - first == SHIFT_BY
    # The first copier copied what the input held then; the operator's one plain commit moved
    # the group past part of what was written after; the second copier went on from there to
    # the end.
    written = [details["records"] for _, details in happened(play, "input written")]
    applied = [a for a in replay(decoded(export, "segments")) if a.key[0] == play.group]
    (plain,) = [a for a in applied if not a.transactional]
    before = [a.offset for a in applied if a.at < plain.at]
    after = [a.offset for a in applied if a.at > plain.at]
    assert (before[-1], plain.offset) == (first, end) and first == written[0]
    assert after == sorted(after) and after[0] > end and after[-1] == sum(written)
    # GROUP TOPIC PARTITION NEW-OFFSET: the offset kafka-consumer-groups committed.
    words = play.tool_output["reset"].split()
    assert words[4:] == [play.group, play.input_topic, "0", str(end)]


@pytest.mark.parametrize("release", RELEASES)
def test_deleted_records_leave_the_export_starting_at_the_new_log_start(processing, release):
    export = processing[release]
    play = played(export, "commit_below_log_start")
    ((_, deleted),) = happened(play, "records deleted")
    low = deleted["low_watermark"]
    assert low == deleted["before"] > play.committed[f"{play.input_topic}:0"]
    # Retention deleted the segments below the new log start before the export: both forms'
    # first batch of the input starts there. The log directory's checkpoint does not name the
    # partition: a broker checkpoints a log start only above its first segment's base offset
    # (`LogManager.checkpointLogStartOffsetsInDir`), and reads it from that segment otherwise.
    for form in FORMS:
        batches = [b for b in decoded(export, form).batches if b["topic"] == play.input_topic]
        assert min(b["base_offset"] for b in batches) == low, form
    checkpoint = _first_replica(export.segments) / "log-start-offset-checkpoint"
    assert f"{play.input_topic} 0 " not in checkpoint.read_text()


# --- a tampered copy -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rewritten(processing, tmp_path_factory) -> dict[str, tuple[Decoded, int]]:
    """Per release, a copy of the copier's `__consumer_offsets` partition in which the first
    ABORT marker that ends one of the copier's offset commits says COMMIT (its CRC computed
    again), decoded; and that marker's offset."""
    copies = {}
    for release, export in processing.items():
        play, producer_id = _copier_ids(export)
        name = f"{CO}-{partition_for(play.group, CO_PARTITIONS)}"
        into = tmp_path_factory.mktemp(f"rewritten-{release}")
        shutil.copytree(_first_replica(export.segments) / name, into / "1" / name)
        (log,) = sorted((into / "1" / name).glob("*.log"))
        batches = tamper.batches(log)
        position, view = next(
            (position, view)
            for (_, _, before), (position, _, view) in zip(batches, batches[1:], strict=False)
            if view["control_type"] == "ABORT" and view["producer_id"] == producer_id
            and not before["is_control"] and before["producer_id"] == producer_id
        )  # fmt: skip
        tamper.rewrite_marker(log, position, "COMMIT")
        copies[release] = (_decode(str(into), "", "segments"), view["base_offset"])
    return copies


@pytest.mark.parametrize("release", RELEASES)
def test_an_abort_marker_rewritten_to_commit_makes_the_aborted_offset_committed(
    processing, rewritten, release
):
    export = processing[release]
    play, producer_id = _copier_ids(export)
    tampered, at = rewritten[release]
    original = decoded(export, "segments")
    partition = partition_for(play.group, CO_PARTITIONS)

    def without_source(rows: list[dict]) -> list[dict]:
        return [{**row, "source": None} for row in rows]

    # The records decode as before: a marker is not the records readers' to read.
    assert without_source(tampered.records(CO)) == without_source(
        original.records(CO, coordinator_partition=partition)
    )
    # The batch reader reads the marker as the COMMIT it now says, its CRC valid.
    (marker,) = [m for m in tampered.markers(CO, partition) if m["base_offset"] == at]
    assert (marker["control_type"], marker["crc_valid"]) == ("COMMIT", True)
    # Kafka's rule applies there the offset the copier had aborted; the transaction log says
    # that transaction was prepared to abort.
    aborted = [r for r in original.records(CO, group_id=play.group) if r["offset"] < at][-1]
    was, now = replay(original), replay(tampered)
    assert [a for a in now if a not in was] == [
        Applied(at, (play.group, play.input_topic, 0), aborted["committed_offset"], True)
    ]
    assert committed(now, play.group) == committed(was, play.group) == play.committed
    prepared = [
        r["transaction_status"] for r in _transaction_log(export, play.transactional_ids[0])
        if r["transaction_status"] in ("PrepareCommit", "PrepareAbort")
        and {"topic": CO, "partition": partition} in r["transaction_partitions"]
    ]  # fmt: skip
    markers = tampered.markers(CO, partition, producer_id)
    index = [m["base_offset"] for m in markers].index(at)
    assert (prepared[index], markers[index]["control_type"]) == ("PrepareAbort", "COMMIT")


# --- compressed coordinator batches --------------------------------------------------------------

# Kafka's codecs (`offsets.topic.compression.codec` 1 to 4), by Kafka's names.
CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _data_batch_codecs(segments: Path) -> set[int]:
    """The codecs of the `__consumer_offsets` data batches under `segments` (a broker's folder;
    control batches are never compressed)."""
    return {
        struct.unpack_from(">h", entry, 21)[0] & 0x07
        for log in segments.glob(f"{CO}-*/*.log")
        for _, entry in split_entries(log.read_bytes())
        if not struct.unpack_from(">h", entry, 21)[0] & 0x20
    }


def test_the_4x_group_coordinator_compressed_its_offsets_as_configured(processing):
    """The 4.x cluster's coordinator writes `__consumer_offsets` in zstd batches
    (`offsets.topic.compression.codec` 4), so its export's audit reads a broker's zstd; 3.9's
    are uncompressed, Kafka's default."""
    assert _data_batch_codecs(_first_replica(processing[RELEASE_4].segments)) == {CODECS["zstd"]}
    assert _data_batch_codecs(_first_replica(processing[RELEASE_3].segments)) == {0}


@pytest.fixture(scope="module")
def recompressed(processing, tmp_path_factory) -> dict[str, Path]:
    """Per codec, a copy of the 3.9 export's `__consumer_offsets` partitions (uncompressed) whose
    data batches Kafka's own record writer compressed with that codec (`tamper.recompress`), as a
    group coordinator with `offsets.topic.compression.codec` writes them."""
    from tests.jars import KAFKA_3_JARS
    from tests.kafka.clients import compile_client

    classes = compile_client(KAFKA_3_JARS, tmp_path_factory.mktemp("classes"))
    copies = {}
    for codec in CODECS:
        into = tmp_path_factory.mktemp(f"recompressed-{codec}") / "1"
        for partition in _first_replica(processing[RELEASE_3].segments).glob(f"{CO}-*"):
            shutil.copytree(partition, into / partition.name)
            for log in (into / partition.name).glob("*.log"):
                tamper.recompress(KAFKA_3_JARS, classes, codec, log)
        copies[codec] = into.parent
    return copies


@pytest.mark.parametrize("codec", CODECS)
def test_coordinator_records_in_batches_kafka_compressed_decode_as_uncompressed(
    processing, recompressed, codec
):
    """Every codec Kafka writes a batch with is read: the records and markers decode as from
    the uncompressed original, and none is quarantined."""
    copy = _decode(str(recompressed[codec]), "", "segments")
    original = decoded(processing[RELEASE_3], "segments")

    def without_source(rows) -> list[dict]:
        # A row's source names its batch's byte position, which the codec moves.
        return [{**row, "source": None} for row in rows if row["coordinator_topic"] == CO]

    assert without_source(copy.rows) == without_source(original.rows)
    assert all(row[SOURCE_ERROR_COL] is None for row in copy.rows)
    assert _data_batch_codecs(recompressed[codec] / "1") == {CODECS[codec]}


# --- Spark: the batch audit and the coordinator readers ------------------------------------------


@pytest.mark.cost(20)
@pytest.mark.parametrize("release", RELEASES)
def test_the_batch_audit_finds_no_fault_in_the_processing_logs(spark, processing, release):
    # The copier's bounces, aborts and fencing, an operator's resets, mixed commits and commits
    # outside the input's log are no fault of the log: every partition, the coordinator ones
    # too, is as a broker writes it. One release at a time: the two clusters' coordinator
    # partitions have the same names.
    from tests.integration.test_real_kafka import above_info, audit

    export = processing[release]
    found = audit(spark, export.segments)
    assert above_info(found.findings) == [], found.findings
    topics = {topic for play in export.facts.values()
              for topic in (play.input_topic, play.output_topic)}  # fmt: skip
    assert set(found.batches) == topics | {CO, TS}
    assert sum(found.batches.values()) == export.batches




def _rows_of(df) -> list[dict]:
    return sorted(
        (row.asDict(recursive=True) for row in df.collect()),
        key=lambda r: (r["source"].rpartition(":")[0], r["coordinator_topic"],
                       r["coordinator_partition"], r["offset"]),
    )  # fmt: skip


def _pure(rows: Iterator[dict]) -> list[dict]:
    return sorted(
        rows, key=lambda r: (r["source"].rpartition(":")[0], r["coordinator_topic"],
                             r["coordinator_partition"], r["offset"]),
    )  # fmt: skip


def test_the_spark_readers_give_the_pure_parsers_rows(spark, processing):
    exports = [processing[release] for release in RELEASES]
    segments = _rows_of(read_coordinator_segments(spark, [e.segments for e in exports]))
    assert segments == _pure(r for e in exports for r in decoded(e, "segments").rows)
    # The dump folders hold the other topics' dump.txt too: the reader leaves their sections.
    dumps = _rows_of(read_coordinator_dump_log(spark, [e.dump for e in exports]))
    assert dumps == _pure(r for e in exports for r in decoded(e, "dump").rows)
