"""Audit throughput against the floor: `./run.sh bench [--rows 1000000 10000000]`.

For each size, synthetic record batches (128 topic-partitions, 40 producers each, a few injected
duplicates and gaps) are written once to Parquet under bench/data/. Then, in the same Spark
session, after one warm-up round, best of `--repeat` runs each:

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

With `--compare`, each size is also audited into Parquet findings (ours), and the same Parquet is
checked by DuckDB's one window query (bench/duckdb_rules.py) and by the sequential Python replay
of the tests' oracle (bench/sequential.py), each a process of its own: time, peak memory and
findings (finding_type, topic, partition, base_offset) compared with ours. With `--skew`, the
largest size is generated again with one partition holding 30% of the batches (one producer 30%
of that partition) and audited with the default settings.

Memory is sampled while the audit runs: the Python driver's resident set (the driver side), the
JVM's heap in use and resident set and, in local mode, the Python workers the JVM runs the
kernel in (the executor side). Printed: a table per size with batches per second and the ratios;
appended to bench/results/results.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench import offset_commits

HERE = Path(__file__).resolve().parent
PARTITIONS = 128
PRODUCERS = 40


SKEW_PARTITION_SHARE = 3  # of 10: one partition holds 30% of the batches
SKEW_PRODUCER_SHARE = 3  # of 10: one producer writes 30% of that partition


def _layout(i: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Uniform layout of global batch indexes: (topic-partition, batch index within it,
    producer, batch index within the producer)."""
    tp = i % PARTITIONS
    j = i // PARTITIONS
    return tp, j, j % PRODUCERS, j // PRODUCERS


def _skewed_layout(i: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Skewed layout: of every 10 batches 3 go to topic-partition 0, the others round the other
    127; within partition 0, of every 10 batches 3 are producer 0's, the others round 39 more."""

    def hot_before(n: np.ndarray, share: int) -> np.ndarray:  # hot indexes below n
        return (n // 10) * share + np.minimum(n % 10, share)

    is_hot = (i % 10) < SKEW_PARTITION_SHARE
    hot_j = hot_before(i, SKEW_PARTITION_SHARE)  # index within partition 0, if hot
    cold = i - hot_j  # index among the other partitions' batches, if not
    tp = np.where(is_hot, 0, 1 + cold % (PARTITIONS - 1))
    j = np.where(is_hot, hot_j, cold // (PARTITIONS - 1))
    is_hot_producer = (j % 10) < SKEW_PRODUCER_SHARE
    hot_k = hot_before(j, SKEW_PRODUCER_SHARE)
    cold_p = j - hot_k
    producer = np.where(
        is_hot,
        np.where(is_hot_producer, 0, 1 + cold_p % (PRODUCERS - 1)),
        j % PRODUCERS,
    )
    k = np.where(
        is_hot,
        np.where(is_hot_producer, hot_k, cold_p // (PRODUCERS - 1)),
        j // PRODUCERS,
    )
    return tp, j, producer, k


def data_path(rows: int, skew: bool = False) -> Path:
    """Where the bench data of `rows` batches lives (generated once)."""
    return HERE / "data" / (f"batches-skew-{rows}" if skew else f"batches-{rows}")


def generate(rows: int, path: Path, skew: bool = False) -> Path:
    """Write `rows` synthetic batches as Parquet files of at most 1M rows, vectorised.

    The injected faults depend on the global batch index only, so the skewed layout has the same
    ones: every 100,003rd batch repeats its predecessor's sequence range (a duplicate, then a gap
    at the producer's next batch), every 250,007th skips 3 sequences (a gap, then a duplicate).
    """
    if path.exists():
        return path
    tmp = path.with_suffix(".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    chunk = 1_000_000
    for start in range(0, rows, chunk):
        i = np.arange(start, min(rows, start + chunk), dtype=np.int64)
        tp, j, producer, k = (_skewed_layout if skew else _layout)(i)
        base_seq = (k * 3).astype(np.int64)
        dup = (i % 100_003) == 50_000
        base_seq = np.where(dup & (k > 0), base_seq - 3, base_seq)
        base_seq = np.where((i % 250_007) == 7, base_seq + 3, base_seq)
        table = pa.table(
            {
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
            }
        )
        pq.write_table(table, tmp / f"part-{start // chunk:05d}.parquet")
    tmp.rename(path)
    return path


def _parents() -> dict[int, list[int]]:
    """Every process's children, from /proc/<pid>/stat (field 4 is the parent's pid)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as stat:
                # the command name is in parentheses and may hold spaces: split after it
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    return children


def descendants(root: int) -> list[int]:
    """The pids of every process below `root`."""
    children, found, todo = _parents(), [], [root]
    while todo:
        below = children.get(todo.pop(), [])
        found.extend(below)
        todo.extend(below)
    return found


def memory_mb(pid: int, field: str = "Pss") -> float:
    """A process's proportional (`Pss`, from smaps_rollup) or resident (`VmRSS`) set in MB.

    The Python workers are forked from one daemon and share its pages: their proportional sets
    add up to what they use together, their resident sets would count the shared pages each time.
    """
    path = f"/proc/{pid}/smaps_rollup" if field == "Pss" else f"/proc/{pid}/status"
    try:
        with open(path) as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:  # gone, or smaps_rollup unreadable (before Linux 4.14)
        pass
    return 0.0


def ensure_data(rows: int, skew: bool = False) -> Path:
    """The bench data of `rows` batches, generated by a child process if it is not there yet.

    In a child, so the arrays and Arrow buffers of the generation never count in the driver's
    resident set (Arrow's memory pool keeps what it freed).
    """
    path = data_path(rows, skew)
    if not path.exists():
        code = "import sys; from bench.run import data_path, generate; " \
               "generate(int(sys.argv[1]), data_path(int(sys.argv[1]), sys.argv[2] == 'skew'), " \
               "sys.argv[2] == 'skew')"  # fmt: skip
        subprocess.run([sys.executable, "-c", code, str(rows), "skew" if skew else "uniform"],
                       check=True, cwd=HERE.parent)  # fmt: skip
    return path


class MemorySampler:
    """Peak memory while an action runs, sampled every 0.2 s from a background thread.

    Driver side: the driver's Python process (its resident set). Executor side: the JVM's heap in
    use and its resident set (in local mode the JVM holds the executors too, so its heap includes
    their sort buffers), and in local mode the Python workers the JVM runs `mapInArrow`'s kernel
    in (the sum of their proportional sets at one instant). The driver should not grow with the
    input: nothing of the batches reaches it.
    """

    def __init__(self, spark) -> None:
        self.spark = spark
        self.python_mb = 0.0
        self.jvm_mb = 0.0
        self.jvm_rss_mb = 0.0
        self.workers_mb = 0.0
        self.jvm_pid = None
        if spark.sparkContext.master.startswith("local"):
            self.jvm_pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())

    def _sample(self) -> None:
        self.python_mb = max(self.python_mb, memory_mb(os.getpid(), "VmRSS"))
        runtime = self.spark._jvm.java.lang.Runtime.getRuntime()
        self.jvm_mb = max(self.jvm_mb, (runtime.totalMemory() - runtime.freeMemory()) / 2**20)
        if self.jvm_pid is not None:
            self.jvm_rss_mb = max(self.jvm_rss_mb, memory_mb(self.jvm_pid, "VmRSS"))
            workers = sum(memory_mb(pid) for pid in descendants(self.jvm_pid))
            self.workers_mb = max(self.workers_mb, workers)

    def run(self, action: Callable[[], None]) -> None:
        """Run `action`, sampling until it returns."""
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

    def figures(self) -> dict:
        """The peaks in MB, as results.jsonl records them."""
        out = {"jvm_heap_peak_mb": round(self.jvm_mb),
               "python_driver_peak_mb": round(self.python_mb)}  # fmt: skip
        if self.jvm_pid is not None:
            out["jvm_rss_peak_mb"] = round(self.jvm_rss_mb)
            out["python_workers_peak_mb"] = round(self.workers_mb)
        return out


def timed(action, repeat: int) -> float:
    return interleaved({"action": action}, repeat)["action"]


def interleaved(
    actions: dict[str, Callable[[], None]],
    repeat: int,
    warm_up: dict[str, Callable[[], None]] | None = None,
) -> dict[str, float]:
    """The best time of each action over `repeat` rounds that run every action once, in order.

    Rounds rather than each action's runs back to back: on a shared machine the speed drifts
    over minutes, and a ratio of two lines (audit/floor) should compare runs made side by side.

    Args:
        actions: the lines to time, by name.
        repeat: the number of timed rounds.
        warm_up: if given, one round before the timed ones, not counted in the best: each line
            runs its `warm_up` action (its own when it has none), and its time is returned under
            `<name>_first`. The first run of a line in a JVM pays for compiling its code
            (HotSpot, the generated classes, the Python workers' start), more so for a longer
            plan, so it does not show what the line costs once compiled.
    """
    best = dict.fromkeys(actions, float("inf"))
    if warm_up is not None:
        for name, action in actions.items():
            start = time.perf_counter()
            warm_up.get(name, action)()
            best[f"{name}_first"] = time.perf_counter() - start
    for _ in range(repeat):
        for name, action in actions.items():
            start = time.perf_counter()
            action()
            best[name] = min(best[name], time.perf_counter() - start)
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


# ------------------------------------------------------------------------------------------------
# Findings compared: ours (the engine, written by Spark), DuckDB's query, the sequential replay
# ------------------------------------------------------------------------------------------------
FindingKey = tuple[str, str, int, int]  # (finding_type, topic, partition, base_offset)


def finding_keys(table: pa.Table, types: Iterable[str] | None = None) -> set[FindingKey]:
    """The (finding_type, topic, partition, base_offset) of a findings table, of `types` only."""
    wanted = None if types is None else set(types)
    return {
        (r["finding_type"], r["topic"], r["partition"], r["base_offset"])
        for r in table.select(["finding_type", "topic", "partition", "base_offset"]).to_pylist()
        if wanted is None or r["finding_type"] in wanted
    }


def compare(
    ours: set[FindingKey], theirs: set[FindingKey], types: Iterable[str] | None = None
) -> dict[str, dict[str, int]]:
    """Per finding type: how many findings both have, only ours has, only theirs has."""
    if types is None:
        types = sorted({key[0] for key in ours | theirs})
    out = {}
    for kind in types:
        a = {key for key in ours if key[0] == kind}
        b = {key for key in theirs if key[0] == kind}
        out[kind] = {"matches": len(a & b), "only_ours": len(a - b), "only_theirs": len(b - a)}
    return out


def precision_recall(by_type: dict[str, dict[str, int]]) -> tuple[float, float]:
    """Ours against a reference: precision (ours confirmed) and recall (reference found)."""
    matches = sum(c["matches"] for c in by_type.values())
    ours = matches + sum(c["only_ours"] for c in by_type.values())
    reference = matches + sum(c["only_theirs"] for c in by_type.values())
    return (matches / ours if ours else 1.0), (matches / reference if reference else 1.0)


def our_findings(spark, data: Path) -> tuple[pa.Table, float]:
    """The engine's findings of `data` (the audit's findings, written to Parquet by Spark, read
    back by pyarrow: they are few) and the seconds the Spark job took."""
    from eos_audit.audit import output_records, replay_plan
    from eos_audit.config import AuditConfig
    from eos_audit.sources.tabular.record_batches import read_tabular

    out = Path(tempfile.mkdtemp(prefix="eos-bench-findings-"))
    try:
        start = time.perf_counter()
        batches = read_tabular(spark, [str(data)], "parquet")
        (output_records.findings_of(replay_plan.audit(batches, AuditConfig(), "bench"))
         .select("finding_type", "topic", "partition", "base_offset", "kafka_error")
         .write.mode("overwrite").parquet(str(out / "findings")))  # fmt: skip
        seconds = time.perf_counter() - start
        return pq.read_table(out / "findings"), seconds
    finally:
        shutil.rmtree(out, ignore_errors=True)


def external(module: str, data: Path, *args: str) -> tuple[dict, pa.Table, pa.Table | None]:
    """Run `python -m <module> --batches data --out ...` as a process of its own.

    Returns:
        Its JSON summary, its findings and, when it replayed only part of the input, the
        (topic, partition)s it covered.
    """
    out = Path(tempfile.mkdtemp(prefix="eos-bench-external-"))
    try:
        findings = out / "findings.parquet"
        done = subprocess.run(
            [sys.executable, "-m", module, "--batches", str(data), "--out", str(findings), *args],
            check=True, capture_output=True, text=True, cwd=HERE.parent,
        )  # fmt: skip
        summary = json.loads(done.stdout.strip().splitlines()[-1])
        partitions = Path(str(findings) + ".partitions")
        covered = pq.read_table(partitions) if partitions.exists() else None
        return summary, pq.read_table(findings), covered
    finally:
        shutil.rmtree(out, ignore_errors=True)


def comparisons(spark, data: Path, rows: int, python_limit: int | None) -> dict:
    """Ours, DuckDB's query and the sequential replay over `data`: times, memory, findings."""
    from bench import duckdb_rules
    from tests.oracle import broker_model

    ours, ours_s = our_findings(spark, data)
    result: dict = {"ours_findings_s": round(ours_s, 2), "ours_findings": ours.num_rows}

    # DuckDB: the four rules, and duplicates within the cache only (see bench/duckdb_rules.py).
    summary, duck, _ = external("bench.duckdb_rules", data)
    in_cache = ours.filter(
        pc.invert(pc.and_(pc.equal(ours["finding_type"], "DUPLICATE_BATCH"),
                          pc.is_valid(ours["kafka_error"])))
    )  # fmt: skip
    by_type = compare(
        finding_keys(in_cache, duckdb_rules.COMPARED_TYPES),
        finding_keys(duck),
        duckdb_rules.COMPARED_TYPES,
    )
    result.update({"duckdb_s": summary["seconds"], "duckdb_peak_rss_mb": summary["peak_rss_mb"],
                   "duckdb_compare": by_type})  # fmt: skip

    # The sequential replay: every type the oracle replays.
    limit = ["--limit", str(python_limit)] if python_limit and python_limit < rows else []
    summary, seq, covered = external("bench.sequential", data, *limit)
    types = sorted(broker_model.PARTITION_TYPES | broker_model.PRODUCER_STATE_TYPES)
    ours_keys = finding_keys(ours, types)
    if covered is not None:
        partitions = set(
            zip(covered["topic"].to_pylist(), covered["partition"].to_pylist(), strict=False)
        )
        ours_keys = {key for key in ours_keys if (key[1], key[2]) in partitions}
    by_type = compare(ours_keys, finding_keys(seq, types))
    by_type = {kind: counts for kind, counts in by_type.items() if any(counts.values())}
    precision, recall = precision_recall(by_type)
    result.update({
        "python_s": summary["extrapolated_s"] or summary["seconds"],
        "python_extrapolated": summary["limited"],
        "python_rows_replayed": summary["rows_replayed"],
        "python_measured_s": summary["seconds"],
        "python_peak_rss_mb": summary["peak_rss_mb"],
        "python_compare": by_type,
        "precision": round(precision, 4),
        "recall": round(recall, 4),
    })  # fmt: skip
    return result


# ------------------------------------------------------------------------------------------------
# Printing
# ------------------------------------------------------------------------------------------------
def _line(name: str, seconds: float, rows: int, note: str = "") -> str:
    return f"  {name:<10} {seconds:9.2f} {rows / seconds:>13,.0f}   {note}"


def _counts(by_type: dict[str, dict[str, int]], theirs: str) -> str:
    return "; ".join(
        f"{kind} {c['matches']} match, {c['only_ours']} only ours, {c['only_theirs']} only {theirs}"
        for kind, c in by_type.items()
    )


def print_size(r: dict) -> None:
    """One size's table: seconds, batches per second and ratios; memory; findings compared."""
    rows = r["rows"]
    print(f"\n{rows:,} batches ({r['cores']} cores)\n  {'line':<10} {'seconds':>9} "
          f"{'batches/s':>13}   ratios", flush=True)  # fmt: skip
    print(_line("floor", r["floor_s"], rows))
    print(_line("transfer", r["transfer_s"], rows, f"transfer/floor {r['transfer_ratio']:.2f}"))
    if "audit_s" not in r:
        if "offset_commits" in r:
            print_offsets(r)
        return
    print(
        _line(
            "audit",
            r["audit_s"],
            rows,
            f"audit/floor {r['ratio']:.2f}  audit/transfer {r['audit_transfer_ratio']:.2f}",
        )
    )
    if "audit_first_s" in r:
        print(f"  first runs (warm-up, not in the best): floor {r['floor_first_s']:.2f} s, "
              f"audit {r['audit_first_s']:.2f} s, audit/floor {r['first_ratio']:.2f}")  # fmt: skip
    if "pipeline_s" in r:
        print(_line("pipeline", r["pipeline_s"], rows, "audit + staging + Delta writes"))
    if "duckdb_s" in r:
        print(_line("duckdb", r["duckdb_s"], rows,
                    f"duckdb/audit {r['duckdb_s'] / r['audit_s']:.2f}  "
                    f"(peak RSS {r['duckdb_peak_rss_mb']:,} MB)"))  # fmt: skip
        label = "python"
        note = f"python/audit {r['python_s'] / r['audit_s']:.2f}  " \
               f"(peak RSS {r['python_peak_rss_mb']:,} MB)"  # fmt: skip
        if r["python_extrapolated"]:
            label = "python*"
            note += (f"  * EXTRAPOLATED from {r['python_rows_replayed']:,} batches replayed in "
                     f"{r['python_measured_s']:.0f} s")  # fmt: skip
        print(_line(label, r["python_s"], rows, note))
    memory = (f"  memory     driver: Python {r['python_driver_peak_mb']:,} MB | executors: "
              f"JVM heap {r['jvm_heap_peak_mb']:,} MB")  # fmt: skip
    if "python_workers_peak_mb" in r:
        memory += (
            f" (JVM resident {r['jvm_rss_peak_mb']:,} MB, holds the driver too), "
            f"Python workers {r['python_workers_peak_mb']:,} MB"
        )
    print(memory)
    if "offset_commits" in r:
        print_offsets(r)
    if "duckdb_compare" in r:
        print(
            "  findings   (finding_type, topic, partition, base_offset) against ours "
            f"({r['ours_findings']:,} findings):"
        )
        print("    duckdb   " + _counts(r["duckdb_compare"], "duckdb"))
        print(
            "    python   "
            + _counts(r["python_compare"], "python")
            + f"  => precision {r['precision']:.4f}, recall {r['recall']:.4f}"
            + (" (replayed partitions only)" if r["python_extrapolated"] else "")
        )
    sys.stdout.flush()


def print_scaling(results: list[dict]) -> None:
    """Cost against input between consecutive sizes (target: at most 1.1x the input's growth,
    10M to 50M at most 5.5x), and the driver's memory across sizes (target: flat)."""
    audited = sorted((r for r in results if "audit_s" in r and not r.get("skew")),
                     key=lambda r: r["rows"])  # fmt: skip
    for small, large in zip(audited[:-1], audited[1:], strict=True):
        growth = large["rows"] / small["rows"]
        cost = large["audit_s"] / small["audit_s"]
        verdict = "met" if cost <= 1.1 * growth else f"MISSED by {cost / (1.1 * growth) - 1:.0%}"
        print(
            f"scaling    audit {small['rows']:,} -> {large['rows']:,} batches: {cost:.2f}x the "
            f"time for {growth:.0f}x the input (target <= {1.1 * growth:.1f}x: {verdict})"
        )
    if len(audited) > 1:
        driver = [r["python_driver_peak_mb"] for r in audited]
        print(
            f"driver     Python driver peak {min(driver):,}-{max(driver):,} MB over "
            f"{audited[0]['rows']:,}-{audited[-1]['rows']:,} batches"
        )
    sys.stdout.flush()


# ------------------------------------------------------------------------------------------------
# The command
# ------------------------------------------------------------------------------------------------
COLUMNS = ["topic", "partition", "base_offset", "last_offset", "producer_id", "producer_epoch",
           "base_sequence", "record_count", "is_transactional", "is_control",
           "partition_leader_epoch", "max_timestamp"]  # fmt: skip


def measure(spark, rows: int, data: Path, args: argparse.Namespace, largest: bool) -> dict:
    """Floor, transfer, audit (with memory) and, for the largest size, pipeline, at one size."""
    from eos_audit.audit import replay_plan
    from eos_audit.config import AuditConfig
    from eos_audit.sources.tabular.record_batches import read_tabular

    def floor() -> None:
        (spark.read.parquet(str(data)).select(*COLUMNS)
         .repartition("topic", "partition")
         .sortWithinPartitions("topic", "partition", "base_offset")
         .write.format("noop").mode("overwrite").save())  # fmt: skip

    def transfer() -> None:
        batches = read_tabular(spark, [str(data)], "parquet")

        def receive(batches_in):
            for batch in batches_in:
                batch.num_rows  # noqa: B018 - receive, nothing more
            return iter(())

        (replay_plan.replay_rows(batches).mapInArrow(receive, "n long")
         .write.format("noop").mode("overwrite").save())  # fmt: skip

    def audit() -> None:
        batches = read_tabular(spark, [str(data)], "parquet")
        replay_plan.audit(batches, AuditConfig(), "bench").write.format("noop").mode(
            "overwrite"
        ).save()

    memory = MemorySampler(spark)
    lines = {"floor": floor, "transfer": transfer}
    if not args.no_audit:
        lines["audit"] = audit
    # Memory is sampled in the warm-up round only: reading the workers' smaps_rollup takes their
    # memory map's lock, so a sampled run is not a timed one.
    warm_up = {"audit": lambda: memory.run(audit)}
    offsets_memory = MemorySampler(spark)
    offsets_data = None
    if args.offset_commits and largest:
        offsets_data = offset_commits.ensure_data(args.offset_commits)
        offsets = offset_commits.offset_lines(spark, offsets_data)
        lines.update(offsets)
        warm_up["offsets_replay"] = lambda: offsets_memory.run(offsets["offsets_replay"])
    best = interleaved(lines, args.repeat, warm_up=warm_up)
    floor_s, transfer_s = best["floor"], best["transfer"]
    result = {"rows": rows, "cores": spark.sparkContext.defaultParallelism,
              "floor_s": round(floor_s, 2), "transfer_s": round(transfer_s, 2),
              "transfer_ratio": round(transfer_s / floor_s, 2),
              "floor_batches_per_s": int(rows / floor_s)}  # fmt: skip
    if offsets_data is not None:
        result.update(offsets_figures(spark, offsets_data, best, lines, offsets_memory))
    if args.no_audit:
        return result
    audit_s = best["audit"]
    if offsets_data is not None:
        result["offsets_added_pct"] = round(100 * best["offsets_stage"] / audit_s, 1)
    result.update(memory.figures())
    result.update({"audit_s": round(audit_s, 2), "ratio": round(audit_s / floor_s, 2),
                   "audit_transfer_ratio": round(audit_s / transfer_s, 2),
                   "audit_batches_per_s": int(rows / audit_s),
                   "floor_first_s": round(best["floor_first"], 2),
                   "audit_first_s": round(best["audit_first"], 2),
                   "first_ratio": round(best["audit_first"] / best["floor_first"], 2)})  # fmt: skip
    if args.pipeline_all or largest:
        pipeline_s = timed(lambda: pipeline_run(spark, data), 1)
        result["pipeline_s"] = round(pipeline_s, 2)
        result["pipeline_batches_per_s"] = int(rows / pipeline_s)
        if offsets_data is not None:
            # A whole run with the coordinator records beside the batches, as a night with
            # the coordinator topics in its export: what the processing audit adds to a run.
            result["pipeline_offsets_s"] = round(
                timed(lambda: pipeline_run(spark, data, offsets_data), 1), 2
            )
    return result


def pipeline_run(spark, data: Path, coordinator: Path | None = None) -> None:
    """One `run_audit` of the batches at `data` (and the coordinator records), into a
    temporary warehouse."""
    from eos_audit.audit.pipeline import AuditInputs, run_audit
    from eos_audit.config import AuditConfig

    inputs = AuditInputs(
        batches=(str(data),),
        coordinator_records=(str(coordinator),) if coordinator is not None else (),
    )
    warehouse = Path(tempfile.mkdtemp(prefix="eos-bench-"))
    try:
        run_audit(spark, inputs, AuditConfig(), str(warehouse), run_id="bench")
    finally:
        shutil.rmtree(warehouse, ignore_errors=True)


def offsets_figures(
    spark, data: Path, best: dict, lines: dict[str, Callable[[], None]], memory: MemorySampler
) -> dict:
    """The processing audit's lines over the coordinator records (`--offset-commits`)."""
    records = pq.ParquetDataset(str(data)).read(columns=["offset"]).num_rows
    out = {"offset_commits": records, "offsets_mix": offset_commits.replay_mix(spark, data)}
    for line in ("offsets_transfer", "offsets_replay", "offsets_stage"):
        out[f"{line}_s"] = round(best[line], 2)
        out[f"{line}_first_s"] = round(best[f"{line}_first"], 2)
    for line in ("offsets_transfer", "offsets_replay", "offsets_stage"):
        meter = getattr(lines[line], "meter", None)
        least = meter.least(line) if meter is not None else None
        if least is not None:
            out[f"{line}_jvm_cpu_s"], out[f"{line}_python_cpu_s"] = (round(c, 2) for c in least)
    workers = memory.figures().get("python_workers_peak_mb")
    if workers is not None:
        out["offsets_python_workers_peak_mb"] = workers
    return out


def print_offsets(r: dict) -> None:
    """The processing audit's lines (`--offset-commits`), and what they add to the audit."""
    records = r["offset_commits"]
    header = f"{'line':<10} {'seconds':>9} {'records/s':>13}   {'CPU-s: JVM':>10} {'Python':>7}"
    print(f"  {records:,} coordinator records (__consumer_offsets), same rounds\n  {header}")
    notes = {
        "offsets_transfer": "read, validated, shuffled, sorted, handed to Python (no replay)",
        "offsets_replay": "the same and the replay, its history into the no-op sink",
        "offsets_stage": "the pipeline's processing stage, its tables into the no-op sink",
    }
    for line, note in notes.items():
        cpu = " " * 18
        if f"{line}_jvm_cpu_s" in r:
            cpu = f"{r[f'{line}_jvm_cpu_s']:10.2f} {r[f'{line}_python_cpu_s']:7.2f}"
        print(_line(line.removeprefix("offsets_"), r[f"{line}_s"], records, f"{cpu}   {note}"))
    first = ", ".join(
        f"{line.removeprefix('offsets_')} {r[f'{line}_first_s']:.2f} s" for line in notes
    )
    print(f"  first runs (warm-up, not in the best): {first}")
    if "offsets_added_pct" in r:
        print(f"  adds       {r['offsets_added_pct']:.0f}% to the audit of {r['rows']:,} batches "
              f"({r['offsets_stage_s']:.2f} s on {r['audit_s']:.2f} s)")  # fmt: skip
    if "pipeline_offsets_s" in r:
        added = 100 * (r["pipeline_offsets_s"] / r["pipeline_s"] - 1)
        print(f"  run        {r['pipeline_offsets_s']:.2f} s, the pipeline with these records "
              f"beside the batches: {added:.0f}% more than without "
              f"({r['pipeline_s']:.2f} s)")  # fmt: skip
    if "offsets_python_workers_peak_mb" in r:
        print(f"  memory     Python workers {r['offsets_python_workers_peak_mb']:,} MB (replay)")
    mix = r["offsets_mix"]
    print("  rows       " + ", ".join(f"{k} {v:,}" for k, v in mix["rows"].items()))
    print("  findings   " + ", ".join(f"{k} {v:,}" for k, v in mix["findings"].items()))
    sys.stdout.flush()


def skewed(spark, rows: int, uniform: dict | None) -> dict:
    """The audit of the skewed input of `rows` batches, with the session's default settings."""
    from eos_audit.audit import replay_plan
    from eos_audit.config import AuditConfig
    from eos_audit.sources.tabular.record_batches import read_tabular

    data = ensure_data(rows, skew=True)

    def audit() -> None:
        batches = read_tabular(spark, [str(data)], "parquet")
        replay_plan.audit(batches, AuditConfig(), "bench").write.format("noop").mode(
            "overwrite"
        ).save()

    memory = MemorySampler(spark)
    result: dict = {"rows": rows, "skew": True, "cores": spark.sparkContext.defaultParallelism}
    try:
        audit_s = timed(lambda: memory.run(audit), 1)
        result.update({"completed": True, "audit_s": round(audit_s, 2),
                       "audit_batches_per_s": int(rows / audit_s)})  # fmt: skip
    except Exception as error:  # noqa: BLE001 - a failure is the figure to report
        result.update({"completed": False, "error": f"{type(error).__name__}: {error}"[:500]})
    result.update(memory.figures())
    if result["completed"]:
        vs = (f", {result['audit_s'] / uniform['audit_s']:.2f}x the uniform input's audit"
              if uniform and "audit_s" in uniform else "")  # fmt: skip
        print(f"\nskewed     {rows:,} batches (one partition 30%, one producer 30% of it): "
              f"completed in {result['audit_s']:.2f} s ({result['audit_batches_per_s']:,}/s{vs}); "
              f"driver Python {result['python_driver_peak_mb']:,} MB, JVM heap "
              f"{result['jvm_heap_peak_mb']:,} MB"
              + (f", Python workers {result['python_workers_peak_mb']:,} MB"
                 if "python_workers_peak_mb" in result else ""), flush=True)  # fmt: skip
    else:
        print(f"\nskewed     {rows:,} batches: FAILED: {result['error']}", flush=True)
    return result


def main() -> None:
    """The command: parse the flags, measure every size, print and record the figures."""
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
    parser.add_argument(
        "--compare",
        action="store_true",
        help="also run DuckDB's window query and the sequential Python replay over the same "
        "Parquet, and compare their findings with ours",
    )
    parser.add_argument(
        "--python-limit",
        type=int,
        default=None,
        metavar="ROWS",
        help="with --compare, sizes above ROWS replay about ROWS batches in Python and "
        "extrapolate its time (labelled as such)",
    )
    parser.add_argument(
        "--skew",
        action="store_true",
        help="also audit a skewed input of the largest size (one partition 30%% of the batches, "
        "one producer 30%% of that partition), generated under bench/data/batches-skew-<rows>",
    )
    parser.add_argument(
        "--offset-commits",
        type=int,
        default=None,
        metavar="N",
        help="also time the processing audit of about N __consumer_offsets records (generated "
        "once under bench/data/offset-commits-N) in the rounds of the largest size, and print "
        "what it adds to that size's audit",
    )
    args = parser.parse_args()

    from eos_audit.session import REPLAY_ARROW_SETTINGS, get_spark

    spark = get_spark("eos-audit-bench")
    spark.conf.set("spark.sql.shuffle.partitions", "16")
    # Every line that hands rows to Python runs with the settings run_audit applies for the replay.
    for key, value in REPLAY_ARROW_SETTINGS.items():
        spark.conf.set(key, value)
    results = []
    for rows in args.rows:
        data = ensure_data(rows)
        result = measure(spark, rows, data, args, largest=rows == max(args.rows))
        if args.compare and not args.no_audit:
            result.update(comparisons(spark, data, rows, args.python_limit))
        print_size(result)
        results.append(result)
    print_scaling(results)
    if args.skew and not args.no_audit:
        largest = max(args.rows)
        uniform = next((r for r in results if r["rows"] == largest), None)
        results.append(skewed(spark, largest, uniform))
    if args.processes:
        results.append(processes(max(args.rows)))
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    with (out / "results.jsonl").open("a") as f:
        for r in results:
            f.write(
                json.dumps(
                    {
                        **r,
                        "spark": spark.version,
                        "machine": platform.node(),
                        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    }
                )
                + "\n"
            )


if __name__ == "__main__":
    main()
