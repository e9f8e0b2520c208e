"""DUPLICATE_PROCESSING and SKIPPED_INPUT: a one-to-one processor's transactions against its input.

One export, Kafka's bytes (`segment_builder`), transactions v2 epochs. A copier (group `copy`,
transactional id `copy-tx`) copies `src` to `dst` one record per record; a second processor
(group `split`, `split-tx`) copies `src2` to `dst2`. Both groups are declared one-to-one.

`src`: 0-3 plain records, 4-5 an upstream transaction that aborts (marker at 6), 7-23 plain.

| transaction | commits `src` | reads | data records | writes | finding |
|---|---|---|---|---|---|
| T1 | 7 | [0, 7) | 4 (a marker and 2 aborted records) | 4 | none |
| T2 | 11 | [7, 11) | 4 | 4 | none |
| | an operator commits 7 (plain) | | | | |
| T3 | 9 | [7, 9) again | 2 | 2 | DUPLICATE_PROCESSING OVERLAPPING_RANGE |
| T3' | 11 | [9, 11) again | 2 | 2 | none: it goes on from T3, which was reported |
| | an operator commits 15 (plain) | | | | |
| T4 | 20 | [15, 20) | 5 | 6 | SKIPPED_INPUT RANGE_GAP [11, 15), |
| | | | | | DUPLICATE_PROCESSING MORE_OUTPUT_THAN_INPUT |
| T5 | 24 | [20, 24) | 4 | 3 | SKIPPED_INPUT LESS_OUTPUT_THAN_INPUT |

`src2`: 0-1 plain, 2 an upstream transaction's record, 3 plain, 4 its ABORT marker. `split`
commits 3 and then 5: the aborted transaction straddles both ranges' ends, so neither count can
be decided (UNVERIFIABLE, RANGE_SPLITS_TRANSACTION).

Two one-to-one groups, `shared-a` and `shared-b`, commit their offsets of `src4` in one
transaction, whose outputs therefore are not one group's (UNVERIFIABLE, OUTPUTS_SHARED).

`src5` is compacted: the cleaner kept 2 of the records at offsets 2-5 (one batch, its offsets
kept), removed the batch at 6-7, and kept the marker at 16 of an upstream transaction whose
records it removed. Only the ranges of group `cdc-sink` that hold such offsets are undecided:

| transaction | commits `src5` | reads | data records | writes | finding |
|---|---|---|---|---|---|
| C1 | 8 | [0, 8) | unknown: 2-7 | 6 | UNVERIFIABLE INPUT_NOT_WHOLE |
| C2 | 12 | [8, 12) | 4 | 5 | DUPLICATE_PROCESSING MORE_OUTPUT_THAN_INPUT |
| C3 | 17 | [12, 17) | unknown: 16 | 4 | UNVERIFIABLE MARKERS_NOT_ATTRIBUTED |
| C4 | 21 | [17, 21) | 4 | 4 | none |

`src6` is compacted too: the cleaner removed its first batches, offsets 0-9, so its export starts
at offset 10, and its log still starts at 0 (the cleaner never moves a log's start). The group
`idle-cdc` stopped at offset 5 of it: inside the log, not below its start.

The group `late-out` copies `src7` to `dst7` in two transactions; `dst7` is exported from after
the first one (its records and marker gone, as after retention): that transaction's outputs are
not counted (UNVERIFIABLE, OUTPUTS_NOT_COUNTED), never taken for none; the second is judged.

The group `after-retention` copies `src8`, whose export starts at offset 5 (retention removed 0-4):
its first transaction's range begins where the group began, which the export does not show
(UNVERIFIABLE, RANGE_START_UNKNOWN); its second is judged from the first's offset.

Two groups' offset commits are skipped by the coordinator (a later record of the key was applied
while they were pending, KAFKA-14505), their transactions committed all the same:
- `plain-race` (`src9`): a transaction commits 4; the next reads [4, 8) and commits 8, and a plain
  commit of 6 lands before its marker (its 8 is skipped); the third reads [6, 12): offsets
  [6, 8) were processed twice (DUPLICATE_PROCESSING, OVERLAPPING_RANGE), none was left out.
- `owned-twice` (`src10`): two owners read from offset 0; the first one's commit of 6 is
  written, then the second one's transaction commits 5 and gets its marker first (the 6 is
  skipped): the first one processed [0, 5) again (DUPLICATE_PROCESSING, OVERLAPPING_RANGE).
- `laggard` (`src11`): a transaction commits 8; the next commits 4, read from somewhere below
  the group's 8, and a plain commit of 10 lands before its marker (its 4 is skipped): where it
  began reading is not in the log (UNVERIFIABLE, RANGE_START_UNKNOWN), never a pass.
- `lost-laggard`: the same race after an operator's commit of 9, over an input the export does
  not hold (`src12`): the count is UNVERIFIABLE (INPUT_NOT_EXPORTED), and the skipped
  transaction, whose start is in doubt all the same, is not judged for a gap after offset 8.

The group `upsert-sink` copies `src13`'s 4 records to the compacted `dst13` in one committed
transaction; the cleaner kept 2 of the 4 records of its output batch (offsets 0-3, a newer
record of their keys followed): its outputs are not counted (UNVERIFIABLE, OUTPUTS_NOT_COUNTED),
never taken for 2.

A one-to-one group `gappy` commits in a `__consumer_offsets` partition whose offset 0 the
export lacks (as after the cleaner): its range cannot be trusted (UNVERIFIABLE,
OFFSETS_NOT_WHOLE), nor can the rewind check there (UNVERIFIABLE of OFFSET_REWIND).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

from eos_audit.audit.output_records import PARTITION_STATS_N
from eos_audit.audit.pipeline import AuditInputs, run_audit
from eos_audit.config import AuditConfig
from eos_audit.processing.coordinator_audit import offset_events, replay_offsets, staged_records
from eos_audit.processing.one_to_one import send_offsets_to_transaction
from eos_audit.sources.kafka.coordinator_keys import partition_for
from eos_audit.sources.kafka.export import read_kafka_export
from tests.fixtures.segment_builder import (
    BASE_TS,
    cleaned_batch,
    control_batch,
    data_batch,
    record_batch,
    write_partition_dir,
)
from tests.processing.test_transaction_outcomes import TRANSACTION_COLUMNS
from tests.sources.test_coordinator_records import (
    offset_commit_key,
    offset_commit_value,
    txn_key,
    txn_value,
)

pytestmark = pytest.mark.slow

CO, TS_TOPIC = "__consumer_offsets", "__transaction_state"
ONGOING, PREPARE_COMMIT, COMPLETE_COMMIT = 1, 2, 4
UPSTREAM = 7000
COMPACTED = "src5"  # a compacted topic (conftest.timelines)
CLEANED_FROM_START = "src6"  # another
COMPACTED_OUTPUT = "dst13"  # another: an output topic


def at(seconds: float) -> int:
    return BASE_TS + int(seconds * 1000)


class Export:
    """Partitions of Kafka batches, each given the next offset of its partition."""

    def __init__(self) -> None:
        self.logs: dict[tuple[str, int], list[bytes]] = defaultdict(list)
        self.next: dict[tuple[str, int], int] = defaultdict(int)

    def add(self, topic: str, partition: int, build, width: int = 1) -> int:
        offset = self.next[(topic, partition)]
        self.logs[(topic, partition)].append(build(offset))
        self.next[(topic, partition)] = offset + width
        return offset

    def write(self, root) -> None:
        for (topic, partition), batches in self.logs.items():
            write_partition_dir(root, 1, topic, partition, *batches)


class Processor:
    """A transactional processor: each transaction writes `dst`, commits `src`, and commits."""

    def __init__(
        self, export: Export, group: str, pid: int, src: str, dst: str, transactional_id: str = ""
    ) -> None:
        self.export, self.group, self.pid, self.src, self.dst = export, group, pid, src, dst
        self.transactional_id = transactional_id or f"{group}-tx"
        self.co = partition_for(group)
        self.ts = partition_for(self.transactional_id)
        self.epoch = 0

    def transaction(
        self,
        when: float,
        outputs: int,
        commit_to: int,
        also: tuple[str, ...] = (),
        between: Callable[[float], float] | None = None,
    ) -> float:
        """One committed transaction; `also` names more groups whose offsets it commits.

        `between`, given the time after its offset commits, writes other records before it is
        prepared, and returns the time it goes on at. Returns the time after the transaction.
        """
        e, pid, export = self.epoch, self.pid, self.export
        groups = {self.co: self.group, **{partition_for(g): g for g in also}}
        both = {self.dst: [0], CO: sorted(groups)}
        self._state(e, ONGOING, both, when)
        export.add(self.dst, 0, lambda o: data_batch(
            o, outputs, producer_id=pid, producer_epoch=e, base_sequence=0,
            is_transactional=True, timestamp=at(when + 1)), outputs)  # fmt: skip
        for co, group in groups.items():
            commit = (
                offset_commit_key(group, self.src, 0),
                offset_commit_value(3, commit_to, "", at(when + 2)),
            )
            export.add(CO, co, lambda o, commit=commit: record_batch(
                o, [commit], producer_id=pid, producer_epoch=e, base_sequence=0,
                is_transactional=True, timestamp=at(when + 2)))  # fmt: skip
        decided = when + 3 if between is None else between(when + 2.5)
        self._state(e + 1, PREPARE_COMMIT, both, decided)
        for topic, partition in ((self.dst, 0), *((CO, co) for co in groups)):
            export.add(topic, partition, lambda o: control_batch(
                o, producer_id=pid, producer_epoch=e + 1, commit=True,
                timestamp=at(decided + 1)))  # fmt: skip
        self._state(e + 1, COMPLETE_COMMIT, {}, decided + 2)
        self.epoch = e + 1
        return decided + 2.5

    def operator_commits(self, when: float, offset: int) -> float:
        """A plain commit of `offset`; the time after it."""
        commit = (
            offset_commit_key(self.group, self.src, 0),
            offset_commit_value(3, offset, "", at(when)),
        )
        self.export.add(CO, self.co, lambda o: record_batch(o, [commit], timestamp=at(when)))
        return when + 0.5

    def _state(self, epoch: int, status: int, partitions: dict, when: float) -> None:
        value = txn_value(0, self.pid, epoch, status, partitions, at(when), at(when))
        self.export.add(TS_TOPIC, self.ts, lambda o: record_batch(
            o, [(txn_key(self.transactional_id), value)], timestamp=at(when)))  # fmt: skip


def upstream_transaction(export: Export, topic: str, records: int) -> None:
    """An upstream producer's transactional batch in `topic`-0 (`abort_marker` ends it)."""
    export.add(topic, 0, lambda o: data_batch(
        o, records, producer_id=UPSTREAM, producer_epoch=0, base_sequence=0,
        is_transactional=True, timestamp=at(1)), records)  # fmt: skip


def abort_marker(export: Export, topic: str) -> None:
    export.add(topic, 0, lambda o: control_batch(
        o, producer_id=UPSTREAM, producer_epoch=0, commit=False, timestamp=at(2)))  # fmt: skip


def plain(export: Export, topic: str, records: int) -> None:
    export.add(topic, 0, lambda o: data_batch(o, records, timestamp=at(1)), records)


def build_export() -> Export:
    export = Export()
    plain(export, "src", 4)
    upstream_transaction(export, "src", 2)
    abort_marker(export, "src")
    for records in (4, 4, 5, 4):
        plain(export, "src", records)
    copy = Processor(export, "copy", 5000, "src", "dst")
    copy.transaction(10, outputs=4, commit_to=7)
    copy.transaction(20, outputs=4, commit_to=11)
    copy.operator_commits(28, 7)
    copy.transaction(30, outputs=2, commit_to=9)
    copy.transaction(35, outputs=2, commit_to=11)
    copy.operator_commits(38, 15)
    copy.transaction(40, outputs=6, commit_to=20)
    copy.transaction(50, outputs=3, commit_to=24)

    plain(export, "src2", 2)
    upstream_transaction(export, "src2", 1)
    plain(export, "src2", 1)
    abort_marker(export, "src2")
    split = Processor(export, "split", 6000, "src2", "dst2")
    split.transaction(10, outputs=2, commit_to=3)
    split.transaction(20, outputs=2, commit_to=5)

    plain(export, "src3", 2)
    gappy = Processor(export, "gappy", 6100, "src3", "dst3")
    assert len({gappy.co, split.co, copy.co}) == 3
    export.next[(CO, gappy.co)] = 1  # offset 0 is not in the export
    gappy.transaction(10, outputs=2, commit_to=2)

    plain(export, "src4", 2)
    shared = Processor(export, "shared-a", 6200, "src4", "dst4")
    assert partition_for("shared-b") not in {gappy.co, split.co, copy.co, shared.co}
    shared.transaction(10, outputs=4, commit_to=2, also=("shared-b",))

    plain(export, COMPACTED, 2)
    export.add(COMPACTED, 0, lambda o: cleaned_batch(o, (1, 3), timestamp=at(1)), 4)
    export.next[(COMPACTED, 0)] += 2  # the batch at 6-7 is gone
    for records in (4, 4):
        plain(export, COMPACTED, records)
    abort_marker(export, COMPACTED)  # the upstream producer has no records left in src5
    plain(export, COMPACTED, 4)
    compacted = Processor(export, "cdc-sink", 6300, COMPACTED, "dst5")
    assert compacted.co not in {gappy.co, split.co, copy.co, shared.co, partition_for("shared-b")}
    for when, outputs, commit_to in ((10, 6, 8), (20, 5, 12), (30, 4, 17), (40, 4, 21)):
        compacted.transaction(when, outputs=outputs, commit_to=commit_to)

    export.next[(CLEANED_FROM_START, 0)] = 10  # the cleaner removed offsets 0-9
    plain(export, CLEANED_FROM_START, 4)
    idle = Processor(export, "idle-cdc", 6400, CLEANED_FROM_START, "dst6")
    assert idle.co not in {gappy.co, split.co, copy.co, shared.co, compacted.co}
    idle.operator_commits(5, 5)

    plain(export, "src7", 4)
    late = Processor(export, "late-out", 6500, "src7", "dst7")
    assert late.co not in {gappy.co, split.co, copy.co, shared.co, compacted.co, idle.co}
    late.transaction(10, outputs=2, commit_to=2)
    late.transaction(20, outputs=2, commit_to=4)
    del export.logs[("dst7", 0)][:2]  # the first transaction's records and marker

    export.next[("src8", 0)] = 5  # retention removed offsets 0-4
    plain(export, "src8", 7)
    trimmed = Processor(export, "after-retention", 6600, "src8", "dst8")
    others = (gappy, split, copy, shared, compacted, idle, late)
    assert trimmed.co not in {other.co for other in others}
    trimmed.transaction(10, outputs=9, commit_to=9)  # it had read 0-8, before the retention
    trimmed.transaction(20, outputs=3, commit_to=12)

    # A plain commit of 6 lands while the transaction that read [4, 8) is pending: the
    # coordinator applies it, and skips the older transactional record at the marker.
    plain(export, "src9", 12)
    raced = Processor(export, "plain-race", 6700, "src9", "dst9")
    raced.transaction(10, outputs=4, commit_to=4)
    raced.transaction(20, outputs=4, commit_to=8, between=lambda t: raced.operator_commits(t, 6))
    raced.transaction(30, outputs=6, commit_to=12)

    # Two owners read [0, 6) and [0, 5) from the group's offset; the second one's transaction
    # commits first, and the first one's older record is skipped at its marker.
    plain(export, "src10", 6)
    first = Processor(export, "owned-twice", 6800, "src10", "dst10")
    second = Processor(export, "owned-twice", 6801, "src10", "dst10", "owned-twice-b-tx")
    first.transaction(10, outputs=6, commit_to=6,
                      between=lambda t: second.transaction(t, outputs=5, commit_to=5))  # fmt: skip

    # A transaction commits 4 when the group is at 8 (it read from further back), and is skipped
    # behind a plain commit of 10: where it began reading is not in the log.
    plain(export, "src11", 10)
    laggard = Processor(export, "laggard", 6900, "src11", "dst11")
    laggard.transaction(10, outputs=8, commit_to=8)
    laggard.transaction(20, outputs=4, commit_to=4,
                        between=lambda t: laggard.operator_commits(t, 10))  # fmt: skip
    # The same, over an input the export does not hold, after an operator's commit of 9.
    lost = Processor(export, "lost-laggard", 6950, "src12", "dst12")
    lost.transaction(10, outputs=8, commit_to=8)
    lost.operator_commits(15, 9)
    lost.transaction(20, outputs=4, commit_to=4, between=lambda t: lost.operator_commits(t, 10))
    raced_ones = {raced.co, first.co, laggard.co, lost.co}
    assert len(raced_ones) == 4
    assert not raced_ones & {other.co for other in (*others, trimmed)}

    plain(export, "src13", 4)
    sink = Processor(export, "upsert-sink", 6960, "src13", COMPACTED_OUTPUT)
    assert sink.co not in raced_ones | {other.co for other in (*others, trimmed)}
    sink.transaction(10, outputs=4, commit_to=4)
    export.logs[(COMPACTED_OUTPUT, 0)][0] = cleaned_batch(
        0, (1, 3), producer_id=6960, producer_epoch=0, is_transactional=True, timestamp=at(11)
    )  # the cleaner kept offsets 1 and 3 of the transaction's output batch
    return export


EXPORT = build_export()
COPY_CO = partition_for("copy")
COMPACTED_CO = partition_for("cdc-sink")
PLAIN_RACE_CO, OWNED_TWICE_CO = partition_for("plain-race"), partition_for("owned-twice")


# Two groups declared by name commit nothing in the export: `ledger-sink`'s partition is exported
# (`late-out` commits there), `payments-copier`'s is not. A pattern that matches no group
# (`retired-*`) is not reported: a group not yet started matches none.
LEDGER_CO, PAYMENTS_CO = partition_for("ledger-sink"), partition_for("payments-copier")

# The groups the audit declares one-to-one (conftest.timelines).
DECLARED = ("copy", "spl*", "gap?y", "shared-*", "cdc-sink", "late-out", "after-retention",
            "plain-race", "owned-twice", "laggard", "lost-laggard", "upsert-sink",
            "ledger-sink", "payments-copier",
            "retired-*")  # fmt: skip


@pytest.fixture(scope="module")
def audited(timelines):
    return timelines


def findings(warehouse) -> list[dict]:
    registered = QueryBuilder().register("t", DeltaTable(str(warehouse / "findings")))
    query = (
        "SELECT finding_type, cause, severity, topic, partition, base_offset, detail, evidence "
        "FROM t WHERE finding_type IN ('DUPLICATE_PROCESSING', 'SKIPPED_INPUT') "
        "OR (finding_type = 'UNVERIFIABLE' AND evidence['check'] IN ('ONE_TO_ONE', "
        "'OFFSET_REWIND')) "
        "ORDER BY finding_type, cause, topic, base_offset, partition"
    )
    return pa.table(registered.execute(query).read_all()).to_pylist()


def commit_record(n: int) -> int:
    """The offset of `copy`'s n-th offset commit record (1-based) in its partition.

    Each transaction adds its commit and its marker; the operator's commits come after T2 and
    T3'. Only `copy`'s records are counted: the groups do not share a partition (`build_export`).
    """
    return {1: 0, 2: 2, 3: 5, 4: 10, 5: 12}[n]


def test_each_transaction_is_judged_against_its_range_and_its_outputs(audited):
    assert [
        (f["finding_type"], f["cause"], f["severity"], f["topic"], f["partition"], f["base_offset"])
        for f in findings(audited)
    ] == [
        ("DUPLICATE_PROCESSING", "MORE_OUTPUT_THAN_INPUT", "CRITICAL", CO, COMPACTED_CO, 2),
        ("DUPLICATE_PROCESSING", "MORE_OUTPUT_THAN_INPUT", "CRITICAL", CO, COPY_CO,
         commit_record(4)),
        ("DUPLICATE_PROCESSING", "OVERLAPPING_RANGE", "CRITICAL", CO, OWNED_TWICE_CO, 0),
        ("DUPLICATE_PROCESSING", "OVERLAPPING_RANGE", "CRITICAL", CO, COPY_CO, commit_record(3)),
        ("DUPLICATE_PROCESSING", "OVERLAPPING_RANGE", "CRITICAL", CO, PLAIN_RACE_CO, 5),
        ("SKIPPED_INPUT", "LESS_OUTPUT_THAN_INPUT", "CRITICAL", CO, COPY_CO, commit_record(5)),
        ("SKIPPED_INPUT", "RANGE_GAP", "CRITICAL", CO, COPY_CO, commit_record(4)),
        ("UNVERIFIABLE", "GROUP_NOT_EXPORTED", "INFO", CO, PAYMENTS_CO, -1),
        ("UNVERIFIABLE", "INPUT_NOT_EXPORTED", "INFO", "src12", 0, -1),
        ("UNVERIFIABLE", "INPUT_NOT_WHOLE", "INFO", COMPACTED, 0, -1),
        ("UNVERIFIABLE", "MARKERS_NOT_ATTRIBUTED", "INFO", COMPACTED, 0, -1),
        ("UNVERIFIABLE", "NO_COMMITS_OF_GROUP", "INFO", CO, LEDGER_CO, -1),
        ("UNVERIFIABLE", "OFFSETS_NOT_WHOLE", "INFO", CO, partition_for("gappy"), -1),
        ("UNVERIFIABLE", "OFFSETS_NOT_WHOLE", "INFO", "src3", 0, -1),
        ("UNVERIFIABLE", "OUTPUTS_NOT_COUNTED", "INFO", "src13", 0, -1),
        ("UNVERIFIABLE", "OUTPUTS_NOT_COUNTED", "INFO", "src7", 0, -1),
        ("UNVERIFIABLE", "OUTPUTS_SHARED", "INFO", "src4", 0, -1),
        ("UNVERIFIABLE", "OUTPUTS_SHARED", "INFO", "src4", 0, -1),
        ("UNVERIFIABLE", "RANGE_SPLITS_TRANSACTION", "INFO", "src2", 0, -1),
        ("UNVERIFIABLE", "RANGE_START_UNKNOWN", "INFO", "src11", 0, -1),
        ("UNVERIFIABLE", "RANGE_START_UNKNOWN", "INFO", "src8", 0, -1),
    ]  # fmt: skip


def test_the_findings_say_what_was_processed_twice_or_never(audited):
    skipped_commits = (PLAIN_RACE_CO, OWNED_TWICE_CO)  # their findings have a test of their own
    by = {
        (f["finding_type"], f["cause"]): f
        for f in findings(audited)
        if f["partition"] not in skipped_commits
    }
    overlap = by[("DUPLICATE_PROCESSING", "OVERLAPPING_RANGE")]
    assert overlap["detail"] == (
        "Transaction of copy-tx (producer 5000, epoch 2) committed group copy's offset of src-0 "
        f"at 9 (record {commit_record(3)}): it processed [7, 9), and offsets [7, 9) of it an "
        "earlier committed transaction of the group had processed (the group's transactions had "
        "reached offset 11)."
    )
    gap = by[("SKIPPED_INPUT", "RANGE_GAP")]
    assert "no committed transaction of the group processed offsets [11, 15)" in gap["detail"]
    more = dict(by[("DUPLICATE_PROCESSING", "MORE_OUTPUT_THAN_INPUT")]["evidence"])
    assert (more["input_records"], more["output_records"]) == ("5", "6")
    assert (more["range_start"], more["range_end"], more["transactional_id"]) == (
        "15",
        "20",
        "copy-tx",
    )
    less = by[("SKIPPED_INPUT", "LESS_OUTPUT_THAN_INPUT")]
    assert "it wrote 3 committed output records for 4 input data records" in less["detail"]
    split = by[("UNVERIFIABLE", "RANGE_SPLITS_TRANSACTION")]
    assert split["detail"] == (
        "ONE_TO_ONE cannot be decided for src2-0 (group split, 2 transaction(s) of split-tx, the "
        f"first at __transaction_state-{partition_for('split-tx')} offset 1): an aborted, "
        "undecided or open transaction of the input straddles an end of the range."
    )
    assert dict(split["evidence"])["group_id"] == "split"
    compacted = {f["cause"]: f["detail"] for f in findings(audited) if f["topic"] == COMPACTED}
    scope = (
        f"ONE_TO_ONE cannot be decided for src5-0 (group cdc-sink, 1 transaction(s) of "
        f"cdc-sink-tx, the first at __transaction_state-{partition_for('cdc-sink-tx')} offset"
    )
    assert compacted == {
        "INPUT_NOT_WHOLE": f"{scope} 1): the range holds offsets of the input partition where "
        "the export does not hold one record per offset (compaction, or batches not read); the "
        "partition's offsets in doubt are 2 to 7.",
        "MARKERS_NOT_ATTRIBUTED": f"{scope} 7): the range holds markers of input transactions "
        "the export does not show, so its data records cannot be counted; the partition's "
        "markers that closed nothing are at offsets 16 to 16.",
    }
    cleaned = [
        f
        for f in findings(audited)
        if (f["finding_type"], f["topic"]) == ("UNVERIFIABLE", CO)
        and dict(f["evidence"])["check"] == "OFFSET_REWIND"
    ]
    assert [f["detail"] for f in cleaned] == [
        f"OFFSET_REWIND cannot be decided for {CO}-{partition_for('gappy')} (1 group(s) "
        "committed there): the export holds records from offset 1 to 2 of it, not one at every "
        "offset (the cleaner keeps a key's last commit only): a rewind among commits it removed "
        "cannot be seen."
    ]


def test_a_group_declared_by_name_that_committed_nothing_here_is_said(audited):
    """The export holds no commit of `ledger-sink` or `payments-copier`: what the check could not
    see is said at the partition that holds each group, never passed."""
    from tests.processing.test_transaction_outcomes import DOWN_CO, PROC_CO

    held = {p for topic, p in EXPORT.logs if topic == CO} | {DOWN_CO, PROC_CO}
    assert LEDGER_CO in held and PAYMENTS_CO not in held
    said = {
        f["cause"]: (f["partition"], f["detail"], dict(f["evidence"])["group_id"])
        for f in findings(audited)
        if f["cause"] in ("GROUP_NOT_EXPORTED", "NO_COMMITS_OF_GROUP")
    }
    assert said == {
        "GROUP_NOT_EXPORTED": (
            PAYMENTS_CO,
            f"ONE_TO_ONE cannot be decided for {CO}-{PAYMENTS_CO} (group payments-copier, "
            "declared one-to-one): the export holds no record of the __consumer_offsets "
            "partition that holds the group's commits (its id's hash modulo the topic's "
            "partitions: processing.offsets_topic_partitions, or more where the export holds a "
            "higher one), so none of its transactions is known.",
            "payments-copier",
        ),
        "NO_COMMITS_OF_GROUP": (
            LEDGER_CO,
            f"ONE_TO_ONE cannot be decided for {CO}-{LEDGER_CO} (group ledger-sink, declared "
            "one-to-one): the export holds the __consumer_offsets partition that holds the "
            "group's commits, and no offset commit of the group that a committed transaction "
            "made: it made none in the exported range (its records there, if any, are plain, "
            "aborted or pending commits, or tombstones), or the declared name is not the "
            "group's.",
            "ledger-sink",
        ),
    }


def test_a_group_declared_by_name_is_looked_for_in_an_export_without_coordinator_topics(
    spark, tmp_path
):
    """No `__consumer_offsets` at all: the group is said to be missing at its partition, by the
    cluster's `offsets.topic.num.partitions` as configured."""
    write_partition_dir(tmp_path / "export", 1, "src", 0, data_batch(0, 3, timestamp=at(1)))
    config = AuditConfig().with_overrides(
        processing={
            "one_to_one_groups": ["payments-copier", "retired-*"],
            "offsets_topic_partitions": 10,
        }
    )
    inputs = AuditInputs(batches=(str(tmp_path / "export"),))
    run_audit(spark, inputs, config, str(tmp_path / "warehouse"))
    assert [
        (f["finding_type"], f["cause"], f["topic"], f["partition"])
        for f in findings(tmp_path / "warehouse")
    ] == [("UNVERIFIABLE", "GROUP_NOT_EXPORTED", CO, partition_for("payments-copier", 10))]


def test_a_declared_group_that_no_committed_transaction_judged_is_said_once_where_kafka_puts_it(
    spark, tmp_path
):
    """`retired-ledger`'s partition holds only its aborted commit and a tombstone of its key:
    nothing the check judges, said, never passed. The configured count is 4 and the export holds
    `__consumer_offsets-6`: the topic has at least 7 partitions, over which Kafka places the
    groups (`retired-ledger` in 4, `payments-copier` in 5; over 4 they would be 1 and 2). Each
    group is declared twice and said once. `refund-copier`'s only record there does not decode:
    NO_COMMITS_OF_GROUP says so."""
    count = 7
    ledger, payments = (
        partition_for("retired-ledger", count),
        partition_for("payments-copier", count),
    )
    assert (ledger, payments) == (4, 5)
    assert (partition_for("retired-ledger", 4), partition_for("payments-copier", 4)) == (1, 2)
    root = tmp_path / "export"
    write_partition_dir(root, 1, "src", 0, data_batch(0, 3, timestamp=at(1)))
    key = offset_commit_key("retired-ledger", "src", 0)
    write_partition_dir(
        root, 1, CO, ledger,
        record_batch(0, [(key, offset_commit_value(3, 3, "", at(2)))], producer_id=7100,
                     producer_epoch=0, base_sequence=0, is_transactional=True, timestamp=at(2)),
        control_batch(1, producer_id=7100, producer_epoch=0, commit=False, timestamp=at(3)),
        record_batch(2, [(key, None)], timestamp=at(4)),
    )  # fmt: skip
    other = (offset_commit_key("ledger-sink", "src", 0), offset_commit_value(3, 1, "", at(2)))
    assert partition_for("ledger-sink", count) == count - 1
    write_partition_dir(root, 1, CO, count - 1, record_batch(0, [other], timestamp=at(2)))
    # `refund-copier`'s partition holds one commit whose value is cut short: quarantined.
    refund = partition_for("refund-copier", count)
    assert refund not in (ledger, payments, count - 1)
    cut = (offset_commit_key("refund-copier", "src", 0), offset_commit_value(3, 2, "", at(2))[:9])
    write_partition_dir(root, 1, CO, refund, record_batch(0, [cut], timestamp=at(2)))
    config = AuditConfig().with_overrides(
        processing={
            "one_to_one_groups": ["retired-ledger", "payments-copier", "refund-copier"] * 2,
            "offsets_topic_partitions": 4,
        }
    )
    run_audit(spark, AuditInputs(batches=(str(root),)), config, str(tmp_path / "warehouse"))
    found = findings(tmp_path / "warehouse")
    said = [
        (f["finding_type"], f["cause"], f["topic"], f["partition"], dict(f["evidence"])["group_id"])
        for f in found
    ]
    assert said == [
        ("UNVERIFIABLE", "GROUP_NOT_EXPORTED", CO, payments, "payments-copier"),
        ("UNVERIFIABLE", "NO_COMMITS_OF_GROUP", CO, refund, "refund-copier"),
        ("UNVERIFIABLE", "NO_COMMITS_OF_GROUP", CO, ledger, "retired-ledger"),
    ]
    details = {dict(f["evidence"])["group_id"]: f["detail"] for f in found}
    undecoded = "1 record(s) of the partition did not decode (quarantined, each with its reason)"
    assert undecoded in details["refund-copier"]
    assert "did not decode" not in details["retired-ledger"]


def test_a_skipped_commits_transaction_counts_for_what_the_group_processed(audited):
    """A transaction whose offset commit the coordinator skipped still committed its outputs:
    its range reaches what the group covered (`plain-race`'s third transaction read [6, 8)
    again, no gap [4, 6)), and is judged itself (`owned-twice`'s first owner read [0, 5) of
    it after the second)."""
    overlaps = {
        f["partition"]: f
        for f in findings(audited)
        if f["partition"] in (PLAIN_RACE_CO, OWNED_TWICE_CO)
    }
    raced = dict(overlaps[PLAIN_RACE_CO]["evidence"])
    assert (raced["range_start"], raced["covered_to"], raced["outcome"]) == ("6", "8", "APPLIED")
    owner = overlaps[OWNED_TWICE_CO]
    assert owner["detail"] == (
        "Transaction of owned-twice-tx (producer 6800, epoch 0) committed group owned-twice's "
        "offset of src10-0 at 6 (record 0): the coordinator skipped this commit, a later record "
        "of the key having been applied first (KAFKA-14505), and its transaction's outputs are "
        "committed all the same; it processed [0, 6), and offsets [0, 5) of it an earlier "
        "committed transaction of the group had processed (the group's transactions had reached "
        "offset 5)."
    )
    evidence = dict(owner["evidence"])
    assert (evidence["outcome"], evidence["input_records"], evidence["output_records"]) == (
        "SKIPPED", "6", "6"
    )  # fmt: skip
    registered = QueryBuilder().register("t", DeltaTable(str(audited / "consumer_offsets")))
    rows = registered.execute(
        "SELECT producer_id, outcome FROM t WHERE group_id = 'owned-twice' ORDER BY record_offset"
    ).read_all()
    assert pa.table(rows).to_pylist() == [
        {"producer_id": 6800, "outcome": "SKIPPED"}, {"producer_id": 6801, "outcome": "APPLIED"}
    ]  # fmt: skip


def test_a_compacted_input_starts_where_its_log_does_not_at_its_first_batch(audited):
    """`idle-cdc`'s offset 5 of src6 is below the first batch the cleaner left, not below the
    log start: no COMMIT_BELOW_LOG_START (test_transaction_outcomes has the ones that are)."""
    registered = QueryBuilder().register("t", DeltaTable(str(audited / "findings")))
    found = registered.execute(
        "SELECT evidence FROM t WHERE finding_type = 'COMMIT_BELOW_LOG_START'"
    ).read_all()
    groups = [dict(r["evidence"])["group_id"] for r in pa.table(found).to_pylist()]
    assert groups and "idle-cdc" not in groups


def test_the_partition_counts_that_the_check_relies_on(audited):
    """`src`'s aborted records and marker are in the transactions table and the statistics."""
    registered = (
        QueryBuilder()
        .register("s", DeltaTable(str(audited / "partition_summary")))
        .register("t", DeltaTable(str(audited / "transactions")))
    )
    summary = registered.execute(
        "SELECT records, markers, first_offset, last_offset FROM s WHERE topic = 'src'"
    ).read_all()
    assert pa.table(summary).to_pylist() == [
        {"records": 24, "markers": 1, "first_offset": 0, "last_offset": 23}
    ]
    aborted = registered.execute(
        "SELECT first_offset, marker_offset, records FROM t WHERE topic = 'src'"
    ).read_all()
    assert pa.table(aborted).to_pylist() == [{"first_offset": 4, "marker_offset": 6, "records": 2}]


def test_a_transaction_after_a_stale_owners_rewind_processed_its_input_again(spark, tmp_path):
    """Two owners of `rwin` for group `rewound`: A reads [0, 10) and commits 10; B, stale,
    commits 5 in a transaction the coordinator applies (its record is the newer), rewinding the
    group; B then reads [5, 12). Its second transaction processed [5, 10) again. The rewinding
    one overlapped nothing of its own (it moved the offset down), so the one after it is no
    continuation of a reported run."""
    export = Export()
    plain(export, "rwin", 20)
    first = Processor(export, "rewound", 8100, "rwin", "rwout")
    stale = Processor(export, "rewound", 8200, "rwin", "rwout", "rewound-b-tx")
    first.transaction(10, outputs=10, commit_to=10)
    stale.transaction(20, outputs=5, commit_to=5)
    stale.transaction(30, outputs=7, commit_to=12)
    export.write(tmp_path / "export")
    exported = read_kafka_export(spark, [str(tmp_path / "export")])
    records = staged_records(exported.coordinator_records)
    history = replay_offsets(offset_events(records))
    row = {f.name: None for f in PARTITION_STATS_N.fields}
    row.update(topic="rwin", partition=0, first_offset=0, last_offset=19, max_timestamp=at(1))
    partitions = spark.createDataFrame([row], PARTITION_STATS_N)
    transactions = spark.createDataFrame([], TRANSACTION_COLUMNS)
    config = AuditConfig().with_overrides(processing={"one_to_one_groups": ["rewound"]})
    found = send_offsets_to_transaction(records, history, transactions, partitions, config, "r")
    ranges = [
        (f["cause"], *[dict(f["evidence"])[key] for key in ("range_start", "committed_offset")])
        for f in found.collect()
        if f["finding_type"] in ("DUPLICATE_PROCESSING", "SKIPPED_INPUT")
    ]
    assert ranges == [("OVERLAPPING_RANGE", "5", "12")]


def test_no_group_declared_means_no_check():
    assert send_offsets_to_transaction(None, None, None, None, AuditConfig(), "r") is None
