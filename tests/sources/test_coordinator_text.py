"""kafka-dump-log decoder text of every generation, and its parsing traps.

The real lines are copied as printed: fvaleri/strimzi-debugging sessions/010/README.md (3.9:
JSON offsets, text transaction log), strimzi/strimzi.github.io
_posts/2023-04-14-kafka-transactions.md (3.4, whose keySize was edited by hand: 26 for a
29-byte key), apache/kafka#22615 (4.x transaction log JSON), and tests/fixtures/consumer_group
(a KIP-848 consumer group's records, printed by kafka-dump-log 4.1.1 and 3.9.1). The other
lines follow the formatters of each tag (DumpLogSegments.scala 2.4.0, GroupMetadataManager.scala
and TransactionLog.scala 3.7.1, DumpLogSegments of 3.8 and 4.x), as the specification's §2 table
gives them.
"""

from __future__ import annotations

import contextlib
import random
import re
from pathlib import Path

import pytest

from eos_audit.processing.offset_metadata_manager import Event, replay_partition
from eos_audit.sources.kafka.coordinator_dump_log import parse_coordinator_dump_log
from eos_audit.sources.kafka.coordinator_records import (
    CoordinatorRecordError,
    DecodedRecord,
    decode_consumer_offsets,
    decode_transaction_state,
)
from eos_audit.sources.kafka.coordinator_segments import parse_coordinator_segment
from eos_audit.sources.kafka.coordinator_text import (
    DumpLogRecord,
    parse_decoder_text,
    parse_record_line,
)
from tests.sources.test_coordinator_records import (
    REAL_4_1_MEMBER_KEY,
    REAL_4_1_MEMBER_VALUE,
    i64,
    offset_commit_key,
    offset_commit_value,
    txn_key,
    txn_value,
)

CO = "__consumer_offsets"
TS = "__transaction_state"

REAL_3_9_OFFSET_COMMIT = (
    "| offset: 7 CreateTime: 1742739703027 keySize: 29 valueSize: 24 sequence: 0 headerKeys: [] "
    'key: {"type":"1","data":{"group":"my-group","topic":"input-topic","partition":0}} '
    'payload: {"version":"3","data":{"offset":1,"leaderEpoch":-1,"metadata":"",'
    '"commitTimestamp":1742739702993}}'
)
REAL_3_9_TRANSACTION_LOG = [
    "| offset: 0 CreateTime: 1742739549438 keySize: 15 valueSize: 37 sequence: -1 headerKeys: [] "
    "key: transaction_metadata::transactionalId=kafka-txn-0 payload: producerId:1,producerEpoch:0,"
    "state=Empty,partitions=[],txnLastUpdateTimestamp=1742739549435,txnTimeoutMs=60000",
    "| offset: 1 CreateTime: 1742739702876 keySize: 15 valueSize: 59 sequence: -1 headerKeys: [] "
    "key: transaction_metadata::transactionalId=kafka-txn-0 payload: producerId:1,producerEpoch:0,"
    "state=Ongoing,partitions=[output-topic-0],txnLastUpdateTimestamp=1742739702876,"
    "txnTimeoutMs=60000",
    "| offset: 2 CreateTime: 1742739702882 keySize: 15 valueSize: 87 sequence: -1 headerKeys: [] "
    "key: transaction_metadata::transactionalId=kafka-txn-0 payload: producerId:1,producerEpoch:0,"
    "state=Ongoing,partitions=[output-topic-0,__consumer_offsets-12],"
    "txnLastUpdateTimestamp=1742739702882,txnTimeoutMs=60000",
    "| offset: 3 CreateTime: 1742739703134 keySize: 15 valueSize: 87 sequence: -1 headerKeys: [] "
    "key: transaction_metadata::transactionalId=kafka-txn-0 payload: producerId:1,producerEpoch:0,"
    "state=PrepareCommit,partitions=[output-topic-0,__consumer_offsets-12],"
    "txnLastUpdateTimestamp=1742739703132,txnTimeoutMs=60000",
    "| offset: 4 CreateTime: 1742739703240 keySize: 15 valueSize: 37 sequence: -1 headerKeys: [] "
    "key: transaction_metadata::transactionalId=kafka-txn-0 payload: producerId:1,producerEpoch:0,"
    "state=CompleteCommit,partitions=[],txnLastUpdateTimestamp=1742739703142,txnTimeoutMs=60000",
]
REAL_3_4_OFFSET_COMMIT = (
    "| offset: 1 CreateTime: 1680383688085 keySize: 26 valueSize: 24 sequence: 0 headerKeys: [] "
    "key: offset_commit::group=my-group,partition=input-topic-0 payload: offset=1"
)
REAL_4_X_TRANSACTION_LOG = (
    "| offset: 0 CreateTime: 1781778768196 keySize: 15 valueSize: 45 sequence: -1 headerKeys: [] "
    'key: {"type":"0","data":{"transactionalId":"kafka-txn-0"}} payload: {"version":"1","data":'
    '{"producerId":0,"previousProducerId":0,"producerEpoch":0,"transactionTimeoutMs":60000,'
    '"transactionStatus":"Empty","transactionPartitions":null,'
    '"transactionLastUpdateTimestampMs":1781778768194,"transactionStartTimestampMs":-1}}'
)
REAL_MARKER = (
    "| offset: 8 CreateTime: 1742739703213 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
    "endTxnMarker: COMMIT coordinatorEpoch: 0"
)
REAL_BATCH = (
    "baseOffset: 8 lastOffset: 8 count: 1 baseSequence: -1 lastSequence: -1 producerId: 1 "
    "producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: true "
    "deleteHorizonMs: OptionalLong.empty position: 2095 CreateTime: 1742739703213 size: 78 "
    "magic: 2 compresscodec: none crc: 1231080676 isvalid: true"
)


def _offsets(text: str, **sizes) -> DecodedRecord:
    return parse_decoder_text(text, CO, **sizes)


def _transactions(text: str, **sizes) -> DecodedRecord:
    return parse_decoder_text(text, TS, **sizes)


# ------------------------------------------------------------------------------------------------
# Real lines
# ------------------------------------------------------------------------------------------------
def test_the_real_3_9_json_offset_commit_is_what_the_binary_decoder_gives():
    parsed = parse_record_line(REAL_3_9_OFFSET_COMMIT, CO)
    binary = decode_consumer_offsets(
        offset_commit_key("my-group", "input-topic", 0),
        offset_commit_value(3, 1, "", 1742739702993),
    )
    assert parsed == DumpLogRecord(7, 29, 24, binary)
    assert binary.leader_epoch == -1 and binary.value_version == 3


def test_the_real_3_9_transaction_log_lines_give_the_state_changes():
    parsed = [parse_record_line(line, TS) for line in REAL_3_9_TRANSACTION_LOG]
    assert [p.offset for p in parsed] == [0, 1, 2, 3, 4]
    assert [p.record.transaction_status for p in parsed] == [
        "Empty", "Ongoing", "Ongoing", "PrepareCommit", "CompleteCommit",
    ]  # fmt: skip
    assert parsed[2].record == DecodedRecord(
        0,
        "TransactionLog",
        transactional_id="kafka-txn-0",
        producer_id=1,
        producer_epoch=0,
        transaction_timeout_ms=60000,
        transaction_status="Ongoing",
        transaction_partitions=(("output-topic", 0), ("__consumer_offsets", 12)),
        last_update_timestamp_ms=1742739702882,
    )
    assert parsed[0].record.transaction_partitions == ()


def test_the_real_3_4_line_parses_though_its_key_size_was_edited():
    parsed = parse_record_line(REAL_3_4_OFFSET_COMMIT, CO)
    assert (parsed.offset, parsed.key_size) == (1, 26)
    assert parsed.record == DecodedRecord(
        1,
        "OffsetCommit",
        group_id="my-group",
        committed_topic="input-topic",
        committed_partition=0,
        committed_offset=1,
        metadata="",
    )


def test_the_real_4_x_transaction_log_json_is_what_the_binary_decoder_gives():
    parsed = parse_record_line(REAL_4_X_TRANSACTION_LOG, TS)
    binary = decode_transaction_state(
        txn_key("kafka-txn-0"), txn_value(1, 0, 0, 0, None, 1781778768194, tagged={0: i64(0)})
    )
    assert parsed == DumpLogRecord(0, 15, 45, binary)
    assert (binary.next_producer_id, binary.client_transaction_version) == (-1, 0)


def test_marker_and_batch_lines_are_not_decoder_records():
    assert parse_record_line(REAL_MARKER, CO) is None
    assert parse_record_line(REAL_BATCH, CO) is None
    assert parse_record_line("Log starting offset: 0", TS) is None


# ------------------------------------------------------------------------------------------------
# The generations of the specification's table
# ------------------------------------------------------------------------------------------------
def test_2_4_offset_commit_with_and_without_metadata():
    plain = _offsets("key: offset::G:T:5 payload: 42")
    assert (plain.group_id, plain.committed_topic, plain.committed_partition) == ("G", "T", 5)
    assert (plain.committed_offset, plain.metadata, plain.value_version) == (42, "", None)
    with_meta = _offsets("key: offset::G:T:5 payload: 42:meta")
    assert (with_meta.committed_offset, with_meta.metadata) == (42, "meta")


def test_2_4_group_metadata_json():
    decoded = _offsets(
        'key: {"metadata":"G"} payload: {"protocolType":"consumer","protocol":"range",'
        '"generationId":3,"assignment":"{m=[t-0]}"}'
    )
    assert decoded == DecodedRecord(
        2,
        "GroupMetadata",
        group_id="G",
        protocol_type="consumer",
        generation=3,
        protocol="range",
        member_count=1,
    )
    empty = _offsets(
        'key: {"metadata":"G"} payload: {"protocolType":"consumer","protocol":null,'
        '"generationId":4,"assignment":"{}"}'
    )
    assert (empty.member_count, empty.protocol) == (0, None)


def test_2_4_transaction_log_with_a_scala_set():
    decoded = _transactions(
        "key: transactionalId=X payload: producerId:7,producerEpoch:2,state=Ongoing,"
        "partitions=Set(t-0, my-topic-11),txnLastUpdateTimestamp=1000,txnTimeoutMs=60000"
    )
    assert decoded.transactional_id == "X"
    assert decoded.transaction_partitions == (("t", 0), ("my-topic", 11))
    assert (decoded.producer_id, decoded.producer_epoch, decoded.transaction_status) == (
        7,
        2,
        "Ongoing",
    )
    scala_2_13 = _transactions(
        "key: transactionalId=X payload: producerId:7,producerEpoch:2,state=Empty,"
        "partitions=HashSet(),txnLastUpdateTimestamp=1000,txnTimeoutMs=60000"
    )
    assert scala_2_13.transaction_partitions == ()


def test_2_5_to_3_7_offset_commit_group_metadata_and_tombstones():
    decoded = _offsets("key: offset_commit::group=G,partition=T-3 payload: offset=42,metadata=M")
    assert (decoded.group_id, decoded.committed_topic, decoded.committed_partition) == ("G", "T", 3)
    assert (decoded.committed_offset, decoded.metadata) == (42, "M")
    deleted = _offsets("key: offset_commit::group=G,partition=T-3 payload: <DELETE>")
    assert deleted == DecodedRecord(
        1,
        "OffsetCommit",
        is_tombstone=True,
        group_id="G",
        committed_topic="T",
        committed_partition=3,
    )
    group = _offsets(
        'key: group_metadata::group=G payload: {"protocolType":"consumer","protocol":"range",'
        '"generationId":9,"assignment":"{c-1=[t-0, t-1]}"}'
    )
    assert (group.record_type, group.generation, group.member_count) == (2, 9, 1)
    assert _offsets("key: group_metadata::group=G payload: <DELETE>").is_tombstone


@pytest.mark.parametrize(
    ("protocol_type", "assignment", "members"),
    [
        ("consumer", "{}", 0),
        ("consumer", "{c-1=[t-0, t-1]}", 1),
        ("consumer", "{c-1=[t-0, my-topic-11],c-2=[]}", 2),
        ("consumer", "{c-1=[t-0]:00FF,c-2=[t-1],c-3=[t-2]:}", 3),  # user data, in hex
        ("connect", "{w-1=0001AB,w-2=}", 2),  # another protocol's assignment, in hex
    ],
)
def test_2_5_to_3_7_group_metadata_counts_the_members_of_its_assignment(
    protocol_type, assignment, members
):
    line = (
        f'key: group_metadata::group=G payload: {{"protocolType":"{protocol_type}",'
        f'"protocol":"range","generationId":9,"assignment":"{assignment}"}}'
    )
    assert _offsets(line).member_count == members


def last_record_findings(lines: list[str]) -> list[tuple[str, str | None]]:
    """`__consumer_offsets` decoder lines (one record each, at offsets 0, 1, ...) replayed: the
    findings of the last record's row, with their causes."""
    events = []
    for offset, line in enumerate(lines):
        decoded = _offsets(line)
        events.append(
            Event(
                offset,
                record_type=decoded.record_type,
                is_skipped=decoded.is_skipped,
                group_id=decoded.group_id,
                topic=decoded.committed_topic,
                partition=decoded.committed_partition,
                committed_offset=decoded.committed_offset,
                member_count=decoded.member_count,
            )  # fmt: skip
        )
    last = max(replay_partition(events), key=lambda r: r.event.offset)
    return [(f.finding_type, f.cause) for f in last.findings]


def test_a_live_members_rewind_in_3_7_text_is_a_late_commit_not_an_operators_reset():
    """The group's members are in the printed assignment: the replay must not take it Empty."""
    lines = [
        'key: group_metadata::group=G payload: {"protocolType":"consumer","protocol":"range",'
        '"generationId":9,"assignment":"{c-1=[t-0, t-1]}"}',
        "key: offset_commit::group=G,partition=t-0 payload: offset=10",
        "key: offset_commit::group=G,partition=t-0 payload: offset=5",
    ]
    assert last_record_findings(lines) == [("OFFSET_REWIND", "LATE_COMMIT")]


def test_2_5_to_3_9_transaction_log_tombstone():
    decoded = _transactions("key: transaction_metadata::transactionalId=X payload: <DELETE>")
    assert decoded == DecodedRecord(0, "TransactionLog", is_tombstone=True, transactional_id="X")


def test_3_8_json_group_metadata_counts_its_members():
    decoded = _offsets(
        'key: {"type":"2","data":{"group":"G"}} payload: {"version":"4","data":'
        '{"protocolType":"consumer","generation":5,"protocol":"range","leader":"m-1",'
        '"currentStateTimestamp":1700000000000,"members":[{"memberId":"m-1"},{"memberId":"m-2"}]}}'
    )
    assert decoded == DecodedRecord(
        2,
        "GroupMetadata",
        value_version=4,
        group_id="G",
        protocol_type="consumer",
        generation=5,
        protocol="range",
        leader="m-1",
        current_state_timestamp_ms=1700000000000,
        member_count=2,
    )


def test_4_1_value_version_4_with_a_topic_id():
    decoded = _offsets(
        'key: {"type":"1","data":{"group":"G","topic":"T","partition":2}} payload: {"version":"4",'
        '"data":{"offset":9,"leaderEpoch":3,"metadata":"m","commitTimestamp":5,'
        '"topicId":"AAECAwQFBgcICQoLDA0ODw"}}'
    )
    binary = decode_consumer_offsets(
        offset_commit_key("G", "T", 2),
        offset_commit_value(4, 9, "m", 5, leader_epoch=3, tagged={0: bytes(range(16))}),
    )
    assert decoded == binary


def test_json_tombstones_and_v1_expire_timestamp():
    deleted = _offsets(
        'key: {"type":"1","data":{"group":"G","topic":"T","partition":0}} payload: <DELETE>'
    )
    assert (deleted.is_tombstone, deleted.value_version, deleted.committed_offset) == (
        True,
        None,
        None,
    )
    v1 = _offsets(
        'key: {"type":"0","data":{"group":"G","topic":"T","partition":0}} payload: {"version":"1",'
        '"data":{"offset":3,"metadata":"","commitTimestamp":5,"expireTimestamp":9}}'
    )
    assert (v1.record_type, v1.expire_timestamp_ms, v1.leader_epoch) == (0, 9, None)
    txn = _transactions('key: {"type":"0","data":{"transactionalId":"X"}} payload: <DELETE>')
    assert txn == DecodedRecord(0, "TransactionLog", is_tombstone=True, transactional_id="X")


@pytest.mark.parametrize("status", ["4", '"4"', '"CompleteCommit"'])
def test_4_x_transaction_status_numeric_or_named(status):
    decoded = _transactions(
        'key: {"type":"0","data":{"transactionalId":"X"}} payload: {"version":"1","data":'
        '{"producerId":3,"previousProducerId":2,"nextProducerId":4,"producerEpoch":1,'
        f'"transactionTimeoutMs":60000,"transactionStatus":{status},"transactionPartitions":'
        '[{"topic":"out-put","partitionIds":[0,3]}],"transactionLastUpdateTimestampMs":10,'
        '"transactionStartTimestampMs":8,"clientTransactionVersion":2}}'
    )
    assert decoded.transaction_status == "CompleteCommit"
    assert decoded.transaction_partitions == (("out-put", 0), ("out-put", 3))
    assert (decoded.previous_producer_id, decoded.next_producer_id) == (2, 4)
    assert (decoded.start_timestamp_ms, decoded.client_transaction_version) == (8, 2)


def test_unknown_record_types_are_skipped_in_every_generation():
    skipped = _offsets("key: Unknown record type 17 at offset 40, skipping.", value_size=-1)
    assert skipped == DecodedRecord(17, "StreamsGroupMetadata", is_tombstone=True, is_skipped=True)
    assert _offsets("key: unknown::version=3") == DecodedRecord(
        3, "ConsumerGroupMetadata", is_skipped=True
    )
    assert _transactions("key: unknown::version=1") == DecodedRecord(1, None, is_skipped=True)
    json_type = _offsets(
        'key: {"type":"8","data":{"groupId":"G","memberId":"m"}} payload: <DELETE>'
    )
    assert json_type == DecodedRecord(
        8, "ConsumerGroupCurrentMemberAssignment", is_tombstone=True, is_skipped=True,
        group_id="G",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "record", "group"),
    [
        # 3.8+ JSON of a type the tool knows and the audit does not read: the key's groupId.
        ('key: {"type":"3","data":{"groupId":"g,=: x"}} payload: {"version":"0","data":'
         '{"epoch":2}}', 3, "g,=: x"),
        ('key: {"type":"17","data":{"groupId":"app"}} payload: {"version":"0","data":{}}', 17,
         "app"),
        ('key: {"type":"20","data":{"groupId":"app","memberId":"m"}} payload: <DELETE>', 20,
         "app"),
        # A groupId that is not a string is no group.
        ('key: {"type":"17","data":{"groupId":7}} payload: <DELETE>', 17, None),
        ('key: {"type":"17","data":{}} payload: <DELETE>', 17, None),
        # The lines that print no key: 3.8+ of a type it does not know, 3.5-3.7 of any.
        ("key: Unknown record type 17 at offset 40, skipping.", 17, None),
        ("key: unknown::version=5", 5, None),
    ],
)  # fmt: skip
def test_a_skipped_record_keeps_the_group_its_text_prints(text, record, group):
    decoded = _offsets(text)
    assert (decoded.record_type, decoded.is_skipped, decoded.group_id) == (record, True, group)


def test_a_consumer_groups_rewind_from_3_7_text_is_a_late_commit():
    """3.5-3.7 print a member record as `unknown::version=5`, no group, no member: whether the
    partition's groups without their own membership records have members is unknown. Without
    such a line, the group that only commits is a simple group, Empty (an operator's reset)."""
    lines = [
        "key: unknown::version=5",
        "key: offset_commit::group=G,partition=t-0 payload: offset=10",
        "key: offset_commit::group=G,partition=t-0 payload: offset=5",
    ]
    assert last_record_findings(lines) == [("OFFSET_REWIND", "LATE_COMMIT")]
    assert last_record_findings(lines[1:]) == [("OFFSET_REWIND", "ADMIN_RESET")]


CONSUMER_GROUP = Path(__file__).resolve().parents[1] / "fixtures" / "consumer_group"
MEMBER = "Wf0kk4bCRPuS0o7BKN3vjA"


@pytest.mark.parametrize("release", ["4_1_1", "3_9_1"])
def test_a_consumer_groups_records_print_as_the_segment_decodes_them(release):
    """A 4.1.1 broker's `__consumer_offsets` partition: a librdkafka member of a consumer group
    (group.protocol=consumer) joins (types 5, 3, 7, 6, 8), commits (1), leaves (tombstones of
    8, 7 and 5, and a group epoch 3), and kafka-consumer-groups resets the group (1). Printed by
    each release's kafka-dump-log --offsets-decoder, in the 3.8-3.9 and the 4.x JSON."""
    segment = parse_coordinator_segment(
        (CONSUMER_GROUP / "__consumer_offsets-1.log").read_bytes(),
        topic=CO, partition=1, path="__consumer_offsets-1/00000000000000000000.log",
    ).to_pylist()  # fmt: skip
    text = parse_coordinator_dump_log(
        (CONSUMER_GROUP / f"offsets_decoder_{release}.txt").read_bytes(), path="dump.txt"
    ).to_pylist()
    assert [{**r, "source": None} for r in text] == [{**r, "source": None} for r in segment]
    members = [
        (r["offset"], r["group_id"], r["member_id"], r["is_tombstone"], r["value_version"])
        for r in text if r["record_type"] == 5
    ]  # fmt: skip
    assert members == [(0, "g848", MEMBER, False, 0), (9, "g848", MEMBER, True, None)]
    skipped = [(r["offset"], r["record_type"], r["is_tombstone"]) for r in text if r["is_skipped"]]
    assert skipped == [(1, 3, False), (2, 7, False), (3, 6, False), (4, 8, False), (7, 8, True),
                       (8, 7, True), (10, 3, False)]  # fmt: skip
    # Each keeps its group, in the segment as in the text.
    assert {r["group_id"] for r in text + segment if r["is_skipped"]} == {"g848"}
    assert [r["member_id"] for r in text if r["record_type"] != 5] == [None] * 11


def test_a_json_member_line_is_what_the_binary_decoder_gives():
    line = (CONSUMER_GROUP / "offsets_decoder_4_1_1.txt").read_text().splitlines()[3]
    parsed = parse_record_line(line, CO)
    assert (parsed.offset, parsed.key_size, parsed.value_size) == (0, 32, 40)
    assert parsed.record == decode_consumer_offsets(REAL_4_1_MEMBER_KEY, REAL_4_1_MEMBER_VALUE)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('key: {"type":"5","data":{"groupId":"G"}} payload: <DELETE>',
         "the member key has no groupId or memberId"),
        ('key: {"type":"5","data":{"groupId":"G","memberId":7}} payload: <DELETE>',
         "memberId is not a string"),
        ('key: {"type":"5","data":{"groupId":"G","memberId":"m"}} payload: {"version":"0",'
         '"data":{"clientHost":"/h"}}', "the member payload has no clientId"),
    ],
)  # fmt: skip
def test_a_member_line_without_its_ids_or_client_is_an_error(text, reason):
    with pytest.raises(CoordinatorRecordError, match=re.escape(reason)):
        _offsets(text)


def test_an_error_line_is_a_decode_error_with_the_tools_message():
    with pytest.raises(
        CoordinatorRecordError,
        match=re.escape("kafka-dump-log could not decode it: Could not read record with version"),
    ):
        parse_record_line(
            "| offset: 12 CreateTime: 1 keySize: 9 valueSize: 4 sequence: -1 headerKeys: [] "
            "key: Error at offset 12, skipping. Could not read record with version 9 from value's "
            "buffer due to: x.",
            CO,
        )


@pytest.mark.parametrize(
    ("text", "topic", "reason"),
    [
        ("payload: 42", CO, "has no key"),
        ("key: something else payload: 1", CO, "not one the offsets decoder prints"),
        ("key: offset_commit::group=G,partition=T-0 payload: offset=x", CO,
         "not a key and payload"),
        ("key: transactionalId=X payload: producerId:1", TS, "not a key and payload"),
        ('key: {"type":"1","data":{"group":"G"}} payload: {"version":"3"}', CO,
         '"version" and "data"'),
        ('key: {"type":"1","data":{}} payload: {"version":"3","data":{"offset":1}}', CO,
         "no offset or commitTimestamp"),
        ('key: {"type":"x","data":{}} payload: <DELETE>', CO, "type is not an integer"),
        ('key: {"type":"0","data":{"transactionalId":"X"}} payload: {"version":"1","data":'
         '{"producerId":1,"transactionStatus":9}}', TS, "transaction status 9 is not"),
        ('key: {"type":"1","data":', CO, "the key is not JSON"),
        ('key: {"type":"0","data":{"transactionalId":"X"}} payload: {"version":"1","data":'
         '{"producerId":1,"transactionStatus":[4]}}', TS, "transactionStatus is not an integer"),
        ('key: {"type":"0","data":{"transactionalId":"X"}} payload: {"version":"1","data":'
         '{"producerId":1,"transactionPartitions":[{"topic":"t"}]}}', TS, "has no partitionIds"),
    ],
)  # fmt: skip
def test_text_that_is_no_known_decoder_output_is_an_error(text, topic, reason):
    with pytest.raises(CoordinatorRecordError, match=re.escape(reason)):
        parse_decoder_text(text, topic)


def test_only_the_coordinator_topics_have_decoders():
    with pytest.raises(ValueError, match="is not a coordinator topic"):
        parse_decoder_text("key: x", "orders")


# ------------------------------------------------------------------------------------------------
# Parsing traps
# ------------------------------------------------------------------------------------------------
def test_trap_a_topic_partition_splits_at_the_last_dash():
    decoded = _offsets("key: offset_commit::group=g,partition=my-input-topic-12 payload: offset=1")
    assert (decoded.committed_topic, decoded.committed_partition) == ("my-input-topic", 12)
    txn = _transactions(
        "key: transaction_metadata::transactionalId=t payload: producerId:1,producerEpoch:0,"
        "state=Ongoing,partitions=[a-b-c-7,__consumer_offsets-49],txnLastUpdateTimestamp=1,"
        "txnTimeoutMs=2"
    )
    assert txn.transaction_partitions == (("a-b-c", 7), ("__consumer_offsets", 49))


@pytest.mark.parametrize(
    "group", ["a,b=c:d", "g,partition=x-1", "x=y", "::", "g payload: offset=1", "ü,=:"]
)
def test_trap_group_ids_with_separators_split_from_the_right(group):
    line = f"key: offset_commit::group={group},partition=t-0 payload: offset=5,metadata=m"
    decoded = _offsets(line)
    assert (decoded.group_id, decoded.committed_topic, decoded.committed_offset) == (group, "t", 5)
    old = _offsets(f"key: offset::{group}:topic-x:3 payload: 42:meta:with:colons")
    assert (old.group_id, old.committed_topic, old.committed_partition) == (group, "topic-x", 3)
    assert (old.committed_offset, old.metadata) == (42, "meta:with:colons")
    group_line = _offsets(f"key: group_metadata::group={group} payload: <DELETE>")
    assert group_line.group_id == group


def test_trap_transactional_ids_with_separators():
    for tid in ("a,b=c:d", "x payload: producerId:1", "state=Empty,"):
        decoded = _transactions(
            f"key: transaction_metadata::transactionalId={tid} payload: producerId:1,"
            "producerEpoch:0,state=Empty,partitions=[],txnLastUpdateTimestamp=1,txnTimeoutMs=2"
        )
        assert decoded.transactional_id == tid


def test_trap_metadata_is_free_text():
    for metadata in ("a,b=c", "x payload: y", "  spaced  ", "AQAAAYzL3Jrg=", "offset=3"):
        decoded = _offsets(
            f"key: offset_commit::group=g,partition=t-0 payload: offset=7,metadata={metadata}"
        )
        assert (decoded.committed_offset, decoded.metadata) == (7, metadata)


def test_trap_the_key_size_chooses_between_two_readable_cuts():
    # Both cuts read: group "g" with metadata "m,partition=t-0 payload: offset=7", or group
    # "g,partition=t-0 payload: offset=1,metadata=m" with offset 7. The keySize tells which.
    body = (
        "key: offset_commit::group=g,partition=t-0 payload: offset=1,metadata=m,partition=t-0"
        " payload: offset=7"
    )
    short = _offsets(body, key_size=2 + 2 + 1 + 2 + 1 + 4)
    assert (short.group_id, short.committed_offset) == ("g", 1)
    long_group = "g,partition=t-0 payload: offset=1,metadata=m"
    long = _offsets(body, key_size=2 + 2 + len(long_group) + 2 + 1 + 4)
    assert (long.group_id, long.committed_offset, long.metadata) == (long_group, 7, "")


def test_trap_the_2_4_tombstone_line_has_no_key():
    line = "| offset: 5 CreateTime: 1570000000000 keysize: 30 valuesize: -1 sequence: -1"
    line += " headerKeys: []"
    parsed = parse_record_line(line, CO)
    assert parsed == DumpLogRecord(5, 30, -1, DecodedRecord(None, None, is_tombstone=True))
    with pytest.raises(CoordinatorRecordError, match="no decoder output for a value of 24 bytes"):
        parse_record_line(line.replace("valuesize: -1", "valuesize: 24"), CO)


def test_trap_2_4_stops_at_a_transaction_log_tombstone():
    """2.4's transaction-log decoder fails on a tombstone after printing its offset and sizes:
    the line is the dump's last, and says the rest of the partition is missing."""
    line = "| offset: 5 CreateTime: 1570000000000 keysize: 13 valuesize: -1 sequence: -1"
    line += " headerKeys: []"
    with pytest.raises(CoordinatorRecordError, match="the rest of the partition is missing"):
        parse_record_line(line, TS)


def test_trap_json_values_are_strings_or_numbers():
    as_strings = _offsets(
        'key: {"type":"1","data":{"group":"G","topic":"T","partition":0}} payload: {"version":"3",'
        '"data":{"offset":1,"leaderEpoch":-1,"metadata":"","commitTimestamp":2}}'
    )
    as_numbers = _offsets(
        'key: {"type":1,"data":{"group":"G","topic":"T","partition":0}} payload: {"version":3,'
        '"data":{"offset":1,"leaderEpoch":-1,"metadata":"","commitTimestamp":2}}'
    )
    assert as_strings == as_numbers
    assert (as_strings.record_type, as_strings.value_version) == (1, 3)


def test_trap_json_ids_with_quotes_and_payload_text_stay_whole():
    decoded = _offsets(
        'key: {"type":"1","data":{"group":"g\\" payload: {","topic":"T","partition":0}} payload: '
        '{"version":"3","data":{"offset":1,"leaderEpoch":-1,"metadata":"} payload: x",'
        '"commitTimestamp":2}}'
    )
    assert (decoded.group_id, decoded.metadata) == ('g" payload: {', "} payload: x")


def test_damaged_lines_raise_only_the_decode_error():
    rng = random.Random(55)
    lines = [
        (REAL_3_9_OFFSET_COMMIT, CO), (REAL_3_4_OFFSET_COMMIT, CO), (REAL_4_X_TRANSACTION_LOG, TS),
        *((line, TS) for line in REAL_3_9_TRANSACTION_LOG),
    ]  # fmt: skip
    alphabet = '{}[]",:=- 0123456789abcxyz<>\\'
    for _ in range(1000):
        line, topic = rng.choice(lines)
        chars = list(line)
        for _ in range(rng.randint(1, 3)):
            chars[rng.randrange(len(chars))] = rng.choice(alphabet)
        with contextlib.suppress(CoordinatorRecordError):
            parse_record_line("".join(chars), topic)
