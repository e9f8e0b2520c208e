"""Issue 27: every input is audited or accounted for (the input_files table and the run's status).

Real segment bytes (kafka-python's builders), in-process `main()` for exit codes and tables; a
subprocess only where the run must not be root (`setpriv`), since root reads any file.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eos_audit import cli
from eos_audit.audit.pipeline import AuditInputs, default_run_id
from eos_audit.config import AuditConfig
from tests.cli_runs import audit, no_html_report, sql  # noqa: F401 (an autouse fixture)
from tests.conftest import TINY_QUERIES
from tests.fixtures.segment_builder import (
    checkpoint_text,
    data_batch,
    generate_history,
    segment_name,
    write_partition_dir,
)

pytestmark = pytest.mark.slow  # whole audits

REPO = Path(__file__).resolve().parents[2]


def run_record(warehouse):
    (row,) = sql(
        warehouse,
        "audit_runs",
        "SELECT status, batches_read, batches_audited, batches_quarantined, batches_skipped, "
        "error FROM t",
    )
    return row


def files_by_path(warehouse):
    rows = sql(warehouse, "input_files", "SELECT * FROM t")
    return {r["path"]: r for r in rows}


def assert_reconciles(warehouse):
    """audit_runs' counts are the sums of input_files' (every batch belongs to a file)."""
    run = run_record(warehouse)
    (sums,) = sql(
        warehouse,
        "input_files",
        "SELECT sum(batches_read) AS r, sum(batches_audited) AS a, "
        "sum(batches_quarantined) AS q, sum(batches_skipped) AS s FROM t",
    )
    assert (sums["r"], sums["a"], sums["q"], sums["s"]) == (
        run["batches_read"],
        run["batches_audited"],
        run["batches_quarantined"],
        run["batches_skipped"],
    )


def export_with(root: Path, partitions: int = 2, batches: int = 12) -> list[Path]:
    """A clean broker export, `<root>/1/orders-<p>/` (two segments each) with checkpoints."""
    dirs = []
    for p in range(partitions):
        history = generate_history(batches, seed=p)
        dirs.append(
            write_partition_dir(
                root, 1, "orders", p, *history.batches, segment_bytes=600, leader_epochs=[(0, 0)]
            )
        )
    ends = [("orders", p, 10_000) for p in range(partitions)]
    (root / "1" / "replication-offset-checkpoint").write_text(checkpoint_text(ends))
    return dirs


@dataclass(frozen=True)
class CliRun:
    """What one `eos-audit audit` run showed: exit code, stdout, stderr, warnings logged."""

    code: int
    out: str
    err: str
    warnings: list[str]


class _Messages(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def audit_once(cwd: Path, *args) -> CliRun:
    """`eos-audit audit ARGS` in this process, from `cwd`, for a module-scoped fixture.

    capsys, caplog and monkeypatch are per test, so this captures and patches for itself.
    """
    messages = _Messages()
    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    level = root.level
    root.addHandler(messages)
    root.setLevel(min(level or logging.WARNING, logging.WARNING))
    try:
        with (
            pytest.MonkeyPatch.context() as patch,
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            patch.chdir(cwd)
            # The HTML report is not what these tests check (tests/cli_runs.py's no_html_report).
            patch.setattr(cli, "_write_report", lambda *args, **kwargs: None)
            code = cli.main(["audit", *map(str, args)])
    finally:
        root.removeHandler(messages)
        root.setLevel(level)
    return CliRun(code, out.getvalue(), err.getvalue(), messages.messages)


@dataclass(frozen=True)
class ExportRun:
    """The shared run over an export with files it must not read, each path given again."""

    root: Path
    dirs: list[Path]
    odd: Path
    deleted: Path
    transient: Path
    index: Path
    notes: Path
    warehouse: Path
    run: CliRun


# Session scope: built once per worker even when the suite's order (by cost, tests/conftest.py)
# or a steal by the other worker puts another module's tests between the two that read it.
@pytest.fixture(scope="session")
def export_run(spark, tmp_path_factory) -> ExportRun:
    """One audit (one per xdist worker) that two tests read, each checking its own part.

    The export has files that must be listed but not audited; it is given three times (as
    `export`, `./export/` and one of its partition directories), so the same run shows each file
    listed once with its reason and the repeated paths read once.
    """
    base = tmp_path_factory.mktemp("export-run")
    root = base / "export"
    dirs = export_with(root)
    # Segment files under a name that is not <topic>-<partition> (non-ASCII): not audited,
    # but listed, each with the reason.
    odd = root / "1" / "caf\u00e9-0"
    odd.mkdir()
    (odd / segment_name(0)).write_bytes(data_batch(0, producer_id=5, producer_epoch=0))
    deleted = root / "1" / "orders-0.3f1a2b-delete"
    deleted.mkdir()
    (deleted / segment_name(0)).write_bytes(data_batch(0))
    transient = dirs[0] / (segment_name(0) + ".deleted")
    transient.write_bytes(data_batch(0))
    index = dirs[1] / segment_name(0, ".index")
    index.write_bytes(b"\0" * 8)
    notes = root / "EXPORTED-BY.txt"
    notes.write_text("rsync from broker 1\n")
    warehouse = base / "w"
    run = audit_once(
        base, "--batches", "export", "./export/", str(dirs[0]), "--warehouse", warehouse
    )
    return ExportRun(root, dirs, odd, deleted, transient, index, notes, warehouse, run)


def test_every_file_is_read_or_ignored_with_its_reason_and_the_run_reconciles(export_run):
    root, dirs, run = export_run.root, export_run.dirs, export_run.run
    odd, deleted, transient = export_run.odd, export_run.deleted, export_run.transient
    index, notes = export_run.index, export_run.notes
    assert run.code == 0, run.out + run.err
    listed = sql(export_run.warehouse, "input_files", "SELECT path FROM t")
    assert len(listed) == len({r["path"] for r in listed})  # each file once, however given
    files = files_by_path(export_run.warehouse)
    segments = sorted(str(p) for d in dirs for p in d.glob("*.log"))
    assert len(segments) >= 4  # two partitions, rolled
    for path in segments:
        assert files[path]["status"] == "READ" and files[path]["format"] == "segment"
        assert files[path]["batches_read"] > 0
        assert files[path]["bytes"] == os.path.getsize(path)
    odd_file = files[str(odd / segment_name(0))]
    assert odd_file["status"] == "IGNORED"
    assert "is not <topic>-<partition>" in odd_file["reason"]
    assert odd_file["batches_read"] is None
    assert files[str(deleted / segment_name(0))]["status"] == "IGNORED"
    assert "-delete" in files[str(deleted / segment_name(0))]["reason"]
    assert files[str(transient)]["status"] == "IGNORED"
    assert "transient" in files[str(transient)]["reason"]
    assert files[str(index)]["status"] == "IGNORED"
    assert files[str(notes)]["status"] == "IGNORED"
    assert "outside the partition directories" in files[str(notes)]["reason"]
    assert files[str(root / "1" / "replication-offset-checkpoint")]["status"] == "READ"
    assert files[str(dirs[0] / "leader-epoch-checkpoint")]["status"] == "READ"
    # every file under the root has its row
    on_disk = {str(Path(d) / f) for d, _, names in os.walk(root) for f in names}
    assert on_disk == set(files)
    assert any(str(odd) in m and "is not <topic>-<partition>" in m for m in run.warnings)
    assert_reconciles(export_run.warehouse)
    assert run_record(export_run.warehouse)["batches_read"] == 24


def test_the_same_input_given_twice_is_read_once(export_run):
    run = export_run.run
    assert run.code == 0, run.out + run.err
    assert "batches read 24 = audited 24 + quarantined 0" in run.out
    assert "no findings" in run.out
    assert sum("is read once" in m for m in run.warnings) == 2
    # The same run id as the path given once: the duplicates are gone before it is derived.
    (run_id,) = {
        r["run_id"] for r in sql(export_run.warehouse, "audit_runs", "SELECT run_id FROM t")
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(export_run.root.parent)
        assert run_id == default_run_id(AuditInputs(batches=("export",)), AuditConfig())


def test_symbolic_links_are_followed_only_inside_their_root(spark, tmp_path, capsys, caplog):
    """A link out of an input root is IGNORED naming its target, and none of its bytes is read;
    a link inside the root is followed, and what it names twice is read once. The root itself
    is given as a link (the user's choice: followed). Segments are listed by eos-audit, the
    acknowledgements by Spark: both paths in one audit."""
    export = tmp_path / "export"
    dirs = export_with(export)
    # Behind the links out of the roots: a partition of its own, bytes no reader can frame, and
    # a line no JSON reader can parse. Read, each would show in the tables.
    elsewhere = tmp_path / "elsewhere"
    outside_dir = write_partition_dir(elsewhere, 1, "orders", 2, *generate_history(3).batches)
    garbage = elsewhere / "garbage.log"
    garbage.write_bytes(b"\xff" * 64)
    (elsewhere / "secret.jsonl").write_text("bytes from outside the acks root\n")
    (export / "1" / "orders-2").symlink_to(outside_dir)
    (dirs[0] / segment_name(10**6)).symlink_to(garbage)
    # Inside the root: a second name of a partition directory and of a segment.
    (export / "2").mkdir()
    (export / "2" / "orders-1").symlink_to(Path("..", "1", "orders-1"))
    first_segment = min(dirs[1].glob("*.log")).name
    (dirs[1] / segment_name(10**6)).symlink_to(first_segment)
    root = tmp_path / "given"
    root.symlink_to(export)
    acks = tmp_path / "acks"
    acks.mkdir()
    (acks / "a.jsonl").write_text("not an acknowledgement\n")  # quarantined, once
    (acks / "again.jsonl").symlink_to("a.jsonl")
    (acks / "secret.jsonl").symlink_to(elsewhere / "secret.jsonl")

    code, out, err = audit(capsys, "--batches", root, "--acks", acks, "--warehouse", tmp_path / "w")
    assert code == 0, out + err
    assert "batches read 24 = audited 24 + quarantined 0" in out and "no findings" in out
    (quarantined,) = sql(tmp_path / "w", "quarantine", "SELECT input, source FROM t")
    assert quarantined["input"] == "acks" and quarantined["source"].endswith(str(acks / "a.jsonl"))
    files = files_by_path(tmp_path / "w")
    assert not [path for path in files if path.startswith(str(elsewhere))]
    real_root = os.path.realpath(export)
    for link, target in (
        (root / "1" / "orders-2", outside_dir),
        (root / "1" / "orders-0" / segment_name(10**6), garbage),
        (acks / "secret.jsonl", elsewhere / "secret.jsonl"),
    ):
        bound = real_root if link.is_relative_to(root) else os.path.realpath(acks)
        row = files[str(link)]
        assert (row["status"], row["format"], row["bytes"], row["batches_read"]) == (
            "IGNORED", "symlink", None, None,
        )  # fmt: skip
        assert row["reason"] == (
            f"{link} is a symbolic link to {os.path.realpath(target)}, outside the input root "
            f"{bound}: not followed"
        )
        assert row["reason"] in caplog.messages  # and logged
    orders_1 = root / "1" / "orders-1"
    for link, kept in (
        (root / "2" / "orders-1", orders_1),
        (orders_1 / segment_name(10**6), orders_1 / first_segment),
        (acks / "again.jsonl", acks / "a.jsonl"),
    ):
        row = files[str(link)]
        assert (row["status"], row["format"]) == ("IGNORED", "symlink")
        assert row["reason"].endswith(f"which is read as {kept}: read once")
    assert files[str(orders_1 / first_segment)]["batches_read"] > 0
    assert files[str(acks / "a.jsonl")]["status"] == "READ"
    assert_reconciles(tmp_path / "w")


def _truncated_export(root: Path, *, cut_segment: str) -> Path:
    """orders-0 in two segments; a batch cut in half at the end of the last or the first."""
    history = generate_history(40, seed=3)
    pdir = write_partition_dir(root, 1, "orders", 0, *history.batches, segment_bytes=2000)
    segments = sorted(pdir.glob("*.log"))
    assert len(segments) >= 2
    target = segments[-1] if cut_segment == "last" else segments[0]
    extra = data_batch(10**6, 3, producer_id=77, producer_epoch=0, base_sequence=0)
    target.write_bytes(target.read_bytes() + extra[: len(extra) // 2])
    return target


def test_a_cut_tail_of_the_last_segment_is_recorded_but_not_bad_input(spark, tmp_path, capsys):
    cut = _truncated_export(tmp_path / "export", cut_segment="last")
    code, out, err = audit(capsys, "--batches", tmp_path / "export", "--warehouse", tmp_path / "w")
    assert code == 0, out + err
    assert run_record(tmp_path / "w")["status"] == "SUCCEEDED"
    (q,) = sql(tmp_path / "w", "quarantine", "SELECT source, reason FROM t")
    assert q["reason"].startswith("TRUNCATED_TAIL: ") and q["source"].startswith(str(cut))
    row = files_by_path(tmp_path / "w")[str(cut)]
    assert row["status"] == "READ" and row["reason"].startswith("TRUNCATED_TAIL")
    assert row["batches_quarantined"] == 1 and row["bytes_quarantined"] == 0
    assert_reconciles(tmp_path / "w")


def test_a_cut_batch_at_the_end_of_an_earlier_segment_is_damage(spark, tmp_path, capsys):
    cut = _truncated_export(tmp_path / "export", cut_segment="first")
    code, out, err = audit(capsys, "--batches", tmp_path / "export", "--warehouse", tmp_path / "w")
    assert code == 4, out + err
    run = run_record(tmp_path / "w")
    assert run["status"] == "QUARANTINE_EXCEEDED"
    (q,) = sql(tmp_path / "w", "quarantine", "SELECT reason FROM t")
    assert q["reason"].startswith("truncated batch at byte")
    row = files_by_path(tmp_path / "w")[str(cut)]
    assert row["status"] == "DAMAGED" and row["bytes_quarantined"] > 0
    assert_reconciles(tmp_path / "w")


def test_one_lost_large_file_is_not_hidden_by_many_small_batches(spark, tmp_path, capsys):
    root = tmp_path / "export"
    history = generate_history(300, seed=1, max_records=1)
    write_partition_dir(root, 1, "orders", 0, *history.batches)
    # A 36 KB segment whose first batch header is garbage: one quarantined row (under 1% of
    # 301), but most of the input's bytes.
    lost = root / "1" / "orders-1"
    lost.mkdir()
    garbage = bytearray(os.urandom(36 * 1024))
    garbage[16] = 9  # an unknown magic: the rest of the file cannot be framed
    (lost / segment_name(0)).write_bytes(bytes(garbage))
    code, out, err = audit(capsys, "--batches", root, "--warehouse", tmp_path / "w")
    assert code == 4, out + err
    run = run_record(tmp_path / "w")
    assert run["status"] == "QUARANTINE_EXCEEDED"
    assert run["batches_quarantined"] == 1 and run["batches_read"] == 301
    assert "input bytes" in run["error"] and "36864" in run["error"]
    row = files_by_path(tmp_path / "w")[str(lost / segment_name(0))]
    assert row["status"] == "DAMAGED" and row["bytes_quarantined"] == 36 * 1024
    assert_reconciles(tmp_path / "w")


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "csv"])
def test_tabular_rows_are_counted_per_file(spark, tmp_path, capsys, fmt):
    rows = [
        {"topic": "t", "partition": 0, "base_offset": i, "last_offset": i, "producer_id": 5,
         "producer_epoch": 0, "base_sequence": i, "is_transactional": False, "is_control": False}
        for i in range(5)
    ]  # fmt: skip
    rows[3]["last_offset"] = -1  # impossible: quarantined, and counted against its file
    folder = tmp_path / "in"
    folder.mkdir()
    for name, part in (("a", rows[:2]), ("b", rows[2:])):
        table = pa.Table.from_pylist(part)
        path = folder / f"{name}.{fmt}"
        if fmt == "parquet":
            pq.write_table(table, path)
        elif fmt == "jsonl":
            path.write_text("".join(json.dumps(r) + "\n" for r in part))
        else:
            table.to_pandas().to_csv(path, index=False)
    code, out, err = audit(capsys, "--batches", folder, "--warehouse", tmp_path / "w")
    assert code == 4, out + err  # 1 of 5 quarantined
    files = files_by_path(tmp_path / "w")
    a, b = files[str(folder / f"a.{fmt}")], files[str(folder / f"b.{fmt}")]
    assert (a["batches_read"], a["batches_audited"], a["status"]) == (2, 2, "READ")
    assert (b["batches_read"], b["batches_quarantined"], b["status"]) == (3, 1, "DAMAGED")
    assert "last_offset" in b["reason"]
    assert_reconciles(tmp_path / "w")


# ------------------------------------------------------------------------------------------------
# Unreadable inputs: root reads any file (CAP_DAC_OVERRIDE), so the run is a subprocess that setpriv
# leaves without the two capabilities that bypass file permissions: for it, as for the non-root
# user of a nightly job, a file's mode decides. (Switching to another user would also lock it out
# of this machine's Python, installed under /root.)
# ------------------------------------------------------------------------------------------------
_NO_DAC = "-dac_override,-dac_read_search"
_WITHOUT_DAC = ["setpriv", f"--bounding-set={_NO_DAC}", f"--inh-caps={_NO_DAC}"]

_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    from pyspark.sql import SparkSession
    from eos_audit import cli
    from eos_audit.audit import pipeline

    # The suite's settings for tiny queries (tests/conftest.py): the CLI takes this session.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    SparkSession.builder.master("local[2]").config(map=json.loads(sys.argv[2])).getOrCreate()
    base = sys.argv[1]
    codes = {}
    cli._write_report = lambda *args, **kwargs: None  # not what this checks; it costs seconds

    def run(name, *args):
        codes[name] = cli.main(["audit", *args, "--warehouse", os.path.join(base, "w-" + name)])

    # The driver can tell: a partition directory it cannot list, a segment it may not open, a
    # Parquet file it may not open.
    run("dir", "--batches", os.path.join(base, "dir"))
    run("segment", "--batches", os.path.join(base, "segment"))
    run("parquet", "--batches", os.path.join(base, "parquet"))

    # Only an executor can tell: the file becomes unreadable after the driver listed it.
    late = os.path.join(base, "late", "1", "orders-1", "00000000000000000000.log")

    def reached(point):
        if point == "read":
            os.chmod(late, 0)

    pipeline._reached = reached
    run("late", "--batches", os.path.join(base, "late"))
    print("CODES " + json.dumps(codes))
    """
)


def _without_dac_unavailable() -> str | None:
    if shutil.which("setpriv") is None:
        return "setpriv is not installed"
    probe = subprocess.run([*_WITHOUT_DAC, "true"], capture_output=True)
    if probe.returncode != 0:
        return f"setpriv cannot drop capabilities here: {probe.stderr.decode().strip()}"
    return None


@pytest.mark.cost(20)  # a subprocess and its JVM, four audits
@pytest.mark.skipif(_without_dac_unavailable() is not None, reason=str(_without_dac_unavailable()))
def test_inputs_the_run_cannot_read_never_give_a_green_night(tmp_path):
    base = tmp_path / "case"
    base.mkdir()
    export_with(base / "dir")
    os.chmod(base / "dir" / "1" / "orders-1", 0o300)  # not listable by its owner
    export_with(base / "segment")
    denied_segment = base / "segment" / "1" / "orders-0" / segment_name(0)
    os.chmod(denied_segment, 0o200)
    (base / "parquet").mkdir()
    pq.write_table(pa.table({"topic": ["t"], "partition": [0]}), base / "parquet" / "b.parquet")
    os.chmod(base / "parquet" / "b.parquet", 0o200)
    export_with(base / "late")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [*_WITHOUT_DAC, sys.executable, "-c", _SCRIPT, str(base), json.dumps(TINY_QUERIES)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    lines = [x for x in proc.stdout.splitlines() if x.startswith("CODES ")]
    assert len(lines) == 1, proc.stdout[-2000:] + proc.stderr[-5000:]
    (line,) = lines
    codes = json.loads(line.removeprefix("CODES "))
    errors = [x for x in proc.stderr.splitlines() if x.startswith("eos-audit: error: ")]
    assert codes == {"dir": 2, "segment": 2, "parquet": 2, "late": 4}, proc.stderr[-3000:]
    assert len(errors) == 3, proc.stderr[-3000:]
    assert str(base / "dir" / "1" / "orders-1") in errors[0] and "permission denied" in errors[0]
    assert str(denied_segment) in errors[1]
    assert str(base / "parquet" / "b.parquet") in errors[2]
    assert "This is a bug" not in proc.stderr
    late = base / "late" / "1" / "orders-1" / segment_name(0)
    os.chmod(late, 0o600)
    (run,) = sql(base / "w-late", "audit_runs", "SELECT status, error FROM t")
    assert run["status"] == "INPUT_UNREADABLE"
    assert str(late) in run["error"]
    row = files_by_path(base / "w-late")[str(late)]
    assert row["status"] == "UNREADABLE" and row["bytes_quarantined"] == row["bytes"]
    os.chmod(base / "dir" / "1" / "orders-1", 0o700)  # pytest removes its folders afterwards


def test_counts_per_file_reconcile_with_replicas_and_skipped_batches(spark, tmp_path):
    """Night 2 re-exports part of night 1 (skipped under --since-state), on two replicas."""
    from eos_audit.audit.pipeline import run_audit

    history = generate_history(40, seed=5)
    for night, batches in ((1, history.batches[:20]), (2, history.batches[12:])):
        for broker in (1, 2):
            write_partition_dir(
                tmp_path / f"night{night}", broker, "orders", 0, *batches, segment_bytes=700
            )
    warehouse = tmp_path / "w"
    run_audit(spark, AuditInputs(batches=(str(tmp_path / "night1"),)), AuditConfig(),
              str(warehouse), run_id="n1")  # fmt: skip
    result = run_audit(
        spark,
        AuditInputs(batches=(str(tmp_path / "night2"),), since_state=True),
        AuditConfig(),
        str(warehouse),
        run_id="n2",
    )
    assert result.batches_skipped > 0 and result.batches_read == 2 * 28
    (sums,) = sql(
        warehouse,
        "input_files",
        "SELECT sum(batches_read) AS r, sum(batches_audited) AS a, "
        "sum(batches_quarantined) AS q, sum(batches_skipped) AS s FROM t WHERE run_id = 'n2'",
    )
    assert (sums["r"], sums["a"], sums["q"], sums["s"]) == (
        result.batches_read,
        result.batches_audited,
        result.batches_quarantined,
        result.batches_skipped,
    )
