"""The one base of the file readers, driven without Spark (what a task runs is plain Python)."""

import pyarrow as pa
import pytest

from eos_audit.sources.files.file_source import (
    FileFormat,
    SplitSettings,
    byte_size,
    pack_files,
)
from eos_audit.sources.kafka.segments import SOURCE_ERROR_COL, KafkaSegmentsFormat
from tests.fixtures.segment_builder import data_batch


def rows(reader: FileFormat, files: list[dict]) -> list[dict]:
    """What the tasks of a read yield, each group of files as Spark would pack them."""
    out = []
    for group in pack_files(files, SplitSettings()):
        for batch in reader.read_files(group):
            assert batch.schema.names == reader.schema().names
            out += pa.Table.from_batches([batch]).to_pylist()
    return out


def segments(**options) -> KafkaSegmentsFormat:
    return KafkaSegmentsFormat(options)


def test_good_unreadable_and_unparseable_files(tmp_path, monkeypatch):
    good = tmp_path / "00000000000000000000.log"
    good.write_bytes(data_batch(0, 2) + data_batch(2, 1))
    missing = tmp_path / "00000000000000000007.log"
    files = [{"path": str(p), "topic": "t", "partition": 0} for p in (good, missing)]
    out = rows(segments(verify_crc="true"), files)
    assert [(r["base_offset"], r["crc_valid"], r[SOURCE_ERROR_COL]) for r in out[:2]] == [
        (0, True, None),
        (2, True, None),
    ]
    assert out[2]["source"] == f"{missing}:0"
    assert out[2][SOURCE_ERROR_COL] == "cannot read segment file: No such file or directory"

    def broken(*args, **kwargs):
        raise ValueError("a parser bug")

    monkeypatch.setattr("eos_audit.sources.kafka.segments.iter_segment", broken)
    (row,) = rows(segments(), files[:1])
    assert row["source"] == f"{good}:0"
    assert "could not parse the file (ValueError: a parser bug)" in row[SOURCE_ERROR_COL]


MB = 1 << 20


def test_small_files_share_partitions_and_large_ones_get_their_own():
    # Spark's own packing (FilePartition.getFilePartitions): 16 files of 10 kB on 4 cores are 4
    # partitions of 4, not 16 tasks (a Python task costs ~50 ms however small its input).
    small = [{"path": f"/x/{i:02d}.log", "bytes": 10_000} for i in range(16)]
    packed = pack_files(small, SplitSettings(min_partitions=4))
    assert [len(p) for p in packed] == [4, 4, 4, 4]
    assert sorted(f["path"] for p in packed for f in p) == [f["path"] for f in small]
    # Segments of 1 GB: one partition each (never split), the small ones packed together.
    large = [{"path": f"/y/{i}.log", "bytes": 1 << 30} for i in range(3)]
    packed = pack_files(large + small, SplitSettings(min_partitions=4))
    assert [len(p) for p in packed[:3]] == [1, 1, 1]
    assert sum(len(p) for p in packed[3:]) == 16 and len(packed) < 3 + 16


def test_a_file_without_a_listed_size_is_stat_ed_and_a_missing_one_weighs_nothing(tmp_path):
    big, small, gone = tmp_path / "big.log", tmp_path / "small.log", tmp_path / "gone.log"
    big.write_bytes(b"x" * (3 * MB))
    small.write_bytes(b"x" * MB)
    files = [{"path": str(p)} for p in (gone, small, big)]
    packed = pack_files(files, SplitSettings(max_partition_bytes=4 * MB, open_cost_bytes=MB))
    # big weighs 3 MB + 1 MB of open cost: alone; the missing file weighs its open cost only.
    assert [[f["path"] for f in p] for p in packed] == [[str(big)], [str(small), str(gone)]]
    assert pack_files([], SplitSettings()) == []


@pytest.mark.parametrize(
    ("text", "size"),
    [("128MB", 128 * MB), ("4194304b", 4 * MB), ("64m", 64 * MB), ("1048576", MB), ("2g", 2 << 30)],
)
def test_spark_byte_sizes(text, size):
    assert byte_size(text) == size


def test_a_setting_that_is_not_a_byte_size_is_refused():
    with pytest.raises(ValueError, match="not a byte size"):
        byte_size("lots")


def test_a_python_worker_freezes_its_heap_once_after_its_first_read(tmp_path, monkeypatch):
    # As after its first replay (tests/replay/test_kernel.py): PySpark's daemon collects
    # after every task, and a reader's modules must not be walked again each time.
    import gc

    from eos_audit import python_workers

    freezes = []
    real_freeze = gc.freeze
    monkeypatch.setattr(python_workers, "_frozen", set())
    monkeypatch.setattr(gc, "freeze", lambda: (freezes.append(1), real_freeze()))
    good = tmp_path / "00000000000000000000.log"
    good.write_bytes(data_batch(0, 2))
    gc.unfreeze()
    try:
        files = [{"path": str(good), "topic": "t", "partition": 0}]
        assert len(rows(segments(), files)) == 1 and len(freezes) == 1
        assert gc.get_freeze_count() > 0
        assert len(rows(segments(), files)) == 1 and len(freezes) == 1  # once a worker
    finally:
        gc.unfreeze()
