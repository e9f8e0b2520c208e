"""One coordinator record's key and value bytes → `DecodedRecord`, as Kafka's coordinators read it.

Framing (`CoordinatorRecordSerde.java`): the key is an int16 record type followed by the key
message, the value an int16 value version followed by the value message, and a null value is a
tombstone. The key message is read at the record type as its version, which is why OffsetCommit
has the "key versions" 0 and 1 and GroupMetadata's key the version 2.

`__consumer_offsets` (`GroupCoordinatorRecordSerde.java`, `group-coordinator/.../message/*.json`):

| type | key | value versions |
|---|---|---|
| 0, 1 OffsetCommit (4.x: 0 `LegacyOffsetCommit`) | group, topic, partition | 0-4 (4: tag TopicId) |
| 2 GroupMetadata (classic groups) | group | 0-4 (4 flexible) |
| 5 ConsumerGroupMemberMetadata (KIP-848 consumer groups) | group, member | 0 (flexible) |
| 3, 4, 6+ other consumer, share, streams group records (KIP-848, 932, 1071) | | skipped |

`__transaction_state` (`transaction-coordinator/.../message/TransactionLog{Key,Value}.json`):
type 0 only, value versions 0 and 1 (1 flexible, tags 0 PreviousProducerId, 1 NextProducerId,
2 ClientTransactionVersion).

A type the audit does not decode (3, 4 and 6+ in `__consumer_offsets`, any but 0 in
`__transaction_state`)
gives a record with `is_skipped` set, never an error: Kafka adds such types with new group
protocols, and 3.8+ `kafka-dump-log.sh` says "Unknown record type N ..., skipping." for them too.
A skipped `__consumer_offsets` record keeps its group: every key of the group coordinator starts
with the group id, a non-flexible string (`ConsumerGroupMetadataKey.json`, ...
`ShareGroupMetadataKey.json`: `GroupId`, `"flexibleVersions": "none"`), and the offset replay
needs to know whose members it cannot see (`offset_metadata_manager.reads_no_membership`).
Bytes that do not decode as their type and version say raise `CoordinatorRecordError`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from eos_audit.sources.kafka.protocol import ProtocolFormatError, ProtocolReader

# Record types of __consumer_offsets (the key's int16 prefix; CoordinatorRecordType in 4.x).
# Type 0 is the key version 0.8.2 wrote; 3.x reads its value as any OffsetCommitValue version,
# 4.x as LegacyOffsetCommitValue (LegacyOffsetCommitValue.json: version 0 only, the same bytes as
# OffsetCommitValue v0). Both types are decoded here with OffsetCommitValue's versions, as 3.x did.
OFFSET_COMMIT_TYPES = (0, 1)
GROUP_METADATA_TYPE = 2
# A consumer group's member (ConsumerGroupMemberMetadataKey: GroupId, MemberId), its tombstone
# written when the member leaves: the membership of a KIP-848 group, which has no GroupMetadata.
CONSUMER_GROUP_MEMBER_TYPE = 5
GROUP_RECORD_TYPE_NAMES: dict[int, str] = {
    0: "OffsetCommit",
    1: "OffsetCommit",
    2: "GroupMetadata",
    3: "ConsumerGroupMetadata",
    4: "ConsumerGroupPartitionMetadata",
    5: "ConsumerGroupMemberMetadata",
    6: "ConsumerGroupTargetAssignmentMetadata",
    7: "ConsumerGroupTargetAssignmentMember",
    8: "ConsumerGroupCurrentMemberAssignment",
    9: "ShareGroupPartitionMetadata",
    10: "ShareGroupMemberMetadata",
    11: "ShareGroupMetadata",
    12: "ShareGroupTargetAssignmentMetadata",
    13: "ShareGroupTargetAssignmentMember",
    14: "ShareGroupCurrentMemberAssignment",
    15: "ShareGroupStatePartitionMetadata",
    16: "ConsumerGroupRegularExpression",
    17: "StreamsGroupMetadata",
    18: "StreamsGroupTopology",
}
# The one record type of __transaction_state.
TRANSACTION_LOG_TYPE = 0
TRANSACTION_LOG_TYPE_NAME = "TransactionLog"

OFFSET_COMMIT_VALUE_VERSIONS = range(0, 5)
GROUP_METADATA_VALUE_VERSIONS = range(0, 5)
CONSUMER_GROUP_MEMBER_VALUE_VERSIONS = range(0, 1)
TRANSACTION_LOG_VALUE_VERSIONS = range(0, 2)

# TransactionState ids (TransactionMetadata.scala, TransactionState.java in 4.x). An id outside
# this table makes Kafka's loader fail (`TransactionState.fromId`), so it is a decode error here.
TRANSACTION_STATUS_NAMES: dict[int, str] = {
    0: "Empty",
    1: "Ongoing",
    2: "PrepareCommit",
    3: "PrepareAbort",
    4: "CompleteCommit",
    5: "CompleteAbort",
    6: "Dead",
    7: "PrepareEpochFence",
}
TRANSACTION_STATUS_IDS = {name: status for status, name in TRANSACTION_STATUS_NAMES.items()}

# Defaults of the v1 tagged fields when the tag is absent (TransactionLogValue.json).
_NO_PRODUCER_ID = -1
_DEFAULT_CLIENT_TRANSACTION_VERSION = 0


class CoordinatorRecordError(ProtocolFormatError):
    """A coordinator record that does not decode; the caller quarantines it with `reason`."""


@dataclass(frozen=True, slots=True)
class DecodedRecord:
    """One coordinator record, decoded: the shape both decoders give (segments and dump-log text).

    A field is None when the record's type or version has no such field, or when the text the
    tool printed does not show it (`kafka-dump-log.sh` before 3.8 prints no value version, no
    leader epoch and no commit time). The published contract is schemas/coordinator_records.json.
    """

    record_type: int | None
    """The key's int16 prefix; None only for a kafka-dump-log 2.4-or-older tombstone line, which
    prints no key."""
    record_type_name: str | None
    """OffsetCommit, GroupMetadata, TransactionLog, ...; None for a type Kafka does not define."""
    value_version: int | None = None
    is_tombstone: bool = False
    is_skipped: bool = False
    """A type the audit does not decode (consumer group records other than members, share and
    streams group records, unknown types): only the type, the tombstone flag and the group (in
    `__consumer_offsets`, where the key or the text shows it) are set."""
    # OffsetCommit (types 0, 1), GroupMetadata (type 2) and ConsumerGroupMemberMetadata (type 5),
    # and the group of a skipped `__consumer_offsets` record
    group_id: str | None = None
    committed_topic: str | None = None
    committed_partition: int | None = None
    committed_offset: int | None = None
    leader_epoch: int | None = None
    metadata: str | None = None
    commit_timestamp_ms: int | None = None
    expire_timestamp_ms: int | None = None
    topic_id: str | None = None
    protocol_type: str | None = None
    generation: int | None = None
    protocol: str | None = None
    leader: str | None = None
    current_state_timestamp_ms: int | None = None
    member_count: int | None = None
    member_id: str | None = None
    """ConsumerGroupMemberMetadata: the member the record (or its tombstone) is about."""
    # TransactionLog (__transaction_state type 0)
    transactional_id: str | None = None
    producer_id: int | None = None
    producer_epoch: int | None = None
    previous_producer_id: int | None = None
    next_producer_id: int | None = None
    transaction_timeout_ms: int | None = None
    transaction_status: str | None = None
    transaction_partitions: tuple[tuple[str, int], ...] | None = None
    last_update_timestamp_ms: int | None = None
    start_timestamp_ms: int | None = None
    client_transaction_version: int | None = None


DECODED_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(DecodedRecord))
# A transaction marker's row (its batch's `control_type` says which): no record to decode.
MARKER = DecodedRecord(None, None)


def transaction_status_name(status: int) -> str:
    """The name of a TransactionState id, as Kafka prints it.

    Args:
        status: the id stored in TransactionLogValue.TransactionStatus.

    Returns:
        Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Dead or
        PrepareEpochFence.

    Raises:
        CoordinatorRecordError: for an id Kafka does not define.
    """
    try:
        return TRANSACTION_STATUS_NAMES[status]
    except KeyError:
        raise CoordinatorRecordError(f"transaction status {status} is not a Kafka state") from None


def _record_type(key: bytes | None, topic: str) -> tuple[int, ProtocolReader]:
    if key is None:
        # DumpLogSegments: "Failed to decode message ... (message had a missing key)".
        raise CoordinatorRecordError(f"{topic} record has no key")
    reader = ProtocolReader(key, "key")
    try:
        return reader.int16("record type"), reader
    except ProtocolFormatError as err:
        raise CoordinatorRecordError(err.reason) from None


def decode_consumer_offsets(key: bytes | None, value: bytes | None) -> DecodedRecord:
    """Decode one `__consumer_offsets` record.

    Kafka reads neither message to its end: bytes after the last field are ignored, as
    `CoordinatorRecordSerde.readMessage` and the older `GroupMetadataManager.readMessageKey` do.

    Args:
        key: the record's key bytes.
        value: the record's value bytes; None for a tombstone.

    Returns:
        The decoded record (`is_skipped` for types 3, 4, 6 and above and unknown types, with
        the group id its key starts with, None where the key holds no string there).

    Raises:
        CoordinatorRecordError: when the key or the value does not decode (no key, truncated,
            a value version Kafka does not define for the type, a null in a non-nullable field).
    """
    record_type, key_reader = _record_type(key, "__consumer_offsets")
    name = GROUP_RECORD_TYPE_NAMES.get(record_type)
    is_tombstone = value is None
    if record_type not in (*OFFSET_COMMIT_TYPES, GROUP_METADATA_TYPE, CONSUMER_GROUP_MEMBER_TYPE):
        try:
            group_id = key_reader.string("GroupId", flexible=False)
        except ProtocolFormatError:
            group_id = None  # a key the audit does not know: its group is not known either
        return DecodedRecord(
            record_type, name, is_tombstone=is_tombstone, is_skipped=True, group_id=group_id
        )
    if record_type == CONSUMER_GROUP_MEMBER_TYPE:
        try:
            group_id = key_reader.string("GroupId", flexible=False)
            member_id = key_reader.string("MemberId", flexible=False)
        except ProtocolFormatError as err:
            raise CoordinatorRecordError(f"{name} key: {err.reason}") from None
        return _consumer_group_member(group_id, member_id, value)
    try:
        if record_type == GROUP_METADATA_TYPE:
            group_id = key_reader.string("group", flexible=False)
            if value is None:
                return DecodedRecord(record_type, name, is_tombstone=True, group_id=group_id)
            return _group_metadata(record_type, group_id, value)
        group_id = key_reader.string("group", flexible=False)
        topic = key_reader.string("topic", flexible=False)
        partition = key_reader.int32("partition")
    except ProtocolFormatError as err:
        raise CoordinatorRecordError(f"{name} key: {err.reason}") from None
    if value is None:
        return DecodedRecord(
            record_type,
            name,
            is_tombstone=True,
            group_id=group_id,
            committed_topic=topic,
            committed_partition=partition,
        )
    return _offset_commit(record_type, group_id, topic, partition, value)


def _value_version(value: bytes, what: str, known: range) -> tuple[int, ProtocolReader]:
    reader = ProtocolReader(value, f"{what} value")
    try:
        version = reader.int16("value version")
    except ProtocolFormatError as err:
        raise CoordinatorRecordError(err.reason) from None
    if version not in known:
        raise CoordinatorRecordError(
            f"{what} value version {version} is not one Kafka defines "
            f"({known.start}-{known.stop - 1})"
        )
    return version, reader


def _offset_commit(
    record_type: int, group_id: str | None, topic: str | None, partition: int, value: bytes
) -> DecodedRecord:
    # OffsetCommitValue.json: leaderEpoch from v3 (after offset), expireTimestamp in v1 only,
    # v4 flexible with the tagged TopicId (tag 0; KAFKA-19141, written from 4.1).
    version, reader = _value_version(value, "OffsetCommit", OFFSET_COMMIT_VALUE_VERSIONS)
    flexible = version >= 4
    try:
        offset = reader.int64("offset")
        leader_epoch = reader.int32("leaderEpoch") if version >= 3 else None
        metadata = reader.string("metadata", flexible=flexible)
        commit_timestamp = reader.int64("commitTimestamp")
        expire_timestamp = reader.int64("expireTimestamp") if version == 1 else None
        tags = reader.tagged_fields({0: lambda r: r.uuid("topicId")}) if flexible else {}
    except ProtocolFormatError as err:
        raise CoordinatorRecordError(err.reason) from None
    return DecodedRecord(
        record_type,
        GROUP_RECORD_TYPE_NAMES[record_type],
        value_version=version,
        group_id=group_id,
        committed_topic=topic,
        committed_partition=partition,
        committed_offset=offset,
        leader_epoch=leader_epoch,
        metadata=metadata,
        commit_timestamp_ms=commit_timestamp,
        expire_timestamp_ms=expire_timestamp,
        topic_id=tags.get(0),
    )


def _skip_member(reader: ProtocolReader, version: int) -> None:
    # GroupMetadataValue.json MemberMetadata; read for its length only, the audit keeps the count.
    flexible = version >= 4
    reader.string("memberId", flexible=flexible)
    if version >= 3:
        reader.string("groupInstanceId", flexible=flexible, nullable=True)
    reader.string("clientId", flexible=flexible)
    reader.string("clientHost", flexible=flexible)
    if version >= 1:
        reader.int32("rebalanceTimeout")
    reader.int32("sessionTimeout")
    reader.bytes_field("subscription", flexible=flexible)
    reader.bytes_field("assignment", flexible=flexible)
    if flexible:
        reader.tagged_fields({})


def _group_metadata(record_type: int, group_id: str | None, value: bytes) -> DecodedRecord:
    version, reader = _value_version(value, "GroupMetadata", GROUP_METADATA_VALUE_VERSIONS)
    flexible = version >= 4
    try:
        protocol_type = reader.string("protocolType", flexible=flexible)
        generation = reader.int32("generation")
        protocol = reader.string("protocol", flexible=flexible, nullable=True)
        leader = reader.string("leader", flexible=flexible, nullable=True)
        state_timestamp = reader.int64("currentStateTimestamp") if version >= 2 else None
        members = reader.array(lambda r: _skip_member(r, version), "members", flexible=flexible)
        if flexible:
            reader.tagged_fields({})
    except ProtocolFormatError as err:
        raise CoordinatorRecordError(err.reason) from None
    return DecodedRecord(
        record_type,
        GROUP_RECORD_TYPE_NAMES[record_type],
        value_version=version,
        group_id=group_id,
        protocol_type=protocol_type,
        generation=generation,
        protocol=protocol,
        leader=leader,
        current_state_timestamp_ms=state_timestamp,
        member_count=len(members or ()),
    )


def _skip_string_entry(reader: ProtocolReader) -> None:
    reader.string("SubscribedTopicNames", flexible=True)


def _consumer_group_member(
    group_id: str | None, member_id: str | None, value: bytes | None
) -> DecodedRecord:
    """A consumer group's member (`ConsumerGroupMemberMetadataValue.json`, version 0, flexible).

    The value is read to its last field, as Kafka's loader reads it, for what a record Kafka
    would not load looks like (a decode error); the audit keeps whether the member is there (a
    value) or left (a tombstone), not its subscription. Tag 0 (ClassicMemberMetadata, a member
    of a group converted from the classic protocol) is skipped with the other tags.
    """
    name = GROUP_RECORD_TYPE_NAMES[CONSUMER_GROUP_MEMBER_TYPE]
    if value is None:
        return DecodedRecord(
            CONSUMER_GROUP_MEMBER_TYPE, name, is_tombstone=True, group_id=group_id,
            member_id=member_id,
        )  # fmt: skip
    version, reader = _value_version(
        value, "ConsumerGroupMemberMetadata", CONSUMER_GROUP_MEMBER_VALUE_VERSIONS
    )
    try:
        reader.string("InstanceId", flexible=True, nullable=True)
        reader.string("RackId", flexible=True, nullable=True)
        reader.string("ClientId", flexible=True)
        reader.string("ClientHost", flexible=True)
        reader.array(_skip_string_entry, "SubscribedTopicNames", flexible=True)
        reader.string("SubscribedTopicRegex", flexible=True, nullable=True)
        reader.int32("RebalanceTimeoutMs")
        reader.string("ServerAssignor", flexible=True, nullable=True)
        reader.tagged_fields({})
    except ProtocolFormatError as err:
        raise CoordinatorRecordError(err.reason) from None
    return DecodedRecord(
        CONSUMER_GROUP_MEMBER_TYPE, name, value_version=version, group_id=group_id,
        member_id=member_id,
    )  # fmt: skip


def decode_transaction_state(key: bytes | None, value: bytes | None) -> DecodedRecord:
    """Decode one `__transaction_state` record.

    Args:
        key: the record's key bytes.
        value: the record's value bytes; None for a tombstone (an expired transactional id).

    Returns:
        The decoded record (`is_skipped` for a type other than 0).

    Raises:
        CoordinatorRecordError: when the key or the value does not decode.
    """
    record_type, key_reader = _record_type(key, "__transaction_state")
    is_tombstone = value is None
    if record_type != TRANSACTION_LOG_TYPE:
        return DecodedRecord(record_type, None, is_tombstone=is_tombstone, is_skipped=True)
    try:
        transactional_id = key_reader.string("transactionalId", flexible=False)
    except ProtocolFormatError as err:
        raise CoordinatorRecordError(f"TransactionLog key: {err.reason}") from None
    if value is None:
        return DecodedRecord(
            record_type,
            TRANSACTION_LOG_TYPE_NAME,
            is_tombstone=True,
            transactional_id=transactional_id,
        )
    return _transaction_log(transactional_id, value)


def _partitions_entry(reader: ProtocolReader, flexible: bool) -> list[tuple[str, int]]:
    topic = reader.string("Topic", flexible=flexible) or ""
    ids = reader.array(lambda r: r.int32("PartitionIds"), "PartitionIds", flexible=flexible)
    if flexible:
        reader.tagged_fields({})
    return [(topic, partition) for partition in ids or ()]


def _transaction_log(transactional_id: str | None, value: bytes) -> DecodedRecord:
    version, reader = _value_version(value, "TransactionLog", TRANSACTION_LOG_VALUE_VERSIONS)
    flexible = version >= 1
    try:
        producer_id = reader.int64("ProducerId")
        producer_epoch = reader.int16("ProducerEpoch")
        timeout = reader.int32("TransactionTimeoutMs")
        status = reader.int8("TransactionStatus")
        entries = reader.array(
            lambda r: _partitions_entry(r, flexible),
            "TransactionPartitions",
            flexible=flexible,
            nullable=True,
        )
        last_update = reader.int64("TransactionLastUpdateTimestampMs")
        start = reader.int64("TransactionStartTimestampMs")
        tags = (
            reader.tagged_fields(
                {
                    0: lambda r: r.int64("PreviousProducerId"),
                    1: lambda r: r.int64("NextProducerId"),
                    2: lambda r: r.int16("ClientTransactionVersion"),
                }
            )
            if flexible
            else {}
        )
    except ProtocolFormatError as err:
        raise CoordinatorRecordError(err.reason) from None
    partitions = None if entries is None else tuple(tp for entry in entries for tp in entry)
    return DecodedRecord(
        TRANSACTION_LOG_TYPE,
        TRANSACTION_LOG_TYPE_NAME,
        value_version=version,
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        previous_producer_id=tags.get(0, _NO_PRODUCER_ID) if flexible else None,
        next_producer_id=tags.get(1, _NO_PRODUCER_ID) if flexible else None,
        transaction_timeout_ms=timeout,
        transaction_status=transaction_status_name(status),
        transaction_partitions=partitions,
        last_update_timestamp_ms=last_update,
        start_timestamp_ms=start,
        client_transaction_version=(
            tags.get(2, _DEFAULT_CLIENT_TRANSACTION_VERSION) if flexible else None
        ),
    )
