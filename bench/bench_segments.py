"""Benchmark: segment reading speed against raw read speed.

Run from the repository root:

    .venv/bin/python bench/bench_segments.py --batches 1000000

Options: --batches N (total over all replicas, default 1000000), --cores N (Spark local[N], default
2), --dir PATH (keep the generated tree there; default a temporary directory, removed at the end),
--segment-mb N (segment roll size, default 16), --repeat N (timed runs per mode, best kept;
default 2).

It generates a multi-broker export tree (3 brokers, 2 topics x 4 partitions, replication 2) of real
v2 batches (idempotent, transactional and plain producers with COMMIT/ABORT markers; templates
built by kafka-python, then offsets, sequences and timestamps patched and the CRC-32C recomputed),
then times:

1. `cat` of every .log file to /dev/null (raw read speed from the page cache, one core);
2. the reader itself, `iter_segment` over every file's bytes in this process (one core), with and
   without CRC verification: the compiled header walk (`eos_audit.sources.kafka.segment_walk`), the
   header decoding and the CRC-32C, nothing of Spark's;
3. the audit's read, `read_segment_files(...)` of the discovered files with the ids the driver
   hands out (rows located by file id and byte position, `row_reference`), into
   `write.format("noop")`, with CRC verification;
4. the same with `verify_crc=False`;
5. `read_segments(...)` with CRC verification: every row also named by its text
   (`<file>:<byte>`), as a notebook reads segments;
6. the audit of the tree as an export (`read_kafka_export`, then `replay_plan.audit` with every rule
   into the no-op sink): reading, validation, the replica comparison, the one shuffle and the
   replay, without the Delta writes;

and prints seconds, batches/second/core, MB/s (all cores) and MB/s against `cat` for each. An
untimed warm-up read first starts Spark's Python workers, so the timings measure steady-state
reading; the Spark lines still carry each query's fixed cost (a job, its Python tasks: the reader
packs the files into few tasks, `file_source.pack_files`, and each costs tens of ms).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import crc32c  # noqa: E402

from tests.fixtures.segment_builder import (  # noqa: E402
    BASE_TS,
    checkpoint_text,
    control_batch,
    data_batch,
    segment_name,
)

MAX_INT = 2147483647


def _templates() -> dict[tuple[int, int], bytearray]:
    """(kind, records) -> a kafka-python built batch to patch; kind 0 txn, 1 idempotent, 2 plain."""
    out = {}
    for kind in (0, 1, 2):
        for n in (1, 2, 3, 4):
            if kind == 2:
                b = data_batch(0, n)
            else:
                b = data_batch(
                    0,
                    n,
                    producer_id=1,
                    producer_epoch=0,
                    base_sequence=0,
                    is_transactional=kind == 0,
                )
            out[(kind, n)] = bytearray(b)
    return out


def _patch(t: bytearray, base: int, epoch: int, pid: int, seq: int, ts: int) -> bytes:
    b = bytearray(t)
    struct.pack_into(">q", b, 0, base)
    struct.pack_into(">i", b, 12, epoch)
    delta = struct.unpack_from(">i", b, 23)[0]
    struct.pack_into(">qq", b, 27, ts - delta, ts)
    if struct.unpack_from(">q", b, 43)[0] != -1:
        struct.pack_into(">qhi", b, 43, pid, 0, seq)
    struct.pack_into(">I", b, 17, crc32c.crc32c(memoryview(b)[21:]))
    return bytes(b)


def partition_log(n: int, seed: int) -> tuple[list[bytes], int]:
    """n batches of one partition; returns them and the next offset."""
    rng = random.Random(seed)
    tpl = _templates()
    seqs = {pid: 0 for pid in range(5000 + seed * 10, 5000 + seed * 10 + 6)}
    pids = list(seqs)
    open_txn: dict[int, bool] = {}
    out: list[bytes] = []
    off, ts = 0, BASE_TS
    while len(out) < n:
        pid = rng.choice(pids)
        kind = pid % 3
        ts += 3
        if kind == 0 and open_txn.get(pid) and rng.random() < 0.4:
            out.append(
                control_batch(
                    off,
                    producer_id=pid,
                    producer_epoch=0,
                    commit=rng.random() < 0.8,
                    coordinator_epoch=1,
                    timestamp=ts,
                )
            )
            open_txn[pid] = False
            off += 1
            continue
        k = rng.randint(1, 4)
        out.append(_patch(tpl[(kind, k)], off, 1, pid, seqs[pid], ts))
        if kind != 2:
            seqs[pid] = (seqs[pid] + k) % (MAX_INT + 1)
        if kind == 0:
            open_txn[pid] = True
        off += k
    return out, off


def generate(root: Path, total: int, segment_bytes: int) -> int:
    brokers, topics, partitions, replication = 3, ("orders", "pay.ments"), 4, 2
    per = max(1, total // (len(topics) * partitions * replication))
    written = 0
    hw: dict[str, list] = {}
    for t_i, topic in enumerate(topics):
        for p in range(partitions):
            batches, end = partition_log(per, t_i * 100 + p)
            segments: list[tuple[int, bytes]] = []
            cur: list[bytes] = []
            size = 0
            for b in batches:
                if size >= segment_bytes and cur:
                    segments.append((struct.unpack_from(">q", cur[0])[0], b"".join(cur)))
                    cur, size = [], 0
                cur.append(b)
                size += len(b)
            segments.append((struct.unpack_from(">q", cur[0])[0], b"".join(cur)))
            for r in range(replication):
                broker = f"broker-{(t_i + p + r) % brokers}"
                pdir = root / broker / f"{topic}-{p}"
                pdir.mkdir(parents=True, exist_ok=True)
                for base, data in segments:
                    (pdir / segment_name(base)).write_bytes(data)
                hw.setdefault(broker, []).append((topic, p, end))
                written += len(batches)
    for broker, entries in hw.items():
        (root / broker / "replication-offset-checkpoint").write_text(checkpoint_text(entries))
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=1_000_000)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--segment-mb", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=2, help="timed runs per mode; best is kept")
    args = ap.parse_args(argv)

    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="eos-bench-"))
    try:
        t0 = time.perf_counter()
        total = generate(root, args.batches, args.segment_mb << 20)
        logs = sorted(str(p) for p in root.rglob("*.log"))
        size = sum(os.path.getsize(p) for p in logs)
        print(
            f"generated {total:,} batches in {len(logs)} files, {size / 1e6:.1f} MB, "
            f"in {time.perf_counter() - t0:.1f}s under {root}"
        )

        t0 = time.perf_counter()
        with open(os.devnull, "wb") as null:
            subprocess.run(["cat", *logs], stdout=null, check=True)
        cat_s = time.perf_counter() - t0

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from pyspark.sql import SparkSession

        from eos_audit.audit import replay_plan
        from eos_audit.config import AuditConfig
        from eos_audit.session import PYTHON_WORKER_SOCKETS
        from eos_audit.sources.files.row_reference import unique_file_ids
        from eos_audit.sources.kafka import segment_walk
        from eos_audit.sources.kafka.export import read_kafka_export
        from eos_audit.sources.kafka.partition_dirs import discover_segment_files
        from eos_audit.sources.kafka.segments import iter_segment, read_segment_files, read_segments

        def parse_all(verify: bool) -> float:
            t = time.perf_counter()
            for path in logs:
                for _ in iter_segment(
                    Path(path).read_bytes(), topic="t", partition=0, path=path, verify_crc=verify
                ):
                    pass
            return time.perf_counter() - t

        parse_all(True)  # compiles the walk (or loads it from numba's cache)
        parse_crc_s = min(parse_all(True) for _ in range(args.repeat))
        parse_nocrc_s = min(parse_all(False) for _ in range(args.repeat))
        print(
            f"header walk compiled: {segment_walk.COMPILED}, CRC-32C from the compiled loop: "
            f"{segment_walk.COMPILED_CRC}"
        )

        spark = (
            SparkSession.builder.master(f"local[{args.cores}]")
            .appName("eos-audit-bench")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.memory", "2g")
            # Python workers over Unix sockets, as in the CLI's local sessions (eos_audit.session)
            .config(map=PYTHON_WORKER_SOCKETS)
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")

        def run(verify: bool, named: bool = False) -> float:
            t = time.perf_counter()
            if named:
                df = read_segments(spark, [str(root)], verify_crc=verify)
            else:  # what the audit does (kafka_export): list, hand out ids, read
                files = discover_segment_files([str(root)])
                ids = unique_file_ids(f["path"] for f in files)
                located = [{**f, "file_id": ids[f["path"]]} for f in files]
                df = read_segment_files(spark, located, verify_crc=verify)
            df.write.format("noop").mode("overwrite").save()
            return time.perf_counter() - t

        # Warm-up, untimed: starts a Python worker per core (imports of pyarrow, numpy,
        # eos_audit) and lets the JVM compile the Arrow-to-row path; the first read of a session
        # is several times slower than the next ones.
        warm = run(False)
        print(f"warm-up read (untimed in the table): {warm:.2f}s")

        def timed(verify: bool, named: bool = False) -> float:
            return min(run(verify, named) for _ in range(args.repeat))

        def audit() -> float:
            t = time.perf_counter()
            export = read_kafka_export(spark, [str(root)])
            replay_plan.audit(
                export.batches,
                AuditConfig(),
                "bench",
                seeds_df=export.seeds,
                log_starts_df=export.log_starts,
                high_watermarks_df=export.high_watermarks,
                leader_epochs_df=export.leader_epochs,
                source_files=export.source_files,
            ).write.format("noop").mode("overwrite").save()
            return time.perf_counter() - t

        audit()  # warm-up: compiles the replay (or loads it from numba's cache)
        audit_s = min(audit() for _ in range(args.repeat))
        crc_s = timed(True)
        nocrc_s = timed(False)
        named_s = timed(True, named=True)
        spark.stop()

        rows = [
            ("cat (raw read, 1 core)", cat_s, 1),
            ("iter_segment verify_crc (1 core, no Spark)", parse_crc_s, 1),
            ("iter_segment no crc (1 core, no Spark)", parse_nocrc_s, 1),
            (f"audit's read verify_crc ({args.cores} cores)", crc_s, args.cores),
            (f"audit's read no crc ({args.cores} cores)", nocrc_s, args.cores),
            (f"read_segments verify_crc, text ({args.cores} cores)", named_s, args.cores),
            (f"audit of the export, no writes ({args.cores} cores)", audit_s, args.cores),
        ]
        cat_mb_s = size / 1e6 / cat_s
        print(f"{'':44s} {'seconds':>9s} {'batches/s/core':>16s} {'MB/s':>9s} {'vs cat':>8s}")
        for name, secs, cores in rows:
            mb_s = size / 1e6 / secs
            print(
                f"{name:44s} {secs:9.2f} {total / secs / cores:16,.0f} {mb_s:9,.0f} "
                f"{mb_s / cat_mb_s:8.3f}"
            )
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
