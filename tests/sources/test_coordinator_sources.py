"""The coordinator record readers: segments and kafka-dump-log decoder text, into one contract.

The segments are real Kafka bytes (kafka-python's builder, `segment_builder`); the keys and values
come from the schema-following encoder of test_coordinator_records. The same batches are printed
as `kafka-dump-log.sh` does (`format_dump_log`) and given the decoder output of two generations,
the 3.x text (eos_processing.md §2: `offset_commit::`, `transaction_metadata::`) and the 4.x JSON,
with the line shapes of test_coordinator_text's real samples. The Spark tests share one read.
"""

from __future__ import annotations

import random
import re
import struct

import crc32c
import pytest

from eos_audit.errors import ConfigError
from eos_audit.schemas import COORDINATOR_RECORDS
from eos_audit.sources.kafka.coordinator_dump_log import (
    parse_coordinator_dump_log,
    read_coordinator_dump_log,
)
from eos_audit.sources.kafka.coordinator_keys import partition_for
from eos_audit.sources.kafka.coordinator_records import (
    DECODED_FIELDS,
    DecodedRecord,
    decode_consumer_offsets,
    decode_transaction_state,
)
from eos_audit.sources.kafka.coordinator_rows import UNFIT_VALUE, coordinator_source_schema
from eos_audit.sources.kafka.coordinator_segments import (
    iter_coordinator_segment,
    parse_coordinator_segment,
    read_coordinator_segment_files,
    read_coordinator_segments,
)
from eos_audit.sources.kafka.segments import SOURCE_ERROR_COL
from tests.fixtures.segment_builder import (
    BASE_TS,
    control_batch,
    data_batch,
    format_dump_log,
    legacy_entry,
    record_batch,
    segment_name,
    write_partition_dir,
)
from tests.sources.test_coordinator_records import (
    group_metadata_value,
    i16,
    i64,
    offset_commit_key,
    offset_commit_value,
    string,
    txn_key,
    txn_value,
)

CO = "__consumer_offsets"
TS = "__transaction_state"
GROUP = "my-group"
TXN_ID = "kafka-txn-0"
CO_PARTITION = partition_for(GROUP)  # 12, the specification's sample
TS_PARTITION = partition_for(TXN_ID)  # 30
PID, EPOCH = 4000, 2
COMMIT_TS = 1_742_739_702_993
EXPIRE_TS = 1_742_999_999_999


def commit(partition: int, offset: int, version: int = 3, **kw) -> tuple[bytes, bytes]:
    key = offset_commit_key(GROUP, "input-topic", partition)
    return key, offset_commit_value(version, offset, "", COMMIT_TS, **kw)


def with_header(batch: bytes, *, attributes_or: int = 0, record_count: int | None = None) -> bytes:
    """The batch with attribute bits set or another record count, its CRC-32C made right again."""
    buf = bytearray(batch)
    attributes = struct.unpack_from(">h", buf, 21)[0] | attributes_or
    struct.pack_into(">h", buf, 21, attributes)
    if record_count is not None:
        struct.pack_into(">i", buf, 57, record_count)
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    return bytes(buf)


# __consumer_offsets-12: what both the segment and the text hold (A-E), then what only bytes hold.
PLAIN = [commit(0, 5), commit(1, 7, version=1, expire_ts=EXPIRE_TS)]
TXN_COMMIT = commit(0, 9, leader_epoch=1)
TOMBSTONE = (offset_commit_key(GROUP, "input-topic", 1), None)
STREAMS_GROUP = (i16(17) + string(GROUP), b"\x00\x00streams group record")
DAMAGED = (offset_commit_key(GROUP, "input-topic", 2), i16(9) + bytes(30))
EMPTY_GROUP = (i16(2) + string(GROUP), group_metadata_value(3, []))
SHARED = [
    record_batch(0, PLAIN, base_sequence=0),  # a plain commit: pid -1, baseSequence 0 (§1.3)
    record_batch(
        2, [TXN_COMMIT], producer_id=PID, producer_epoch=EPOCH, base_sequence=0,
        is_transactional=True, timestamp=BASE_TS + 10,
    ),
    control_batch(3, producer_id=PID, producer_epoch=EPOCH, commit=True, timestamp=BASE_TS + 20),
    record_batch(4, [TOMBSTONE], base_sequence=0, timestamp=BASE_TS + 30),
    record_batch(5, [STREAMS_GROUP], base_sequence=0, timestamp=BASE_TS + 40),
]  # fmt: skip
_FLIPPED = bytearray(record_batch(10, [commit(3, 13)], base_sequence=0, timestamp=BASE_TS + 80))
_FLIPPED[-3] ^= 0xFF  # inside the value: covered by the CRC
BYTES_ONLY = [
    record_batch(6, [DAMAGED, EMPTY_GROUP], base_sequence=0, timestamp=BASE_TS + 50),
    record_batch(8, [commit(2, 11)], base_sequence=0, compression_type=1, timestamp=BASE_TS + 60),
    with_header(
        record_batch(9, [commit(3, 12)], base_sequence=0, timestamp=BASE_TS + 70),
        attributes_or=5,  # a codec Kafka does not define (CompressionType: 0-4)
    ),
    bytes(_FLIPPED),
    record_batch(11, [commit(3, 14)], base_sequence=0)[:40],  # a copy cut mid-batch
]
CO_SEGMENT = b"".join(SHARED + BYTES_ONLY)
POSITIONS = [sum(len(b) for b in (SHARED + BYTES_ONLY)[:i]) for i in range(10)]

# __transaction_state-30: Ongoing (v0), CompleteCommit (v1 with tags), then the id expired.
TXN_RECORDS = [
    (txn_key(TXN_ID), txn_value(
        0, PID, EPOCH, 1, {"output-topic": [0], CO: [CO_PARTITION]}, BASE_TS + 5,
        start=BASE_TS + 1,
    )),
    (txn_key(TXN_ID), txn_value(
        1, PID, EPOCH, 4, {}, BASE_TS + 25, start=BASE_TS + 1, tagged={0: i64(3999), 2: i16(2)},
    )),
    (txn_key(TXN_ID), None),
]  # fmt: skip
TS_SEGMENT = b"".join(
    record_batch(i, [record], timestamp=BASE_TS + 100 * i) for i, record in enumerate(TXN_RECORDS)
)

# The decoder output of each record, by offset: 3.x text and 4.x JSON (eos_processing.md §2).
_CO_KEY_3 = "key: offset_commit::group=my-group,partition=input-topic-{p}"
_CO_KEY_4 = (
    'key: {{"type":"1","data":{{"group":"my-group","topic":"input-topic","partition":{p}}}}}'
)
_TS_KEY_3 = "key: transaction_metadata::transactionalId=kafka-txn-0"
_TS_KEY_4 = 'key: {"type":"0","data":{"transactionalId":"kafka-txn-0"}}'
CO_TEXT_3 = {
    0: _CO_KEY_3.format(p=0) + " payload: offset=5",
    1: _CO_KEY_3.format(p=1) + " payload: offset=7",
    2: _CO_KEY_3.format(p=0) + " payload: offset=9",
    4: _CO_KEY_3.format(p=1) + " payload: <DELETE>",
    5: "key: unknown::version=17",
}
CO_TEXT_4 = {
    0: _CO_KEY_4.format(p=0) + ' payload: {"version":"3","data":{"offset":5,"leaderEpoch":-1,'
    f'"metadata":"","commitTimestamp":{COMMIT_TS}}}}}',
    1: _CO_KEY_4.format(p=1) + ' payload: {"version":"1","data":{"offset":7,"metadata":"",'
    f'"commitTimestamp":{COMMIT_TS},"expireTimestamp":{EXPIRE_TS}}}}}',
    2: _CO_KEY_4.format(p=0) + ' payload: {"version":"3","data":{"offset":9,"leaderEpoch":1,'
    f'"metadata":"","commitTimestamp":{COMMIT_TS}}}}}',
    4: _CO_KEY_4.format(p=1) + " payload: <DELETE>",
    5: "key: Unknown record type 17 at offset 5, skipping.",
}
TS_TEXT_3 = {
    0: _TS_KEY_3 + " payload: producerId:4000,producerEpoch:2,state=Ongoing,partitions=["
    f"output-topic-0,__consumer_offsets-12],txnLastUpdateTimestamp={BASE_TS + 5},"
    "txnTimeoutMs=60000",
    1: _TS_KEY_3 + " payload: producerId:4000,producerEpoch:2,state=CompleteCommit,partitions=[],"
    f"txnLastUpdateTimestamp={BASE_TS + 25},txnTimeoutMs=60000",
    2: _TS_KEY_3 + " payload: <DELETE>",
}
TS_TEXT_4 = {
    0: _TS_KEY_4 + ' payload: {"version":"0","data":{"producerId":4000,"producerEpoch":2,'
    '"transactionTimeoutMs":60000,"transactionStatus":1,"transactionPartitions":[{"topic":'
    '"output-topic","partitionIds":[0]},{"topic":"__consumer_offsets","partitionIds":[12]}],'
    f'"transactionLastUpdateTimestampMs":{BASE_TS + 5},'
    f'"transactionStartTimestampMs":{BASE_TS + 1}}}}}',
    1: _TS_KEY_4 + ' payload: {"version":"1","data":{"producerId":4000,"previousProducerId":3999,'
    '"producerEpoch":2,"transactionTimeoutMs":60000,"transactionStatus":"CompleteCommit",'
    f'"transactionPartitions":[],"transactionLastUpdateTimestampMs":{BASE_TS + 25},'
    f'"transactionStartTimestampMs":{BASE_TS + 1},"clientTransactionVersion":2}}}}',
    2: _TS_KEY_4 + " payload: <DELETE>",
}
# What the text generations before the JSON one do not print (coordinator_text's docstring).
NOT_IN_3_X_TEXT = (
    "value_version", "leader_epoch", "commit_timestamp_ms", "expire_timestamp_ms", "topic_id",
    "start_timestamp_ms", "previous_producer_id", "next_producer_id", "client_transaction_version",
)  # fmt: skip


def dump_text(log_dir: str, sections: list[tuple[str, int, bytes, dict[int, str]]]) -> str:
    """kafka-dump-log output of segments, with a decoder's output on each data record line."""
    out = []
    for topic, partition, data, tails in sections:
        path = f"{log_dir}/{topic}-{partition}/{segment_name(0)}"
        for line in format_dump_log(path, data).splitlines():
            found = re.match(r"^\| offset: (\d+) ", line)
            if found and "endTxnMarker" not in line:
                line += " " + tails[int(found[1])]
            out.append(line)
    return "\n".join(out) + "\n"


TEXT_SECTIONS = {
    generation: [(CO, CO_PARTITION, b"".join(SHARED), co), (TS, TS_PARTITION, TS_SEGMENT, ts)]
    for generation, co, ts in (("3.x", CO_TEXT_3, TS_TEXT_3), ("4.x", CO_TEXT_4, TS_TEXT_4))
}


def decoded(row: dict) -> DecodedRecord:
    """The decoded part of a row, as the decoders give it."""
    fields = {name: row[name] for name in DECODED_FIELDS}
    partitions = fields["transaction_partitions"]
    if partitions is not None:
        fields["transaction_partitions"] = tuple((p["topic"], p["partition"]) for p in partitions)
    return DecodedRecord(**fields)


CONTEXT = (
    "offset", "base_offset", "batch_producer_id", "batch_producer_epoch", "is_transactional",
    "timestamp", "record_type", "is_tombstone", "is_skipped", "committed_partition",
    "committed_offset",
)  # fmt: skip


def context(row: dict) -> tuple:
    return tuple(row[name] for name in CONTEXT)


def co_rows() -> list[dict]:
    return parse_coordinator_segment(
        CO_SEGMENT, topic=CO, partition=CO_PARTITION, path="/x/__consumer_offsets-12/0.log"
    ).to_pylist()


# ------------------------------------------------------------------------------------------------
# Segments, pure
# ------------------------------------------------------------------------------------------------
def test_every_data_record_is_a_row_with_its_batchs_producer():
    rows = co_rows()
    good = [r for r in rows if r[SOURCE_ERROR_COL] is None]
    assert [context(r) for r in good] == [
        (0, 0, -1, -1, False, BASE_TS, 1, False, False, 0, 5),
        (1, 0, -1, -1, False, BASE_TS + 1, 1, False, False, 1, 7),
        (2, 2, PID, EPOCH, True, BASE_TS + 10, 1, False, False, 0, 9),  # TxnOffsetCommit
        (3, 3, PID, EPOCH, True, BASE_TS + 20, None, False, False, None, None),  # its COMMIT
        (4, 4, -1, -1, False, BASE_TS + 30, 1, True, False, 1, None),  # tombstone
        (5, 5, -1, -1, False, BASE_TS + 40, 17, False, True, None, None),  # skipped type
        (7, 6, -1, -1, False, BASE_TS + 51, 2, False, False, None, None),  # beside a damaged one
        (8, 8, -1, -1, False, BASE_TS + 60, 1, False, False, 2, 11),  # gzip
    ]
    # The COMMIT marker at offset 3 is a row of its own, with no record fields.
    assert [(r["offset"], r["control_type"]) for r in rows if r["control_type"]] == [(3, "COMMIT")]
    by_offset = {r["offset"]: r for r in good}
    assert decoded(by_offset[2]) == decode_consumer_offsets(*TXN_COMMIT)
    assert decoded(by_offset[1]).expire_timestamp_ms == EXPIRE_TS
    assert decoded(by_offset[5]) == DecodedRecord(
        17, "StreamsGroupMetadata", is_skipped=True, group_id=GROUP
    )
    assert decoded(by_offset[7]) == decode_consumer_offsets(*EMPTY_GROUP)
    assert {r["coordinator_topic"] for r in rows} == {CO}
    assert {r["coordinator_partition"] for r in rows} == {CO_PARTITION}
    assert [r["source"] for r in good] == [
        f"/x/__consumer_offsets-12/0.log:{POSITIONS[i]}" for i in (0, 0, 1, 2, 3, 4, 5, 6)
    ]


def test_what_does_not_decode_is_a_row_naming_its_position_and_reason():
    rows = co_rows()
    errors = [r for r in rows if r[SOURCE_ERROR_COL] is not None]
    path = "/x/__consumer_offsets-12/0.log"
    assert [(r["offset"], r["base_offset"], r["source"], r[SOURCE_ERROR_COL]) for r in errors] == [
        (6, 6, f"{path}:{POSITIONS[5]}", "record at offset 6 does not decode: OffsetCommit value "
         "version 9 is not one Kafka defines (0-4)"),
        (None, 9, f"{path}:{POSITIONS[7]}", "not decoded: compression unknown codec 5: the 1 "
         f"records of the batch at byte {POSITIONS[7]} are not decoded"),
        (None, 10, f"{path}:{POSITIONS[8]}", f"the batch at byte {POSITIONS[8]} fails its CRC-32C: "
         "its 1 records are not decoded (damaged bytes)"),
        (None, 11, f"{path}:{POSITIONS[9]}", f"truncated batch at byte {POSITIONS[9]}: header "
         f"declares {len(record_batch(11, [commit(3, 14)], base_sequence=0))} bytes, only 40 "
         "remain"),
    ]  # fmt: skip
    assert errors[0]["timestamp"] == BASE_TS + 50 and errors[0]["record_type"] is None
    assert (errors[1]["batch_producer_id"], errors[1]["is_transactional"]) == (-1, False)
    assert errors[3]["batch_producer_id"] is None  # nothing of a cut batch but its offset


def test_the_transaction_log_records_decode_with_their_offsets():
    rows = parse_coordinator_segment(
        TS_SEGMENT, topic=TS, partition=TS_PARTITION, path="/x/__transaction_state-30/0.log"
    ).to_pylist()
    assert [(r["offset"], r["timestamp"], r[SOURCE_ERROR_COL]) for r in rows] == [
        (0, BASE_TS, None), (1, BASE_TS + 100, None), (2, BASE_TS + 200, None),
    ]  # fmt: skip
    assert [decoded(r) for r in rows] == [decode_transaction_state(*r) for r in TXN_RECORDS]
    assert rows[0]["transaction_partitions"] == [
        {"topic": "output-topic", "partition": 0},
        {"topic": CO, "partition": CO_PARTITION},
    ]
    assert (rows[1]["previous_producer_id"], rows[1]["client_transaction_version"]) == (3999, 2)


def test_log_append_time_gives_every_record_the_batchs_max_timestamp():
    batch = with_header(record_batch(0, PLAIN, timestamp=BASE_TS), attributes_or=0x08)
    rows = parse_coordinator_segment(batch, topic=CO, partition=0, path="p").to_pylist()
    assert [r["timestamp"] for r in rows] == [BASE_TS + 1, BASE_TS + 1]


def test_records_that_cannot_be_walked_keep_the_ones_before():
    batch = with_header(record_batch(0, PLAIN), record_count=3)
    rows = parse_coordinator_segment(batch, topic=CO, partition=0, path="p").to_pylist()
    assert [r["committed_offset"] for r in rows[:2]] == [5, 7]
    end = len(batch) - 61  # the records section's length: where the third should start
    assert rows[2][SOURCE_ERROR_COL] == (
        "the records of the batch at byte 0 cannot be walked (record 2 of 3: records: record "
        f"length needs 1 bytes at byte {end}, only 0 left (truncated)): 1 of its 3 records are "
        "not decoded"
    )
    assert (rows[2]["offset"], rows[2]["base_offset"]) == (None, 0)


def test_a_legacy_entry_is_an_error_row_and_batches_are_chunked():
    data = legacy_entry(0) + b"".join(SHARED)
    rows = parse_coordinator_segment(data, topic=CO, partition=0, path="p").to_pylist()
    assert rows[0][SOURCE_ERROR_COL] == (
        "a magic 1 entry at byte 0: records of the message formats before v2 are not decoded"
    )
    chunks = list(iter_coordinator_segment(data, topic=CO, partition=0, path="p", chunk_rows=2))
    assert [c.num_rows for c in chunks] == [3, 2, 2]  # a batch's records stay together
    assert [r for c in chunks for r in c.to_pylist()] == rows
    with pytest.raises(ValueError, match="'orders' is not a coordinator topic"):
        list(iter_coordinator_segment(data, topic="orders", partition=0, path="p"))


# ------------------------------------------------------------------------------------------------
# kafka-dump-log text, pure
# ------------------------------------------------------------------------------------------------
def without_source(row: dict) -> dict:
    return {k: v for k, v in row.items() if k != "source"}


def segment_rows_of_the_text() -> list[dict]:
    co = [r for r in co_rows() if r["offset"] is not None and r["offset"] <= 5]
    ts = parse_coordinator_segment(TS_SEGMENT, topic=TS, partition=TS_PARTITION, path="p")
    return co + ts.to_pylist()


def check_text_rows(generation: str, rows: list[dict]) -> None:
    expected = [without_source(r) for r in segment_rows_of_the_text()]
    # Neither tool knows type 17: its line prints no group, which the segment's key holds.
    expected = [{**r, "group_id": None} if r["is_skipped"] else r for r in expected]
    if generation == "3.x":
        expected = [{**r, **dict.fromkeys(NOT_IN_3_X_TEXT)} for r in expected]
    assert [without_source(r) for r in rows] == expected


@pytest.mark.parametrize("generation", ["3.x", "4.x"])
def test_the_text_of_each_generation_gives_the_segments_rows(generation):
    text = dump_text("/kafka-logs", TEXT_SECTIONS[generation])
    rows = parse_coordinator_dump_log(text.encode(), path="dump.txt").to_pylist()
    check_text_rows(generation, rows)
    # Each row names its record line: the 4th line is the first record's (after Dumping, Log
    # starting offset and the batch line).
    assert rows[0]["source"] == "dump.txt:line 4"
    assert text.splitlines()[3].startswith("| offset: 0 ")


TRICKY = """\
Dumping /logs/__consumer_offsets-3/00000000000000000000.log
Log starting offset: 0
| offset: 0 CreateTime: 1 keySize: 9 valueSize: -1 sequence: 0 headerKeys: [] key: unknown::version=3
baseOffset: 1 lastOffset: 3 count: 3 baseSequence: 0 lastSequence: 2 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 5 size: 200 magic: 2 compresscodec: none crc: 1 isvalid: true
| offset: 1 CreateTime: 5 keySize: 9 valueSize: 4 sequence: 0 headerKeys: [] key: Error at offset 1, skipping. Could not read record with version 9 from value's buffer due to: x.
| key: offset_commit::group=g,partition=t-0 payload: offset=1
| offset: 3 LogAppendTime: 7 keySize: 12 valueSize: 24 sequence: 2 headerKeys: [] key: offset_commit::group=g,partition=t-0 payload: offset=2,metadata=m
...
baseOffset: 4 lastOffset: 4 count: 1 baseSequence: -1 lastSequence: -1 producerId: 7 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty position: 200 CreateTime: 6 size: 78 magic: 2 compresscodec: none crc: 1 isvalid: true
| offset: 4 CreateTime: 6 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 0
Dumping /logs/orders-0/00000000000000000000.log
baseOffset: 0 lastOffset: 0 count: 1 baseSequence: 0 lastSequence: 0 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1 size: 80 magic: 2 compresscodec: none crc: 1 isvalid: true
| offset: 0 CreateTime: 1 keySize: -1 valueSize: 10 sequence: 0 headerKeys: []
...
"""  # noqa: E501


def test_text_that_cannot_be_placed_or_decoded_is_an_error_row_at_its_line():
    rows = parse_coordinator_dump_log(TRICKY.encode(), path="d.txt").to_pylist()
    assert [
        (r["source"], r["offset"], r["coordinator_partition"], r[SOURCE_ERROR_COL]) for r in rows
    ] == [
        ("d.txt:line 3", None, 3, "record line with no batch line before it (excerpt cut?)"),
        ("d.txt:line 5", 1, 3, "record line does not decode: kafka-dump-log could not decode it: "
         "Could not read record with version 9 from value's buffer due to: x."),
        ("d.txt:line 6", None, 3, "record line shows no offset, keySize and valueSize "
         "(--skip-record-metadata?): its record cannot be placed"),
        ("d.txt:line 7", 3, 3, None),
        ("d.txt:line 8", None, 3, "line matches no known kafka-dump-log.sh format (4 bytes, "
         "content not copied)"),
        ("d.txt:line 9", 4, 3, None),  # the COMMIT marker, at its batch line
    ]  # fmt: skip
    assert rows[5]["control_type"] == "COMMIT"
    # The section of another topic (lines 11-14) gives no row.
    good = rows[3]
    assert (good["committed_offset"], good["metadata"], good["timestamp"]) == (2, "m", 7)
    assert (good["base_offset"], good["batch_producer_id"], good["is_transactional"]) == (
        1,
        -1,
        False,
    )


def test_text_without_a_dumping_line_needs_the_topic():
    text = "\n".join(TRICKY.splitlines()[3:8]) + "\n"
    unknown = parse_coordinator_dump_log(text.encode(), path="d.txt").to_pylist()
    assert len(unknown) == 2  # the batch line (its records not decoded) and the `...` line
    assert "pass topic= and partition=" in unknown[0][SOURCE_ERROR_COL]
    assert unknown[0]["source"] == "d.txt:line 1"
    given = parse_coordinator_dump_log(text.encode(), path="d.txt", topic=CO, partition=3)
    assert [r["offset"] for r in given.to_pylist()] == [1, None, 3, None]


def test_values_that_do_not_fit_their_column_are_error_rows():
    batch_line = TRICKY.splitlines()[3]
    text = "\n".join([
        batch_line,
        "| offset: 1 CreateTime: 5 keySize: 12 valueSize: 24 sequence: 0 headerKeys: [] key: "
        "offset_commit::group=g,partition=t-0 payload: offset=99999999999999999999",
        "| offset: 2 CreateTime: 5 keySize: 12 valueSize: 24 sequence: 1 headerKeys: [] key: "
        '{"type":"1","data":{"group":"\\ud800","topic":"t","partition":0}} payload: {"version":'
        '"3","data":{"offset":1,"leaderEpoch":-1,"metadata":"","commitTimestamp":2}}',
        "| offset: 99999999999999999999 CreateTime: 5 keySize: 12 valueSize: 24 sequence: 2 "
        "headerKeys: [] key: offset_commit::group=g,partition=t-0 payload: offset=3",
    ]) + "\n"  # fmt: skip
    rows = parse_coordinator_dump_log(text.encode(), path="d.txt", topic=CO, partition=0)
    assert [(r["offset"], r["group_id"], r[SOURCE_ERROR_COL]) for r in rows.to_pylist()] == [
        (1, None, f"{UNFIT_VALUE}: committed_offset"),
        (2, None, f"{UNFIT_VALUE}: group_id"),
        (None, None, f"{UNFIT_VALUE}: offset"),
    ]


def test_damaged_segments_and_text_give_rows_never_an_exception():
    rng = random.Random(55)
    text = dump_text("/kafka-logs", TEXT_SECTIONS["4.x"]).encode()
    for _ in range(150):
        data = bytearray(CO_SEGMENT)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        rows = parse_coordinator_segment(bytes(data), topic=CO, partition=0, path="p").to_pylist()
        assert all(r[SOURCE_ERROR_COL] is not None or r["is_tombstone"] is not None for r in rows)
        damaged = bytearray(text)
        for _ in range(rng.randint(1, 4)):
            damaged[rng.randrange(len(damaged))] = rng.choice(b'{}[]",:=- 0123456789\\n|ux')
        rows = parse_coordinator_dump_log(bytes(damaged), path="d").to_pylist()
        assert all(r[SOURCE_ERROR_COL] is not None or r["is_tombstone"] is not None for r in rows)


def test_only_coordinator_topics_are_read_from_text():
    with pytest.raises(ConfigError, match=re.escape("topic 'orders': the coordinator readers")):
        read_coordinator_dump_log(None, ["d.txt"], topic="orders")


# ------------------------------------------------------------------------------------------------
# Through Spark: one read of segments and text
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def read(spark, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("coordinator")
    export = root / "export"
    co_dir = write_partition_dir(export, "broker-1", CO, CO_PARTITION, CO_SEGMENT)
    ts_dir = write_partition_dir(export, "broker-1", TS, TS_PARTITION, TS_SEGMENT)
    write_partition_dir(export, "broker-1", "orders", 0, data_batch(0, 2))
    dumps = root / "dumps"
    dumps.mkdir()
    for generation, sections in TEXT_SECTIONS.items():
        (dumps / f"{generation}.txt").write_text(dump_text("/kafka-logs", sections))
    folder = root / "__consumer_offsets-0" / segment_name(0)
    folder.mkdir(parents=True)  # a directory where a segment should be: cannot be read
    unreadable = [{"path": str(folder), "topic": CO, "partition": 0}]
    df = (
        read_coordinator_segments(spark, [str(export)])
        .unionByName(read_coordinator_dump_log(spark, [str(dumps)]))
        .unionByName(read_coordinator_segment_files(spark, unreadable))
    )
    return {
        "schema": df.schema,
        "rows": [row.asDict(recursive=True) for row in df.collect()],
        "segments": {CO: next(co_dir.glob("*.log")), TS: next(ts_dir.glob("*.log"))},
        "dumps": dumps,
        "unreadable": folder,
    }


def test_the_readers_schema_is_the_contract_and_an_error(read):
    schema = read["schema"]
    assert schema == coordinator_source_schema()
    assert schema.names == [*COORDINATOR_RECORDS.names, SOURCE_ERROR_COL]
    assert [f.dataType for f in schema.fields[:-1]] == [
        f.dataType for f in COORDINATOR_RECORDS.fields
    ]


def test_spark_reads_the_coordinator_segments_as_the_parser_does(read):
    for topic, path in read["segments"].items():
        partition = int(path.parent.name.rsplit("-", 1)[1])
        got = [r for r in read["rows"] if r["source"].startswith(f"{path}:")]
        expected = parse_coordinator_segment(
            path.read_bytes(), topic=topic, partition=partition, path=str(path)
        ).to_pylist()
        assert got == expected and got
    # The other topic's partition is the batch reader's.
    assert not [r for r in read["rows"] if "orders-0" in r["source"]]


@pytest.mark.parametrize("generation", ["3.x", "4.x"])
def test_spark_reads_each_text_generation_as_the_segments(read, generation):
    path = read["dumps"] / f"{generation}.txt"
    rows = [r for r in read["rows"] if r["source"].startswith(f"{path}:line ")]
    check_text_rows(generation, rows)


def test_a_file_that_cannot_be_read_is_one_error_row(read):
    folder = read["unreadable"]
    (row,) = [r for r in read["rows"] if r["source"].startswith(str(folder))]
    assert row["source"] == f"{folder}:0"
    assert row[SOURCE_ERROR_COL].startswith("cannot read segment file: Is a directory")
    assert (row["coordinator_topic"], row["coordinator_partition"], row["offset"]) == (CO, 0, None)
