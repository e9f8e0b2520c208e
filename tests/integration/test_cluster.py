"""The nightly job on a real Spark cluster: a standalone master and two workers on localhost.

The cluster is started from the pyspark installation (`spark-class` with the deploy Master and
Worker classes, nothing downloaded), the audit runs through `spark-submit.sh --master spark://...`
so the executors are other processes that get the library as the zip spark-submit ships, and the
tables it writes must equal those of the same audit run locally. The input is a broker export
(segments), so the Kafka readers run on the executors too.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from eos_audit.audit.pipeline import AuditInputs, run_audit
from eos_audit.config import AuditConfig
from tests.conftest import TINY_QUERIES, submit_conf_args
from tests.fixtures.segment_builder import write_tree

# Two to four minutes on 2 cores (three JVMs and their Python workers): `./run.sh test` starts it
# first, beside the other tests; `./run.sh test -m cluster` runs it alone.
pytestmark = [pytest.mark.slow, pytest.mark.cluster, pytest.mark.cost(60)]

REPO = Path(__file__).resolve().parents[2]
# Every table the run writes, with the columns that identify a row (audit_runs is compared apart:
# its times and durations differ between any two runs).
TABLES = {
    "findings": "finding_id",
    "quarantine": "quarantine_id",
    "transactions": "transaction_id",
    "partition_summary": "topic, partition",
    "producer_sessions": "topic, partition, producer_id, producer_epoch",
    "producer_state": "topic, partition, producer_id",
}


def _free_ports(n: int) -> list[int]:
    """`n` distinct free ports: every socket stays bound until all are chosen, so none repeats."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


def _master_state(webui_port: int) -> dict:
    """The master's own view of the cluster (its web UI's JSON); empty while it is not up.

    For a few milliseconds after the UI starts listening, `/json/` answers with the HTML page
    (measured on Spark 4.2: the JSON handler is attached after the page's), so an answer that is
    not JSON means "not yet", like a refused connection.
    """
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{webui_port}/json/", timeout=2) as r:
            return json.load(r)
    except (OSError, ValueError):
        return {}


@pytest.fixture(scope="module")
def standalone_master(tmp_path_factory) -> Iterator[tuple[str, int]]:
    """A master and two one-core workers; yields the master URL and web UI port.

    The processes are stopped by their ids (each in its own process group) at the end.
    """
    work = tmp_path_factory.mktemp("cluster")
    port, webui, *worker_webuis = _free_ports(4)
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        # The suite's JVM flags (tests/conftest.py) for the master, the workers
        # and the executors they start (which inherit a worker's environment).
        "JAVA_TOOL_OPTIONS": os.environ.get("SPARK_SUBMIT_OPTS", ""),
    }
    log = (work / "cluster.log").open("w")
    procs = [
        subprocess.Popen(
            [_spark_class(), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(port), "--webui-port", str(webui)],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
    ]  # fmt: skip
    url = f"spark://127.0.0.1:{port}"
    try:
        for n in range(2):
            procs.append(
                subprocess.Popen(
                    [_spark_class(), "org.apache.spark.deploy.worker.Worker", url, "--host",
                     "127.0.0.1", "--cores", "1", "--memory", "1g", "--webui-port",
                     str(worker_webuis[n]), "--work-dir", str(work / f"worker-{n}")],
                    env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                )
            )  # fmt: skip
        deadline = time.monotonic() + 120
        while _master_state(webui).get("aliveworkers", 0) < 2:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                log.flush()
                pytest.fail("the standalone cluster did not start:\n"
                            + (work / "cluster.log").read_text()[-3000:])  # fmt: skip
            time.sleep(0.5)
        yield url, webui
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        log.close()


def _rows(table: Path, order: str) -> list[dict]:
    rows = pa.table(DeltaTable(str(table)).to_pyarrow_table()).to_pylist()
    keys = [k.strip() for k in order.split(",")]
    return sorted(rows, key=lambda r: tuple(str(r[k]) for k in keys))


def test_a_standalone_cluster_writes_the_tables_a_local_run_writes(
    spark, standalone_master, tmp_path
):
    master_url, webui = standalone_master
    export = tmp_path / "export"
    write_tree(export, brokers=3, partitions=2, replication=2, batches_per_partition=30, seed=7)
    cluster_wh, local_wh = tmp_path / "cluster-wh", tmp_path / "local-wh"
    env = {
        **os.environ,
        "SPARK_MASTER": master_url,
        # The suite's settings for tiny queries (tests/conftest.py): the test is about where the
        # work runs, not about generated code, which the wheel's demo runs.
        "EXTRA_SUBMIT_ARGS": "--executor-memory 768m --total-executor-cores 2 "
        + " ".join(submit_conf_args(TINY_QUERIES)),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    # The local run goes on the suite's session while the cluster runs the same audit: most of
    # the cluster's time is its JVMs starting and its driver waiting on them, so the two overlap
    # (the test's wall time, not its CPU). The job's output goes to files, never to a pipe nobody
    # reads while the local run goes on.
    stdout, stderr = tmp_path / "submit.out", tmp_path / "submit.err"
    with stdout.open("w") as out, stderr.open("w") as err:
        submit = subprocess.Popen(
            [str(REPO / "spark-submit.sh"), "--no-delta", "audit", "--batches", str(export),
             "--batches-format", "segments", "--warehouse", str(cluster_wh), "--run-id", "night",
             "--fail-on", "never"],
            env=env, stdout=out, stderr=err,
        )  # fmt: skip
    try:
        run_audit(
            spark,
            AuditInputs(batches=(str(export),), batches_format="segments"),
            AuditConfig(),
            str(local_wh),
            run_id="night",
        )
        returncode = submit.wait(timeout=600)
    finally:
        if submit.poll() is None:
            submit.kill()
            submit.wait()
    assert returncode == 0, stdout.read_text()[-3000:] + stderr.read_text()[-3000:]
    # The job ran on the cluster: the master lists it as a finished application of its workers.
    apps = _master_state(webui).get("completedapps", [])
    assert [a["name"] for a in apps] == ["eos-audit"] and apps[0]["cores"] == 2, apps

    for table, order in TABLES.items():
        assert _rows(cluster_wh / table, order) == _rows(local_wh / table, order), table
    (cluster_run,) = _rows(cluster_wh / "audit_runs", "run_id")
    (local_run,) = _rows(local_wh / "audit_runs", "run_id")
    for column in ("status", "batches_read", "batches_audited", "batches_quarantined"):
        assert cluster_run[column] == local_run[column], column
    assert cluster_run["batches_audited"] > 0
