"""The audit, the demo and the report over Spark Connect write what a classic session writes.

The Spark Connect server is the plugin pyspark's own jars bring, in the JVM of the pytest worker's
session (tests/fixtures/connect_server.py). Its Python workers have an older eos_audit, and each
Connect session's artifacts are its own: each run must ship the client's code (`addArtifacts`).
The CLI runs as the user runs it, `eos-audit --remote sc://...` (or `SPARK_REMOTE`) in a
subprocess with no JVM of its own, from a folder of its own and with relative paths, which must
reach the server as absolute ones. The same audit runs meanwhile on the suite's classic session,
and every table must be equal.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pytest
from chispa import assert_df_equality
from deltalake import DeltaTable

from eos_audit import cli
from eos_audit.audit.pipeline import AuditInputs, run_audit
from eos_audit.config import AuditConfig, load_config
from eos_audit.demo import demo_inputs, write_demo_evidence, write_demo_export
from tests.builders import NULLABLE_BATCH
from tests.fixtures.segment_builder import write_tree
from tests.integration.test_incremental import DAY_1, DAY_2

pytestmark = [pytest.mark.slow, pytest.mark.connect]

# The data tables, with the columns that identify a row within a run (audit_runs is compared apart:
# its times and durations differ between any two runs).
TABLES = {
    "findings": "finding_id",
    "quarantine": "quarantine_id",
    "transactions": "transaction_id",
    "partition_summary": "run_id, topic, partition",
    "producer_sessions": "run_id, topic, partition, producer_id, producer_epoch",
    "producer_state": "run_id, topic, partition, producer_id",
    "list_offsets_errors": "run_id, topic, partition, spec, error",
}
RUN_COLUMNS = ("run_id", "status", "batches_read", "batches_audited", "batches_quarantined",
               "batches_skipped", "seeded_from_run")  # fmt: skip
RUN_TIMEOUT_S = 300
SHIPPED = "shipped this client's eos_audit to the Spark Connect session"


@contextmanager
def remote_cli(
    cwd: Path, *args: str, remote: str | None = None, env_remote: str | None = None
) -> Iterator[subprocess.Popen]:
    """The eos-audit CLI in a subprocess started in `cwd`, with --remote or SPARK_REMOTE.

    Started, not awaited: the classic run it is compared with runs meanwhile in this process (the
    client's Python and this one's planning overlap, and the JVM runs both). A run
    the block did not finish (`finish_remote`) is killed as the block ends, and any run after
    RUN_TIMEOUT_S (so a test waiting on its output does not wait for ever).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_REMOTE"))}
    if env_remote:
        env["SPARK_REMOTE"] = env_remote
    command = [sys.executable, "-m", "eos_audit.cli", *(["--remote", remote] if remote else [])]
    running = subprocess.Popen(
        [*command, *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    timeout = threading.Timer(RUN_TIMEOUT_S, running.kill)
    timeout.start()
    try:
        yield running
    finally:
        timeout.cancel()
        if running.poll() is None:
            running.kill()
            running.communicate()


def finish_remote(running: subprocess.Popen, stderr_read: str = "") -> subprocess.CompletedProcess:
    """Wait for a `remote_cli` run; its exit code must be 0 or 1 (findings)."""
    stdout, stderr = running.communicate()  # remote_cli's timer kills a run that hangs
    stderr = stderr_read + stderr
    assert running.returncode in (0, 1), stdout[-2000:] + stderr[-3000:]
    return subprocess.CompletedProcess(running.args, running.returncode, stdout, stderr)


def stderr_until(running: subprocess.Popen, line_part: str) -> str:
    """What the run wrote to stderr up to and with the first line containing `line_part`."""
    read = []
    for line in running.stderr:
        read.append(line)
        if line_part in line:
            break
    return "".join(read)


def _keys(table: str) -> list[str]:
    """The columns that identify a row of `table` in a warehouse of several runs."""
    keys = [k.strip() for k in TABLES.get(table, "run_id").split(",")]
    return keys if "run_id" in keys else ["run_id", *keys]


def _arrow(warehouse: Path, table: str) -> pa.Table | None:
    """A table of the warehouse (delta-rs), sorted by the columns that identify its rows."""
    path = warehouse / table
    if not (path / "_delta_log").is_dir():
        return None
    order = [(key, "ascending") for key in _keys(table)]
    return DeltaTable(str(path)).to_pyarrow_table().sort_by(order)


def assert_same_table(spark, over_connect: pa.Table, classic: pa.Table) -> None:
    """Equal row for row (both sorted by key), schemas equal but for nullability.

    Arrow compares them in this process; only tables that differ go to chispa (Spark DataFrames),
    which decides with nullability ignored and names the rows that differ.
    """
    if over_connect.equals(classic):
        return
    assert_df_equality(
        spark.createDataFrame(over_connect), spark.createDataFrame(classic), ignore_nullable=True
    )


def assert_same_tables(spark, connect_wh: Path, classic_wh: Path) -> None:
    """Every data table equal, row for row; audit_runs equal in what a run counted."""
    compared = 0
    for table in TABLES:
        over_connect, classic = _arrow(connect_wh, table), _arrow(classic_wh, table)
        assert (over_connect is None) == (classic is None), table
        if classic is not None:
            # Rows compared in key order: each key one row, or the order would be the sort's.
            assert classic.group_by(_keys(table)).aggregate([]).num_rows == classic.num_rows, table
            assert_same_table(spark, over_connect, classic)
            compared += classic.num_rows
    assert compared > 0
    runs = [_arrow(wh, "audit_runs").select(list(RUN_COLUMNS)) for wh in (connect_wh, classic_wh)]
    assert_same_table(spark, *runs)


@pytest.mark.cost(23)  # over Connect, and classic meanwhile
def test_the_demo_and_its_report_over_spark_connect_equal_a_classic_run(
    connect_server, spark, tmp_path
):
    # The demo's files, as the CLI writes them (it rewrites them, byte for byte, as it starts).
    batches, _ = write_demo_export(tmp_path / "export")
    inputs = demo_inputs(batches, write_demo_evidence(tmp_path / "export"))
    config = load_config(None).with_overrides(
        run={"max_quarantined_share": cli.DEMO_QUARANTINED_SHARE}
    )
    with remote_cli(
        tmp_path, "demo", "--warehouse", "wh-connect", "--export", "export", remote=connect_server
    ) as running:
        # The CLI wrote its export before it connected: the classic run reads it once it shipped.
        shipped = stderr_until(running, SHIPPED)
        assert SHIPPED in shipped, shipped[-3000:]  # the server's workers ran the client's code
        # The demo's audit on the classic session, over the same files, while the server audits.
        run_audit(spark, inputs, config, str(tmp_path / "wh-classic"), run_id="demo")
        done = finish_remote(running, shipped)
    assert "eos-audit run demo: SUCCEEDED" in done.stdout
    # Relative paths reached the server made absolute: the tables are in the client's folder.
    assert (tmp_path / "wh-connect" / "findings" / "_delta_log").is_dir()
    assert_same_tables(spark, tmp_path / "wh-connect", tmp_path / "wh-classic")

    # The report, written over Connect, shows every finding type of the run.
    report = (tmp_path / "wh-connect" / "reports" / "demo.html").read_text()
    types = set(_arrow(tmp_path / "wh-classic", "findings").column("finding_type").to_pylist())
    assert len(types) >= 8
    assert all(finding_type in report for finding_type in types), types


@pytest.mark.cost(10)  # over Connect, and classic meanwhile
def test_a_broker_export_over_spark_connect_equals_a_classic_run(connect_server, spark, tmp_path):
    """Segments: the readers of Kafka's files run in `mapInArrow` on the server's workers."""
    write_tree(tmp_path / "export", brokers=2, partitions=2, replication=2,
               batches_per_partition=30, seed=7)  # fmt: skip
    # --remote after the command, as it is written in a job's definition.
    inputs = AuditInputs(batches=(str(tmp_path / "export"),))
    with remote_cli(
        tmp_path, "audit", "--batches", "export", "--warehouse", "wh-connect", "--run-id",
        "night", "--fail-on", "never", "--remote", connect_server,
    ) as running:  # fmt: skip
        run_audit(spark, inputs, AuditConfig(), str(tmp_path / "wh-classic"), run_id="night")
        assert SHIPPED in finish_remote(running).stderr
    assert_same_tables(spark, tmp_path / "wh-connect", tmp_path / "wh-classic")


@pytest.mark.cost(30)  # 2 nights, each over Connect and classic side by side
def test_two_nights_with_since_state_over_spark_connect_equal_a_classic_pair(
    connect_server, spark, tmp_path
):
    """SPARK_REMOTE instead of --remote; night 2 re-exports night 1's last batches."""
    nights = {
        "night-1": DAY_1,
        "night-2": [DAY_1[-3], DAY_1[-2], DAY_1[-1], *DAY_2],
    }
    for night, rows in nights.items():
        spark.createDataFrame([tuple(r[f.name] for f in NULLABLE_BATCH) for r in rows],
                              NULLABLE_BATCH).write.parquet(str(tmp_path / night))  # fmt: skip
    for night in nights:
        inputs = AuditInputs(batches=(str(tmp_path / night),), since_state=True)
        with remote_cli(
            tmp_path, "audit", "--batches", night, "--warehouse", "wh-connect", "--since-state",
            "--run-id", night, env_remote=connect_server,
        ) as running:  # fmt: skip
            run_audit(spark, inputs, AuditConfig(), str(tmp_path / "wh-classic"), run_id=night)
            assert SHIPPED in finish_remote(running).stderr
    assert_same_tables(spark, tmp_path / "wh-connect", tmp_path / "wh-classic")
    runs = _arrow(tmp_path / "wh-connect", "audit_runs").to_pylist()
    (second,) = [run for run in runs if run["run_id"] == "night-2"]
    assert (second["seeded_from_run"], second["batches_skipped"]) == ("night-1", 3)


@pytest.mark.cost(6)  # a client process
def test_progress_over_spark_connect_comes_from_the_servers_progress_reports(
    connect_server, tmp_path
):
    """No status tracker on Connect: the stage's progress lines count the server's stages."""
    # 6M rows: about 1 s on 2 idle cores (the server runs no generated code), 2-3 s in the busy
    # suite; the server reports progress every 200 ms (connect_server.py), so several reports.
    code = f"""
import logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
from pyspark.sql import functions as F
from eos_audit import progress
from eos_audit.session import get_spark
spark = get_spark(remote={connect_server!r})
with progress.stage(spark, "night", "summing", interval_s=0.1):
    spark.range(0, 6_000_000, 1, 4).select(F.sum(F.col("id") % 7)).collect()
print(len(spark.client._progress_handlers))  # the client's list: no public accessor
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "run night: summing: done in" in done.stderr
    assert re.search(r"run night: summing: \d+ s, Spark stages \d+/\d+ done, tasks \d+/\d+",
                     done.stderr), done.stderr[-3000:]  # fmt: skip
    assert done.stdout.strip() == "0"  # the handler was removed with the stage


def test_no_server_at_the_remote_url_is_one_line_and_exit_2(tmp_path):
    free = subprocess.run([sys.executable, "-c", "import socket; s = socket.socket(); "
                           "s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "eos_audit.cli", "report", "--warehouse", "wh",
         "--remote", f"sc://127.0.0.1:{free}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"eos-audit: error: --remote sc://127.0.0.1:{free}: no Spark Connect server answers at "
        f"127.0.0.1:{free} ([Errno 111] Connection refused)"
    ]


@pytest.mark.cost(12)
def test_a_listener_that_is_not_spark_connect_is_one_line_and_exit_2_in_seconds(tmp_path):
    """An HTTP server, and a port that accepts connections and never answers: without a bound
    on the first call, the Connect client would wait forever."""
    import http.server
    import socket
    import threading

    http_server = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=http_server.serve_forever, daemon=True).start()
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # the kernel accepts the connections; nothing ever reads or answers them
    ports = [http_server.server_address[1], silent.getsockname()[1]]
    try:
        runs = [
            subprocess.Popen(
                [sys.executable, "-m", "eos_audit.cli", "report", "--warehouse", "wh",
                 "--remote", f"sc://127.0.0.1:{port}"],
                cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            for port in ports
        ]
        ended = [run.communicate(timeout=60) for run in runs]
    finally:
        http_server.shutdown()
        silent.close()
    for port, run, (_, err) in zip(ports, runs, ended, strict=True):
        assert run.returncode == 2, err
        assert err.strip().splitlines() == [
            f"eos-audit: error: --remote sc://127.0.0.1:{port}: 127.0.0.1:{port} accepts "
            "connections but gave no gRPC answer in 10 s: it is not a Spark Connect server (or "
            "one that is not ready; check the port, and use_ssl)"
        ]


# The generator, the audit and the score as a notebook or a job's script runs them in turn:
# `cli.main` three times in one process, over one Spark Connect session (the code shipped once).
# The generator's output says how to audit what it wrote; each command's exit code is printed.
_GENERATE_AUDIT_SCORE = """
import io, re, sys
from contextlib import redirect_stdout
from eos_audit import cli

remote = sys.argv[1]
generated = io.StringIO()
with redirect_stdout(generated):
    code = cli.main(["--remote", remote, "generate", "--output", "gen", "--batches", "5000"])
print(generated.getvalue())
print("EXIT generate", code)
audit = re.search(r"^audit it: +eos-audit audit (.*) --warehouse WAREHOUSE$",
                  generated.getvalue(), re.MULTILINE)
assert audit, generated.getvalue()
print("EXIT audit", cli.main(["--remote", remote, "audit", *audit.group(1).split(),
                              "--warehouse", "wh", "--fail-on", "never"]))
print("EXIT score", cli.main(["--remote", remote, "score", "--warehouse", "wh",
                              "--ground-truth", "gen/ground_truth"]))
"""


@pytest.mark.cost(15)  # a client process: three commands over one session
def test_a_generated_export_over_spark_connect_is_audited_and_scored_perfectly(
    connect_server, tmp_path
):
    """The generator, the audit and the score over Connect: every planted fault found, no other."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_REMOTE"))}
    done = subprocess.run([sys.executable, "-c", _GENERATE_AUDIT_SCORE, connect_server],
                          cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    exits = dict(line.split()[1:] for line in done.stdout.splitlines() if line.startswith("EXIT "))
    assert exits == {"generate": "0", "audit": "0", "score": "0"}, done.stderr[-3000:]
    assert done.stderr.count(SHIPPED) == 1, done.stderr[-3000:]  # one session, shipped once
    assert "PERFECT" in done.stdout and "NOT PERFECT" not in done.stdout, done.stdout


# A Spark Connect server in a process of its own (Spark's plugin beside a local session, as the
# suite's own server is), for a test that kills it.
_SERVER_OF_ITS_OWN = """
import sys, time
from pyspark.sql import SparkSession
SparkSession.builder.master("local[1]").config(map={
    "spark.plugins": "org.apache.spark.sql.connect.SparkConnectPlugin",
    "spark.connect.grpc.binding.address": "127.0.0.1",
    "spark.connect.grpc.binding.port": sys.argv[1],
    "spark.ui.enabled": "false",
}).getOrCreate()
print("ready", flush=True)
time.sleep(3600)
"""


@pytest.mark.cost(30)  # a server JVM of its own, and a client that outlives it
def test_a_server_that_dies_mid_run_fails_the_run_in_bounded_time_naming_it(tmp_path):
    import signal

    from tests.cli_runs import sql

    port = subprocess.run([sys.executable, "-c", "import socket; s = socket.socket(); "
                           "s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER_OF_ITS_OWN, port], cwd=tmp_path, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    client = None
    try:
        assert server.stdout.readline().strip() == "ready"
        batches, _ = write_demo_export(tmp_path / "export")
        env = {**os.environ, "EOS_AUDIT_CONNECT_RETRIES": "3"}  # seconds of retries, not minutes
        env.pop("SPARK_REMOTE", None)
        client = subprocess.Popen(
            [sys.executable, "-m", "eos_audit.cli", "audit", "--batches", str(batches),
             "--warehouse", "wh", "--run-id", "night", "--remote", f"sc://127.0.0.1:{port}"],
            cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        seen = []
        for line in client.stderr:  # the run is recorded RUNNING and starts reading: kill it
            seen.append(line)
            if "run night: reading" in line:
                os.killpg(server.pid, signal.SIGKILL)
                break
        assert any("run night: reading" in line for line in seen), "".join(seen)
        killed = time.monotonic()
        _, rest = client.communicate(timeout=120)
        assert time.monotonic() - killed < 90
    finally:
        for process in (client, server):
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL) if process is server else process.kill()
                process.wait()
    assert client.returncode == 2, "".join(seen) + rest
    (error,) = [line for line in rest.splitlines() if line.startswith("eos-audit: error:")]
    assert error == (
        f"eos-audit: error: --remote sc://127.0.0.1:{port}: the Spark Connect server stopped "
        "answering during the run (retried 3 times); the run is FAILED: restart the server and "
        "run again"
    )
    assert "This is a bug" not in rest
    runs = sql(tmp_path / "wh", "audit_runs", "SELECT run_id, status, error FROM t")
    assert [(r["run_id"], r["status"]) for r in runs] == [("night", "FAILED")]
