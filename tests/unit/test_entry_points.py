import ast
import subprocess
from pathlib import Path

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
    assert "--packages io.delta:delta-spark_2.13:4.4.1" in command
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
