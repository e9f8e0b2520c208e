"""Discovery of partition directories, producer snapshots and checkpoint files."""

from __future__ import annotations

import logging
import os
import re
import struct

import crc32c
import pytest
from chispa import assert_df_equality
from pyspark.sql import types as T

from eos_audit.errors import InputNotFoundError
from eos_audit.schemas import PRODUCER_STATE
from eos_audit.sources.kafka.partition_dirs import (
    PartitionDir,
    discover_partition_dirs,
    discover_segment_files,
)
from eos_audit.sources.kafka.state_files import (
    SNAPSHOT_SCHEMA,
    parse_leader_epoch_checkpoint,
    parse_snapshot,
    read_leader_epoch_checkpoints,
    read_offset_checkpoints,
    read_snapshots,
)
from tests.fixtures.segment_builder import (
    MAX_INT,
    SnapshotEntry,
    checkpoint_text,
    data_batch,
    snapshot_bytes,
    write_partition_dir,
    write_tree,
)


# ------------------------------------------------------------------------------------------------
# Discovery
# ------------------------------------------------------------------------------------------------
def test_discovery_on_a_multi_broker_tree(tmp_path, caplog):
    tree = write_tree(
        tmp_path,
        brokers=3,
        topics=("orders", "pay.ments-v2"),
        partitions=2,
        replication=2,
        batches_per_partition=3,
    )
    # A broker folder named like a partition dir, holding partition dirs (Kubernetes pod names).
    write_partition_dir(tmp_path, "kafka-0", "audit-log", 11, data_batch(0))
    for suffix in ("orders-0.3f1a2b-delete", "orders-1.3f1a2b-future", "orders-0.9c9c-stray"):
        (tmp_path / "broker-0" / suffix).mkdir()
        (tmp_path / "broker-0" / suffix / "00000000000000000000.log").write_bytes(data_batch(0))
    with caplog.at_level(logging.WARNING):
        dirs = discover_partition_dirs([str(tmp_path)])
    assert len(dirs) == tree.total_batches // 3 + 1
    assert sum("-delete" in m or "-future" in m or "-stray" in m for m in caplog.messages) == 3
    by_key = {(d.topic, d.partition, d.replica) for d in dirs}
    for (topic, p), brokers in tree.replicas.items():
        for b in brokers:
            assert (topic, p, b) in by_key
    assert ("audit-log", 11, "kafka-0") in by_key
    first = dirs[0]
    assert isinstance(first, PartitionDir)
    assert first.path == os.path.join(first.log_dir, f"{first.topic}-{first.partition}")
    assert os.path.basename(first.log_dir) == first.replica
    assert dirs == sorted(dirs, key=lambda d: (d.topic, d.partition, d.replica, d.path))


def test_discovery_of_one_partition_dir_and_one_file(tmp_path):
    pdir = write_partition_dir(
        tmp_path, "7", "a-b.c-12", 3, data_batch(0), data_batch(1), segment_bytes=10
    )
    (dirs,) = discover_partition_dirs([str(pdir)])
    assert (dirs.topic, dirs.partition, dirs.replica) == ("a-b.c-12", 3, "7")
    assert [os.path.basename(f["path"]) for f in discover_segment_files([str(pdir)])] == [
        "00000000000000000000.log",
        "00000000000000000001.log",
    ]
    one = str(pdir / "00000000000000000001.log")
    assert [f["path"] for f in discover_segment_files([one])] == [one]


def test_discovery_errors(tmp_path):
    missing = re.escape(f"input path does not exist: {tmp_path}/x")
    with pytest.raises(InputNotFoundError, match=missing):
        discover_partition_dirs([str(tmp_path / "x")])
    (tmp_path / "notes-1").mkdir()  # named like a partition dir, but no Kafka files in it
    with pytest.raises(InputNotFoundError, match="no Kafka partition directory"):
        discover_partition_dirs([str(tmp_path)])


# ------------------------------------------------------------------------------------------------
# Snapshots
# ------------------------------------------------------------------------------------------------
ENTRIES = [
    SnapshotEntry(
        1000,
        2,
        last_sequence=9,
        last_offset=120,
        offset_delta=4,
        timestamp=77,
        coordinator_epoch=3,
        txn_first_offset=116,
    ),
    # Wraps: decrementSequence(2, 5) = MAX - 3 + 1
    SnapshotEntry(1001, 0, last_sequence=2, last_offset=50, offset_delta=5, timestamp=78),
    # Marker-only producer: no batch metadata.
    SnapshotEntry(1002, 7, last_sequence=-1, last_offset=-1, timestamp=79, coordinator_epoch=0),
]


def test_snapshot_bytes_follow_the_spec():
    data = snapshot_bytes(ENTRIES[:1])
    entry = bytes.fromhex(
        "00000000000003e8"  # producer id 1000
        "0002"  # epoch
        "00000009"  # last sequence
        "0000000000000078"  # last offset 120
        "00000004"  # offset delta
        "000000000000004d"  # timestamp 77
        "00000003"  # coordinator epoch
        "0000000000000074"  # txn first offset 116
    )
    body = struct.pack(">i", 1) + entry
    assert data == struct.pack(">h", 1) + struct.pack(">I", crc32c.crc32c(body)) + body
    assert len(data) == 10 + 46


def test_parse_snapshot_values():
    rows = parse_snapshot(
        snapshot_bytes(ENTRIES),
        path="/d/t-0/00000000000000000121.snapshot",
        topic="t",
        partition=0,
        replica="b1",
    ).to_pylist()
    assert [r["batches"] for r in rows] == [
        [{"base_sequence": 5, "last_sequence": 9, "base_offset": 116, "last_offset": 120}],
        [{"base_sequence": MAX_INT - 2, "last_sequence": 2, "base_offset": 45, "last_offset": 50}],
        [],
    ]
    assert [(r["coordinator_epoch"], r["txn_first_offset"]) for r in rows] == [
        (3, 116),
        (None, None),
        (0, None),
    ]
    assert [r["source"] for r in rows] == [
        f"/d/t-0/00000000000000000121.snapshot:{10 + 46 * i}" for i in range(3)
    ]
    assert {r["snapshot_offset"] for r in rows} == {121}


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda b: b[:6] + b[6:-1] + bytes([b[-1] ^ 1]), "CRC is not valid"),
        (lambda b: struct.pack(">h", 2) + b[2:], "unknown file version 2"),
        (lambda b: _recrc(b + b"\0" * 3), "expected 10 + 46 x 3"),
        (lambda b: b[:5], "shorter than the header"),
    ],
)
def test_corrupt_snapshots_are_problems(mutate, reason):
    bad = mutate(snapshot_bytes(ENTRIES))
    (row,) = parse_snapshot(
        bad, path="/d/t-0/00000000000000000121.snapshot", topic="t", partition=0, replica="b1"
    ).to_pylist()
    assert reason in row["_problem"] and row["producer_id"] is None


def _recrc(data: bytes) -> bytes:
    return data[:2] + struct.pack(">I", crc32c.crc32c(data[6:])) + data[6:]


def test_read_snapshots_round_trip(spark, tmp_path):
    good = write_partition_dir(
        tmp_path,
        "b1",
        "t",
        0,
        data_batch(0),
        snapshots={121: snapshot_bytes(ENTRIES), 5: snapshot_bytes([])},
    )
    write_partition_dir(
        tmp_path, "b2", "t", 0, data_batch(0), snapshots={121: snapshot_bytes(ENTRIES)[:-1]}
    )
    dirs = discover_partition_dirs([str(tmp_path)])
    state, problems = read_snapshots(spark, dirs)
    assert state.schema.names[: len(PRODUCER_STATE.names)] == PRODUCER_STATE.names
    assert [f.dataType for f in state.schema.fields[: len(PRODUCER_STATE.names)]] == [
        f.dataType for f in PRODUCER_STATE.fields
    ]
    path = str(good / "00000000000000000121.snapshot")
    extra = {"state_offset": 121} if "state_offset" in PRODUCER_STATE.names else {}
    expected_rows = [
        {
            "topic": "t",
            "partition": 0,
            "producer_id": 1000,
            "producer_epoch": 2,
            "coordinator_epoch": 3,
            "txn_first_offset": 116,
            "last_timestamp": 77,
            "batches": [(5, 9, 116, 120)],
            "source": f"{path}:10",
            "snapshot_offset": 121,
            "replica": "b1",
            **extra,
        },
        {
            "topic": "t",
            "partition": 0,
            "producer_id": 1001,
            "producer_epoch": 0,
            "coordinator_epoch": None,
            "txn_first_offset": None,
            "last_timestamp": 78,
            "batches": [(MAX_INT - 2, 2, 45, 50)],
            "source": f"{path}:56",
            "snapshot_offset": 121,
            "replica": "b1",
            **extra,
        },
        {
            "topic": "t",
            "partition": 0,
            "producer_id": 1002,
            "producer_epoch": 7,
            "coordinator_epoch": 0,
            "txn_first_offset": None,
            "last_timestamp": 79,
            "batches": [],
            "source": f"{path}:102",
            "snapshot_offset": 121,
            "replica": "b1",
            **extra,
        },
    ]
    expected = spark.createDataFrame(
        [tuple(r.get(n) for n in SNAPSHOT_SCHEMA.names) for r in expected_rows], SNAPSHOT_SCHEMA
    )
    assert_df_equality(
        state, expected, ignore_row_order=True, ignore_nullable=True, ignore_metadata=True
    )
    (p,) = problems.collect()
    assert p.source == str(tmp_path / "b2" / "t-0" / "00000000000000000121.snapshot")
    assert "corrupt snapshot" in p.reason


# ------------------------------------------------------------------------------------------------
# Checkpoints
# ------------------------------------------------------------------------------------------------
def test_checkpoint_files(spark, tmp_path):
    write_partition_dir(
        tmp_path, "1", "orders", 0, data_batch(0), leader_epochs=[(0, 0), (3, 120), (7, 5000)]
    )
    p1 = write_partition_dir(tmp_path, "1", "orders", 1, data_batch(0))
    (p1 / "leader-epoch-checkpoint").write_text("0\n2\n0 0\nbroken line\n")
    (tmp_path / "1" / "log-start-offset-checkpoint").write_text(
        checkpoint_text([("orders", 0, 0), ("orders", 1, 42)])
    )
    (tmp_path / "1" / "replication-offset-checkpoint").write_text(
        checkpoint_text([("orders", 0, 5003), ("orders", 1, 17)])
    )
    (tmp_path / "1" / "recovery-point-offset-checkpoint").write_text("1\n0\n")
    dirs = discover_partition_dirs([str(tmp_path)])

    epochs, epoch_problems = read_leader_epoch_checkpoints(spark, dirs)
    got = sorted(
        (r.topic, r.partition, r.replica, r.leader_epoch, r.start_offset, r.source)
        for r in epochs.collect()
    )
    lec = str(tmp_path / "1" / "orders-0" / "leader-epoch-checkpoint")
    assert got == [
        ("orders", 0, "1", 0, 0, f"{lec}:line 3"),
        ("orders", 0, "1", 3, 120, f"{lec}:line 4"),
        ("orders", 0, "1", 7, 5000, f"{lec}:line 5"),
        ("orders", 1, "1", 0, 0, str(p1 / "leader-epoch-checkpoint") + ":line 3"),
    ]
    assert epochs.schema["leader_epoch"].dataType == T.IntegerType()
    assert sorted((r.source.rsplit(":", 1)[1], r.reason) for r in epoch_problems.collect()) == [
        ("line 4", "malformed checkpoint line"),
    ]

    offsets, offset_problems = read_offset_checkpoints(spark, dirs)
    got = sorted((r.topic, r.partition, r.replica, r.kind, r.offset) for r in offsets.collect())
    assert got == [
        ("orders", 0, "1", "high_watermark", 5003),
        ("orders", 0, "1", "log_start", 0),
        ("orders", 1, "1", "high_watermark", 17),
        ("orders", 1, "1", "log_start", 42),
    ]
    (problem,) = offset_problems.collect()
    assert problem.source.endswith("recovery-point-offset-checkpoint:line 1")
    assert problem.reason == "unsupported checkpoint version"


def test_checkpoint_numbers_beyond_their_fields_are_malformed_lines():
    # Found by fuzzing (issue 12): an epoch above int32 failed the Arrow cast and the task.
    text = checkpoint_text([(0, 0), (2147483648, 5), (3, 99999999999999999999), (4, 9)])
    batches = parse_leader_epoch_checkpoint(
        text.encode(), path="lec", topic="t", partition=0, replica="1"
    )
    rows = [r for b in batches for r in b.to_pylist()]
    good = [(r["leader_epoch"], r["start_offset"]) for r in rows if r["_problem"] is None]
    bad = [(r["source"], r["_problem"]) for r in rows if r["_problem"] is not None]
    assert good == [(0, 0), (4, 9)]
    assert bad == [
        ("lec:line 4", "malformed checkpoint line"),
        ("lec:line 5", "malformed checkpoint line"),
    ]
