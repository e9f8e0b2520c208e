"""Segment parsing against kafka-python's independent reader, and the `kafka_segments` source."""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path

import crc32c
import pytest
from chispa import assert_df_equality
from kafka.record.default_records import DefaultRecordBatch
from pyspark.sql import functions as F

from eos_audit.errors import InputNotFoundError
from eos_audit.schemas import RECORD_BATCH
from eos_audit.sources.kafka.segments import (
    SOURCE_ERROR_COL,
    parse_segment,
    read_segment_files,
    read_segments,
    segment_schema,
    source_schema,
)
from tests.fixtures.segment_builder import (
    BASE_TS,
    CANONICAL_FIELDS,
    MAX_INT,
    control_batch,
    control_record,
    data_batch,
    generate_history,
    kafka_python_view,
    legacy_entry,
    split_entries,
    write_partition_dir,
    write_tree,
)


def parse(data: bytes, **kw):
    return parse_segment(data, topic="t", partition=0, path="/p/t-0/x.log", **kw).to_pylist()


def canonical(row: dict) -> dict:
    return {k: row[k] for k in CANONICAL_FIELDS}


def mixed_segment() -> bytes:
    hist = generate_history(40, seed=7)
    extra = [
        data_batch(
            hist.next_offset,
            3,
            compression_type=1,
            producer_id=5,
            producer_epoch=1,
            base_sequence=MAX_INT - 1,
            leader_epoch=4,
        ),
        legacy_entry(hist.next_offset + 3, magic=1),
        legacy_entry(hist.next_offset + 4, magic=0),
        control_batch(
            hist.next_offset + 5,
            producer_id=5,
            producer_epoch=1,
            commit=False,
            coordinator_epoch=2**31 - 1,
            leader_epoch=4,
        ),
    ]
    return b"".join(hist.batches + extra)


# ------------------------------------------------------------------------------------------------
# Pure parser
# ------------------------------------------------------------------------------------------------
def test_every_field_matches_kafka_python():
    data = mixed_segment()
    rows = parse(data)
    entries = split_entries(data)
    assert len(rows) == len(entries)
    for (pos, entry), row in zip(entries, rows, strict=True):
        assert canonical(row) == kafka_python_view(entry), pos
        assert row["source"] == f"/p/t-0/x.log:{pos}"
        assert row[SOURCE_ERROR_COL] is None
    kinds = {(r["magic"], r["is_control"], r["control_type"]) for r in rows}
    assert (2, True, "COMMIT") in kinds and (2, True, "ABORT") in kinds
    assert (1, False, None) in kinds and (0, False, None) in kinds
    # gzip batch, wrapping sequence (§1.5 incrementSequence): MAX-1 + 2 → 0
    wrapped = [r for r in rows if r["base_sequence"] == MAX_INT - 1][0]
    assert wrapped["last_sequence"] == 0 and wrapped["record_count"] == 3


def test_sequence_wraparound_example_from_spec():
    # PSMT testProducerSequenceWithWrapAroundBatchRecord: base MAX-10, delta 20 → last 9.
    batch = data_batch(0, 21, producer_id=1, producer_epoch=0, base_sequence=MAX_INT - 10)
    (row,) = parse(batch)
    assert row["last_sequence"] == 9 == DefaultRecordBatch(batch).last_sequence


def test_control_batch_bytes_follow_the_spec():
    b = control_batch(
        42,
        producer_id=7,
        producer_epoch=3,
        commit=True,
        coordinator_epoch=9,
        leader_epoch=5,
        timestamp=BASE_TS,
    )
    record = bytes.fromhex(
        "20"  # length varint: 16
        "00"  # attributes
        "00"  # timestampDelta
        "00"  # offsetDelta
        "08"
        "0000"
        "0001"  # key length 4, version 0, type COMMIT
        "0c"
        "0000"
        "00000009"  # value length 6, version 0, coordinatorEpoch 9
        "00"  # headers
    )
    after_crc = (
        struct.pack(">h", 0x30)  # transactional | control
        + struct.pack(">i", 0)  # lastOffsetDelta
        + struct.pack(">qq", BASE_TS, BASE_TS)
        + struct.pack(">qhii", 7, 3, -1, 1)
        + record
    )
    expected = (
        struct.pack(">qiib", 42, len(after_crc) + 9, 5, 2)
        + struct.pack(">I", crc32c.crc32c(after_crc))
        + after_crc
    )
    assert b == expected
    assert len(b) == 78  # kafka_rules.md §4.3: a control batch is `size: 78`
    # kafka-python reads it back as a valid COMMIT marker.
    batch = DefaultRecordBatch(b)
    assert batch.validate_crc() and batch.is_control_batch and batch.is_transactional
    (rec,) = list(batch)
    assert rec.commit and rec.type == 1 and struct.unpack(">hi", rec.value) == (0, 9)
    (row,) = parse(b)
    assert (row["control_type"], row["coordinator_epoch"], row["base_offset"]) == ("COMMIT", 9, 42)


def test_control_batches_without_a_readable_marker():
    unknown = control_batch(0, producer_id=1, producer_epoch=0, control_type=3)
    empty = control_batch(1, producer_id=1, producer_epoch=0, records=[])
    later_ts = control_batch(
        2, producer_id=1, producer_epoch=0, records=[control_record(0, 4, timestamp_delta=300)]
    )
    rows = parse(unknown + empty + later_ts)
    assert [(r["control_type"], r["coordinator_epoch"]) for r in rows] == [
        ("UNKNOWN(3)", None),
        (None, None),  # emptied by compaction: no marker to read (§1.7)
        ("ABORT", 4),
    ]
    assert rows[1]["record_count"] == 0 and rows[1]["crc_valid"] is True


def test_truncated_tail_is_one_error_row():
    hist = generate_history(5, seed=1)
    data = b"".join(hist.batches)
    last_pos, last = split_entries(data)[-1]
    cut = data[: last_pos + 30]
    rows = parse(cut)
    assert [canonical(r) for r in rows[:-1]] == [
        kafka_python_view(e) for _, e in split_entries(data)[:-1]
    ]
    err = rows[-1]
    assert err[SOURCE_ERROR_COL] == (
        f"truncated batch at byte {last_pos}: header declares {len(last)} bytes, only 30 remain"
    )
    assert err["source"] == f"/p/t-0/x.log:{last_pos}"
    assert err["base_offset"] == struct.unpack_from(">q", last, 0)[0]
    assert (err["topic"], err["partition"], err["producer_id"]) == ("t", 0, None)


def test_flipped_byte_fails_crc_of_that_batch_only():
    hist = generate_history(6, seed=2)
    data = bytearray(b"".join(hist.batches))
    pos, entry = split_entries(bytes(data))[3]
    data[pos + len(entry) - 3] ^= 0xFF  # inside the records, covered by the CRC
    rows = parse(bytes(data))
    assert [r["crc_valid"] for r in rows] == [True, True, True, False, True, True]
    assert all(r[SOURCE_ERROR_COL] is None for r in rows)
    assert [r["crc_valid"] for r in parse(bytes(data), verify_crc=False)] == [None] * 6


def test_leader_epoch_and_base_offset_are_outside_the_crc():
    batch = data_batch(0, 2, producer_id=3, producer_epoch=0, base_sequence=0)
    (row,) = parse(batch)
    assert row["crc_valid"]
    restamped = struct.pack(">q", 999) + batch[8:12] + struct.pack(">i", 17) + batch[16:]
    (row,) = parse(restamped)
    assert (row["base_offset"], row["partition_leader_epoch"], row["crc_valid"]) == (999, 17, True)


def test_legacy_entry_between_v2_batches():
    data = data_batch(0, 2) + legacy_entry(2, magic=1, timestamp=BASE_TS + 5) + data_batch(3, 1)
    rows = parse(data)
    assert [r["magic"] for r in rows] == [2, 1, 2]
    legacy = rows[1]
    assert canonical(legacy) == {
        "base_offset": 2,
        "last_offset": 2,
        "producer_id": -1,
        "producer_epoch": -1,
        "base_sequence": -1,
        "last_sequence": -1,
        "record_count": None,
        "is_transactional": False,
        "is_control": False,
        "control_type": None,
        "coordinator_epoch": None,
        "partition_leader_epoch": -1,
        "magic": 1,
        "max_timestamp": BASE_TS + 5,
        "crc_valid": True,
    }


@pytest.mark.parametrize(
    ("garbage", "message"),
    [
        (
            struct.pack(">qi", 9, 20) + b"\x00\x00\x00\x00\x02" + b"\x01" * 60,
            "invalid batch length 20 at byte {p} (magic 2 needs at least 49): "
            "cannot frame the rest of the file; {rem} bytes skipped",
        ),
        (
            struct.pack(">qi", 9, 2_000_000_000) + b"\x00\x00\x00\x00\x02" + b"\x07" * 60,
            "invalid batch length 2000000000 at byte {p}: beyond the end of the file "
            "({rem} bytes remain); {rem} bytes skipped",
        ),
        (
            struct.pack(">qi", 9, 60) + b"\x00\x00\x00\x00\x07" + b"\x07" * 60,
            "unknown magic 7 at byte {p}: cannot frame the rest of the file; {rem} bytes skipped",
        ),
    ],
)
def test_garbage_stops_the_file_with_the_position(garbage, message):
    good = data_batch(0, 1) + data_batch(1, 2)
    after = data_batch(3, 1)  # unreachable: there is no way to resync a Kafka log
    rows = parse(good + garbage + after)
    assert len(rows) == 3
    p = len(good)
    assert rows[-1][SOURCE_ERROR_COL] == message.format(p=p, rem=len(garbage) + len(after))
    assert rows[-1]["source"] == f"/p/t-0/x.log:{p}"
    assert rows[-1]["base_offset"] is None  # garbage: nothing in it is trusted


def test_zero_tail_is_ignored_only_when_all_zero():
    data = data_batch(0, 1) + data_batch(1, 1)
    assert len(parse(data + b"\x00" * 4096)) == 2
    rows = parse(data + b"\x00" * 4096 + b"\x01")
    assert len(rows) == 3
    assert rows[-1][SOURCE_ERROR_COL].startswith(f"invalid batch length 0 at byte {len(data)}")


def test_empty_input():
    assert parse(b"") == []


# ------------------------------------------------------------------------------------------------
# Through Spark
# ------------------------------------------------------------------------------------------------
def expected_rows(tree_root) -> list[dict]:
    rows = []
    for dirpath, _, names in os.walk(tree_root):
        for name in names:
            if not name.endswith(".log"):
                continue
            path = os.path.join(dirpath, name)
            topic, part = os.path.basename(dirpath).rsplit("-", 1)
            data = Path(path).read_bytes()
            for pos, entry in split_entries(data):
                rows.append(
                    {
                        "topic": topic,
                        "partition": int(part),
                        **kafka_python_view(entry),
                        "source": f"{path}:{pos}",
                        SOURCE_ERROR_COL: None,
                    }
                )
    return rows


def test_read_segments_multi_broker_tree_matches_kafka_python(spark, tmp_path):
    tree = write_tree(tmp_path / "export", batches_per_partition=25, segment_bytes=4000, seed=3)
    before = sorted(p for p in (tmp_path / "export").rglob("*"))
    df = read_segments(spark, [str(tmp_path / "export")])
    assert df.schema.names == [*RECORD_BATCH.names, SOURCE_ERROR_COL]
    assert [f.dataType for f in df.schema.fields[:-1]] == [f.dataType for f in RECORD_BATCH.fields]
    expected = spark.createDataFrame(expected_rows(tmp_path / "export"), source_schema())
    assert expected.count() == tree.total_batches
    assert_df_equality(df, expected, ignore_row_order=True, ignore_nullable=True)
    # Read-only: nothing written next to the inputs.
    assert sorted(p for p in (tmp_path / "export").rglob("*")) == before
    # More small segment files than the session runs tasks at once: read in at most that many
    # tasks (its default parallelism), not one task per file (file_source.pack_files).
    files = len(list((tmp_path / "export").rglob("*.log")))
    tasks = df.select(F.spark_partition_id().alias("task")).distinct().count()
    assert files > spark.sparkContext.defaultParallelism >= tasks


def test_read_segments_reports_bad_files_and_keeps_good_ones(spark, tmp_path):
    hist = generate_history(8, seed=4)
    pdir = write_partition_dir(tmp_path, 1, "orders", 0, *hist.batches, zero_tail=1000)
    bad = write_partition_dir(tmp_path, 2, "orders", 0, *hist.batches)
    log_file = next(bad.glob("*.log"))
    log_file.write_bytes(log_file.read_bytes()[:-10])
    rows = read_segments(spark, [str(tmp_path)], verify_crc=False).collect()
    errors = [r for r in rows if r[SOURCE_ERROR_COL] is not None]
    assert len(errors) == 1
    assert errors[0].source.startswith(str(log_file) + ":")
    assert "truncated batch at byte" in errors[0][SOURCE_ERROR_COL]
    assert len(rows) == 8 + 8  # 8 good + 7 good + 1 error row
    assert all(r.crc_valid is None for r in rows)
    assert str(pdir) in {os.path.dirname(r.source.rsplit(":", 1)[0]) for r in rows}


def test_read_segments_nothing_found(spark, tmp_path):
    with pytest.raises(InputNotFoundError, match=re.escape("no Kafka partition directory")):
        read_segments(spark, [str(tmp_path)])
    with pytest.raises(InputNotFoundError, match=re.escape("input path does not exist")):
        read_segments(spark, [str(tmp_path / "missing")])


def test_the_reader_reads_no_file_and_unreadable_files_without_failing(spark, tmp_path):
    # Issue 12, case 3: a read of no segment was once an AttributeError. Now an empty DataFrame
    # with the reader's schema.
    nothing = read_segment_files(spark, [])
    assert nothing.collect() == [] and nothing.schema == segment_schema()
    folder = tmp_path / "orders-0" / "00000000000000000000.log"
    folder.mkdir(parents=True)  # a directory where a segment should be: cannot be read
    empty = tmp_path / "orders-0" / "00000000000000000009.log"
    empty.write_bytes(b"")
    files = [{"path": str(p), "topic": "orders", "partition": 0} for p in (folder, empty)]
    (row,) = read_segment_files(spark, files).collect()
    assert row.source == f"{folder}:0"
    assert row[SOURCE_ERROR_COL].startswith("cannot read segment file: Is a directory")
