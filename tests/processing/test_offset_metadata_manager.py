"""The group coordinator's offset store replayed: Kafka's materialization rule, rules on it."""

from __future__ import annotations

from eos_audit.processing.offset_metadata_manager import (
    ABORTED,
    APPLIED,
    CLEARED,
    DELETED,
    PENDING,
    REPLACED,
    SKIPPED,
    Event,
    replay_partition,
)

GROUP, TOPIC = "copier", "input"


def commit(offset: int, value: int, pid: int = -1, partition: int = 0, group: str = GROUP):
    """An OffsetCommit record at `offset` committing `value`; `pid` -1 is a plain commit."""
    return Event(
        offset, producer_id=pid, producer_epoch=0 if pid >= 0 else -1, record_type=1,
        group_id=group, topic=TOPIC, partition=partition, committed_offset=value,
    )  # fmt: skip


def tombstone(offset: int, partition: int = 0):
    return Event(
        offset, record_type=1, is_tombstone=True, group_id=GROUP, topic=TOPIC, partition=partition
    )


def members(offset: int, count: int):
    """A GroupMetadata record of the group with `count` members."""
    return Event(offset, record_type=2, group_id=GROUP, member_count=count)


def member(offset: int, member_id: str, left: bool = False, group: str = GROUP):
    """A ConsumerGroupMemberMetadata record of a KIP-848 group's member; its tombstone: it left."""
    return Event(offset, record_type=5, is_tombstone=left, group_id=group, member_id=member_id)


def unread(offset: int, record_type: int, group: str | None = GROUP, skipped: bool = True):
    """A record the replay does not read: skipped by the decoders, or of a type it does not read;
    `group` None where the export does not show it (`kafka-dump-log.sh` 3.5-3.7, 3.8+ text of a
    type the tool does not know)."""
    return Event(offset, record_type=record_type, is_skipped=skipped, group_id=group)


def marker(offset: int, pid: int, control_type: str = "COMMIT"):
    return Event(offset, producer_id=pid, producer_epoch=1, control_type=control_type)


def outcomes(events):
    """(record offset, outcome, marker offset, finding types with causes) of each row, by offset."""
    rows = sorted(replay_partition(events), key=lambda r: r.event.offset)
    return [
        (
            r.event.offset,
            r.outcome,
            r.marker_offset,
            [(f.finding_type, f.cause) for f in r.findings],
        )
        for r in rows
    ]


def test_plain_commits_apply_at_once_and_transactional_ones_at_their_marker():
    rows = outcomes(
        [
            commit(0, 5),
            commit(1, 8, pid=7), commit(2, 3, pid=9, partition=1), marker(3, 7),
            commit(4, 12, pid=7), marker(5, 7, "ABORT"),
            commit(6, 14, pid=7),
        ]
    )  # fmt: skip
    assert rows == [
        (0, APPLIED, None, []),
        (1, APPLIED, 3, [("MIXED_OFFSET_COMMITS", "PLAIN_AND_TRANSACTIONAL")]),
        (2, PENDING, None, []),  # producer 9 never ended its transaction in this partition
        (4, ABORTED, 5, []),
        (6, PENDING, None, []),
    ]


def test_a_commit_marker_skips_an_offset_older_than_the_stored_record():
    # KAFKA-14505: the transactional record (offset 1) is older than the plain one stored at 2.
    rows = outcomes([commit(0, 1), commit(1, 9, pid=7), commit(2, 10), marker(3, 7)])
    assert [(r[0], r[1]) for r in rows] == [(0, APPLIED), (1, SKIPPED), (2, APPLIED)]


def test_a_later_record_of_the_same_producer_replaces_its_pending_offset():
    rows = outcomes([commit(0, 4, pid=7), commit(1, 6, pid=7), marker(2, 7)])
    assert [(r[0], r[1]) for r in rows] == [(0, REPLACED), (1, APPLIED)]


def test_a_tombstone_clears_the_stored_and_the_pending_offsets():
    rows = outcomes([commit(0, 30), commit(1, 40, pid=7), tombstone(2), marker(3, 7)])
    assert [(r[0], r[1]) for r in rows] == [(0, APPLIED), (1, CLEARED), (2, DELETED)]


def test_rewinds_are_classified_by_what_lowered_the_offset():
    late = outcomes([members(0, 1), commit(1, 50), commit(2, 20)])
    assert late[-1][3] == [("OFFSET_REWIND", "LATE_COMMIT")]
    admin = outcomes([commit(0, 50), members(1, 0), commit(2, 0)])
    assert admin[-1][3] == [("OFFSET_REWIND", "ADMIN_RESET")]
    # An operator's reset of a transactional group does not mix the group's commits.
    reset = outcomes([commit(0, 50, pid=7), marker(1, 7), members(2, 0), commit(3, 0)])
    assert reset[-1][3] == [("OFFSET_REWIND", "ADMIN_RESET")]
    expired = outcomes([commit(0, 50), tombstone(1), commit(2, 0)])
    assert expired[-1][3] == [("OFFSET_REWIND", "EXPIRED_RESET")]
    transactional = outcomes(
        [commit(0, 50, pid=7), marker(1, 7), commit(2, 20, pid=7), marker(3, 7)]
    )
    assert transactional[-1][3] == [("OFFSET_REWIND", "TRANSACTIONAL")]
    forward = outcomes([commit(0, 50, pid=7), marker(1, 7), commit(2, 60, pid=7), marker(3, 7)])
    assert all(not r[3] for r in forward)


def test_a_consumer_group_is_empty_once_its_last_member_left():
    # What a 4.x coordinator writes for a KIP-848 group (tests/fixtures/consumer_group): the
    # member joins, commits, leaves (its tombstone), and the operator's reset commits 0.
    joined = [member(0, "m-1"), commit(1, 50)]
    assert outcomes([*joined, member(2, "m-1", left=True), commit(3, 0)])[-1][3] == [
        ("OFFSET_REWIND", "ADMIN_RESET")
    ]
    # A member still there: the lower plain commit is a member's.
    staying = [*joined, member(2, "m-2"), member(3, "m-1", left=True), commit(4, 0)]
    assert outcomes(staying)[-1][3] == [("OFFSET_REWIND", "LATE_COMMIT")]
    assert outcomes([*joined, commit(2, 0)])[-1][3] == [("OFFSET_REWIND", "LATE_COMMIT")]
    # A member record written again (its subscription changed) is still one member.
    again = [*joined, member(2, "m-1"), member(3, "m-1", left=True), commit(4, 0)]
    assert outcomes(again)[-1][3] == [("OFFSET_REWIND", "ADMIN_RESET")]
    # Another group's members do not count, and a tombstone of a member never seen (its record
    # compacted away, or before the export) is ignored, as Kafka's replay ignores it: the group
    # is not known to be Empty.
    other = [*joined, member(2, "m-9", group="other"), member(3, "m-1", left=True), commit(4, 0)]
    assert outcomes(other)[-1][3] == [("OFFSET_REWIND", "ADMIN_RESET")]
    unseen = [commit(0, 50), member(1, "m-1", left=True), commit(2, 0)]
    assert outcomes(unseen)[-1][3] == [("OFFSET_REWIND", "LATE_COMMIT")]


def test_a_group_without_membership_records_is_a_simple_group_and_empty():
    # Kafka's replay of an OffsetCommit of a group that does not exist creates a "simple
    # consumer group", an Empty classic group (OffsetMetadataManager.replay): a consumer that
    # assign()s and commits, such as Flink's Kafka source restored from an older checkpoint, or
    # an operator's reset of such a group.
    restored = [commit(0, 50), commit(1, 20)]
    assert outcomes(restored)[-1][3] == [("OFFSET_REWIND", "ADMIN_RESET")]
    # Up to that point: the group's first membership record, later, does not change it.
    joined_later = outcomes([*restored, members(2, 1), commit(3, 10)])
    assert [r[3] for r in joined_later] == [
        [],
        [("OFFSET_REWIND", "ADMIN_RESET")],
        [("OFFSET_REWIND", "LATE_COMMIT")],
    ]
    # Another group's membership records say nothing of this one.
    other = [member(0, "m-1", group="other"), commit(1, 50), commit(2, 20)]
    assert outcomes(other)[-1][3] == [("OFFSET_REWIND", "ADMIN_RESET")]
    # A tombstone `kafka-dump-log.sh` 2.4 printed without its key (no type, not skipped) is an
    # OffsetCommit's or a GroupMetadata's: it shows no member.
    keyless = [commit(0, 50), Event(1, is_tombstone=True), commit(2, 20)]
    assert outcomes(keyless)[-1][3] == [("OFFSET_REWIND", "ADMIN_RESET")]


def test_a_simple_groups_plain_commits_still_mix_with_its_transactions():
    """Only the emptied group's plain commit is taken for an operator's: a simple group's
    application commits without membership too (an auto-commit left on with assign())."""
    events = [
        commit(0, 10, pid=7), marker(1, 7),
        commit(2, 20, pid=7),  # 10-19 in an open transaction
        commit(3, 15),  # the processor's consumer commits its position plainly
        marker(4, 7, "ABORT"),  # 10-14 committed, never processed
    ]  # fmt: skip
    rows = {r.event.offset: r for r in replay_partition(events)}
    assert [(f.finding_type, f.cause) for f in rows[3].findings] == [
        ("MIXED_OFFSET_COMMITS", "PLAIN_AND_TRANSACTIONAL")
    ]
    (lost,) = rows[2].findings
    assert (lost.cause, lost.aborted_from, lost.aborted_to) == ("ABORTED_RANGE_COMMITTED", 10, 15)


def test_a_group_whose_members_the_replay_cannot_see_is_not_taken_empty():
    rewind = [commit(1, 50), commit(2, 20)]
    # The group's records of a type the replay does not read: a KIP-1071 streams group's
    # (type 17), as the decoders skip it, or as Parquet in the contract hands it, not skipped.
    for record in (unread(0, 17), unread(0, 20, skipped=False), unread(0, 300)):
        assert outcomes([record, *rewind])[-1][3] == [("OFFSET_REWIND", "LATE_COMMIT")], record
    # `kafka-dump-log.sh` 3.5-3.7 prints a member record as `unknown::version=5`, without its
    # group: no group of the partition without its own membership records is known Empty.
    assert outcomes([unread(0, 5, group=None), *rewind])[-1][3] == [
        ("OFFSET_REWIND", "LATE_COMMIT")
    ]
    # From that record on: the rewind before it was a simple group's.
    before = outcomes([commit(0, 50), commit(1, 20), unread(2, 5, group=None), commit(3, 10)])
    assert [r[3] for r in before] == [
        [],
        [("OFFSET_REWIND", "ADMIN_RESET")],
        [("OFFSET_REWIND", "LATE_COMMIT")],
    ]
    # Another group's unread records say nothing of this one.
    assert outcomes([unread(0, 17, group="streams"), *rewind])[-1][3] == [
        ("OFFSET_REWIND", "ADMIN_RESET")
    ]
    # A KIP-848 consumer group's records other than its members' (types 3, 4, 6, 7, 8, 16) hide
    # no member: its members are its member records, which the replay reads.
    for record_type in (3, 4, 6, 7, 8, 16):
        for group in (GROUP, None):
            assert outcomes([unread(0, record_type, group), *rewind])[-1][3] == [
                ("OFFSET_REWIND", "ADMIN_RESET")
            ], (record_type, group)
    # What a 4.1.1 broker wrote (tests/fixtures/consumer_group): the member's tombstones, the
    # group epoch bumped (type 3), and the operator's reset of the emptied group.
    emptied = [member(0, "m-1"), unread(1, 3), commit(2, 50), unread(3, 8), member(4, "m-1", True),
               unread(5, 3), commit(6, 0)]  # fmt: skip
    assert outcomes(emptied)[-1][3] == [("OFFSET_REWIND", "ADMIN_RESET")]


def test_a_classic_groups_last_group_record_holds_all_its_members():
    # Whatever the partition holds that the replay cannot read: a group is one type at a time,
    # and a classic group's members are in its GroupMetadata value.
    rewind = [commit(2, 50), commit(3, 20)]
    unseen = unread(0, 5, group=None)
    assert outcomes([unseen, members(1, 0), *rewind])[-1][3] == [("OFFSET_REWIND", "ADMIN_RESET")]
    assert outcomes([unseen, members(1, 1), *rewind])[-1][3] == [("OFFSET_REWIND", "LATE_COMMIT")]
    # Deleted (a tombstone), the group may come back as another type, whose records the replay
    # may not read: a streams group's.
    deleted = Event(0, record_type=2, is_tombstone=True, group_id=GROUP)
    assert outcomes([deleted, *rewind])[-1][3] == [("OFFSET_REWIND", "ADMIN_RESET")]
    assert outcomes([deleted, unread(1, 17), *rewind])[-1][3] == [("OFFSET_REWIND", "LATE_COMMIT")]
    # An emptied consumer group in a partition whose records of other groups cannot be read:
    # the unread member records may be this group's, as another type's (not known Empty).
    left = [member(0, "m-1"), member(1, "m-1", left=True)]
    assert outcomes([*left, commit(2, 50), commit(3, 20)])[-1][3] == [
        ("OFFSET_REWIND", "ADMIN_RESET")
    ]
    assert outcomes([*left, unread(2, 5, group=None), commit(3, 50), commit(4, 20)])[-1][3] == [
        ("OFFSET_REWIND", "LATE_COMMIT")
    ]


def test_a_group_converted_between_protocols_is_empty_by_its_current_records():
    # Classic to consumer: Kafka deletes the classic group (a GroupMetadata tombstone, counted
    # here as no member) before the consumer group's member records.
    upgraded = [members(0, 1), commit(1, 50), members(2, 0), member(3, "m-1")]
    assert outcomes([*upgraded, commit(4, 0)])[-1][3] == [("OFFSET_REWIND", "LATE_COMMIT")]
    emptied = [*upgraded, member(4, "m-1", left=True), commit(5, 0)]
    assert outcomes(emptied)[-1][3] == [("OFFSET_REWIND", "ADMIN_RESET")]
    # Consumer to classic: every member's tombstone, then the classic group's record.
    downgraded = [member(0, "m-1"), commit(1, 50), member(2, "m-1", left=True), members(3, 1)]
    assert outcomes([*downgraded, commit(4, 0)])[-1][3] == [("OFFSET_REWIND", "LATE_COMMIT")]


def test_a_plain_commit_inside_a_transaction_that_aborts_commits_input_nobody_processed():
    events = [
        members(0, 2),
        commit(1, 10, pid=7), marker(2, 7),  # 0-9 processed and committed
        commit(3, 20, pid=7),  # 10-19 in an open transaction
        commit(4, 15),  # auto-commit of the consumer's position while it is open
        marker(5, 7, "ABORT"),  # its outputs aborted: 10-14 are committed, never processed
    ]  # fmt: skip
    rows = {r.event.offset: r for r in replay_partition(events)}
    assert [(f.finding_type, f.cause) for f in rows[4].findings] == [
        ("MIXED_OFFSET_COMMITS", "PLAIN_AND_TRANSACTIONAL")
    ]
    (lost,) = rows[3].findings
    assert (lost.finding_type, lost.cause) == ("MIXED_OFFSET_COMMITS", "ABORTED_RANGE_COMMITTED")
    assert (lost.aborted_from, lost.aborted_to, lost.other_record_offset) == (10, 15, 4)
    # The same plain commit with the transaction committed: nothing lost (its offset is skipped).
    committed = {r.event.offset: r for r in replay_partition([*events[:-1], marker(5, 7)])}
    assert committed[3].outcome == SKIPPED and not committed[3].findings
    # A plain commit after the abort (a consumer that takes over from the committed offset)
    # passes nothing that was in flight.
    after = outcomes([*events[:3], marker(4, 7, "ABORT"), commit(5, 15)])
    assert after[-1][3] == [("MIXED_OFFSET_COMMITS", "PLAIN_AND_TRANSACTIONAL")]
    assert all(not r[3] for r in after[:-1])
    # The processor crashed with its transaction open and its group emptied; an operator reset
    # the group past that input before the coordinator aborted it: the operator's choice.
    reset = outcomes([*events[:4], members(4, 0), commit(5, 15), marker(6, 7, "ABORT")])
    assert all(not r[3] for r in reset)


def test_two_producers_committing_one_key_in_overlapping_transactions():
    rows = outcomes([commit(0, 10, pid=7), commit(1, 12, pid=8), marker(2, 7), marker(3, 8)])
    assert rows[-1][3] == [("CONCURRENT_OFFSET_OWNERS", None)]
    one_aborted = outcomes(
        [commit(0, 10, pid=7), commit(1, 12, pid=8), marker(2, 7, "ABORT"), marker(3, 8)]
    )
    assert all(not r[3] for r in one_aborted)
    in_turn = outcomes([commit(0, 10, pid=7), marker(1, 7), commit(2, 12, pid=8), marker(3, 8)])
    assert all(not r[3] for r in in_turn)


def test_an_overlap_whose_other_transaction_aborted_witnesses_no_later_one():
    """Producer 7 committed while 9's offset was pending, and 9 aborted: no finding. Later 8's
    offset overlaps 7's next one, 8 commits and 7 aborts: no two overlapping offsets both
    committed, so no finding either (7's first commit is no witness of 8's)."""
    rows = outcomes(
        [
            commit(0, 10, pid=7), commit(1, 11, pid=9), marker(2, 7), marker(3, 9, "ABORT"),
            commit(4, 12, pid=7), commit(5, 13, pid=8), marker(6, 8), marker(7, 7, "ABORT"),
        ]
    )  # fmt: skip
    assert [r[3] for r in rows] == [[], [], [], []]
    # Both of the later ones committed: one finding, at the second commit, naming the first.
    both = {
        r.event.offset: r
        for r in replay_partition(
            [
                commit(0, 10, pid=7), commit(1, 11, pid=9), marker(2, 7), marker(3, 9, "ABORT"),
                commit(4, 12, pid=7), commit(5, 13, pid=8), marker(6, 8), marker(7, 7),
            ]
        )
    }  # fmt: skip
    found = [(o, f.finding_type, f.other_producer_id, f.other_record_offset)
             for o, r in both.items() for f in r.findings]  # fmt: skip
    assert found == [(4, "CONCURRENT_OFFSET_OWNERS", 8, 5)]
    # 9 aborted before 7 committed: 7's commit waits for nothing, and is no witness later.
    aborted_first = outcomes(
        [
            commit(0, 10, pid=7), commit(1, 11, pid=9), marker(2, 9, "ABORT"), marker(3, 7),
            commit(4, 12, pid=7), commit(5, 13, pid=9), marker(6, 9), marker(7, 7, "ABORT"),
        ]
    )  # fmt: skip
    assert all(not r[3] for r in aborted_first)
    # A tombstone clears 9's pending offset: 7's commit waits for it no more.
    cleared = outcomes(
        [
            commit(0, 10, pid=7), commit(1, 11, pid=9), marker(2, 7), tombstone(3),
            commit(4, 12, pid=7), commit(5, 13, pid=9), marker(6, 9), marker(7, 7, "ABORT"),
        ]
    )  # fmt: skip
    assert all(not r[3] for r in cleared)
