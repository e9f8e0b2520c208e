"""Issue 27: a seed and a warehouse are input too, audited or accounted for.

In-process `main()` on the suite's Spark session; what a user sees is checked: the exit code, the
one line on stderr, and the tables.
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql.pandas.types import to_arrow_schema

from eos_audit.audit import pipeline
from eos_audit.audit.pipeline import DATA_TABLES, AuditInputs, run_audit
from eos_audit.config import AuditConfig
from eos_audit.schemas import PRODUCER_STATE
from tests.builders import NULLABLE_BATCH, batch, data
from tests.cli_runs import audit, no_html_report, sql  # noqa: F401 (an autouse fixture)

CONFIG = AuditConfig().with_overrides(run={"max_quarantined_share": 1.0})
DAY_1 = [data(0, seq=0), data(1, pid=2, seq=0), data(2, seq=1)]
DAY_2 = [data(3, seq=2), data(4, pid=2, seq=1), batch(-7, source="bad-row")]


def write_batches(path: Path, rows: list[dict]) -> str:
    pq.write_table(pa.Table.from_pylist(rows, schema=to_arrow_schema(NULLABLE_BATCH)), path)
    return str(path)


def assert_one_line(err, *parts):
    assert err.startswith("eos-audit: error: "), err
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and "at org.apache" not in err
    for part in parts:
        assert part in err, (part, err)


@pytest.fixture(scope="session")
def night_files(tmp_path_factory):
    """Night 1's and night 2's exports (`day-1.parquet`, `day-2.parquet`), not audited: for the
    tests that only give them as input, so that a worker running only those runs no night_1.
    """
    root = tmp_path_factory.mktemp("night")
    write_batches(root / "day-1.parquet", DAY_1)
    write_batches(root / "day-2.parquet", DAY_2)
    return root


# Session scope: built once per worker. The suite orders tests by cost, then slow, then the rest
# (tests/conftest.py), so this module's tests do not run together; at module scope this audit was
# torn down and run again at each return to the module (3 times in the full suite's order). No
# test changes it: `warehouse` gives each test its own copy.
@pytest.fixture(scope="session")
def night_1(spark, night_files):
    """A warehouse with one finished night (`wh`), and night 2's export."""
    day_1 = str(night_files / "day-1.parquet")
    run_audit(
        spark, AuditInputs(batches=(day_1,)), CONFIG, str(night_files / "wh"), run_id="night-1"
    )
    return night_files


@pytest.fixture
def warehouse(night_1, tmp_path):
    """A copy of night 1's warehouse for one test to damage."""
    shutil.copytree(night_1 / "wh", tmp_path / "wh")
    return tmp_path / "wh"


def seed_line(pid, epoch, last_seq, last_offset, **extra):
    batches = [
        {
            "base_sequence": last_seq,
            "last_sequence": last_seq,
            "base_offset": last_offset,
            "last_offset": last_offset,
        }
    ]
    row = {"topic": "t", "partition": 0, "producer_id": pid, "producer_epoch": epoch}
    return json.dumps(row | {"batches": batches} | extra)


# ------------------------------------------------------------------------------------------------
# --producer-state files
# ------------------------------------------------------------------------------------------------
@pytest.mark.slow  # an audit's read
def test_a_record_batch_file_as_producer_state_exits_2_naming_the_missing_column(
    spark, night_files, tmp_path, capsys
):
    code, _, err = audit(
        capsys, "--batches", night_files / "day-2.parquet", "--warehouse", tmp_path / "wh",
        "--producer-state", night_files / "day-1.parquet",
    )  # fmt: skip
    assert code == 2
    assert_one_line(
        err, f"producer-state input {night_files / 'day-1.parquet'}",
        "missing required column(s) ['batches']",
    )  # fmt: skip


@pytest.mark.cost(14)  # a seeded audit
@pytest.mark.slow  # a whole audit
def test_impossible_and_malformed_seeds_are_quarantined_and_never_used(spark, tmp_path, capsys):
    seeds = tmp_path / "state.json"
    seeds.write_text(
        "\n".join(
            [
                seed_line(1, 0, 1, 2),  # producer 1's real state after day 1
                seed_line(2, 40000, 0, 1),  # an epoch no producer can have
                "{not json at all",
                seed_line(2, 0, 0, 1, batches=[{"base_sequence": 0}] * 6),
            ]
        )
        + "\n"
    )
    warehouse = tmp_path / "wh"
    clean_day_2 = write_batches(tmp_path / "day-2-clean.parquet", DAY_2[:2])
    code, out, err = audit(
        capsys, "--batches", clean_day_2, "--warehouse", warehouse,
        "--producer-state", seeds, "--fail-on", "never", "--run-id", "seeded",
    )  # fmt: skip
    # Every batch audited, but a seed is input too: three of its rows lost is not a green night.
    assert code == 4, err
    (run,) = sql(warehouse, "audit_runs", "SELECT status, error FROM t")
    assert run["status"] == "QUARANTINE_EXCEEDED"
    assert run["error"].startswith("quarantined 3 seeded producer state row(s)"), run["error"]
    problems = sql(
        warehouse, "quarantine",
        "SELECT source, reason FROM t WHERE input = 'producer_state' ORDER BY source",
    )  # fmt: skip
    assert [p["source"] for p in problems] == [
        f"{seeds}:line 2",
        f"{seeds}:line 3: {{not json at all",
        f"{seeds}:line 4",
    ]
    assert problems[0]["reason"] == "producer_epoch 40000 is outside -1..32767"
    assert problems[1]["reason"] == "malformed JSON line"
    assert "6 cached batches, more than the 5" in problems[2]["reason"]
    findings = sql(warehouse, "findings", "SELECT finding_type, producer_id FROM t")
    # Producer 1 continues its seeded state cleanly; producer 2's only seeds were impossible, so
    # it is not seeded at all: no zombie-write verdict from an epoch of 40000.
    assert [f for f in findings if f["producer_id"] == 1] == []
    assert "FENCED_PRODUCER_EPOCH" not in {f["finding_type"] for f in findings}


@pytest.mark.slow  # two audits
def test_since_state_quarantines_a_damaged_row_of_the_warehouse_state(
    spark, night_1, warehouse, capsys
):
    bad = {
        "topic": "t", "partition": 0, "producer_id": 2, "producer_epoch": 40000,
        "coordinator_epoch": None, "txn_first_offset": None, "last_timestamp": 0,
        "batches": [], "state_offset": 3, "source": "edited", "run_id": "night-1",
    }  # fmt: skip
    state = str(warehouse / "producer_state")
    write_deltalake(
        state,
        pa.Table.from_pylist([bad], schema=to_arrow_schema(PRODUCER_STATE)),
        mode="append",
        schema_mode="merge",
    )
    code, _, err = audit(
        capsys, "--batches", night_1 / "day-2.parquet", "--warehouse", warehouse,
        "--since-state", "--fail-on", "never", "--run-id", "night-2",
    )  # fmt: skip
    assert code == 4, err
    (problem,) = sql(
        warehouse, "quarantine",
        "SELECT source, reason FROM t WHERE run_id = 'night-2' AND input = 'producer_state'",
    )  # fmt: skip
    assert problem == {
        "source": f"{state} run night-1: producer 2 of t-0",
        "reason": "producer_epoch 40000 is outside -1..32767",
    }
    findings = sql(warehouse, "findings", "SELECT finding_type FROM t WHERE run_id = 'night-2'")
    assert "FENCED_PRODUCER_EPOCH" not in {f["finding_type"] for f in findings}


# ------------------------------------------------------------------------------------------------
# A FAILED run keeps no rows; dead runs are settled with or without a staging folder
# ------------------------------------------------------------------------------------------------
def _rows(warehouse, run_id):
    return {
        table: sql(warehouse, table, f"SELECT count(*) AS n FROM t WHERE run_id = '{run_id}'")[0][
            "n"
        ]
        for table in DATA_TABLES
        if (warehouse / table / "_delta_log").is_dir()
    }


@pytest.mark.slow  # one audit that fails after writing two tables
def test_a_failed_run_leaves_no_rows_behind(spark, night_1, warehouse, monkeypatch):
    assert _rows(warehouse, "night-1")["producer_state"] > 0

    def fail(name):
        if name == "wrote:quarantine":
            raise RuntimeError("the driver lost its executors")

    monkeypatch.setattr(pipeline, "_reached", fail)
    day_1 = AuditInputs(batches=(str(night_1 / "day-1.parquet"),))
    # The same run id again: its first attempt's rows in every table go too.
    with pytest.raises(RuntimeError):
        run_audit(spark, day_1, CONFIG, str(warehouse), run_id="night-1")
    assert set(_rows(warehouse, "night-1").values()) == {0}
    (run,) = sql(warehouse, "audit_runs", "SELECT status, error FROM t WHERE run_id = 'night-1'")
    assert run == {"status": "FAILED", "error": "RuntimeError: the driver lost its executors"}


class Killed(BaseException):
    """What SIGKILL would be, if it were an exception."""


@pytest.mark.slow  # two audits, the first killed
def test_a_dead_run_without_a_staging_folder_is_settled(spark, night_1, warehouse, monkeypatch):
    def kill(name):
        if name == "wrote:quarantine":
            raise Killed(name)

    monkeypatch.setattr(pipeline, "_reached", kill)
    day_2 = AuditInputs(batches=(str(night_1 / "day-2.parquet"),))
    with pytest.raises(Killed):
        run_audit(spark, day_2, CONFIG, str(warehouse), run_id="lost")
    # As a run that could not record its end (a full disk) leaves it: RUNNING, no folder.
    shutil.rmtree(warehouse / "_staging")
    assert _rows(warehouse, "lost")["quarantine"] > 0
    monkeypatch.setattr(pipeline, "_reached", lambda name: None)

    run_audit(spark, day_2, CONFIG, str(warehouse), run_id="next")
    (run,) = sql(warehouse, "audit_runs", "SELECT status, error FROM t WHERE run_id = 'lost'")
    assert run["status"] == "FAILED" and "removed by run next" in run["error"]
    assert set(_rows(warehouse, "lost").values()) == {0}


# ------------------------------------------------------------------------------------------------
# Damaged warehouse tables: refused before the audit, naming the table and the file
# ------------------------------------------------------------------------------------------------
def _latest_commit(table: Path) -> Path:
    return max((table / "_delta_log").glob("*.json"))


def _data_file(table: Path) -> Path:
    return Path(DeltaTable(str(table)).file_uris()[0].removeprefix("file://"))


def _cut(path: Path, keep) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: keep(data)])


@pytest.mark.parametrize(
    ("table", "damage", "says"),
    [
        ("findings", lambda t: _cut(_latest_commit(t), lambda d: len(d) // 2), "is damaged"),
        ("audit_runs", lambda t: _latest_commit(t).write_text("garbage\n"), "line 1 is not JSON"),
        (
            "producer_state",
            # Cut at a line boundary: whole JSON lines, but fewer than its commitInfo counts.
            lambda t: _cut(_latest_commit(t), lambda d: d.index(b"\n") + 1),
            "it was cut short",
        ),
        ("producer_state", lambda t: _data_file(t).unlink(), "is missing"),
        ("producer_state", lambda t: _cut(_data_file(t), lambda d: 100), "has 100 bytes"),
    ],
)
def test_a_damaged_warehouse_table_exits_2_before_the_audit(
    night_1, warehouse, capsys, table, damage, says
):
    target = warehouse / table
    named = str(_data_file(target)) if "bytes" in says or "missing" in says else None
    commit = _latest_commit(target).name
    damage(target)
    before = sorted(os.listdir(warehouse / "audit_runs" / "_delta_log"))
    code, _, err = audit(
        capsys, "--batches", night_1 / "day-2.parquet", "--warehouse", warehouse, "--since-state"
    )
    assert code == 2
    assert_one_line(err, f"warehouse table {target}", says)
    assert named in err if named else commit in err
    # Refused before anything ran: no run was recorded.
    assert sorted(os.listdir(warehouse / "audit_runs" / "_delta_log")) == before


def test_a_damaged_producer_state_table_as_producer_state_exits_2(night_1, warehouse, capsys):
    state = warehouse / "producer_state"
    file = _data_file(state)
    file.unlink()
    seed_copy = night_1.parent / f"{warehouse.parent.name}-seed"
    shutil.move(str(state), seed_copy)
    code, _, err = audit(
        capsys, "--batches", night_1 / "day-2.parquet", "--warehouse", warehouse,
        "--producer-state", seed_copy,
    )  # fmt: skip
    assert code == 2
    assert_one_line(err, f"--producer-state {seed_copy}", "is missing")


# ------------------------------------------------------------------------------------------------
# A full disk
# ------------------------------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path):
    """A 2 MB tmpfs (root only); skipped with the reason when it cannot be mounted."""
    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.slow  # two audits
def test_a_full_disk_exits_2_and_the_next_run_settles_the_run(
    spark, night_files, tmp_path, small_disk, capsys
):
    rows = [data(i, seq=i, pid=1 + i % 50) for i in range(4000)]
    batches = write_batches(tmp_path / "big.parquet", rows)
    warehouse = small_disk / "wh"
    # Leave ~150 KB: the run starts, then staging or the Delta writes fill the disk.
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (2 * 1024 * 1024 - 150 * 1024))
    code, _, err = audit(capsys, "--batches", batches, "--warehouse", warehouse,
                         "--run-id", "full")  # fmt: skip
    assert code == 2, err
    assert_one_line(err, f"no space left on device under {warehouse}")
    filler.unlink()

    code, _, err = audit(capsys, "--batches", night_files / "day-1.parquet", "--warehouse",
                         warehouse, "--run-id", "roomy")  # fmt: skip
    assert code in (0, 1), err
    statuses = {
        r["run_id"]: r["status"]
        for r in sql(warehouse, "audit_runs", "SELECT run_id, status FROM t")
    }
    # Recorded FAILED by itself, or (when even that could not be written) settled by "roomy".
    assert statuses == {"full": "FAILED", "roomy": "SUCCEEDED"}
    assert set(_rows(warehouse, "full").values()) <= {0}


@pytest.mark.slow  # a whole audit
def test_an_impossible_snapshot_entry_gets_the_same_checks(spark, tmp_path):
    """Snapshot files give int16 epochs and int32 deltas: in their types, still impossible."""
    from tests.fixtures.segment_builder import (
        SnapshotEntry,
        data_batch,
        snapshot_bytes,
        write_partition_dir,
    )

    snapshot = snapshot_bytes(
        [
            SnapshotEntry(7, -5, last_sequence=0, last_offset=90),
            SnapshotEntry(8, 0, last_sequence=9, last_offset=95, offset_delta=-3),
            SnapshotEntry(9, 2, last_sequence=4, last_offset=96, offset_delta=1),
        ]
    )
    root = tmp_path / "export"
    write_partition_dir(
        root, "b1", "t", 0,
        data_batch(100, 1, producer_id=9, producer_epoch=2, base_sequence=5),
        snapshots={100: snapshot},
    )  # fmt: skip
    warehouse = tmp_path / "wh"
    run_audit(spark, AuditInputs(batches=(str(root),)), CONFIG, str(warehouse), run_id="x")
    problems = sql(
        warehouse, "quarantine",
        "SELECT source, reason FROM t WHERE input = 'producer_state' ORDER BY source",
    )  # fmt: skip
    assert [(p["source"].rsplit("/", 1)[-1], p["reason"]) for p in problems] == [
        (
            "00000000000000000100.snapshot:10 producer 7 of t-0",
            "producer_epoch -5 is outside -1..32767",
        ),
        (
            "00000000000000000100.snapshot:56 producer 8 of t-0",
            "a cached batch's base_offset 98 is above its last_offset 95",
        ),
    ]
    # Producer 9's entry is sound and seeds the replay: its next batch is in sequence.
    assert sql(warehouse, "findings", "SELECT finding_type FROM t WHERE producer_id = 9") == []
