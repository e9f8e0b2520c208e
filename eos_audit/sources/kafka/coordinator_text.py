"""`kafka-dump-log.sh --offsets-decoder` / `--transaction-log-decoder` text → `DecodedRecord`.

The tool appends ` key: K payload: P` to each record line; what K and P look like changed four
times (eos_processing.md §2, read against DumpLogSegments.scala and the formatters of each tag):

Offsets decoder, key / payload:

| Kafka | offset commit | group metadata |
|---|---|---|
| ≤ 2.4 | `offset::G:T:P` / `42` or `42:M` | `{"metadata":"G"}` / JSON |
| 2.5-3.7 | `offset_commit::group=G,partition=T-P` / `offset=42[,metadata=M]` | `group_metadata::` |
| 3.8+ | `{"type":"1","data":{..}}` / `{"version":"3","data":{..}}` | the same JSON |

A tombstone's payload is `<DELETE>` from 2.5; up to 2.4 neither key nor payload is printed. 4.1+
writes OffsetCommit value version 4, whose JSON may add `"topicId"`. A KIP-848 consumer group's
member is `{"type":"5","data":{"groupId":"G","memberId":"M"}}` / `{"version":"0","data":{..}}`
or `<DELETE>` when it left, in 3.8+ JSON only (the older texts predate consumer groups).

Transaction log decoder: ≤ 2.4 `transactionalId=X` / `producerId:P,producerEpoch:E,state=S,
partitions=Set(t-0),txnLastUpdateTimestamp=T,txnTimeoutMs=M`; 2.5-3.9
`transaction_metadata::transactionalId=X` / the same with `partitions=[t-0,t-1]`, or `<DELETE>`;
4.x JSON (`{"type":"0","data":{"transactionalId":"X"}}` / `{"version":"1","data":{..}}`) whose
`transactionStatus` is numeric, or the state's name after KAFKA-20712.

3.5-3.7 print `unknown::version=N` for a type they do not know (2.5-3.4 stop with an exception),
3.8+ `Unknown record type N at offset O, skipping.`: both are skipped records, and print no group.
A type 3.8+ knows and the audit does not read (consumer group records other than members, share
and streams groups') is a skipped record too, with the `groupId` of its JSON key.
`Error at offset O, skipping. <message>` means the tool could not decode the record:
`CoordinatorRecordError`, for the quarantine.

Parsing traps, each with a test: a TopicPartition prints as `T-P` and topics may hold `-`, so it
splits at the last `-`; group and transactional ids may hold `,` `=` `:` and even ` payload: `, so
the key is split from the right, and where the key and the payload could be cut in more than one
place, the cut whose key has the line's `keySize` wins; metadata is free text after `metadata=`;
the ≤ 2.4 tombstone prints neither key nor payload; the JSON of 3.8+ has `"type"` and `"version"`
as strings. What the older texts do not print (value version, leader epoch, commit time, start
time) stays None; they print no key type either, and an offset commit is given type 1, the key
version every broker since 0.9 writes (`CURRENT_OFFSET_KEY_SCHEMA_VERSION`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from eos_audit.sources.kafka.coordinator_keys import (
    CONSUMER_OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
)
from eos_audit.sources.kafka.coordinator_records import (
    CONSUMER_GROUP_MEMBER_TYPE,
    GROUP_METADATA_TYPE,
    GROUP_RECORD_TYPE_NAMES,
    OFFSET_COMMIT_TYPES,
    TRANSACTION_LOG_TYPE,
    TRANSACTION_LOG_TYPE_NAME,
    TRANSACTION_STATUS_IDS,
    CoordinatorRecordError,
    DecodedRecord,
    transaction_status_name,
)

_OFFSET_COMMIT_TYPE = 1  # what brokers since 0.9 write; the older texts do not say
_PAYLOAD = " payload: "
_DELETE = "<DELETE>"
# A topic name is [a-zA-Z0-9._-] (Topic.java), so `T-P` ends at the first character outside.
_TOPIC_PARTITION = re.compile(r"([A-Za-z0-9._-]+)-(\d+)")
_INT = r"-?\d+"

_RECORD_LINE = re.compile(
    r"^\|?\s*offset: (?P<offset>\d+) .*?\bkey[sS]ize: (?P<key_size>-?\d+)"
    r" value[sS]ize: (?P<value_size>-?\d+)(?P<rest>.*)$"
)
_TAIL = re.compile(r" (?:key|payload): ")
_UNKNOWN_TYPE = re.compile(r"^Unknown record type (-?\d+) at offset \d+, skipping\.$")
_OLD_UNKNOWN_TYPE = re.compile(r"^unknown::version=(-?\d+)$")
_ERROR = re.compile(r"^Error at offset \d+, skipping\. ?(.*)$", re.S)
_OFFSET_VALUE_2_5 = re.compile(rf"^offset=({_INT})(?:,metadata=(.*))?$", re.S)
_OFFSET_VALUE_2_4 = re.compile(rf"^({_INT})(?::(.*))?$", re.S)
# The end of one member's entry in a ≤ 3.7 group's printed assignment, "{m-1=[t-0, t-1],m-2=..}":
# `=` then a consumer's partition list (topics hold no bracket), with its user data in hex after
# a colon, or another protocol's assignment in hex; then the next entry or the end.
_ASSIGNMENT_ENTRY_END = re.compile(r"=(?:\[[^\[\]]*\](?::[0-9A-Fa-f]*)?|[0-9A-Fa-f]*)(?=,|$)")
_TXN_VALUE = re.compile(
    rf"^producerId:({_INT}),producerEpoch:({_INT}),state=(\w+),"
    r"partitions=(\[[^\]]*\]|\w*Set\([^)]*\)),"
    rf"txnLastUpdateTimestamp=({_INT}),txnTimeoutMs=({_INT})$"
)


@dataclass(frozen=True, slots=True)
class DumpLogRecord:
    """One `| offset: ...` record line of a decoded coordinator partition."""

    offset: int
    key_size: int
    value_size: int
    record: DecodedRecord


def parse_record_line(line: str, coordinator_topic: str) -> DumpLogRecord | None:
    """Parse one record line of `kafka-dump-log.sh --deep-iteration` with a decoder flag.

    Args:
        line: the whole line, `| offset: N CreateTime: T keySize: K valueSize: V ... key: ...`.
        coordinator_topic: `__consumer_offsets` or `__transaction_state` (which decoder ran).

    Returns:
        The record's offset and sizes with its decoded fields; None for a line that is not a
        record line, or a transaction marker's (`endTxnMarker:`, `controlType:`), which has
        no decoder output.

    Raises:
        CoordinatorRecordError: when the decoder output on the line cannot be read, or the tool
            said it could not decode the record.
    """
    match = _RECORD_LINE.match(line.rstrip("\r\n"))
    if match is None:
        return None
    rest = match["rest"]
    tail = _TAIL.search(rest)
    if tail is None and ("endTxnMarker: " in rest or "controlType: " in rest):
        return None
    key_size, value_size = int(match["key_size"]), int(match["value_size"])
    decoded = parse_decoder_text(
        rest[tail.start() :] if tail else "",
        coordinator_topic,
        key_size=key_size,
        value_size=value_size,
    )
    return DumpLogRecord(int(match["offset"]), key_size, value_size, decoded)


def parse_decoder_text(
    text: str,
    coordinator_topic: str,
    *,
    key_size: int | None = None,
    value_size: int | None = None,
) -> DecodedRecord:
    """Decode the ` key: ... payload: ...` part of a record line, of any generation.

    Args:
        text: the line from ` key: ` on (empty for a ≤ 2.4 tombstone).
        coordinator_topic: `__consumer_offsets` or `__transaction_state`.
        key_size: the line's keySize, when known: it picks the right cut between key and payload
            where ids hold ` payload: `.
        value_size: the line's valueSize, when known: -1 marks a tombstone where the text shows
            none (≤ 2.4, skipped types).

    Returns:
        The decoded record, with None where the generation does not print a field.

    Raises:
        CoordinatorRecordError: when the text is not decoder output this module knows, or the
            tool printed `Error at offset ...`.
        ValueError: for a coordinator_topic that is neither coordinator topic.
    """
    if coordinator_topic not in (CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC):
        raise ValueError(f"{coordinator_topic!r} is not a coordinator topic")
    body = text.lstrip(" ").rstrip("\r\n")
    is_tombstone = value_size == -1
    if not body:
        if value_size not in (None, -1):
            raise CoordinatorRecordError(f"no decoder output for a value of {value_size} bytes")
        if coordinator_topic == TRANSACTION_STATE_TOPIC:
            # ≤ 2.4's transaction-log decoder reads a tombstone's value as null and fails on it
            # (`readTxnRecordValue` returns null, the parser reads its producerId), after the
            # line's offset and sizes: the tool stops there, and the dump ends with this line.
            raise CoordinatorRecordError(
                "a tombstone without decoder output: kafka-dump-log.sh 2.4 and older fails on a "
                "__transaction_state tombstone (NullPointerException) and prints nothing after "
                "it, so the rest of the partition is missing; dump it with 2.5 or newer"
            )
        # ≤ 2.4 offsets decoder: `if (!record.hasValue) (None, None)`: a tombstone, key unknown.
        return DecodedRecord(None, None, is_tombstone=True)
    if not body.startswith("key: "):
        raise CoordinatorRecordError("the decoder output has no key")
    body = body[len("key: ") :]
    error = _ERROR.match(body)
    if error:
        raise CoordinatorRecordError(f"kafka-dump-log could not decode it: {error[1]}")
    for skipped in (_UNKNOWN_TYPE, _OLD_UNKNOWN_TYPE):
        found = skipped.match(body)
        if found:
            record_type = int(found[1])
            name = (
                GROUP_RECORD_TYPE_NAMES.get(record_type)
                if coordinator_topic == CONSUMER_OFFSETS_TOPIC
                else None
            )
            return DecodedRecord(record_type, name, is_tombstone=is_tombstone, is_skipped=True)
    if body.startswith("{"):
        return _json_record(body, coordinator_topic)
    if coordinator_topic == CONSUMER_OFFSETS_TOPIC:
        return _old_offsets_record(body, key_size)
    return _old_transaction_record(body, key_size)


# ------------------------------------------------------------------------------------------------
# Key and payload of the text generations (≤ 3.7 offsets, ≤ 3.9 transaction log)
# ------------------------------------------------------------------------------------------------
def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def _split(
    body: str,
    key_size: int | None,
    parse: Callable[[str, str], tuple[DecodedRecord, int] | None],
) -> DecodedRecord:
    """The record of the first cut at ` payload: ` that parses, preferring one of `key_size`.

    `parse(key, payload)` gives the record and the size its key has in bytes, or None.
    """
    parsed = []
    at = body.find(_PAYLOAD)
    while at >= 0:
        result = parse(body[:at], body[at + len(_PAYLOAD) :])
        if result is not None:
            parsed.append(result)
        at = body.find(_PAYLOAD, at + 1)
    for record, size in parsed:
        if key_size is None or size == key_size:
            return record
    if parsed:
        return parsed[0][0]
    raise CoordinatorRecordError("the decoder output is not a key and payload this parser knows")


def _topic_partition(text: str) -> tuple[str, int] | None:
    match = _TOPIC_PARTITION.fullmatch(text)
    return (match[1], int(match[2])) if match else None


def _offset_commit(
    group: str, topic: str, partition: int, payload: str, value_pattern: re.Pattern[str]
) -> tuple[DecodedRecord, int] | None:
    size = 2 + 2 + _utf8_len(group) + 2 + _utf8_len(topic) + 4
    name = GROUP_RECORD_TYPE_NAMES[_OFFSET_COMMIT_TYPE]
    common = {"group_id": group, "committed_topic": topic, "committed_partition": partition}
    if payload == _DELETE:
        return DecodedRecord(_OFFSET_COMMIT_TYPE, name, is_tombstone=True, **common), size
    value = value_pattern.match(payload)
    if value is None:
        return None
    # Kafka prints no metadata when it is empty (`if (offset.metadata.isEmpty)`).
    metadata = value[2] if value[2] is not None else ""
    record = DecodedRecord(
        _OFFSET_COMMIT_TYPE, name, committed_offset=int(value[1]), metadata=metadata, **common
    )
    return record, size


def _parse_offset_commit_2_5(key: str, payload: str) -> tuple[DecodedRecord, int] | None:
    # offset_commit::group=G,partition=T-P: T-P has no comma, so the last ",partition=" ends G.
    head, sep, tp = key.removeprefix("offset_commit::group=").rpartition(",partition=")
    parsed = _topic_partition(tp)
    if not sep or parsed is None:
        return None
    return _offset_commit(head, parsed[0], parsed[1], payload, _OFFSET_VALUE_2_5)


def _parse_offset_commit_2_4(key: str, payload: str) -> tuple[DecodedRecord, int] | None:
    # offset::G:T:P: topics hold no colon, so the last two colons end G.
    parts = key.removeprefix("offset::").rsplit(":", 2)
    if len(parts) != 3 or not parts[2].isdigit() or not _TOPIC_PARTITION.fullmatch(f"{parts[1]}-0"):
        return None
    return _offset_commit(parts[0], parts[1], int(parts[2]), payload, _OFFSET_VALUE_2_4)


def _group_metadata_text(group: str, payload: str) -> tuple[DecodedRecord, int] | None:
    # {"protocolType":..,"protocol":..,"generationId":N,"assignment":"{m=[t-0],..}"} (≤ 3.7)
    size = 2 + 2 + _utf8_len(group)
    name = GROUP_RECORD_TYPE_NAMES[GROUP_METADATA_TYPE]
    if payload == _DELETE:
        return DecodedRecord(GROUP_METADATA_TYPE, name, is_tombstone=True, group_id=group), size
    value = _json_object(payload)
    if value is None or "generationId" not in value:
        return None
    record = DecodedRecord(
        GROUP_METADATA_TYPE,
        name,
        group_id=group,
        protocol_type=value.get("protocolType"),
        generation=_json_int(value, "generationId"),
        protocol=value.get("protocol"),
        member_count=_assignment_members(value.get("assignment")),
    )
    return record, size


def _assignment_members(assignment: object) -> int | None:
    """How many members a ≤ 3.7 group's printed assignment lists; None when it is not printed.

    Kafka prints each member as `memberId=[t-0, t-1]` (the consumer protocol, user data in hex
    after a colon) or `memberId=<hex>` (any other), joined by commas inside braces
    (`GroupMetadataManager.formatRecordKeyAndValue` of 2.5-3.7, DumpLogSegments'
    OffsetsMessageParser before). Whether the group has members is
    what the replay reads (an Empty group's rewind is an operator's reset): "{}" is none, and
    any other assignment at least one, even where a member id with `=` and `,` in it blurs the
    count.
    """
    if not isinstance(assignment, str):
        return None
    inner = assignment.removeprefix("{").removesuffix("}")
    if not inner:
        return 0
    return max(1, len(_ASSIGNMENT_ENTRY_END.findall(inner)))


def _parse_group_metadata_2_5(key: str, payload: str) -> tuple[DecodedRecord, int] | None:
    return _group_metadata_text(key.removeprefix("group_metadata::group="), payload)


def _old_offsets_record(body: str, key_size: int | None) -> DecodedRecord:
    if body.startswith("offset_commit::group="):
        return _split(body, key_size, _parse_offset_commit_2_5)
    if body.startswith("group_metadata::group="):
        return _split(body, key_size, _parse_group_metadata_2_5)
    if body.startswith("offset::"):
        return _split(body, key_size, _parse_offset_commit_2_4)
    raise CoordinatorRecordError("the key is not one the offsets decoder prints")


def _txn_partitions(text: str) -> tuple[tuple[str, int], ...] | None:
    # 2.5+: [t-0,t-1] (mkString(",")); ≤ 2.4: a Scala Set's toString, Set(t-0, t-1).
    inner = text[1:-1] if text.startswith("[") else text[text.index("(") + 1 : -1]
    if not inner.strip():
        return ()
    found = []
    for item in inner.split(","):
        parsed = _topic_partition(item.strip())
        if parsed is None:
            return None
        found.append(parsed)
    return tuple(found)


def _transaction(prefix: str) -> Callable[[str, str], tuple[DecodedRecord, int] | None]:
    def parse(key: str, payload: str) -> tuple[DecodedRecord, int] | None:
        transactional_id = key.removeprefix(prefix)
        size = 2 + 2 + _utf8_len(transactional_id)
        if payload == _DELETE:
            record = DecodedRecord(
                TRANSACTION_LOG_TYPE,
                TRANSACTION_LOG_TYPE_NAME,
                is_tombstone=True,
                transactional_id=transactional_id,
            )
            return record, size
        value = _TXN_VALUE.match(payload)
        if value is None or value[3] not in TRANSACTION_STATUS_IDS:
            return None
        partitions = _txn_partitions(value[4])
        if partitions is None:
            return None
        record = DecodedRecord(
            TRANSACTION_LOG_TYPE,
            TRANSACTION_LOG_TYPE_NAME,
            transactional_id=transactional_id,
            producer_id=int(value[1]),
            producer_epoch=int(value[2]),
            transaction_status=value[3],
            transaction_partitions=partitions,
            last_update_timestamp_ms=int(value[5]),
            transaction_timeout_ms=int(value[6]),
        )
        return record, size

    return parse


def _old_transaction_record(body: str, key_size: int | None) -> DecodedRecord:
    for prefix in ("transaction_metadata::transactionalId=", "transactionalId="):
        if body.startswith(prefix):
            return _split(body, key_size, _transaction(prefix))
    raise CoordinatorRecordError("the key is not one the transaction log decoder prints")


# ------------------------------------------------------------------------------------------------
# JSON generations (3.8+ offsets, 4.x transaction log, and ≤ 2.4 group metadata)
# ------------------------------------------------------------------------------------------------
def _json_object(text: str) -> dict | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _json_int(obj: dict, name: str) -> int | None:
    """An integer field, which the tool prints as a number or (type, version) as a string."""
    value = obj.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise CoordinatorRecordError(f"{name} is not an integer: {value!r}")
    try:
        return int(value)
    except ValueError:
        raise CoordinatorRecordError(f"{name} is not an integer: {value!r}") from None


def _json_record(body: str, coordinator_topic: str) -> DecodedRecord:
    try:
        key, end = json.JSONDecoder().raw_decode(body)
    except ValueError as err:
        raise CoordinatorRecordError(f"the key is not JSON: {err}") from None
    rest = body[end:]
    payload = rest[len(_PAYLOAD) :] if rest.startswith(_PAYLOAD) else None
    if not isinstance(key, dict) or (payload is None and rest):
        raise CoordinatorRecordError("the JSON key is not followed by a payload")
    if "metadata" in key and "type" not in key:  # ≤ 2.4: {"metadata":"G"} and its JSON value
        found = _group_metadata_text(str(key["metadata"]), payload or "")
        if found is None:
            raise CoordinatorRecordError("the group metadata payload is not the JSON expected")
        return found[0]
    record_type = _json_int(key, "type")
    data = key.get("data")
    if record_type is None or not isinstance(data, dict):
        raise CoordinatorRecordError('the JSON key has no "type" and "data"')
    if payload is None or payload == _DELETE:
        value, version = {}, None
    else:
        envelope = _json_object(payload)
        if envelope is None or not isinstance(envelope.get("data"), dict):
            raise CoordinatorRecordError('the payload is not JSON with "version" and "data"')
        value, version = envelope["data"], _json_int(envelope, "version")
    is_tombstone = payload == _DELETE
    if coordinator_topic == TRANSACTION_STATE_TOPIC:
        if record_type != TRANSACTION_LOG_TYPE:
            return DecodedRecord(record_type, None, is_tombstone=is_tombstone, is_skipped=True)
        return _json_transaction(data, value, version, is_tombstone)
    name = GROUP_RECORD_TYPE_NAMES.get(record_type)
    if record_type in OFFSET_COMMIT_TYPES:
        return _json_offset_commit(record_type, data, value, version, is_tombstone)
    if record_type == GROUP_METADATA_TYPE:
        return _json_group_metadata(data, value, version, is_tombstone)
    if record_type == CONSUMER_GROUP_MEMBER_TYPE:
        return _json_consumer_group_member(data, value, version, is_tombstone)
    # Every key of these types has GroupId first (`groupId` in the JSON), as the segments'
    # decoder reads it; what else the key and the value hold is not read.
    group_id = data.get("groupId")
    return DecodedRecord(
        record_type, name, is_tombstone=is_tombstone, is_skipped=True,
        group_id=group_id if isinstance(group_id, str) else None,
    )  # fmt: skip


def _json_string(obj: dict, name: str) -> str | None:
    value = obj.get(name)
    if value is not None and not isinstance(value, str):
        raise CoordinatorRecordError(f"{name} is not a string: {value!r}")
    return value


def _json_offset_commit(
    record_type: int, key: dict, value: dict, version: int | None, is_tombstone: bool
) -> DecodedRecord:
    # OffsetCommitValueJsonConverter: offset, leaderEpoch (v3+), metadata, commitTimestamp,
    # expireTimestamp (v1), topicId (v4, only when not the zero Uuid).
    if not is_tombstone and ("offset" not in value or "commitTimestamp" not in value):
        raise CoordinatorRecordError("the OffsetCommit payload has no offset or commitTimestamp")
    return DecodedRecord(
        record_type,
        GROUP_RECORD_TYPE_NAMES[record_type],
        value_version=version,
        is_tombstone=is_tombstone,
        group_id=_json_string(key, "group"),
        committed_topic=_json_string(key, "topic"),
        committed_partition=_json_int(key, "partition"),
        committed_offset=_json_int(value, "offset"),
        leader_epoch=_json_int(value, "leaderEpoch"),
        metadata=_json_string(value, "metadata"),
        commit_timestamp_ms=_json_int(value, "commitTimestamp"),
        expire_timestamp_ms=_json_int(value, "expireTimestamp"),
        topic_id=_json_string(value, "topicId"),
    )


def _json_group_metadata(
    key: dict, value: dict, version: int | None, is_tombstone: bool
) -> DecodedRecord:
    members = value.get("members")
    return DecodedRecord(
        GROUP_METADATA_TYPE,
        GROUP_RECORD_TYPE_NAMES[GROUP_METADATA_TYPE],
        value_version=version,
        is_tombstone=is_tombstone,
        group_id=_json_string(key, "group"),
        protocol_type=_json_string(value, "protocolType"),
        generation=_json_int(value, "generation"),
        protocol=_json_string(value, "protocol"),
        leader=_json_string(value, "leader"),
        current_state_timestamp_ms=_json_int(value, "currentStateTimestamp"),
        member_count=len(members) if isinstance(members, list) else None,
    )


def _json_consumer_group_member(
    key: dict, value: dict, version: int | None, is_tombstone: bool
) -> DecodedRecord:
    # ConsumerGroupMemberMetadataKeyJsonConverter: groupId, memberId (both mandatory); the value
    # is not kept, as in the segments' decoder: a member is there or left.
    group_id, member_id = _json_string(key, "groupId"), _json_string(key, "memberId")
    if group_id is None or member_id is None:
        raise CoordinatorRecordError("the member key has no groupId or memberId")
    if not is_tombstone and "clientId" not in value:
        raise CoordinatorRecordError("the member payload has no clientId")
    return DecodedRecord(
        CONSUMER_GROUP_MEMBER_TYPE,
        GROUP_RECORD_TYPE_NAMES[CONSUMER_GROUP_MEMBER_TYPE],
        value_version=version,
        is_tombstone=is_tombstone,
        group_id=group_id,
        member_id=member_id,
    )


def _json_status(value: dict) -> str | None:
    # Numeric until KAFKA-20712 (apache/kafka#22615), the state's name after it.
    status = value.get("transactionStatus")
    if status is None or (isinstance(status, str) and status in TRANSACTION_STATUS_IDS):
        return status
    number = _json_int(value, "transactionStatus")
    return None if number is None else transaction_status_name(number)


def _json_partitions(value: dict) -> tuple[tuple[str, int], ...] | None:
    entries = value.get("transactionPartitions")
    if entries is None:
        return None
    if not isinstance(entries, list):
        raise CoordinatorRecordError("transactionPartitions is not a list")
    found = []
    for entry in entries:
        ids = entry.get("partitionIds") if isinstance(entry, dict) else None
        if not isinstance(ids, list):
            raise CoordinatorRecordError("a transactionPartitions entry has no partitionIds")
        topic = _json_string(entry, "topic") or ""
        found += [(topic, _json_int({"id": p}, "id")) for p in ids]
    return tuple(found)


def _json_transaction(
    key: dict, value: dict, version: int | None, is_tombstone: bool
) -> DecodedRecord:
    # TransactionLogValueJsonConverter writes a tagged field only when it is not its default.
    flexible = version is not None and version >= 1

    def tagged(name: str, default: int) -> int | None:
        found = _json_int(value, name)
        return found if found is not None else (default if flexible else None)

    if not is_tombstone and "producerId" not in value:
        raise CoordinatorRecordError("the TransactionLog payload has no producerId")
    return DecodedRecord(
        TRANSACTION_LOG_TYPE,
        TRANSACTION_LOG_TYPE_NAME,
        value_version=version,
        is_tombstone=is_tombstone,
        transactional_id=_json_string(key, "transactionalId"),
        producer_id=_json_int(value, "producerId"),
        producer_epoch=_json_int(value, "producerEpoch"),
        previous_producer_id=None if is_tombstone else tagged("previousProducerId", -1),
        next_producer_id=None if is_tombstone else tagged("nextProducerId", -1),
        transaction_timeout_ms=_json_int(value, "transactionTimeoutMs"),
        transaction_status=_json_status(value),
        transaction_partitions=_json_partitions(value),
        last_update_timestamp_ms=_json_int(value, "transactionLastUpdateTimestampMs"),
        start_timestamp_ms=_json_int(value, "transactionStartTimestampMs"),
        client_transaction_version=None if is_tombstone else tagged("clientTransactionVersion", 0),
    )
