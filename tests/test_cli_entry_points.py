import ast
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.jars import DELTA_SPARK

REPO = Path(__file__).resolve().parents[1]


def _command(*args: str) -> str:
    result = subprocess.run(
        ["bash", str(REPO / "spark-submit.sh"), "--print-command", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


def test_spark_submit_ships_the_package_and_delta_and_passes_arguments_through():
    command = _command("audit", "--batches", "/exports/kafka", "--warehouse", "/lake")
    # The version tests/jars.py fetches (Maven Central serves no 4.4.1: see spark-submit.sh).
    assert f"--packages io.delta:delta-spark_2.13:{DELTA_SPARK} " in command
    assert "--exclude-packages org.scala-lang:scala-library" in command  # Spark ships its own
    assert "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension" in command
    assert "eos_audit.zip" in command
    assert command.rstrip().endswith(
        "jobs/spark_submit_job.py audit --batches /exports/kafka --warehouse /lake"
    )


def test_spark_submit_without_delta_uses_no_packages():
    command = _command("--no-delta", "audit", "--batches", "x", "--warehouse", "y")
    assert "--packages" not in command and "DeltaSparkSessionExtension" not in command


def test_spark_submit_usage_error():
    result = subprocess.run(
        ["bash", str(REPO / "spark-submit.sh")], capture_output=True, text=True, check=False
    )
    assert result.returncode == 2 and "usage:" in result.stderr


def test_spark_submit_job_is_a_thin_wrapper_of_the_cli():
    tree = ast.parse((REPO / "jobs" / "spark_submit_job.py").read_text())
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert [(i.module, [a.name for a in i.names]) for i in imports] == [("eos_audit.cli", ["main"])]


def test_databricks_notebook_is_notebook_source_with_widgets():
    text = (REPO / "jobs" / "databricks_notebook.py").read_text()
    assert text.startswith("# Databricks notebook source\n")
    assert "# COMMAND ----------" in text
    ast.parse(text)  # valid Python
    # Its widgets: one per audit option, from the table the CLI reads (eos_audit.options), and
    # the catalog schema (test_databricks_notebook runs the cell that makes them).
    assert "for option in AUDIT_OPTIONS:" in text
    assert '"catalog_schema"' in text


def test_run_sh_says_what_to_install_when_java_is_too_old(tmp_path):
    fake = tmp_path / "jdk" / "bin"
    fake.mkdir(parents=True)
    (fake / "java").write_text("#!/bin/sh\necho 'openjdk version \"11.0.21\" 2023-10-17' >&2\n")
    (fake / "java").chmod(0o755)
    result = subprocess.run(
        ["bash", str(REPO / "run.sh"), "test"],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin", "JAVA_HOME": str(tmp_path / "jdk")},
    )
    assert result.returncode == 2
    assert "Java 17 or newer is required by Spark; found '11.0.21'" in result.stderr
    assert "openjdk-17" in result.stderr


def test_run_sh_rejects_an_unknown_command():
    result = subprocess.run(
        ["bash", str(REPO / "run.sh"), "frobnicate"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 2 and "usage: ./run.sh demo|test|audit|bench" in result.stderr


def _ensure_browser(tmp_path, uid: str, apt_exit: int):
    """Run run.sh's ensure_browser with fake id/apt-get commands; return (stderr, apt calls)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "apt-calls"
    (bin_dir / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    (bin_dir / "apt-get").write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexit {apt_exit}\n')
    for tool in ("id", "apt-get"):
        (bin_dir / tool).chmod(0o755)
    function = re.search(
        r"^ensure_browser\(\) \{.*?^\}", (REPO / "run.sh").read_text(), re.S | re.M
    )
    result = subprocess.run(
        [
            shutil.which("bash"),
            "-c",
            f"set -euo pipefail\n{function.group(0)}\nensure_browser\necho done",
        ],
        capture_output=True,
        text=True,
        check=True,
        # Only the fakes on PATH: no chromium, whatever the machine has.
        env={"PATH": str(bin_dir)},
    )
    assert result.stdout == "done\n"
    return result.stderr, calls.read_text().splitlines() if calls.exists() else []


def test_run_sh_installs_the_browser_only_as_root(tmp_path):
    stderr, calls = _ensure_browser(tmp_path, uid="1000", apt_exit=0)
    assert (stderr, calls) == ("", [])


def test_run_sh_tolerates_a_failed_browser_install(tmp_path):
    stderr, calls = _ensure_browser(tmp_path, uid="0", apt_exit=100)
    assert calls == ["update -qq"]
    assert "could not install chromium; the browser test will be skipped" in stderr


def test_spark_submit_help_answers_without_spark_submit_or_the_network(tmp_path):
    # spark-submit would resolve --packages from Maven first: help must not start it at all.
    fake = tmp_path / "spark-submit"
    fake.write_text("#!/bin/sh\necho 'spark-submit was started' >&2\nexit 99\n")
    fake.chmod(0o755)
    for args in (["--help"], ["audit", "--help"]):
        result = subprocess.run(
            ["bash", str(REPO / "spark-submit.sh"), *args],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "SPARK_SUBMIT": str(fake)},
        )
        assert result.returncode == 0, result.stderr
        assert "usage: ./spark-submit.sh" in result.stdout
        assert "usage: eos-audit" in result.stdout
        assert "spark-submit was started" not in result.stderr


@pytest.mark.parametrize(("demo_exit", "run_sh_exit"), [(0, 0), (1, 0), (2, 2), (3, 3), (4, 4)])
def test_run_sh_demo_ends_0_on_the_demos_findings_code_only(tmp_path, demo_exit, run_sh_exit):
    # `eos-audit demo` exits as a real run over its export would (1: its planted CRITICAL
    # findings); the command that sets up and shows the demo ends 0 then, and fails otherwise.
    for name in ("run.sh", "pyproject.toml", "constraints.txt"):
        shutil.copy2(REPO / name, tmp_path / name)
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for tool, body in (("python", "exit 0"), ("eos-audit", f'echo "demo $*"; exit {demo_exit}')):
        (bin_dir / tool).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / tool).chmod(0o755)
    stamp = subprocess.run(
        "cat pyproject.toml constraints.txt | cksum", shell=True, cwd=tmp_path,
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    (tmp_path / ".venv" / ".eos-audit-installed").write_text(stamp)
    result = subprocess.run(
        ["bash", str(tmp_path / "run.sh"), "demo", "--warehouse", "w"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.stdout == "demo demo --warehouse w\n", result.stderr
    assert result.returncode == run_sh_exit


# spark-submit as far as the wrapper sees it: Spark's PythonRunner runs the job with the driver's
# stderr merged into its stdout, then spark-submit exits with the driver's code, unless
# FAKE_SUBMIT_EXIT says what it exits with after the job (a JVM that fails at shutdown).
FAKE_SPARK_SUBMIT = """#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in *spark_submit_job.py) break ;; esac; shift; done
"$PYSPARK_PYTHON" "$@" 2>&1
code=$?
exit "${FAKE_SUBMIT_EXIT:-$code}"
"""
# The CLI stand-in the fake runs the real job with: a log line, a summary, the code it is told.
STUB_CLI = """import os, signal, sys

def main():
    print("INFO eos_audit.audit.pipeline: run stub: writing the tables", file=sys.stderr)
    print("eos-audit run stub: SUCCEEDED")
    if sys.argv[1] == "killed":  # the Python driver killed (OOM killer, an operator)
        os.kill(os.getpid(), signal.SIGKILL)
    return int(sys.argv[1])
"""


def _wrapper(tmp_path, fake: str, *args: str, pythonpath: Path | None = None, **env: str):
    """Run spark-submit.sh with `fake` as spark-submit; the stub CLI unless `pythonpath`."""
    submit = tmp_path / "spark-submit"
    submit.write_text(fake)
    submit.chmod(0o755)
    stub = tmp_path / "stub"
    (stub / "eos_audit").mkdir(parents=True, exist_ok=True)
    (stub / "eos_audit" / "__init__.py").write_text("")
    (stub / "eos_audit" / "cli.py").write_text(STUB_CLI)
    return subprocess.run(
        ["bash", str(REPO / "spark-submit.sh"), "--no-delta", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={
            **os.environ,
            "SPARK_SUBMIT": str(submit),
            "PYTHONPATH": str(pythonpath or stub),
            **env,
        },
    )


def test_spark_submit_failing_before_the_job_exits_3_not_the_findings_code(tmp_path):
    # What an unresolvable --packages or a JVM that cannot start looks like: spark-submit's exit 1.
    fake = (
        "#!/bin/sh\necho ':: problems summary ::' >&2\n"
        "echo 'Exception in thread main' >&2\nexit 1\n"
    )
    result = _wrapper(tmp_path, fake, "audit", "--batches", "b", "--warehouse", "w")
    assert result.returncode == 3, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[:2] == [":: problems summary ::", "Exception in thread main"]
    assert lines[2:] == [
        "spark-submit.sh: error: spark-submit failed (exit 1) before eos-audit finished; its "
        "output above says why. Exit 3, not eos-audit's findings code."
    ]


@pytest.mark.parametrize(
    ("job_exit", "submit_exit", "wrapper_exit"),
    [
        ("0", "", 0),
        ("1", "", 1),  # findings: the only way the wrapper ends 1
        ("4", "", 4),
        ("2", "", 2),
        # The job had finished (tables and audit_runs written) when spark-submit failed: the
        # night's outcome is the job's, whatever the JVM's shutdown then returned.
        ("0", "1", 0),
        ("1", "0", 1),
        ("killed", "", 3),  # the driver killed: no outcome to hand back
    ],
)
def test_spark_submit_sh_exits_with_the_jobs_code(tmp_path, job_exit, submit_exit, wrapper_exit):
    result = _wrapper(tmp_path, FAKE_SPARK_SUBMIT, job_exit, FAKE_SUBMIT_EXIT=submit_exit)
    assert result.returncode == wrapper_exit, result.stderr
    assert ("spark-submit failed" in result.stderr) == (job_exit == "killed")
    assert ("after eos-audit had finished" in result.stderr) == bool(submit_exit)


def test_spark_submit_sh_keeps_the_jobs_logs_on_stderr_and_its_summary_on_stdout(tmp_path):
    result = _wrapper(tmp_path, FAKE_SPARK_SUBMIT, "1")
    assert result.returncode == 1, result.stderr
    assert result.stdout == "eos-audit run stub: SUCCEEDED\n"
    assert result.stderr == "INFO eos_audit.audit.pipeline: run stub: writing the tables\n"


def test_spark_submit_sh_hands_back_the_real_clis_usage_error(tmp_path):
    # The real job and CLI: argparse's bad usage (a SystemExit) is handed back as 2, on stderr.
    result = _wrapper(tmp_path, FAKE_SPARK_SUBMIT, "audit", "--warehouse", "w", pythonpath=REPO)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert "eos-audit: error: the following arguments are required: --batches" in result.stderr


def test_spark_submit_sh_passes_a_schedulers_term_on_to_spark_submit(tmp_path):
    # No longer exec'd: a TERM sent to the wrapper alone (`timeout`, a container's PID 1) must
    # still stop spark-submit, and the night ends 3, not with the findings code.
    started, stopped = tmp_path / "started", tmp_path / "stopped"
    fake = (
        f"#!/bin/sh\ntrap 'touch {stopped}; exit 143' TERM\ntouch {started}\n"
        "while :; do sleep 0.1; done\n"
    )
    submit = tmp_path / "spark-submit"
    submit.write_text(fake)
    submit.chmod(0o755)
    wrapper = subprocess.Popen(
        ["bash", str(REPO / "spark-submit.sh"), "--no-delta", "audit"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SPARK_SUBMIT": str(submit)},
    )
    try:
        deadline = time.monotonic() + 30
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists()
        wrapper.send_signal(signal.SIGTERM)
        _, stderr = wrapper.communicate(timeout=30)
    finally:
        if wrapper.poll() is None:
            wrapper.kill()
            wrapper.wait()
    assert stopped.exists()
    assert wrapper.returncode == 3, stderr
    assert "spark-submit failed (exit 143) before eos-audit finished" in stderr
