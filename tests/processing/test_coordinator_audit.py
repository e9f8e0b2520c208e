"""The processing audit in a run: an export holding `__consumer_offsets` and `__transaction_state`.

The segments are Kafka's bytes (`segment_builder`, with the coordinator records of
test_coordinator_records' schema-following encoder). One run audits them with an input topic, and
its tables and findings are read back: the coordinator's rule decides each commit's outcome, the
rewinds and the mixed commits are found at their records, and the transaction log's records are
rows with the state before each.
"""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from chispa import assert_df_equality
from deltalake import DeltaTable, QueryBuilder
from pyspark.sql import functions as F

from eos_audit.audit import output_records
from eos_audit.audit.pipeline import AuditInputs, run_audit
from eos_audit.cli import _print_summary
from eos_audit.config import AuditConfig
from eos_audit.processing.coordinator_audit import offset_events, replay_offsets, staged_records
from eos_audit.processing.exported_logs import cleaned_offset_partitions, offsets_logs
from eos_audit.processing.one_to_one import send_offsets_to_transaction
from eos_audit.sinks.run_record import RunResult
from eos_audit.sources.kafka.coordinator_dump_log import read_coordinator_dump_log
from eos_audit.sources.kafka.coordinator_keys import CONSUMER_OFFSETS_TOPIC as CONSUMER_OFFSETS
from eos_audit.sources.kafka.coordinator_keys import partition_for
from eos_audit.sources.kafka.coordinator_segments import (
    parse_coordinator_segment,
    read_coordinator_segments,
)
from eos_audit.sources.kafka.segments import SOURCE_ERROR_COL
from tests.fixtures.segment_builder import (
    BASE_TS,
    control_batch,
    data_batch,
    record_batch,
    write_partition_dir,
)
from tests.run_once import once_per_run
from tests.sources.test_coordinator_records import (
    group_metadata_value,
    i16,
    member,
    offset_commit_key,
    offset_commit_value,
    string,
    txn_key,
    txn_value,
)

pytestmark = pytest.mark.slow

GROUP, TXN_ID, INPUT = "copier", "copier-tx", "input"
CO, TS = partition_for(GROUP), partition_for(TXN_ID)
PID = 3000


def commit(value: int, partition: int = 0) -> tuple[bytes, bytes]:
    return offset_commit_key(GROUP, INPUT, partition), offset_commit_value(3, value, "", BASE_TS)


def group(members: int) -> tuple[bytes, bytes]:
    return i16(2) + string(GROUP), group_metadata_value(3, [member(3, "m-1")] * members)


def plain(offset: int, *records) -> bytes:
    return record_batch(offset, list(records), base_sequence=0, timestamp=BASE_TS + offset)


def txn(offset: int, epoch: int, *records) -> bytes:
    return record_batch(
        offset, list(records), producer_id=PID, producer_epoch=epoch, base_sequence=0,
        is_transactional=True, timestamp=BASE_TS + offset,
    )  # fmt: skip


def marker(offset: int, epoch: int, commit: bool) -> bytes:
    return control_batch(
        offset, producer_id=PID, producer_epoch=epoch, commit=commit, timestamp=BASE_TS + offset
    )


# __consumer_offsets: a transactional copier committing 10, 20; a transaction of 20-29 during
# which the group's consumer auto-commits 25, and which aborts (20-24 committed, never processed);
# the group empties and an operator resets to 0 (a rewind, INFO); a transaction pending at the end;
# two records of a share group (KIP-932), a type the audit counts and does not read.
SHARE_GROUP_METADATA = (i16(11) + string("share-group"), i16(0) + b"\x00\x00\x00\x01")
OFFSETS_LOG = [
    plain(0, group(1)),
    txn(1, 0, commit(10)), marker(2, 0, True),
    txn(3, 0, commit(20)), marker(4, 0, True),
    txn(5, 0, commit(30)), plain(6, commit(25)), marker(7, 0, False),
    plain(8, group(0)),
    plain(9, commit(0)),
    txn(10, 1, commit(5)),
    plain(11, SHARE_GROUP_METADATA, SHARE_GROUP_METADATA),
]  # fmt: skip
TRANSACTIONS_LOG = [
    plain(0, (txn_key(TXN_ID), txn_value(0, PID, 0, 0, None, BASE_TS))),
    plain(1, (txn_key(TXN_ID), txn_value(0, PID, 0, 1, {INPUT: [0]}, BASE_TS + 1))),
    plain(2, (txn_key(TXN_ID), txn_value(0, PID, 0, 4, {INPUT: [0]}, BASE_TS + 2))),
]


@pytest.fixture(scope="module")
def audited(spark, tmp_path_factory):
    """The export's run and its warehouse, built once for the suite's run (the module's tests
    may run on both workers)."""

    def build(root: Path) -> tuple[RunResult, Path]:
        export = root / "export"
        write_partition_dir(export, 1, "__consumer_offsets", CO, *OFFSETS_LOG)
        write_partition_dir(export, 1, "__transaction_state", TS, *TRANSACTIONS_LOG)
        write_partition_dir(export, 1, INPUT, 0, *[data_batch(i) for i in range(3)])
        warehouse = root / "warehouse"
        inputs = AuditInputs(batches=(str(export),))
        return run_audit(spark, inputs, AuditConfig(), str(warehouse)), warehouse

    return once_per_run(tmp_path_factory, "coordinator-audit", build)


def sql(warehouse, table: str, query: str) -> list[dict]:
    registered = QueryBuilder().register("t", DeltaTable(str(warehouse / table)))
    return pa.table(registered.execute(query).read_all()).to_pylist()


def test_every_commit_gets_the_coordinators_outcome(audited):
    result, warehouse = audited
    rows = sql(
        warehouse, "consumer_offsets",
        "SELECT record_offset, committed_offset, kind, outcome, marker_offset, "
        "previous_committed_offset, producer_id, group_id, topic, partition, "
        "coordinator_partition FROM t ORDER BY record_offset",
    )  # fmt: skip
    assert [
        (r["record_offset"], r["committed_offset"], r["kind"], r["outcome"], r["marker_offset"])
        for r in rows
    ] == [
        (1, 10, "TRANSACTIONAL", "APPLIED", 2),
        (3, 20, "TRANSACTIONAL", "APPLIED", 4),
        (5, 30, "TRANSACTIONAL", "ABORTED", 7),
        (6, 25, "PLAIN", "APPLIED", None),
        (9, 0, "PLAIN", "APPLIED", None),
        (10, 5, "TRANSACTIONAL", "PENDING", None),
    ]
    assert {
        (r["group_id"], r["topic"], r["partition"], r["coordinator_partition"]) for r in rows
    } == {(GROUP, INPUT, 0, CO)}
    # The share group's records are no commit: counted for the run's summary, not quarantined.
    assert result.coordinator_records_skipped == {
        "__consumer_offsets type 11 (ShareGroupMetadata)": 2
    }
    summary = io.StringIO()
    _print_summary(result, summary)
    assert (
        "2 coordinator record(s) skipped, of types the audit does not read: "
        "__consumer_offsets type 11 (ShareGroupMetadata) (2)"
    ) in summary.getvalue()
    assert [r["previous_committed_offset"] for r in rows] == [None, 10, None, 20, 25, None]
    assert result.status == "SUCCEEDED"


def test_rewinds_and_mixed_commits_are_found_at_their_records(audited):
    _, warehouse = audited
    found = sql(
        warehouse, "findings",
        "SELECT finding_type, cause, severity, topic, partition, base_offset, previous_offset, "
        "producer_id, detail, evidence, spec_ref FROM t WHERE topic = '__consumer_offsets' "
        "ORDER BY base_offset, finding_type, cause",
    )  # fmt: skip
    assert [
        (f["finding_type"], f["cause"], f["severity"], f["partition"], f["base_offset"],
         f["previous_offset"])
        for f in found
    ] == [
        ("MIXED_OFFSET_COMMITS", "ABORTED_RANGE_COMMITTED", "CRITICAL", CO, 5, 6),
        ("MIXED_OFFSET_COMMITS", "PLAIN_AND_TRANSACTIONAL", "WARNING", CO, 6, None),
        ("OFFSET_REWIND", "ADMIN_RESET", "INFO", CO, 9, 6),
    ]  # fmt: skip
    lost, _, reset = found
    assert "passing offsets 20-24 whose transaction aborted" in lost["detail"]
    assert dict(lost["evidence"])["aborted_from"] == "20"
    assert reset["detail"] == (
        f"Group {GROUP}'s committed offset of {INPUT}-0 went down from 25 (record 6) to 0 "
        "(record 9, PLAIN): cause ADMIN_RESET."
    )
    assert reset["spec_ref"] == "docs/rules.md#offset-rewind"


def test_the_transaction_log_is_one_row_a_record_with_the_state_before(audited):
    _, warehouse = audited
    rows = sql(
        warehouse, "transaction_log",
        "SELECT transactional_id, state, previous_state, producer_id, record_offset, "
        "coordinator_partition, partitions FROM t ORDER BY record_offset",
    )  # fmt: skip
    assert [(r["state"], r["previous_state"], r["record_offset"]) for r in rows] == [
        ("Empty", None, 0),
        ("Ongoing", "Empty", 1),
        ("CompleteCommit", "Ongoing", 2),
    ]
    assert {
        (r["transactional_id"], r["producer_id"], r["coordinator_partition"]) for r in rows
    } == {(TXN_ID, PID, TS)}
    assert rows[1]["partitions"] == [{"topic": INPUT, "partition": 0}]


@pytest.fixture(scope="module")
def from_parquet(spark, tmp_path_factory, audited):
    """The same coordinator records handed in as Parquet in the contract, with two bad rows: one
    of no coordinator topic, and a consumer group's member record without its member id."""
    root = tmp_path_factory.mktemp("processing-parquet")
    export = root / "export"
    write_partition_dir(export, 1, INPUT, 0, *[data_batch(i) for i in range(3)])
    tables = [
        parse_coordinator_segment(b"".join(log), topic=topic, partition=partition, path=topic)
        for topic, partition, log in (
            ("__consumer_offsets", CO, OFFSETS_LOG),
            ("__transaction_state", TS, TRANSACTIONS_LOG),
        )
    ]
    rows = pa.concat_tables(tables).drop_columns([SOURCE_ERROR_COL]).to_pylist()
    rows.append({**rows[0], "coordinator_topic": "orders", "source": "bad-row"})
    rows.append({**rows[0], "record_type": 5, "record_type_name": "ConsumerGroupMemberMetadata",
                 "member_id": None, "source": "member-without-id"})  # fmt: skip
    records = root / "records.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=tables[0].schema.remove(
        tables[0].schema.get_field_index(SOURCE_ERROR_COL))), records)  # fmt: skip
    inputs = AuditInputs(batches=(str(export),), coordinator_records=(str(records),))
    warehouse = root / "warehouse"
    return run_audit(spark, inputs, AuditConfig(), str(warehouse)), warehouse


def test_records_handed_in_as_parquet_give_the_same_history(audited, from_parquet):
    query = (
        "SELECT group_id, topic, partition, committed_offset, kind, outcome, marker_offset, "
        "previous_committed_offset, producer_id, record_offset FROM t ORDER BY record_offset"
    )
    assert sql(from_parquet[1], "consumer_offsets", query) == sql(
        audited[1], "consumer_offsets", query
    )
    findings = "SELECT finding_type, cause, base_offset FROM t ORDER BY base_offset, cause"
    assert sql(from_parquet[1], "findings", findings) == sql(audited[1], "findings", findings)
    result = from_parquet[0]
    bad = sql(from_parquet[1], "quarantine", "SELECT input, source, reason FROM t ORDER BY source")
    assert bad == [
        {
            "input": "coordinator_records",
            "source": "bad-row",
            "reason": "coordinator_topic orders is not a coordinator topic",
        },
        {
            "input": "coordinator_records",
            "source": "member-without-id",
            "reason": "a ConsumerGroupMemberMetadata record needs group_id and member_id",
        },
    ]
    assert result.status == "QUARANTINE_EXCEEDED"
    assert "quarantined 2 record(s) of __consumer_offsets" in result.error


def test_the_stage_leaves_out_contract_columns_only():
    # A misspelt name would stage a column nothing reads, silently.
    from eos_audit.processing.coordinator_audit import UNREAD_COLUMNS
    from eos_audit.schemas import COORDINATOR_RECORDS_COLUMNS

    assert UNREAD_COLUMNS.issubset({c.name for c in COORDINATOR_RECORDS_COLUMNS})


def test_the_replay_gets_the_records_whose_members_it_cannot_see(spark, tmp_path):
    """A streams group's record (type 17, skipped) reaches the replay with its group: that
    group's plain rewind stays LATE_COMMIT. A KIP-848 consumer group's epoch record (type 3) does
    not reach it, and says nothing of members: the group that only commits is a simple group,
    Empty, its rewind ADMIN_RESET. Both records stay skipped ones, as the run counts them."""
    streams = (i16(17) + string("streamed"), i16(0) + b"\x00")
    epoch = (i16(3) + string("simple"), i16(0) + b"\x00\x00\x00\x01")

    def commit_of(group: str, value: int) -> tuple[bytes, bytes]:
        return offset_commit_key(group, INPUT, 0), offset_commit_value(3, value, "", BASE_TS)

    log = [
        plain(0, streams, epoch),
        plain(2, commit_of("streamed", 50), commit_of("simple", 50)),
        plain(4, commit_of("streamed", 20), commit_of("simple", 20)),
    ]
    write_partition_dir(tmp_path / "export", 1, CONSUMER_OFFSETS, CO, *log)
    records = staged_records(read_coordinator_segments(spark, [str(tmp_path / "export")]))
    skipped = records.where("is_skipped AND _source_error IS NULL").orderBy("offset").collect()
    assert [(r["record_type"], r["group_id"]) for r in skipped] == [(17, "streamed"), (3, "simple")]
    events = offset_events(records)
    unread = events.where("record_type NOT IN (0, 1)").collect()
    assert [(r["offset"], r["record_type"], r["is_skipped"], r["group_id"]) for r in unread] == [
        (0, 17, True, "streamed")
    ]
    causes = {
        (r["group_id"], r["record_offset"]): [f["cause"] for f in r["findings"]]
        for r in replay_offsets(events).collect()
    }
    assert causes == {
        ("streamed", 2): [], ("simple", 3): [],
        ("streamed", 4): ["LATE_COMMIT"], ("simple", 5): ["ADMIN_RESET"],
    }  # fmt: skip


def test_a_record_that_did_not_decode_leaves_no_group_of_its_partition_simple(spark, tmp_path):
    """A GroupMetadata record cut short (quarantined) may have listed a group's members: the
    group that then commits lower is not taken for a simple one, its rewind stays LATE_COMMIT."""
    cut_short = (i16(2) + string("lost"), i16(3) + b"\x00")
    log = [
        plain(0, cut_short),
        plain(1, (offset_commit_key("lost", INPUT, 0), offset_commit_value(3, 50, "", BASE_TS))),
        plain(2, (offset_commit_key("lost", INPUT, 0), offset_commit_value(3, 20, "", BASE_TS))),
    ]
    write_partition_dir(tmp_path / "export", 1, CONSUMER_OFFSETS, CO, *log)
    records = staged_records(read_coordinator_segments(spark, [str(tmp_path / "export")]))
    assert [r["offset"] for r in records.where("_source_error IS NOT NULL").collect()] == [0]
    history = replay_offsets(offset_events(records)).collect()
    causes = {r["record_offset"]: [f["cause"] for f in r["findings"]] for r in history}
    assert causes == {1: [], 2: ["LATE_COMMIT"]}


def dump_2_4_batch(offset: int, record: str, producer_id: int = -1) -> str:
    """One batch of one record as kafka-dump-log.sh 2.4 prints it with the offsets decoder: a
    plain one, or of producer `producer_id`'s transaction (epoch 0)."""
    producer = (
        "producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false"
        if producer_id < 0
        else f"producerId: {producer_id} producerEpoch: 0 partitionLeaderEpoch: 0 "
        "isTransactional: true"
    )
    return (
        f"baseOffset: {offset} lastOffset: {offset} count: 1 baseSequence: 0 lastSequence: 0 "
        f"{producer} isControl: false position: {offset * 100} CreateTime: {BASE_TS + offset} "
        "size: 100 magic: 2 compresscodec: NONE crc: 1 isvalid: true\n"
        f"| offset: {offset} CreateTime: {BASE_TS + offset} keysize: 22 {record}\n"
    )


# A commit of 42, a tombstone (printed without its key: the offset expired), a restart at 7.
COMMIT_LINE = f"valuesize: 28 sequence: 0 headerKeys: [] key: offset::{GROUP}:{INPUT}:0 payload: "
TOMBSTONE_LINE = "valuesize: -1 sequence: 0 headerKeys: []"


def dump_2_4(producer_id: int = -1) -> str:
    """The partition's dump: the commits plain, or in producer `producer_id`'s transactions."""
    return (
        f"Dumping /logs/{CONSUMER_OFFSETS}-{CO}/00000000000000000000.log\nStarting offset: 0\n"
        + dump_2_4_batch(0, COMMIT_LINE + "42", producer_id)
        + dump_2_4_batch(1, TOMBSTONE_LINE)
        + dump_2_4_batch(2, COMMIT_LINE + "7", producer_id)
    )


def test_tombstones_the_text_prints_without_their_key_make_the_rewind_check_unverifiable(
    spark, tmp_path
):
    """Kafka removed the commit of 42 at the tombstone, so 7 is a restart from an expired offset;
    the text does not say which key the tombstone removed, so the replay keeps 42 and sees a
    rewind, of a group without membership records: a simple group, Empty, ADMIN_RESET. The
    partition is said UNVERIFIABLE for the check, naming the tombstones."""
    dump = tmp_path / "offsets-2.4.txt"
    dump.write_text(dump_2_4())
    records = staged_records(read_coordinator_dump_log(spark, [str(dump)]))
    history = replay_offsets(offset_events(records))
    rewinds = [(r["record_offset"], [f["cause"] for f in r["findings"]]) for r in history.collect()]
    assert rewinds == [(0, []), (2, ["ADMIN_RESET"])]
    (row,) = cleaned_offset_partitions(history, records, AuditConfig(), "run").collect()
    assert (row["finding_type"], row["cause"], row["partition"], row["evidence"]["check"]) == (
        "UNVERIFIABLE", "KEYLESS_TOMBSTONES", CO, "OFFSET_REWIND",
    )  # fmt: skip
    assert row["detail"] == (
        f"OFFSET_REWIND cannot be decided for {CONSUMER_OFFSETS}-{CO} (1 group(s) committed "
        "there): the export shows 1 tombstone(s) without their key, the first at offset 1 "
        "(kafka-dump-log.sh 2.4 and older prints none): which commits they removed is unknown, "
        "so a commit below a removed value, a restart from an expired offset, cannot be told "
        "from a rewind."
    )


def test_a_partition_is_whole_where_its_distinct_offsets_fill_it_from_zero(spark):
    """Offsets are counted once each, within and across the bitmaps of 32,768 offsets they are
    counted in: a record handed in twice fills no missing offset, and a record that did not
    decode (without an offset) is counted as undecoded, never as an offset."""

    def rows(partition: int, first: int, end: int, *, without: int = -1, twice: int = -1):
        offsets = spark.range(first, end).where(F.col("id") != without)
        offsets = offsets.unionByName(spark.range(twice, twice + 1)) if twice >= 0 else offsets
        return offsets.select(
            F.lit(CONSUMER_OFFSETS).alias("coordinator_topic"),
            F.lit(partition).alias("coordinator_partition"),
            F.col("id").alias("offset"),
            F.lit(False).alias("is_tombstone"),
            F.lit(1).alias("record_type"),
            F.lit(None).cast("string").alias("control_type"),
            F.lit(None).cast("string").alias(SOURCE_ERROR_COL),
        )

    undecoded = spark.createDataFrame(
        [(CONSUMER_OFFSETS, 3, None, False, None, None, "the record did not decode")],
        "coordinator_topic string, coordinator_partition int, offset long, is_tombstone boolean, "
        f"record_type int, control_type string, {SOURCE_ERROR_COL} string",
    )
    records = (
        rows(0, 0, 70_000)
        .unionByName(rows(1, 0, 70_000, without=40_001, twice=40_000))
        .unionByName(rows(2, 5, 11))
        .unionByName(rows(3, 0, 11))
        .unionByName(undecoded)
    )
    expected = spark.createDataFrame(
        [
            (0, 0, 69_999, True, 0, None, 0),
            (1, 0, 69_999, False, 0, None, 0),
            (2, 5, 10, False, 0, None, 0),
            (3, 0, 10, True, 0, None, 1),
        ],
        "coordinator_partition int, first_offset long, last_offset long, offsets_whole boolean, "
        "keyless_tombstones long, first_keyless_tombstone long, undecoded long",
    )
    assert_df_equality(offsets_logs(records), expected, ignore_row_order=True, ignore_nullable=True)


def dump_2_4_marker(offset: int) -> str:
    """Producer PID's COMMIT marker as kafka-dump-log.sh 2.4 prints it."""
    return (
        f"baseOffset: {offset} lastOffset: {offset} count: 1 baseSequence: -1 lastSequence: -1 "
        f"producerId: {PID} producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true "
        f"isControl: true position: {offset * 100} CreateTime: {BASE_TS + offset} size: 78 "
        "magic: 2 compresscodec: NONE crc: 1 isvalid: true\n"
        f"| offset: {offset} CreateTime: {BASE_TS + offset} keysize: 4 valuesize: 6 sequence: -1 "
        "headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 0\n"
    )


def test_a_one_to_one_groups_ranges_behind_keyless_tombstones_are_unverifiable(spark, tmp_path):
    """The same partition with the commits made in transactions: where the group's offset was
    deleted, and so where the next transaction's range began, the text does not say."""
    dump = tmp_path / "offsets-2.4.txt"
    dump.write_text(
        f"Dumping /logs/{CONSUMER_OFFSETS}-{CO}/00000000000000000000.log\nStarting offset: 0\n"
        + dump_2_4_batch(0, COMMIT_LINE + "42", PID)
        + dump_2_4_marker(1)
        + dump_2_4_batch(2, TOMBSTONE_LINE)
        + dump_2_4_batch(3, COMMIT_LINE + "7", PID)
        + dump_2_4_marker(4)
    )
    records = staged_records(read_coordinator_dump_log(spark, [str(dump)]))
    history = replay_offsets(offset_events(records))
    assert [(r["record_offset"], r["outcome"]) for r in history.collect()] == [
        (0, "APPLIED"), (3, "APPLIED"),
    ]  # fmt: skip
    nothing_audited = spark.createDataFrame([], output_records.OUTPUT_RECORD)
    config = AuditConfig().with_overrides(processing={"one_to_one_groups": [GROUP]})
    rows = send_offsets_to_transaction(
        records, history, output_records.transactions_of(nothing_audited),
        output_records.partition_summary_of(nothing_audited), config, "run",
    ).collect()  # fmt: skip
    assert [(r["finding_type"], r["cause"], r["topic"], r["partition"]) for r in rows] == [
        ("UNVERIFIABLE", "KEYLESS_TOMBSTONES", INPUT, 0)
    ]
    assert "(kafka-dump-log.sh 2.4 and older prints none)" in rows[0]["detail"]
