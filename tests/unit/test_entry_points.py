import ast
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.jars import DELTA_SPARK

REPO = Path(__file__).resolve().parents[2]


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
    for widget in ("batches", "batches_format", "catalog_schema", "run_id", "fail_on"):
        assert f'"{widget}"' in text


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
