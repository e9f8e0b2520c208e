"""The bench's two comparison engines find exactly the planted faults (no Spark).

bench/duckdb_rules.py (one SQL window query) and bench/sequential.py (the oracle's replay over
spilled Parquet) run on a few hand-built batches with one sequence gap, one duplicate within the
cache, one fenced write and one offset overlap: each must report those four and nothing else, so
a comparison of their findings with the engine's cannot pass by finding nothing.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

duckdb = pytest.importorskip("duckdb")

from bench import duckdb_rules, sequential  # noqa: E402
from bench.run import compare  # noqa: E402

# (topic, partition, base_offset, last_offset, producer_id, producer_epoch, base_sequence)
ROWS = [
    ("orders", 0, 0, 1, 1, 0, 0),
    ("orders", 0, 2, 3, 1, 0, 2),
    ("orders", 0, 4, 5, 1, 0, 2),  # the batch at 2 again: DUPLICATE_BATCH (in the cache)
    ("orders", 0, 6, 7, 1, 0, 7),  # 4..6 missing: SEQUENCE_GAP
    ("orders", 0, 8, 8, 2, 1, 0),
    ("orders", 0, 9, 9, 2, 2, 0),  # a new epoch starting at 0: fine
    ("orders", 0, 10, 10, 2, 1, 1),  # epoch 1 after 2: FENCED_PRODUCER_EPOCH
    ("orders", 0, 11, 11, 2, 2, 1),  # the live producer carries on: fine
    ("orders", 1, 0, 2, 3, 0, 0),
    ("orders", 1, 2, 3, 3, 0, 3),  # offset 2 claimed twice: OFFSET_OVERLAP (sequences fine)
    ("orders", 1, 4, 4, 3, 0, 5),
    ("orders", 1, 7, 7, 3, 0, 6),  # offsets 5-6 in no batch: OFFSET_GAP (sequences fine)
    ("__consumer_offsets", 0, 0, 0, 4, 0, 5),  # coordinator topic: no sequence checks
    ("__consumer_offsets", 0, 1, 1, 4, 0, 5),
]
EXPECTED = {
    ("DUPLICATE_BATCH", "orders", 0, 4),
    ("SEQUENCE_GAP", "orders", 0, 6),
    ("FENCED_PRODUCER_EPOCH", "orders", 0, 10),
    ("OFFSET_OVERLAP", "orders", 1, 2),
    ("OFFSET_GAP", "orders", 1, 7),
}


@pytest.fixture
def batches_dir(tmp_path):
    names = ["topic", "partition", "base_offset", "last_offset", "producer_id",
             "producer_epoch", "base_sequence"]  # fmt: skip
    columns = list(zip(*ROWS, strict=True))
    table = pa.table(
        {
            **{name: values for name, values in zip(names, columns, strict=True)},
            "record_count": [
                last - base + 1 for base, last in zip(columns[2], columns[3], strict=True)
            ],
            "is_transactional": [False] * len(ROWS),
            "is_control": [False] * len(ROWS),
        }
    ).cast(
        pa.schema(
            [
                ("topic", pa.string()),
                ("partition", pa.int32()),
                ("base_offset", pa.int64()),
                ("last_offset", pa.int64()),
                ("producer_id", pa.int64()),
                ("producer_epoch", pa.int32()),
                ("base_sequence", pa.int32()),
                ("record_count", pa.int32()),
                ("is_transactional", pa.bool_()),
                ("is_control", pa.bool_()),
            ]
        )
    )
    directory = tmp_path / "batches"
    directory.mkdir()
    # Two files, the partitions interleaved, so the spill and the window both have to regroup.
    pq.write_table(table.take(list(range(0, len(ROWS), 2))), directory / "part-0.parquet")
    pq.write_table(table.take(list(range(1, len(ROWS), 2))), directory / "part-1.parquet")
    return directory


def keys(table: pa.Table) -> set[tuple]:
    return {
        (r["finding_type"], r["topic"], r["partition"], r["base_offset"]) for r in table.to_pylist()
    }


def test_duckdb_query_finds_exactly_the_planted_faults(batches_dir):
    findings, seconds = duckdb_rules.run(str(batches_dir))
    assert keys(findings) == EXPECTED
    assert seconds > 0


def test_sequential_replay_finds_exactly_the_planted_faults(batches_dir):
    result = sequential.replay(str(batches_dir), bucket_rows=4)
    assert keys(result["findings"]) == EXPECTED
    assert result["rows"] == result["rows_replayed"] == len(ROWS)
    assert result["extrapolated_s"] is None


def test_sequential_limit_extrapolates_and_names_its_partitions(batches_dir):
    result = sequential.replay(str(batches_dir), limit=1, bucket_rows=4)
    assert 0 < result["rows_replayed"] < result["rows"]
    assert result["extrapolated_s"] > 0
    replayed = set(result["partitions"])
    assert replayed and replayed < {("orders", 0), ("orders", 1), ("__consumer_offsets", 0)}
    assert keys(result["findings"]) == {k for k in EXPECTED if (k[1], k[2]) in replayed}


def test_compare_counts_matches_and_each_side_alone():
    ours = EXPECTED | {("SEQUENCE_GAP", "orders", 2, 0)}
    theirs = (EXPECTED - {("OFFSET_OVERLAP", "orders", 1, 2)}) | {("DUPLICATE_BATCH", "x", 0, 1)}
    by_type = compare(ours, theirs)
    assert by_type["SEQUENCE_GAP"] == {"matches": 1, "only_ours": 1, "only_theirs": 0}
    assert by_type["OFFSET_OVERLAP"] == {"matches": 0, "only_ours": 1, "only_theirs": 0}
    assert by_type["DUPLICATE_BATCH"] == {"matches": 1, "only_ours": 0, "only_theirs": 1}
    assert by_type["FENCED_PRODUCER_EPOCH"] == {"matches": 1, "only_ours": 0, "only_theirs": 0}
