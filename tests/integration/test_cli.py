"""The CLI as users run it: real exit codes (delta-rs issue 2184 is why one runs as a real process).

The usage errors run as real processes; audits run `main()` in-process on the suite's session,
since a Spark start per test costs more than the rest of the test. The demo as a real process
(its exit code, summary and tables) is checked once, where it runs from the installed wheel
(tests/integration/test_wheel.py).
"""

import os
import subprocess
import sys
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

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


@pytest.fixture(autouse=True)
def _no_html_report(monkeypatch):
    """In-process audits skip the HTML report (tests/integration/test_report_cli.py has it)."""
    monkeypatch.setattr("eos_audit.cli._write_report", lambda *args, **kwargs: None)


@pytest.fixture(scope="module")
def lenient(tmp_path_factory):
    """The demo export quarantines 1 row of 62 (1.6%): allow 5% to see its findings decide."""
    conf = tmp_path_factory.mktemp("conf") / "lenient.toml"
    conf.write_text("[run]\nmax_quarantined_share = 0.05\n")
    return conf


# In-process: the same main() on the test session (Spark start-up is paid once per suite).
def test_audit_with_critical_findings_exits_1(spark, export, lenient, tmp_path, capsys, caplog):
    caplog.set_level("INFO", logger="eos_audit")
    code = main(
        ["audit", "--batches", str(export), "--warehouse", str(tmp_path / "wh"),
         "--conf", str(lenient)]
    )  # fmt: skip
    assert code == 1
    assert "SEQUENCE_GAP           CRITICAL      1" in capsys.readouterr().out
    assert "one shuffle" in caplog.text  # one log line per stage, with the run id


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


def test_clean_input_exits_0(spark, tmp_path, capsys):
    pq.write_table(pa.table({k: [v] for k, v in VALID.items()}), tmp_path / "clean.parquet")
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


def test_too_much_quarantined_exits_4_whatever_fail_on_says(spark, tmp_path, capsys):
    rows = {k: [v, v] for k, v in VALID.items()}
    rows["base_offset"], rows["last_offset"] = [0, -7], [0, -7]  # one of two rows impossible
    pq.write_table(pa.table(rows), tmp_path / "half.parquet")
    code = main(
        ["audit", "--batches", str(tmp_path / "half.parquet"), "--warehouse",
         str(tmp_path / "wh"), "--fail-on", "never"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 4
    assert "QUARANTINE_EXCEEDED: quarantined 1 of 2 record batches (50.0%)" in out
    # The share allowed, on the command line; the global options after the command too.
    code = main(
        ["audit", "--batches", str(tmp_path / "half.parquet"), "--warehouse",
         str(tmp_path / "wh"), "--fail-on", "never", "--max-quarantined-share", "0.5", "-q"]
    )  # fmt: skip
    assert code == 0
    assert "SUCCEEDED" in capsys.readouterr().out


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
        (
            ["audit", "--batches", "x", "--warehouse", "w", "--max-quarantined-share", "5"],
            "argument --max-quarantined-share: 5 is not from 0 to 1 (0.05 is 5%)",
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


# Queries that stop reading a Python worker's output before its end: on PySpark's own daemon,
# 9 BrokenPipeError traces for these nine queries (measured; 15 for fifteen).
_FIRST_AND_LIMIT = textwrap.dedent("""
    import sys
    from pyspark.sql import functions as F
    from eos_audit.session import get_spark
    spark = get_spark()
    df = spark.range(0, 1000000, numPartitions=4)
    def same(batches):
        yield from batches
    for _ in range(3):
        assert df.mapInArrow(same, df.schema).first()[0] == 0
        assert len(df.mapInArrow(same, df.schema).limit(3).collect()) == 3
        assert df.select(F.udf(lambda x: x + 1, "long")("id")).first()[0] == 1
    print(spark.conf.get("spark.python.daemon.module"))
    print(spark.conf.get("spark.sql.codegen.cache.maxEntries"))
""")


@pytest.mark.cost(15)  # a local session of its own, as the CLI starts it
def test_a_local_session_starts_with_its_settings_and_prints_no_worker_trace():
    done = run_cli(code=_FIRST_AND_LIMIT)
    assert done.returncode == 0, done.stderr[-3000:]
    # The second line: the generated classes' cache the session started with (a static setting).
    assert done.stdout.split() == ["eos_audit.python_daemon", "1000"]
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr[-3000:]


def test_internal_error_exits_3_and_says_it_is_a_bug(export):
    code = textwrap.dedent("""
        import sys
        import eos_audit.audit.pipeline as pipeline
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
