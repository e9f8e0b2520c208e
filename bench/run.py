"""Audit throughput against the floor: `./run.sh bench [--rows 1000000 10000000]`.

For each size, synthetic record batches (128 topic-partitions, 40 producers each, a few injected
duplicates and gaps) are written once to Parquet under bench/data/. Then, in the same Spark
session and best of `--repeat` runs each:

- floor: Spark reads the same columns, shuffles them by (topic, partition) and sorts them by
  (topic, partition, base_offset) into the no-op sink: the least any audit must do;
- transfer: the audit's own input side (validation, the replay rows, the shuffle and the sort in
  replay order) and a `mapInArrow` that only receives the rows the kernel receives: the least an
  Arrow-based replay can cost;
- audit: the whole engine (validation, the compiled replay of every rule, the output records)
  into the no-op sink;
- pipeline: `run_audit`, i.e. the audit plus staging and the Delta writes (largest size only).

With `--processes`, the largest size is also timed as whole processes: the `eos-audit audit` CLI
end to end (read, audit, Delta writes) next to a bare Spark job that reads and sorts the same data.
Printed: batches per second and the ratios; appended to bench/results/results.jsonl.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
PARTITIONS = 128
PRODUCERS = 40


def generate(rows: int, path: Path) -> Path:
    """Write `rows` synthetic batches as Parquet files of at most 1M rows, vectorised."""
    if path.exists():
        return path
    tmp = path.with_suffix(".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    chunk = 1_000_000
    for start in range(0, rows, chunk):
        i = np.arange(start, min(rows, start + chunk), dtype=np.int64)
        tp = i % PARTITIONS
        j = i // PARTITIONS  # batch index within its partition
        producer = j % PRODUCERS
        k = j // PRODUCERS  # batch index within its producer
        base_seq = (k * 3).astype(np.int64)
        # inject: every 100,003rd batch repeats its predecessor's range, every 250,007th skips 3
        dup = (i % 100_003) == 50_000
        base_seq = np.where(dup & (k > 0), base_seq - 3, base_seq)
        base_seq = np.where((i % 250_007) == 7, base_seq + 3, base_seq)
        table = pa.table({
            "topic": pa.array(np.char.add("topic-", (tp // 16).astype(str))),
            "partition": pa.array((tp % 16).astype(np.int32)),
            "base_offset": pa.array(j * 3),
            "last_offset": pa.array(j * 3 + 2),
            "producer_id": pa.array(tp * 1000 + producer),
            "producer_epoch": pa.array(np.zeros(len(i), dtype=np.int32)),
            "base_sequence": pa.array(base_seq.astype(np.int32)),
            "record_count": pa.array(np.full(len(i), 3, dtype=np.int32)),
            "is_transactional": pa.array(np.zeros(len(i), dtype=bool)),
            "is_control": pa.array(np.zeros(len(i), dtype=bool)),
            "partition_leader_epoch": pa.array(np.zeros(len(i), dtype=np.int32)),
            "max_timestamp": pa.array(1_700_000_000_000 + j * 10),
        })
        pq.write_table(table, tmp / f"part-{start // chunk:05d}.parquet")
    tmp.rename(path)
    return path


class MemorySampler:
    """Peak memory while an action runs, sampled every 0.2 s from a background thread.

    The driver's Python process (its resident set) and the JVM's heap in use. In local mode the
    JVM holds the executors too, so its heap includes their sort buffers; the Python driver is the
    driver alone. Neither should grow with the input: nothing of the batches reaches the driver.
    """

    def __init__(self, spark) -> None:
        self.spark = spark
        self.python_mb = 0.0
        self.jvm_mb = 0.0

    def _sample(self) -> None:
        with open("/proc/self/status") as status:
            rss_kb = next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))
        self.python_mb = max(self.python_mb, rss_kb / 1024)
        runtime = self.spark._jvm.java.lang.Runtime.getRuntime()
        self.jvm_mb = max(self.jvm_mb, (runtime.totalMemory() - runtime.freeMemory()) / 2**20)

    def run(self, action) -> None:
        import threading

        stop = threading.Event()

        def loop() -> None:
            while not stop.wait(0.2):
                self._sample()

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        try:
            action()
        finally:
            stop.set()
            thread.join()


def timed(action, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


BARE_JOB = """
import sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[*]").config("spark.ui.enabled", "false").getOrCreate()
(spark.read.parquet(sys.argv[1]).repartition("topic", "partition")
 .sortWithinPartitions("topic", "partition", "base_offset")
 .write.format("noop").mode("overwrite").save())
"""


def processes(rows: int) -> dict:
    """The CLI end to end and a bare Spark job over the same data, each a whole process."""
    import subprocess
    import sys

    data = HERE / "data" / f"batches-{rows}"
    warehouse = Path(tempfile.mkdtemp(prefix="eos-bench-cli-"))
    venv_bin = Path(sys.executable).parent
    try:
        start = time.perf_counter()
        subprocess.run(
            [str(venv_bin / "eos-audit"), "audit", "--batches", str(data), "--warehouse",
             str(warehouse), "--fail-on", "never"], check=True, capture_output=True,
        )  # fmt: skip
        cli_s = time.perf_counter() - start
    finally:
        shutil.rmtree(warehouse, ignore_errors=True)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", BARE_JOB, str(data)], check=True, capture_output=True)
    bare_s = time.perf_counter() - start
    print(
        f"{rows:>11,} batches as processes: eos-audit audit {cli_s:7.2f}s, bare read+sort job "
        f"{bare_s:7.2f}s ({cli_s / bare_s:4.2f}x)",
        flush=True,
    )
    return {"rows": rows, "cli_s": round(cli_s, 2), "bare_job_s": round(bare_s, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--pipeline-all", action="store_true")
    parser.add_argument(
        "--no-audit",
        action="store_true",
        help="time only the floor and the transfer line (a quick look at what the target allows)",
    )
    parser.add_argument(
        "--processes",
        action="store_true",
        help="also time the CLI end to end and a bare read-and-sort Spark job, as processes",
    )
    args = parser.parse_args()


    from eos_audit import engine
    from eos_audit.config import AuditConfig
    from eos_audit.pipeline import AuditInputs, run_audit
    from eos_audit.session import get_spark
    from eos_audit.sources.record_batches import read_tabular

    spark = get_spark("eos-audit-bench")
    spark.conf.set("spark.sql.shuffle.partitions", "16")
    cores = spark.sparkContext.defaultParallelism
    results = []
    for rows in args.rows:
        data = generate(rows, HERE / "data" / f"batches-{rows}")
        columns = ["topic", "partition", "base_offset", "last_offset", "producer_id",
                   "producer_epoch", "base_sequence", "record_count", "is_transactional",
                   "is_control", "partition_leader_epoch", "max_timestamp"]

        def floor(data=data, columns=columns):
            (spark.read.parquet(str(data)).select(*columns)
             .repartition("topic", "partition")
             .sortWithinPartitions("topic", "partition", "base_offset")
             .write.format("noop").mode("overwrite").save())

        def transfer(data=data):
            batches = read_tabular(spark, [str(data)], "parquet")
            schema = "n long"

            def receive(batches_in):
                for batch in batches_in:
                    batch.num_rows  # noqa: B018 - receive, nothing more
                return iter(())

            (engine.replay_rows(batches).mapInArrow(receive, schema)
             .write.format("noop").mode("overwrite").save())

        def audit(data=data):
            batches = read_tabular(spark, [str(data)], "parquet")
            engine.audit(batches, AuditConfig(), "bench").write.format("noop").mode(
                "overwrite").save()

        floor_s = timed(floor, args.repeat)
        transfer_s = timed(transfer, args.repeat)
        result = {"rows": rows, "cores": cores, "floor_s": round(floor_s, 2),
                  "transfer_s": round(transfer_s, 2),
                  "transfer_ratio": round(transfer_s / floor_s, 2),
                  "floor_batches_per_s": int(rows / floor_s)}
        if args.no_audit:
            print(
                f"{rows:>11,} batches  floor {floor_s:7.2f}s  transfer {transfer_s:7.2f}s  "
                f"transfer/floor {transfer_s / floor_s:4.2f}",
                flush=True,
            )
            results.append(result)
            continue
        memory = MemorySampler(spark)
        audit_s = timed(lambda audit=audit, memory=memory: memory.run(audit), args.repeat)
        result["jvm_heap_peak_mb"] = round(memory.jvm_mb)
        result["python_driver_peak_mb"] = round(memory.python_mb)
        result.update({"audit_s": round(audit_s, 2), "ratio": round(audit_s / floor_s, 2),
                       "audit_transfer_ratio": round(audit_s / transfer_s, 2),
                       "audit_batches_per_s": int(rows / audit_s)})
        if args.pipeline_all or rows == max(args.rows):
            warehouse = Path(tempfile.mkdtemp(prefix="eos-bench-"))
            try:
                def pipeline(data=data, warehouse=warehouse):
                    run_audit(spark, AuditInputs(batches=(str(data),)), AuditConfig(),
                              str(warehouse), run_id="bench")
                pipeline_s = timed(pipeline, 1)
            finally:
                shutil.rmtree(warehouse, ignore_errors=True)
            result["pipeline_s"] = round(pipeline_s, 2)
            result["pipeline_batches_per_s"] = int(rows / pipeline_s)
        print(
            f"{rows:>11,} batches  floor {floor_s:7.2f}s ({rows / floor_s:>10,.0f}/s)  "
            f"transfer {transfer_s:7.2f}s  audit {audit_s:7.2f}s ({rows / audit_s:>10,.0f}/s)  "
            f"audit/floor {audit_s / floor_s:4.2f}  audit/transfer {audit_s / transfer_s:4.2f}"
            + (f"  pipeline {result['pipeline_s']:7.2f}s" if "pipeline_s" in result else "")
            + f"  JVM heap peak {result['jvm_heap_peak_mb']:,.0f} MB"
            + f"  Python driver peak {result['python_driver_peak_mb']:,.0f} MB",
            flush=True,
        )
        results.append(result)
    if args.processes:
        results.append(processes(max(args.rows)))
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    with (out / "results.jsonl").open("a") as f:
        for r in results:
            f.write(json.dumps({**r, "spark": spark.version, "machine": platform.node(),
                                "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}) + "\n")


if __name__ == "__main__":
    main()
