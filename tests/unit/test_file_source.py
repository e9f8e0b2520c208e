"""The one base of the Kafka data sources, driven without Spark (its reader is plain Python)."""

import json

import pyarrow as pa

from eos_audit.sources.files.file_source import FileDataSource, FilesPartition
from eos_audit.sources.kafka.segments import SOURCE_ERROR_COL, KafkaSegmentsDataSource
from tests.fixtures.segment_builder import data_batch


def rows(source: FileDataSource) -> list[dict]:
    reader = source.reader(source.schema())
    out = []
    for partition in reader.partitions():
        for batch in reader.read(partition):
            out += pa.Table.from_batches([batch]).to_pylist()
    return out


def segments(files, **options):
    return KafkaSegmentsDataSource({"files": json.dumps(files), **options})


def test_no_files_is_one_empty_partition():
    # Issue 12, case 3: Spark reads a bare InputPartition when a reader has none.
    reader = segments([]).reader(segments([]).schema())
    (partition,) = reader.partitions()
    assert isinstance(partition, FilesPartition) and list(reader.read(partition)) == []


def test_good_unreadable_and_unparseable_files(tmp_path, monkeypatch):
    good = tmp_path / "00000000000000000000.log"
    good.write_bytes(data_batch(0, 2) + data_batch(2, 1))
    missing = tmp_path / "00000000000000000007.log"
    files = [{"path": str(p), "topic": "t", "partition": 0} for p in (good, missing)]
    out = rows(segments(files, verify_crc="true"))
    assert [(r["base_offset"], r["crc_valid"], r[SOURCE_ERROR_COL]) for r in out[:2]] == [
        (0, True, None),
        (2, True, None),
    ]
    assert out[2]["source"] == f"{missing}:0"
    assert out[2][SOURCE_ERROR_COL] == "cannot read segment file: No such file or directory"

    def broken(*args, **kwargs):
        raise ValueError("a parser bug")

    monkeypatch.setattr("eos_audit.sources.kafka.segments.iter_segment", broken)
    (row,) = rows(segments(files[:1]))
    assert row["source"] == f"{good}:0"
    assert "could not parse the file (ValueError: a parser bug)" in row[SOURCE_ERROR_COL]
