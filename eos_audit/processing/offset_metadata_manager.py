"""The group coordinator's offset store, replayed over one `__consumer_offsets` partition.

Kafka's `OffsetMetadataManager` (group-coordinator, 3.7+; `GroupMetadataManager.scala`'s loader
before) rebuilds the committed offsets of a partition's groups from its log, record by record in
offset order. This module is that replay, with the history kept: every OffsetCommit record gives
one `OffsetRow` saying what became of it, and the processing rules (docs/rules.md, "Exactly-once
processing") are checked where Kafka's state changes.

The materialization rule (`OffsetMetadataManager.replay` and `replayEndTransactionMarker`):

- a record of a batch without a producer id (a plain OffsetCommit) is stored at once;
- a record of a transactional producer's batch (a TxnOffsetCommit) waits in
  `pendingTransactionalOffsets[producerId][group, topic, partition]`, keyed by the producer id
  only (a later record of the same producer for the same key replaces it);
- that producer's COMMIT marker in this partition stores each of its pending offsets whose record
  offset is above the record offset of the stored value (`OffsetAndMetadata.recordOffset`,
  KAFKA-14505), and drops the others; its ABORT marker drops them all; a marker with nothing
  pending does nothing;
- a tombstone removes the stored value and every producer's pending value of the key.

Whether a group is Empty, which tells an operator's reset from a member's late commit, comes from
its membership records: a classic group's GroupMetadata record (its member count), and a KIP-848
consumer group's ConsumerGroupMemberMetadata records, one per member, whose tombstone Kafka writes
when the member leaves (`GroupMetadataManager.removeMember`); the group is Empty when none is
left (`ConsumerGroup.maybeUpdateGroupState`). A group without any membership record is a "simple
consumer group": `OffsetMetadataManager.replay` of an OffsetCommit record of a group that does
not exist creates it, an Empty classic group without a protocol type (consumers that assign()
their partitions and commit, such as Flink's Kafka source). A group is not taken as Empty, but
as UNKNOWN, where the partition holds records that may hold its members and that the replay
cannot read (`reads_no_membership`): the group's own, or a record whose group the export does
not show. Only an emptied group's plain commit is taken for an operator's reset (it does not mix
the group's commits, nor pass an open transaction's input); a simple group's may be its
application's (docs/rules.md#offset-rewind).

A plain commit's producer id is -1 (`RecordBatch.NO_PRODUCER_ID`): Kafka 4.x tells the two kinds
by the producer id, not by the batch's transactional flag, and so does this replay.

This module is the readable reference of the rule. An audit runs the same rule compiled, over
Arrow columns (`offset_kernel`, through `offset_runner` inside `coordinator_audit`'s
`mapInArrow`): tests/processing/test_offset_kernel.py replays random streams through both and
requires the same rows and findings, so a change to the rule is made in both.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

NO_PRODUCER_ID = -1

# What became of an OffsetCommit record (consumer_offsets.outcome).
APPLIED = "APPLIED"  # it became the group's committed offset
SKIPPED = "SKIPPED"  # committed, but the stored value came from a later record (KAFKA-14505)
ABORTED = "ABORTED"  # its transaction aborted
PENDING = "PENDING"  # its transaction had no marker in this partition by the export's end
REPLACED = "REPLACED"  # the same producer wrote the key again before its marker
CLEARED = "CLEARED"  # a tombstone removed the key while the record was pending
DELETED = "DELETED"  # the record is a tombstone: the key's committed offset was removed

PLAIN, TRANSACTIONAL, TOMBSTONE = "PLAIN", "TRANSACTIONAL", "TOMBSTONE"

# The record types the replay reads: OffsetCommit (0, 1), a classic group's GroupMetadata (2), a
# KIP-848 consumer group's member (5).
READ_TYPES = (0, 1, 2, 5)
# A KIP-848 consumer group's records other than its members' (ConsumerGroupMetadata,
# PartitionMetadata, TargetAssignmentMetadata, TargetAssignmentMember, CurrentMemberAssignment,
# RegularExpression): such a group's members are its member records (type 5), so these say
# nothing of its membership the replay needs.
CONSUMER_GROUP_TYPES_WITHOUT_MEMBERS = (3, 4, 6, 7, 8, 16)

# What the membership records say of a group (`OffsetMetadataManager._membership`).
MEMBERS = "MEMBERS"  # a member is there
EMPTIED = "EMPTIED"  # its records show it has no member
SIMPLE = "SIMPLE"  # no membership record: a simple consumer group, Empty in Kafka
UNKNOWN = "UNKNOWN"  # its members may be in records the replay cannot read

# Findings and causes (eos_audit.findings registry).
OFFSET_REWIND = "OFFSET_REWIND"
MIXED_OFFSET_COMMITS = "MIXED_OFFSET_COMMITS"
CONCURRENT_OFFSET_OWNERS = "CONCURRENT_OFFSET_OWNERS"
CAUSE_TRANSACTIONAL = "TRANSACTIONAL"
CAUSE_LATE_COMMIT = "LATE_COMMIT"
CAUSE_ADMIN_RESET = "ADMIN_RESET"
CAUSE_EXPIRED_RESET = "EXPIRED_RESET"
CAUSE_PLAIN_AND_TRANSACTIONAL = "PLAIN_AND_TRANSACTIONAL"
CAUSE_ABORTED_RANGE_COMMITTED = "ABORTED_RANGE_COMMITTED"

Key = tuple[str, str, int]  # group id, topic, partition


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of a `__consumer_offsets` partition, in offset order: a record or a marker.

    A marker (`control_type` COMMIT or ABORT) comes from the partition's control batches; a
    record from the coordinator record decoders (`record_type` 0/1 OffsetCommit, 2 GroupMetadata,
    5 ConsumerGroupMemberMetadata, and the records the replay does not read, `is_skipped` among
    them, with their group where the export shows it).
    """

    offset: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = -1
    control_type: str | None = None
    record_type: int | None = None
    is_tombstone: bool = False
    is_skipped: bool = False
    group_id: str | None = None
    topic: str | None = None
    partition: int | None = None
    committed_offset: int | None = None
    leader_epoch: int | None = None
    metadata: str | None = None
    commit_timestamp_ms: int | None = None
    member_count: int | None = None
    member_id: str | None = None
    timestamp: int | None = None
    source: str | None = None


@dataclass(frozen=True, slots=True)
class Finding:
    """A processing rule broken where an OffsetCommit record was replayed."""

    finding_type: str
    cause: str | None
    previous_committed_offset: int | None = None
    previous_record_offset: int | None = None
    other_producer_id: int | None = None
    other_record_offset: int | None = None
    # An input range whose transaction aborted, [aborted_from, aborted_to) (MIXED_OFFSET_COMMITS)
    aborted_from: int | None = None
    aborted_to: int | None = None


@dataclass(slots=True)
class OffsetRow:
    """One OffsetCommit record (or tombstone) and what became of it: a consumer_offsets row."""

    event: Event
    kind: str  # PLAIN, TRANSACTIONAL or TOMBSTONE
    outcome: str | None = None
    marker_offset: int | None = None  # the COMMIT or ABORT marker that decided it
    previous_committed_offset: int | None = None  # the stored value it replaced, when applied
    findings: list[Finding] = field(default_factory=list)


@dataclass(slots=True)
class _Pending:
    """A transactional offset waiting for its producer's marker (pendingTransactionalOffsets)."""

    row: OffsetRow
    # Other producers that held a pending offset of the same key at the same time.
    overlapping: set[int] = field(default_factory=set)
    # The first plain commit of the key while this offset was pending, and the committed offset
    # it moved from: the input it passed was in this transaction (ABORTED_RANGE_COMMITTED).
    passed_by: tuple[OffsetRow, int] | None = None


@dataclass(slots=True)
class _Stored:
    """A committed offset in the store (OffsetAndMetadata with its recordOffset)."""

    committed_offset: int
    record_offset: int


def _aborted_range_committed(entry: _Pending) -> Finding | None:
    """A plain commit passed input of this transaction, which then aborted: that input is lost.

    The range is what the plain commit moved past and the transaction would have committed:
    from the committed offset before the plain commit to the lower of the two values. None when
    no plain commit passed the transaction's input.
    """
    if entry.passed_by is None:
        return None
    plain, start = entry.passed_by
    end = min(int(plain.event.committed_offset or 0), int(entry.row.event.committed_offset or 0))
    if end <= start:
        return None
    return Finding(
        MIXED_OFFSET_COMMITS,
        CAUSE_ABORTED_RANGE_COMMITTED,
        other_record_offset=plain.event.offset,
        aborted_from=start,
        aborted_to=end,
    )


def _rewind(previous: _Stored, cause: str) -> Finding:
    return Finding(
        OFFSET_REWIND, cause,
        previous_committed_offset=previous.committed_offset,
        previous_record_offset=previous.record_offset,
    )  # fmt: skip


def _key(event: Event) -> Key:
    return (event.group_id or "", event.topic or "", int(event.partition or 0))


def reads_no_membership(event: Event) -> bool:
    """A record whose group's members the replay cannot see, where they may be.

    A record of a type the replay does not read (share and streams groups' records, types Kafka
    adds), or one the decoders skipped (`kafka-dump-log.sh` 3.5-3.7 prints a member record as
    `unknown::version=5`, without its ids): its group may have members the replay cannot count.
    Not a KIP-848 consumer group's records other than its members'
    (`CONSUMER_GROUP_TYPES_WITHOUT_MEMBERS`), nor a record without a type that was not skipped
    (a tombstone `kafka-dump-log.sh` 2.4 printed without its key: an OffsetCommit's or a
    GroupMetadata's, neither a member; the kernel holds no type as -1, so a negative one not
    skipped is taken as none).
    """
    if event.control_type is not None or event.record_type in CONSUMER_GROUP_TYPES_WITHOUT_MEMBERS:
        return False
    if event.is_skipped:
        return True
    record_type = -1 if event.record_type is None else event.record_type
    return record_type >= 0 and record_type not in READ_TYPES


class OffsetMetadataManager:
    """The replayed store of one `__consumer_offsets` partition, and its history.

    Memory grows with the partition's keys and open transactions, never with its records.
    """

    def __init__(self) -> None:
        self.offsets: dict[Key, _Stored] = {}
        self.pending_transactional_offsets: dict[int, dict[Key, _Pending]] = {}
        # Producers with a pending offset, by key (openTransactionsByGroup, per key here).
        self._open_by_key: dict[Key, set[int]] = {}
        # Members of each classic group by its last GroupMetadata record (0: empty or deleted).
        self._members: dict[str, int] = {}
        # The groups whose last GroupMetadata record is a value, not a tombstone: classic groups,
        # whose members are all in that record.
        self._classic: set[str] = set()
        # The members of each consumer group (KIP-848) that have a member record and no
        # tombstone after it: ConsumerGroup.members, as its replay of those records keeps it.
        self._consumer_members: dict[str, set[str]] = {}
        # The groups with a membership record of either kind, a member tombstone ignored
        # included: the others are simple consumer groups.
        self._with_membership: set[str] = set()
        # The groups with a record whose members the replay cannot see (`reads_no_membership`),
        # and whether the partition has had such a record of a group the export does not name.
        self._unread: set[str] = set()
        self._unread_partition = False
        # The value a tombstone removed, until the key is committed again (EXPIRED_RESET).
        self._removed: dict[Key, _Stored] = {}
        # The kinds of commit each key has had (MIXED_OFFSET_COMMITS once per key).
        self._kinds: dict[Key, set[str]] = {}
        # Committed pending offsets that overlapped another producer's offset still pending,
        # until that one's marker: key -> (producer, the other producer) -> the committed row.
        self._committed_overlaps: dict[Key, dict[tuple[int, int], OffsetRow]] = {}

    def apply(self, event: Event) -> Iterator[OffsetRow]:
        """Replay the partition's next event, a marker or a record; the rows it decides."""
        if event.control_type is not None:
            return self.replay_end_transaction_marker(event)
        return self.replay(event)

    # --- records ---------------------------------------------------------------------------
    def replay(self, event: Event) -> Iterator[OffsetRow]:
        """Replay one record (OffsetMetadataManager.replay); the rows it decides."""
        if reads_no_membership(event):
            if event.group_id is None:
                self._unread_partition = True
            else:
                self._unread.add(event.group_id)
            return
        if event.is_skipped:
            return
        if event.record_type == 2:
            if event.group_id is not None:
                self._members[event.group_id] = (
                    0 if event.is_tombstone else int(event.member_count or 0)
                )
                if event.is_tombstone:
                    self._classic.discard(event.group_id)
                else:
                    self._classic.add(event.group_id)
                self._with_membership.add(event.group_id)
            return
        if event.record_type == 5:
            if event.group_id is not None and event.member_id is not None:
                self._replay_member(event.group_id, event.member_id, event.is_tombstone)
                self._with_membership.add(event.group_id)
            return
        if event.record_type not in (0, 1) or event.group_id is None:
            return
        key = _key(event)
        if event.is_tombstone:
            yield from self._replay_tombstone(key, event)
            return
        if event.producer_id == NO_PRODUCER_ID:
            row = OffsetRow(event, PLAIN)
            self._note_kind(key, row)
            self._apply(key, row)
            yield row
            return
        row = OffsetRow(event, TRANSACTIONAL)
        self._note_kind(key, row)
        pending = self.pending_transactional_offsets.setdefault(event.producer_id, {})
        replaced = pending.get(key)
        if replaced is not None:
            replaced.row.outcome = REPLACED
            yield replaced.row
        entry = (
            _Pending(row)
            if replaced is None
            else _Pending(row, replaced.overlapping, replaced.passed_by)
        )
        owners = self._open_by_key.setdefault(key, set())
        for other in owners - {event.producer_id}:
            entry.overlapping.add(other)
            self.pending_transactional_offsets[other][key].overlapping.add(event.producer_id)
        owners.add(event.producer_id)
        pending[key] = entry

    def _replay_member(self, group_id: str, member_id: str, is_tombstone: bool) -> None:
        """A consumer group's member record: the member there (a value) or gone (a tombstone).

        As `GroupMetadataManager.replay(ConsumerGroupMemberMetadataKey, ...)`: a tombstone of a
        group or member not known is ignored.
        """
        if not is_tombstone:
            self._consumer_members.setdefault(group_id, set()).add(member_id)
        elif group_id in self._consumer_members:
            self._consumer_members[group_id].discard(member_id)

    def _replay_tombstone(self, key: Key, event: Event) -> Iterator[OffsetRow]:
        removed = self.offsets.pop(key, None)
        if removed is not None:
            self._removed[key] = removed
        row = OffsetRow(event, TOMBSTONE, DELETED)
        row.previous_committed_offset = None if removed is None else removed.committed_offset
        yield row
        # The pending offsets it clears never commit: no committed one waits for them.
        self._committed_overlaps.pop(key, None)
        for producer_id in sorted(self._open_by_key.pop(key, ())):
            cleared = self.pending_transactional_offsets[producer_id].pop(key)
            cleared.row.outcome = CLEARED
            yield cleared.row

    # --- markers ---------------------------------------------------------------------------
    def replay_end_transaction_marker(self, event: Event) -> Iterator[OffsetRow]:
        """Replay one COMMIT or ABORT marker (OffsetMetadataManager.replayEndTransactionMarker)."""
        pending = self.pending_transactional_offsets.pop(event.producer_id, None)
        if not pending:
            return
        for key, entry in pending.items():
            self._open_by_key[key].discard(event.producer_id)
            if not self._open_by_key[key]:
                del self._open_by_key[key]
            row = entry.row
            row.marker_offset = event.offset
            if event.control_type != "COMMIT":
                row.outcome = ABORTED
                self._forget_overlaps(key, entry)
                lost = _aborted_range_committed(entry)
                if lost is not None:
                    row.findings.append(lost)
                yield row
                continue
            stored = self.offsets.get(key)
            if stored is not None and row.event.offset <= stored.record_offset:
                row.outcome = SKIPPED
            else:
                self._apply(key, row)
            self._check_owners(key, entry)
            yield row

    def finish(self) -> Iterator[OffsetRow]:
        """The offsets still pending at the export's end."""
        for pending in self.pending_transactional_offsets.values():
            for entry in pending.values():
                entry.row.outcome = PENDING
                yield entry.row
        self.pending_transactional_offsets.clear()
        self._open_by_key.clear()

    # --- the store and the rules -----------------------------------------------------------
    def _apply(self, key: Key, row: OffsetRow) -> None:
        """Store `row`'s offset, checking NO_REWIND and the open transactions a plain one passes."""
        event = row.event
        value = int(event.committed_offset or 0)
        previous = self.offsets.get(key)
        row.outcome = APPLIED
        if previous is not None:
            row.previous_committed_offset = previous.committed_offset
            if value < previous.committed_offset:
                row.findings.append(_rewind(previous, self._rewind_cause(row)))
        else:
            removed = self._removed.get(key)
            if removed is not None and value < removed.committed_offset:
                row.findings.append(_rewind(removed, CAUSE_EXPIRED_RESET))
        self._removed.pop(key, None)
        if row.kind == PLAIN and self._membership(event.group_id or "") != EMPTIED:
            # A plain commit while a transaction of the key is open moves the group past input
            # that transaction is processing; whether that loses it, its marker decides. Not an
            # operator's reset of the emptied group: where to start is the operator's to say. A
            # simple group's plain commit is not known to be an operator's: its application
            # commits without membership too (assign(), an auto-commit left on).
            start = -1 if previous is None else previous.committed_offset
            for producer_id in self._open_by_key.get(key, ()):
                entry = self.pending_transactional_offsets[producer_id][key]
                if value > start and entry.passed_by is None:
                    entry.passed_by = (row, max(start, 0))
        self.offsets[key] = _Stored(value, event.offset)

    def _rewind_cause(self, row: OffsetRow) -> str:
        if row.kind == TRANSACTIONAL:
            return CAUSE_TRANSACTIONAL
        # Kafka's EMPTY: the emptied group, and the simple one (no member lost a partition).
        empty = self._membership(row.event.group_id or "") in (EMPTIED, SIMPLE)
        return CAUSE_ADMIN_RESET if empty else CAUSE_LATE_COMMIT

    def _membership(self, group_id: str) -> str:
        """What the group's membership records say: MEMBERS, EMPTIED, SIMPLE or UNKNOWN.

        A classic group has no member when its last GroupMetadata record had none (or deleted
        it), a consumer group when each of its members' records was followed by its tombstone.
        Kafka holds a group as one type or the other, and a conversion between them removes the
        old type's records first (a GroupMetadata tombstone, or every member's tombstones): the
        group is EMPTIED when neither kind of record shows a member, and one of them shows it has
        none; a classic group's last GroupMetadata value holds all its members, whatever else the
        partition holds. A group without any membership record is SIMPLE: the group Kafka's
        replay of its OffsetCommit creates, Empty, without a protocol type. Records whose members
        the replay cannot see (`reads_no_membership`), of the group or of a group the export does
        not name, make one that is not a classic group UNKNOWN; so does a member's tombstone that
        removed no member the replay knew, where nothing else counts the group's members.
        """
        counts = []
        if group_id in self._consumer_members:
            counts.append(len(self._consumer_members[group_id]))
        if group_id in self._members:
            counts.append(self._members[group_id])
        if counts and max(counts) > 0:
            return MEMBERS
        if group_id in self._classic:
            return EMPTIED
        if self._unread_partition or group_id in self._unread:
            return UNKNOWN
        if counts:
            return EMPTIED
        return UNKNOWN if group_id in self._with_membership else SIMPLE

    def _note_kind(self, key: Key, row: OffsetRow) -> None:
        """MIXED_OFFSET_COMMITS at the first commit of a key of the kind it had not had.

        A plain commit while the group is emptied is an operator's (`--reset-offsets`, the admin
        API), not the application's: it does not mix the application's commits. A simple
        group's is not known to be an operator's: it mixes them.
        """
        if row.kind == PLAIN and self._membership(key[0]) == EMPTIED:
            return
        kinds = self._kinds.setdefault(key, set())
        if kinds and row.kind not in kinds and len(kinds) == 1:
            row.findings.append(Finding(MIXED_OFFSET_COMMITS, CAUSE_PLAIN_AND_TRANSACTIONAL))
        kinds.add(row.kind)

    def _check_owners(self, key: Key, entry: _Pending) -> None:
        """SINGLE_OWNER: two producers' overlapping pending offsets of a key both committed.

        The committed offset is kept for each other producer whose overlapping offset is still
        pending, until that one's marker: a COMMIT gives the finding, an ABORT forgets it (the
        offsets of two producers that overlapped, one aborted, never witness a later overlap).
        """
        producer_id = entry.row.event.producer_id
        waiting = self._committed_overlaps.get(key, {})
        for other in sorted(entry.overlapping):
            earlier = waiting.pop((other, producer_id), None)
            if earlier is not None:
                entry.row.findings.append(
                    Finding(
                        CONCURRENT_OFFSET_OWNERS,
                        None,
                        other_producer_id=other,
                        other_record_offset=earlier.event.offset,
                    )
                )
        # A producer pending now overlapped this offset: this transaction was open meanwhile.
        for other in entry.overlapping & self._open_by_key.get(key, set()):
            self._committed_overlaps.setdefault(key, {})[(producer_id, other)] = entry.row
        if key in self._committed_overlaps and not self._committed_overlaps[key]:
            del self._committed_overlaps[key]

    def _forget_overlaps(self, key: Key, entry: _Pending) -> None:
        """An aborted pending offset: the committed ones waiting for it wait no more."""
        waiting = self._committed_overlaps.get(key)
        if waiting is None:
            return
        for other in entry.overlapping:
            waiting.pop((other, entry.row.event.producer_id), None)
        if not waiting:
            del self._committed_overlaps[key]


def replay_partition(events: Iterable[Event]) -> Iterator[OffsetRow]:
    """Every OffsetCommit row of one `__consumer_offsets` partition, its events in offset order.

    Args:
        events: the partition's records and markers, sorted by offset.

    Yields:
        Each OffsetCommit record and tombstone once, with its outcome and findings, as soon as
        its outcome is known (a transactional one at its marker, or at the end as PENDING).
    """
    manager = OffsetMetadataManager()
    for event in events:
        yield from manager.apply(event)
    yield from manager.finish()
