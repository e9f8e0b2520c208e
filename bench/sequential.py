"""What a person writes first: the sequential Python replay, in one process.

`python -m bench.sequential --batches DIR --out FINDINGS.parquet [--limit ROWS]` replays the
record-batch Parquet files with the tests' oracle (`tests/oracle/broker_model.py`, a plain loop
over each partition's batches in log order with a dict of producer states, every replayed rule)
and writes its findings as (finding_type, topic, partition, base_offset, kafka_error). It prints
one JSON line with its time and its process's peak resident set.

Memory: the input is read with pyarrow in record batches: once for the key columns, to count each
partition's rows and pack the partitions into buckets of about `bucket_rows` rows, then once to
spill every row to its bucket's Arrow IPC file. Then each
file is replayed on its own: its rows become the oracle's `Batch` objects, are sorted in log
order and replayed. So the rows held at once are one bucket's, not the input's, except that a
single (topic, partition) cannot be split (the oracle needs it as one list): a partition holding
30% of 50M batches would need its 15M `Batch` objects in memory at once (several GB). The peak
resident set is measured and reported.

`--limit ROWS` replays buckets only until ROWS batches have been replayed (the spill pass still
reads everything) and reports the measured rate and the time extrapolated to all rows, labelled
as extrapolated; its findings then cover the replayed partitions only, which it lists.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import shutil
import tempfile
import time
from dataclasses import fields
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from tests.oracle import broker_model

BATCH_FIELDS = tuple(f.name for f in fields(broker_model.Batch))
FINDINGS_SCHEMA = pa.schema(
    [
        ("finding_type", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("base_offset", pa.int64()),
        ("kafka_error", pa.string()),
    ]
)
PARTITIONS_SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32())])


def plan_buckets(dataset: ds.Dataset, bucket_rows: int) -> tuple[dict[tuple[str, int], int], int]:
    """Assign every (topic, partition) to a bucket of about `bucket_rows` rows.

    A first pass reads only the two key columns and counts each partition's rows; partitions are
    then packed largest first into the least-filled bucket, so no bucket exceeds `bucket_rows` by
    more than its largest partition.

    Returns:
        The bucket of each (topic, partition) and the number of input rows.
    """
    counts: dict[tuple[str, int], int] = {}
    for batch in dataset.to_batches(columns=["topic", "partition"], batch_size=1_000_000):
        grouped = (
            pa.Table.from_batches([batch])
            .group_by(["topic", "partition"])
            .aggregate([([], "count_all")])
        )
        for row in grouped.to_pylist():
            key = (row["topic"], row["partition"])
            counts[key] = counts.get(key, 0) + row["count_all"]
    total = sum(counts.values())
    buckets = max(1, math.ceil(total / bucket_rows))
    fill = [0] * buckets
    bucket_by_key = {}
    for key, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        bucket = min(range(buckets), key=fill.__getitem__)
        bucket_by_key[key] = bucket
        fill[bucket] += count
    return bucket_by_key, total


def spill(batches: str, directory: Path, bucket_rows: int) -> tuple[list[Path], int]:
    """Split the input into Arrow IPC files, each holding whole (topic, partition)s.

    Returns:
        The bucket files (those that received rows) and the number of input rows.
    """
    dataset = ds.dataset(batches, format="parquet")
    columns = [name for name in BATCH_FIELDS if name in dataset.schema.names]
    bucket_by_key, total = plan_buckets(dataset, bucket_rows)
    key_table = pa.table(
        {
            "topic": [topic for topic, _ in bucket_by_key],
            "partition": pa.array([partition for _, partition in bucket_by_key],
                                  type=dataset.schema.field("partition").type),
            "_bucket": list(bucket_by_key.values()),
        }
    )  # fmt: skip
    writers: dict[int, pa.ipc.RecordBatchFileWriter] = {}
    try:
        for batch in dataset.to_batches(columns=columns, batch_size=1_000_000):
            if batch.num_rows == 0:
                continue
            table = pa.Table.from_batches([batch]).join(key_table, keys=["topic", "partition"])
            table = table.take(pc.sort_indices(table["_bucket"]))
            bucket_ids = table["_bucket"].to_numpy()
            table = table.drop_columns(["_bucket"])
            starts = np.flatnonzero(np.r_[True, bucket_ids[1:] != bucket_ids[:-1]])
            ends = np.r_[starts[1:], len(bucket_ids)]
            for start, end in zip(starts, ends, strict=True):
                bucket = int(bucket_ids[start])
                if bucket not in writers:
                    writers[bucket] = pa.ipc.new_file(
                        str(directory / f"bucket-{bucket:05d}.arrow"), table.schema
                    )
                writers[bucket].write_table(table.slice(start, end - start))
    finally:
        for writer in writers.values():
            writer.close()
    return [directory / f"bucket-{b:05d}.arrow" for b in sorted(writers)], total


def batches_of(table: pa.Table) -> list[broker_model.Batch]:
    """The rows of `table` as the oracle's `Batch` objects (absent columns take its defaults)."""
    out: list[broker_model.Batch] = []
    for chunk in table.to_batches(max_chunksize=65_536):
        names = chunk.schema.names
        columns = [chunk.column(i).to_pylist() for i in range(chunk.num_columns)]
        out.extend(
            broker_model.Batch(**dict(zip(names, values, strict=False)))
            for values in zip(*columns, strict=False)
        )
    return out


def replay(batches: str, *, limit: int | None = None, bucket_rows: int = 250_000) -> dict:
    """Replay the Parquet under `batches` with the oracle.

    Args:
        batches: a Parquet file or directory.
        limit: stop after the bucket that reaches this many replayed rows (then extrapolate).
        bucket_rows: about how many rows one spill file (one replay step) holds.

    Returns:
        findings (Arrow table), rows, rows_replayed, spill_s, replay_s, seconds (measured),
        extrapolated_s (None unless limited), partitions (the replayed (topic, partition)s when
        limited, else None).
    """
    directory = Path(tempfile.mkdtemp(prefix="eos-bench-sequential-"))
    try:
        start = time.perf_counter()
        files, total = spill(batches, directory, bucket_rows)
        spill_s = time.perf_counter() - start
        findings: list[broker_model.Finding] = []
        replayed = 0
        partitions: set[tuple[str, int]] = set()
        for path in files:
            with pa.memory_map(str(path)) as source:
                table = pa.ipc.open_file(source).read_all()
            rows = batches_of(table)
            del table
            findings.extend(broker_model.replay(rows))
            replayed += len(rows)
            partitions.update((b.topic, b.partition) for b in rows)
            del rows
            path.unlink()
            if limit is not None and replayed >= limit:
                break
        replay_s = time.perf_counter() - start - spill_s
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    limited = replayed < total
    table = pa.table(
        {
            "finding_type": [f.finding_type for f in findings],
            "topic": [f.topic for f in findings],
            "partition": [f.partition for f in findings],
            "base_offset": [f.base_offset for f in findings],
            "kafka_error": [f.kafka_error for f in findings],
        },
        schema=FINDINGS_SCHEMA,
    )
    return {
        "findings": table,
        "rows": total,
        "rows_replayed": replayed,
        "spill_s": spill_s,
        "replay_s": replay_s,
        "seconds": spill_s + replay_s,
        "extrapolated_s": spill_s + replay_s * total / replayed if limited and replayed else None,
        "partitions": sorted(partitions) if limited else None,
    }


def peak_rss_mb() -> float:
    """This process's peak resident set in MB (Linux reports ru_maxrss in kB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> None:
    """Replay `--batches`, write the findings to `--out`, print a JSON summary."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", required=True)
    parser.add_argument("--out", required=True, help="where the findings go (Parquet)")
    parser.add_argument("--limit", type=int, default=None,
                        help="replay about this many rows, then extrapolate the time")  # fmt: skip
    parser.add_argument("--bucket-rows", type=int, default=250_000)
    args = parser.parse_args(argv)
    result = replay(args.batches, limit=args.limit, bucket_rows=args.bucket_rows)
    pq.write_table(result.pop("findings"), args.out)
    partitions = result.pop("partitions")
    if partitions is not None:
        pq.write_table(
            pa.table({"topic": [t for t, _ in partitions], "partition": [p for _, p in partitions]},
                     schema=PARTITIONS_SCHEMA),
            args.out + ".partitions",
        )  # fmt: skip
    summary = {k: (round(v, 2) if isinstance(v, float) else v) for k, v in result.items()}
    summary["peak_rss_mb"] = round(peak_rss_mb())
    summary["limited"] = partitions is not None
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
