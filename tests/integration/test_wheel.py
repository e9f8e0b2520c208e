"""The package as a user gets it: the wheel, installed into a fresh venv outside the repository.

One venv, in stages (so a run pays for one install): the wheel with its own dependencies only
(no pyspark: the CLI says in one line what to install), then with the `local` extra (the demo
runs), then the same package under plain `spark-submit` (quiet, with its own log levels). Every
install takes the versions of constraints.txt, which pip's cache holds after `./run.sh` set up
.venv.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONSTRAINTS = REPO / "constraints.txt"
# What the test process's own set-up puts into the environment that would point a child process
# back at the repository or at this process's Spark.
_NOT_INHERITED = ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYSPARK_PYTHON",
                  "PYSPARK_DRIVER_PYTHON", "SPARK_HOME", "PYSPARK_GATEWAY_PORT",
                  "PYSPARK_GATEWAY_SECRET")  # fmt: skip

pytestmark = pytest.mark.slow


def _run(command: list[str], cwd: Path, env: dict[str, str], timeout: int = 600):
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)  # fmt: skip


def _pip(venv: Path, *args: str, cwd: Path, env: dict[str, str]) -> None:
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    done = _run([*pip, "-c", str(CONSTRAINTS), *args], cwd, env)
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_installed_wheel_says_what_it_needs_then_runs_the_demo(tmp_path):
    work = tmp_path / "work"  # outside the repository: nothing of it on the path
    work.mkdir()
    env = {key: value for key, value in os.environ.items() if key not in _NOT_INHERITED}
    built = _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w",
                  str(tmp_path / "dist"), str(REPO)], work, env)  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("eos_audit-*.whl")

    venv = tmp_path / "venv"
    created = _run([sys.executable, "-m", "venv", str(venv)], work, env)
    assert created.returncode == 0, created.stderr
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    env["PYSPARK_PYTHON"] = str(venv / "bin" / "python")

    # 1. `pip install eos-audit`: no pyspark, one line saying what to do, exit 2.
    _pip(venv, str(wheel), cwd=work, env=env)
    no_spark = _run([str(venv / "bin" / "eos-audit"), "--help"], work, env)
    assert no_spark.returncode == 2
    assert no_spark.stderr.count("\n") == 1, no_spark.stderr
    assert "install 'eos-audit[local]'" in no_spark.stderr
    assert "inside a Spark runtime" in no_spark.stderr
    # The rules document every spec_ref names is in the installed package.
    show = ("from eos_audit import rules_doc; print(rules_doc.location()); "
            "print(rules_doc.section('docs/rules.md#duplicate-batch'))")  # fmt: skip
    rule = _run([str(venv / "bin" / "python"), "-c", show], work, env)
    assert rule.returncode == 0, rule.stderr
    assert rule.stdout.startswith(str(venv)) and "## Duplicate batch" in rule.stdout

    # 2. `pip install eos-audit[local]`: the demo runs and writes its tables and report.
    _pip(venv, f"{wheel}[local]", cwd=work, env=env)
    demo = _run([str(venv / "bin" / "eos-audit"), "demo", "--warehouse", "wh"], work, env)
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert "eos-audit run demo: SUCCEEDED" in demo.stdout
    for table in ("findings", "quarantine", "audit_runs"):
        assert (work / "wh" / table / "_delta_log").is_dir(), table
    assert (work / "wh" / "reports" / "demo.html").is_file()

    # 3. Plain spark-submit (no log4j options): the job sets Spark's levels itself.
    job = work / "job.py"
    job.write_text("import sys\nfrom eos_audit.__main__ import main\nsys.exit(main())\n")
    env.pop("SPARK_SUBMIT_OPTS", None)  # the suite's JVM flags: a user's spark-submit has none
    submitted = _run([str(venv / "bin" / "spark-submit"), "--master", "local[1]", str(job),
                      "report", "--warehouse", "wh"], work, env)  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr[-3000:]
    assert "report:" in submitted.stdout
    spark_info = [line for line in submitted.stderr.splitlines() if " INFO " in line
                  and " eos_audit" not in line]  # fmt: skip
    # Only what the SparkContext logs before it applies `spark.log.level` (its version, OS and
    # Java); without the job's level, about 1,700 lines for this command.
    assert len(spark_info) <= 3, spark_info[:20]
    assert all(" INFO SparkContext: " in line for line in spark_info), spark_info
