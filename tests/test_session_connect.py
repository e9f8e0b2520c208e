"""The Spark Connect client side, without a server: paths, --remote, progress counts, shipping."""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import pytest
from pyspark.sql.connect.shell.progress import StageInfo

from eos_audit import progress, session
from eos_audit.cli import absolute_local_path, build_parser
from eos_audit.errors import SparkConnectError


def test_local_paths_are_made_absolute_and_uris_are_left_alone(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert absolute_local_path("export/day-1") == str(tmp_path / "export" / "day-1")
    assert absolute_local_path("/data/export") == "/data/export"
    for uri in ("s3://bucket/export", "abfss://c@a.dfs.core.windows.net/x", "dbfs:/export"):
        assert absolute_local_path(uri) == uri


@pytest.mark.parametrize(
    "argv",
    [
        ["--remote", "sc://h:15002", "audit", "--batches", "b", "--warehouse", "w"],
        ["audit", "--batches", "b", "--warehouse", "w", "--remote", "sc://h:15002"],
        ["report", "--warehouse", "w", "--remote", "sc://h:15002"],
        ["--remote", "sc://h:15002", "demo"],
    ],
)
def test_remote_is_taken_before_or_after_the_command(argv):
    assert build_parser().parse_args(argv).remote == "sc://h:15002"


def test_without_remote_there_is_none():
    assert build_parser().parse_args(["report", "--warehouse", "w"]).remote is None


def test_connect_progress_counts_the_stages_the_server_reports():
    handler = progress.ConnectProgress()
    stages = [StageInfo(1, 4, 4, 100, True), StageInfo(2, 10, 3, 0, False)]
    handler(stages=stages, inflight_tasks=2, operation_id="op", done=False)
    assert str(handler.counts) == "Spark stages 1/2 done, tasks 7/14"
    handler(stages=stages, inflight_tasks=0, operation_id="op", done=True)
    assert handler.counts is None  # the operation ended: nothing is running


def test_the_shipped_zip_imports_without_the_installed_package_and_is_the_same_code(tmp_path):
    """What addArtifacts ships: a Python that cannot import eos_audit imports it from the zip,
    and computes the client's own digest (how the server's workers are recognised)."""
    archive = session._package_zip(tmp_path, session.package_digest())
    names = zipfile.ZipFile(archive).namelist()
    assert "eos_audit/replay/kernel.py" in names and "eos_audit/log4j2.properties" in names
    assert not [n for n in names if "__pycache__" in n]
    site = sysconfig.get_paths()["purelib"]
    code = "import eos_audit.session as s; print(s.__file__); print(s.package_digest())"
    # -S: no site, so no .pth: the editable install of eos_audit is not importable.
    without = subprocess.run([sys.executable, "-S", "-c", code], env={"PYTHONPATH": site},
                             cwd=tmp_path, capture_output=True, text=True)  # fmt: skip
    assert "No module named 'eos_audit'" in without.stderr
    shipped = subprocess.run([sys.executable, "-S", "-c", code],
                             env={"PYTHONPATH": f"{archive}:{site}"}, cwd=tmp_path,
                             capture_output=True, text=True, check=True)  # fmt: skip
    where, digest = shipped.stdout.split()
    assert where.startswith(str(archive))
    assert digest == session.package_digest()


def test_the_shipped_zip_is_the_same_bytes_each_time_it_is_made(tmp_path, monkeypatch):
    """Two clients of one version ship one file name: a server that keeps every session's files
    in one folder refuses the second if its bytes differ ("exists and does not match")."""
    digest = session.package_digest()
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    first = session._package_zip(tmp_path / "first", digest)
    clock = time.time
    monkeypatch.setattr(time, "time", lambda: clock() + 3600)  # zipped an hour later
    second = session._package_zip(tmp_path / "second", digest)
    assert first.name == second.name
    assert first.read_bytes() == second.read_bytes()


def test_an_unusable_remote_url_is_refused_at_once_without_its_token():
    with pytest.raises(SparkConnectError, match=re.escape("not a Spark Connect URL")) as error:
        session.get_spark(remote="sc://:15002/;token=dapi-secret")
    assert "dapi-secret" not in str(error.value)


def test_the_package_names_no_jvm_api_outside_session_py():
    """Spark Connect has no SparkContext, JVM or RDD: only session.py may probe for them."""
    package = Path(session.__file__).parent
    jvm_api = re.compile(r"sparkContext|_jvm|_jsc|\.rdd\b|SparkContext|statusTracker|_jdf\b")
    offenders = [
        f"{path.relative_to(package)}:{number}"
        for path in sorted(package.rglob("*.py"))
        if path.name != "session.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if jvm_api.search(line)
    ]
    assert offenders == []


class _ProbedServer:
    """A stand-in for a Spark Connect session whose probe job fails with `errors`, then answers."""

    def __init__(self, *errors: str) -> None:
        self.errors = list(errors)
        self.jobs = 0

    def range(self, _n):
        return self

    def select(self, _column):
        return self

    def first(self):
        self.jobs += 1
        if self.errors:
            raise RuntimeError(self.errors.pop(0))
        return ("digest",)


def test_the_workers_probe_reads_only_an_import_error_as_not_installed(monkeypatch):
    from pyspark.sql import functions

    from eos_audit import session

    monkeypatch.setattr(session.time, "sleep", lambda _s: None)
    # No session here: the UDF and its column are never built into a plan by the stand-in.
    monkeypatch.setattr(functions, "udf", lambda *_a, **_k: lambda column: column)
    monkeypatch.setattr(functions, "col", lambda name: name)
    missing = "PythonException: ModuleNotFoundError: No module named 'eos_audit'"
    not_installed = _ProbedServer(missing)
    assert session._probe_server_code(not_installed) is None and not_installed.jobs == 1
    # A lost worker, a server under load: asked again, not read as "not installed".
    transient = _ProbedServer("SparkException: Python worker exited unexpectedly (crashed)")
    assert session._probe_server_code(transient) == "digest" and transient.jobs == 2
    failing = _ProbedServer(*["SparkException: Job aborted: executor lost"] * 3)
    with pytest.raises(SparkConnectError, match="the probe failed 3 times .*executor lost"):
        session._probe_server_code(failing)
