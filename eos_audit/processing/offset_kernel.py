"""The group coordinator's offset replay as a compiled loop: `offset_metadata_manager` over columns.

The same rule, in the subset numba compiles (`replay.kernel_cache.compile_in_place`, as the
broker replay's kernel: no Python objects, no allocation, state in record arrays carried from
one Arrow batch to the next). `offset_metadata_manager` stays the readable reference and the
tests' oracle (tests/processing/test_offset_kernel.py replays random event streams through
both); each function here says which of its methods it mirrors. `EOS_AUDIT_JIT=0` leaves the
functions plain Python (`offset_runner.uncompiled_kernel` loads such a copy for the tests).

Strings never enter it: the runner (`offset_runner`) numbers each group id and topic of a task
and hands over one `OFFSET_EVENT` record per event; a key (group, topic, partition) gets a slot
in `KEY_STATE` through an open-addressing table, a producer id one in `PRODUCER`. An OffsetCommit
record is named by its row (`ENTRY.row`, `HISTORY.row`): the runner takes its columns from the
Arrow rows when the row is written out, and carries the rows of the still pending ones over to
the next Arrow batch.

Kafka's state, by the names of the reference:

- `offsets` (the stored OffsetAndMetadata and its record offset): `KEY_STATE.has_offset`,
  `committed_offset`, `record_offset`; `_removed`: its `removed_*` fields; `_kinds`: `kinds`;
- `pendingTransactionalOffsets[producerId][key]`: an `ENTRY` in use, linked into its producer's
  list (`PRODUCER.head`) and its key's (`KEY_STATE.open_head`, which is `_open_by_key`); its
  `overlapping` set is a list of `OVERLAP` nodes sorted by producer id, and `passed_by` its
  `passed_*` fields;
- `_committed_overlaps[key][(producer, other)]`: a list of `OWNED` nodes per key (`owned_head`);
- `_members[group]`: `members[group]`, -1 for a group without a GroupMetadata record;
- `_consumer_members[group]`: `live_members[group]`, how many members of the consumer group are
  there (-1 for a group without a member record), and a row (group, member, there) per member in
  `member_index`, an open-addressing table as the keys';
- `_classic`, `_with_membership` and `_unread`: the bits CLASSIC, WITH_MEMBERSHIP and UNREAD of
  `group_flags[group]`; `_unread_partition`: `TASK_STATE.unread_membership`.

A function that needs room (output rows, findings, entries, nodes, keys, producers) checks for it
before it changes anything and returns False, with what it needs in `TASK_STATE.need_*`, when
there is not enough; the runner drains or grows the arrays and calls again from that event.
Memory grows with the keys, the producers, the open transactions and the groups' members, never
with the records.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from eos_audit.processing import offset_metadata_manager as reference
from eos_audit.replay.kernel_cache import compile_in_place

NULL = np.iinfo(np.int64).min  # "no value" in every int64 field and output column

# Codes of the output's strings, and the strings (the reference's) by code.
PLAIN, TRANSACTIONAL, TOMBSTONE = 0, 1, 2
KIND_NAMES = (reference.PLAIN, reference.TRANSACTIONAL, reference.TOMBSTONE)
APPLIED, SKIPPED, ABORTED, PENDING, REPLACED, CLEARED, DELETED = 0, 1, 2, 3, 4, 5, 6
OUTCOME_NAMES = (
    reference.APPLIED,
    reference.SKIPPED,
    reference.ABORTED,
    reference.PENDING,
    reference.REPLACED,
    reference.CLEARED,
    reference.DELETED,
)
OFFSET_REWIND, MIXED_OFFSET_COMMITS, CONCURRENT_OFFSET_OWNERS = 0, 1, 2
FINDING_NAMES = (
    reference.OFFSET_REWIND,
    reference.MIXED_OFFSET_COMMITS,
    reference.CONCURRENT_OFFSET_OWNERS,
)
NO_CAUSE = -1
CAUSE_TRANSACTIONAL, CAUSE_LATE_COMMIT, CAUSE_ADMIN_RESET, CAUSE_EXPIRED_RESET = 0, 1, 2, 3
CAUSE_PLAIN_AND_TRANSACTIONAL, CAUSE_ABORTED_RANGE_COMMITTED = 4, 5
CAUSE_NAMES = (
    reference.CAUSE_TRANSACTIONAL,
    reference.CAUSE_LATE_COMMIT,
    reference.CAUSE_ADMIN_RESET,
    reference.CAUSE_EXPIRED_RESET,
    reference.CAUSE_PLAIN_AND_TRANSACTIONAL,
    reference.CAUSE_ABORTED_RANGE_COMMITTED,
)
# KEY_STATE.kinds: the kinds of commit a key has had (a set of two).
HAD_PLAIN, HAD_TRANSACTIONAL = 1, 2
NO_PRODUCER_ID = reference.NO_PRODUCER_ID
# The record types `reads_no_membership` tells apart, the reference's (tuples of constants,
# which the compiled kernel tests membership of).
READ_TYPES = reference.READ_TYPES
CONSUMER_GROUP_TYPES_WITHOUT_MEMBERS = reference.CONSUMER_GROUP_TYPES_WITHOUT_MEMBERS
# What the membership records say of a group (the reference's `_membership`: MEMBERS, EMPTIED,
# SIMPLE, UNKNOWN).
MEMBERS, EMPTIED, SIMPLE, UNKNOWN = 0, 1, 2, 3
# group_flags: the group's last GroupMetadata record is a value (`_classic`); it has had a
# membership record (`_with_membership`); a record whose members the replay cannot see
# (`_unread`).
CLASSIC, WITH_MEMBERSHIP, UNREAD = 1, 2, 4

# One event of a `__consumer_offsets` partition (a record or a marker), as `Event` has it, with
# the strings numbered by the runner and the reference's defaults for nulls applied.
OFFSET_EVENT = np.dtype(
    [
        ("coordinator_partition", np.int64),
        ("offset", np.int64),
        ("producer_id", np.int64),  # -1 for a plain commit (and for null)
        ("is_marker", np.bool_),  # control_type set
        ("is_commit", np.bool_),  # control_type COMMIT (any other is an abort)
        ("record_type", np.int64),  # -1 for null
        ("is_tombstone", np.bool_),
        ("is_skipped", np.bool_),
        ("group", np.int64),  # the group id's number in the task, -1 for null
        ("topic", np.int64),  # the topic's number in the task (null is "")
        ("partition", np.int64),  # 0 for null
        ("committed_offset", np.int64),  # 0 for null, as the reference compares it
        ("member_count", np.int64),  # 0 for null
        ("member", np.int64),  # the member id's number in the task, -1 for null
    ],
    align=True,
)

# The task's replay: the partition being replayed, how full each pool is, the output counts, and
# what a function that stopped needs.
TASK_STATE = np.dtype(
    [
        ("active", np.bool_),
        ("partition", np.int64),
        ("keys", np.int64),  # KEY_STATE slots given (task-wide: a key keeps its slot)
        ("producers", np.int64),  # PRODUCER slots given (task-wide)
        ("member_keys", np.int64),  # member_index rows in use (this partition's members)
        # The partition has had a record whose members the replay cannot see, of a group the
        # export does not name (the reference's `_unread_partition`).
        ("unread_membership", np.bool_),
        ("entries_used", np.int64),
        ("entries_hwm", np.int64),
        ("entries_free", np.int64),
        ("overlaps_used", np.int64),
        ("overlaps_hwm", np.int64),
        ("overlaps_free", np.int64),
        ("owned_used", np.int64),
        ("owned_hwm", np.int64),
        ("owned_free", np.int64),
        ("rows", np.int64),  # HISTORY rows written
        ("findings", np.int64),  # FINDING rows written
        ("need_rows", np.int64),
        ("need_findings", np.int64),
        ("need_entries", np.int64),
        ("need_overlaps", np.int64),
        ("need_owned", np.int64),
        ("need_keys", np.int64),
        ("need_producers", np.int64),
        ("need_members", np.int64),
    ],
    align=True,
)

# One (group, topic, partition) of the partition: its committed offset and what the rules keep.
KEY_STATE = np.dtype(
    [
        ("group", np.int64),
        ("topic", np.int64),
        ("partition", np.int64),
        # offsets[key]: the stored OffsetAndMetadata and its recordOffset (KAFKA-14505)
        ("has_offset", np.bool_),
        ("committed_offset", np.int64),
        ("record_offset", np.int64),
        # _removed[key]: the value a tombstone removed, until the key is committed again
        ("has_removed", np.bool_),
        ("removed_committed_offset", np.int64),
        ("removed_record_offset", np.int64),
        ("kinds", np.int64),  # _kinds[key]: HAD_PLAIN | HAD_TRANSACTIONAL
        ("open_head", np.int64),  # _open_by_key[key]: its pending entries (-1: none)
        ("open_count", np.int64),
        ("owned_head", np.int64),  # _committed_overlaps of the key: OWNED nodes (-1: none)
    ],
    align=True,
)

# A producer id with pending offsets: pendingTransactionalOffsets[producerId].
PRODUCER = np.dtype(
    [("producer_id", np.int64), ("head", np.int64), ("count", np.int64)], align=True
)

# A transactional offset waiting for its producer's marker (the reference's `_Pending`).
ENTRY = np.dtype(
    [
        ("in_use", np.bool_),
        ("key", np.int64),  # KEY_STATE slot
        ("producer", np.int64),  # PRODUCER slot
        ("row", np.int64),  # its record's row (the runner's numbering)
        ("offset", np.int64),  # its record's offset
        ("committed_offset", np.int64),
        ("has_mixed", np.bool_),  # its record got MIXED_OFFSET_COMMITS when replayed
        # passed_by: the first plain commit of the key while it was pending
        ("passed", np.bool_),
        ("passed_record_offset", np.int64),
        ("passed_committed_offset", np.int64),
        ("passed_start", np.int64),  # the committed offset that plain commit moved from
        ("overlapping_head", np.int64),  # OVERLAP nodes, sorted by producer id (-1: none)
        ("overlapping_count", np.int64),
        ("key_next", np.int64),  # its key's list (-1 ends it)
        ("key_prev", np.int64),
        ("producer_next", np.int64),  # its producer's list; the free list when not in use
        ("producer_prev", np.int64),
    ],
    align=True,
)

# An element of a pending entry's `overlapping` set; of a key's `_committed_overlaps`.
OVERLAP = np.dtype([("producer_id", np.int64), ("next", np.int64)], align=True)
OWNED = np.dtype(
    [
        ("producer_id", np.int64),
        ("other_id", np.int64),
        ("record_offset", np.int64),
        ("next", np.int64),
    ],
    align=True,
)

# The output: an OffsetCommit record (or tombstone) and what became of it, and its findings,
# written in the row's order (`findings` of them right after those of the row before).
HISTORY = np.dtype(
    [
        ("row", np.int64),
        ("kind", np.int64),
        ("outcome", np.int64),
        ("marker_offset", np.int64),
        ("previous_committed_offset", np.int64),
        ("findings", np.int64),
    ],
    align=True,
)
FINDING = np.dtype(
    [
        ("finding_type", np.int64),
        ("cause", np.int64),
        ("previous_committed_offset", np.int64),
        ("previous_record_offset", np.int64),
        ("other_producer_id", np.int64),
        ("other_record_offset", np.int64),
        ("aborted_from", np.int64),
        ("aborted_to", np.int64),
    ],
    align=True,
)


class State(NamedTuple):
    """Everything the kernel reads and writes, handed over whole.

    The runner grows an array by replacing it (`_replace`).
    """

    task: np.ndarray  # TASK_STATE, one record
    keys: np.ndarray  # KEY_STATE by slot
    key_index: np.ndarray  # (group, topic, partition, slot) places
    producers: np.ndarray  # PRODUCER by slot
    producer_index: np.ndarray  # (producer id, slot) places
    members: np.ndarray  # _members by group number, -1 for none
    live_members: np.ndarray  # len(_consumer_members[group]) by group number, -1 for none
    group_flags: np.ndarray  # CLASSIC | WITH_MEMBERSHIP | UNREAD by group number
    member_index: np.ndarray  # (group, member, there) places of _consumer_members
    entries: np.ndarray  # ENTRY pool
    overlaps: np.ndarray  # OVERLAP pool
    owned: np.ndarray  # OWNED pool
    history: np.ndarray  # HISTORY output
    findings: np.ndarray  # FINDING output


# ------------------------------------------------------------------------------------------------
# Lookups: open-addressing tables of int64 rows (key..., slot), -1 marking a free place, at least
# twice as many places as slots (as replay.lookups)
# ------------------------------------------------------------------------------------------------
def key_position(key_index, group, topic, partition):
    """Where the key's row is in `key_index`, or its free place."""
    mask = len(key_index) - 1
    h = (group * 1_000_003 + topic) * 1_000_003 + partition
    k = (h ^ (h >> 20)) & mask
    while key_index[k, 3] != -1 and not (
        key_index[k, 0] == group and key_index[k, 1] == topic and key_index[k, 2] == partition
    ):
        k = (k + 1) & mask
    return k


def key_slot(state, group, topic, partition):
    """The key's slot; a new one for a new key; -1 when a new key finds no free slot."""
    task = state.task[0]
    index = state.key_index
    k = key_position(index, group, topic, partition)
    if index[k, 3] != -1:
        return index[k, 3]
    if task.keys >= len(state.keys):
        return -1
    slot = task.keys
    task.keys += 1
    index[k, 0] = group
    index[k, 1] = topic
    index[k, 2] = partition
    index[k, 3] = slot
    s = state.keys[slot]
    s.group = group
    s.topic = topic
    s.partition = partition
    clear_key(s)
    return slot


def reindex_keys(key_index, keys, count):
    """Fill an empty, larger `key_index` with the first `count` keys (the keys grew)."""
    for slot in range(count):
        s = keys[slot]
        k = key_position(key_index, s.group, s.topic, s.partition)
        key_index[k, 0] = s.group
        key_index[k, 1] = s.topic
        key_index[k, 2] = s.partition
        key_index[k, 3] = slot


def producer_position(producer_index, producer_id):
    """Where the producer's row is in `producer_index`, or its free place."""
    mask = len(producer_index) - 1
    k = (producer_id ^ (producer_id >> 16)) & mask
    while producer_index[k, 1] != -1 and producer_index[k, 0] != producer_id:
        k = (k + 1) & mask
    return k


def producer_slot(state, producer_id):
    """The producer's slot; a new one for a new producer (the caller checked there is one)."""
    k = producer_position(state.producer_index, producer_id)
    if state.producer_index[k, 1] != -1:
        return state.producer_index[k, 1]
    task = state.task[0]
    slot = task.producers
    task.producers += 1
    state.producer_index[k, 0] = producer_id
    state.producer_index[k, 1] = slot
    p = state.producers[slot]
    p.producer_id = producer_id
    p.head = -1
    p.count = 0
    return slot


def reindex_producers(producer_index, producers, count):
    """Fill an empty, larger `producer_index` with the first `count` producers."""
    for slot in range(count):
        k = producer_position(producer_index, producers[slot].producer_id)
        producer_index[k, 0] = producers[slot].producer_id
        producer_index[k, 1] = slot


def member_position(member_index, group, member):
    """Where the member's row is in `member_index`, or its free place (group -1)."""
    mask = len(member_index) - 1
    h = group * 1_000_003 + member
    k = (h ^ (h >> 20)) & mask
    while member_index[k, 0] != -1 and not (
        member_index[k, 0] == group and member_index[k, 1] == member
    ):
        k = (k + 1) & mask
    return k


def reindex_members(member_index, old_index):
    """Fill an empty, larger `member_index` with the rows of `old_index` (the members grew)."""
    for i in range(len(old_index)):
        if old_index[i, 0] != -1:
            k = member_position(member_index, old_index[i, 0], old_index[i, 1])
            member_index[k, 0] = old_index[i, 0]
            member_index[k, 1] = old_index[i, 1]
            member_index[k, 2] = old_index[i, 2]


# ------------------------------------------------------------------------------------------------
# Pools (entries, nodes), each with a free list, and the lists they make
# ------------------------------------------------------------------------------------------------
def new_entry(state):
    """A free entry's slot (the caller checked there is one)."""
    task = state.task[0]
    if task.entries_free != -1:
        slot = task.entries_free
        task.entries_free = state.entries[slot].producer_next
    else:
        slot = task.entries_hwm
        task.entries_hwm += 1
    task.entries_used += 1
    return slot


def free_entry(state, slot):
    """Give back an entry and the nodes of its `overlapping` set."""
    task = state.task[0]
    overlaps = state.overlaps
    e = state.entries[slot]
    node = e.overlapping_head
    while node != -1:
        after = overlaps[node].next
        overlaps[node].next = task.overlaps_free
        task.overlaps_free = node
        task.overlaps_used -= 1
        node = after
    e.in_use = False
    e.overlapping_head = -1
    e.overlapping_count = 0
    e.producer_next = task.entries_free
    task.entries_free = slot
    task.entries_used -= 1


def add_overlapping(state, e, producer_id):
    """`entry.overlapping.add(producer_id)`: the set kept sorted, for `check_owners`."""
    task = state.task[0]
    overlaps = state.overlaps
    before = -1
    node = e.overlapping_head
    while node != -1 and overlaps[node].producer_id < producer_id:
        before = node
        node = overlaps[node].next
    if node != -1 and overlaps[node].producer_id == producer_id:
        return
    if task.overlaps_free != -1:
        added = task.overlaps_free
        task.overlaps_free = overlaps[added].next
    else:
        added = task.overlaps_hwm
        task.overlaps_hwm += 1
    task.overlaps_used += 1
    overlaps[added].producer_id = producer_id
    overlaps[added].next = node
    if before == -1:
        e.overlapping_head = added
    else:
        overlaps[before].next = added
    e.overlapping_count += 1


def pop_owned(state, s, producer_id, other_id):
    """`_committed_overlaps[key].pop((producer_id, other_id))`: the record offset, else NULL."""
    task = state.task[0]
    owned = state.owned
    before = -1
    node = s.owned_head
    while node != -1 and (
        owned[node].producer_id != producer_id or owned[node].other_id != other_id
    ):
        before = node
        node = owned[node].next
    if node == -1:
        return NULL
    if before == -1:
        s.owned_head = owned[node].next
    else:
        owned[before].next = owned[node].next
    owned[node].next = task.owned_free
    task.owned_free = node
    task.owned_used -= 1
    return owned[node].record_offset


def set_owned(state, s, producer_id, other_id, record_offset):
    """`_committed_overlaps[key][(producer_id, other_id)] = row` (the row by its offset)."""
    task = state.task[0]
    owned = state.owned
    node = s.owned_head
    while node != -1 and (
        owned[node].producer_id != producer_id or owned[node].other_id != other_id
    ):
        node = owned[node].next
    if node == -1:
        if task.owned_free != -1:
            node = task.owned_free
            task.owned_free = owned[node].next
        else:
            node = task.owned_hwm
            task.owned_hwm += 1
        task.owned_used += 1
        owned[node].producer_id = producer_id
        owned[node].other_id = other_id
        owned[node].next = s.owned_head
        s.owned_head = node
    owned[node].record_offset = record_offset


def free_owned(state, s):
    """`_committed_overlaps.pop(key)`: every OWNED node of the key given back."""
    task = state.task[0]
    owned = state.owned
    node = s.owned_head
    while node != -1:
        after = owned[node].next
        owned[node].next = task.owned_free
        task.owned_free = node
        task.owned_used -= 1
        node = after
    s.owned_head = -1


def is_pending(state, s, producer_id):
    """`producer_id in _open_by_key[key]`: the producer holds a pending offset of the key."""
    slot = s.open_head
    while slot != -1:
        e = state.entries[slot]
        if state.producers[e.producer].producer_id == producer_id:
            return True
        slot = e.key_next
    return False


def link_entry(state, slot):
    """Put an entry in its key's list (`_open_by_key`) and its producer's."""
    entries = state.entries
    e = entries[slot]
    s = state.keys[e.key]
    e.key_prev = -1
    e.key_next = s.open_head
    if s.open_head != -1:
        entries[s.open_head].key_prev = slot
    s.open_head = slot
    s.open_count += 1
    p = state.producers[e.producer]
    e.producer_prev = -1
    e.producer_next = p.head
    if p.head != -1:
        entries[p.head].producer_prev = slot
    p.head = slot
    p.count += 1


def unlink_from_key(state, slot):
    """Take an entry out of its key's list."""
    entries = state.entries
    e = entries[slot]
    s = state.keys[e.key]
    if e.key_prev == -1:
        s.open_head = e.key_next
    else:
        entries[e.key_prev].key_next = e.key_next
    if e.key_next != -1:
        entries[e.key_next].key_prev = e.key_prev
    s.open_count -= 1


def unlink_from_producer(state, slot):
    """Take an entry out of its producer's list."""
    entries = state.entries
    e = entries[slot]
    p = state.producers[e.producer]
    if e.producer_prev == -1:
        p.head = e.producer_next
    else:
        entries[e.producer_prev].producer_next = e.producer_next
    if e.producer_next != -1:
        entries[e.producer_next].producer_prev = e.producer_prev
    p.count -= 1


# ------------------------------------------------------------------------------------------------
# Room and output
# ------------------------------------------------------------------------------------------------
def has_room(state, rows, found, pending, nodes, owners, new_keys, new_producers,
             new_members=0):  # fmt: skip
    """Whether the arrays have room for what an event may write; else say what it needs.

    `member_index` is kept at most half full, as the lookups need.
    """
    task = state.task[0]
    short = (
        len(state.history) - task.rows < rows
        or len(state.findings) - task.findings < found
        or len(state.entries) - task.entries_used < pending
        or len(state.overlaps) - task.overlaps_used < nodes
        or len(state.owned) - task.owned_used < owners
        or len(state.keys) - task.keys < new_keys
        or len(state.producers) - task.producers < new_producers
        or len(state.member_index) // 2 - task.member_keys < new_members
    )
    if short:
        task.need_rows = rows
        task.need_findings = found
        task.need_entries = pending
        task.need_overlaps = nodes
        task.need_owned = owners
        task.need_keys = new_keys
        task.need_producers = new_producers
        task.need_members = new_members
    return not short


def write_row(state, row, kind, outcome, marker_offset, previous_committed_offset):
    """An output row (its findings follow)."""
    task = state.task[0]
    h = state.history[task.rows]
    task.rows += 1
    h.row = row
    h.kind = kind
    h.outcome = outcome
    h.marker_offset = marker_offset
    h.previous_committed_offset = previous_committed_offset
    h.findings = 0


def write_finding(state, finding_type, cause, previous_committed_offset=NULL,
                  previous_record_offset=NULL, other_producer_id=NULL, other_record_offset=NULL,
                  aborted_from=NULL, aborted_to=NULL):  # fmt: skip
    """A finding of the row written last."""
    task = state.task[0]
    f = state.findings[task.findings]
    task.findings += 1
    f.finding_type = finding_type
    f.cause = cause
    f.previous_committed_offset = previous_committed_offset
    f.previous_record_offset = previous_record_offset
    f.other_producer_id = other_producer_id
    f.other_record_offset = other_record_offset
    f.aborted_from = aborted_from
    f.aborted_to = aborted_to
    state.history[task.rows - 1].findings += 1


def write_entry_row(state, e, outcome, marker_offset):
    """A transactional record's row, with the finding its record got when replayed."""
    write_row(state, e.row, TRANSACTIONAL, outcome, marker_offset, NULL)
    if e.has_mixed:
        write_finding(state, MIXED_OFFSET_COMMITS, CAUSE_PLAIN_AND_TRANSACTIONAL)


# ------------------------------------------------------------------------------------------------
# The rules (OffsetMetadataManager's private methods)
# ------------------------------------------------------------------------------------------------
def reads_no_membership(event):
    """`reads_no_membership`: a record whose group's members the replay cannot see.

    Not a marker nor a KIP-848 consumer group's record other than its members'
    (`CONSUMER_GROUP_TYPES_WITHOUT_MEMBERS`); a skipped record, or one of a type the replay does
    not read (`READ_TYPES`; -1, no type, is neither).
    """
    if event.is_marker:
        return False
    t = event.record_type
    if t in CONSUMER_GROUP_TYPES_WITHOUT_MEMBERS:
        return False
    if event.is_skipped:
        return True
    return t >= 0 and t not in READ_TYPES


def group_membership(state, group):
    """`_membership`: MEMBERS, EMPTIED, SIMPLE or UNKNOWN, by the group's membership records.

    A count of -1 is no such record.
    """
    most = max(state.members[group], state.live_members[group])
    if most > 0:
        return MEMBERS
    flags = state.group_flags[group]
    if flags & CLASSIC:
        return EMPTIED
    if state.task[0].unread_membership or flags & UNREAD:
        return UNKNOWN
    if most == 0:
        return EMPTIED
    if flags & WITH_MEMBERSHIP:
        return UNKNOWN
    return SIMPLE


def replay_member(state, event):
    """`_replay_member`: a consumer group's member there (a value) or gone (a tombstone).

    False, having changed nothing, when `member_index` lacks room for a new member.
    """
    index = state.member_index
    k = member_position(index, event.group, event.member)
    if index[k, 0] == -1:
        if event.is_tombstone:
            return True  # a member not known: Kafka ignores its tombstone
        if not has_room(state, 0, 0, 0, 0, 0, 0, 0, 1):
            return False
        index[k, 0] = event.group
        index[k, 1] = event.member
        index[k, 2] = 0
        state.task[0].member_keys += 1
        if state.live_members[event.group] < 0:
            state.live_members[event.group] = 0
    there = index[k, 2] == 1
    if event.is_tombstone and there:
        index[k, 2] = 0
        state.live_members[event.group] -= 1
    elif not event.is_tombstone and not there:
        index[k, 2] = 1
        state.live_members[event.group] += 1
    return True


def note_kind(s, kind, membership):
    """`_note_kind`: whether the record gets MIXED_OFFSET_COMMITS (PLAIN_AND_TRANSACTIONAL).

    A plain commit while the group is emptied is an operator's: it does not mix the
    application's commits (a simple group's does). The finding comes at the first commit of the
    kind the key had not had.
    """
    if kind == PLAIN and membership == EMPTIED:
        return False
    bit = HAD_PLAIN if kind == PLAIN else HAD_TRANSACTIONAL
    had = s.kinds
    s.kinds = had | bit
    return had != 0 and (had & bit) == 0  # one kind before, not this one


def apply_offset(state, s, kind, membership, value, record_offset):
    """`_apply`: store the offset of the row written last, checking NO_REWIND.

    A plain commit also marks the open transactions of the key whose input it passes, unless the
    group is emptied. `membership` is the group's (`group_membership`), for a plain commit.
    """
    h = state.history[state.task[0].rows - 1]
    h.outcome = APPLIED
    if s.has_offset:
        h.previous_committed_offset = s.committed_offset
        if value < s.committed_offset:
            if kind == TRANSACTIONAL:
                cause = CAUSE_TRANSACTIONAL
            elif membership in (EMPTIED, SIMPLE):
                cause = CAUSE_ADMIN_RESET  # Kafka's EMPTY: no member lost a partition
            else:
                cause = CAUSE_LATE_COMMIT
            write_finding(state, OFFSET_REWIND, cause, s.committed_offset, s.record_offset)
    elif s.has_removed and value < s.removed_committed_offset:
        write_finding(
            state, OFFSET_REWIND, CAUSE_EXPIRED_RESET, s.removed_committed_offset,
            s.removed_record_offset,
        )  # fmt: skip
    s.has_removed = False
    if kind == PLAIN and membership != EMPTIED:
        # A plain commit while a transaction of the key is open moves the group past input that
        # transaction is processing; whether that loses it, its marker decides. Not an operator's
        # reset of the emptied group: where to start is the operator's to say. A simple group's
        # plain commit is not known to be an operator's.
        start = s.committed_offset if s.has_offset else -1
        if value > start:
            slot = s.open_head
            while slot != -1:
                e = state.entries[slot]
                if not e.passed:
                    e.passed = True
                    e.passed_record_offset = record_offset
                    e.passed_committed_offset = value
                    e.passed_start = max(start, 0)
                slot = e.key_next
    s.has_offset = True
    s.committed_offset = value
    s.record_offset = record_offset


def aborted_range_committed(state, e):
    """`_aborted_range_committed`: a plain commit passed input of this aborted transaction."""
    if not e.passed:
        return
    end = min(e.passed_committed_offset, e.committed_offset)
    if end > e.passed_start:
        write_finding(
            state, MIXED_OFFSET_COMMITS, CAUSE_ABORTED_RANGE_COMMITTED,
            other_record_offset=e.passed_record_offset, aborted_from=e.passed_start,
            aborted_to=end,
        )  # fmt: skip


def check_owners(state, s, e, producer_id):
    """`_check_owners`: two producers' overlapping pending offsets of a key both committed."""
    node = e.overlapping_head
    while node != -1:
        other = state.overlaps[node].producer_id
        earlier = pop_owned(state, s, other, producer_id)
        if earlier != NULL:
            write_finding(
                state, CONCURRENT_OFFSET_OWNERS, NO_CAUSE, other_producer_id=other,
                other_record_offset=earlier,
            )  # fmt: skip
        node = state.overlaps[node].next
    node = e.overlapping_head
    while node != -1:
        other = state.overlaps[node].producer_id
        if is_pending(state, s, other):
            set_owned(state, s, producer_id, other, e.offset)
        node = state.overlaps[node].next


def forget_overlaps(state, s, e, producer_id):
    """`_forget_overlaps`: the committed offsets waiting for an aborted one wait no more."""
    node = e.overlapping_head
    while node != -1:
        pop_owned(state, s, state.overlaps[node].producer_id, producer_id)
        node = state.overlaps[node].next


# ------------------------------------------------------------------------------------------------
# Records and markers (OffsetMetadataManager.replay, replayEndTransactionMarker)
# ------------------------------------------------------------------------------------------------
def replay_record(state, event, row):
    """`replay`: one record. False, having changed nothing, when an array lacks room."""
    if reads_no_membership(event):
        if event.group < 0:
            state.task[0].unread_membership = True
        else:
            state.group_flags[event.group] |= UNREAD
        return True
    if event.is_skipped:
        return True
    if event.record_type == 2:
        if event.group >= 0:
            state.members[event.group] = 0 if event.is_tombstone else event.member_count
            flags = state.group_flags[event.group] | WITH_MEMBERSHIP
            if event.is_tombstone:
                flags &= ~CLASSIC
            else:
                flags |= CLASSIC
            state.group_flags[event.group] = flags
        return True
    if event.record_type == 5:
        if event.group >= 0 and event.member >= 0:
            if not replay_member(state, event):
                return False
            state.group_flags[event.group] |= WITH_MEMBERSHIP
        return True
    if (event.record_type != 0 and event.record_type != 1) or event.group < 0:
        return True
    slot = key_slot(state, event.group, event.topic, event.partition)
    if slot < 0:
        return has_room(state, 0, 0, 0, 0, 0, 1, 0)
    s = state.keys[slot]
    if event.is_tombstone:
        if not has_room(state, 1 + s.open_count, s.open_count, 0, 0, 0, 0, 0):
            return False
        replay_tombstone(state, s, row)
        return True
    membership = group_membership(state, event.group)
    if event.producer_id == NO_PRODUCER_ID:
        if not has_room(state, 1, 2, 0, 0, 0, 0, 0):
            return False
        mixed = note_kind(s, PLAIN, membership)
        write_row(state, row, PLAIN, APPLIED, NULL, NULL)
        if mixed:
            write_finding(state, MIXED_OFFSET_COMMITS, CAUSE_PLAIN_AND_TRANSACTIONAL)
        apply_offset(state, s, PLAIN, membership, event.committed_offset, event.offset)
        return True
    if not has_room(state, 1, 1, 1, 2 * s.open_count, 0, 0, 1):
        return False
    mixed = note_kind(s, TRANSACTIONAL, membership)
    producer = producer_slot(state, event.producer_id)
    # The same producer's pending offset of the key, which this record replaces.
    entries = state.entries
    pending = s.open_head
    while pending != -1 and entries[pending].producer != producer:
        pending = entries[pending].key_next
    if pending != -1:
        e = entries[pending]
        write_entry_row(state, e, REPLACED, NULL)
    else:
        pending = new_entry(state)
        e = entries[pending]
        e.in_use = True
        e.key = slot
        e.producer = producer
        e.passed = False
        e.overlapping_head = -1
        e.overlapping_count = 0
        link_entry(state, pending)
    e.row = row
    e.offset = event.offset
    e.committed_offset = event.committed_offset
    e.has_mixed = mixed
    other = s.open_head
    while other != -1:
        o = entries[other]
        if o.producer != producer:
            add_overlapping(state, e, state.producers[o.producer].producer_id)
            add_overlapping(state, o, event.producer_id)
        other = o.key_next
    return True


def replay_tombstone(state, s, row):
    """`_replay_tombstone`: the stored value and every pending one of the key removed."""
    previous = NULL
    if s.has_offset:
        s.has_removed = True
        s.removed_committed_offset = s.committed_offset
        s.removed_record_offset = s.record_offset
        previous = s.committed_offset
        s.has_offset = False
    write_row(state, row, TOMBSTONE, DELETED, NULL, previous)
    free_owned(state, s)  # the pending offsets cleared never commit: nothing waits for them
    slot = s.open_head
    while slot != -1:
        e = state.entries[slot]
        after = e.key_next
        write_entry_row(state, e, CLEARED, NULL)
        unlink_from_producer(state, slot)
        free_entry(state, slot)
        slot = after
    s.open_head = -1
    s.open_count = 0


def replay_end_transaction_marker(state, event):
    """`replayEndTransactionMarker`: the producer's pending offsets stored or dropped.

    False, having changed nothing, when an array lacks room.
    """
    producer = state.producer_index[producer_position(state.producer_index, event.producer_id), 1]
    if producer < 0:
        return True
    entries = state.entries
    p = state.producers[producer]
    found = 0
    owners = 0
    slot = p.head
    while slot != -1:
        found += 2 + entries[slot].overlapping_count
        owners += entries[slot].overlapping_count
        slot = entries[slot].producer_next
    if not has_room(state, p.count, found, 0, 0, owners, 0, 0):
        return False
    slot = p.head
    while slot != -1:
        e = entries[slot]
        after = e.producer_next
        s = state.keys[e.key]
        unlink_from_key(state, slot)
        if not event.is_commit:
            write_entry_row(state, e, ABORTED, event.offset)
            forget_overlaps(state, s, e, event.producer_id)
            aborted_range_committed(state, e)
        else:
            write_entry_row(state, e, APPLIED, event.offset)
            if s.has_offset and e.offset <= s.record_offset:
                state.history[state.task[0].rows - 1].outcome = SKIPPED  # KAFKA-14505
            else:
                apply_offset(state, s, TRANSACTIONAL, MEMBERS, e.committed_offset, e.offset)
            check_owners(state, s, e, event.producer_id)
        free_entry(state, slot)
        slot = after
    p.head = -1
    p.count = 0
    return True


# ------------------------------------------------------------------------------------------------
# Partitions and the loop
# ------------------------------------------------------------------------------------------------
def clear_key(s):
    """A key with nothing stored, removed, committed or pending."""
    s.has_offset = False
    s.has_removed = False
    s.kinds = 0
    s.open_head = -1
    s.open_count = 0
    s.owned_head = -1


def finish_partition(state):
    """`finish`: the offsets still pending at the partition's end, then its state forgotten.

    As a new OffsetMetadataManager for the next partition; the keys and producers keep their
    slots (a task numbers them once).
    """
    task = state.task[0]
    entries = state.entries
    for producer in range(task.producers):
        p = state.producers[producer]
        slot = p.head
        while slot != -1:
            after = entries[slot].producer_next
            write_entry_row(state, entries[slot], PENDING, NULL)
            entries[slot].in_use = False
            slot = after
        p.head = -1
        p.count = 0
    for slot in range(task.keys):
        clear_key(state.keys[slot])
    for group in range(len(state.members)):
        state.members[group] = -1
        state.live_members[group] = -1
        state.group_flags[group] = 0
    task.unread_membership = False
    if task.member_keys > 0:
        for k in range(len(state.member_index)):
            state.member_index[k, 0] = -1
        task.member_keys = 0
    task.entries_used = 0
    task.entries_hwm = 0
    task.entries_free = -1
    task.overlaps_used = 0
    task.overlaps_hwm = 0
    task.overlaps_free = -1
    task.owned_used = 0
    task.owned_hwm = 0
    task.owned_free = -1
    task.active = False


def replay(events, start, first_row, state):
    """Replay events[start:] of one Arrow batch, event i being row `first_row + i`.

    Returns the index of the first event not replayed: the number of events when all were, else
    the event at which an array ran out of room (`TASK_STATE.need_*`); the caller drains or
    grows the arrays and calls again from there.
    """
    task = state.task[0]
    for i in range(start, len(events)):
        event = events[i]
        if task.active and event.coordinator_partition != task.partition:
            if not has_room(state, task.entries_used, task.entries_used, 0, 0, 0, 0, 0):
                return i
            finish_partition(state)
        if not task.active:
            task.active = True
            task.partition = event.coordinator_partition
        if event.is_marker:
            if not replay_end_transaction_marker(state, event):
                return i
        elif not replay_record(state, event, first_row + i):
            return i
    return len(events)


def finish(state):
    """The end of the input: the partition being replayed finished.

    Returns False when the outputs lack room (`TASK_STATE.need_*`).
    """
    task = state.task[0]
    if not task.active:
        return True
    if not has_room(state, task.entries_used, task.entries_used, 0, 0, 0, 0, 0):
        return False
    finish_partition(state)
    return True


KERNEL_FUNCTIONS = [
    name
    for name, value in list(globals().items())
    if callable(value) and getattr(value, "__module__", None) == __name__ and name != "State"
]
COMPILED = compile_in_place(globals(), KERNEL_FUNCTIONS)
