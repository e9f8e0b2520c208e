"""The processing rules that join the coordinators' records with the partitions' transactions.

One export, Kafka's bytes (`segment_builder`), on one timeline (seconds after `BASE_TS`): a
processor (`proc`, transactional id `proc-tx`, transactions v2 epochs) copies `input` to `out`
and commits its input offsets in its transactions, and a downstream group (`down`) reads `out`
at read_uncommitted, committing plainly.

| time | what happens |
|---|---|
| 9-14 | transaction 1: `out` 0-1, offsets of `input` to 2; prepared to commit, markers COMMIT |
| 15 | `down` commits `out` at 2 (after transaction 1 ended: fine) |
| 19-27 | transaction 2: `out` 3, offsets to 4; prepared to ABORT; `out`'s marker ABORT, the |
| | `__consumer_offsets` marker COMMIT (torn: the input is committed, its output aborted) |
| 22 | `down` commits 4, past transaction 2 while it is open (it aborts at 26: aborted read) |
| 29-37 | transaction 3: `out` 5, and a partition the export lacks; prepared to commit and |
| | completed, but `out` never got its marker (torn), the other partition is unverifiable |
| 31 | `down` commits 6, past transaction 3, still open at the export's end (read past LSO) |
| 38 | `down` commits 50: `out` ends at 7 and has a batch written at 40 (beyond the log) |
| 41 | `down` commits 9 of `out`-1, a partition the export lacks (`out`-0 it holds) |
| 44-45 | a zombie: the producer at epoch 1, fenced by the log's epoch 3, commits a transaction |
| | in `zombie`, where nothing newer of it was written (so the leader accepted it) |
| 50 | a producer the transaction log never knew commits an offset of `proc` in a transaction |
| | that never ends: at the export's time (2000) it hangs |
| 59-60 | a KIP-939 two-phase-commit producer (transactional id `flink-sink-2pc`, timeout |
| | Integer.MAX_VALUE) writes `prepared` in a transaction left open for its transaction manager |

A second processor, `mirror` (`mirror-tx`), copies `mirror-in` to `mirror-out` at 69-74 in one
transaction prepared to commit: its `__consumer_offsets` marker is COMMIT, its output's ABORT
(torn: the input is committed, its output lost). The transaction commits the offsets of a
second group, `mirror-copy`, in another `__consumer_offsets` partition, at the same record
offset as `mirror`'s.

The export holds all 50 partitions of `__transaction_state`, as Kafka creates them, the ones no
transactional id used empty (the shared run's conftest): it can tell a producer id no
transactional id owns.
`input` is exported from offset 100: `proc`'s standing offset, 4, is below its log start.
`trimmed` holds offsets 0-2, but its `log-start-offset-checkpoint` says DeleteRecords moved its
start to 2: `down`'s offset 1 there (time 39) is below it too.
"""

from __future__ import annotations

import dataclasses
from functools import partial

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from eos_audit.audit.output_records import PARTITION_STATS_N
from eos_audit.audit.pipeline import checked_once
from eos_audit.config import AuditConfig
from eos_audit.findings import RAISED_BY_PROCESSING
from eos_audit.processing.committed_ranges import offset_out_of_range
from eos_audit.processing.coordinator_audit import (
    _HISTORY,
    offset_events,
    replay_offsets,
    staged_records,
)
from eos_audit.processing.downstream_reads import last_stable_offset
from eos_audit.processing.exported_logs import (
    unexported_input_partitions,
    unlogged_offset_transactions,
)
from eos_audit.processing.hanging_offsets import (
    distributed_two_phase_commit_partitions,
    find_hanging_transactions,
)
from eos_audit.processing.producer_fencing import prepare_fence_producer_epoch
from eos_audit.processing.transaction_markers import (
    matched_markers,
    prepared_partitions,
    write_txn_markers,
)
from eos_audit.report.groups import build_consumer_groups, query_consumer_groups
from eos_audit.report.limits import ReportLimits
from eos_audit.report.tables import TableLocation, run_tables
from eos_audit.sources.kafka.coordinator_keys import partition_for
from eos_audit.sources.kafka.export import read_kafka_export
from tests.fixtures.segment_builder import (
    BASE_TS,
    checkpoint_text,
    control_batch,
    data_batch,
    record_batch,
    write_partition_dir,
)
from tests.sources.test_coordinator_records import (
    i16,
    offset_commit_key,
    offset_commit_value,
    txn_key,
    txn_value,
)

pytestmark = pytest.mark.slow

PROCESSOR, DOWNSTREAM, TXN_ID = "proc", "down", "proc-tx"
INPUT, OUTPUT, ELSEWHERE, ZOMBIE, TRIMMED = "input", "out", "elsewhere", "zombie", "trimmed"
CO = "__consumer_offsets"
PROC_CO, DOWN_CO, TS = partition_for(PROCESSOR), partition_for(DOWNSTREAM), partition_for(TXN_ID)
PID, UNKNOWN_PID, TWO_PHASE_PID = 4000, 4001, 4002
# A KIP-939 producer: its coordinator marks its transactions by this timeout and never aborts them.
TWO_PHASE_ID, PREPARED, TWO_PHASE_TIMEOUT_MS = "flink-sink-2pc", "prepared", 2**31 - 1
EXPORT_TIME = "2023-11-14T22:46:40Z"  # 2000 s after BASE_TS
ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT = 1, 2, 3, 4, 5


# The replay history's columns the input-log checks read, as the tests' rows give them.
HISTORY_COLUMNS = (
    "group_id string, topic string, partition int, committed_offset long, kind string, "
    "outcome string, commit_timestamp_ms long, timestamp long, producer_id long, "
    "producer_epoch int, coordinator_partition int, record_offset long, source string"
)
HISTORY_COLUMNS_MARKED = HISTORY_COLUMNS + ", marker_offset long"


def at(seconds: float) -> int:
    return BASE_TS + int(seconds * 1000)


def commit(group: str, topic: str, offset: int, when: float) -> tuple[bytes, bytes]:
    return offset_commit_key(group, topic, 0), offset_commit_value(3, offset, "", at(when))


def plain(offset: int, when: float, *records) -> bytes:
    return record_batch(offset, list(records), timestamp=at(when))


def txn(offset: int, epoch: int, when: float, *records) -> bytes:
    return record_batch(
        offset, list(records), producer_id=PID, producer_epoch=epoch, base_sequence=0,
        is_transactional=True, timestamp=at(when),
    )  # fmt: skip


def marker(offset: int, epoch: int, when: float, commit: bool) -> bytes:
    return control_batch(
        offset, producer_id=PID, producer_epoch=epoch, commit=commit, timestamp=at(when)
    )


def output(offset: int, epoch: int, when: float, records: int = 1) -> bytes:
    return data_batch(
        offset, records, producer_id=PID, producer_epoch=epoch, base_sequence=0,
        is_transactional=True, timestamp=at(when),
    )  # fmt: skip


def state(offset: int, epoch: int, status: int, partitions: dict | None, when: float) -> bytes:
    value = txn_value(0, PID, epoch, status, partitions, at(when), at(9))
    return plain(offset, when, (txn_key(TXN_ID), value))


def other_id_at(offset: int, when: float) -> bytes:
    """A record of the transaction log of an id other than `proc-tx`, Empty, at `when`."""
    value = txn_value(0, PID + 100, 0, 0, None, at(when), -1)
    return plain(offset, when, (txn_key("other-tx"), value))


BOTH = {OUTPUT: [0], CO: [PROC_CO]}
OUTPUT_LOG = [
    output(0, 0, 10, records=2), marker(2, 1, 13, True),
    output(3, 1, 20), marker(4, 2, 26, False),
    output(5, 2, 30),
    data_batch(6, timestamp=at(40)),
]  # fmt: skip
PROCESSOR_OFFSETS = [
    txn(0, 0, 11, commit(PROCESSOR, INPUT, 2, 11)), marker(1, 1, 13, True),
    txn(2, 1, 21, commit(PROCESSOR, INPUT, 4, 21)), marker(3, 2, 26, True),
    record_batch(4, [commit(PROCESSOR, "other", 7, 50)], producer_id=UNKNOWN_PID,
                 producer_epoch=0, base_sequence=0, is_transactional=True, timestamp=at(50)),
]  # fmt: skip
DOWNSTREAM_OFFSETS = [
    plain(i, when, commit(DOWNSTREAM, OUTPUT, offset, when))
    for i, (offset, when) in enumerate([(2, 15), (4, 22), (6, 31), (50, 38)])
] + [
    plain(4, 39, commit(DOWNSTREAM, TRIMMED, 1, 39)),
    # `out`-1 is not in the export, `out`-0 is: this commit cannot be judged against its log.
    plain(5, 41, (offset_commit_key(DOWNSTREAM, OUTPUT, 1), offset_commit_value(3, 9, "", at(41)))),
]
TRANSACTION_LOG = [
    state(0, 0, ONGOING, BOTH, 9), state(1, 1, PREPARE_COMMIT, BOTH, 12),
    state(2, 1, COMPLETE_COMMIT, {}, 14),
    state(3, 1, ONGOING, BOTH, 19), state(4, 2, PREPARE_ABORT, BOTH, 25),
    state(5, 2, COMPLETE_ABORT, {}, 27),
    state(6, 2, ONGOING, {OUTPUT: [0], ELSEWHERE: [0]}, 29),
    state(7, 3, PREPARE_COMMIT, {OUTPUT: [0], ELSEWHERE: [0]}, 35),
    state(8, 3, COMPLETE_COMMIT, {}, 37),
]  # fmt: skip


MIRROR, MIRROR_TX, MIRROR_PID, MIRROR_IN, MIRROR_OUT = (
    "mirror", "mirror-tx", 4003, "mirror-in", "mirror-out"
)  # fmt: skip
MIRROR_CO, MIRROR_TS = partition_for(MIRROR), partition_for(MIRROR_TX)
MIRROR_COPY = "mirror-copy"
MIRROR_COPY_CO = partition_for(MIRROR_COPY)


def write_mirror(root) -> None:
    """`mirror`'s transaction: offsets marker COMMIT, output marker ABORT, prepared to commit."""
    assert len({MIRROR_CO, MIRROR_COPY_CO, PROC_CO, DOWN_CO}) == 4
    assert MIRROR_TS not in (TS, partition_for(TWO_PHASE_ID))
    both = {MIRROR_OUT: [0], CO: sorted([MIRROR_CO, MIRROR_COPY_CO])}

    def mirror_state(epoch: int, status: int, partitions: dict, when: float) -> tuple:
        value = txn_value(0, MIRROR_PID, epoch, status, partitions, at(when), at(69))
        return txn_key(MIRROR_TX), value

    def mirror_marker(commit: bool) -> bytes:
        return control_batch(
            1, producer_id=MIRROR_PID, producer_epoch=1, commit=commit, timestamp=at(73)
        )

    write_partition_dir(root, 1, MIRROR_IN, 0, data_batch(0, 3, timestamp=at(65)))
    write_partition_dir(root, 1, MIRROR_OUT, 0, data_batch(
        0, 1, producer_id=MIRROR_PID, producer_epoch=0, base_sequence=0, is_transactional=True,
        timestamp=at(70),
    ), mirror_marker(False))  # fmt: skip
    for group, co in ((MIRROR, MIRROR_CO), (MIRROR_COPY, MIRROR_COPY_CO)):
        write_partition_dir(root, 1, CO, co, record_batch(
            0, [commit(group, MIRROR_IN, 3, 71)], producer_id=MIRROR_PID, producer_epoch=0,
            base_sequence=0, is_transactional=True, timestamp=at(71),
        ), mirror_marker(True))  # fmt: skip
    write_partition_dir(root, 1, "__transaction_state", MIRROR_TS, *[
        plain(offset, when, mirror_state(epoch, status, partitions, when))
        for offset, (epoch, status, partitions, when) in enumerate([
            (0, ONGOING, both, 69), (1, PREPARE_COMMIT, both, 72), (1, COMPLETE_COMMIT, {}, 74)
        ])
    ])  # fmt: skip


def write_export(root) -> None:
    write_partition_dir(root, 1, OUTPUT, 0, *OUTPUT_LOG)
    write_partition_dir(root, 1, INPUT, 0, *[data_batch(100 + i) for i in range(3)])
    write_partition_dir(root, 1, CO, PROC_CO, *PROCESSOR_OFFSETS)
    write_partition_dir(root, 1, CO, DOWN_CO, *DOWNSTREAM_OFFSETS)
    write_partition_dir(root, 1, "__transaction_state", TS, *TRANSACTION_LOG)
    write_partition_dir(root, 1, ZOMBIE, 0, output(0, 1, 44), marker(1, 1, 45, True))
    write_partition_dir(root, 1, TRIMMED, 0, data_batch(0, 3, timestamp=at(1)))
    (root / "1" / "log-start-offset-checkpoint").write_text(checkpoint_text([(TRIMMED, 0, 2)]))
    assert partition_for(TWO_PHASE_ID) != TS
    open_2pc = txn_value(
        0, TWO_PHASE_PID, 0, ONGOING, {PREPARED: [0]}, at(59), at(59), timeout=TWO_PHASE_TIMEOUT_MS
    )
    write_partition_dir(
        root, 1, "__transaction_state", partition_for(TWO_PHASE_ID),
        plain(0, 59, (txn_key(TWO_PHASE_ID), open_2pc)),
    )  # fmt: skip
    write_mirror(root)
    write_partition_dir(root, 1, PREPARED, 0, data_batch(
        0, 2, producer_id=TWO_PHASE_PID, producer_epoch=0, base_sequence=0,
        is_transactional=True, timestamp=at(60),
    ))  # fmt: skip


@pytest.fixture(scope="module")
def audited(timelines):
    assert len({PROC_CO, DOWN_CO}) == 2
    return timelines


# This timeline's partitions: the run audits `test_one_to_one`'s too (conftest.timelines).
OWN_PARTITIONS = (
    f"topic IN ('{INPUT}', '{OUTPUT}', '{ELSEWHERE}', '{ZOMBIE}', '{TRIMMED}') "
    f"OR (topic = '{CO}' AND partition IN ({PROC_CO}, {DOWN_CO}))"
)


def findings(warehouse) -> list[dict]:
    types = ", ".join(f"'{t}'" for t in RAISED_BY_PROCESSING)
    registered = QueryBuilder().register("t", DeltaTable(str(warehouse / "findings")))
    query = (
        "SELECT finding_type, cause, severity, topic, partition, base_offset, producer_id, "
        f"detail, evidence FROM t WHERE finding_type IN ({types}) AND ({OWN_PARTITIONS}) "
        "ORDER BY finding_type, topic, partition, base_offset"
    )
    return pa.table(registered.execute(query).read_all()).to_pylist()


def test_each_rule_finds_its_fault_at_its_evidence(audited):
    assert [
        (f["finding_type"], f["cause"], f["severity"], f["topic"], f["partition"], f["base_offset"])
        for f in findings(audited)
    ] == [
        ("ABORTED_READ", None, "CRITICAL", CO, DOWN_CO, 1),
        ("COMMIT_BELOW_LOG_START", None, "WARNING", CO, DOWN_CO, 4),
        ("COMMIT_BELOW_LOG_START", None, "WARNING", CO, PROC_CO, 2),
        ("COMMIT_BEYOND_LOG", None, "CRITICAL", CO, DOWN_CO, 3),
        ("HANGING_OFFSET_TRANSACTION", "NO_TRANSACTIONAL_ID", "ERROR", CO, PROC_CO, 4),
        ("READ_PAST_LSO", None, "WARNING", CO, DOWN_CO, 2),
        ("READ_PAST_LSO", None, "WARNING", CO, DOWN_CO, 3),
        ("TORN_TRANSACTION", "COMMIT_WHERE_ABORT", "CRITICAL", CO, PROC_CO, 3),
        ("TORN_TRANSACTION", "MARKER_MISSING", "CRITICAL", OUTPUT, 0, -1),
        ("UNVERIFIABLE", "PARTITION_NOT_EXPORTED", "INFO", ELSEWHERE, 0, -1),
        *[("UNVERIFIABLE", "PARTITION_NOT_EXPORTED", "INFO", OUTPUT, 1, -1)] * 3,
        ("ZOMBIE_COMMIT", "EPOCH_FENCED", "CRITICAL", ZOMBIE, 0, 1),
    ]  # fmt: skip


def test_the_findings_say_what_happened(audited):
    by = {(f["finding_type"], f["cause"], f["base_offset"]): f for f in findings(audited)}
    torn = by[("TORN_TRANSACTION", "COMMIT_WHERE_ABORT", 3)]
    assert torn["detail"] == (
        f"Transactional id {TXN_ID} (producer {PID}, epoch 2) was prepared to ABORT "
        f"(__transaction_state-{TS} offset 4), but {CO}-{PROC_CO} has a COMMIT marker at offset "
        "3: offsets committed for outputs that aborted: that input is lost."
    )
    assert dict(torn["evidence"]) == {
        "transactional_id": TXN_ID, "decision": "ABORT", "marker_type": "COMMIT",
        "marker_offset": "3", "transaction_log_partition": str(TS),
        "transaction_log_offset": "4", "group_id": PROCESSOR, "committed_topic": INPUT,
        "committed_partition": "0", "committed_offset": "4", "offsets_partition": str(PROC_CO),
    }  # fmt: skip
    missing = by[("TORN_TRANSACTION", "MARKER_MISSING", -1)]
    assert (
        f"but {OUTPUT}-0 has no marker of it (CompleteCommit/Abort at {at(37)} ms)"
        in (missing["detail"])
    )
    aborted = by[("ABORTED_READ", None, 1)]
    assert aborted["detail"] == (
        f"Group {DOWNSTREAM} committed {OUTPUT}-0 at offset 4 (record 1, PLAIN), past offset 3 "
        f"where producer {PID}'s transaction was open and then aborted: its ABORT marker "
        "(offset 4) came 4000 ms later."
    )
    still_open = by[("READ_PAST_LSO", None, 2)]
    assert still_open["detail"].endswith("still open: it was still open when the export was taken.")
    beyond = by[("COMMIT_BEYOND_LOG", None, 3)]
    assert dict(beyond["evidence"])["log_end_offset"] == "7"
    below = by[("COMMIT_BELOW_LOG_START", None, 2)]
    assert "is 4 (record 2, TRANSACTIONAL), below the log start 100" in below["detail"]
    hanging = by[("HANGING_OFFSET_TRANSACTION", "NO_TRANSACTIONAL_ID", 4)]
    assert hanging["detail"] == (
        f"Producer {UNKNOWN_PID} has held 1 offset commit(s) of group {PROCESSOR} pending in "
        f"{CO}-{PROC_CO} since record 4, for 1950000 ms, beyond the maximum transaction "
        "timeout, and no transactional id in the transaction log has that producer id: no "
        "coordinator will write its marker."
    )
    zombie = by[("ZOMBIE_COMMIT", "EPOCH_FENCED", 1)]
    assert zombie["detail"] == (
        f"Producer {PID} (epoch 1) of transactional id {TXN_ID} committed a transaction in "
        f"{ZOMBIE}-0 (COMMIT marker at offset 1) after __transaction_state-{TS} (offset 8, "
        f"CompleteCommit) had given producer {PID} epoch 3."
    )
    unexported = sorted(
        f["detail"] for f in findings(audited) if (f["topic"], f["partition"]) == (OUTPUT, 1)
    )
    assert unexported == [
        f"{check} cannot be decided for {OUTPUT}-1 (1 commit(s) of 1 group(s), the first at "
        f"{CO}-{DOWN_CO} offset 5): the export holds other partitions of the topic and no "
        "audited batch of this one, whose log the check judges the commits against."
        for check in ("COMMIT_BELOW_LOG_START", "COMMIT_BEYOND_LOG", "READ_PAST_LSO")
    ]
    (unverifiable,) = [
        f for f in findings(audited)
        if (f["cause"], f["topic"]) == ("PARTITION_NOT_EXPORTED", ELSEWHERE)
    ]  # fmt: skip
    assert unverifiable["detail"] == (
        f"TORN_TRANSACTION cannot be decided for {ELSEWHERE}-0 (1 transaction(s) of {TXN_ID}, "
        f"the first at __transaction_state-{TS} offset 7): the partition is not in the export."
    )


def test_a_torn_output_partition_names_the_commit_its_transactions_marker_decided(spark, audited):
    """`mirror-out`'s ABORT tore a transaction whose offsets markers committed `mirror`'s and
    `mirror-copy`'s offsets of `mirror-in`: a finding names each commit, with an id of its own
    though both records are at offset 0 of their partitions, and the group's chart marks it."""
    registered = QueryBuilder().register("t", DeltaTable(str(audited / "findings")))
    rows = registered.execute(
        "SELECT run_id, finding_id, finding_type, cause, base_offset, previous_offset, evidence "
        f"FROM t WHERE topic = '{MIRROR_OUT}' "
        f"OR (topic = '{CO}' AND partition IN ({MIRROR_CO}, {MIRROR_COPY_CO}))"
    ).read_all()
    found = [tuple(r.values()) for r in pa.table(rows).to_pylist()]
    run_id = found[0][0]
    assert len({finding_id for _, finding_id, *_ in found}) == len(found) == 2
    said = {"group_id", "committed_topic", "committed_partition", "committed_offset",
            "offsets_partition"}  # fmt: skip
    by_group = {
        dict(evidence)["group_id"]: [*torn, {k: v for k, v in evidence if k in said}]
        for _, _, *torn, evidence in found
    }
    assert by_group == {
        group: ["TORN_TRANSACTION", "ABORT_WHERE_COMMIT", 1, 0, {
            "group_id": group, "committed_topic": MIRROR_IN, "committed_partition": "0",
            "committed_offset": "3", "offsets_partition": str(co),
        }]
        for group, co in ((MIRROR, MIRROR_CO), (MIRROR_COPY, MIRROR_COPY_CO))
    }  # fmt: skip
    tables = run_tables(spark, TableLocation(str(audited)), run_id)
    groups = build_consumer_groups(query_consumer_groups(tables, ReportLimits()))
    (mirror,) = [g for g in groups.groups if g.group_id == MIRROR]
    (mark,) = mirror.partitions[0].marks
    assert (mark.finding_type, mark.cause, mark.offset, mark.record_offset, mark.x) == (
        "TORN_TRANSACTION", "ABORT_WHERE_COMMIT", 3, 0, at(71)
    )  # fmt: skip


def offsets_markers(spark, markers: list[tuple[int, int, int, str]]):
    """`__consumer_offsets` markers as the decoded coordinator records give them: (partition,
    producer id, offset, COMMIT or ABORT) each; UNDECODED for a record that did not decode."""
    undecoded = "UNDECODED"
    return spark.createDataFrame(
        [(CO, "bad CRC" if kind == undecoded else None, partition, producer, offset,
          None if kind == undecoded else kind)
         for partition, producer, offset, kind in markers],
        "coordinator_topic string, _source_error string, coordinator_partition int, "
        "batch_producer_id long, offset long, control_type string",
    )  # fmt: skip


def exported_partition(spark, topic: str, partition: int, written_until: int, **stats: int):
    """The kernel's statistics of one partition whose latest batch is stamped `written_until`
    (and `stats`, more of its columns)."""
    row = {f.name: None for f in PARTITION_STATS_N.fields}
    row.update(topic=topic, partition=partition, max_timestamp=written_until, **stats)
    return spark.createDataFrame([row], PARTITION_STATS_N)


# The audit's transactions (TRANSACTIONS columns) the marker checks read.
TRANSACTION_COLUMNS = (
    "topic string, partition int, producer_id long, end_timestamp long, marker_offset long, "
    "outcome string, end_epoch int, first_offset long, first_timestamp long, records long, "
    "start_epoch int"
)


def transaction_log(spark, rows: list[tuple]):
    """Decoded `__transaction_state` records of `proc-tx`, as the coordinator records contract
    gives them: (offset, producer id, epoch, status, timestamp, partitions) each."""
    return spark.createDataFrame(
        [
            ("__transaction_state", None, TXN_ID, False, TS, offset, timestamp, pid, epoch,
             status, partitions, None)
            for offset, pid, epoch, status, timestamp, partitions in rows
        ],
        "coordinator_topic string, _source_error string, transactional_id string, "
        "is_tombstone boolean, coordinator_partition int, offset long, timestamp long, "
        "producer_id long, producer_epoch int, transaction_status string, "
        "transaction_partitions array<struct<topic: string, partition: int>>, "
        "client_transaction_version int",
    )  # fmt: skip


def test_the_tolerated_clock_skew_decides_how_late_a_marker_may_be(spark):
    """A commit 4 s before the marker of an aborted transaction it passed: an aborted read
    with the default 1 s of skew, nothing with 10 s."""
    history = spark.createDataFrame(
        [(DOWNSTREAM, OUTPUT, 0, 4, "PLAIN", "APPLIED", at(22), at(22), -1, -1, DOWN_CO, 1, "x")],
        HISTORY_COLUMNS,
    )
    transactions = spark.createDataFrame(
        [(OUTPUT, 0, PID, 3, 4, "ABORT", at(26))],
        "topic string, partition int, producer_id long, first_offset long, "
        "marker_offset long, outcome string, end_timestamp long",
    )

    partitions = exported_partition(spark, OUTPUT, 0, at(30))

    def found(skew_ms: int) -> list[str]:
        config = AuditConfig()
        config = dataclasses.replace(
            config, processing=dataclasses.replace(config.processing, clock_skew_ms=skew_ms)
        )
        no_markers = offsets_markers(spark, [])
        rows = last_stable_offset(
            history, no_markers, transactions, partitions, config, "run"
        ).collect()
        return [r["finding_type"] for r in rows]

    assert found(1000) == ["ABORTED_READ"]
    assert found(10_000) == []


def test_a_closed_transaction_whose_marker_has_no_time_is_not_taken_for_open(spark):
    """`out`'s transaction 3-4 aborted; its marker's time is not in the export (Parquet handed
    in without one). A commit past it at 1000 s is not an aborted read of a transaction "still
    open when the export was taken"; with the marker's time, it is judged: at 1500 s, after the
    commit, it is one."""
    history = spark.createDataFrame(
        [(DOWNSTREAM, OUTPUT, 0, 10, "PLAIN", "APPLIED", at(1000), at(1000), -1, -1, DOWN_CO, 1,
          "x")],
        HISTORY_COLUMNS,
    )  # fmt: skip
    partitions = exported_partition(spark, OUTPUT, 0, at(2000))

    def found(marker_time: int | None) -> list[str]:
        transactions = spark.createDataFrame(
            [(OUTPUT, 0, PID, 3, 4, "ABORT", marker_time)],
            "topic string, partition int, producer_id long, first_offset long, "
            "marker_offset long, outcome string, end_timestamp long",
        )
        no_markers = offsets_markers(spark, [])
        rows = last_stable_offset(
            history, no_markers, transactions, partitions, AuditConfig(), "run"
        )
        return [r["finding_type"] for r in rows.collect()]

    assert found(None) == []
    assert found(at(1500)) == ["ABORTED_READ"]


@pytest.mark.parametrize("staged", [False, True], ids=["whole", "staged"])
def test_a_transaction_open_at_the_exports_end_is_judged_only_at_commits_the_export_spans(
    spark, tmp_path, staged: bool
):
    """`out`'s export ends with a transaction open, its last batch at 40 s. A commit past it at
    31 s read past the LSO; of the group's commits at 45 and 50 s, made after the partition's
    export ended (`__consumer_offsets` exported later), the export cannot tell. Nor of any of
    them where the partition's batches carry no time (Parquet may give none). The same when the
    judged commits, which the findings and the undecided ones read, are staged as a run stages
    them (`staged`)."""
    history = spark.createDataFrame(
        [(DOWNSTREAM, OUTPUT, 0, 6, "PLAIN", "APPLIED", at(when), at(when), -1, -1, DOWN_CO,
          record, "x") for record, when in enumerate((31, 45, 50))],
        HISTORY_COLUMNS,
    )  # fmt: skip
    transactions = spark.createDataFrame(
        [(OUTPUT, 0, PID, 5, None, None, None)],
        "topic string, partition int, producer_id long, first_offset long, "
        "marker_offset long, outcome string, end_timestamp long",
    )

    def judged(written_until: int | None) -> list:
        partitions = exported_partition(spark, OUTPUT, 0, written_until)
        folder = tmp_path / f"judged-{written_until}"
        stage = partial(checked_once, spark, path=str(folder)) if staged else None
        rows = last_stable_offset(
            history, offsets_markers(spark, []), transactions, partitions, AuditConfig(), "run",
            stage=stage,
        ).collect()  # fmt: skip
        assert folder.exists() == staged
        return rows

    rows = judged(at(40))
    found = sorted((r["finding_type"], r["cause"], r["base_offset"]) for r in rows)
    assert found == [("READ_PAST_LSO", None, 0), ("UNVERIFIABLE", "EXPORT_DOES_NOT_SPAN", -1)]
    (undecided,) = [r for r in rows if r["finding_type"] == "UNVERIFIABLE"]
    assert undecided["detail"] == (
        f"READ_PAST_LSO cannot be decided for {OUTPUT}-0 (2 commit(s) of group {DOWNSTREAM}): "
        f"they passed a transaction still open at the end of the partition's export, and were "
        f"made from {at(45)} ms on, after its last exported batch (at {at(40)} ms): whether the "
        "transaction was still open then is not in the export."
    )
    (untimed,) = judged(None)
    assert (untimed["finding_type"], untimed["cause"]) == ("UNVERIFIABLE", "EXPORT_DOES_NOT_SPAN")
    assert untimed["detail"] == (
        f"READ_PAST_LSO cannot be decided for {OUTPUT}-0 (3 commit(s) of group {DOWNSTREAM}): "
        f"they passed a transaction still open at the end of the partition's export, made from "
        f"{at(31)} ms on, and its exported batches carry no time: whether the transaction was "
        "still open then is not in the export."
    )


# Each partition: (first exported offset, checkpoint, the aborted transaction's first offset,
# the offsets its groups committed, one group each). The transaction ended at 60 s, the commits
# were made at 30 s.
LOG_STARTS = {
    # Retention passed the transaction's start (a seeded state shows it): the log starts at 20.
    "retained": (20, None, 5, (12, 20, 22)),
    # DeleteRecords moved the start to 10, inside the first segment, which holds the
    # transaction's data from 3.
    "deleted": (0, 10, 3, (8, 11)),
    # Tiered: the log starts at 5 in remote storage, the local segments at 20.
    "tiered": (20, 5, 8, (12,)),
}


def log_start_verdicts(
    spark, incremental: bool, config: AuditConfig
) -> tuple[list[tuple], list[str]]:
    """`last_stable_offset`'s (finding, cause, group) over LOG_STARTS (a group is named after
    its topic and offset), and the details of the findings of `retained`'s group at 12."""
    history = spark.createDataFrame(
        [(f"{topic}-{offset}", topic, 0, offset, "PLAIN", "APPLIED", at(30), at(30), -1, -1,
          DOWN_CO, record, "x", None)
         for record, (topic, offset) in enumerate(
             (topic, offset) for topic, (*_, offsets) in LOG_STARTS.items() for offset in offsets
         )],
        HISTORY_COLUMNS_MARKED,
    )  # fmt: skip
    transactions = spark.createDataFrame(
        [(topic, 0, PID, first, 40, "ABORT", at(60))
         for topic, (_, _, first, _) in LOG_STARTS.items()],
        "topic string, partition int, producer_id long, first_offset long, "
        "marker_offset long, outcome string, end_timestamp long",
    )  # fmt: skip
    rows = []
    for topic, (first, checkpoint, *_) in LOG_STARTS.items():
        row = {f.name: None for f in PARTITION_STATS_N.fields}
        row.update(topic=topic, partition=0, first_offset=first, last_offset=49,
                   max_timestamp=at(90), log_start_checkpoint=checkpoint)  # fmt: skip
        rows.append(row)
    partitions = spark.createDataFrame(rows, PARTITION_STATS_N)
    found = last_stable_offset(
        history, offsets_markers(spark, []), transactions, partitions, config, "run", incremental
    ).collect()
    verdicts = sorted((r["finding_type"], r["cause"], r["evidence"]["group_id"]) for r in found)
    details = [r["detail"] for r in found if r["evidence"]["group_id"] == "retained-12"]
    return verdicts, details


def test_a_commit_up_to_the_log_start_past_a_transaction_it_cut_is_unverifiable(spark):
    """The broker serves read_committed consumers up to the log start whatever is open below it
    (`UnifiedLog.maybeIncrementFirstUnstableOffset`): a commit at or below the log start at the
    export read past the transaction only if the log started below it at the time, which the
    export does not show; one above it did at any start. The checkpoint is the start, above or
    below the first exported offset."""
    verdicts, details = log_start_verdicts(spark, incremental=False, config=AuditConfig())
    assert verdicts == [
        ("ABORTED_READ", None, "deleted-11"),
        ("ABORTED_READ", None, "retained-22"),
        ("ABORTED_READ", None, "tiered-12"),
        ("UNVERIFIABLE", "LOG_START_UNKNOWN", "deleted-8"),
        ("UNVERIFIABLE", "LOG_START_UNKNOWN", "retained-12"),
        ("UNVERIFIABLE", "LOG_START_UNKNOWN", "retained-20"),
    ]
    assert details == [
        "READ_PAST_LSO cannot be decided for retained-0 (1 commit(s) of group retained-12): "
        "they passed a transaction that began below the partition's log start at the export "
        f"(20), made from {at(30)} ms on at offsets up to it: the broker serves up to the log "
        "start whatever is open below it, and where the log started when they were made is not "
        "in the export."
    ]


@pytest.mark.parametrize("cut_by", ["an incremental run", "compaction"])
def test_where_the_export_was_cut_its_first_offset_is_not_the_log_start_of_a_read(spark, cut_by):
    """An incremental run's export starts anywhere (--since-state), and the cleaner removes a
    compacted log's first batches without moving its start: without a checkpoint the log start
    is unknown, and the commits are judged."""
    incremental = cut_by == "an incremental run"
    config = AuditConfig().with_overrides(topics={"compacted": [] if incremental else ["retained"]})
    verdicts, _ = log_start_verdicts(spark, incremental, config)
    assert verdicts == [
        ("ABORTED_READ", None, "deleted-11"),
        ("ABORTED_READ", None, "retained-12"),
        ("ABORTED_READ", None, "retained-20"),
        ("ABORTED_READ", None, "retained-22"),
        ("ABORTED_READ", None, "tiered-12"),
        ("UNVERIFIABLE", "LOG_START_UNKNOWN", "deleted-8"),
    ]


def test_a_log_start_checkpoint_below_the_first_exported_offset_is_the_log_start(spark):
    """A tiered topic's log starts in remote storage, below its first local segment: the broker
    checkpoints that start (`LogLoader`), here 5, and the export of the local log starts at 10.
    A group standing at 7 reads from remote storage; one at 3 is below the log start."""
    history = spark.createDataFrame(
        [(group, OUTPUT, 0, offset, "PLAIN", "APPLIED", at(30), at(30), -1, -1, DOWN_CO,
          record, "x", None)
         for record, (group, offset) in enumerate((("remote-reader", 7), ("behind", 3)))],
        HISTORY_COLUMNS_MARKED,
    )  # fmt: skip
    row = {f.name: None for f in PARTITION_STATS_N.fields}
    row.update(topic=OUTPUT, partition=0, first_offset=10, last_offset=19,
               max_timestamp=at(40), log_start_checkpoint=5)  # fmt: skip
    partitions = spark.createDataFrame([row], PARTITION_STATS_N)
    rows = offset_out_of_range(history, partitions, AuditConfig(), "run").collect()
    found = [
        (r["finding_type"], r["evidence"]["group_id"], r["evidence"]["log_start_offset"])
        for r in rows
    ]
    assert found == [("COMMIT_BELOW_LOG_START", "behind", "5")]


def test_a_commit_beyond_the_log_counts_if_it_became_the_groups_offset_a_read_if_not_aborted(
    spark,
):
    """Transactional commits of offset 50 at 30 s, one per outcome, where `out`-0's log ends at
    20 and holds a transaction from offset 3 that aborted at 40 s. Beyond the log: the applied
    one and the one still pending; those that never became the group's offset (aborted;
    replaced by the same producer before its marker; cleared by a tombstone while pending;
    skipped for a later record's value) made no consumer resume there. Past the aborted
    transaction: every one but the aborted commit, whose transaction's outputs went with it;
    the others still show how far the consumer had read. A replaced commit whose replacement
    was then aborted went with that transaction; one whose replacement applied did not. A
    cleared commit (or one replaced by a cleared one) ends with its producer's next marker in
    its `__consumer_offsets` partition: the ABORT at 19 after those at 16-18 is not judged, the
    COMMITs after `cleared` (6) and `cleared-then-committed` (20) are. So are one of another
    producer at 22 (the first producer's ABORT at 23 comes before its own COMMIT at 24), one
    of the first producer at record 11 of another `__consumer_offsets` partition, which holds
    no marker (its ABORT at 12 is in the first), and one whose ABORT at 28 follows a record
    that did not decode (27), which may be its own marker."""
    # (group, outcome, producer, __consumer_offsets partition, record offset), and the markers
    # of each producer in the partition: (partition, producer, offset, type), UNDECODED for a
    # record that did not decode.
    placed = [
        ("applied", "APPLIED", PID, DOWN_CO, 0), ("aborted", "ABORTED", PID, DOWN_CO, 2),
        ("replaced", "REPLACED", PID, DOWN_CO, 4), ("cleared", "CLEARED", PID, DOWN_CO, 6),
        ("skipped", "SKIPPED", PID, DOWN_CO, 8),
        ("then-aborted", "REPLACED", PID, DOWN_CO, 10),
        ("then-aborted", "ABORTED", PID, DOWN_CO, 11),
        ("then-applied", "REPLACED", PID, DOWN_CO, 13),
        ("then-applied", "APPLIED", PID, DOWN_CO, 14),
        ("cleared-then-aborted", "CLEARED", PID, DOWN_CO, 16),
        ("replaced-then-cleared", "REPLACED", PID, DOWN_CO, 17),
        ("replaced-then-cleared", "CLEARED", PID, DOWN_CO, 18),
        ("cleared-then-committed", "CLEARED", PID, DOWN_CO, 20),
        ("other-producer", "CLEARED", PID + 7, DOWN_CO, 22),
        ("pending", "PENDING", PID, DOWN_CO, 25),
        ("cleared-undecoded", "CLEARED", PID + 9, DOWN_CO, 26),
        ("other-partition", "CLEARED", PID, PROC_CO, 11),
    ]
    ends = [
        (DOWN_CO, PID, 1, "COMMIT"), (DOWN_CO, PID, 3, "ABORT"), (DOWN_CO, PID, 7, "COMMIT"),
        (DOWN_CO, PID, 9, "COMMIT"), (DOWN_CO, PID, 12, "ABORT"), (DOWN_CO, PID, 15, "COMMIT"),
        (DOWN_CO, PID, 19, "ABORT"), (DOWN_CO, PID, 21, "COMMIT"), (DOWN_CO, PID, 23, "ABORT"),
        (DOWN_CO, PID + 7, 24, "COMMIT"), (DOWN_CO, PID + 9, 27, "UNDECODED"),
        (DOWN_CO, PID + 9, 28, "ABORT"),
    ]
    history = spark.createDataFrame(
        [(group, OUTPUT, 0, 50, "TRANSACTIONAL", outcome, at(30), at(30), producer, 0, co, record,
          "x", None)
         for group, outcome, producer, co, record in placed],
        HISTORY_COLUMNS_MARKED,
    )
    row = {f.name: None for f in PARTITION_STATS_N.fields}
    row.update(topic=OUTPUT, partition=0, first_offset=0, last_offset=19, max_timestamp=at(45))
    partitions = spark.createDataFrame([row], PARTITION_STATS_N)
    rows = offset_out_of_range(history, partitions, AuditConfig(), "run").collect()
    assert sorted((r["finding_type"], r["evidence"]["group_id"]) for r in rows) == [
        ("COMMIT_BEYOND_LOG", "applied"), ("COMMIT_BEYOND_LOG", "pending"),
        ("COMMIT_BEYOND_LOG", "then-applied"),
    ]
    transactions = spark.createDataFrame(
        [(OUTPUT, 0, PID + 1, 3, 4, "ABORT", at(40))],
        "topic string, partition int, producer_id long, first_offset long, "
        "marker_offset long, outcome string, end_timestamp long",
    )
    rows = last_stable_offset(
        history, offsets_markers(spark, ends), transactions, partitions, AuditConfig(), "run"
    ).collect()
    assert sorted((r["finding_type"], r["evidence"]["group_id"]) for r in rows) == [
        ("ABORTED_READ", group) for group in ("applied", "cleared", "cleared-then-committed",
                                               "cleared-undecoded", "other-partition",
                                               "other-producer", "pending", "replaced",
                                               "skipped", "then-applied", "then-applied")
    ]  # fmt: skip


# A record that did not decode, as (partition, producer id, offset), None where not known, and
# whether it leaves the outcome of a cleared commit at 10, whose producer's ABORT is at 12, unknown.
UNDECODED_RECORDS = [
    ((DOWN_CO, PID, 11), True),  # between, of the producer: its own marker, perhaps
    ((DOWN_CO, None, 11), True),  # between, of no known producer
    ((DOWN_CO, PID, None), True),  # of the producer, where is not known
    ((None, None, None), True),  # of no known partition
    ((DOWN_CO, PID + 1, 11), False),  # another producer's
    ((DOWN_CO, PID, 13), False),  # after the ABORT
    ((PROC_CO, PID, 11), False),  # in another partition
]


@pytest.mark.parametrize(("undecoded", "unknown"), UNDECODED_RECORDS)
def test_a_record_that_did_not_decode_may_be_a_cleared_commits_own_marker(
    spark, undecoded: tuple, unknown: bool
):
    """A cleared commit whose producer's next marker is an ABORT is not judged, unless a record
    that did not decode may have been its own marker (a COMMIT): then it is, as one whose
    outcome is not known."""
    history = spark.createDataFrame(
        [("cleared", OUTPUT, 0, 50, "TRANSACTIONAL", "CLEARED", at(30), at(30), PID, 0, DOWN_CO,
          10, "x", None)],
        HISTORY_COLUMNS_MARKED,
    )  # fmt: skip
    partitions = exported_partition(spark, OUTPUT, 0, at(45), first_offset=0, last_offset=19)
    transactions = spark.createDataFrame(
        [(OUTPUT, 0, PID + 1, 3, 4, "ABORT", at(40))],
        "topic string, partition int, producer_id long, first_offset long, "
        "marker_offset long, outcome string, end_timestamp long",
    )
    records = offsets_markers(spark, [(DOWN_CO, PID, 12, "ABORT"), (*undecoded, "UNDECODED")])
    rows = last_stable_offset(history, records, transactions, partitions, AuditConfig(), "run")
    assert [r["finding_type"] for r in rows.collect()] == (["ABORTED_READ"] if unknown else [])


def test_each_check_counts_its_own_commits_of_a_partition_not_exported(spark):
    """`out`-0 is exported, `out`-1 to 5 are not, each with its group's commits. `out`-1: an
    applied and a replaced commit; READ_PAST_LSO would judge both, COMMIT_BEYOND_LOG and
    COMMIT_BELOW_LOG_START the applied one, the group's offset. `out`-2: one skipped for a later
    record's value, READ_PAST_LSO's only. `out`-3: one pending, not (yet) the offset standing.
    `out`-4: one applied, then deleted by a tombstone: no offset stands. `out`-5: one replaced by
    one aborted: no check would judge either. `out`-6 has statistics but no batch audited (its
    batches on a replica not read): no log to judge against, as if not exported; so has the
    only partition of `elsewhere`, whose topic is still the export's."""
    commits = [
        ("applied", 1, "APPLIED", 50), ("replaced", 1, "REPLACED", 50),
        ("skipped", 2, "SKIPPED", 50), ("pending", 3, "PENDING", 50),
        ("deleted", 4, "APPLIED", 50), ("deleted", 4, "DELETED", None),
        ("aborted", 5, "REPLACED", 50), ("aborted", 5, "ABORTED", 50),
        ("replica", 6, "APPLIED", 50),
    ]  # fmt: skip
    history = spark.createDataFrame(
        [(group, OUTPUT, partition, offset, "TRANSACTIONAL", outcome, at(30), at(30), PID, 0,
          DOWN_CO, record, "x", None)
         for record, (group, partition, outcome, offset) in enumerate(commits)]
        + [("elsewhere", ELSEWHERE, 0, 50, "PLAIN", "APPLIED", at(30), at(30), -1, -1, DOWN_CO,
            len(commits), "x", None)],
        HISTORY_COLUMNS_MARKED,
    )  # fmt: skip
    partitions = (
        exported_partition(spark, OUTPUT, 0, at(45), first_offset=0, last_offset=9)
        .unionByName(exported_partition(spark, OUTPUT, 6, at(45)))
        .unionByName(exported_partition(spark, ELSEWHERE, 0, at(45)))
    )
    rows = unexported_input_partitions(
        history, offsets_markers(spark, []), partitions, AuditConfig(), "run"
    ).collect()
    found = sorted(
        (r["partition"], r["evidence"]["check"], r["evidence"]["group_id"], r["detail"])
        for r in rows
        if r["topic"] == OUTPUT
    )
    assert sorted((r["topic"], r["evidence"]["check"]) for r in rows if r["topic"] != OUTPUT) == [
        (ELSEWHERE, check) for check in ("COMMIT_BELOW_LOG_START", "COMMIT_BEYOND_LOG",
                                         "READ_PAST_LSO")
    ]  # fmt: skip
    assert [f[:3] for f in found] == [
        (1, "COMMIT_BELOW_LOG_START", "applied"),
        (1, "COMMIT_BEYOND_LOG", "applied"),
        (1, "READ_PAST_LSO", "applied"),
        (2, "READ_PAST_LSO", "skipped"),
        (3, "COMMIT_BEYOND_LOG", "pending"),
        (3, "READ_PAST_LSO", "pending"),
        (4, "COMMIT_BEYOND_LOG", "deleted"),
        (4, "READ_PAST_LSO", "deleted"),
        (6, "COMMIT_BELOW_LOG_START", "replica"),
        (6, "COMMIT_BEYOND_LOG", "replica"),
        (6, "READ_PAST_LSO", "replica"),
    ]
    at_record = f"the first at {CO}-{DOWN_CO} offset"
    assert [f"1 commit(s) of 1 group(s), {at_record} 0" in f[3] for f in found[:2]] == [True] * 2
    assert f"2 commit(s) of 2 group(s), {at_record} 0" in found[2][3]
    assert f"1 commit(s) of 1 group(s), {at_record} 2" in found[3][3]


def test_only_a_two_phase_commit_transaction_open_past_the_timeout_is_not_hanging(audited):
    """The replay calls every transaction open past the timeout and its grace hanging; the one the
    transaction log marks as KIP-939's (a timeout of Integer.MAX_VALUE, still Ongoing and listing
    the partition) keeps its finding at INFO, the others stay errors."""
    registered = QueryBuilder().register("t", DeltaTable(str(audited / "findings")))
    query = (
        "SELECT topic, partition, producer_id, severity, cause FROM t "
        "WHERE finding_type = 'HANGING_TRANSACTION' ORDER BY producer_id"
    )
    rows = pa.table(registered.execute(query).read_all()).to_pylist()
    assert [tuple(r.values()) for r in rows] == [
        (OUTPUT, 0, PID, "ERROR", None),  # transaction 3's marker never came to `out`
        (CO, PROC_CO, UNKNOWN_PID, "ERROR", None),
        (PREPARED, 0, TWO_PHASE_PID, "INFO", "TWO_PHASE_COMMIT"),
    ]
    # The run's counts are of the findings as written, the lowered one among the INFO.
    counted = QueryBuilder().register("f", DeltaTable(str(audited / "findings")))
    query = "SELECT severity, count(*) AS n FROM f GROUP BY severity"
    by_severity = {r["severity"]: r["n"] for r in pa.table(counted.execute(query).read_all())
                   .to_pylist()}  # fmt: skip
    (run,) = pa.table(
        QueryBuilder().register("r", DeltaTable(str(audited / "audit_runs")))
        .execute("SELECT findings_error, findings_info FROM r").read_all()
    ).to_pylist()  # fmt: skip
    written = (by_severity.get("ERROR", 0), by_severity.get("INFO", 0))
    assert (run["findings_error"], run["findings_info"]) == written


def test_a_producer_id_no_transactional_id_owns_is_told_from_the_whole_transaction_log(
    spark, tmp_path
):
    """`proc`'s offsets and the transaction log's partition of `proc-tx` alone: the producer the
    log never knew hangs only where the export holds every partition of `__transaction_state`
    (listed, empty or not, or holding records); else its transactional id may be in one the
    export lacks, and the check is undecided."""
    root = tmp_path / "export"
    write_partition_dir(root, 1, CO, PROC_CO, *PROCESSOR_OFFSETS)
    write_partition_dir(root, 1, "__transaction_state", TS, *TRANSACTION_LOG)
    export = read_kafka_export(spark, [str(root)])
    records = staged_records(export.coordinator_records)
    history = replay_offsets(offset_events(records))
    every_partition = {("__transaction_state", p) for p in range(50)}

    def hanging(partitions: int, listed) -> list[tuple]:
        config = AuditConfig().with_overrides(
            processing={"transaction_state_partitions": partitions}
        )
        rows = find_hanging_transactions(
            history, records, config, "run", at(2000), listed
        ).collect()  # fmt: skip
        return [(r["finding_type"], r["cause"], r["producer_id"], r["detail"]) for r in rows]

    assert export.partitions_listed == {(CO, PROC_CO), ("__transaction_state", TS)}
    ((finding, cause, producer, detail),) = hanging(50, export.partitions_listed)
    assert (finding, cause, producer) == ("UNVERIFIABLE", "TRANSACTION_LOG_NOT_WHOLE", None)
    assert detail == (
        f"HANGING_OFFSET_TRANSACTION cannot be decided for {CO}-{PROC_CO} (producer "
        f"{UNKNOWN_PID}, 1 offset commit(s) of group {PROCESSOR} pending since record 4 for "
        "1950000 ms): no exported record of __transaction_state has that producer id, and the "
        "export holds 1 of its 50 partitions (processing.transaction_state_partitions): its "
        "transactional id may be in one the export lacks."
    )
    assert [h[:3] for h in hanging(50, every_partition)] == [
        ("HANGING_OFFSET_TRANSACTION", "NO_TRANSACTIONAL_ID", UNKNOWN_PID)
    ]
    # A partition holding records counts without a listing (dump text, Parquet).
    others = every_partition - {("__transaction_state", TS)}
    assert [h[1] for h in hanging(50, others)] == ["NO_TRANSACTIONAL_ID"]
    assert [h[1] for h in hanging(51, every_partition)] == ["TRANSACTION_LOG_NOT_WHOLE"]
    # A partition beyond the configured count: the cluster has more than the configuration says,
    # so the partitions up to it are the log, and the export lacks some.
    beyond = every_partition | {("__transaction_state", 60)}
    ((finding, cause, _, detail),) = hanging(50, beyond)
    assert (finding, cause) == ("UNVERIFIABLE", "TRANSACTION_LOG_NOT_WHOLE")
    assert detail.endswith(
        "the export holds 51 of its at least 61 partitions (it holds __transaction_state-60, "
        "beyond processing.transaction_state_partitions): its transactional id may be in one "
        "the export lacks."
    )
    # Every partition up to the highest one exported: the whole log, whatever the configuration.
    assert [h[1] for h in hanging(TS + 1, others)] == ["NO_TRANSACTIONAL_ID"]


def other_id_record(offset: int, when: float) -> bytes:
    """A record of another transactional id (Empty, a producer of its own) at `when`."""
    return plain(
        offset, when, (txn_key("other-tx"), txn_value(0, PID + 100, 0, 0, None, at(when), -1))
    )


def test_no_transactional_id_needs_the_log_copied_after_the_commit_and_decoded_whole(
    spark, tmp_path
):
    """`proc`'s commit at 50 s by a producer no record of the transaction log has, every
    partition of the log listed, another group's commit at 2000 s after it. The producer's
    transactional id was written (InitProducerId) before its first commit: without
    --export-time, with the log's latest record at 37 s, or within the skew after the commit,
    the log may have been copied before that (EXPORT_DOES_NOT_SPAN); a record at 60 s says it
    was not, and so does --export-time (NO_TRANSACTIONAL_ID). A record of the log that did not
    decode leaves the rest of its partition unknown, the producer's id perhaps in it
    (TRANSACTION_LOG_NOT_WHOLE)."""
    every_partition = {("__transaction_state", p) for p in range(50)}
    cut_short = plain(len(TRANSACTION_LOG), 40, (txn_key("cut-tx"), i16(1) + b"\x00"))
    later_commit = plain(len(PROCESSOR_OFFSETS), 2000, commit("later", INPUT, 1, 2000))

    def hanging(*more: bytes, as_of_ms: int | None = None, log=TRANSACTION_LOG) -> list[tuple]:
        root = tmp_path / f"export-{len(list(tmp_path.iterdir()))}"
        write_partition_dir(root, 1, CO, PROC_CO, *PROCESSOR_OFFSETS, later_commit)
        write_partition_dir(root, 1, "__transaction_state", TS, *log, *more)
        records = staged_records(read_kafka_export(spark, [str(root)]).coordinator_records)
        history = replay_offsets(offset_events(records))
        rows = find_hanging_transactions(
            history, records, AuditConfig(), "run", as_of_ms, every_partition
        ).collect()
        return [(r["finding_type"], r["cause"], r["producer_id"], r["detail"]) for r in rows]

    ((finding, cause, _, detail),) = hanging()
    assert (finding, cause) == ("UNVERIFIABLE", "EXPORT_DOES_NOT_SPAN")
    assert detail.endswith(
        "no exported record of __transaction_state has that producer id, and the log's latest "
        f"exported record (__transaction_state-{TS} offset 8) is no later than the first pending "
        "commit by the tolerated clock skew: its export may end before the producer's "
        "transactional id was written (InitProducerId, before its first commit)."
    )
    undecided = [("UNVERIFIABLE", "EXPORT_DOES_NOT_SPAN")]
    assert [h[:2] for h in hanging(other_id_record(len(TRANSACTION_LOG), 50.5))] == undecided
    ((finding, cause, _, detail),) = hanging(log=())
    assert (finding, cause) == ("UNVERIFIABLE", "EXPORT_DOES_NOT_SPAN")
    assert "producer id, and the export holds no record of the log: its export may" in detail
    hangs = [("HANGING_OFFSET_TRANSACTION", "NO_TRANSACTIONAL_ID", UNKNOWN_PID)]
    assert [h[:3] for h in hanging(other_id_record(len(TRANSACTION_LOG), 60))] == hangs
    assert [h[:3] for h in hanging(as_of_ms=at(2000))] == hangs
    ((finding, cause, _, detail),) = hanging(
        cut_short, other_id_record(len(TRANSACTION_LOG) + 1, 60)
    )
    assert (finding, cause) == ("UNVERIFIABLE", "TRANSACTION_LOG_NOT_WHOLE")
    assert detail.endswith(
        "the export holds 49 of its 50 partitions (processing.transaction_state_partitions), "
        f"not counting __transaction_state-{TS}, whose records did not all decode: its "
        "transactional id may be in one the export lacks."
    )


def test_offset_transactions_the_exported_transaction_log_misses_are_unverifiable(
    spark, tmp_path
):
    """`proc`'s two decided transactions (offsets committed at records 0 and 2 at 11 and 21 s,
    markers at 1 and 3): torn and zombie commits are found from the transaction log, so without
    `proc-tx`'s records neither check judged them. Where the export lacks partitions of the log,
    that is said, once per check. The whole log without them says nothing where it was copied
    after the producer's first commit (an expired id, cleaned): at --export-time, or where it
    holds a record of another id later than that commit by the skew (at 15 or 100 s, not
    11.5 s); else its copy may predate the id's records, and that is said."""

    def unlogged(name: str, listed, *log, as_of_ms: int | None = None) -> list[tuple]:
        root = tmp_path / name
        write_partition_dir(root, 1, CO, PROC_CO, *PROCESSOR_OFFSETS[:4])
        if log:
            write_partition_dir(root, 1, "__transaction_state", TS, *log)
        export = read_kafka_export(spark, [str(root)])
        records = staged_records(export.coordinator_records)
        history = replay_offsets(offset_events(records))
        rows = unlogged_offset_transactions(
            history, records, AuditConfig(), "run", listed or export.partitions_listed, as_of_ms
        )
        found = [(r["finding_type"], r["cause"], r["topic"], r["partition"], r["base_offset"],
                  r["evidence"]["check"], r["evidence"]["group_id"], r["detail"])
                 for r in rows.collect()]  # fmt: skip
        return sorted(found, key=lambda f: f[5])

    def said(cause: str, why: str) -> list[tuple]:
        reason = (
            f"cannot be decided for {CO}-{PROC_CO} (2 transactional offset commit(s) of 1 "
            "producer(s) and 1 group(s), the first at record 0): no exported record of "
            f"__transaction_state has their producer ids, and {why}."
        )
        return [
            ("UNVERIFIABLE", cause, CO, PROC_CO, -1, check, PROCESSOR, f"{check} {reason}")
            for check in ("TORN_TRANSACTION", "ZOMBIE_COMMIT")
        ]

    assert unlogged("some", None) == said(
        "TRANSACTION_LOG_NOT_WHOLE",
        "the export holds 0 of its 50 partitions (processing.transaction_state_partitions): "
        "their transactional ids, with the partitions and epochs the check reads, may be in one "
        "the export lacks",
    )
    whole = {("__transaction_state", p) for p in range(50)}
    copied_before = (
        ": its export may end before their transactional ids were written (InitProducerId, "
        "before a producer's first commit)"
    )
    assert unlogged("whole-empty", whole) == said(
        "EXPORT_DOES_NOT_SPAN", "the export holds no record of the log" + copied_before
    )
    assert unlogged("whole-empty-then", whole, as_of_ms=at(2000)) == []
    assert unlogged("whole-later", whole, other_id_at(0, 100)) == []
    # Copied after the producer's first commit (11 s), before its second (21 s): the id's records
    # came before the first.
    assert unlogged("whole-between", whole, other_id_at(0, 15)) == []
    assert unlogged("whole-within-skew", whole, other_id_at(0, 11.5)) == said(
        "EXPORT_DOES_NOT_SPAN",
        f"the log's latest exported record (__transaction_state-{TS} offset 0) is no later than "
        "their producer's first commit by the tolerated clock skew" + copied_before,
    )
    # With the producer's transactional id in the export, the checks judge its commits.
    assert unlogged("logged", None, *TRANSACTION_LOG) == []


def test_a_marker_written_after_the_complete_record_ends_another_transaction(spark):
    """Transactions v1: one epoch for all of a producer's transactions. Transaction A, prepared
    at 10 s and completed at 11 s, has no marker in `out`'s export (nothing of it there); the
    export of the transaction log ends before B's prepare, but `out`'s holds B's marker at 22 s,
    of the same epoch. Kafka wrote A's markers before its Complete record: B's is not A's."""
    prepared = spark.createDataFrame(
        [(TXN_ID, TS, 3, PID, 0, "COMMIT", at(10), at(11), at(9), False, OUTPUT, 0)],
        "transactional_id string, transaction_log_partition int, transaction_log_offset long, "
        "producer_id long, producer_epoch int, decision string, prepared_at long, "
        "completed_at long, at long, bumped boolean, topic string, partition int",
    )
    transactions = spark.createDataFrame(
        [(OUTPUT, 0, PID, at(22), 4, "ABORT", 0, 3, at(20), 1, 0)], TRANSACTION_COLUMNS
    )
    (row,) = matched_markers(prepared, transactions, 1000).collect()
    assert row["marker"] is None
    assert (row["later"]["marker_offset"], row["later"]["first_timestamp"]) == (4, at(20))
    # Had A completed after B's marker, the marker would be A's.
    late = prepared.withColumn("completed_at", F.lit(at(23)))
    (row,) = matched_markers(late, transactions, 1000).collect()
    assert (row["marker"]["marker_offset"], row["later"]) == (4, None)


def test_a_marker_stamped_before_its_prepare_by_a_leader_behind_is_its_transactions(spark):
    """Transactions v1, every 200 ms: the output's leader stamps each marker 18 ms behind the
    coordinator, before the prepare and after the transaction's last Ongoing record (its
    AddOffsetsToTxn). A's COMMIT marker is A's, B's ABORT marker B's: no torn transaction."""
    states = [  # (offset, status, ms after BASE_TS)
        (0, "Ongoing", 1000), (1, "Ongoing", 1090), (2, "PrepareCommit", 1095),
        (3, "CompleteCommit", 1100), (4, "Ongoing", 1200), (5, "Ongoing", 1290),
        (6, "PrepareAbort", 1295), (7, "CompleteAbort", 1300),
    ]  # fmt: skip
    both = [(OUTPUT, 0), (CO, PROC_CO)]
    records = transaction_log(
        spark, [(offset, PID, 0, status, at(0) + ms, both) for offset, status, ms in states]
    )
    transactions = spark.createDataFrame(
        [
            (OUTPUT, 0, PID, at(0) + 1080, 1, "COMMIT", 0, 0, at(0) + 1050, 1, 0),
            (OUTPUT, 0, PID, at(0) + 1280, 3, "ABORT", 0, 2, at(0) + 1250, 1, 0),
        ],
        TRANSACTION_COLUMNS,
    )
    prepared = prepared_partitions(records, 1000).where(F.col("topic") == OUTPUT)
    rows = matched_markers(prepared, transactions, 1000).orderBy("transaction_log_offset")
    marker = [(r["decision"], r["marker"]) for r in rows.collect()]
    matched = [(decided, m and m["outcome"], m and m["marker_offset"]) for decided, m in marker]
    assert matched == [("COMMIT", "COMMIT", 1), ("ABORT", "ABORT", 3)]


def torn_verdicts(
    spark: SparkSession,
    states: list[tuple[int, int, str, float]],
    transactions: list[tuple],
    **partition: int | None,
) -> list[tuple]:
    """`write_txn_markers`' (type, cause) of `proc-tx`'s transaction log `states` ((offset,
    epoch, status, seconds) each, every record listing `out`-0) against `out`-0's
    `transactions` (TRANSACTION_COLUMNS rows) and statistics (`partition`, beyond its latest
    batch at 100 s unless it says otherwise)."""
    records = transaction_log(
        spark,
        [(offset, PID, epoch, status, at(when), [(OUTPUT, 0)])
         for offset, epoch, status, when in states],
    )  # fmt: skip
    row = {f.name: None for f in PARTITION_STATS_N.fields}
    row.update({"topic": OUTPUT, "partition": 0, "max_timestamp": at(100), **partition})
    partitions = spark.createDataFrame([row], PARTITION_STATS_N)
    rows = write_txn_markers(
        records,
        spark.createDataFrame([], _HISTORY),
        spark.createDataFrame(transactions, TRANSACTION_COLUMNS),
        partitions,
        AuditConfig(),
        "r",
    ).collect()
    return sorted((r["finding_type"], r["cause"]) for r in rows)


def test_a_marker_whose_epoch_names_its_transaction_is_its_own_whenever_it_was_stamped(spark):
    """Transactions v2: each prepare bumps the epoch, and the marker carries it. A's COMMIT
    marker is stamped 1 ms after B's first record (the leader's clock ahead), B's ABORT marker
    after B's prepare: each is its own transaction's, and nothing is torn. Matched by time, A's
    marker came after B had begun, and both looked left without one."""
    states = [
        (0, 1, "Ongoing", 8), (1, 2, "PrepareCommit", 10), (2, 2, "CompleteCommit", 10.005),
        (3, 2, "Ongoing", 10.010), (4, 3, "PrepareAbort", 10.2), (5, 3, "CompleteAbort", 10.205),
    ]  # fmt: skip
    transactions = [
        (OUTPUT, 0, PID, at(10.011), 1, "COMMIT", 2, 0, at(8), 1, 1),
        (OUTPUT, 0, PID, at(10.206), 3, "ABORT", 3, 2, at(10.1), 1, 2),
    ]
    assert torn_verdicts(spark, states, transactions, first_offset=0, last_offset=3) == []


def test_a_v1_marker_stamped_within_the_skew_after_a_complete_record_is_not_taken_for_torn(spark):
    """Transactions v1, one epoch: A commits; its marker is stamped at B's first record's
    millisecond, 1 ms after A's Complete record; B aborts. By time the COMMIT marker follows B's
    start: B's, contradicting its abort, and A's data left without one. Either transaction's
    it may be: undecided, never torn."""
    states = [
        (0, 0, "Ongoing", 9), (1, 0, "PrepareCommit", 10.1), (2, 0, "CompleteCommit", 10.105),
        (3, 0, "Ongoing", 10.106), (4, 0, "PrepareAbort", 10.2), (5, 0, "CompleteAbort", 10.205),
    ]  # fmt: skip
    transactions = [
        (OUTPUT, 0, PID, at(10.106), 1, "COMMIT", 0, 0, at(9.05), 1, 0),
        (OUTPUT, 0, PID, at(10.205), 3, "ABORT", 0, 2, at(10.15), 1, 0),
    ]
    assert torn_verdicts(spark, states, transactions, first_offset=0, last_offset=3) == [
        ("UNVERIFIABLE", "MARKER_AMBIGUOUS")
    ]


def test_a_v2_transaction_that_wrote_nothing_to_a_partition_left_no_data_open_there(spark):
    """Transactions v2: A listed `out`-0, wrote nothing to it and aborted; its ABORT marker at
    offset 0 closed no data (the audit's transactions do not hold it). B, a minute later, writes
    a record stamped with an older event time (Kafka Streams forwards its input's) and commits.
    B's data is at A's prepared epoch, so A's own data would be below it: none was left open,
    whatever the times say. By the times alone, A's data looked left open until B's marker."""
    states = [
        (0, 1, "Ongoing", 10), (1, 2, "PrepareAbort", 10.1), (2, 2, "CompleteAbort", 10.11),
        (3, 2, "Ongoing", 60), (4, 3, "PrepareCommit", 60.2), (5, 3, "CompleteCommit", 60.21),
    ]  # fmt: skip
    transactions = [(OUTPUT, 0, PID, at(60.205), 2, "COMMIT", 3, 1, at(5), 1, 2)]
    assert torn_verdicts(spark, states, transactions, first_offset=0, last_offset=2) == []


def test_a_v1_run_of_markers_each_a_transaction_late_is_not_taken_for_torn(spark):
    """Transactions v1, `out`'s leader 1 ms ahead of the coordinator: each marker is stamped at
    the next transaction's first millisecond. A commits, B aborts, C commits; by time B takes
    A's COMMIT marker and C B's ABORT marker, and A is left without one. Undecided, never torn."""
    states = [
        (0, 0, "Ongoing", 9), (1, 0, "PrepareCommit", 10.1), (2, 0, "CompleteCommit", 10.105),
        (3, 0, "Ongoing", 10.106), (4, 0, "PrepareAbort", 10.2), (5, 0, "CompleteAbort", 10.205),
        (6, 0, "Ongoing", 10.206), (7, 0, "PrepareCommit", 10.3),
        (8, 0, "CompleteCommit", 10.305),
    ]  # fmt: skip
    transactions = [
        (OUTPUT, 0, PID, at(10.106), 1, "COMMIT", 0, 0, at(9.05), 1, 0),
        (OUTPUT, 0, PID, at(10.206), 3, "ABORT", 0, 2, at(10.15), 1, 0),
        (OUTPUT, 0, PID, at(10.306), 5, "COMMIT", 0, 4, at(10.25), 1, 0),
    ]
    assert torn_verdicts(spark, states, transactions, first_offset=0, last_offset=5) == [
        ("UNVERIFIABLE", "MARKER_AMBIGUOUS")
    ]


def test_a_v1_contradiction_after_a_transaction_that_wrote_nothing_is_torn(spark):
    """Transactions v1, transactions 100 ms apart: A aborts having written nothing to `out`-0
    (its marker there closes no data), B commits, C aborts and its marker says COMMIT. B's and
    C's markers are each stamped after their own prepare record: neither is its predecessor's,
    whatever A lacked. C is torn."""
    states = [
        (0, 0, "Ongoing", 9), (1, 0, "PrepareAbort", 9.1), (2, 0, "CompleteAbort", 9.105),
        (3, 0, "Ongoing", 9.2), (4, 0, "PrepareCommit", 9.3), (5, 0, "CompleteCommit", 9.305),
        (6, 0, "Ongoing", 9.4), (7, 0, "PrepareAbort", 9.5), (8, 0, "CompleteAbort", 9.505),
    ]  # fmt: skip
    transactions = [
        (OUTPUT, 0, PID, at(9.302), 2, "COMMIT", 0, 1, at(9.25), 1, 0),
        (OUTPUT, 0, PID, at(9.502), 4, "COMMIT", 0, 3, at(9.45), 1, 0),
    ]
    assert torn_verdicts(spark, states, transactions, first_offset=0, last_offset=4) == [
        ("TORN_TRANSACTION", "COMMIT_WHERE_ABORT")
    ]


def test_a_v1_marker_left_missing_before_a_new_session_is_still_missing(spark):
    """Transactions v1: A (epoch 0) writes at 0 s and is prepared to commit at 11 s; no marker
    reaches `out`-0. The producer restarts (InitProducerId bumps the epoch to 1) and commits B,
    whose marker closes A's data with B's. That marker's epoch is above its data's, but A's was
    not bumped at its prepare: the times decide, and A's data was left open."""
    states = [
        (0, 0, "Ongoing", 0.5), (1, 0, "PrepareCommit", 11), (2, 0, "CompleteCommit", 11.005),
        (3, 1, "Ongoing", 20), (4, 1, "PrepareCommit", 21), (5, 1, "CompleteCommit", 21.005),
    ]  # fmt: skip
    transactions = [(OUTPUT, 0, PID, at(21.002), 2, "COMMIT", 1, 0, at(0), 2, 0)]
    assert torn_verdicts(spark, states, transactions, first_offset=0, last_offset=2) == [
        ("TORN_TRANSACTION", "MARKER_MISSING")
    ]


def test_a_v2_marker_missing_is_told_by_its_data_epoch(spark):
    """Transactions v2: A writes at epoch 1 (the same second as its prepare) and is prepared at
    2; no marker reaches `out`-0, and B's marker, at 3, closes A's data with B's. The data's
    epoch, below A's prepared one, says it was left open, where its time could not."""
    states = [
        (0, 1, "Ongoing", 10), (1, 2, "PrepareCommit", 10.3), (2, 2, "CompleteCommit", 10.31),
        (3, 2, "Ongoing", 20), (4, 3, "PrepareCommit", 21), (5, 3, "CompleteCommit", 21.005),
    ]  # fmt: skip
    transactions = [(OUTPUT, 0, PID, at(21.002), 2, "COMMIT", 3, 0, at(10.1), 2, 1)]
    assert torn_verdicts(spark, states, transactions, first_offset=0, last_offset=2) == [
        ("TORN_TRANSACTION", "MARKER_MISSING")
    ]
    # Exported without batch times (Parquet may give none): the partition is in the export, and
    # whether its export reaches past the Complete record is unknown.
    untimed = torn_verdicts(
        spark, states, transactions, first_offset=0, last_offset=2, max_timestamp=None
    )
    assert untimed == [("UNVERIFIABLE", "EXPORT_DOES_NOT_SPAN")]


def test_a_v1_marker_within_the_skew_that_no_other_transaction_lacks_still_decides(spark):
    """Transactions v1, transactions 100 ms apart: A commits with its own marker; B aborts, and
    its partition's marker, 198 ms after A's Complete record, says COMMIT. A has its marker, so
    B's cannot be A's: torn."""
    states = [
        (0, 0, "Ongoing", 9), (1, 0, "PrepareCommit", 10.1), (2, 0, "CompleteCommit", 10.105),
        (3, 0, "Ongoing", 10.2), (4, 0, "PrepareAbort", 10.3), (5, 0, "CompleteAbort", 10.305),
    ]  # fmt: skip
    transactions = [
        (OUTPUT, 0, PID, at(10.102), 1, "COMMIT", 0, 0, at(9.5), 1, 0),
        (OUTPUT, 0, PID, at(10.303), 3, "COMMIT", 0, 2, at(10.25), 1, 0),
    ]
    assert torn_verdicts(spark, states, transactions, first_offset=0, last_offset=3) == [
        ("TORN_TRANSACTION", "COMMIT_WHERE_ABORT")
    ]


def test_a_v1_session_after_data_left_open_matches_its_markers_by_time(spark):
    """Transactions v1: a session at epoch 0 left data open in `out`-0 (its prepare not in the
    export); the next session, at epoch 1, commits A, whose marker closes that data with A's
    (so its transaction starts at epoch 0, below the marker's), then aborts B. The epoch names
    no single transaction there, both A and B were prepared with it: B's marker is its own
    ABORT, not A's COMMIT."""
    states = [
        (0, 1, "Ongoing", 20), (1, 1, "PrepareCommit", 21), (2, 1, "CompleteCommit", 21.005),
        (3, 1, "Ongoing", 22), (4, 1, "PrepareAbort", 23), (5, 1, "CompleteAbort", 23.005),
    ]  # fmt: skip
    transactions = [
        (OUTPUT, 0, PID, at(21.002), 2, "COMMIT", 1, 0, at(10), 2, 0),
        (OUTPUT, 0, PID, at(23.002), 4, "ABORT", 1, 3, at(22.5), 1, 1),
    ]
    assert torn_verdicts(spark, states, transactions, first_offset=0, last_offset=4) == []


@pytest.mark.parametrize("staged", [False, True], ids=["whole", "staged"])
def test_a_partition_written_within_the_skew_after_the_complete_record_may_lack_its_marker(
    spark, tmp_path, staged: bool
):
    """`out`'s export holds a transaction's data (at 0 s), no marker, and another producer's
    batch stamped 5 ms after the Complete record (at 5 s): that producer's clock may run ahead,
    and the marker may have landed after the export. Undecided, not torn; at 2 s after, torn.
    The same when the prepared partitions with their markers are staged as a run stages them
    (`staged`)."""
    steps = ((0, "Ongoing", 0), (1, "PrepareCommit", 5), (2, "CompleteCommit", 5.005))
    records = transaction_log(
        spark, [(offset, PID, 1, status, at(when), [(OUTPUT, 0)]) for offset, status, when in steps]
    )
    transactions = spark.createDataFrame(
        [(OUTPUT, 0, PID, None, None, "OPEN", None, 0, at(0), 1, 1)], TRANSACTION_COLUMNS
    )
    history = spark.createDataFrame([], _HISTORY)

    def verdicts(written_until: int) -> list[tuple]:
        partitions = exported_partition(
            spark, OUTPUT, 0, written_until, first_offset=0, last_offset=0
        )
        folder = tmp_path / f"judged-{written_until}"
        stage = partial(checked_once, spark, path=str(folder)) if staged else None
        rows = write_txn_markers(
            records, history, transactions, partitions, AuditConfig(), "r", stage=stage
        ).collect()
        assert folder.exists() == staged
        return [(r["finding_type"], r["cause"]) for r in rows]

    assert verdicts(at(5.010)) == [("UNVERIFIABLE", "EXPORT_DOES_NOT_SPAN")]
    assert verdicts(at(7)) == [("TORN_TRANSACTION", "MARKER_MISSING")]


def test_the_producer_id_kip_890_moves_the_id_to_commits_as_no_zombie(spark):
    """Transactions v2: at epoch 32,766 the coordinator moves `proc-tx` to producer 8, whose
    first CompleteCommit names it. Producer 8's next transaction commits 205 ms later, within the
    1 s of skew the marker is judged with: the latest record before it still names producer 7,
    which 8 replaced, not the other way round. Producer 7's marker 2 s after the move is a
    zombie's."""
    states = [  # (offset, producer id, epoch, status, ms after BASE_TS)
        (0, 7, 32765, "Ongoing", 9000), (1, 7, 32766, "PrepareCommit", 10000),
        (2, 8, 0, "CompleteCommit", 10005), (3, 8, 0, "Ongoing", 10100),
        (4, 8, 1, "PrepareCommit", 10200), (5, 8, 1, "CompleteCommit", 10205),
    ]  # fmt: skip
    records = transaction_log(
        spark,
        [(offset, pid, epoch, status, at(0) + ms, []) for offset, pid, epoch, status, ms in states],
    )
    transactions = spark.createDataFrame(
        [
            (OUTPUT, 0, 7, at(0) + 10003, 1, "COMMIT", 32766, 0, None, 1, 32765),
            (OUTPUT, 0, 8, at(0) + 10210, 3, "COMMIT", 1, 2, None, 1, 0),
            (OUTPUT, 1, 7, at(0) + 12000, 5, "COMMIT", 32766, 4, None, 1, 32765),
        ],
        TRANSACTION_COLUMNS,
    )
    rows = prepare_fence_producer_epoch(records, transactions, AuditConfig(), "run").collect()
    assert [(r["cause"], r["partition"], r["base_offset"]) for r in rows] == [
        ("PRODUCER_ID_REPLACED", 1, 5)
    ]


def test_a_commit_of_a_producer_id_its_transactional_id_moved_on_from_hangs(spark):
    """Transactions v2: producer 7 commits `proc`'s offsets at 9.5 s in a transaction listing
    its `__consumer_offsets` partition; at epoch 32,767 the coordinator prepares the commit and
    moves `proc-tx` to producer 8, whose transaction, open at the export's end, lists the
    partition too. The marker never reached the partition: producer 7 is no transactional id's
    now (find-hanging asks by producer id), and its commit hangs, however its own latest record,
    the prepare, lists the partition. With the KIP-939 timeout, producer 8's transaction is an
    open two-phase-commit one, producer 7's is not."""
    listing = [(OUTPUT, 0), (CO, PROC_CO)]
    states = [  # (offset, producer id, epoch, status, partitions, seconds)
        (0, 7, 32766, "Ongoing", listing, 9), (1, 7, 32767, "PrepareCommit", listing, 10),
        (2, 8, 0, "CompleteCommit", [], 10.005), (3, 8, 0, "Ongoing", listing, 20),
    ]  # fmt: skip

    def records(timeout_ms: int):
        return spark.createDataFrame(
            [
                ("__transaction_state", None, TXN_ID, False, TS, offset, at(when), pid, epoch,
                 status, partitions, timeout_ms)
                for offset, pid, epoch, status, partitions, when in states
            ],
            "coordinator_topic string, _source_error string, transactional_id string, "
            "is_tombstone boolean, coordinator_partition int, offset long, timestamp long, "
            "producer_id long, producer_epoch int, transaction_status string, "
            "transaction_partitions array<struct<topic: string, partition: int>>, "
            "transaction_timeout_ms int",
        )  # fmt: skip

    history = spark.createDataFrame(
        [(PROC_CO, at(9.5), "PENDING", 7, 0, 32766, PROCESSOR, "x")],
        "coordinator_partition int, timestamp long, outcome string, producer_id long, "
        "record_offset long, producer_epoch int, group_id string, source string",
    )
    rows = find_hanging_transactions(
        history, records(60_000), AuditConfig(), "run", at(2000)
    ).collect()
    assert [(r["finding_type"], r["cause"], r["producer_id"]) for r in rows] == [
        ("HANGING_OFFSET_TRANSACTION", "NOT_IN_CURRENT_TRANSACTION", 7)
    ]
    assert "its transactional id proc-tx has moved on to producer 8 (__transaction_state-" in (
        rows[0]["detail"]
    )
    evidence = dict(rows[0]["evidence"])
    assert (evidence["current_state"], evidence["transaction_log_offset"]) == ("Ongoing", "3")
    two_phase = distributed_two_phase_commit_partitions(records(TWO_PHASE_TIMEOUT_MS)).collect()
    assert sorted(tuple(r) for r in two_phase) == [(8, CO, PROC_CO), (8, OUTPUT, 0)]


def test_a_transaction_log_newer_than_the_offsets_export_cannot_say_a_commit_hangs(spark, tmp_path):
    """Without --export-time. `proc` commits at 0 s in a transaction whose marker the export of
    its `__consumer_offsets` partition lacks, whose last commit record is at 3600 s. The
    transaction log completed the transaction at 3700 s: the partition's copy may have been
    taken before the marker landed. Completed at 3500 s, or the partition's latest batch at
    3750 s, and the commit hangs. The same when the judged producers are staged as a run stages
    them (`staged`)."""

    def hanging(
        completed_at: float, written_until: float | None, staged: bool = False
    ) -> list[tuple]:
        root = tmp_path / f"{completed_at}-{written_until}-{staged}"
        folder = tmp_path / f"judged-{completed_at}-{written_until}"
        stage = partial(checked_once, spark, path=str(folder)) if staged else None
        offsets = [txn(0, 0, 0, commit(PROCESSOR, INPUT, 2, 0)),
                   plain(1, 3600, commit(PROCESSOR, INPUT, 2, 3600))]  # fmt: skip
        log = [state(0, 0, ONGOING, BOTH, -1), state(1, 1, COMPLETE_COMMIT, {}, completed_at)]
        write_partition_dir(root, 1, CO, PROC_CO, *offsets)
        write_partition_dir(root, 1, "__transaction_state", TS, *log)
        export = read_kafka_export(spark, [str(root)])
        records = staged_records(export.coordinator_records)
        history = replay_offsets(offset_events(records))
        partitions = (
            None if written_until is None
            else exported_partition(spark, CO, PROC_CO, at(written_until))
        )  # fmt: skip
        rows = find_hanging_transactions(
            history, records, AuditConfig(), "run", None, partitions=partitions, stage=stage
        ).collect()
        assert folder.exists() == staged
        return [(r["finding_type"], r["cause"], r["detail"]) for r in rows]

    ((finding, cause, detail),) = hanging(3700, None)
    assert (finding, cause) == ("UNVERIFIABLE", "EXPORT_DOES_NOT_SPAN")
    assert "is newer than the latest batch of the __consumer_offsets partition's export" in detail
    assert hanging(3700, None, staged=True) == [(finding, cause, detail)]
    hangs = [("HANGING_OFFSET_TRANSACTION", "NOT_IN_CURRENT_TRANSACTION")]
    hung = hanging(3500, None)
    assert [h[:2] for h in hung] == hangs
    assert hanging(3500, None, staged=True) == hung
    assert [h[:2] for h in hanging(3700, 3750)] == hangs


def test_a_transaction_log_exported_before_the_pending_commit_cannot_say_it_hangs(spark, tmp_path):
    """`proc`'s transaction 2 commits its offset at 21 s and its marker is not in the export.
    With the whole transaction log (its last record at 37 s), the current transaction of
    `proc-tx` does not list the partition: hanging. With the log exported up to 14 s, before
    transaction 2's Ongoing record, it cannot tell. With another id's record at 1000 s after
    those 14 s, the log's partition was exported after the commit, which `proc-tx` sent with
    no AddOffsetsToTxn before it (as a client that skips it can, where the brokers do not
    verify): hanging. Another id's record within the skew after the commit does not tell."""

    def hanging(log_records: int, *later) -> list[tuple]:
        root = tmp_path / f"{log_records}-{len(later)}"
        write_partition_dir(root, 1, CO, PROC_CO, *PROCESSOR_OFFSETS[:3])
        write_partition_dir(
            root, 1, "__transaction_state", TS, *TRANSACTION_LOG[:log_records], *later
        )
        export = read_kafka_export(spark, [str(root)])
        records = staged_records(export.coordinator_records)
        history = replay_offsets(offset_events(records))
        rows = find_hanging_transactions(history, records, AuditConfig(), "run", at(2000)).collect()
        return [(r["finding_type"], r["cause"], r["detail"]) for r in rows]

    assert [h[:2] for h in hanging(len(TRANSACTION_LOG))] == [
        ("HANGING_OFFSET_TRANSACTION", "NOT_IN_CURRENT_TRANSACTION")
    ]
    ((finding, cause, detail),) = hanging(3)
    assert (finding, cause) == ("UNVERIFIABLE", "EXPORT_DOES_NOT_SPAN")
    assert detail.endswith(
        f"the latest exported record of its transactional id {TXN_ID} (__transaction_state-{TS} "
        "offset 2, CompleteCommit) is older than the first pending commit, and that partition's "
        "latest is no later than it by the tolerated clock skew: its export may end before the "
        "transaction began."
    )
    assert [h[:2] for h in hanging(3, other_id_at(3, 1000))] == [
        ("HANGING_OFFSET_TRANSACTION", "NOT_IN_CURRENT_TRANSACTION")
    ]
    # Within the skew after the commit: `proc-tx`'s own Ongoing record may still have followed.
    assert [h[:2] for h in hanging(3, other_id_at(3, 21.5))] == [
        ("UNVERIFIABLE", "EXPORT_DOES_NOT_SPAN")
    ]
