"""Tiny hand-built inputs for rule and pipeline tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from eos_audit.schemas import PRODUCER_STATE, RECORD_BATCH

NULLABLE_BATCH = T.StructType([T.StructField(f.name, f.dataType, True) for f in RECORD_BATCH])
NULLABLE_STATE = T.StructType([T.StructField(f.name, f.dataType, True) for f in PRODUCER_STATE])


def batch(base_offset: int, last_offset: int | None = None, **fields) -> dict:
    """One record batch as a dict; defaults describe a plain one-record idempotent-less batch."""
    row = {
        "topic": "t",
        "partition": 0,
        "base_offset": base_offset,
        "last_offset": base_offset if last_offset is None else last_offset,
        "producer_id": -1,
        "producer_epoch": -1,
        "base_sequence": -1,
        "last_sequence": None,
        "record_count": None,
        "is_transactional": False,
        "is_control": False,
        "control_type": None,
        "coordinator_epoch": None,
        "partition_leader_epoch": 0,
        "magic": 2,
        "max_timestamp": 1_000_000 + base_offset,
        "crc_valid": True,
        "source": f"test@{base_offset}",
    }
    unknown = set(fields) - set(row)
    assert not unknown, unknown
    row.update(fields)
    return row


def data(
    base_offset: int, records: int = 1, *, pid: int = 1, epoch: int = 0, seq: int = 0, **fields
) -> dict:
    """An idempotent data batch of `records` records starting at sequence `seq`."""
    return batch(
        base_offset,
        base_offset + records - 1,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        **fields,
    )


def marker(
    offset: int,
    control_type: str = "COMMIT",
    *,
    pid: int = 1,
    epoch: int = 0,
    coordinator_epoch: int = 0,
    **fields,
) -> dict:
    """A transaction marker (control batch with one record)."""
    return batch(
        offset,
        offset,
        producer_id=pid,
        producer_epoch=epoch,
        is_transactional=True,
        is_control=True,
        control_type=control_type,
        coordinator_epoch=coordinator_epoch,
        record_count=1,
        **fields,
    )


def batches_df(spark: SparkSession, rows: list[dict]) -> DataFrame:
    """A DataFrame in the record-batch contract's column order (all columns nullable)."""
    return spark.createDataFrame(
        [tuple(r[f.name] for f in NULLABLE_BATCH) for r in rows], NULLABLE_BATCH
    )


def seeds_df(spark: SparkSession, seeds: list[dict]) -> DataFrame:
    """Seeded producer state rows (schemas.PRODUCER_STATE)."""
    full = []
    for s in seeds:
        row = {
            "coordinator_epoch": None,
            "txn_first_offset": None,
            "last_timestamp": None,
            "batches": [],
            "state_offset": None,
            "source": "test-seed",
            "run_id": None,
            "topic": "t",
            "partition": 0,
        }
        row.update(s)
        full.append(tuple(row[f.name] for f in NULLABLE_STATE))
    return spark.createDataFrame(full, NULLABLE_STATE)


@contextmanager
def computed_once(df: DataFrame) -> Iterator[DataFrame]:
    """`df` cached while the block runs: a test that reads an audit's records several times
    (findings, then quarantine) runs the audit once instead of once an action."""
    cached = df.cache()
    try:
        yield cached
    finally:
        cached.unpersist()
