"""A warehouse on an object store: `--warehouse s3://...` (and `s3a://`) on moto's S3 server.

delta-rs writes the tables on the store, with the credentials, region and endpoint the
environment gives (plain HTTP allowed for the local server); the run's staging folder and lock
stay on this machine. `--since-state` and `report` read the tables back on the suite's session,
which has no Spark connector for S3: the warehouse's own tables are read by delta-rs and pyarrow.
Spark's own writer on an `s3a://` warehouse (delta-spark through hadoop-aws) is
`test_delta_spark.py`'s second night.
"""

from __future__ import annotations

import os
import re
import threading

import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from deltalake import DeltaTable, write_deltalake

from eos_audit.cli import main
from eos_audit.errors import SinkError
from eos_audit.schemas import AUDIT_RUNS
from eos_audit.sinks.delta import DeltaRsWriter
from eos_audit.sinks.staging import local_staging_root
from eos_audit.sinks.warehouse import DamagedTableError, check_warehouse
from eos_audit.sources.files.filesystems import delta_storage_options
from tests.cli_runs import audit, no_html_report  # noqa: F401 (an autouse fixture)
from tests.integration import test_incremental, test_object_store

pytestmark = pytest.mark.slow

# moto's S3 server on 127.0.0.1, its endpoint and credentials in the environment (module-scoped);
# the two nights' Parquet exports of test_incremental (session-scoped: written once a run).
s3 = test_object_store.s3
exports = test_incremental.exports
BUCKET = test_object_store.BUCKET


@pytest.fixture
def workers_with_credentials(spark, s3):
    """The S3 server's credentials in the environment of the session's Python workers.

    A user's local session starts with them (its workers inherit the environment the driver
    started in) and a cluster's executors have their own (an instance profile...); secrets are
    never handed to them. The suite's session started before the S3 server: its workers get
    them here, and Spark starts workers of their own for that environment.
    """
    environment = spark.sparkContext.environment
    keys = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    previous = {key: environment.get(key) for key in keys}
    environment.update({key: os.environ[key] for key in keys})
    yield
    for key, value in previous.items():
        if value is None:
            environment.pop(key, None)
        else:
            environment[key] = value


def _rows(uri: str, *columns: str) -> list[tuple]:
    """The rows of a Delta table on the store (its `columns`, sorted), as delta-rs reads them.

    Through `to_pyarrow_table`: DataFusion's reader (QueryBuilder) waited out its retries on the
    S3 server's range requests (180 s, "error sending request").
    """
    table = DeltaTable(uri, storage_options=delta_storage_options(uri))
    return sorted(tuple(r[c] for c in columns) for r in table.to_pyarrow_table().to_pylist())


def _objects(s3: pafs.S3FileSystem, prefix: str) -> list[str]:
    """Every object's key under a prefix of the bucket."""
    selector = pafs.FileSelector(f"{BUCKET}/{prefix}", recursive=True, allow_not_found=True)
    infos = s3.get_file_info(selector)
    return [i.path for i in infos if i.type == pafs.FileType.File]


@pytest.mark.cost(20)  # two nights and a report, on Python workers of their own
def test_nights_and_the_report_on_an_s3_warehouse(
    spark, s3, workers_with_credentials, exports, tmp_path, capsys
):
    day_1, day_2 = exports
    warehouse = f"s3://{BUCKET}/nightly-wh"

    code, out, err = audit(capsys, "--batches", day_1, "--warehouse", warehouse,
                           "--run-id", "night-1")  # fmt: skip
    assert code == 0, out + err
    assert "eos-audit run night-1: SUCCEEDED (writer: delta-rs)" in out
    assert re.search(rf"^  findings +{re.escape(warehouse)}/findings$", out, re.MULTILINE), out
    # The same warehouse in Hadoop's spelling: one warehouse (one lock folder), read back by
    # --since-state without a Spark connector for S3.
    code, out, err = audit(capsys, "--batches", day_2, "--warehouse", f"s3a://{BUCKET}/nightly-wh/",
                           "--since-state", "--run-id", "night-2")  # fmt: skip
    assert code == 1, out + err  # CRITICAL findings
    assert "seeded with run night-1's producer_state" in out, out

    runs = _rows(f"{warehouse}/audit_runs", "run_id", "status", "writer", "seeded_from_run",
                 "batches_read", "batches_audited")  # fmt: skip
    assert runs == [
        ("night-1", "SUCCEEDED", "delta-rs", None, 8, 8),
        ("night-2", "SUCCEEDED", "delta-rs", "night-1", 7, 7),
    ]
    found = _rows(f"{warehouse}/findings", "run_id", "base_offset", "finding_type",
                  "previous_offset")  # fmt: skip
    # The boundary faults only yesterday's state shows (test_incremental's nights): the copy of
    # offset 2 is known from night 1's state, read back from the store.
    assert found == [
        ("night-2", 8, "DUPLICATE_BATCH", 2),
        ("night-2", 10, "SEQUENCE_GAP", 3),
        ("night-2", 12, "FENCED_PRODUCER_EPOCH", None),
    ]
    state = _rows(f"{warehouse}/producer_state", "run_id")
    assert [(run, state.count((run,))) for run in ("night-1", "night-2")] == [
        ("night-1", 5),
        ("night-2", 5),
    ]
    # Nothing staged is left, on the store or in this machine's folder for the warehouse.
    assert not [key for key in _objects(s3, "nightly-wh") if "/_staging/" in key]
    local = local_staging_root(warehouse)
    assert local == local_staging_root(f"s3a://{BUCKET}/nightly-wh/")
    assert not local.exists() or not any(local.iterdir())

    # The report, read from the store into a local file.
    output = tmp_path / "night-2.html"
    assert main(["report", "--warehouse", warehouse, "--output", str(output)]) == 0
    assert capsys.readouterr().out.strip() == f"report: {output}"
    page = output.read_text()
    assert "night-2" in page and "FENCED_PRODUCER_EPOCH" in page and "<svg" in page


def test_the_report_goes_next_to_the_tables_on_the_store(s3, capsys, monkeypatch):
    """By default `<warehouse>/reports/<run>.html`, an object there (the page's data faked: the
    report's queries are the test above's)."""
    from eos_audit.report import build

    monkeypatch.setattr(build, "resolve_run_id", lambda spark, where, run_id: "night/1")
    monkeypatch.setattr(build, "collect_report_data", lambda *args: None)
    monkeypatch.setattr(build, "render_report", lambda data: "<html>night/1</html>")
    monkeypatch.setattr("eos_audit.session.get_spark", lambda **kwargs: None)
    warehouse = f"s3a://{BUCKET}/report-wh"
    assert main(["report", "--warehouse", warehouse]) == 0
    assert capsys.readouterr().out.strip() == f"report: {warehouse}/reports/night_1.html"
    with s3.open_input_stream(f"{BUCKET}/report-wh/reports/night_1.html") as stored:
        assert stored.read() == b"<html>night/1</html>"
    # A bucket that cannot be written: one line, exit 2.
    assert main(["report", "--warehouse", "s3://no-such-bucket/wh"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("eos-audit: error: cannot write the report to s3://no-such-bucket/wh/"), (
        err
    )
    assert len(err.strip().splitlines()) == 1, err


def test_an_s3_warehouse_is_checked_before_the_run(s3, tmp_path):
    """No bucket, an input's prefix, a damaged table: refused before anything is read."""
    with pytest.raises(SinkError, match=r"--warehouse s3://no-such-bucket/wh is not writable \("):
        check_warehouse("s3://no-such-bucket/wh", [])
    with pytest.raises(SinkError, match="is inside the input s3a://eos-audit-exports/in/"):
        check_warehouse(f"s3://{BUCKET}/in/wh", [f"s3a://{BUCKET}/in/"])
    warehouse = f"s3://{BUCKET}/damaged-wh"
    table = f"{warehouse}/findings"
    options = delta_storage_options(table)
    write_deltalake(table, pa.table({"run_id": ["r"]}), storage_options=options)
    check_warehouse(warehouse, [])  # whole: passes
    (data,) = [k for k in _objects(s3, "damaged-wh/findings") if k.endswith(".parquet")]
    with s3.open_output_stream(data) as cut:  # a data file cut short
        cut.write(b"PAR1")
    with pytest.raises(DamagedTableError, match=f"warehouse table {table}: its data file "
                       f"{table}/.*parquet has 4 bytes where its commit recorded"):  # fmt: skip
        check_warehouse(warehouse, [])


def test_runs_committing_at_once_to_an_s3_table_lose_no_commit(s3):
    """delta-rs commits with the store's conditional writes: of concurrent writers, each commit
    lands (retried on the conflict) and none overwrites another's."""
    writer = DeltaRsWriter(warehouse=f"s3://{BUCKET}/concurrent-wh")
    errors: list[BaseException] = []

    def run(run_id: str) -> None:
        row = tuple(_audit_run_value(f.name, run_id) for f in AUDIT_RUNS.fields)
        try:
            writer.replace_run_rows("audit_runs", [row], AUDIT_RUNS, run_id)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(f"run-{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    table = f"s3://{BUCKET}/concurrent-wh/audit_runs"
    assert _rows(table, "run_id") == [("run-0",), ("run-1",), ("run-2",), ("run-3",)]
    versions = DeltaTable(table, storage_options=delta_storage_options(table)).version()
    assert versions == 3  # four commits: versions 0 to 3, none lost to another


def _audit_run_value(name: str, run_id: str):
    """A value for one audit_runs column of a minimal row."""
    import datetime as dt

    field = AUDIT_RUNS[name]
    if name == "run_id":
        return run_id
    if field.nullable:
        return None
    kind = field.dataType.typeName()
    if kind == "timestamp":
        return dt.datetime(2026, 11, 28, tzinfo=dt.UTC)
    if kind in ("long", "integer"):
        return 0
    return "x"


def test_a_cluster_run_stages_on_the_store_and_leaves_nothing_there(s3):
    """Executors that do not share this disk stage under `<warehouse>/_staging/<key>`: delta-rs
    streams the staged Parquet from the store, and the run's end (or the next run here, after a
    kill) removes it; the lock stays on this machine."""
    import pyarrow.parquet as pq

    from eos_audit.schemas import PRODUCER_STATE
    from eos_audit.sinks.delta_reader import utc_arrow_schema
    from eos_audit.sinks.staging import RunStage

    warehouse = f"s3a://{BUCKET}/cluster-wh"
    with RunStage(warehouse, "night-1", executors_share_disk=False) as stage:
        assert stage.subdir("tables") == f"{warehouse}/_staging/{stage.path.name}/tables"
        assert (
            stage.path.parent == local_staging_root(warehouse) and (stage.path / ".lock").exists()
        )
        folder = f"{stage.subdir('tables')}/producer_state-1"
        # What Spark's executors would have staged: a Parquet file in the table's folder.
        schema = utc_arrow_schema(PRODUCER_STATE)
        row = {f.name: None for f in schema} | {"run_id": "night-1", "topic": "t", "partition": 0}
        row |= {"producer_id": 7, "producer_epoch": 0, "batches": []}
        inner = folder.removeprefix("s3a://")
        pq.write_table(pa.Table.from_pylist([row], schema=schema.remove_metadata()),
                       f"{inner}/part-0.parquet", filesystem=s3)  # fmt: skip
        writer = DeltaRsWriter(warehouse=warehouse, staging_dir=stage.subdir("tables"))
        where = writer._stream("producer_state", folder, PRODUCER_STATE, "night-1",
                               lambda batch: batch.columns)  # fmt: skip
        assert where == f"{warehouse}/producer_state"
        assert _rows(where, "run_id", "producer_id") == [("night-1", 7)]
        assert [k for k in _objects(s3, "cluster-wh/_staging/")]
    assert not _objects(s3, "cluster-wh/_staging/")

    class Killed(BaseException):
        """What the suite's kill simulation raises: the folder stays, as after SIGKILL."""

    with pytest.raises(Killed), RunStage(warehouse, "night-2", executors_share_disk=False) as stage:
        pq.write_table(pa.table({"x": [1]}), f"{stage.subdir('records').removeprefix('s3a://')}"
                       "/part-0.parquet", filesystem=s3)  # fmt: skip
        raise Killed
    assert _objects(s3, "cluster-wh/_staging/")  # left by the "killed" run
    with RunStage(warehouse, "night-3", executors_share_disk=False) as stage:
        assert [dead.run_id for dead in stage.dead_runs] == ["night-2"]
        assert not stage.is_alive("night-2")  # died here: settled by this run
        assert stage.is_alive("night-0")  # no folder here: maybe running on another machine
        assert not _objects(s3, "cluster-wh/_staging/")
