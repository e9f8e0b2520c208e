"""`kafka-dump-log.sh` text of every Kafka version, and the round trip against segments."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from chispa import assert_df_equality

from eos_audit.sources.kafka.dump_log import UNKNOWN_LINE, parse_dump_log, read_dump_log
from eos_audit.sources.kafka.segments import SOURCE_ERROR_COL, read_segments
from tests.fixtures.segment_builder import (
    control_batch,
    data_batch,
    format_dump_log,
    generate_history,
    legacy_entry,
    write_partition_dir,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "dump_log"
COLS = ["base_offset", "last_offset", "producer_id", "producer_epoch", "base_sequence",
        "last_sequence", "record_count", "is_transactional", "is_control", "control_type",
        "coordinator_epoch", "partition_leader_epoch", "magic", "max_timestamp", "crc_valid"]


def rows(name: str, **kw) -> list[dict]:
    data = (FIXTURES / name).read_bytes()
    return parse_dump_log(data, path=name, **kw).to_pylist()


def fields(row: dict, *names: str) -> tuple:
    return tuple(row[n] for n in names)


def test_klog_transactional_3_0():
    got = rows("klog_txn_3_0.txt", topic="txn", partition=0)
    assert all(r[SOURCE_ERROR_COL] is None for r in got)
    assert [(r["topic"], r["partition"]) for r in got] == [("txn", 0)] * 4
    assert [fields(r, "base_offset", "last_offset", "base_sequence", "last_sequence",
                   "is_control", "control_type", "coordinator_epoch", "source") for r in got] == [
        (0, 1, 0, 1, False, None, None, "klog_txn_3_0.txt:line 2"),
        (3, 3, 3, 3, False, None, None, "klog_txn_3_0.txt:line 5"),
        (4, 4, -1, -1, True, "COMMIT", 4, "klog_txn_3_0.txt:line 6"),
        (5, 5, 4, 4, False, None, None, "klog_txn_3_0.txt:line 8"),
    ]
    assert got[0]["max_timestamp"] == 1632840910502 and got[0]["record_count"] == 2


def test_real_excerpts_of_other_versions():
    (pr,) = rows("kafka_pr22615_4_x.txt", topic="t", partition=1)
    assert fields(pr, "base_offset", "producer_id", "crc_valid", "max_timestamp") == (
        0, -1, True, 1781778768196)
    (rd,) = rows("librdkafka_3020_2_x.txt", topic="t", partition=1)
    assert fields(rd, "producer_id", "producer_epoch", "is_transactional", "base_sequence") == (
        4005, 16, True, 0)
    (kl,) = rows("klog_print_data_3_0.txt", topic="t", partition=1)
    assert fields(kl, "last_offset", "record_count", "producer_id") == (1, 2, -1)


def test_without_topic_the_rows_say_what_to_pass():
    got = rows("klog_txn_3_0.txt")
    assert len(got) == 4
    assert all("pass topic= and partition=" in r[SOURCE_ERROR_COL] for r in got)
    assert got[2]["base_offset"] == 4


def test_0_11_to_1_1_batch_lines():
    got = rows("v1_1_batches.txt")
    assert {(r["topic"], r["partition"]) for r in got} == {("orders.eu", 1)}
    assert [fields(r, "base_offset", "record_count", "is_control", "crc_valid", "magic")
            for r in got] == [
        (0, None, False, True, 2),
        (3, None, True, True, 2),  # no isControl printed: a txn batch with seq -1 is a marker
        (4, None, False, False, 2),
        (5, None, False, True, 1),
    ]
    assert got[2]["max_timestamp"] == 1530000000020  # LogAppendTime
    assert fields(got[3], "producer_id", "partition_leader_epoch") == (-1, -1)
    assert [r["record_count"] for r in rows("v2_0_batches.txt")] == [3, 1]


def test_0_11_to_2_1_deep_iteration_groups_records_by_position():
    got = rows("v2_0_deep.txt")
    assert {(r["topic"], r["partition"]) for r in got} == {("payments", 3)}
    assert [fields(r, "base_offset", "last_offset", "base_sequence", "last_sequence",
                   "record_count", "is_control", "control_type", "coordinator_epoch", "magic")
            for r in got] == [
        (100, 101, 40, 41, 2, False, None, None, 2),
        (102, 102, -1, -1, 1, True, "ABORT", 7, 2),
        (103, 103, -1, -1, 1, False, None, None, 2),
        (104, 104, -1, -1, None, False, None, None, 1),
    ]
    assert got[0]["max_timestamp"] == 1540000000005
    assert got[0]["source"] == "v2_0_deep.txt:line 3"


def test_2_2_to_2_7_and_2_8_record_lines():
    got = rows("v2_4_deep.txt")
    assert [fields(r, "control_type", "coordinator_epoch") for r in got] == [
        (None, None), ("COMMIT", 12), (None, None)]
    assert fields(got[2], "base_sequence", "last_sequence") == (2147483646, 1)
    got = rows("v2_8_deep.txt")
    assert [fields(r, "base_offset", "control_type", "coordinator_epoch", "partition_leader_epoch")
            for r in got] == [(0, None, None, 9), (2, "ABORT", 3, 9)]
    assert all(r[SOURCE_ERROR_COL] is None for r in got)


def test_3_x_legacy_records_invalid_bytes_and_noise():
    got = rows("v3_1_deep.txt")
    assert [fields(r, "base_offset", "magic", "max_timestamp", "crc_valid") for r in got[:3]] == [
        (0, 1, 1600000000000, True), (1, 0, -1, True), (2, 2, 1633000000002, False)]
    err = got[3]
    assert err["source"] == "v3_1_deep.txt:line 10"
    assert err[SOURCE_ERROR_COL] == (
        "kafka-dump-log.sh found 17 invalid bytes at the end of the segment "
        "(truncated or corrupt tail)"
    )
    assert fields(err, "topic", "partition") == ("legacy.topic", 0)
    assert len(got) == 4  # the non-consecutive offsets block is ignored

    got = rows("v3_2_deep.txt")
    assert [fields(r, "base_offset", "record_count", "control_type") for r in got] == [
        (0, 1, None), (1, 1, "COMMIT"), (2, 0, None)]


def test_print_data_log_payloads_never_reach_the_output():
    got = rows("v3_9_print_data.txt")
    assert [fields(r, "base_offset", "is_control", "control_type", "coordinator_epoch")
            for r in got] == [
        (50, False, None, None),  # marker-like text inside a payload of a data batch
        (51, True, "ABORT", 10),
        (52, True, "UNKNOWN(9)", None),
        (53, False, None, None),
    ]
    assert all(r[SOURCE_ERROR_COL] is None for r in got)
    text = repr(got) + repr(rows("klog_print_data_3_0.txt")) + repr(rows("librdkafka_3020_2_x.txt"))
    for payload in ("secret", "abc", "drfverv", "2020-08-06T15:42:51.182Z"):
        assert payload not in text


def test_excerpt_noise_becomes_error_rows_with_line_numbers():
    got = rows("excerpt_with_noise.txt")
    errors = [(r["source"], r[SOURCE_ERROR_COL]) for r in got if r[SOURCE_ERROR_COL]]
    assert [s for s, _ in errors] == [
        "excerpt_with_noise.txt:line 1",
        "excerpt_with_noise.txt:line 6",
    ]
    assert all("no known kafka-dump-log.sh format" in e for _, e in errors)
    assert "kafka-dump-log.sh --files" not in repr(got)  # the line's text is not copied
    assert [r["base_offset"] for r in got if not r[SOURCE_ERROR_COL]] == [1000, 1500]


def test_a_cut_batch_line_stands_for_a_batch_and_other_noise_for_its_bytes():
    text = (FIXTURES / "klog_txn_3_0.txt").read_bytes()
    batch_line = next(line for line in text.splitlines() if line.startswith(b"baseOffset"))
    got = parse_dump_log(
        text + b"$ ls\n" + batch_line[:40] + b"\n", path="f", topic="t", partition=0
    ).to_pylist()
    errors = [(r["source"], r[SOURCE_ERROR_COL]) for r in got if r[SOURCE_ERROR_COL]]
    lines = text.count(b"\n")
    assert errors == [
        (f"f:line {lines + 1}", f"{UNKNOWN_LINE} (5 bytes, content not copied)"),
        (f"f:line {lines + 2}", "batch line matches no known kafka-dump-log.sh format (cut or "
                                "damaged?)"),
    ]  # fmt: skip


def test_record_line_without_its_batch_line():
    text = (
        b"Dumping /x/t-0/00000000000000000000.log\n"
        b"| offset: 3 CreateTime: 1 keySize: -1 valueSize: 1 sequence: -1 headerKeys: []\n"
    )
    (row,) = parse_dump_log(text, path="f").to_pylist()
    assert row["source"] == "f:line 2" and "no batch line" in row[SOURCE_ERROR_COL]


# ------------------------------------------------------------------------------------------------
# Spark: all fixtures, and the round trip segments <-> text
# ------------------------------------------------------------------------------------------------
def test_read_dump_log_on_every_fixture(spark):
    df = read_dump_log(spark, [str(FIXTURES)], topic="forced", partition=9)
    got = df.collect()
    expected = sum(len(rows(f.name, topic="forced", partition=9))
                   for f in FIXTURES.glob("*.txt"))
    # README.md is not dump-log text: each of its lines is reported, nothing else is lost.
    readme_lines = len((FIXTURES / "README.md").read_text().splitlines())
    blank = sum(1 for line in (FIXTURES / "README.md").read_text().splitlines() if not line.strip())
    assert len(got) == expected + readme_lines - blank
    assert {(r.topic, r.partition) for r in got} == {("forced", 9)}


@pytest.fixture
def round_trip_dirs(tmp_path):
    hist = generate_history(60, seed=11, leader_epoch=2)
    extra = [
        data_batch(hist.next_offset, 4, compression_type=1, producer_id=9, producer_epoch=1,
                   base_sequence=2147483645, leader_epoch=3),
        legacy_entry(hist.next_offset + 4, magic=1),
        control_batch(hist.next_offset + 5, producer_id=9, producer_epoch=1, commit=False,
                      coordinator_epoch=6, leader_epoch=3),
    ]
    seg_root = tmp_path / "segments"
    write_partition_dir(seg_root, "b0", "orders.v2", 4, *hist.batches, *extra,
                        segment_bytes=3000)
    write_partition_dir(seg_root, "b0", "clicks", 0, *generate_history(15, seed=12).batches)
    text_root = tmp_path / "text"
    text_root.mkdir()
    for dirpath, _, names in os.walk(seg_root):
        for name in sorted(names):
            if name.endswith(".log"):
                path = os.path.join(dirpath, name)
                out = text_root / f"{os.path.basename(dirpath)}_{name}.txt"
                out.write_text(format_dump_log(path, Path(path).read_bytes()))
    return seg_root, text_root


def test_round_trip_segments_and_dump_log_text_agree(spark, round_trip_dirs):
    seg_root, text_root = round_trip_dirs
    from_segments = read_segments(spark, [str(seg_root)]).drop("source")
    from_text = read_dump_log(spark, [str(text_root)]).drop("source")
    assert from_text.filter(from_text[SOURCE_ERROR_COL].isNotNull()).count() == 0
    assert_df_equality(from_segments, from_text, ignore_row_order=True)
    assert from_segments.filter("is_control AND control_type IS NULL").count() == 0


def test_a_number_beyond_its_field_quarantines_its_line():
    # Found by fuzzing (issue 12): Arrow's cast of such a number raised and failed the task.
    line = (
        "baseOffset: 99999999999999999999 lastOffset: 1 count: 2 baseSequence: 2147483648 "
        "lastSequence: 1 producerId: 7 producerEpoch: 0 partitionLeaderEpoch: 0 "
        "isTransactional: false isControl: false position: 0 CreateTime: 1 size: 80 magic: 2 "
        "compresscodec: none crc: 1 isvalid: true"
    )
    table = parse_dump_log((line + "\n").encode(), path="d.txt", topic="t", partition=0)
    (row,) = table.to_pylist()
    assert row["source"] == "d.txt:line 1"
    assert row[SOURCE_ERROR_COL] == "number out of range for its field: baseSequence, baseOffset"
