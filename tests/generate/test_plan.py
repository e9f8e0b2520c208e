"""The generator's plan, layout constants and Kafka bytes, without Spark."""

import re

import pytest
from kafka.record.default_records import DefaultRecordBatch

from eos_audit.errors import ConfigError
from eos_audit.generate.files import batch_bytes, dump_lines
from eos_audit.generate.plan import FAULT_KINDS, FaultRates, GenerationPlan
from eos_audit.generate.spark_export import TXN_V1, TXN_V2, geometry
from eos_audit.sources.kafka.dump_log import parse_dump_log
from eos_audit.sources.kafka.segments import parse_segment

DATA = {
    "topic": "t", "partition": 0, "base_offset": 10_006, "last_offset": 10_008,
    "producer_id": 5 << 24, "producer_epoch": 0, "base_sequence": 2147483646, "last_sequence": 0,
    "record_count": 3, "is_transactional": False, "is_control": False, "control_type": None,
    "coordinator_epoch": None, "partition_leader_epoch": 4, "magic": 2,
    "max_timestamp": 1_795_219_200_060, "crc_valid": True, "source": None,
}  # fmt: skip
MARKER = dict(
    DATA, base_offset=10_012, last_offset=10_012, base_sequence=-1, last_sequence=-1,
    record_count=1, is_transactional=True, is_control=True, control_type="ABORT",
    coordinator_epoch=3, producer_epoch=7,
)  # fmt: skip
FIELDS = [k for k in DATA if k not in ("topic", "partition", "source")]


def test_plan_rejects_what_the_layout_cannot_honour():
    with pytest.raises(ConfigError, match=re.escape("block_batches must be >= 12")):
        GenerationPlan(batches=10, block_batches=8)
    with pytest.raises(ConfigError, match=re.escape("compacted_topics must be <= topics")):
        GenerationPlan(batches=10, topics=1, compacted_topics=2)


def test_scaled_rates_are_capped_per_unit():
    rates = FaultRates().scaled(1000)
    assert rates.retention_evicted_producer + rates.wraparound == pytest.approx(1.0)
    assert rates.aborted_transaction == FaultRates().aborted_transaction  # not a fault
    assert rates.hanging_transaction == 1.0


def test_every_fault_kind_names_registered_findings():
    units = {k.unit for k in FAULT_KINDS.values()}
    assert units <= {"block", "session", "leader_change", "partition"}
    assert len(FAULT_KINDS) == 14


def test_geometry_covers_every_slot_with_one_hot_partition_and_hot_producers():
    plan = GenerationPlan(batches=1_000_003, seed=5)
    g = geometry(plan)
    assert sum(g.slots_by_index) == plan.batches
    assert g.slots_by_index[0] == int(plan.batches * plan.hot_partition_share)
    assert max(g.slots_by_index[1:]) - min(g.slots_by_index[1:]) <= 1
    assert g.hot_tp == 5 % plan.topic_partitions
    # Every producer appears as often as its weight in a cycle, hot ones hot_weight times.
    assert [g.cycle.count(p) for p in range(plan.producers)] == g.weights
    assert g.weights[: plan.hot_producers] == [plan.hot_weight] * plan.hot_producers
    assert TXN_V1 in g.kinds and TXN_V2 in g.kinds


@pytest.mark.parametrize("row", [DATA, MARKER], ids=["wrapping data batch", "abort marker"])
def test_batch_bytes_read_back_by_kafka_python_and_by_the_segment_reader(row):
    data = batch_bytes(row)
    independent = DefaultRecordBatch(data)
    assert independent.validate_crc()
    assert (independent.base_offset, independent.producer_id, independent.base_sequence) == (
        row["base_offset"], row["producer_id"], row["base_sequence"],
    )  # fmt: skip
    assert independent.is_control_batch == row["is_control"]
    read = parse_segment(data, topic="t", partition=0, path="x.log").to_pylist()
    assert len(read) == 1
    assert read[0]["_source_error"] is None
    assert {k: read[0][k] for k in FIELDS} == {k: row[k] for k in FIELDS}


def test_dump_log_text_reads_back_to_the_same_batches():
    rows, text, position = [DATA, MARKER], ["Dumping /x/0/t-0/00000000000000010006.log"], 0
    for row in rows:
        data = batch_bytes(row)
        text += dump_lines(row, position, data)
        position += len(data)
    read = parse_dump_log(("\n".join(text) + "\n").encode(), path="t.txt").to_pylist()
    assert [r["_source_error"] for r in read] == [None, None]
    for got, row in zip(read, rows, strict=True):
        assert {k: got[k] for k in FIELDS} == {k: row[k] for k in FIELDS}
        assert (got["topic"], got["partition"]) == ("t", 0)
