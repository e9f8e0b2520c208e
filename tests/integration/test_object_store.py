"""Kafka files from an object store: an S3 API server (moto) on 127.0.0.1 holds an export and a
dump-log file, and the audit of `s3://...` equals the audit of the same files on disk."""

from __future__ import annotations

import os
import shutil
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from moto.server import ThreadedMotoServer
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.readwriter import DataFrameReader
from pyspark.sql.types import StructType

from eos_audit import cli
from eos_audit.audit.pipeline import AuditInputs, default_run_id, run_audit
from eos_audit.config import AuditConfig
from eos_audit.errors import ConfigError, InputNotFoundError
from eos_audit.sinks.delta_reader import delta_dataframe
from eos_audit.sources.files.input_files import InputUnreadableError, dedupe_paths
from tests.builders import NULLABLE_BATCH
from tests.fixtures.segment_builder import (
    SnapshotEntry,
    checkpoint_text,
    control_batch,
    data_batch,
    format_dump_log,
    snapshot_bytes,
    write_partition_dir,
)
from tests.integration.test_incremental import DAY_1, DAY_2

pytestmark = pytest.mark.slow

BUCKET = "eos-audit-exports"
# Columns that differ between two runs of the same data (ids, times) or that name the run.
# quarantine_id hashes the row's source, which names the file (a path or a URI).
_RUN_COLUMNS = {"run_id", "audited_at", "started_at", "finished_at", "written_at", "quarantine_id"}


@pytest.fixture(scope="module")
def s3():
    """A moto S3 server on 127.0.0.1 with its endpoint in the environment; stopped at the end."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWS_ENDPOINT_URL", f"http://{host}:{port}")
        mp.setenv("AWS_ACCESS_KEY_ID", "testing")
        mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
        fs = pafs.S3FileSystem(
            endpoint_override=f"http://{host}:{port}",
            region="us-east-1",
            allow_bucket_creation=True,
        )
        fs.create_dir(BUCKET)
        yield fs
    server.stop()


def _export(root: Path) -> None:
    """orders-0 on two brokers (a snapshot, epochs, checkpoints, a diverged follower, a cut tail)
    and orders-1 with a sequence gap."""
    batches = [
        data_batch(100, 2, producer_id=7, producer_epoch=0, base_sequence=10, leader_epoch=0),
        data_batch(102, 1, producer_id=8, producer_epoch=0, base_sequence=5, leader_epoch=0),
        data_batch(103, 2, producer_id=7, producer_epoch=0, base_sequence=12, leader_epoch=1),
        control_batch(105, producer_id=9, producer_epoch=3, coordinator_epoch=2, leader_epoch=1),
        data_batch(106, 1, producer_id=7, producer_epoch=0, base_sequence=14, leader_epoch=1),
    ]
    snapshot = snapshot_bytes([SnapshotEntry(7, 0, last_sequence=9, last_offset=95)])
    primary = write_partition_dir(
        root, "broker-1", "orders", 0, *batches, segment_bytes=200,
        snapshots={100: snapshot}, leader_epochs=[(0, 100), (1, 103)],
    )  # fmt: skip
    last = sorted(primary.glob("*.log"))[-1]
    extra = data_batch(107, 3, producer_id=7, producer_epoch=0, base_sequence=15)
    last.write_bytes(last.read_bytes() + extra[: len(extra) // 2])
    diverged = list(batches)
    diverged[2] = data_batch(
        103, 2, producer_id=7, producer_epoch=0, base_sequence=40, leader_epoch=1
    )
    write_partition_dir(root, "broker-2", "orders", 0, *diverged[:4])
    write_partition_dir(
        root, "broker-1", "orders", 1,
        data_batch(0, 2, producer_id=11, producer_epoch=0, base_sequence=0),
        data_batch(2, 1, producer_id=11, producer_epoch=0, base_sequence=5),
    )  # fmt: skip
    for broker in ("broker-1", "broker-2"):
        (root / broker / "log-start-offset-checkpoint").write_text(
            checkpoint_text([("orders", 0, 100), ("orders", 1, 0)])
        )
        (root / broker / "replication-offset-checkpoint").write_text(
            checkpoint_text([("orders", 0, 107), ("orders", 1, 3)])
        )
    (root / "README.txt").write_text("copied from the brokers by the nightly job\n")


def _table(warehouse: str, name: str, prefix: str) -> list[tuple]:
    """The table's rows, sorted, without the run's own columns, with `prefix` as `<root>`."""
    rows = DeltaTable(warehouse + "/" + name).to_pyarrow_table().to_pylist()
    normalized = [
        tuple(
            (k, v.replace(prefix, "<root>") if isinstance(v, str) else v)
            for k, v in sorted(row.items())
            if k not in _RUN_COLUMNS
        )
        for row in rows
    ]
    return sorted(normalized, key=repr)


def _audit(spark, path: str, warehouse: Path):
    inputs = AuditInputs(batches=(path,))
    result = run_audit(spark, inputs, AuditConfig(), str(warehouse))
    return result, default_run_id(inputs, AuditConfig())


# The object store's tests wait as well as compute: run last (2026-11-27, no cost marker), the
# machine's 2 cores were idle for 12 core-seconds of their 17 s. Started early, by their cost,
# they wait while the other worker's tests use the cores.
@pytest.mark.cost(10)  # two audits, one of them over S3
@pytest.mark.parametrize("kind", ["segments", "dump-log"])
def test_s3_audit_equals_local_audit(spark, s3, tmp_path, kind):
    local = tmp_path / "export"
    _export(local)
    if kind == "dump-log":
        segment = local / "broker-1" / "orders-0" / "00000000000000000100.log"
        text = format_dump_log(str(segment), segment.read_bytes())
        batch_line = next(line for line in text.splitlines() if line.startswith("baseOffset"))
        text += batch_line[: len(batch_line) // 2] + "\n"  # a line cut by the copy: quarantined
        local = tmp_path / "dump"
        local.mkdir()
        (local / "orders-0.txt").write_text(text)
    uri = f"s3://{BUCKET}/{kind}"
    pafs.copy_files(str(local), f"{BUCKET}/{kind}", destination_filesystem=s3)

    on_disk, disk_run = _audit(spark, str(local), tmp_path / "wh-disk")
    on_s3, s3_run = _audit(spark, uri, tmp_path / "wh-s3")

    assert on_s3.batches_read == on_disk.batches_read > 0
    assert on_s3.batches_quarantined == on_disk.batches_quarantined > 0
    assert on_s3.findings_by_type == on_disk.findings_by_type != []
    assert s3_run.startswith("run-") and s3_run != disk_run
    for table in ("findings", "quarantine", "transactions", "partition_summary", "input_files"):
        s3_rows = _table(str(tmp_path / "wh-s3"), table, uri)
        assert s3_rows == _table(str(tmp_path / "wh-disk"), table, str(local)), table
    listed = {
        r["path"]: r["status"]
        for r in DeltaTable(str(tmp_path / "wh-s3" / "input_files")).to_pyarrow_table().to_pylist()
    }
    expected = {
        f"s3://{BUCKET}/{kind}/{p.relative_to(local)}" for p in local.rglob("*") if p.is_file()
    }
    assert set(listed) == expected
    # The statuses are the disk run's (compared above); the objects read are among them.
    assert {"READ", "DAMAGED"} & set(listed.values())


def test_a_missing_object_is_named(spark, s3, tmp_path):
    with pytest.raises(InputNotFoundError, match=f"s3://{BUCKET}/nothing-here"):
        run_audit(
            spark, AuditInputs(batches=(f"s3://{BUCKET}/nothing-here",)), AuditConfig(),
            str(tmp_path / "wh"),
        )  # fmt: skip


def test_an_unreachable_store_is_named(spark, s3, tmp_path, monkeypatch):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    # One attempt per request: with the SDK's three, each request takes about 1.6 s to give up.
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    with pytest.raises(InputUnreadableError, match=f"cannot read input s3://{BUCKET}/export: "):
        run_audit(
            spark, AuditInputs(batches=(f"s3://{BUCKET}/export",), batches_format="segments"),
            AuditConfig(), str(tmp_path / "wh"),
        )  # fmt: skip


class _SlowDown(BaseHTTPRequestHandler):
    """An S3 endpoint that answers every request `503 Slow Down` (an error the SDK retries)."""

    requests = 0
    counting = threading.Lock()  # the server answers each connection in a thread of its own

    def _answer(self) -> None:
        with self.counting:
            type(self).requests += 1
        body = b"<Error><Code>SlowDown</Code><Message>Reduce your request rate.</Message></Error>"
        self.send_response(503)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_HEAD = do_PUT = do_POST = _answer  # noqa: N815 (http.server's names)

    def log_message(self, *args) -> None:  # quiet
        pass


@pytest.mark.cost(5)  # two runs that wait on the SDK's retries
def test_aws_max_attempts_is_the_attempts_of_each_request(spark, s3, tmp_path, monkeypatch):
    """As in the AWS SDKs and CLI: AWS_MAX_ATTEMPTS=2 tries each request twice, 1 once."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowDown)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{server.server_address[1]}")
    uri = f"s3://{BUCKET}/export"
    counts = {}
    try:
        for attempts in (1, 2):
            monkeypatch.setenv("AWS_MAX_ATTEMPTS", str(attempts))
            _SlowDown.requests = 0
            with pytest.raises(InputUnreadableError, match=f"cannot read input {uri}: "):
                run_audit(spark, AuditInputs(batches=(uri,)), AuditConfig(), str(tmp_path / "wh"))
            counts[attempts] = _SlowDown.requests
    finally:
        server.shutdown()
    assert counts[1] >= 1 and counts[2] == 2 * counts[1], counts
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "none")
    with pytest.raises(ConfigError, match="AWS_MAX_ATTEMPTS='none': .* a whole number, 1 or more"):
        run_audit(spark, AuditInputs(batches=(uri,)), AuditConfig(), str(tmp_path / "wh"))


def test_run_id_follows_the_listing_and_uris_are_read_once(s3):
    root = f"s3://{BUCKET}/fingerprint"
    with s3.open_output_stream(f"{BUCKET}/fingerprint/b1/t-0/00000000000000000000.log") as out:
        out.write(b"one")
    inputs = AuditInputs(batches=(root,))
    first = default_run_id(inputs, AuditConfig())
    assert default_run_id(inputs, AuditConfig()) == first  # the same objects: the same run
    with s3.open_output_stream(f"{BUCKET}/fingerprint/b1/t-0/00000000000000000000.log") as out:
        out.write(b"re-exported")
    assert default_run_id(inputs, AuditConfig()) != first  # another size: another run
    given = (root, root + "/", root + "/b1/t-0", f"s3://{BUCKET}/fingerprint-2")
    assert dedupe_paths(given) == (root, f"s3://{BUCKET}/fingerprint-2")


def test_objects_are_packed_into_tasks_by_the_sizes_one_listing_gives(s3):
    """Files given without sizes are weighed from one listing of their folder in the store."""
    from eos_audit.sources.files.file_source import SplitSettings, pack_files

    mb = 1 << 20
    for name, size in (("big.txt", 3 * mb), ("small.txt", mb)):
        with s3.open_output_stream(f"{BUCKET}/sizes/{name}") as out:
            out.write(b"x" * size)
    files = [{"path": f"s3://{BUCKET}/sizes/{n}"} for n in ("missing.txt", "small.txt", "big.txt")]
    packed = pack_files(files, SplitSettings(max_partition_bytes=4 * mb, open_cost_bytes=mb))
    # As on a local disk (tests/sources/test_file_source.py): the 3 MB object alone, the missing
    # one weighing its open cost only, beside the 1 MB one.
    assert [[f["path"].rsplit("/", 1)[1] for f in p] for p in packed] == [
        ["big.txt"],
        ["small.txt", "missing.txt"],
    ]


class _Refusing(BaseHTTPRequestHandler):
    """A proxy in front of the S3 server that refuses to serve some objects' bytes.

    Listings and HEADs pass through; a GET of a key in `denied` is answered `403 AccessDenied`
    (a policy that lets a role list a prefix but not read one object), of a key in `deleted`
    `404 NoSuchKey` (an object deleted between the listing and its read).
    """

    upstream = ""
    denied: frozenset[str] = frozenset()
    deleted: frozenset[str] = frozenset()

    def _refuse(self, status: int, code: str) -> None:
        body = f"<Error><Code>{code}</Code><Message>{code}</Message></Error>".encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _forward(self) -> None:
        import http.client

        key = self.path.split("?", 1)[0]
        if self.command == "GET" and key in self.denied:
            return self._refuse(403, "AccessDenied")
        if self.command == "GET" and key in self.deleted:
            return self._refuse(404, "NoSuchKey")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        connection = http.client.HTTPConnection(self.upstream, timeout=30)
        connection.request(self.command, self.path, body=body, headers=dict(self.headers))
        answer = connection.getresponse()
        data = answer.read()
        self.send_response(answer.status)
        for name, value in answer.getheaders():
            # A HEAD's Content-Length is the object's size: passed on as it is.
            if name.lower() not in ("transfer-encoding", "connection") and (
                name.lower() != "content-length" or self.command == "HEAD"
            ):
                self.send_header(name, value)
        if self.command != "HEAD":
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        connection.close()

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward  # noqa: N815

    def log_message(self, *args) -> None:  # quiet
        pass


@pytest.mark.cost(8)
def test_objects_listed_but_not_readable_are_input_unreadable_and_no_verdict_rests_on_them(
    spark, s3, tmp_path, monkeypatch
):
    """One object read access denied, one deleted after the listing: each named, each in
    input_files with its reason, the counts reconciled, and no verdict built on the hole."""
    from tests.cli_runs import sql

    local = tmp_path / "export"
    batches = [data_batch(i, 1, producer_id=7, producer_epoch=0, base_sequence=i) for i in range(6)]
    write_partition_dir(local, "1", "orders", 0, *batches, segment_bytes=150)
    write_partition_dir(local, "1", "orders", 1, data_batch(0, 1, producer_id=8, producer_epoch=0,
                                                            base_sequence=0))  # fmt: skip
    segments = sorted((local / "1" / "orders-0").glob("*.log"))
    assert len(segments) >= 3
    pafs.copy_files(str(local), f"{BUCKET}/refused", destination_filesystem=s3)
    key = f"/{BUCKET}/refused/1"
    denied = f"{key}/orders-0/{segments[1].name}"  # a middle segment: its hole is a "gap"
    deleted = f"{key}/orders-1/{next((local / '1' / 'orders-1').glob('*.log')).name}"
    _Refusing.upstream = os.environ["AWS_ENDPOINT_URL"].removeprefix("http://")
    _Refusing.denied, _Refusing.deleted = frozenset({denied}), frozenset({deleted})
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{proxy.server_address[1]}")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    warehouse = tmp_path / "wh"
    try:
        result = run_audit(
            spark, AuditInputs(batches=(f"s3://{BUCKET}/refused",)), AuditConfig(), str(warehouse)
        )
    finally:
        proxy.shutdown()
    uris = {f"s3:/{path}" for path in (denied, deleted)}
    assert result.status == "INPUT_UNREADABLE", result
    assert all(uri in result.error for uri in uris), result.error
    files = {r["path"]: r for r in sql(warehouse, "input_files", "SELECT * FROM t")}
    for uri in uris:
        assert files[uri]["status"] == "UNREADABLE" and files[uri]["reason"], files[uri]
    listed = {f"s3://{BUCKET}/refused/{p.relative_to(local)}" for p in local.rglob("*")
              if p.is_file()}  # fmt: skip
    assert set(files) == listed
    (run,) = sql(warehouse, "audit_runs", "SELECT * FROM t")
    assert run["batches_read"] == sum(r["batches_read"] or 0 for r in files.values())
    # The denied segment's offsets and sequences look missing: those holes are no verdict
    # (docs/rules.md#causes).
    found = sql(warehouse, "findings", "SELECT finding_type, severity, cause, partition FROM t")
    assert sorted((f["finding_type"], f["partition"]) for f in found) == [
        ("OFFSET_GAP", 0),
        ("SEQUENCE_GAP", 0),
    ]
    assert {(f["severity"], f["cause"]) for f in found} == {("INFO", "UNREADABLE_INPUT")}
    assert (run["findings_critical"], run["findings_info"]) == (0, 2)


@pytest.mark.cost(6)  # a night's audit, and two runs that stop at Spark's read
def test_delta_tables_on_s3_are_found_by_delta_rs_and_read_by_spark_through_a_connector(
    spark, s3, tmp_path, capsys, monkeypatch
):
    # A Delta table of batches and a producer_state table on the object store. delta-rs reads
    # their logs there (the endpoint from the environment, plain HTTP allowed); Spark reads their
    # Parquet files through the cluster's connector, which the suite's session does not have:
    # one line naming it, the scheme as given (s3a://, not delta-rs's s3://), exit 2.
    day_1 = tmp_path / "day-1"
    day_1.mkdir()
    schema = to_arrow_schema(NULLABLE_BATCH)
    pq.write_table(pa.Table.from_pylist(DAY_1, schema=schema), day_1 / "part-0.parquet")
    night_1 = tmp_path / "night-1"
    run_audit(spark, AuditInputs(batches=(str(day_1),)), AuditConfig(), str(night_1), "night-1")
    local = tmp_path / "night-2-inputs"
    write_deltalake(str(local / "day-2"), pa.Table.from_pylist(DAY_2, schema=schema))
    shutil.copytree(night_1 / "producer_state", local / "producer_state")
    shutil.copytree(night_1 / "audit_runs", local / "audit_runs")
    pafs.copy_files(str(local), f"{BUCKET}/night-2", destination_filesystem=s3)
    capsys.readouterr()

    batches = ["--batches", f"s3a://{BUCKET}/night-2/day-2", "--batches-format", "delta"]
    state = ["--batches", str(day_1), "--producer-state", f"s3://{BUCKET}/night-2/producer_state"]
    for args, scheme in ((batches, "s3a"), (state, "s3")):
        code = cli.main(["audit", *args, "--warehouse", str(tmp_path / f"wh-{scheme}")])
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if not line.startswith("20")]  # log lines
        assert code == 2, err
        assert lines == [
            f"eos-audit: error: Spark cannot read {scheme}:// URIs in this session: it has no "
            "filesystem connector for the scheme. Parquet, JSON, CSV and Delta inputs on an "
            "object store are read by Spark and need the cluster's connector (hadoop-aws for "
            "s3a://: README, Inputs on object stores); Kafka's own files are read without one"
        ], err
    # What Spark is asked to read: the table's data files, under the URI as given.
    asked: list[str] = []

    def parquet(reader, *files):
        asked.extend(files)
        return spark.range(0)

    monkeypatch.setattr(DataFrameReader, "parquet", parquet)
    delta_dataframe(spark, f"s3a://{BUCKET}/night-2/day-2", StructType([]))
    (day_2,) = [Path(f).name for f in DeltaTable(str(local / "day-2")).file_uris()]
    assert asked == [f"s3a://{BUCKET}/night-2/day-2/{day_2}"]
