"""The README's first command: a small sample export with injected faults, audited end to end.

The export is realistic rather than random: idempotent and transactional producers (transactions
v1 with same-epoch markers and v2 with an epoch bump per marker), a non-idempotent producer, a
topic whose log starts above 0, and a handful of injected faults, each listed in
`INJECTED_FAULTS` so the tests can check that every one is found exactly once and nothing else is.

Beside the log, `write_demo_evidence` writes what applications and offset watchers recorded that
night: the producers' send results (--acks) and ListOffsets observations (--list-offsets), with
their own planted faults.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from eos_audit.schemas import RECORD_BATCH

if TYPE_CHECKING:
    from eos_audit.audit.pipeline import AuditInputs

START_MS = 1_795_219_200_000  # 2026-11-21T00:00:00Z


@dataclass(frozen=True)
class InjectedFault:
    """A fault the demo plants, and the finding the audit must report for it."""

    finding_type: str
    severity: str
    topic: str
    partition: int
    base_offset: int
    story: str


@dataclass
class _Partition:
    topic: str
    partition: int
    next_offset: int = 0
    clock: int = START_MS
    leader_epoch: int = 0
    rows: list[dict] = field(default_factory=list)

    def append(
        self,
        *,
        records: int = 1,
        producer_id: int = -1,
        epoch: int = -1,
        base_sequence: int = -1,
        transactional: bool = False,
        control: str | None = None,
        coordinator_epoch: int | None = None,
        crc_valid: bool = True,
    ) -> int:
        base = self.next_offset
        last = base + records - 1
        self.clock += 1_000
        self.rows.append(
            {
                "topic": self.topic,
                "partition": self.partition,
                "base_offset": base,
                "last_offset": last,
                "producer_id": producer_id,
                "producer_epoch": epoch,
                "base_sequence": base_sequence,
                "last_sequence": -1 if base_sequence < 0 else base_sequence + records - 1,
                "record_count": records,
                "is_transactional": transactional,
                "is_control": control is not None,
                "control_type": control,
                "coordinator_epoch": coordinator_epoch,
                "partition_leader_epoch": self.leader_epoch,
                "magic": 2,
                "max_timestamp": self.clock,
                "crc_valid": crc_valid,
                "source": f"demo:{self.topic}-{self.partition}@{base}",
            }
        )
        self.next_offset = last + 1
        return base


class _Producer:
    """An idempotent (or transactional) producer writing to one partition."""

    def __init__(self, part: _Partition, producer_id: int, epoch: int = 0, sequence: int = 0):
        self.part, self.producer_id, self.epoch, self.sequence = part, producer_id, epoch, sequence

    def send(self, records: int = 3, *, transactional: bool = False) -> int:
        offset = self.part.append(
            records=records,
            producer_id=self.producer_id,
            epoch=self.epoch,
            base_sequence=self.sequence,
            transactional=transactional,
        )
        self.sequence += records
        return offset

    def marker(self, control: str, coordinator_epoch: int = 7, *, epoch: int | None = None) -> int:
        return self.part.append(
            producer_id=self.producer_id,
            epoch=self.epoch if epoch is None else epoch,
            transactional=True,
            control=control,
            coordinator_epoch=coordinator_epoch,
        )


def build_demo_export() -> tuple[list[dict], list[InjectedFault], list[dict]]:
    """The sample export's record batches, the faults planted in it, and its bad rows."""
    faults: list[InjectedFault] = []

    # payments-0: an idempotent producer whose retry was written twice.
    p0 = _Partition("payments", 0)
    producer = _Producer(p0, 1001)
    for _ in range(6):
        producer.send()
    retried = p0.rows[-2]
    dup = p0.append(records=3, producer_id=1001, epoch=0, base_sequence=retried["base_sequence"])
    faults.append(
        InjectedFault(
            "DUPLICATE_BATCH",
            "CRITICAL",
            "payments",
            0,
            dup,
            "a retried batch was written a second time",
        )
    )
    for _ in range(4):
        producer.send()
    for _ in range(5):
        p0.append(records=2)  # a non-idempotent producer (no producer id)

    # payments-1: a lost batch (the leader lost acknowledged sequences 9-11).
    p1 = _Partition("payments", 1)
    producer = _Producer(p1, 1002)
    for _ in range(3):
        producer.send()
    producer.sequence += 3
    gap = producer.send()
    faults.append(
        InjectedFault(
            "SEQUENCE_GAP", "CRITICAL", "payments", 1, gap, "sequences 9-11 never reached the log"
        )
    )
    for _ in range(3):
        producer.send()

    # ledger-0: transactions v1 (same-epoch markers, sequences continue), then a fenced zombie
    # and a non-transactional write inside an open transaction.
    l0 = _Partition("ledger", 0)
    txn = _Producer(l0, 2001, epoch=4)
    for _ in range(3):
        txn.send(2, transactional=True)
        txn.send(1, transactional=True)
        txn.marker("COMMIT")
    txn.epoch = 5  # the coordinator fenced epoch 4 (InitProducerId by a new instance)
    txn.sequence = 0
    txn.marker("ABORT", epoch=5)
    zombie = l0.append(records=2, producer_id=2001, epoch=4, base_sequence=9, transactional=True)
    faults.append(
        InjectedFault(
            "FENCED_PRODUCER_EPOCH",
            "CRITICAL",
            "ledger",
            0,
            zombie,
            "the old instance (epoch 4) wrote after being fenced",
        )
    )
    txn.send(2, transactional=True)
    stray = txn.send(1, transactional=False)
    faults.append(
        InjectedFault(
            "INVALID_TXN_STATE",
            "CRITICAL",
            "ledger",
            0,
            stray,
            "a non-transactional write while a transaction was open",
        )
    )
    txn.marker("COMMIT")

    # ledger-1: transactions v2: every marker bumps the epoch, each transaction restarts at 0.
    l1 = _Partition("ledger", 1)
    tv2 = _Producer(l1, 2002, epoch=10)
    for _ in range(4):
        tv2.send(2, transactional=True)
        tv2.send(2, transactional=True)
        tv2.marker("COMMIT", epoch=tv2.epoch + 1)
        tv2.epoch += 1
        tv2.sequence = 0
    l1.leader_epoch = 1
    for _ in range(2):
        tv2.send(1, transactional=True)
    tv2.marker("ABORT", epoch=tv2.epoch + 1)

    # orders-0: retention removed the first 5000 offsets; a long-lived producer continues there.
    o0 = _Partition("orders", 0, next_offset=5_000)
    old = _Producer(o0, 3001, epoch=2, sequence=1_200)
    first = old.send()
    faults.append(
        InjectedFault(
            "UNKNOWN_PRODUCER",
            "INFO",
            "orders",
            0,
            first,
            "benign: its earlier batches were deleted by retention",
        )
    )
    fresh = _Producer(o0, 3002)
    for _ in range(3):
        old.send()
        fresh.send(2)
    corrupt = o0.append(records=2, crc_valid=False)
    faults.append(
        InjectedFault(
            "CORRUPT_BATCH", "ERROR", "orders", 0, corrupt, "a flipped byte in the copied segment"
        )
    )
    fresh.send(2)

    rows = [r for part in (p0, p1, l0, l1, o0) for r in part.rows]
    bad_rows = [dict(rows[0], base_offset=-7, source="demo:bad-row")]
    return rows, faults, bad_rows


def write_demo_export(directory: Path) -> tuple[Path, list[InjectedFault]]:
    """Write the sample export as Parquet (one file) and return its path and the planted faults."""
    rows, faults, bad_rows = build_demo_export()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "record_batches.parquet"
    columns = RECORD_BATCH.fieldNames()
    all_rows = rows + bad_rows
    table = pa.table({c: [r[c] for r in all_rows] for c in columns})
    pq.write_table(table, path)
    return path, faults


@dataclass(frozen=True)
class DemoEvidence:
    """The sample's client-side evidence: files, the export time and the faults planted in them."""

    acks: Path
    list_offsets: Path
    export_time: str
    faults: list[InjectedFault]


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds")


def build_demo_acks() -> tuple[list[dict], list[InjectedFault]]:
    """Send results as the applications logged them, for two producers of the sample log."""
    rows, _, _ = build_demo_export()
    faults: list[InjectedFault] = []
    acks: list[dict] = []

    def ack(row: dict, **changes) -> dict:
        value = {
            "event_time": _iso(row["max_timestamp"] + 5),
            "topic": row["topic"],
            "partition": row["partition"],
            "producer_id": row["producer_id"],
            "producer_epoch": row["producer_epoch"],
            "base_sequence": row["base_sequence"],
            "record_count": row["record_count"],
            "offset": row["base_offset"],
            "error": None,
            "log_start_offset": 0,
        }
        value.update(changes)
        return value

    # payments-1: every batch of producer 1002 was acknowledged where the log holds it, and so
    # was sequence 9-11 at offset 9, before an unclean leader election lost it: the new leader
    # wrote sequence 12 there.
    p1 = [r for r in rows if r["topic"] == "payments" and r["partition"] == 1]
    for row in p1:
        if row["base_sequence"] == 12:
            acks.append(ack(row, base_sequence=9, event_time=_iso(row["max_timestamp"] - 500)))
            faults.append(
                InjectedFault(
                    "ACKED_WRITE_LOST",
                    "CRITICAL",
                    "payments",
                    1,
                    row["base_offset"],
                    "sequences 9-11 were acknowledged at offset 9, then lost",
                )
            )
        acks.append(ack(row))
    # orders-0: producer 3001 was idle past retention; its next send met UNKNOWN_PRODUCER_ID with
    # a log start offset above its last acknowledged offset: benign (KIP-360's client rule).
    o0 = [r for r in rows if r["topic"] == "orders" and r["producer_id"] == 3001]
    first = o0[0]
    ten_days_before = _iso(first["max_timestamp"] - 10 * 86_400_000)
    acks.append(ack(first, offset=4_100, base_sequence=1_197, event_time=ten_days_before))
    acks.append(
        ack(
            first,
            offset=None,
            error="UNKNOWN_PRODUCER_ID",
            log_start_offset=5_000,
            event_time=_iso(first["max_timestamp"] - 1_000),
        )
    )
    faults.append(
        InjectedFault(
            "CLIENT_SEQUENCE_ERROR",
            "INFO",
            "orders",
            0,
            -1,
            "benign: UNKNOWN_PRODUCER_ID after retention removed the producer's state",
        )
    )
    acks += [ack(r, log_start_offset=5_000) for r in o0]
    return acks, faults


def build_demo_list_offsets() -> tuple[list[dict], list[InjectedFault]]:
    """An offset watcher's ListOffsets(latest) answers for payments-0 across a leader change."""
    minute = 60_000

    def obs(at: int, offset: int | None, epoch: int | None, error: str | None = None) -> dict:
        return {
            "observed_at": _iso(START_MS + at * minute),
            "topic": "payments",
            "partition": 0,
            "spec": "latest",
            "isolation": "read_uncommitted",
            "offset": offset,
            "leader_epoch": epoch,
            "error": error,
        }

    observations = [
        obs(1, 30, 0),
        obs(2, None, None, "OFFSET_NOT_AVAILABLE"),  # the new leader's high watermark lags
        obs(3, 25, 1),  # KIP-207: behind the old leader's answer ...
        obs(4, 36, 1),  # ... and caught up a minute later
        obs(5, 43, 1),
    ]
    fault = InjectedFault(
        "LIST_OFFSETS_REGRESSION",
        "WARNING",
        "payments",
        0,
        25,
        "benign: a new leader's high watermark lagged for a minute (KIP-207)",
    )
    return observations, [fault]


def write_demo_evidence(directory: Path) -> DemoEvidence:
    """Write the sample's acknowledgements and ListOffsets observations as JSON lines."""
    directory.mkdir(parents=True, exist_ok=True)
    acks, ack_faults = build_demo_acks()
    observations, offset_faults = build_demo_list_offsets()
    files = {"acks": directory / "acks.jsonl", "list_offsets": directory / "list_offsets.jsonl"}
    for name, rows in (("acks", acks), ("list_offsets", observations)):
        files[name].write_text("".join(json.dumps(r) + "\n" for r in rows))
    return DemoEvidence(
        acks=files["acks"],
        list_offsets=files["list_offsets"],
        export_time=_iso(START_MS + 3_600_000),
        faults=ack_faults + offset_faults,
    )


def demo_inputs(batches: Path, evidence: DemoEvidence) -> AuditInputs:
    """What `eos-audit demo` audits: the log, the send results and the offset observations."""
    from eos_audit.audit.pipeline import AuditInputs

    return AuditInputs(
        batches=(str(batches),),
        acks=(str(evidence.acks),),
        list_offsets=(str(evidence.list_offsets),),
        export_time=evidence.export_time,
    )
