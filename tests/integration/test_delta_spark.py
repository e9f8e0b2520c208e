"""Spark's own Delta writer end to end, through `./spark-submit.sh` as the README runs it.

Three nights over one warehouse with `--since-state`: the first written by delta-rs (the CLI in this
process, on the suite's session, which has no Delta jars), the second by delta-spark
(`./spark-submit.sh audit ... --since-state`, `--packages` resolved offline from the local Maven
repository that `tests/jars.py` filled), the third by delta-rs again. So delta-spark seeds from,
checks and appends to tables delta-rs wrote, and delta-rs from tables delta-spark wrote. The tables
must be those of the same three nights written by delta-rs alone (on local disk).

The warehouse is on moto's S3 server on 127.0.0.1, at one `s3a://` URI for both writers: delta-rs
writes it with the environment's endpoint and credentials, delta-spark through hadoop-aws
(`tests/jars.py`). The second night also reads its inputs with Spark's own readers from the store,
as README's connector section says they are read: the record batches are a Delta table and the
acknowledgements Parquet, at `s3a://` URIs. One JVM for all of it: a spark-submit run costs about
40 CPU-s on 2 cores.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql.pandas.types import to_arrow_schema

from eos_audit.schemas import ACKS, OUTPUT_TABLES
from eos_audit.sources.files.filesystems import delta_storage_options
from tests.builders import NULLABLE_BATCH, data
from tests.cli_runs import audit, no_html_report  # noqa: F401 (an autouse fixture)
from tests.conftest import JVM_OPTIONS, REPO, TINY_QUERIES, submit_conf_args
from tests.integration import test_object_store, test_object_store_warehouse
from tests.integration.test_incremental import DAY_1, DAY_2
from tests.jars import (
    DELTA_SPARK,
    DELTA_SPARK_JARS,
    HADOOP_AWS_JARS,
    HOW_TO_FETCH,
    in_local_maven_repository,
    required,
)

pytestmark = pytest.mark.slow

# moto's S3 server on 127.0.0.1, its endpoint and credentials in the environment (module-scoped).
s3 = test_object_store.s3
BUCKET = test_object_store.BUCKET
# The S3 credentials on the suite's Python workers too: they read the warehouse's producer_state.
workers_with_credentials = test_object_store_warehouse.workers_with_credentials
DELTA_COORDINATE = f"io.delta:delta-spark_2.13:{DELTA_SPARK}"
TABLES = tuple(OUTPUT_TABLES)  # every table a run writes
# Columns that differ between two runs of the same night by design: their times, and the writer
# audit_runs records (spark-delta or delta-rs).
RUN_COLUMNS = {"started_at", "finished_at", "writer"}

# Night 2 re-exports night 1's last three batches (skipped by --since-state); night 3 re-exports
# night 2's offset 13, and producer 1 writes night 2's last batch again: a duplicate found only
# through the state delta-spark wrote.
NIGHT_2 = [DAY_1[-3], DAY_1[-2], DAY_1[-1], *DAY_2]
NIGHT_3 = [DAY_2[-2], data(14, pid=4, epoch=1, seq=2), data(15, seq=3)]
ACKED_AT = dt.datetime(2026, 11, 23, 1, 0, tzinfo=dt.UTC)
# Producer 1's batch at offset 9 was acknowledged there; producer 2's sequences 2-4 were
# acknowledged at offset 10, where the log holds its sequence 5: ACKED_WRITE_LOST.
NIGHT_2_ACKS = [
    (ACKED_AT, "t", 0, 1, 0, 3, 1, 9, None, 0, "ack-9"),
    (ACKED_AT, "t", 0, 2, 0, 2, 3, 10, None, 0, "ack-10"),
]


def _jars_or_skip() -> None:
    """Skip (or in CI fail) without delta-spark in the local Maven repository or hadoop-aws."""
    missing = [s.name for s in (DELTA_SPARK_JARS, HADOOP_AWS_JARS) if not s.present()]
    if missing:
        reason = f"the jar sets {missing} are not fetched: {HOW_TO_FETCH}"
    elif not in_local_maven_repository(DELTA_COORDINATE):
        reason = (
            f"{DELTA_COORDINATE} is not in the local Maven repository (~/.m2), where "
            f"spark-submit's --packages resolves it offline: {HOW_TO_FETCH}, with mvn"
        )
    else:
        return
    if required():
        pytest.fail(f"CI needs delta-spark and hadoop-aws: {reason}", pytrace=False)
    pytest.skip(reason)


def _inputs(root: Path) -> dict[str, Path]:
    """The three nights' inputs on local disk: Parquet, night 2's batches as a Delta table."""
    batch_schema = to_arrow_schema(NULLABLE_BATCH)
    paths = {name: root / name for name in ("day-1", "day-2", "acks-2", "day-3")}
    for name, rows in (("day-1", DAY_1), ("day-3", NIGHT_3)):
        paths[name].mkdir(parents=True)
        table = pa.Table.from_pylist(rows, schema=batch_schema)
        pq.write_table(table, paths[name] / "part-0.parquet")
    write_deltalake(str(paths["day-2"]), pa.Table.from_pylist(NIGHT_2, schema=batch_schema))
    paths["acks-2"].mkdir()
    acks = [dict(zip(ACKS.fieldNames(), row, strict=True)) for row in NIGHT_2_ACKS]
    acks_schema = to_arrow_schema(ACKS, timezone="UTC")
    pq.write_table(
        pa.Table.from_pylist(acks, schema=acks_schema), paths["acks-2"] / "part-0.parquet"
    )
    return paths


def _night_args(batches: str, acks: str | None, warehouse: Path | str, night: int) -> list[str]:
    """README's nightly `audit --batches ... --warehouse ... --since-state`, and a run id."""
    args = ["--batches", batches, "--warehouse", str(warehouse), "--since-state"]
    # A URI's format is told from its name only: a folder of Parquet files is named.
    acks_args = ["--acks", acks, "--acks-format", "parquet"] if acks else []
    return [*args, *acks_args, "--run-id", f"night-{night}"]


def _in_process(capsys, batches: Path, acks: Path | None, warehouse: Path | str, night: int) -> str:
    """A night through the CLI on the suite's session (no Delta jars: delta-rs writes)."""
    code, out, err = audit(capsys, *_night_args(str(batches), acks and str(acks), warehouse, night))
    assert code in (0, 1), out + err  # 1: findings at or above critical
    assert "(writer: delta-rs)" in out
    return out


def _s3a_settings(endpoint: str) -> list[str]:
    """spark-submit's arguments for Spark's s3a:// readers of moto's server.

    Local mode: the executors are the driver's JVM, so hadoop-aws on the driver's class path
    serves them (a cluster gives it with --jars or --packages, or has it built in). The
    credentials come from the environment, as README says (AWS_ACCESS_KEY_ID, ...).
    """
    return [
        # Jar by jar: EXTRA_SUBMIT_ARGS is split by the shell, which would expand a folder's `*`.
        "--driver-class-path", os.pathsep.join(str(jar) for jar in HADOOP_AWS_JARS.jars()),
        *submit_conf_args({
            "spark.hadoop.fs.s3a.endpoint": endpoint,
            "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
            "spark.hadoop.fs.s3a.path.style.access": "true",
        }),
    ]  # fmt: skip


def _offline_jvm_options() -> str:
    """The suite's JVM flags, with every HTTP(S) request of the JVM sent to a closed port.

    Ivy (`--packages`) then cannot reach any repository: it resolves from ~/.m2 or fails. The
    S3 server on 127.0.0.1 is reached directly (http.nonProxyHosts).
    """
    proxies = "-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=9 -Dhttps.proxyHost=127.0.0.1 " \
        "-Dhttps.proxyPort=9 -Dhttp.nonProxyHosts=127.0.0.1|localhost"  # fmt: skip
    return f"{JVM_OPTIONS} {proxies}"


def _normalized(value, s3_root: str, local_root: str):
    """`value` with the S3 inputs' root written as the local one (a path, inside JSON, in maps)."""
    if isinstance(value, str):
        return value.replace(s3_root, local_root)
    if isinstance(value, dict):
        return {k: _normalized(v, s3_root, local_root) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_normalized(v, s3_root, local_root) for v in value]
    return value


def _table(warehouse: Path | str, table: str) -> list[dict]:
    """Every row of a warehouse's table, on local disk or on the S3 server, as delta-rs reads it."""
    location = f"{warehouse}/{table}"
    options = delta_storage_options(location)
    return DeltaTable(location, storage_options=options).to_pyarrow_table().to_pylist()


def _rows(warehouse: Path | str, table: str, s3_root: str, local_root: str) -> list[str]:
    """The table's rows without the run columns, normalized and sorted (as JSON texts)."""
    rows = _table(warehouse, table)
    kept = [
        {k: _normalized(v, s3_root, local_root) for k, v in row.items() if k not in RUN_COLUMNS}
        for row in rows
    ]
    return sorted(json.dumps(row, sort_keys=True, default=str) for row in kept)


def _engines(s3: pafs.S3FileSystem, table: str) -> list[str]:
    """Which engine made each commit of a Delta table on the S3 server, in order (commitInfo)."""
    engines = []
    log = pafs.FileSelector(f"{table}/_delta_log")
    for commit in sorted(i.path for i in s3.get_file_info(log) if i.path.endswith(".json")):
        with s3.open_input_stream(commit) as text:
            for line in text.read().decode().splitlines():
                info = json.loads(line).get("commitInfo")
                if info:
                    engines.append(info.get("engineInfo", ""))
    return engines


@pytest.mark.cost(60)  # a spark-submit JVM with Delta (about 50 CPU-s), four runs in process
def test_nights_on_an_s3a_warehouse_alternate_between_delta_spark_and_delta_rs(
    spark, s3, workers_with_credentials, tmp_path, capsys
):
    _jars_or_skip()
    local = _inputs(tmp_path / "inputs")
    s3_root = f"s3a://{BUCKET}/nightly"
    for name in ("day-2", "acks-2"):
        pafs.copy_files(str(local[name]), f"{BUCKET}/nightly/{name}", destination_filesystem=s3)
    alternating, reference = f"{s3_root}/warehouse", tmp_path / "reference"

    _in_process(capsys, local["day-1"], None, alternating, 1)
    # The reference's night 1 is the same run: copied rather than run again.
    pafs.copy_files(f"{BUCKET}/nightly/warehouse", str(reference), source_filesystem=s3)
    # Night 2: spark-submit.sh, as README shows it, with the suite's settings for tiny queries.
    ivy = tmp_path / "ivy"  # an empty Ivy cache: everything comes from ~/.m2 on this run
    env = {
        **os.environ,
        "SPARK_SUBMIT_OPTS": _offline_jvm_options(),
        "SPARK_MASTER": "local[1]",
        "EXTRA_SUBMIT_ARGS": " ".join([
            *submit_conf_args({
                **TINY_QUERIES,
                "spark.jars.ivy": str(ivy),
                # Delta rebuilds a table's state in 50 partitions by default: 50 tasks a read.
                "spark.databricks.delta.snapshotPartitions": "1",
            }),
            *_s3a_settings(os.environ["AWS_ENDPOINT_URL"]),
        ]),
    }  # fmt: skip
    stdout, stderr = tmp_path / "submit.out", tmp_path / "submit.err"
    with stdout.open("w") as out, stderr.open("w") as err:
        submit = subprocess.Popen(
            [str(REPO / "spark-submit.sh"), "audit",
             *_night_args(f"{s3_root}/day-2", f"{s3_root}/acks-2", alternating, 2)],
            cwd=tmp_path, env=env, stdout=out, stderr=err,
        )  # fmt: skip
    try:
        # Meanwhile, on the suite's session, the same nights written by delta-rs alone.
        _in_process(capsys, local["day-2"], local["acks-2"], reference, 2)
        _in_process(capsys, local["day-3"], None, reference, 3)
        returncode = submit.wait(timeout=600)
    finally:
        if submit.poll() is None:
            submit.kill()
            submit.wait()
    logs = stdout.read_text()[-3000:] + stderr.read_text()[-5000:]
    assert returncode == 1, logs  # findings at or above critical, as in process
    assert "eos-audit run night-2: SUCCEEDED (writer: spark-delta)" in stdout.read_text(), logs
    # Resolved offline, from the local Maven repository, into an empty Ivy cache.
    assert f"io.delta#delta-spark_2.13;{DELTA_SPARK} from local-m2-cache" in stderr.read_text()
    _in_process(capsys, local["day-3"], None, alternating, 3)

    inputs = str(tmp_path / "inputs")
    for table in TABLES:
        alternating_rows = _rows(alternating, table, s3_root, inputs)
        reference_rows = _rows(reference, table, s3_root, inputs)
        if table == "input_files":  # a Parquet URI is listed as given: Spark lists its files
            acks = [r for r in alternating_rows if '"format": "acks"' in r]
            assert [json.loads(r)["path"] for r in acks] == [f"{inputs}/acks-2"], acks
            alternating_rows = [r for r in alternating_rows if r not in acks]
            reference_rows = [r for r in reference_rows if '"format": "acks"' not in r]
        assert alternating_rows == reference_rows, table
    # Each night's commits were made by the writer it ran with (night 1 creates the table).
    engines = _engines(s3, f"{BUCKET}/nightly/warehouse/findings")
    makers = [engine.split("/")[0].split(":")[0] for engine in engines]
    assert makers == ["delta-rs", "Apache-Spark", "delta-rs"], engines
    runs = sorted(_table(alternating, "audit_runs"), key=lambda r: r["run_id"])
    assert [(r["run_id"], r["writer"], r["status"], r["seeded_from_run"]) for r in runs] == [
        ("night-1", "delta-rs", "SUCCEEDED", None),
        ("night-2", "spark-delta", "SUCCEEDED", "night-1"),
        ("night-3", "delta-rs", "SUCCEEDED", "night-2"),
    ]
    assert [(r["batches_audited"], r["batches_skipped"]) for r in runs] == [(8, 0), (7, 3), (2, 1)]
    found = _table(alternating, "findings")
    assert sorted((f["run_id"], f["finding_type"], f["base_offset"]) for f in found) == [
        ("night-2", "ACKED_WRITE_LOST", 10),  # the Parquet acks, read over s3a
        ("night-2", "DUPLICATE_BATCH", 8),
        ("night-2", "FENCED_PRODUCER_EPOCH", 12),
        ("night-2", "SEQUENCE_GAP", 10),
        ("night-3", "DUPLICATE_BATCH", 15),  # of night 2's offset 9, known from its state
    ]
    listed = [r for r in _table(alternating, "input_files") if r["run_id"] == "night-2"]
    assert sorted((r["path"], r["format"]) for r in listed) == [
        (f"{s3_root}/acks-2", "acks"),
        (f"{s3_root}/day-2", "delta"),
    ]
