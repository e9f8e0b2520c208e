"""Coordinator records from bytes: partitionFor, protocol primitives, each key and value version.

The bytes are written here by a small encoder that follows the JSON schemas field by field
(group-coordinator/.../OffsetCommitValue.json, GroupMetadataValue.json,
transaction-coordinator/.../TransactionLogValue.json), independently of the decoder. The real
samples of docs' specification (eos_processing.md §2, fvaleri/strimzi-debugging sessions/010 and
apache/kafka#22615) print each record's keySize and valueSize: the encoder's bytes for the same
fields must have exactly those sizes, which checks the encoder against Kafka.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import random
import re
import struct
from pathlib import Path

import pytest
import snappy
from kafka.record.default_records import DefaultRecordBatchBuilder

from eos_audit.schemas import COORDINATOR_RECORDS_COLUMNS, PUBLISHED, contract_json
from eos_audit.sources.kafka import batch_records, coordinator_keys, coordinator_records
from eos_audit.sources.kafka.batch_records import (
    CompressionNotDecodedError,
    RecordBatchError,
    walk_batch,
    walk_records,
)
from eos_audit.sources.kafka.coordinator_records import (
    DECODED_FIELDS,
    CoordinatorRecordError,
    DecodedRecord,
    decode_consumer_offsets,
    decode_transaction_state,
)
from eos_audit.sources.kafka.protocol import ProtocolFormatError, ProtocolReader

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"


# ------------------------------------------------------------------------------------------------
# A tiny encoder, written from the JSON schemas (KIP-482 for the flexible versions)
# ------------------------------------------------------------------------------------------------
def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def uvarint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def string(s: str | None, flexible: bool = False) -> bytes:
    if s is None:
        return uvarint(0) if flexible else i16(-1)
    raw = s.encode()
    return (uvarint(len(raw) + 1) if flexible else i16(len(raw))) + raw


def blob(b: bytes, flexible: bool = False) -> bytes:
    return (uvarint(len(b) + 1) if flexible else i32(len(b))) + b


def array(items: list[bytes] | None, flexible: bool = False) -> bytes:
    if items is None:
        return uvarint(0) if flexible else i32(-1)
    return (uvarint(len(items) + 1) if flexible else i32(len(items))) + b"".join(items)


def tags(fields: dict[int, bytes]) -> bytes:
    out = uvarint(len(fields))
    for tag in sorted(fields):
        out += uvarint(tag) + uvarint(len(fields[tag])) + fields[tag]
    return out


def offset_commit_key(group: str, topic: str, partition: int, record_type: int = 1) -> bytes:
    return i16(record_type) + string(group) + string(topic) + i32(partition)


def offset_commit_value(
    version: int,
    offset: int,
    metadata: str,
    commit_ts: int,
    *,
    leader_epoch: int = -1,
    expire_ts: int = -1,
    tagged: dict[int, bytes] | None = None,
) -> bytes:
    flexible = version >= 4
    out = i16(version) + i64(offset)
    if version >= 3:
        out += i32(leader_epoch)
    out += string(metadata, flexible) + i64(commit_ts)
    if version == 1:
        out += i64(expire_ts)
    if flexible:
        out += tags(tagged or {})
    return out


def member(version: int, member_id: str, instance_id: str | None = None) -> bytes:
    flexible = version >= 4
    out = string(member_id, flexible)
    if version >= 3:
        out += string(instance_id, flexible)
    out += string("client-1", flexible) + string("/10.0.0.1", flexible)
    if version >= 1:
        out += i32(300000)
    out += i32(45000) + blob(b"\x00\x01sub", flexible) + blob(b"\x00\x01asg", flexible)
    return out + (tags({}) if flexible else b"")


def group_metadata_value(version: int, members: list[bytes], generation: int = 7) -> bytes:
    flexible = version >= 4
    out = i16(version) + string("consumer", flexible) + i32(generation)
    out += string("range", flexible) + string("member-a" if members else None, flexible)
    if version >= 2:
        out += i64(1_700_000_000_123)
    out += array(members, flexible)
    return out + (tags({}) if flexible else b"")


def consumer_member_key(group: str, member: str) -> bytes:
    # ConsumerGroupMemberMetadataKey.json: GroupId, MemberId (not flexible).
    return i16(5) + string(group) + string(member)


def consumer_member_value(
    topics: list[str], *, instance_id: str | None = None, tagged: dict[int, bytes] | None = None
) -> bytes:
    # ConsumerGroupMemberMetadataValue.json v0 (flexible): what librdkafka's member sends.
    out = i16(0) + string(instance_id, True) + string(None, True)  # InstanceId, RackId
    out += string("rdkafka", True) + string("/127.0.0.1", True)  # ClientId, ClientHost
    out += array([string(t, True) for t in topics], True)  # SubscribedTopicNames
    out += string("", True) + i32(300000) + string(None, True)  # Regex, timeout, ServerAssignor
    return out + tags(tagged or {})


def txn_key(transactional_id: str, record_type: int = 0) -> bytes:

    return i16(record_type) + string(transactional_id)


def txn_value(
    version: int,
    producer_id: int,
    epoch: int,
    status: int,
    partitions: dict[str, list[int]] | None,
    last_update: int,
    start: int = -1,
    timeout: int = 60000,
    tagged: dict[int, bytes] | None = None,
) -> bytes:
    flexible = version >= 1
    out = i16(version) + i64(producer_id) + i16(epoch) + i32(timeout) + i8(status)
    entries = None
    if partitions is not None:
        entries = [
            string(topic, flexible)
            + array([i32(p) for p in ids], flexible)
            + (tags({}) if flexible else b"")
            for topic, ids in partitions.items()
        ]
    out += array(entries, flexible) + i64(last_update) + i64(start)
    return out + (tags(tagged or {}) if flexible else b"")


# ------------------------------------------------------------------------------------------------
# partitionFor and the topics
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("key", "expected"),
    [("my-group", 12), ("kafka-txn-0", 30), ("polygenelubricants", 0)],
)
def test_partition_for_gives_the_specifications_samples(key, expected):
    assert coordinator_keys.partition_for(key) == expected


def test_the_hash_is_javas_with_int32_overflow_and_min_value_maps_to_zero():
    assert coordinator_keys.java_string_hash("polygenelubricants") == -(2**31)
    assert coordinator_keys.java_string_hash("my-group") < 0  # abs(h % 50) would give 38
    assert abs(coordinator_keys.java_string_hash("my-group") % 50) == 38
    assert coordinator_keys.java_string_hash("") == 0
    assert coordinator_keys.java_string_hash("a") == 97


def test_the_hash_reads_utf16_code_units_like_java():
    # "a" + U+1F600 is 'a' and a surrogate pair in Java: 31 * (31 * 97 + 0xD83D) + 0xDE00.
    assert coordinator_keys.java_string_hash("a\U0001f600") == 31 * (31 * 97 + 0xD83D) + 0xDE00


def test_partition_for_takes_the_partition_count_and_rejects_zero():
    assert coordinator_keys.partition_for("my-group", 1) == 0
    assert coordinator_keys.partition_for("polygenelubricants", 7) == 0
    with pytest.raises(ValueError, match=re.escape("at least one partition, not 0")):
        coordinator_keys.partition_for("g", 0)


def test_the_coordinator_topics_are_named_as_in_kafka():
    assert coordinator_keys.CONSUMER_OFFSETS_TOPIC == "__consumer_offsets"
    assert coordinator_keys.TRANSACTION_STATE_TOPIC == "__transaction_state"
    assert coordinator_keys.DEFAULT_COORDINATOR_PARTITIONS == 50


# ------------------------------------------------------------------------------------------------
# Protocol primitives
# ------------------------------------------------------------------------------------------------
def test_the_protocol_reader_reads_each_primitive_and_checks_bounds():
    data = i8(-2) + i16(-3) + i32(-4) + i64(-5) + uvarint(300) + b"\x03" + bytes(16)
    reader = ProtocolReader(data)
    assert [reader.int8(), reader.int16(), reader.int32(), reader.int64()] == [-2, -3, -4, -5]
    assert reader.unsigned_varint() == 300
    assert reader.varint() == -2  # zig-zag 3
    assert reader.uuid() is None  # Uuid.ZERO_UUID
    reader.expect_end()
    with pytest.raises(
        ProtocolFormatError, match=re.escape("needs 4 bytes at byte 0, only 2 left")
    ):
        ProtocolReader(b"\x00\x01").int32("x")
    with pytest.raises(ProtocolFormatError, match="longer than 5 bytes"):
        ProtocolReader(b"\xff" * 6).unsigned_varint()


def test_a_uuid_reads_as_kafka_prints_it():
    raw = bytes(range(1, 17))
    assert ProtocolReader(raw).uuid() == "AQIDBAUGBwgJCgsMDQ4PEA"  # URL-safe base64, no padding


# ------------------------------------------------------------------------------------------------
# __consumer_offsets
# ------------------------------------------------------------------------------------------------
def test_the_real_3_9_offset_commit_sample_has_kafkas_sizes_and_decodes():
    # strimzi-debugging sessions/010: offset 7 keySize: 29 valueSize: 24, key {"type":"1",...
    # "group":"my-group","topic":"input-topic","partition":0} payload {"version":"3", "offset":1,
    # "leaderEpoch":-1,"metadata":"","commitTimestamp":1742739702993}
    key = offset_commit_key("my-group", "input-topic", 0)
    value = offset_commit_value(3, 1, "", 1742739702993)
    assert (len(key), len(value)) == (29, 24)
    assert decode_consumer_offsets(key, value) == DecodedRecord(
        1,
        "OffsetCommit",
        value_version=3,
        group_id="my-group",
        committed_topic="input-topic",
        committed_partition=0,
        committed_offset=1,
        leader_epoch=-1,
        metadata="",
        commit_timestamp_ms=1742739702993,
    )


@pytest.mark.parametrize(
    ("version", "leader_epoch", "expire"),
    [(0, None, None), (1, None, 1_700_000_999_000), (2, None, None), (3, 5, None), (4, 5, None)],
)
@pytest.mark.parametrize("record_type", [0, 1])
def test_each_offset_commit_value_version_decodes(record_type, version, leader_epoch, expire):
    key = offset_commit_key("g", "orders", 3, record_type)
    value = offset_commit_value(
        version, 42, "meta:data", 1_700_000_000_000, leader_epoch=5, expire_ts=1_700_000_999_000
    )
    decoded = decode_consumer_offsets(key, value)
    assert decoded.record_type == record_type
    assert decoded.record_type_name == "OffsetCommit"
    assert decoded.value_version == version
    assert (decoded.group_id, decoded.committed_topic, decoded.committed_partition) == (
        "g",
        "orders",
        3,
    )
    assert (decoded.committed_offset, decoded.metadata) == (42, "meta:data")
    assert decoded.commit_timestamp_ms == 1_700_000_000_000
    assert decoded.leader_epoch == leader_epoch
    assert decoded.expire_timestamp_ms == expire
    assert decoded.topic_id is None
    assert not decoded.is_tombstone and not decoded.is_skipped


def test_a_flexible_v4_value_reads_its_topic_id_tag_and_skips_unknown_tags():
    topic_id = bytes(range(16))
    value = offset_commit_value(
        4, 9, "ü", 5, leader_epoch=2, tagged={0: topic_id, 7: b"future field"}
    )
    decoded = decode_consumer_offsets(offset_commit_key("g", "t", 0), value)
    assert decoded.topic_id == "AAECAwQFBgcICQoLDA0ODw"
    assert (decoded.committed_offset, decoded.leader_epoch, decoded.metadata) == (9, 2, "ü")


def test_a_v4_value_written_by_4_0_has_no_topic_id():
    decoded = decode_consumer_offsets(
        offset_commit_key("g", "t", 0), offset_commit_value(4, 9, "", 5)
    )
    assert decoded.topic_id is None and decoded.value_version == 4


def test_a_v4_topic_id_of_the_wrong_size_does_not_decode():
    value = offset_commit_value(4, 9, "", 5, tagged={0: bytes(15)})
    with pytest.raises(CoordinatorRecordError, match="tag 0"):
        decode_consumer_offsets(offset_commit_key("g", "t", 0), value)


def test_bytes_after_the_last_field_are_ignored_as_kafka_does():
    value = offset_commit_value(3, 1, "", 2) + b"\x00\x00"
    assert decode_consumer_offsets(offset_commit_key("g", "t", 0), value).committed_offset == 1


def test_offset_commit_and_group_tombstones_keep_their_key():
    decoded = decode_consumer_offsets(offset_commit_key("g", "t-x", 4), None)
    assert decoded.is_tombstone and decoded.value_version is None
    assert (decoded.group_id, decoded.committed_topic, decoded.committed_partition) == (
        "g",
        "t-x",
        4,
    )
    assert decoded.committed_offset is None
    group = decode_consumer_offsets(i16(2) + string("g,=:"), None)
    assert (group.record_type_name, group.group_id, group.is_tombstone) == (
        "GroupMetadata",
        "g,=:",
        True,
    )


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_each_group_metadata_value_version_decodes(version):
    members = [member(version, "member-a", "static-1"), member(version, "member-b")]
    decoded = decode_consumer_offsets(
        i16(2) + string("grp"), group_metadata_value(version, members)
    )
    assert (decoded.record_type, decoded.record_type_name, decoded.value_version) == (
        2,
        "GroupMetadata",
        version,
    )
    assert (decoded.group_id, decoded.protocol_type, decoded.generation) == ("grp", "consumer", 7)
    assert (decoded.protocol, decoded.leader, decoded.member_count) == ("range", "member-a", 2)
    assert decoded.current_state_timestamp_ms == (1_700_000_000_123 if version >= 2 else None)


def test_an_empty_group_has_no_members_and_no_leader():
    decoded = decode_consumer_offsets(i16(2) + string("grp"), group_metadata_value(3, []))
    assert (decoded.member_count, decoded.leader) == (0, None)


@pytest.mark.parametrize(
    ("record_type", "name"),
    [(3, "ConsumerGroupMetadata"), (8, "ConsumerGroupCurrentMemberAssignment"),
     (15, "ShareGroupStatePartitionMetadata"), (16, "ConsumerGroupRegularExpression"),
     (17, "StreamsGroupMetadata"), (19, None), (300, None), (-1, None)],
)  # fmt: skip
def test_other_group_record_types_are_counted_and_skipped(record_type, name):
    # Every key of the group coordinator starts with its GroupId: the skipped record keeps it,
    # for the offset replay to know whose members it cannot see.
    key = i16(record_type) + string("grp") + b"anything the type's key holds"
    for value in (b"\x00\x00garbage", None):
        decoded = decode_consumer_offsets(key, value)
        assert decoded == DecodedRecord(
            record_type, name, is_tombstone=value is None, is_skipped=True, group_id="grp"
        )


@pytest.mark.parametrize(
    "key_rest", [b"", b"\x00", b"\x00\x05gr", b"\xff\xff", b"\x00\x01\xff"],
    ids=["nothing", "cut length", "cut string", "null", "not UTF-8"],
)  # fmt: skip
def test_a_skipped_records_key_without_a_group_id_gives_none(key_rest):
    decoded = decode_consumer_offsets(i16(17) + key_rest, None)
    assert decoded == DecodedRecord(
        17, "StreamsGroupMetadata", is_tombstone=True, is_skipped=True, group_id=None
    )


def test_a_skipped_records_group_is_the_one_kafkas_key_holds():
    # ConsumerGroupTargetAssignmentMemberKey (type 7: GroupId, MemberId) as the 4.1.1 broker of
    # tests/fixtures/consumer_group wrote it (keySize 32), and a streams group's key (GroupId).
    key = i16(7) + string("g848") + string("Wf0kk4bCRPuS0o7BKN3vjA")
    assert len(key) == 32
    assert decode_consumer_offsets(key, None).group_id == "g848"
    assert decode_consumer_offsets(i16(17) + string("app-1"), b"\x00\x00").group_id == "app-1"


# A member record and its tombstone as a Kafka 4.1.1 broker wrote them (`__consumer_offsets-1`
# of tests/fixtures/consumer_group, where kafka-dump-log printed keySize 32 and valueSize 40):
# librdkafka's member of group.protocol=consumer, subscribed to in848; the value's tag 0
# (ClassicMemberMetadata) is written, null, as one byte.
REAL_4_1_MEMBER_KEY = bytes.fromhex(
    "000500046738343800165766306b6b34624352507553306f37424b4e33766a41"
)
REAL_4_1_MEMBER_VALUE = bytes.fromhex(
    "000000000872646b61666b610b2f3132372e302e302e310206696e38343801000493e00001000100"
)


def test_the_real_4_1_member_record_has_kafkas_sizes_and_decodes():
    key = consumer_member_key("g848", "Wf0kk4bCRPuS0o7BKN3vjA")
    value = consumer_member_value(["in848"], tagged={0: b"\x00"})
    assert (key, value) == (REAL_4_1_MEMBER_KEY, REAL_4_1_MEMBER_VALUE)
    assert (len(key), len(value)) == (32, 40)
    there = decode_consumer_offsets(key, value)
    assert there == DecodedRecord(
        5, "ConsumerGroupMemberMetadata", value_version=0, group_id="g848",
        member_id="Wf0kk4bCRPuS0o7BKN3vjA",
    )  # fmt: skip
    left = decode_consumer_offsets(key, None)
    assert left == DecodedRecord(
        5, "ConsumerGroupMemberMetadata", is_tombstone=True, group_id="g848",
        member_id="Wf0kk4bCRPuS0o7BKN3vjA",
    )  # fmt: skip


def test_a_static_member_with_no_topics_and_unknown_tags_decodes():
    value = consumer_member_value([], instance_id="instance-1", tagged={0: b"\x00", 7: b"xy"})
    decoded = decode_consumer_offsets(consumer_member_key("g,=:", ""), value)
    assert (decoded.group_id, decoded.member_id, decoded.is_skipped) == ("g,=:", "", False)


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (consumer_member_key("g", "m"), i16(1) + bytes(20),
         "ConsumerGroupMemberMetadata value version 1 is not one Kafka defines (0-0)"),
        (i16(5) + string("g") + string(None), None, "non-nullable MemberId was serialized as null"),
        (i16(5) + string("g"), None, "Metadata key: key: MemberId needs 2 bytes at byte 5"),
        (consumer_member_key("g", "m"), i16(0) + b"\x00\x00\x00", "non-nullable ClientId"),
    ],
)  # fmt: skip
def test_a_member_record_kafka_would_not_read_is_a_decode_error(key, value, reason):
    with pytest.raises(CoordinatorRecordError, match=re.escape(reason)):
        decode_consumer_offsets(key, value)


def test_every_cut_of_a_member_record_is_an_error():
    for cut in range(len(REAL_4_1_MEMBER_VALUE)):
        with pytest.raises(CoordinatorRecordError):
            decode_consumer_offsets(REAL_4_1_MEMBER_KEY, REAL_4_1_MEMBER_VALUE[:cut])
    for cut in range(2, len(REAL_4_1_MEMBER_KEY)):
        with pytest.raises(CoordinatorRecordError):
            decode_consumer_offsets(REAL_4_1_MEMBER_KEY[:cut], None)


def test_a_truncated_offset_commit_value_raises_the_specific_error():
    value = offset_commit_value(3, 1, "some metadata", 2)
    with pytest.raises(
        CoordinatorRecordError,
        match=re.escape("commitTimestamp needs 8 bytes at byte 29, only 3 left (truncated)"),
    ) as raised:
        decode_consumer_offsets(offset_commit_key("g", "t", 0), value[:-5])
    assert "OffsetCommit value" in raised.value.reason


def test_every_cut_of_a_record_is_an_error_never_an_exception_of_another_kind():
    key = offset_commit_key("g", "t", 0)
    good = [
        (key, offset_commit_value(v, 1, "m", 2, tagged={0: bytes(range(16))})) for v in range(5)
    ] + [(i16(2) + string("g"), group_metadata_value(v, [member(v, "m")])) for v in range(5)]
    for k, value in good:
        for cut in range(len(value)):
            with pytest.raises(CoordinatorRecordError):
                decode_consumer_offsets(k, value[:cut])
        for cut in range(2, len(k)):
            with pytest.raises(CoordinatorRecordError):
                decode_consumer_offsets(k[:cut], value)


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (None, b"", "__consumer_offsets record has no key"),
        (b"\x00", None, "record type needs 2 bytes"),
        (offset_commit_key("g", "t", 0), i16(5) + bytes(30), "OffsetCommit value version 5 is not"),
        (i16(2) + string("g"), i16(-1), "GroupMetadata value version -1 is not one Kafka defines"),
        (offset_commit_key("g", "t", 0), i16(3) + i64(1) + i32(0) + i16(-1) + i64(0),
         "non-nullable metadata was serialized as null"),
        (i16(1) + string(None) + string("t") + i32(0), None, "non-nullable group"),
        (offset_commit_key("g", "t", 0), i16(0) + i64(1) + i16(1) + b"\xff" + i64(0), "not UTF-8"),
    ],
)  # fmt: skip
def test_what_kafka_would_not_read_is_a_decode_error(key, value, reason):
    with pytest.raises(CoordinatorRecordError, match=re.escape(reason)):
        decode_consumer_offsets(key, value)


# ------------------------------------------------------------------------------------------------
# __transaction_state
# ------------------------------------------------------------------------------------------------
def test_the_real_3_9_transaction_log_samples_have_kafkas_sizes_and_decode():
    # strimzi-debugging sessions/010, __transaction_state-30: keySize 15, valueSize 37/59/87.
    key = txn_key("kafka-txn-0")
    assert len(key) == 15
    empty = txn_value(0, 1, 0, 0, {}, 1742739549435)
    ongoing = txn_value(0, 1, 0, 1, {"output-topic": [0]}, 1742739702876)
    both = {"output-topic": [0], "__consumer_offsets": [12]}
    prepare = txn_value(0, 1, 0, 2, both, 1742739703132)
    assert [len(v) for v in (empty, ongoing, prepare)] == [37, 59, 87]
    decoded = decode_transaction_state(key, prepare)
    assert decoded == DecodedRecord(
        0,
        "TransactionLog",
        value_version=0,
        transactional_id="kafka-txn-0",
        producer_id=1,
        producer_epoch=0,
        transaction_timeout_ms=60000,
        transaction_status="PrepareCommit",
        transaction_partitions=(("output-topic", 0), ("__consumer_offsets", 12)),
        last_update_timestamp_ms=1742739703132,
        start_timestamp_ms=-1,
    )
    assert decode_transaction_state(key, empty).transaction_partitions == ()


def test_the_real_4_x_v1_sample_has_kafkas_size_and_decodes_its_tag():
    # apache/kafka#22615: keySize 15 valueSize 45, {"version":"1","data":{"producerId":0,
    # "previousProducerId":0,"producerEpoch":0,"transactionTimeoutMs":60000,"transactionStatus":
    # "Empty","transactionPartitions":null,...LastUpdateTimestampMs":1781778768194,
    # "transactionStartTimestampMs":-1}}: the default tags (NextProducerId -1,
    # ClientTransactionVersion 0) are not written.
    value = txn_value(1, 0, 0, 0, None, 1781778768194, tagged={0: i64(0)})
    assert len(value) == 45
    decoded = decode_transaction_state(txn_key("kafka-txn-0"), value)
    assert (decoded.value_version, decoded.transaction_status) == (1, "Empty")
    assert decoded.transaction_partitions is None
    assert (decoded.previous_producer_id, decoded.next_producer_id) == (0, -1)
    assert decoded.client_transaction_version == 0


def test_a_v1_value_reads_all_three_tags_and_flexible_partitions():
    value = txn_value(
        1, 7, 3, 4, {"out": [0, 2], "in-put": [1]}, 99, start=90,
        tagged={0: i64(5), 1: i64(8), 2: i16(2), 9: b"unknown"},
    )  # fmt: skip
    decoded = decode_transaction_state(txn_key("tx"), value)
    assert (decoded.producer_id, decoded.producer_epoch, decoded.transaction_status) == (
        7,
        3,
        "CompleteCommit",
    )
    assert decoded.transaction_partitions == (("out", 0), ("out", 2), ("in-put", 1))
    assert (decoded.previous_producer_id, decoded.next_producer_id) == (5, 8)
    assert (decoded.client_transaction_version, decoded.start_timestamp_ms) == (2, 90)


def test_a_v0_value_has_none_of_the_v1_tags():
    decoded = decode_transaction_state(txn_key("tx"), txn_value(0, 7, 3, 1, {"o": [0]}, 99))
    assert decoded.previous_producer_id is None
    assert decoded.next_producer_id is None
    assert decoded.client_transaction_version is None


@pytest.mark.parametrize(
    ("status", "name"),
    [(0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"),
     (4, "CompleteCommit"), (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")],
)  # fmt: skip
def test_each_transaction_status_id_has_kafkas_name(status, name):
    decoded = decode_transaction_state(txn_key("tx"), txn_value(0, 1, 0, status, {}, 1))
    assert decoded.transaction_status == name


def test_transaction_tombstones_and_unknown_types():
    assert decode_transaction_state(txn_key("tx"), None) == DecodedRecord(
        0, "TransactionLog", is_tombstone=True, transactional_id="tx"
    )
    assert decode_transaction_state(txn_key("tx", 1), b"??") == DecodedRecord(
        1, None, is_skipped=True
    )


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (txn_value(0, 1, 0, 8, {}, 1), "transaction status 8 is not a Kafka state"),
        (txn_value(2, 1, 0, 1, {}, 1), "TransactionLog value version 2 is not one Kafka defines"),
        (txn_value(0, 1, 0, 1, {}, 1)[:-3], "TransactionStartTimestampMs needs 8 bytes"),
        (
            txn_value(1, 1, 0, 1, {}, 1, tagged={2: i32(1)}),
            "tag 2: 2 bytes left after the last field",
        ),
    ],
)
def test_a_transaction_value_that_kafka_would_not_read_is_an_error(value, reason):
    with pytest.raises(CoordinatorRecordError, match=re.escape(reason)):
        decode_transaction_state(txn_key("tx"), value)


def test_every_cut_of_a_transaction_record_is_an_error():
    for version in (0, 1):
        value = txn_value(version, 1, 0, 1, {"t": [0, 1]}, 5, tagged={0: i64(1), 2: i16(2)})
        for cut in range(len(value)):
            with pytest.raises(CoordinatorRecordError):
                decode_transaction_state(txn_key("tx"), value[:cut])


# ------------------------------------------------------------------------------------------------
# The records of a batch (kafka-python builds the batches)
# ------------------------------------------------------------------------------------------------
def _batch(records: list[tuple[bytes | None, bytes | None]], compression: int = 0, **kw) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=kw.get("is_transactional", False),
        producer_id=kw.get("producer_id", -1),
        producer_epoch=kw.get("producer_epoch", -1),
        base_sequence=kw.get("base_sequence", -1),
        batch_size=1 << 20,
    )
    for i, (key, value) in enumerate(records):
        builder.append(
            i, timestamp=1_000 + 3 * i, key=key, value=value, headers=kw.get("headers", [])
        )
    return bytes(builder.build())


# kafka-python's codecs, Kafka's framing of each: gzip, snappy-java's stream (xerial), LZ4 frame,
# zstd frame.
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@pytest.mark.parametrize("compression", CODECS.values(), ids=CODECS.keys())
def test_a_batchs_records_walk_with_their_deltas_keys_and_values(compression):
    records = [
        (offset_commit_key("g", "t", 0), offset_commit_value(3, 1, "", 2)),
        (offset_commit_key("g", "t", 1), None),
        (None, b"no key " * 100),  # enough to compress: kafka-python writes no gain uncompressed
    ]
    batch = _batch(records, compression, headers=[("h", b"v"), ("n", None)])
    assert struct.unpack_from(">h", batch, 21)[0] & 0x07 == compression
    walked = list(walk_batch(batch))
    assert [(r.offset_delta, r.timestamp_delta) for r in walked] == [(0, 0), (1, 3), (2, 6)]
    assert [(r.key, r.value) for r in walked] == records


def test_a_transactional_offset_commit_batch_decodes_end_to_end():
    records = [
        (offset_commit_key("my-group", "in", p), offset_commit_value(3, 10 + p, "", 5))
        for p in range(3)
    ]
    batch = _batch(records, is_transactional=True, producer_id=4, producer_epoch=1, base_sequence=0)
    decoded = [decode_consumer_offsets(r.key, r.value) for r in walk_batch(batch)]
    assert [(d.committed_partition, d.committed_offset) for d in decoded] == [
        (0, 10),
        (1, 11),
        (2, 12),
    ]


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_a_codec_kafka_does_not_define_says_so(codec):
    with pytest.raises(
        CompressionNotDecodedError,
        match=re.escape(f"not decoded: compression unknown codec {codec}"),
    ):
        list(walk_records(b"\x00" * 8, codec, 1))


def test_a_snappy_section_is_read_framed_in_blocks_or_as_one_raw_block():
    """snappy-java cuts its stream into blocks (32 KiB each by default); a section without its
    magic is one raw block, as `SnappyInputStream` reads it."""
    records = [(offset_commit_key("g", "t", p), b"v" * 20_000) for p in range(4)]
    framed = _batch(records, CODECS["snappy"])
    assert framed[61:69] == b"\x82SNAPPY\x00"
    assert [r.key for r in walk_batch(framed)] == [key for key, _ in records]
    raw = snappy.compress(_batch(records)[61:])
    assert [(r.key, r.value) for r in walk_records(raw, CODECS["snappy"], 4)] == records


@pytest.mark.parametrize("codec", ["snappy", "lz4", "zstd"])
def test_a_compressed_section_that_is_cut_or_damaged_says_so(codec):
    batch = _batch([(b"k", b"v" * 1000)], CODECS[codec])
    assert struct.unpack_from(">h", batch, 21)[0] & 0x07 == CODECS[codec]
    section = batch[61:]
    with pytest.raises(RecordBatchError, match=f"{codec} "):
        list(walk_records(section[:-7], CODECS[codec], 1))
    with pytest.raises(RecordBatchError, match=f"{codec} "):
        list(
            walk_records(b"\x82SNAPPY\x00" if codec == "snappy" else b"\x00" * 9, CODECS[codec], 1)
        )


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_a_section_that_inflates_past_the_cap_is_refused(codec):
    """A few kB that would inflate to more than 64 MiB (a bomb, or not a coordinator batch) are
    refused by size before or while inflating, never held whole."""
    import pyarrow as pa

    inflated = bytes(batch_records.MAX_DECOMPRESSED_BYTES + 1)
    section = {
        "gzip": lambda: gzip.compress(inflated, compresslevel=1),
        "snappy": lambda: snappy.compress(inflated),
        "lz4": lambda: pa.compress(inflated, codec="lz4", asbytes=True),
        "zstd": lambda: pa.compress(inflated, codec="zstd", asbytes=True),
    }[codec]()
    assert len(section) < len(inflated) // 20  # snappy inflates at most about 21 times
    with pytest.raises(RecordBatchError, match=f"{codec} records inflate past 67108864 bytes"):
        list(walk_records(section, CODECS[codec], 1))


def test_gzip_records_are_checked_like_the_others():
    with pytest.raises(RecordBatchError, match="do not decompress"):
        list(walk_records(b"not gzip", 1, 1))
    section = gzip.compress(b"\x02\x00\x00")  # a record of length 1 that needs 2 more fields
    with pytest.raises(RecordBatchError, match="record 0 of 1"):
        list(walk_records(section, 1, 1))
    truncated = gzip.compress(b"\x00" * 100)[:-12]
    with pytest.raises(RecordBatchError, match="truncated"):
        list(walk_records(truncated, 1, 1))


def test_a_batch_whose_records_do_not_fit_its_count_is_an_error():
    batch = _batch([(b"k", b"v"), (b"k2", b"v2")])
    section = batch[batch_records.RECORDS_AT :]
    with pytest.raises(RecordBatchError, match=re.escape("bytes remain after 1 records")):
        list(walk_records(section, 0, 1))
    with pytest.raises(RecordBatchError, match="record 2 of 3"):
        list(walk_records(section, 0, 3))
    with pytest.raises(RecordBatchError, match="negative record count"):
        list(walk_records(section, 0, -1))
    for cut in range(len(batch)):
        with pytest.raises(RecordBatchError):
            list(walk_batch(batch[:cut]))


def test_a_record_longer_than_its_fields_is_an_error():
    # length 7 (zig-zag 14): attributes, timestamp delta 0, offset delta 0, key -1, value -1,
    # no headers, then one byte no field reads
    record = bytes([14, 0, 0, 0, 1, 1, 0, 0])
    with pytest.raises(RecordBatchError, match="record 0: 1 bytes left after the last field"):
        list(walk_records(record, 0, 1))
    assert list(walk_records(bytes([12, 0, 0, 0, 1, 1, 0]), 0, 1)) == [
        batch_records.BatchRecord(0, 0, None, None)
    ]


# ------------------------------------------------------------------------------------------------
# The published contract
# ------------------------------------------------------------------------------------------------
CONTEXT_COLUMNS = [
    "coordinator_topic", "coordinator_partition", "offset", "base_offset", "batch_producer_id",
    "batch_producer_epoch", "is_transactional", "control_type", "timestamp", "source",
]  # fmt: skip


def test_the_contract_is_the_batch_context_then_the_decoded_fields():
    published = json.loads((SCHEMAS / "coordinator_records.json").read_text())
    assert PUBLISHED["coordinator_records"] is COORDINATOR_RECORDS_COLUMNS
    assert published == contract_json(COORDINATOR_RECORDS_COLUMNS)
    names = [c["name"] for c in published["columns"]]
    assert names == CONTEXT_COLUMNS + list(DECODED_FIELDS)
    assert {c["name"] for c in published["columns"] if not c["nullable"]} == {
        *CONTEXT_COLUMNS[:7],
        "is_tombstone",
        "is_skipped",
    }


def test_the_decoded_fields_are_coordinator_records_own():
    assert DECODED_FIELDS[:5] == (
        "record_type",
        "record_type_name",
        "value_version",
        "is_tombstone",
        "is_skipped",
    )
    assert coordinator_records.TRANSACTION_STATUS_IDS["PrepareEpochFence"] == 7


# ------------------------------------------------------------------------------------------------
# Damaged bytes: only the decode errors, never another exception (a quarantine row, not a crash)
# ------------------------------------------------------------------------------------------------
def _damaged(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        out[rng.randrange(len(out))] = rng.randrange(256)
    return bytes(out)


def test_damaged_records_and_batches_raise_only_the_decode_errors():
    rng = random.Random(55)
    offsets = [
        (offset_commit_key("g", "t", 0), offset_commit_value(v, 1, "m", 2, tagged={0: bytes(16)}))
        for v in range(5)
    ] + [(i16(2) + string("g"), group_metadata_value(v, [member(v, "m")])) for v in range(5)]
    transactions = [
        (txn_key("x"), txn_value(v, 1, 0, 1, {"t": [0, 1]}, 5, tagged={0: i64(1)})) for v in (0, 1)
    ]
    batches = [
        _batch([(key, value) for key, value in offsets], codec, headers=[("h", b"v")])
        for codec in (0, 1)
    ]
    for _ in range(400):
        key, value = rng.choice(offsets)
        with contextlib.suppress(CoordinatorRecordError):
            decode_consumer_offsets(_damaged(key, rng), value)
        with contextlib.suppress(CoordinatorRecordError):
            decode_consumer_offsets(key, _damaged(value, rng))
        key, value = rng.choice(transactions)
        with contextlib.suppress(CoordinatorRecordError):
            decode_transaction_state(key, _damaged(value, rng))
        with contextlib.suppress(RecordBatchError):
            list(walk_batch(_damaged(rng.choice(batches), rng)))


def test_negative_lengths_other_than_null_are_errors():
    with pytest.raises(ProtocolFormatError, match=re.escape("negative length -2 for s")):
        ProtocolReader(i16(-2)).string("s", flexible=False, nullable=True)
    with pytest.raises(ProtocolFormatError, match=re.escape("negative length -5 for a")):
        ProtocolReader(i32(-5)).array(lambda r: r.int8(), "a", flexible=False, nullable=True)
    with pytest.raises(ProtocolFormatError, match=re.escape("negative length -3 for b")):
        ProtocolReader(i32(-3)).bytes_field("b", flexible=False)
    assert ProtocolReader(i16(-1)).string("s", flexible=False, nullable=True) is None
    assert (
        ProtocolReader(uvarint(0)).array(lambda r: r.int8(), "a", flexible=True, nullable=True)
        is None
    )
