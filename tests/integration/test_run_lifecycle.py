"""A run's lifecycle on a warehouse: killed runs, re-runs, concurrent runs, the default run id.

A kill is simulated in-process: `pipeline._reached` raises a BaseException that is not an
Exception at the named point, so nothing the pipeline does on errors runs (no FAILED record, no
clean-up) and the lock is released as the process's death would release it. What is left on disk
is what SIGKILL leaves.
"""

import datetime as dt
import shutil
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eos_audit.audit import pipeline
from eos_audit.audit.pipeline import DATA_TABLES, AuditInputs, default_run_id, run_audit
from eos_audit.config import AuditConfig
from eos_audit.schemas import AUDIT_RUNS, RECORD_BATCH
from eos_audit.sinks.delta import DeltaRsWriter
from eos_audit.sinks.staging import RunInProgressError, RunStage
from eos_audit.sources.files.input_files import path_identity
from tests.builders import batch, data, marker
from tests.cli_runs import sql

CONFIG = AuditConfig().with_overrides(run={"max_quarantined_share": 1.0})


class Killed(BaseException):
    """What SIGKILL would be, if it were an exception."""


def rows_of(warehouse, table, run_id):
    rows = sql(warehouse, table, f"SELECT * FROM t WHERE run_id = '{run_id}'")
    return sorted(tuple(sorted((k, repr(v)) for k, v in r.items() if k != "run_id")) for r in rows)


def runs(warehouse):
    return {
        r["run_id"]: (r["status"], r["error"])
        for r in sql(warehouse, "audit_runs", "SELECT run_id, status, error FROM t")
    }


@pytest.fixture
def inputs(tmp_path):
    rows = [
        data(0, 3, seq=0, is_transactional=True),
        marker(3, "COMMIT"),
        data(4, 2, seq=3),
        data(6, 1, seq=9),  # a sequence gap: a finding
        batch(-7, source="bad-row"),  # quarantined
    ]
    table = pa.table({c: [r[c] for r in rows] for c in RECORD_BATCH.fieldNames()})
    pq.write_table(table, tmp_path / "batches.parquet")
    return AuditInputs(batches=(str(tmp_path / "batches.parquet"),))


def kill_at(monkeypatch, point):
    def reached(name):
        if name == point:
            raise Killed(name)

    monkeypatch.setattr(pipeline, "_reached", reached)


@pytest.mark.cost(16)  # five audits
@pytest.mark.slow  # five audits, three of them killed
def test_killed_runs_are_visible_settled_and_replaced(spark, tmp_path, inputs, monkeypatch):
    warehouse = tmp_path / "wh"
    for point in ("read", "staged", "wrote:quarantine"):
        kill_at(monkeypatch, point)
        with pytest.raises(Killed):
            run_audit(spark, inputs, CONFIG, str(warehouse), run_id="night")
        # Recorded as started before any table was written, and still so: it did not finish.
        assert runs(warehouse) == {"night": ("RUNNING", None)}
        assert any((warehouse / "_staging").iterdir()), "a kill leaves its staging folder"
    assert sql(warehouse, "quarantine", "SELECT count(*) AS n FROM t") == [{"n": 1}]
    assert not (warehouse / "transactions").exists()
    monkeypatch.setattr(pipeline, "_reached", lambda name: None)

    # Another night on the warehouse finds the dead run: its partial rows go, it becomes FAILED.
    other = run_audit(spark, inputs, CONFIG, str(warehouse), run_id="other")
    assert other.status == "SUCCEEDED"
    status, error = runs(warehouse)["night"]
    assert status == "FAILED" and "died while running" in error
    for table in ("findings", "quarantine"):
        assert rows_of(warehouse, table, "night") == [], table
    assert not (warehouse / "_staging").exists()

    # The night re-run (same id) lands whole: every table as the clean run wrote it.
    again = run_audit(spark, inputs, CONFIG, str(warehouse), run_id="night")
    assert (again.status, again.batches_audited, again.batches_quarantined) == ("SUCCEEDED", 4, 1)
    assert runs(warehouse) == {"night": ("SUCCEEDED", None), "other": ("SUCCEEDED", None)}
    for table in DATA_TABLES:
        assert rows_of(warehouse, table, "night") == rows_of(warehouse, table, "other"), table
    assert rows_of(warehouse, "findings", "night"), "the comparison compares something"
    assert not (warehouse / "_staging").exists()


def test_the_same_run_id_twice_at_once_is_refused(tmp_path):
    with RunStage(str(tmp_path), "night") as first:
        assert first.locked
        with pytest.raises(RunInProgressError, match="run night is already running"):
            RunStage(str(tmp_path), "night").__enter__()
        with RunStage(str(tmp_path), "other-night") as second:  # other ids run alongside
            assert second.path != first.path and first.path.exists()
    assert not (tmp_path / "_staging").exists()


def test_concurrent_writers_land_whole_and_never_double_a_run(tmp_path):
    writer = DeltaRsWriter(warehouse=str(tmp_path))
    now = dt.datetime(2026, 11, 21, tzinfo=dt.UTC)
    # status .. batches_quarantined, batches_skipped, seeded_from_run, findings by severity, error
    rest = ("SUCCEEDED", "v", "s", "delta-rs", "{}", "{}", 1, 1, 0, 0, None, 0, 0, 0, 0, None)
    errors = []

    def write(run_id):
        try:
            for _ in range(3):
                row = (run_id, now, now, *rest)
                writer.replace_run_rows("audit_runs", [row], AUDIT_RUNS, run_id)
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(r,)) for r in ("a", "b", "a", "c", "a")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    counts = sql(tmp_path, "audit_runs", "SELECT run_id, count(*) AS n FROM t GROUP BY run_id")
    assert sorted((r["run_id"], r["n"]) for r in counts) == [("a", 1), ("b", 1), ("c", 1)]


def test_default_run_id_ignores_the_clock_and_follows_the_inputs(tmp_path, monkeypatch):
    path = tmp_path / "b.parquet"
    path.write_bytes(b"PAR1 first export PAR1")
    inputs = AuditInputs(batches=(str(tmp_path),))
    first = default_run_id(inputs, AuditConfig())

    class Tomorrow(pipeline.dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return pipeline.dt.datetime(2099, 1, 2, tzinfo=tz)

    monkeypatch.setattr(pipeline.dt, "datetime", Tomorrow)
    assert default_run_id(inputs, AuditConfig()) == first  # after midnight: the same run
    path.write_bytes(b"PAR1 the next night's export, longer PAR1")
    assert default_run_id(inputs, AuditConfig()) != first  # new data: a new run
    assert default_run_id(inputs, AuditConfig(severity={})) != default_run_id(inputs, AuditConfig())


def test_one_run_id_for_every_spelling_of_an_input(tmp_path, monkeypatch):
    export = tmp_path / "exp2"
    export.mkdir()
    (export / "b.parquet").write_bytes(b"PAR1 an export PAR1")
    (tmp_path / "link").symlink_to(export)
    monkeypatch.chdir(tmp_path)

    def run_id(*batches: str) -> str:
        return default_run_id(AuditInputs(batches=batches), AuditConfig())

    # Relative, with a slash, dotted, absolute (as a Spark Connect client sends it), a link.
    spellings = ("exp2", "exp2/", "./exp2", str(export), f"{export}/", "link")
    assert len({run_id(path) for path in spellings}) == 1
    other = tmp_path / "exp3"
    shutil.copytree(export, other)
    assert run_id("exp3") != run_id("exp2")  # another folder, even with the same files
    assert path_identity("s3://b/exp2/") == path_identity("s3://b/exp2")
