"""Audit throughput against the floor: `./run.sh bench [--rows 1000000 10000000]`.

For each size, synthetic record batches (128 topic-partitions, 40 producers each, a few injected
duplicates and gaps) are written once to Parquet under bench/data/. Then, in the same Spark
session and best of `--repeat` runs each:

- floor: Spark reads the same columns, shuffles them by (topic, partition) and sorts them by
  (topic, partition, base_offset) into the no-op sink: the least any audit must do;
- minimum: the floor plus the two orders the rules cannot do without, as the engine issue asks
  for them (window functions, one shuffle): one window in log order per partition (a running
  maximum of earlier last offsets, as OFFSET_OVERLAP needs) and one per producer (the previous
  batch's next sequence, as SEQUENCE_GAP needs), keeping the rows either flags. Two sorts and two
  Window operators: no audit built that way can be faster, so minimum/floor bounds what
  audit/floor can reach on this machine;
- audit: the whole engine (validation, every rule, one shuffle) into the no-op sink;
- pipeline: `run_audit`, i.e. the audit plus staging and the Delta writes of findings, quarantine
  and the run record (reported for the largest size only unless --pipeline-all).

Printed: batches per second for each, and the minimum/floor and audit/floor ratios. Results are
appended to bench/results/results.jsonl.
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


def timed(action, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--pipeline-all", action="store_true")
    parser.add_argument(
        "--no-audit",
        action="store_true",
        help="time only the floor and the minimum (a quick look at what the target allows)",
    )
    args = parser.parse_args()

    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from eos_audit import engine
    from eos_audit.config import AuditConfig
    from eos_audit.pipeline import AuditInputs, run_audit
    from eos_audit.session import get_spark
    from eos_audit.sources.files import read_tabular

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

        def minimum(data=data, columns=columns):
            log_order = Window.partitionBy("topic", "partition").orderBy("base_offset")
            producer_order = Window.partitionBy("topic", "partition", "producer_id").orderBy(
                "base_offset"
            )
            earlier = log_order.rowsBetween(Window.unboundedPreceding, -1)
            next_sequence = F.col("base_sequence") + F.col("record_count")
            (
                spark.read.parquet(str(data))
                .select(*columns)
                .withColumn("_prev_max_last", F.max("last_offset").over(earlier))
                .withColumn("_expected", F.lag(next_sequence).over(producer_order))
                .where(
                    (F.col("base_offset") <= F.col("_prev_max_last"))
                    | (F.col("base_sequence") != F.col("_expected"))
                )
                .write.format("noop")
                .mode("overwrite")
                .save()
            )

        def audit(data=data):
            batches = read_tabular(spark, [str(data)], "parquet")
            engine.audit(batches, AuditConfig(), "bench").write.format("noop").mode(
                "overwrite").save()

        floor_s = timed(floor, args.repeat)
        minimum_s = timed(minimum, args.repeat)
        result = {"rows": rows, "cores": cores, "floor_s": round(floor_s, 2),
                  "minimum_s": round(minimum_s, 2),
                  "minimum_ratio": round(minimum_s / floor_s, 2),
                  "floor_batches_per_s": int(rows / floor_s)}
        if args.no_audit:
            print(
                f"{rows:>11,} batches  floor {floor_s:7.2f}s  minimum {minimum_s:7.2f}s  "
                f"minimum/floor {minimum_s / floor_s:4.2f}",
                flush=True,
            )
            results.append(result)
            continue
        audit_s = timed(audit, args.repeat)
        result.update({"audit_s": round(audit_s, 2), "ratio": round(audit_s / floor_s, 2),
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
            f"minimum {minimum_s:7.2f}s (minimum/floor {minimum_s / floor_s:4.2f})  "
            f"audit {audit_s:7.2f}s ({rows / audit_s:>10,.0f}/s)  audit/floor "
            f"{audit_s / floor_s:4.2f}"
            + (f"  pipeline {result['pipeline_s']:7.2f}s" if "pipeline_s" in result else ""),
            flush=True,
        )
        results.append(result)
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    with (out / "results.jsonl").open("a") as f:
        for r in results:
            f.write(json.dumps({**r, "spark": spark.version, "machine": platform.node(),
                                "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}) + "\n")


if __name__ == "__main__":
    main()
