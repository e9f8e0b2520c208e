"""Parquet rows named by file and row: the text `<file>:row <n>` reaches findings and quarantine.

The reader carries (file id, row) instead of the text (eos_audit.sources.files.row_reference); these
tests check that what users read is the same text Spark gives a row's file (`_metadata.file_path`),
for a path with spaces, percent signs, `#` and non-ASCII letters, and that an input whose files'
ids collide falls back to the text.
"""

from __future__ import annotations

import zlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from eos_audit.audit import replay_plan
from eos_audit.audit.output_records import findings_of, quarantine_of
from eos_audit.config import AuditConfig
from eos_audit.schemas import RECORD_BATCH
from eos_audit.sources.files import row_reference
from eos_audit.sources.tabular.record_batches import read_tabular
from tests.builders import computed_once, data

# Row 1 leaves a sequence gap (SEQUENCE_GAP names it); row 2 has a negative offset (quarantined).
ROWS = [data(0, 3, seq=0), data(3, 2, seq=9), data(-5, 1, seq=20, pid=2)]


def _write(directory, name: str, rows: list[dict]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows, schema=to_arrow_schema(RECORD_BATCH))
    pq.write_table(table, directory / name)


@pytest.fixture()
def odd_dir(tmp_path):
    return tmp_path / "exports 50%20off #2" / "día"


def _spark_paths(spark, directory) -> list[str]:
    """What Spark itself names the files' rows, as the reader used to write it for every row."""
    rows = spark.read.parquet(str(directory)).select(
        F.concat(F.col("_metadata.file_path"), F.lit(":row "),
                 F.col("_metadata.row_index").cast("string")).alias("text")
    )  # fmt: skip
    return sorted(r.text for r in rows.collect())


def test_findings_and_quarantine_name_the_row_as_spark_names_its_file(spark, odd_dir):
    _write(odd_dir, "batches 1.parquet", [dict(r, source=None) for r in ROWS])
    texts = _spark_paths(spark, odd_dir)
    audited = replay_plan.audit(read_tabular(spark, [str(odd_dir)], "parquet"), AuditConfig(), "r")
    with computed_once(audited) as records:
        gap = findings_of(records).where(F.col("finding_type") == "SEQUENCE_GAP").collect()
        quarantined = quarantine_of(records).collect()
    assert [f.source for f in gap] == [next(t for t in texts if t.endswith(":row 1"))]
    assert [q.source for q in quarantined] == [next(t for t in texts if t.endswith(":row 2"))]
    assert '"source":"' + quarantined[0].source + '"' in quarantined[0].raw


def test_a_source_of_the_row_itself_wins_over_its_location(spark, tmp_path):
    own = [dict(r, source=f"export-{i}") for i, r in enumerate(ROWS)]
    _write(tmp_path / "in", "b.parquet", own)
    batches = read_tabular(spark, [str(tmp_path / "in")], "parquet")
    with computed_once(replay_plan.audit(batches, AuditConfig(), "r")) as records:
        gap = findings_of(records).where(F.col("finding_type") == "SEQUENCE_GAP").collect()
        quarantined = quarantine_of(records).collect()
    assert [f.source for f in gap] == ["export-1"]
    assert [q.source for q in quarantined] == ["export-2"]


def test_files_whose_ids_collide_are_named_by_text(spark, tmp_path, monkeypatch):
    for name in ("a.parquet", "b.parquet"):
        _write(tmp_path / "in", name, [dict(r, source=None) for r in ROWS[:2]])
    monkeypatch.setattr(row_reference, "file_ids", lambda paths: None)
    df = read_tabular(spark, [str(tmp_path / "in")], "parquet")
    assert row_reference.SOURCE_FILE not in df.columns
    assert sorted(r.source for r in df.collect()) == _spark_paths(spark, tmp_path / "in")


def test_file_ids_cover_both_spellings_of_a_local_path_and_refuse_a_collision():
    ids = row_reference.file_ids(["file:///d/a.parquet", "s3a://bucket/b.parquet"])
    assert set(ids.values()) == {"file:///d/a.parquet", "file:/d/a.parquet", "s3a://bucket/b.parquet"}
    assert all(ids[row_reference.zlib.crc32(path.encode())] == path for path in ids.values())
    assert row_reference.file_ids(["s3a://b/x", "s3a://b/y"], crc=lambda _: 7) is None
    assert row_reference.file_ids(["s3a://b/x", "s3a://b/x"], crc=lambda _: 7) == {7: "s3a://b/x"}


def test_an_export_with_its_own_source_file_column_keeps_it_and_is_located_by_text(spark, tmp_path):
    rows = [dict(r, source=None, source_file="mine") for r in ROWS[:2]]
    schema = to_arrow_schema(RECORD_BATCH).append(pa.field("source_file", pa.string()))
    (tmp_path / "in").mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp_path / "in" / "b.parquet")
    df = read_tabular(spark, [str(tmp_path / "in")], "parquet")
    assert row_reference.SOURCE_ROW not in df.columns
    assert sorted(r.source for r in df.collect()) == _spark_paths(spark, tmp_path / "in")


def test_the_driver_hands_out_a_unique_id_to_each_file_even_when_crcs_collide():
    # Two partition directories whose segment paths share a CRC-32 (found by search).
    first = "/export/broker-1/orders-29685295/00000000000000000000.log"
    second = "/export/broker-1/orders-32060020/00000000000000000000.log"
    assert zlib.crc32(first.encode()) == zlib.crc32(second.encode())
    ids = row_reference.unique_file_ids([first, second, first])
    assert ids == {first: zlib.crc32(first.encode()), second: zlib.crc32(first.encode()) + 1}
    assert row_reference.row_prefixes({ids[second]: second}, row_reference.BYTE_POSITION) == {
        ids[second]: second + ":"
    }
