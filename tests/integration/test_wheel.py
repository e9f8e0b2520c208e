"""The package as a user gets it: the wheel, installed into a fresh venv outside the repository.

One venv, in stages (so a run pays for one install): the wheel with its own dependencies only
(no pyspark: the CLI says in one line what to install), then with the `local` extra (the demo
runs, as a real process: its exit code, summary and tables), then the same package under plain
`spark-submit` (quiet, with its own log levels).

pip installs the wheel itself; its dependencies are the ones this suite's .venv already holds
(constraints.txt's versions), linked into the new venv's site-packages instead of unpacked again
from pip's cache (about 1.2 GB of pyspark, pyarrow, llvmlite ...: 10-20 s of the test on 2 cores;
the demo and spark-submit take the rest, about 34 and 21 CPU-s). Only the wheel's own requirements
are linked, followed from the wheel's metadata (first without extras, then with `local`), never
the rest of .venv, so a requirement the wheel forgets still fails here.
pip runs with `--no-index`: it resolves the wheel's requirements and constraints against what is
installed and cannot fetch or replace anything (nothing under a link is ever uninstalled).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path, PurePosixPath

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import JVM_OPTIONS, TINY_QUERIES, submit_conf_args

REPO = Path(__file__).resolve().parents[2]
CONSTRAINTS = REPO / "constraints.txt"
# What the test process's own set-up puts into the environment that would point a child process
# back at the repository or at this process's Spark.
_NOT_INHERITED = ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYSPARK_PYTHON",
                  "PYSPARK_DRIVER_PYTHON", "SPARK_HOME", "PYSPARK_GATEWAY_PORT",
                  "PYSPARK_GATEWAY_SECRET")  # fmt: skip
_SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"])

pytestmark = pytest.mark.slow


def _run(command: list[str], cwd: Path, env: dict[str, str], timeout: int = 600):
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)  # fmt: skip


def _pip(venv: Path, *args: str, cwd: Path, env: dict[str, str]) -> None:
    """`pip install` into `venv` (made --without-pip: this interpreter's pip runs for it)."""
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
           "--quiet", "--no-index", "-c", str(CONSTRAINTS)]  # fmt: skip
    done = _run([*pip, *args], cwd, env)
    assert done.returncode == 0, done.stderr[-3000:]


def _wheel_requirements(wheel: Path) -> list[Requirement]:
    """The Requires-Dist lines of the wheel's own METADATA."""
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        text = archive.read(metadata).decode()
    return [Requirement(line.split(":", 1)[1]) for line in text.splitlines()
            if line.startswith("Requires-Dist:")]  # fmt: skip


def _applies(requirement: Requirement, extras: set[str]) -> bool:
    """Whether `requirement` is one when installing with `extras` (or none), on this Python."""
    marker = requirement.marker
    return marker is None or any(marker.evaluate({"extra": e}) for e in extras | {""})


def _closure(requirements: list[Requirement], extras: set[str]) -> set[str]:
    """The installed distributions `requirements` need (with `extras`), transitively."""
    needed: set[str] = set()
    pending = [r for r in requirements if _applies(r, extras)]
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        if name in needed:
            continue
        needed.add(name)
        dist = importlib.metadata.distribution(name)
        for line in dist.requires or []:
            sub = Requirement(line)
            if _applies(sub, requirement.extras):
                pending.append(sub)
    return needed


def _files(names: set[str], exclude: bool) -> list[PurePosixPath]:
    """The installed files (relative to site-packages) of the distributions in `names`, or of
    every other distribution when `exclude`."""
    files = []
    for dist in importlib.metadata.distributions():
        if (canonicalize_name(dist.metadata["Name"]) in names) != exclude:
            files += [PurePosixPath(f) for f in dist.files or []]
    return files


def _link_dependencies(venv: Path, names: set[str]) -> None:
    """Make the distributions `names` of this environment installed in `venv`: their folders and
    files linked into its site-packages (a folder another distribution shares, such as `google/`,
    is made and its own entries linked), their scripts copied into its bin/."""
    target = next((venv / "lib").glob("python*/site-packages"))
    ours = [f for f in _files(names, exclude=False) if "__pycache__" not in f.parts]
    others = {p for f in _files(names, exclude=True) for p in f.parents}
    for file in ours:
        if file.parts[0] == "..":  # a script, ../../../bin/NAME
            script = (_SITE_PACKAGES / file).resolve()
            copy = venv / "bin" / script.name
            first, _, rest = script.read_bytes().partition(b"\n")
            if first.startswith(b"#!") and b"python" in first:  # an entry point: this venv's
                first = b"#!" + str(venv / "bin" / "python").encode()
            copy.write_bytes(first + b"\n" + rest)
            copy.chmod(0o755)
            continue
        # The shallowest prefix no other distribution has files under: linked whole.
        for depth in range(1, len(file.parts) + 1):
            prefix = PurePosixPath(*file.parts[:depth])
            if prefix not in others:
                break
        link = target / prefix
        if not link.exists() and not link.is_symlink():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(_SITE_PACKAGES / prefix)


def _shipped_data(wheel: Path) -> dict[str, bytes]:
    """The package's files other than code in the wheel, by their paths inside the package."""
    with zipfile.ZipFile(wheel) as archive:
        return {name.removeprefix("eos_audit/"): archive.read(name) for name in archive.namelist()
                if name.startswith("eos_audit/") and not name.endswith(".py")}  # fmt: skip


def _sql(table: Path, query: str) -> list[dict]:
    return pa.table(QueryBuilder().register("t", DeltaTable(str(table))).execute(query)
                    .read_all()).to_pylist()  # fmt: skip


@pytest.mark.cost(55)  # the demo and spark-submit, each its own JVM
def test_the_installed_wheel_says_what_it_needs_then_runs_the_demo(tmp_path):
    work = tmp_path / "work"  # outside the repository: nothing of it on the path
    work.mkdir()
    env = {key: value for key, value in os.environ.items() if key not in _NOT_INHERITED}
    built = _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w",
                  str(tmp_path / "dist"), str(REPO)], work, env)  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("eos_audit-*.whl")
    requirements = _wheel_requirements(wheel)
    # The wheel carries what the help text and README cite (the configurations, every published
    # contract, the rules document), at its repository path inside the package, and their bytes,
    # not the links the checkout holds them through.
    cited = ["conf/defaults.toml", "conf/nightly.example.toml", "docs/rules.md",
             *(f"schemas/{p.name}" for p in sorted((REPO / "schemas").glob("*.json")))]  # fmt: skip
    assert len(cited) > 10
    data = _shipped_data(wheel)
    assert sorted(data) == sorted([*cited, "log4j2.properties"])
    for name in cited:
        assert data[name] == (REPO / name).read_bytes(), name

    venv = tmp_path / "venv"
    created = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], work, env)
    assert created.returncode == 0, created.stderr
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    env["PYSPARK_PYTHON"] = str(venv / "bin" / "python")

    # 1. `pip install eos-audit`: no pyspark, one line saying what to do, exit 2.
    core = _closure(requirements, extras=set())
    assert "pyspark" not in core
    _link_dependencies(venv, core)
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
    # And the installed package says where each cited file is, and prints one to start from.
    python = str(venv / "bin" / "python")
    located = _run([python, "-m", "eos_audit.package_data"], work, env)
    assert located.returncode == 0, located.stderr
    site = next((venv / "lib").glob("python*/site-packages")) / "eos_audit"
    assert located.stdout.splitlines() == [str(site / name) for name in sorted(cited)]
    example = _run([python, "-m", "eos_audit.package_data", "conf/nightly.example.toml"], work, env)
    assert example.returncode == 0, example.stderr
    assert example.stdout == (REPO / "conf/nightly.example.toml").read_text()

    # 2. `pip install eos-audit[local]`: the demo runs, as a real process (its exit code: delta-rs
    # issue 2184 aborts some processes at exit), and prints and writes its tables and report.
    local = _closure(requirements, extras={"local"})
    assert "pyspark" in local
    _link_dependencies(venv, local - core)
    _pip(venv, f"{wheel}[local]", cwd=work, env=env)
    warehouse = work / "wh"
    # With JSON logs, as a scheduler runs it: JAVA_TOOL_OPTIONS makes the JVM itself print a line
    # on its stderr before anything else, which must come through as JSON too.
    demo_env = {**env, "JAVA_TOOL_OPTIONS": f"{env.get('JAVA_TOOL_OPTIONS', '')} -Deos.audit=1"}
    demo = _run([str(venv / "bin" / "eos-audit"), "--log-format", "json", "demo", "--warehouse",
                 "wh", "--export", "x"], work, demo_env)  # fmt: skip
    # The exit code a real run over the demo's export gives: 1, its planted faults are CRITICAL.
    assert demo.returncode == 1, demo.stderr[-3000:]
    logs = [json.loads(line) for line in demo.stderr.splitlines() if line.strip()]
    assert all(set(line) == {"time", "level", "logger", "message"} for line in logs), logs[:5]
    jvm = [line for line in logs if line["logger"].startswith("spark.jvm")]
    assert jvm and jvm[0]["message"].startswith("Picked up JAVA_TOOL_OPTIONS:"), jvm[:5]
    assert any(line["logger"] == "eos_audit.session" for line in logs)
    assert "exit code 1: findings at or above --fail-on" in demo.stdout
    assert "eos-audit run demo: SUCCEEDED" in demo.stdout  # its malformed row is planted
    assert "as --max-quarantined-share 0.05" in demo.stdout  # and the demo says it allows it
    assert re.search(r"^DUPLICATE_BATCH +CRITICAL +1$", demo.stdout, re.MULTILINE)
    assert re.search(r"^ACKED_WRITE_LOST +CRITICAL +1$", demo.stdout, re.MULTILINE)
    assert re.search(r"^LIST_OFFSETS_REGRESSION +WARNING +1$", demo.stdout, re.MULTILINE)
    assert "batches read 62 = audited 61 + quarantined 1" in demo.stdout
    # The relative --warehouse is printed as the absolute folder it was written to.
    assert re.search(rf"^  findings +{re.escape(str(warehouse / 'findings'))}$",
                     demo.stdout, re.MULTILINE), demo.stdout  # fmt: skip
    for table in ("findings", "quarantine", "audit_runs"):
        assert (warehouse / table / "_delta_log").is_dir(), table
    assert (warehouse / "reports" / "demo.html").is_file()
    assert not (warehouse / "_staging").exists()
    # 6 faults in the log, 3 in the client-side evidence.
    assert _sql(warehouse / "findings", "SELECT count(*) AS n FROM t") == [{"n": 9}]

    # 3. Plain spark-submit (no log4j options): the job sets Spark's levels itself.
    job = work / "job.py"
    job.write_text("import sys\nfrom eos_audit.__main__ import main\nsys.exit(main())\n")
    # The suite's own JIT and GC flags, never a caller's SPARK_SUBMIT_OPTS (which may configure
    # log4j): they change no log level, and the report's JVM took 35 CPU-s without them, 21 with.
    assert "log4j" not in JVM_OPTIONS
    env["SPARK_SUBMIT_OPTS"] = JVM_OPTIONS
    # The suite's settings for tiny queries too (no log level among them): the demo wrote its
    # report with Spark's defaults already. Measured (this report, 2 cores, two runs each way):
    # 15.0 and 14.8 CPU-s with Spark's defaults, 13.2 and 12.9 with these.
    assert not any("log" in key for key in TINY_QUERIES)
    submitted = _run([str(venv / "bin" / "spark-submit"), "--master", "local[1]",
                      *submit_conf_args(TINY_QUERIES), str(job), "report", "--warehouse", "wh"],
                     work, env)  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr[-3000:]
    assert "report:" in submitted.stdout
    spark_info = [line for line in submitted.stderr.splitlines() if " INFO " in line
                  and " eos_audit" not in line]  # fmt: skip
    # Only what the SparkContext logs before it applies `spark.log.level` (its version, OS and
    # Java); without the job's level, about 1,700 lines for this command.
    assert len(spark_info) <= 3, spark_info[:20]
    assert all(" INFO SparkContext: " in line for line in spark_info), spark_info
