"""Producer-state rules of the Spark engine, one hand-written scenario per rule and edge.

Every scenario sits on its own topic, so the scenarios are independent; all of them are audited in
ONE Spark job (the module fixture `replayed`) and each test reads its own topic's findings. A second
job audits the same rows in reverse order (`replayed_reversed`) for the finding-id tests. The
expectations come from docs/replay_semantics.md, not from the engine.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import pytest
from pyspark.sql import functions as F

from eos_audit.audit import replay_plan
from eos_audit.audit.output_records import findings_of
from eos_audit.config import AuditConfig
from eos_audit.sources.tabular.canonical import to_canonical
from tests.builders import batch, batches_df, data, marker, seeds_df

PID = 4242  # distinctive, so a detail sentence cannot mention it by accident (offsets are small)
DAY = 86_400_000
TS = 1_700_000_000_000
MAX = 2_147_483_647

OOS = "OUT_OF_ORDER_SEQUENCE_NUMBER"
IPE = "INVALID_PRODUCER_EPOCH"
FENCED = "FENCED_PRODUCER_EPOCH"
DUP = "DUPLICATE_BATCH"
RESET = "SEQUENCE_RESET"
OVERLAP = "SEQUENCE_OVERLAP"
GAP = "SEQUENCE_GAP"
NEW_EPOCH = "NEW_EPOCH_NONZERO_SEQUENCE"
UNKNOWN = "UNKNOWN_PRODUCER"
INVALID_TXN = "INVALID_TXN_STATE"
COORD_FENCED = "COORDINATOR_FENCED"
PRODUCER_TYPES = {FENCED, DUP, RESET, OVERLAP, GAP, NEW_EPOCH, UNKNOWN, INVALID_TXN, COORD_FENCED}

# The main run treats topics matching c* as compacted; every other scenario topic starts with "p-"
# (or is a coordinator topic), so only the "c-" scenarios are compacted.
CONFIG = AuditConfig().with_overrides(topics={"compacted": ["c*"]})
FIELDS = (
    "finding_type",
    "base_offset",
    "severity",
    "cause",
    "kafka_error",
    "expected_sequence",
    "previous_offset",
)


# ------------------------------------------------------------------------------------------------
# Builders and helpers
# ------------------------------------------------------------------------------------------------
def d(off, n=1, *, seq=0, epoch=0, pid=PID, txn=False, ts=None, **kw):
    """A data batch of `n` records at offsets off..off+n-1 starting at sequence `seq`."""
    if ts is not None:
        kw["max_timestamp"] = ts
    return data(off, n, pid=pid, epoch=epoch, seq=seq, is_transactional=txn, **kw)


def m(off, kind="COMMIT", *, epoch=0, coord=0, pid=PID, ts=None, **kw):
    """A transaction marker (one control record)."""
    if ts is not None:
        kw["max_timestamp"] = ts
    return marker(off, kind, pid=pid, epoch=epoch, coordinator_epoch=coord, **kw)


def empty_control(row: dict) -> dict:
    """The control batch with all its records cleaned away (record_count 0)."""
    return {**row, "record_count": 0}


def seed(epoch, batches=(), **kw) -> dict:
    """Seeded state of producer PID; `batches` as (base_seq, last_seq, base_off, last_off)."""
    cached = [
        {"base_sequence": bs, "last_sequence": ls, "base_offset": bo, "last_offset": lo}
        for bs, ls, bo, lo in batches
    ]
    return {"producer_id": PID, "producer_epoch": epoch, "batches": cached, **kw}


def f(finding_type, off, severity, cause=None, error=None, expected=None, previous=None):
    """An expected finding in the order of FIELDS."""
    return (finding_type, off, severity, cause, error, expected, previous)


def _key(t: tuple) -> tuple:
    return tuple((x is None, x) for x in t)


def audit_findings(spark, rows, config=None, seeds=None, log_starts=None, *, run_id="test-run"):
    """Run `replay_plan.audit` (one Spark job) and return the findings table rows."""
    records = replay_plan.audit(
        # Several input partitions, so the engine's own shuffle decides the order.
        to_canonical(batches_df(spark, rows)).repartition(3),
        config or AuditConfig(),
        run_id,
        seeds_df=seeds_df(spark, seeds) if seeds else None,
        log_starts_df=(
            spark.createDataFrame(log_starts, "topic string, partition int, log_start_offset long")
            if log_starts
            else None
        ),
    )
    # Transactions have their own tests (test_transactions.py): a scenario with an old open
    # transaction is also a HANGING_TRANSACTION, which is not what these scenarios check.
    findings = findings_of(records).where(F.col("finding_type") != "HANGING_TRANSACTION")
    return findings.collect()


def as_tuples(found) -> list[tuple]:
    return sorted((tuple(r[c] for c in FIELDS) for r in found), key=_key)


# ------------------------------------------------------------------------------------------------
# Scenarios: each on its own topic
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scenario:
    topic: str
    rows: list[dict]
    expected: list[tuple]
    seeds: list[dict] = field(default_factory=list)
    log_start: int | None = None  # a log-start-offset checkpoint for the partition


SEED_E2 = seed(2, [(0, 4, 40, 44), (5, 9, 45, 49)], coordinator_epoch=4, last_timestamp=TS)
WRAP_SEED = seed(0, [(MAX, MAX, 0, 0)])

GROUPS: dict[str, list[Scenario]] = {
    "fenced": [
        Scenario(
            # Fenced although also out of sequence (7); the zombie batch leaves the state as it
            # was, so offset 2 is clean.
            "p-fenced-data",
            [d(0, epoch=1), d(1, epoch=0, seq=7), d(2, epoch=1, seq=1)],
            [f(FENCED, 1, "CRITICAL", error=IPE)],
        ),
        Scenario(
            "p-fenced-marker",  # the zombie marker does not close the txn nor set coordinator 9
            [
                d(0, epoch=1, txn=True),
                m(1, epoch=0, coord=9),
                d(2, epoch=1, seq=1),
                m(3, epoch=1, coord=5),
            ],
            [
                f(FENCED, 1, "CRITICAL", error=IPE),
                f(INVALID_TXN, 2, "CRITICAL", error=INVALID_TXN, previous=0),
            ],
        ),
        Scenario(  # precedence: also a non-transactional batch inside an open txn
            "p-fenced-over-invalid-txn",
            [d(0, epoch=2, txn=True), d(1, epoch=1)],
            [f(FENCED, 1, "CRITICAL", error=IPE)],
        ),
        Scenario(  # precedence: also an exact repeat of the epoch-0 batch at offset 0
            "p-fenced-over-duplicate",
            [d(0), d(1, epoch=1), d(2)],
            [f(FENCED, 2, "CRITICAL", error=IPE)],
        ),
        Scenario(  # precedence: also below the coordinator epoch 5
            "p-fenced-over-coordinator-fenced",
            [m(0, epoch=2, coord=5), m(1, epoch=1, coord=1)],
            [f(FENCED, 1, "CRITICAL", error=IPE)],
        ),
    ],
    "duplicate": [
        Scenario(  # in the cache: deduplicated by a leader, and the state is unchanged after it
            "p-dup-in-cache",
            [d(0), d(1, 2, seq=1), d(3, seq=3), d(4, 2, seq=1), d(6, seq=4)],
            [f(DUP, 4, "CRITICAL", previous=1)],
        ),
        Scenario(  # seq 0 is the 6th applied batch back (evicted), seq 1 the 5th (still cached)
            "p-dup-cache-window",
            [d(i, seq=i) for i in range(6)] + [d(6, seq=0), d(7, seq=1), d(8, seq=6)],
            [f(DUP, 6, "CRITICAL", error=OOS, previous=0), f(DUP, 7, "CRITICAL", previous=1)],
        ),
        Scenario(  # precedence: also a SEQUENCE_RESET and an INVALID_TXN_STATE
            "p-dup-over-reset",
            [d(0, 5), d(5, seq=5, txn=True), d(6, 5, seq=0)],
            [f(DUP, 6, "CRITICAL", previous=0)],
        ),
        Scenario(  # a duplicate of a duplicate points at the original
            "p-dup-of-dup",
            [d(0), d(1), d(2)],
            [f(DUP, 1, "CRITICAL", previous=0), f(DUP, 2, "CRITICAL", previous=0)],
        ),
        Scenario(  # expiry starts a new session: the same range again is not a duplicate
            "p-dup-not-across-sessions",
            [d(0, 3, ts=TS), d(3, 3, ts=TS + DAY)],
            [],
        ),
    ],
    "reset": [
        Scenario(
            "p-reset-unexplained",
            [d(0, 5), d(5, seq=5), d(6)],
            [f(RESET, 6, "ERROR", "UNEXPLAINED", OOS, 6, 5)],
        ),
        Scenario(  # the seeded state ends at offset 60, the log starts at 100: deleted in between
            "p-reset-seed-below-log-start",
            [d(100)],
            [f(RESET, 100, "INFO", "LOG_START", OOS, 5, 40)],
            seeds=[seed(0, [(0, 4, 40, 44)], state_offset=60)],
        ),
        Scenario(  # state_offset null: the seed stands right before the log, nothing was deleted
            "p-reset-seed-right-before-log",
            [d(100)],
            [f(RESET, 100, "ERROR", "UNEXPLAINED", OOS, 5, 40)],
            seeds=[seed(0, [(0, 4, 40, 44)])],
        ),
        Scenario(  # a log-start checkpoint above the previous batch's end
            "p-reset-checkpoint",
            [d(0, 5), d(5)],
            [f(RESET, 5, "INFO", "LOG_START", OOS, 5, 0)],
            log_start=8,
        ),
        Scenario(
            # After the reset (0-2), (3-4) (5-6) (7-8) repeat ranges written before it, but each is
            # six applied batches back, out of a leader's five cached ones, and each is the next
            # sequence: a leader accepts them, and (9-11) follows (7-8).
            "p-reset-then-in-order",
            [d(0)] + [d(1 + 2 * k, 2, seq=1 + 2 * k) for k in range(6)]
            + [d(13, 3), d(16, 2, seq=3), d(18, 2, seq=5), d(20, 2, seq=7), d(22, 3, seq=9)],
            [f(RESET, 13, "ERROR", "UNEXPLAINED", OOS, 13, 11)],
        ),
    ],
    "overlap": [
        Scenario(
            "p-overlap",
            [d(0, 5), d(5, seq=2)],
            [f(OVERLAP, 5, "ERROR", None, OOS, 5, 0)],
        ),
        Scenario(
            # A leader rejects the overlapping (3-5) and its state stays at 10: (11) is in
            # sequence, not a gap.
            "p-overlap-leaves-the-state",
            [d(k, seq=k) for k in range(11)] + [d(11, 3, seq=3), d(14, seq=11)],
            [f(OVERLAP, 11, "ERROR", None, OOS, 11, 10)],
        ),
        Scenario(  # just below the wrap: 2147483646 after 2147483647 overlaps
            "p-overlap-at-wrap",
            [d(10, seq=MAX - 1)],
            [f(OVERLAP, 10, "ERROR", None, OOS, 0, 0)],
            seeds=[WRAP_SEED],
        ),
    ],
    "gap": [
        Scenario(  # one lost batch (seq 3-4): exactly one finding, the gap batch is applied
            "p-gap-no-cascade",
            [d(0), d(1, 2, seq=1), d(3, seq=5), d(4, seq=6), d(5, seq=7)],
            [f(GAP, 3, "CRITICAL", "UNEXPLAINED", OOS, 3, 1)],
        ),
        Scenario(
            # The cleaner dropped offsets 5-9 (sequences 5-7): both holes are its work.
            "c-gap-compacted",
            [d(0, 5), d(10, seq=8)],
            [
                f(GAP, 10, "INFO", "COMPACTION", OOS, 5, 0),
                f("OFFSET_GAP", 10, "INFO", "COMPACTION", None, None, 4),
            ],
        ),
        Scenario(
            "p-gap-checkpoint",
            [d(0, 5), d(5, seq=8)],
            [f(GAP, 5, "INFO", "LOG_START", OOS, 5, 0)],
            log_start=7,
        ),
        Scenario(  # a marker at a new epoch clears the cache: the next batch must start at 0
            "p-gap-after-epoch-bump-marker",
            [d(0, 5, txn=True), m(5, epoch=1), d(6, epoch=1, seq=5)],
            [f(GAP, 6, "CRITICAL", "UNEXPLAINED", OOS, 0, None)],
        ),
    ],
    "wraparound": [
        Scenario(  # 2147483637 + 20 wraps to 9; 10 follows; 11..MAX; then 0 follows MAX
            "p-wrap-clean",
            [d(10, 21, seq=2147483637), d(31, seq=10), d(32, MAX - 10, seq=11), d(32 + MAX - 10)],
            [],
            seeds=[seed(0, [(2147483630, 2147483636, 0, 6)])],
        ),
        Scenario(  # the wrap's last sequence really is 9: 11 after it is a gap expecting 10
            "p-wrap-last-sequence",
            [d(10, 21, seq=2147483637), d(31, seq=11)],
            [f(GAP, 31, "CRITICAL", "UNEXPLAINED", OOS, 10, 10)],
            seeds=[seed(0, [(2147483630, 2147483636, 0, 6)])],
        ),
        Scenario(  # 5 after MAX: just past the wrap, a GAP (expected 0), not an OVERLAP
            "p-wrap-gap",
            [d(10, seq=5)],
            [f(GAP, 10, "CRITICAL", "UNEXPLAINED", OOS, 0, 0)],
            seeds=[WRAP_SEED],
        ),
    ],
    "new_epoch": [
        Scenario(  # the batch is applied: the next one at epoch 1 continues from it
            "p-new-epoch-nonzero",
            [d(0), d(1, epoch=1, seq=3), d(2, epoch=1, seq=4)],
            [f(NEW_EPOCH, 1, "ERROR", None, OOS, 0, None)],
        ),
        Scenario(  # precedence over INVALID_TXN_STATE
            "p-new-epoch-over-invalid-txn",
            [d(0, txn=True), d(1, epoch=1, seq=3)],
            [f(NEW_EPOCH, 1, "ERROR", None, OOS, 0, None)],
        ),
        Scenario("p-new-epoch-at-zero", [d(0, 3), d(3, epoch=1), d(4, epoch=5)], []),
    ],
    "unknown": [
        Scenario(  # first-write loss at log start 0
            "p-unknown-first-write-loss",
            [d(0, seq=5), d(1, seq=6)],
            [f(UNKNOWN, 0, "CRITICAL", "UNEXPLAINED", None, 0, None)],
        ),
        Scenario(
            "p-unknown-log-start",
            [d(100, seq=5)],
            [f(UNKNOWN, 100, "INFO", "LOG_START", None, 0, None)],
        ),
        Scenario(
            "c-unknown-compacted",
            [d(0, seq=5)],
            [f(UNKNOWN, 0, "INFO", "COMPACTION", None, 0, None)],
        ),
        Scenario(
            "p-unknown-expiry",
            [d(0, ts=TS), d(1, seq=1, ts=TS + DAY)],
            [f(UNKNOWN, 1, "INFO", "PRODUCER_EXPIRY", None, 0, 0)],
        ),
        Scenario(  # expiry is the cause even though the log also starts above 0
            "p-unknown-expiry-before-log-start",
            [d(100, ts=TS), d(101, seq=1, ts=TS + DAY)],
            [f(UNKNOWN, 101, "INFO", "PRODUCER_EXPIRY", None, 0, 100)],
        ),
        Scenario(  # the marker closed the transaction: the producer may expire after it
            "p-unknown-expiry-after-commit",
            [d(0, txn=True, ts=TS), m(1, ts=TS + 1), d(2, seq=1, ts=TS + 1 + DAY)],
            [f(UNKNOWN, 2, "INFO", "PRODUCER_EXPIRY", None, 0, 1)],
        ),
        Scenario(  # retention deleted seq 0-9; the first retained row is the COMMIT (KAFKA-7190)
            "p-unknown-marker-first-after-retention",
            [m(100, coord=4), d(101, seq=10, txn=True), d(102, seq=11, txn=True), m(103, coord=4)],
            [f(UNKNOWN, 101, "INFO", "LOG_START", None, 0, 100)],
        ),
        Scenario(  # a log-start checkpoint puts the log start above 0 as well
            "p-unknown-markers-first-log-start-checkpoint",
            [m(0, coord=4), m(1, coord=4), d(2, seq=10)],
            [f(UNKNOWN, 2, "INFO", "LOG_START", None, 0, 1)],
            log_start=1,
        ),
        Scenario(  # on a log that starts at 0 nothing was deleted: the leader expected 0
            "p-marker-first-at-log-start-zero",
            [m(0, coord=4), d(1, seq=10, txn=True)],
            [f(GAP, 1, "CRITICAL", "UNEXPLAINED", OOS, 0, None)],
        ),
        Scenario(  # a seed is the broker's own state: marker-only there too, so 0 was expected
            "p-marker-first-seeded",
            [m(100, coord=4, ts=TS + 5), d(101, seq=10, txn=True, ts=TS + 6)],
            [f(GAP, 101, "CRITICAL", "UNEXPLAINED", OOS, 0, None)],
            seeds=[seed(0, coordinator_epoch=4, last_timestamp=TS)],
        ),
        Scenario("p-no-expiry-one-ms-short", [d(0, ts=TS), d(1, seq=1, ts=TS + DAY - 1)], []),
        Scenario(  # an open transaction keeps the producer alive however long the gap
            "p-no-expiry-txn-open",  # the gap of p-unknown-expiry, with a txn open
            [d(0, txn=True, ts=TS), d(1, seq=1, txn=True, ts=TS + DAY)],
            [],
        ),
    ],
    "invalid_txn": [
        Scenario(
            "p-invalid-txn",
            [d(0, txn=True), d(1, 2, seq=1, txn=True), d(3, seq=3)],
            [f(INVALID_TXN, 3, "CRITICAL", None, INVALID_TXN, None, 0)],
        ),
        Scenario(  # the txn starts at the first transactional batch after the last marker
            "p-invalid-txn-after-marker",
            [d(0, txn=True), m(1), d(2, seq=1, txn=True), d(3, seq=2)],
            [f(INVALID_TXN, 3, "CRITICAL", None, INVALID_TXN, None, 2)],
        ),
        Scenario(  # coordinator appends (no sequence) on a coordinator topic still get it
            "__transaction_state",
            [d(0, seq=-1, txn=True), d(1, seq=-1)],
            [f(INVALID_TXN, 1, "CRITICAL", None, INVALID_TXN, None, 0)],
        ),
    ],
    "coordinator_fenced": [
        Scenario(  # the fenced marker is applied: it closes the txn and lowers the epoch to 3
            "p-coordinator-fenced",
            [
                d(0, txn=True),
                m(1, coord=5),
                d(2, seq=1, txn=True),
                m(3, coord=3),
                d(4, seq=2),
                m(5, coord=4),
            ],
            [f(COORD_FENCED, 3, "ERROR", None, "TRANSACTION_COORDINATOR_FENCED")],
        ),
        Scenario("p-coordinator-epoch-null", [m(0, coord=5), m(1, coord=None), m(2, coord=5)], []),
    ],
    "transactions": [
        Scenario(  # kafka_rules.md §4.3 (klog): sequences continue across same-epoch COMMITs
            "p-tv1-klog",
            [
                d(0, 2, txn=True),
                d(2, seq=2, txn=True),
                d(3, seq=3, txn=True),
                m(4, coord=4),
                d(5, seq=4, txn=True),
                m(6, coord=4),
            ],
            [],
        ),
        Scenario(  # transactions v2: every marker bumps the epoch, the next txn restarts at 0
            "p-tv2",
            [
                d(0, 2, txn=True),
                m(2, epoch=1, coord=3),
                d(3, epoch=1, txn=True),
                d(4, 3, epoch=1, seq=1, txn=True),
                m(7, "ABORT", epoch=2, coord=3),
                d(8, epoch=2, txn=True),
                m(9, epoch=3, coord=3),
                m(10, epoch=3, coord=3),
            ],
            [],
        ),
        Scenario(
            "p-marker-without-txn",
            [m(0, epoch=2, coord=1), m(1, epoch=2, coord=1), d(2, epoch=2)],
            [],
        ),
        Scenario(  # a marker whose type the export does not show (dump without deep iteration)
            # closes the transaction like any marker, and is fenced like any marker
            "p-untyped-marker",
            [
                d(0, txn=True),
                m(1, None, coord=None),
                d(2, seq=1),
                d(3, epoch=1),
                m(4, None, epoch=0, coord=None),
            ],
            [f(FENCED, 4, "CRITICAL", error=IPE)],
        ),
        Scenario(  # cleaned markers neither close the txn nor raise the epoch (else: FENCED)
            "p-empty-control-batch",
            [
                d(0, txn=True),
                empty_control(m(1)),
                empty_control(m(2, epoch=9, coord=99)),
                d(3, seq=1),
            ],
            [f(INVALID_TXN, 3, "CRITICAL", None, INVALID_TXN, None, 0)],
        ),
    ],
    "scope": [
        Scenario(  # no producer id, magic 1: not replayed (else 5-6 is UNKNOWN, 7 a RESET)
            "p-no-producer-id-and-magic-1",
            [
                batch(0, 4),
                batch(5, 6, producer_id=PID, producer_epoch=0, base_sequence=9, magic=1),
                d(7),
                d(8, seq=1, magic=None),
                batch(9, base_sequence=5),
            ],
            [],
        ),
        Scenario(  # CORRUPT_BATCH only; not replayed (epoch 77 would fence offset 2)
            "p-corrupt-batch",
            [d(0), d(1, seq=1, epoch=77, crc_valid=False), d(2, seq=2)],
            [
                f("CORRUPT_BATCH", 1, "ERROR", None, "CORRUPT_MESSAGE"),
                f(GAP, 2, "CRITICAL", "UNEXPLAINED", OOS, 1, 0),
            ],
        ),
        Scenario(  # duplicate, gap, new epoch, unknown: no checks; fencing still applies
            "__consumer_offsets",
            [d(0), d(1), d(2, seq=9), d(3, epoch=1, seq=4), d(4, pid=PID + 1, seq=4), d(5, seq=5)],
            [f(FENCED, 5, "CRITICAL", error=IPE)],
        ),
        Scenario(  # sequence -1 in a regular topic: no checks, not cached, epoch still counts
            "p-coordinator-append",
            [d(0), d(1, 3, seq=-1), d(4, seq=1), d(5, epoch=1, seq=-1), d(6, epoch=1)],
            [],
        ),
        Scenario(  # an export repeating a batch: a bad export (two offset overlaps at 0), never
            # a claim that consumers read its records twice (a leader's duplicate has new offsets)
            "p-repeated-batch",
            [d(0, 5), d(0, 5), d(0, 5), d(5, seq=5)],
            [
                f("OFFSET_OVERLAP", 0, "CRITICAL", previous=4),
                f("OFFSET_OVERLAP", 0, "CRITICAL", previous=4),
            ],
        ),
        Scenario(  # the copies of a zombie write or a corrupt batch are reported once, not twice
            "p-repeated-bad-batches",
            [d(0, epoch=1), d(1, seq=3), d(1, seq=3), d(2, seq=1, epoch=1, crc_valid=False),
             d(2, seq=1, epoch=1, crc_valid=False), d(3, seq=2, epoch=1)],
            [
                f(FENCED, 1, "CRITICAL", error=IPE),
                f("OFFSET_OVERLAP", 1, "CRITICAL", previous=1),
                f("CORRUPT_BATCH", 2, "ERROR", None, "CORRUPT_MESSAGE"),
                f("OFFSET_OVERLAP", 2, "CRITICAL", previous=2),
            ],
        ),
        Scenario(  # a leader's duplicate (a retry appended again, at new offsets) stays one
            "p-repeated-batch-and-retry",
            [d(0, 5), d(0, 5), d(5, 5)],
            [f("OFFSET_OVERLAP", 0, "CRITICAL", previous=4), f(DUP, 5, "CRITICAL", previous=0)],
        ),
    ],
    "seeded": [
        Scenario("p-seed-continues", [d(100, epoch=2, seq=10, ts=TS + 5)], [], seeds=[SEED_E2]),
        Scenario(
            "p-seed-duplicate",
            [d(100, 5, epoch=2, ts=TS + 5)],
            [f(DUP, 100, "CRITICAL", previous=40)],
            seeds=[SEED_E2],
        ),
        Scenario(
            "p-seed-gap",
            [d(100, epoch=2, seq=12, ts=TS + 5)],
            [f(GAP, 100, "CRITICAL", "UNEXPLAINED", OOS, 10, 45)],
            seeds=[SEED_E2],
        ),
        Scenario(  # the open txn also keeps the 30-day-old seed from expiring
            "p-seed-open-txn",
            [d(100, ts=TS)],
            [f(INVALID_TXN, 100, "CRITICAL", None, INVALID_TXN, None, 37)],
            seeds=[seed(0, txn_first_offset=37, last_timestamp=TS - 30 * DAY)],
        ),
        Scenario(
            "p-seed-fenced",
            [d(100, epoch=1, ts=TS + 5)],
            [f(FENCED, 100, "CRITICAL", error=IPE)],
            seeds=[SEED_E2],
        ),
        Scenario(
            "p-seed-coordinator-fenced",
            [m(100, epoch=2, coord=3, ts=TS + 5)],
            [f(COORD_FENCED, 100, "ERROR", None, "TRANSACTION_COORDINATOR_FENCED")],
            seeds=[SEED_E2],
        ),
        Scenario(
            "p-seed-expired",
            [d(100, epoch=2, seq=10, ts=TS + 2 * DAY)],
            [f(UNKNOWN, 100, "INFO", "PRODUCER_EXPIRY", None, 0, None)],
            seeds=[SEED_E2],
        ),
    ],
}
ALL = [s for group in GROUPS.values() for s in group]

# Two copies of batch 0-0 (sequence 0) of one producer that differ only outside the log-order keys
# (epochs 0 and 1: a zombie's copy) and have no `source`, an optional column. The doc's order
# leaves them tied; each pair is in the input in both orders, on its own topic.
TIE_OLD, TIE_NEW = d(0, epoch=0, source=None), d(0, epoch=1, source=None)
TIE_ROWS = {
    f"p-tie-{order}-{i}": [TIE_OLD, TIE_NEW] if order == "on" else [TIE_NEW, TIE_OLD]
    for i in range(3)
    for order in ("on", "no")
}

# A clean partition with two log-start checkpoint rows (say one per replica log dir, as
# read_offset_checkpoints returns them, with different values).
TWO_CHECKPOINTS = "p-two-checkpoints"
TWO_CHECKPOINTS_ROWS = [d(0), d(1, seq=1)]
TWO_CHECKPOINTS_STARTS = [(TWO_CHECKPOINTS, 0, 0), (TWO_CHECKPOINTS, 0, 1)]


def placed(scenario: Scenario) -> tuple[list[dict], list[dict]]:
    """The scenario's rows and seeds moved to its own topic."""
    rows = [{**r, "topic": scenario.topic} for r in scenario.rows]
    return rows, [{**s, "topic": scenario.topic} for s in scenario.seeds]


def run_all(spark, *, reverse: bool = False, run_id: str = "main") -> dict[str, list]:
    """Audit every scenario (and the tied copies) in one job: findings rows by topic."""
    rows, seeds = [], []
    for s in ALL:
        r, sd = placed(s)
        rows += r
        seeds += sd
    rows += [{**r, "topic": topic} for topic, rs in TIE_ROWS.items() for r in rs]
    rows += [{**r, "topic": TWO_CHECKPOINTS} for r in TWO_CHECKPOINTS_ROWS]
    if reverse:
        rows.reverse()
        seeds.reverse()
    log_starts = [(s.topic, 0, s.log_start) for s in ALL if s.log_start is not None]
    log_starts += TWO_CHECKPOINTS_STARTS
    topics = [s.topic for s in ALL] + list(TIE_ROWS) + [TWO_CHECKPOINTS]
    by_topic: dict[str, list] = {topic: [] for topic in topics}
    for row in audit_findings(spark, rows, CONFIG, seeds, log_starts, run_id=run_id):
        by_topic[row.topic].append(row)
    return by_topic


@pytest.fixture(scope="module")
def replayed(spark) -> dict[str, list]:
    """Every scenario in one audit: findings rows by topic."""
    return run_all(spark)


@pytest.fixture(scope="module")
def replayed_reversed(spark) -> dict[str, list]:
    """The same input again, rows in reverse order, under another run id."""
    return run_all(spark, reverse=True, run_id="another-run")


def check(replayed, scenario: Scenario) -> None:
    assert as_tuples(replayed[scenario.topic]) == sorted(scenario.expected, key=_key)


def params(group: str):
    return [pytest.param(s, id=s.topic) for s in GROUPS[group]]


def test_scenario_topics_are_unique_and_only_c_topics_are_compacted():
    topics = [s.topic for s in ALL] + list(TIE_ROWS) + [TWO_CHECKPOINTS]
    assert len(topics) == len(set(topics))
    assert all(t.startswith(("p-", "c-", "__")) for t in topics)


# ------------------------------------------------------------------------------------------------
# One test per rule (each parametrized over its scenarios)
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("scenario", params("fenced"))
def test_fenced_producer_epoch(replayed, scenario):
    check(replayed, scenario)


@pytest.mark.parametrize("scenario", params("duplicate"))
def test_duplicate_batch(replayed, scenario):
    check(replayed, scenario)


@pytest.mark.parametrize("scenario", params("reset"))
def test_sequence_reset(replayed, scenario):
    check(replayed, scenario)


@pytest.mark.parametrize("scenario", params("overlap"))
def test_sequence_overlap(replayed, scenario):
    check(replayed, scenario)


@pytest.mark.parametrize("scenario", params("gap"))
def test_sequence_gap(replayed, scenario):
    check(replayed, scenario)


@pytest.mark.parametrize("scenario", params("wraparound"))
def test_sequence_wraparound(replayed, scenario):
    check(replayed, scenario)


@pytest.mark.parametrize("scenario", params("new_epoch"))
def test_new_epoch_nonzero_sequence(replayed, scenario):
    check(replayed, scenario)


@pytest.mark.parametrize("scenario", params("unknown"))
def test_unknown_producer(replayed, scenario):
    check(replayed, scenario)


@pytest.mark.parametrize("scenario", params("invalid_txn"))
def test_invalid_txn_state(replayed, scenario):
    check(replayed, scenario)


@pytest.mark.parametrize("scenario", params("coordinator_fenced"))
def test_coordinator_fenced(replayed, scenario):
    check(replayed, scenario)


@pytest.mark.parametrize("scenario", params("transactions"))
def test_transaction_markers(replayed, scenario):
    check(replayed, scenario)


@pytest.mark.parametrize("scenario", params("scope"))
def test_replay_scope(replayed, scenario):
    check(replayed, scenario)


@pytest.mark.parametrize("scenario", params("seeded"))
def test_seeded_state(replayed, scenario):
    check(replayed, scenario)


VERSION_ERRORS = {
    "0.11": OOS,
    "1.0": "UNKNOWN_PRODUCER_ID",
    "2.3": "UNKNOWN_PRODUCER_ID",
    "2.4.1": "UNKNOWN_PRODUCER_ID",
    "2.5": None,
    "3.7": None,
}


@pytest.mark.parametrize(("version", "error"), VERSION_ERRORS.items())
def test_unknown_producer_kafka_error_by_version(spark, version, error):
    config = AuditConfig().with_overrides(cluster={"kafka_version": version})
    found = audit_findings(spark, [d(0, seq=5), d(1, seq=6)], config)
    assert as_tuples(found) == [f(UNKNOWN, 0, "CRITICAL", "UNEXPLAINED", error, 0)]


# ------------------------------------------------------------------------------------------------
# Detail sentences and finding ids
# ------------------------------------------------------------------------------------------------
def test_producer_finding_details_name_the_producer(replayed):
    found = [r for s in ALL for r in replayed[s.topic] if r.finding_type in PRODUCER_TYPES]
    assert {r.finding_type for r in found} == PRODUCER_TYPES  # every type is looked at
    for r in found:
        assert r.producer_id == PID
        assert re.search(rf"\b[Pp]roducer {PID}\b", r.detail), (r.finding_type, r.detail)


def test_finding_ids_are_unique_even_when_an_export_repeats_a_batch(replayed):
    ids = [r.finding_id for rows in replayed.values() for r in rows]
    assert len(set(ids)) == len(ids)
    assert sum(len(replayed[s.topic]) for s in ALL) == sum(len(s.expected) for s in ALL)
    repeated = replayed["p-repeated-batch"]
    assert len(repeated) == 2
    assert all(r.finding_id and len(r.finding_id) == 32 for r in repeated)


def _ids(run: dict[str, list], topics) -> Counter:
    return Counter(
        (r.finding_id, r.finding_type, r.topic, r.base_offset, r.previous_offset)
        for topic in topics
        for r in run[topic]
    )


def test_finding_ids_are_deterministic(replayed, replayed_reversed):
    # Same input, another run id, rows in reverse order (and so in other input partitions).
    topics = [s.topic for s in ALL]
    assert _ids(replayed, topics) == _ids(replayed_reversed, topics)
    assert {r.run_id for rows in replayed_reversed.values() for r in rows} == {"another-run"}


def test_tied_copies_of_a_batch_are_replayed_the_same_whatever_the_input_order(
    replayed, replayed_reversed
):
    def outcome(run, topic):
        return sorted((r.finding_type, r.producer_epoch) for r in run[topic])

    outcomes = {
        (run_name, topic): outcome(run, topic)
        for run_name, run in (("main", replayed), ("reversed", replayed_reversed))
        for topic in TIE_ROWS
    }
    assert len({tuple(o) for o in outcomes.values()}) == 1, outcomes
    assert _ids(replayed, TIE_ROWS) == _ids(replayed_reversed, TIE_ROWS)


def test_two_log_start_checkpoints_for_a_partition_do_not_duplicate_its_batches(replayed):
    # Whichever checkpoint counts (0 or 1, the higher by the doc), the log 0-1 is clean.
    assert as_tuples(replayed[TWO_CHECKPOINTS]) == []
