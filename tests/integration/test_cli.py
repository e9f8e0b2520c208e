"""The CLI as users run it: a real process, real exit codes (delta-rs issue 2184 is why)."""

import os
import re
import subprocess
import sys
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder

from eos_audit.cli import _fails, main
from eos_audit.demo import write_demo_export

pytestmark = pytest.mark.slow


def run_cli(*args, code: str | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    command = [sys.executable, "-c", code] if code else [sys.executable, "-m", "eos_audit.cli"]
    return subprocess.run(
        [*command, *args], capture_output=True, text=True, env=env, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    path, _ = write_demo_export(tmp_path_factory.mktemp("export"))
    return path


def test_demo_exits_0_prints_the_summary_and_writes_tables(tmp_path):
    result = run_cli("demo", "--warehouse", str(tmp_path / "wh"), "--export", str(tmp_path / "x"))
    assert result.returncode == 0, result.stderr
    assert re.search(r"^DUPLICATE_BATCH +CRITICAL +1$", result.stdout, re.MULTILINE)
    assert re.search(r"^ACKED_WRITE_LOST +CRITICAL +1$", result.stdout, re.MULTILINE)
    assert re.search(r"^LIST_OFFSETS_REGRESSION +WARNING +1$", result.stdout, re.MULTILINE)
    assert "batches read 62 = audited 61 + quarantined 1" in result.stdout
    assert re.search(
        rf"^  findings +{re.escape(str(tmp_path / 'wh' / 'findings'))}$",
        result.stdout,
        re.MULTILINE,
    )
    assert not (tmp_path / "wh" / "_staging").exists()
    table = DeltaTable(str(tmp_path / "wh" / "findings"))
    rows = pa.table(
        QueryBuilder().register("f", table).execute("SELECT count(*) AS n FROM f").read_all()
    ).to_pylist()
    assert rows == [{"n": 9}]  # 6 faults in the log, 3 in the client-side evidence


def test_audit_with_critical_findings_exits_1(export, tmp_path):
    result = run_cli("audit", "--batches", str(export), "--warehouse", str(tmp_path / "wh"))
    assert result.returncode == 1, result.stderr
    assert "SEQUENCE_GAP           CRITICAL      1" in result.stdout
    assert "one shuffle" in result.stderr  # one log line per stage, with the run id


# In-process: the same main() on the test session (Spark start-up is paid once per suite).
def test_fail_on_never_exits_0(spark, export, tmp_path, capsys):
    assert (
        main(
            [
                "audit",
                "--batches",
                str(export),
                "--warehouse",
                str(tmp_path / "wh"),
                "--fail-on",
                "never",
            ]
        )
        == 0
    )


def test_clean_input_exits_0(spark, tmp_path, capsys):
    rows = {
        "topic": ["t"],
        "partition": [0],
        "base_offset": [0],
        "last_offset": [0],
        "producer_id": [5],
        "producer_epoch": [0],
        "base_sequence": [0],
        "is_transactional": [False],
        "is_control": [False],
    }
    pq.write_table(pa.table(rows), tmp_path / "clean.parquet")
    code = main(
        [
            "audit",
            "--batches",
            str(tmp_path / "clean.parquet"),
            "--warehouse",
            str(tmp_path / "wh"),
            "--fail-on",
            "warning",
        ]
    )
    assert code == 0
    assert "no findings" in capsys.readouterr().out


def test_missing_column_exits_2_naming_it(spark, tmp_path, capsys):
    pq.write_table(pa.table({"topic": ["t"], "partition": [0]}), tmp_path / "bad.parquet")
    code = main(
        ["audit", "--batches", str(tmp_path / "bad.parquet"), "--warehouse", str(tmp_path / "wh")]
    )
    assert code == 2
    assert "missing required column(s) ['base_offset'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["audit", "--batches", "/nonexistent/x.parquet", "--warehouse", "w"],
            "input /nonexistent/x.parquet does not exist",
        ),
        (["audit", "--warehouse", "w"], "the following arguments are required: --batches"),
        (
            ["audit", "--batches", "x", "--warehouse", "w", "--fail-on", "loud"],
            "invalid choice: 'loud'",
        ),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (
            ["audit", "--batches", __file__, "--warehouse", "w", "--acks", "/nonexistent/a.jsonl"],
            "input /nonexistent/a.jsonl does not exist",
        ),
        (
            ["audit", "--batches", __file__, "--warehouse", "w", "--export-time", "last night"],
            "--export-time 'last night' is not an ISO-8601 time",
        ),
    ],
)
def test_bad_usage_and_input_exit_2_without_a_trace(args, message):
    result = run_cli(*args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_config_exits_2(export, tmp_path):
    conf = tmp_path / "c.toml"
    conf.write_text("[cluster]\nkafka_verison = '3.7'\n")
    result = run_cli("audit", "--batches", str(export), "--warehouse", "w", "--conf", str(conf))
    assert result.returncode == 2
    assert "unknown key(s) ['kafka_verison'] in [cluster]" in result.stderr


def test_internal_error_exits_3_and_says_it_is_a_bug(export):
    code = textwrap.dedent("""
        import sys
        import eos_audit.pipeline as pipeline
        from eos_audit import cli
        import eos_audit.session as session
        def boom(*a, **k):
            raise ZeroDivisionError("simulated")
        session.get_spark = boom
        sys.exit(cli.main(sys.argv[1:]))
    """)
    result = run_cli("audit", "--batches", str(export), "--warehouse", "w", code=code)
    assert result.returncode == 3
    assert "internal error: ZeroDivisionError: simulated" in result.stderr
    assert "This is a bug in eos-audit" in result.stderr


@pytest.mark.parametrize(
    ("by_severity", "fail_on", "fails"),
    [
        ({"CRITICAL": 1}, "critical", True),
        ({"ERROR": 2}, "critical", False),
        ({"ERROR": 2}, "error", True),
        ({"WARNING": 1}, "error", False),
        ({"WARNING": 1}, "warning", True),
        ({"INFO": 9}, "warning", False),
        ({"CRITICAL": 1}, "never", False),
    ],
)
def test_fail_on_levels(by_severity, fail_on, fails):
    assert _fails(by_severity, fail_on) is fails
