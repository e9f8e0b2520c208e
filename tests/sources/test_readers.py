import json
import re
import zlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

from eos_audit.errors import InputNotFoundError, InputSchemaError
from eos_audit.schemas import RECORD_BATCH
from eos_audit.sources.formats import BATCH_FORMATS, detect_format
from eos_audit.sources.tabular.record_batches import read_tabular
from tests.builders import data, marker

ROWS = [data(0, 3, seq=0), data(3, 2, seq=3), marker(5, "COMMIT", coordinator_epoch=4)]


def _valid(df):
    return sorted(
        (r.base_offset, r.last_offset, r.last_sequence, r.control_type)
        for r in df.where("quarantine_reason IS NULL").collect()
    )


EXPECTED = [(0, 2, 2, None), (3, 4, 4, None), (5, 5, -1, "COMMIT")]


def test_parquet_with_narrow_integer_types(spark, tmp_path):
    table = pa.table({c: [r[c] for r in ROWS] for c in RECORD_BATCH.fieldNames()})
    table = table.set_column(1, "partition", table["partition"].cast(pa.int8()))
    table = table.set_column(5, "producer_epoch", table["producer_epoch"].cast(pa.int16()))
    pq.write_table(table, tmp_path / "b.parquet")
    df = read_tabular(spark, [str(tmp_path / "b.parquet")], "parquet")
    assert _valid(df) == EXPECTED


def test_parquet_rows_without_a_source_are_located_by_file_id_and_row(spark, tmp_path):
    rows = [dict(r, source=None) for r in ROWS]
    pq.write_table(
        pa.table({c: [r[c] for r in rows] for c in RECORD_BATCH.fieldNames()}),
        tmp_path / "b.parquet",
    )
    df = read_tabular(spark, [str(tmp_path)], "parquet")
    (path,) = df.inputFiles()
    file_id = zlib.crc32(("file:/" + path.removeprefix("file:///")).encode())
    located = sorted((r.source, r.source_file, r.source_row) for r in df.collect())
    assert located == [(None, file_id, 0), (None, file_id, 1), (None, file_id, 2)]


def test_json_lines_with_a_bad_value_and_a_malformed_line(spark, tmp_path):
    path = tmp_path / "b.jsonl"
    lines = [json.dumps(r) for r in ROWS]
    lines.append(json.dumps(dict(ROWS[0], base_offset="ten", source="bad")))
    lines.append("{not json")
    path.write_text("\n".join(lines) + "\n")
    df = read_tabular(spark, [str(path)], "json")
    assert _valid(df) == EXPECTED
    reasons = sorted(
        r.quarantine_reason for r in df.where("quarantine_reason IS NOT NULL").collect()
    )
    assert any(r.startswith("malformed JSON line") for r in reasons)
    assert "base_offset ten is not an integer" in reasons


def test_json_malformed_first_line_is_one_quarantined_row_with_its_line(spark, tmp_path):
    # Issue 12, case 4: the columns are taken from a well-formed line, not the first line.
    path = tmp_path / "b.jsonl"
    path.write_text("{not json\n\n" + "\n".join(json.dumps(r) for r in ROWS) + "\n")
    df = read_tabular(spark, [str(path)], "json")
    assert _valid(df) == EXPECTED
    (bad,) = df.where("quarantine_reason IS NOT NULL").collect()
    assert (bad.source, bad.quarantine_reason) == (f"{path}:line 1", "malformed JSON line")
    assert json.loads(bad.raw)["_malformed_line"] == "{not json"
    lines = sorted(r.source for r in df.where("quarantine_reason IS NULL").collect())
    assert lines == [f"test@{n}" for n in (0, 3, 5)]  # a source in the row wins over the line


def test_json_lines_without_a_source_name_file_and_line(spark, tmp_path):
    path = tmp_path / "b.jsonl"
    path.write_text("\r\n".join(json.dumps(dict(r, source=None)) for r in ROWS) + "\r\n")
    sources = sorted(r.source for r in read_tabular(spark, [str(path)], "json").collect())
    assert sources == [f"{path}:line {n}" for n in (1, 2, 3)]


def test_json_missing_required_column_fails_fast(spark, tmp_path):
    path = tmp_path / "b.jsonl"
    path.write_text(json.dumps({k: v for k, v in ROWS[0].items() if k != "base_sequence"}) + "\n")
    with pytest.raises(
        InputSchemaError, match=re.escape("missing required column(s) ['base_sequence']")
    ):
        read_tabular(spark, [str(path)], "json")


def test_csv(spark, tmp_path):
    path = tmp_path / "b.csv"
    names = RECORD_BATCH.fieldNames()
    text = ",".join(names) + "\n"
    for r in ROWS:
        text += ",".join("" if r[n] is None else str(r[n]).lower() for n in names) + "\n"
    path.write_text(text)
    assert _valid(read_tabular(spark, [str(path)], "csv")) == EXPECTED


def test_csv_missing_column_fails_fast(spark, tmp_path):
    path = tmp_path / "b.csv"
    path.write_text("topic,partition\nt,0\n")
    with pytest.raises(InputSchemaError, match="missing required column"):
        read_tabular(spark, [str(path)], "csv")


def test_csv_files_must_share_one_header(spark, tmp_path):
    names = RECORD_BATCH.fieldNames()
    (tmp_path / "a.csv").write_text(",".join(names) + "\n")
    (tmp_path / "b.csv").write_text(",".join(reversed(names)) + "\n" + ",".join(["1"] * 18) + "\n")
    with pytest.raises(Exception, match="CSV header does not conform to the schema"):
        read_tabular(spark, [str(tmp_path)], "csv").collect()


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"", "0 bytes, too short"), (b"topic,partition\nt,0\n", "no PAR1 marker")],
)
def test_a_file_that_is_not_parquet_is_named(spark, tmp_path, content, message):
    pq.write_table(pa.table({"topic": ["t"]}), tmp_path / "good.parquet")
    (tmp_path / "bad.parquet").write_bytes(content)
    with pytest.raises(InputSchemaError, match=re.escape(f"{tmp_path / 'bad.parquet'} is not a")):
        read_tabular(spark, [str(tmp_path)], "parquet")
    with pytest.raises(InputSchemaError, match=re.escape(message)):
        read_tabular(spark, [str(tmp_path / "bad.parquet")], "parquet")


def test_delta_table_written_by_delta_rs(spark, tmp_path):
    table = pa.table({c: [r[c] for r in ROWS] for c in RECORD_BATCH.fieldNames()})
    write_deltalake(str(tmp_path / "batches"), table)
    assert detect_format(str(tmp_path / "batches")) == "delta"
    assert _valid(read_tabular(spark, [str(tmp_path / "batches")], "delta")) == EXPECTED


def test_format_detection(tmp_path):
    (tmp_path / "x.parquet").write_bytes(b"")
    (tmp_path / "d.txt").write_text("Dumping x\n")
    (tmp_path / "seg" / "orders-0").mkdir(parents=True)
    (tmp_path / "seg" / "orders-0" / "00000000000000000000.log").write_bytes(b"")
    assert detect_format(str(tmp_path / "x.parquet")) == "parquet"
    assert detect_format(str(tmp_path / "d.txt")) == "dump-log"
    assert detect_format(str(tmp_path / "seg")) == "segments"
    with pytest.raises(InputNotFoundError, match="does not exist"):
        detect_format(str(tmp_path / "nope"))
    (tmp_path / "weird.bin").write_bytes(b"")
    with pytest.raises(InputNotFoundError, match="pass --batches-format"):
        detect_format(str(tmp_path / "weird.bin"))


def test_every_format_has_a_reader_and_detection_uses_the_registry(tmp_path):
    assert list(BATCH_FORMATS) == ["parquet", "json", "csv", "delta", "segments", "dump-log"]
    for fmt in BATCH_FORMATS.values():
        for suffix in fmt.suffixes:
            (tmp_path / f"x{suffix}").write_bytes(b"")
            assert detect_format(str(tmp_path / f"x{suffix}")) == fmt.name, suffix
