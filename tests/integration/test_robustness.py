"""Issue 12's eight cases, each with its exact input and the documented outcome.

In-process `main()` on the suite's Spark session (a subprocess per case would cost a Spark start
each); the exit code, the one-line message and the tables are what a user sees.
"""

import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eos_audit.cli import exit_code
from eos_audit.sinks.run_record import RunResult
from eos_audit.sinks.run_status import finished_status
from eos_audit.sources.evidence.acks import SOURCE_ERROR as ACKS_ERROR
from eos_audit.sources.evidence.acks import read_acks
from eos_audit.sources.kafka.dump_log import parse_dump_log
from eos_audit.sources.kafka.segments import SOURCE_ERROR_COL
from eos_audit.sources.tabular.record_batches import read_tabular
from tests.cli_runs import audit, no_html_report, sql  # noqa: F401 (an autouse fixture)

LONG_MAX = 9_223_372_036_854_775_807
VALID = {
    "topic": "t",
    "partition": 0,
    "base_offset": 0,
    "last_offset": 0,
    "producer_id": 5,
    "producer_epoch": 0,
    "base_sequence": 0,
    "is_transactional": False,
    "is_control": False,
}


def run_record(warehouse):
    (row,) = sql(
        warehouse,
        "audit_runs",
        "SELECT status, batches_read, batches_audited, batches_quarantined, error FROM t",
    )
    return row


def assert_one_sentence(err):
    assert err.startswith("eos-audit: error: ")
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and "at org.apache" not in err


@pytest.mark.slow  # a whole audit
def test_case1_long_max_last_offset_is_quarantined_not_fatal(spark, tmp_path, capsys):
    pq.write_table(pa.table({k: [v] for k, v in {**VALID, "last_offset": LONG_MAX}.items()}),
                   tmp_path / "b.parquet")  # fmt: skip
    code, out, err = audit(
        capsys, "--batches", tmp_path / "b.parquet", "--warehouse", tmp_path / "w"
    )
    assert code == 4, err
    assert "batches read 1 = audited 0 + quarantined 1" in out
    (q,) = sql(tmp_path / "w", "quarantine", "SELECT reason FROM t")
    assert f"last_offset {LONG_MAX} leaves no next offset" in q["reason"]
    assert run_record(tmp_path / "w")["status"] == "NOTHING_AUDITED"


@pytest.mark.slow  # a whole audit
def test_case3_partition_folder_without_log_files_and_case7_zero_length_segment(
    spark, tmp_path, capsys
):
    # One export, two partitions: one folder holds no .log file, the other a zero-length one.
    no_log = tmp_path / "export" / "1" / "orders-0"
    no_log.mkdir(parents=True)
    (no_log / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    empty = tmp_path / "export" / "1" / "orders-1"
    empty.mkdir(parents=True)
    (empty / "00000000000000000000.log").write_bytes(b"")
    code, out, err = audit(capsys, "--batches", tmp_path / "export", "--warehouse", tmp_path / "w")
    assert code == 4, err
    assert "batches read 0 = audited 0 + quarantined 0" in out
    assert "NOTHING_AUDITED: no record batch was audited" in out
    (q,) = sql(tmp_path / "w", "quarantine", "SELECT input, source, reason FROM t")
    assert q["input"] == "partition_directory" and q["source"] == str(no_log)
    assert "holds no .log segment file" in q["reason"]
    assert run_record(tmp_path / "w")["status"] == "NOTHING_AUDITED"


@pytest.mark.slow  # a whole audit
def test_case4_malformed_json_lines_are_quarantined_with_line_and_text(spark, tmp_path, capsys):
    path = tmp_path / "b.jsonl"
    bad = '{"topic": "t", "partition": 0, "base_offset": '
    lines = [bad, json.dumps(VALID), json.dumps({**VALID, "base_offset": 1, "last_offset": 1,
                                                 "base_sequence": 1}), bad + "9"]  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    code, out, err = audit(capsys, "--batches", path, "--warehouse", tmp_path / "w")
    assert code == 4, err  # 2 of 4 quarantined: more than 1%
    assert "batches read 4 = audited 2 + quarantined 2" in out
    rows = sql(tmp_path / "w", "quarantine", "SELECT source, reason, raw FROM t ORDER BY source")
    assert [r["source"] for r in rows] == [f"{path}:line 1", f"{path}:line 4"]
    assert {r["reason"] for r in rows} == {"malformed JSON line"}
    assert [json.loads(r["raw"])["_malformed_line"] for r in rows] == [bad, bad + "9"]
    assert len(sql(tmp_path / "w", "quarantine", "SELECT DISTINCT quarantine_id FROM t")) == 2
    assert run_record(tmp_path / "w")["status"] == "QUARANTINE_EXCEEDED"


@pytest.mark.parametrize("content", [b"", b"topic,partition\nt,0\n"], ids=["empty", "text"])
def test_case5_unreadable_parquet_exits_2_naming_the_file(spark, tmp_path, capsys, content):
    path = tmp_path / "b.parquet"
    path.write_bytes(content)
    code, _, err = audit(capsys, "--batches", path, "--warehouse", tmp_path / "w")
    assert code == 2
    assert_one_sentence(err)
    assert f"record-batch input {path} is not a Parquet file" in err


def test_case6_warehouse_that_is_a_file_or_unwritable_exits_2_before_reading(
    spark, tmp_path, capsys
):
    pq.write_table(pa.table({k: [v] for k, v in VALID.items()}), tmp_path / "b.parquet")
    (tmp_path / "wh").write_text("not a directory")
    code, _, err = audit(
        capsys, "--batches", tmp_path / "b.parquet", "--warehouse", tmp_path / "wh"
    )
    assert code == 2
    assert_one_sentence(err)
    assert f"--warehouse {tmp_path / 'wh'} is a file, not a directory" in err
    # Root may write anywhere on disk; /proc refuses everyone.
    code, _, err = audit(capsys, "--batches", tmp_path / "b.parquet", "--warehouse", "/proc/eos")
    assert code == 2
    assert_one_sentence(err)
    assert "--warehouse /proc/eos is not writable" in err


# Case 7's other inputs, below the CLI (a full run each would cost more than the suite can spend):
# the reader gives what the run would count, and the status and exit code follow from the counts.
def test_case7_csv_with_only_a_header_reads_no_batch(spark, tmp_path):
    (tmp_path / "b.csv").write_text(",".join(VALID) + "\n")
    batches = read_tabular(spark, [str(tmp_path / "b.csv")], "csv")
    assert batches.isEmpty()
    status, _ = finished_status(audited=0, quarantined=0, max_share=0.01)
    assert status == "NOTHING_AUDITED"


def test_case7_binary_file_read_as_dump_log_audits_nothing(tmp_path):
    data = random.Random(12).randbytes(64 * 1024)
    table = parse_dump_log(data, path="segment.txt", topic="t", partition=0)
    errors = table.column(SOURCE_ERROR_COL).to_pylist()
    assert len(errors) > 0 and all(e is not None for e in errors)  # nothing audited
    status, why = finished_status(audited=0, quarantined=len(errors), max_share=0.01)
    assert status == "NOTHING_AUDITED"
    assert why.startswith(f"no record batch was audited ({len(errors)} quarantined)")


@pytest.mark.parametrize(
    ("audited", "quarantined", "status", "code"),
    [
        (0, 0, "NOTHING_AUDITED", 4),
        (0, 798, "NOTHING_AUDITED", 4),
        (99, 1, "SUCCEEDED", 1),  # exactly 1% is within the share; the critical finding fails
        (98, 2, "QUARANTINE_EXCEEDED", 4),  # wins over the critical finding
        (100, 0, "SUCCEEDED", 1),
    ],
)
def test_case7_status_and_exit_code_of_a_finished_run(audited, quarantined, status, code):
    got, _ = finished_status(audited, quarantined, max_share=0.01)
    assert got == status
    result = RunResult(
        run_id="r", status=got, writer="delta-rs", findings_by_severity={"CRITICAL": 1}
    )
    assert exit_code(result, "critical") == code
    assert exit_code(result, "never") == (4 if code == 4 else 0)


def test_case8_warehouse_inside_an_input_directory_exits_2(spark, tmp_path, capsys):
    inputs = tmp_path / "in"
    inputs.mkdir()
    pq.write_table(pa.table({k: [v] for k, v in VALID.items()}), inputs / "b.parquet")
    code, _, err = audit(capsys, "--batches", inputs, "--warehouse", inputs / "wh")
    assert code == 2
    assert_one_sentence(err)
    assert f"--warehouse {inputs / 'wh'} is inside the input directory {inputs}" in err
    assert not (inputs / "wh").exists()


def test_case1_acknowledged_offsets_at_the_long_limit_are_quarantined(spark, tmp_path):
    # The audit computes an acknowledged batch's last offset (offset + record_count - 1): a row
    # whose sum leaves no next offset is quarantined where it enters, so no job can overflow.
    header = "source,topic,partition,producer_id,producer_epoch,base_sequence,record_count,"
    header += "offset,error,log_start_offset,event_time\n"
    rows = [
        f"edge,t,0,7,0,0,1,{LONG_MAX - 1},,0,2026-11-21T03:00:00Z",  # last offset MAX - 1: fine
        f"over,t,0,7,0,1,5,{LONG_MAX - 2},,0,2026-11-21T03:00:01Z",
        f"max,t,0,7,0,2,1,{LONG_MAX},,0,2026-11-21T03:00:02Z",
    ]
    (tmp_path / "acks.csv").write_text(header + "\n".join(rows) + "\n")
    acks = read_acks(spark, [str(tmp_path / "acks.csv")])
    reasons = {r["source"]: r[ACKS_ERROR] for r in acks.collect()}
    assert reasons["edge"] is None
    assert reasons["over"] == f"offset {LONG_MAX - 2} plus record_count 5 leaves no next offset"
    assert reasons["max"] == f"offset {LONG_MAX} plus record_count 1 leaves no next offset"


def test_case5_a_parquet_file_spark_cannot_read_exits_2_naming_it(spark, tmp_path, capsys):
    # The PAR1 markers are there, the footer is garbage: only Spark finds out, and says so in
    # hundreds of lines; the user gets one sentence naming the file.
    path = tmp_path / "b.parquet"
    path.write_bytes(b"PAR1" + bytes(range(256)) * 4 + b"\x10\x00\x00\x00PAR1")
    code, _, err = audit(capsys, "--batches", path, "--warehouse", tmp_path / "w")
    assert code == 2, err
    assert_one_sentence(err)
    assert "cannot read" in err and "b.parquet" in err
    assert run_record(tmp_path / "w")["status"] == "FAILED"
