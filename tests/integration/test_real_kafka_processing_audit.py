"""The processing audit of logs real brokers wrote: consume-transform-produce, faults made for real.

One run per release audits that release's processing export (`tests/kafka/processing.py`): the 4.x
one from its segments, the 3.9 one from its `kafka-dump-log.sh --deep-iteration` text printed with
the decoder flags, so both coordinator readers feed the replay and both show the markers' types;
the copiers' groups are declared one-to-one. Kafka's own copier, bounced with SIGTERM and SIGKILL
and aborting at random, must give no processing finding at all, and its group's last committed
offsets must be the ones Kafka's admin API listed; an operator's reset of the emptied group is an
OFFSET_REWIND of cause ADMIN_RESET (INFO); a consumer committing plainly in a group a copier
commits transactionally is a MIXED_OFFSET_COMMITS warning; a read_uncommitted consumer committing
past a transaction that then commits is READ_PAST_LSO, past one that then aborts ABORTED_READ; two
processors of one input for one group, both pending before either commits, are
CONCURRENT_OFFSET_OWNERS, and the second one's outputs DUPLICATE_PROCESSING (where the second
one's transaction commits first, the first one's offset commit is skipped, and its range
DUPLICATE_PROCESSING); a commit far beyond the input's end, which the input then passed, is
COMMIT_BEYOND_LOG; a group's offset below the log start that DeleteRecords and retention left is
COMMIT_BELOW_LOG_START; an operator's reset of an emptied group forward past input no copier
read is SKIPPED_INPUT, one back to the earliest offset with the input copied again
DUPLICATE_PROCESSING; a member's commit lower than the group's offset is an OFFSET_REWIND of
cause LATE_COMMIT, a transaction's TRANSACTIONAL; a plain commit past the input of an open
transaction that then aborts is MIXED_OFFSET_COMMITS of cause ABORTED_RANGE_COMMITTED; a commit
below the offset a deleted group had is EXPIRED_RESET; a copier
of an input the cleaner compacted gets UNVERIFIABLE for exactly its transactions that read where
the cleaner had been, and passes the rest. No other processing finding above INFO is raised on any
of it. A copy of the 4.x export whose copier's abort
marker in `__consumer_offsets` says COMMIT is a TORN_TRANSACTION there, with the input of that
transaction SKIPPED_INPUT and its retry DUPLICATE_PROCESSING; in that copy the transaction log also
gives `aborted_read`'s producer a higher epoch while its first transaction is open, and
`transactional_rewind`'s id another producer while its last one is, and those transactions' COMMIT
markers are ZOMBIE_COMMITs; a copy whose copier's last marker there is cut out leaves its commit a
HANGING_OFFSET_TRANSACTION, its transaction torn there (MARKER_MISSING) and the partition
UNVERIFIABLE, and in that copy an output marker
rewritten from COMMIT to ABORT and one cut out are TORN_TRANSACTIONs. In that copy too, audited
past the timeout, a commit under a producer id no transactional id owns (sent while the brokers'
partition verification was off) is a HANGING_OFFSET_TRANSACTION of cause NO_TRANSACTIONAL_ID,
and a KIP-939 two-phase-commit participant's transaction left open is HANGING_TRANSACTION
lowered to INFO (TWO_PHASE_COMMIT), its offset commit not hanging.
"""

from __future__ import annotations

import shutil
import struct
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

from eos_audit.audit.pipeline import AuditInputs, run_audit
from eos_audit.config import AuditConfig
from eos_audit.findings import RAISED_BY_PROCESSING
from eos_audit.sources.kafka.coordinator_keys import partition_for
from tests.jars import KAFKA_3, KAFKA_4
from tests.kafka import tamper
from tests.kafka.cluster import BROKER_SETTINGS
from tests.kafka.processing import ONE_TO_ONE, cleaned_to
from tests.run_once import once_per_run

pytestmark = [pytest.mark.slow, pytest.mark.kafka]

RELEASE_4 = f"kafka-{KAFKA_4}"
RELEASE_3 = f"kafka-{KAFKA_3}"
# Which form of each release's export the run reads.
FORM = {RELEASE_4: "segments", RELEASE_3: "dump_deep"}
ABOVE_INFO = ("WARNING", "ERROR", "CRITICAL")
# The copiers' groups write one output record per input record: declared one-to-one. The
# transaction log's partition count is the cluster's, and the compacted input is declared, as
# its users would set them.
ONE_TO_ONE_CONFIG = AuditConfig().with_overrides(
    topics={"compacted": ["compacted_input-in-*"]},
    processing={
        "one_to_one_groups": [f"{scenario}-group-*" for scenario in ONE_TO_ONE],
        "transaction_state_partitions": int(
            BROKER_SETTINGS["transaction.state.log.num.partitions"]
        ),
    }
)


def _sql(warehouse: str, table: str, query: str) -> list[dict]:
    registered = QueryBuilder().register("t", DeltaTable(f"{warehouse}/{table}"))
    return pa.table(registered.execute(query).read_all()).to_pylist()


@pytest.fixture(scope="module")
def audited(spark, real_kafka, tmp_path_factory) -> dict[str, tuple[str, str, str | None]]:
    """Each release's processing export audited: (warehouse, status, error) by release."""

    def build(folder) -> dict[str, tuple[str, str, str | None]]:
        runs = {}
        for release, form in FORM.items():
            export = real_kafka.processing[release]
            warehouse = str(folder / release)
            inputs = AuditInputs(batches=(getattr(export, form),))
            result = run_audit(spark, inputs, ONE_TO_ONE_CONFIG, warehouse)
            runs[release] = (warehouse, result.status, result.error)
        return runs

    return once_per_run(tmp_path_factory, "real-kafka-processing-audit", build)


def _processing_findings(warehouse: str, group: str) -> list[tuple]:
    types = ", ".join(f"'{t}'" for t in RAISED_BY_PROCESSING)
    rows = _sql(
        warehouse, "findings",
        f"SELECT finding_type, cause, severity, evidence FROM t WHERE finding_type IN ({types})",
    )  # fmt: skip
    return sorted(
        (r["finding_type"], r["cause"], r["severity"])
        for r in rows
        if dict(r["evidence"]).get("group_id") == group
    )


def _applied(warehouse: str, group: str) -> list[dict]:
    """The transactional offset commits of `group` Kafka applied, in the order it applied them."""
    return _sql(
        warehouse, "consumer_offsets",
        f"SELECT committed_offset FROM t WHERE group_id = '{group}' AND outcome = 'APPLIED' "
        "AND kind = 'TRANSACTIONAL' ORDER BY record_offset",
    )  # fmt: skip


def _evidence(warehouse: str, group: str, finding_type: str) -> list[dict]:
    """The evidence of each finding `finding_type` of `group`."""
    rows = _sql(warehouse, "findings",
                f"SELECT evidence FROM t WHERE finding_type = '{finding_type}'")  # fmt: skip
    evidence = [dict(r["evidence"]) for r in rows]
    return [e for e in evidence if e.get("group_id") == group]


@pytest.mark.parametrize("release", [RELEASE_4, RELEASE_3])
def test_the_processing_audit_of_real_logs(audited, real_kafka, release):
    warehouse, status, error = audited[release]
    facts = real_kafka.processing[release].facts
    assert status == "SUCCEEDED", error
    # The bounced copier: aborts, a clean stop, a kill inside a transaction, restarts.
    copier = facts["copier"]
    # No finding at all, INFO included: the one-to-one checks could count every transaction.
    assert _processing_findings(warehouse, copier.group) == []
    last = _sql(
        warehouse, "consumer_offsets",
        f"SELECT topic, partition, committed_offset, kind, record_offset FROM t "
        f"WHERE group_id = '{copier.group}' AND outcome = 'APPLIED' ORDER BY record_offset",
    )  # fmt: skip
    committed = {f"{r['topic']}:{r['partition']}": r["committed_offset"] for r in last}
    assert committed == copier.committed
    assert {r["kind"] for r in last} == {"TRANSACTIONAL"}
    outcomes = _sql(
        warehouse, "consumer_offsets",
        f"SELECT outcome, count(*) AS n FROM t WHERE group_id = '{copier.group}' GROUP BY outcome",
    )  # fmt: skip
    assert {r["outcome"] for r in outcomes} >= {"APPLIED", "ABORTED"}
    # The operator's reset of the emptied group.
    reset = facts["admin_reset"]
    # One rewind per input partition the reset moved back to 0.
    assert _processing_findings(warehouse, reset.group) == [
        ("OFFSET_REWIND", "ADMIN_RESET", "INFO")
    ] * reset.partitions
    # The same reset of an emptied KIP-848 consumer group (4.x): its member's tombstone, not a
    # GroupMetadata record, says it left.
    emptied = facts.get("consumer_protocol_reset")
    assert (emptied is not None) == (release == RELEASE_4)
    if emptied is not None:
        assert _processing_findings(warehouse, emptied.group) == [
            ("OFFSET_REWIND", "ADMIN_RESET", "INFO")
        ] * emptied.partitions
    # A plain consumer committing in the copier's group.
    mixed = facts["auto_commit"]
    assert _processing_findings(warehouse, mixed.group) == [
        ("MIXED_OFFSET_COMMITS", "PLAIN_AND_TRANSACTIONAL", "WARNING")
    ]
    # A downstream consumer at read_uncommitted: past a transaction that committed, and past one
    # that aborted.
    reader = facts["aborted_read"]
    assert _processing_findings(warehouse, reader.group) == [
        ("ABORTED_READ", None, "CRITICAL"), ("READ_PAST_LSO", None, "WARNING")
    ]
    # Two processors of one input for one group, at once: both transactions' offset commits of
    # the one key were pending together, and both committed; the second one's outputs copied
    # input the first one's commit had already covered.
    owners = facts["two_owners"]
    assert _processing_findings(warehouse, owners.group) == [
        ("CONCURRENT_OFFSET_OWNERS", None, "CRITICAL"),
        ("DUPLICATE_PROCESSING", "MORE_OUTPUT_THAN_INPUT", "CRITICAL"),
    ]
    # The same, the second owner's transaction committing first: the first one's commit, the
    # older record of the key, is skipped at its marker, and its transaction's outputs are
    # committed all the same: it copied again the input the second one's had.
    skipped = facts["skipped_owner"]
    assert _processing_findings(warehouse, skipped.group) == [
        ("CONCURRENT_OFFSET_OWNERS", None, "CRITICAL"),
        ("DUPLICATE_PROCESSING", "OVERLAPPING_RANGE", "CRITICAL"),
    ]
    (overlap,) = _evidence(warehouse, skipped.group, "DUPLICATE_PROCESSING")
    (committed,) = skipped.committed.values()
    assert (overlap["outcome"], overlap["range_start"], overlap["covered_to"]) == (
        "SKIPPED", "0", str(committed)
    )  # fmt: skip
    assert _sql(
        warehouse, "consumer_offsets",
        f"SELECT outcome FROM t WHERE group_id = '{skipped.group}' ORDER BY record_offset",
    ) == [{"outcome": "SKIPPED"}, {"outcome": "APPLIED"}]  # fmt: skip
    # A consumer's commit far beyond its input's end, which later input passed: the group
    # claims the offsets those records took.
    beyond = facts["commit_beyond_log"]
    assert _processing_findings(warehouse, beyond.group) == [
        ("COMMIT_BEYOND_LOG", None, "CRITICAL")
    ]
    (evidence,) = _evidence(warehouse, beyond.group, "COMMIT_BEYOND_LOG")
    key = f"{beyond.input_topic}:0"
    assert (int(evidence["committed_offset"]), int(evidence["log_end_offset"])) == (
        beyond.committed[key], beyond.log_end[key]
    )  # fmt: skip
    # A group's offset below the log start that DeleteRecords set and retention made the
    # export's first offset.
    below = facts["commit_below_log_start"]
    assert _processing_findings(warehouse, below.group) == [
        ("COMMIT_BELOW_LOG_START", None, "WARNING")
    ]
    (evidence,) = _evidence(warehouse, below.group, "COMMIT_BELOW_LOG_START")
    (deleted,) = [d for _, what, d in below.events if what == "records deleted"]
    key = f"{below.input_topic}:0"
    assert (int(evidence["committed_offset"]), int(evidence["log_start_offset"])) == (
        below.committed[key], deleted["low_watermark"]
    )  # fmt: skip
    # An operator's reset of the emptied group forward, past input no copier read: the
    # copier's next transaction left the range between unprocessed. The offsets the group had
    # show that range too.
    forward = facts["forward_reset"]
    assert _processing_findings(warehouse, forward.group) == [
        ("SKIPPED_INPUT", "RANGE_GAP", "CRITICAL")
    ]
    (reset,) = [d for _, what, d in forward.events if what == "offsets reset"]
    ((key, (first, end)),) = reset["skipped"].items()
    (gap,) = _evidence(warehouse, forward.group, "SKIPPED_INPUT")
    assert (int(gap["covered_to"]), int(gap["range_start"])) == (first, end)
    applied = _sql(
        warehouse, "consumer_offsets",
        f"SELECT topic, partition, committed_offset, kind FROM t WHERE group_id = "
        f"'{forward.group}' AND outcome = 'APPLIED' ORDER BY record_offset",
    )  # fmt: skip
    assert {f"{r['topic']}:{r['partition']}" for r in applied} == {key}
    kinds = [r["kind"] for r in applied]
    at = kinds.index("PLAIN")
    assert kinds.count("PLAIN") == 1 and "TRANSACTIONAL" in kinds[:at] + kinds[at + 1 :]
    assert [r["committed_offset"] for r in applied[at - 1 : at + 1]] == [first, end]
    assert applied[-1]["committed_offset"] == forward.committed[key]
    # An operator's reset of the emptied group to the earliest offset, and the whole input
    # copied again: one rewind, and its first transaction reported as reprocessing what the
    # group's transactions had covered.
    again = facts["rewind_reprocess"]
    assert _processing_findings(warehouse, again.group) == [
        ("DUPLICATE_PROCESSING", "OVERLAPPING_RANGE", "CRITICAL"),
        ("OFFSET_REWIND", "ADMIN_RESET", "INFO"),
    ]
    (reset,) = [d for _, what, d in again.events if what == "offsets reset"]
    ((key, (first, end)),) = reset["reprocessed"].items()
    (overlap,) = _evidence(warehouse, again.group, "DUPLICATE_PROCESSING")
    assert (int(overlap["range_start"]), int(overlap["covered_to"])) == (first, end)
    # A member's commit below the group's offset; a transaction committing a lower offset; a
    # plain commit past the input of an open transaction that then aborted; a commit below the
    # offset the deleted group had.
    # The last: at the plain commit the mixing (WARNING), at the abort the input lost.
    for scenario, expected in (
        ("late_commit", [("OFFSET_REWIND", "LATE_COMMIT", "ERROR")]),
        ("transactional_rewind", [("OFFSET_REWIND", "TRANSACTIONAL", "CRITICAL")]),
        ("aborted_range", [("MIXED_OFFSET_COMMITS", "ABORTED_RANGE_COMMITTED", "CRITICAL"),
                           ("MIXED_OFFSET_COMMITS", "PLAIN_AND_TRANSACTIONAL", "WARNING")]),
        ("expired_reset", [("OFFSET_REWIND", "EXPIRED_RESET", "WARNING")]),
    ):  # fmt: skip
        play = facts[scenario]
        assert _processing_findings(warehouse, play.group) == expected, scenario
    # A compacted input copied from its start after the cleaner ran, then the input written
    # since: the transactions whose ranges reach the offsets the cleaner left in doubt cannot be
    # counted, and say so; every later one is judged, and passes.
    compacted = facts["compacted_input"]
    segments = Path(real_kafka.processing[release].segments)
    (input_copy,) = segments.glob(f"*/{compacted.input_topic}-0")
    cleaned = cleaned_to(input_copy.parent, input_copy.name)
    starts = [0, *[r["committed_offset"] for r in _applied(warehouse, compacted.group)]][:-1]
    undecided = sum(start < cleaned for start in starts)
    assert 0 < undecided < len(starts), (cleaned, starts)
    findings = _processing_findings(warehouse, compacted.group)
    assert {f[2] for f in findings} == {"INFO"} and {f[0] for f in findings} == {"UNVERIFIABLE"}
    unverifiable = _evidence(warehouse, compacted.group, "UNVERIFIABLE")
    assert sum(int(e["transactions"]) for e in unverifiable) == undecided, unverifiable
    # A commit in a transaction of a producer id no transactional id owns: Kafka listed no
    # offset for the group, and the replay leaves the commit pending, the only record of its
    # producer id. It is not hanging yet: the export ends within the maximum transaction timeout
    # of it (the `lost` copy is audited later, with a shorter one).
    unowned = facts["unowned_commit"]
    (producer,) = [d for _, what, d in unowned.events if what == "producer id"]
    assert unowned.committed == {}
    assert _processing_findings(warehouse, unowned.group) == []
    pending = _sql(
        warehouse, "consumer_offsets",
        f"SELECT committed_offset, kind, outcome, producer_id FROM t "
        f"WHERE group_id = '{unowned.group}'",
    )  # fmt: skip
    assert pending == [{"committed_offset": unowned.input_records // 2, "kind": "TRANSACTIONAL",
                        "outcome": "PENDING", "producer_id": producer["producer_id"]}]  # fmt: skip
    assert _sql(
        warehouse, "transaction_log",
        f"SELECT * FROM t WHERE producer_id = {producer['producer_id']}",
    ) == []  # fmt: skip
    # A two-phase-commit participant's transaction left open (4.x): its offset commit is
    # pending, and not hanging, since its transaction lists the partition (and its age is
    # measured at the export, within the timeout).
    prepared = facts.get("two_phase_commit")
    assert (prepared is not None) == (release == RELEASE_4)
    if prepared is not None:
        (left,) = [d for _, what, d in prepared.events if what == "prepared and left"]
        assert prepared.committed == {}
        assert _processing_findings(warehouse, prepared.group) == []
        assert _sql(
            warehouse, "consumer_offsets",
            f"SELECT committed_offset, outcome, producer_id FROM t "
            f"WHERE group_id = '{prepared.group}'",
        ) == [{"committed_offset": left["offset"], "outcome": "PENDING",
               "producer_id": left["producer_id"]}]  # fmt: skip
    # Nothing else: every processing finding above INFO is one of the faults above.
    faulty = ("auto_commit", "aborted_read", "two_owners", "skipped_owner", "commit_beyond_log",
              "commit_below_log_start", "forward_reset", "rewind_reprocess", "late_commit",
              "transactional_rewind", "aborted_range", "expired_reset")  # fmt: skip
    faults = {p.group for p in facts.values() if p.scenario in faulty}
    types = ", ".join(f"'{t}'" for t in RAISED_BY_PROCESSING)
    others = _sql(
        warehouse, "findings",
        f"SELECT finding_type, cause, topic, partition, detail, evidence FROM t WHERE "
        f"finding_type IN ({types}) AND severity IN ('WARNING', 'ERROR', 'CRITICAL')",
    )  # fmt: skip
    assert [f for f in others if dict(f["evidence"]).get("group_id") not in faults] == []
    # Every __transaction_state record is a row, the copier's id among them.
    ids = _sql(warehouse, "transaction_log", "SELECT DISTINCT transactional_id FROM t")
    assert set(copier.transactional_ids) <= {r["transactional_id"] for r in ids}


def _copier_copy(real_kafka, root: Path, *topics: str) -> tuple[int, Path]:
    """The 4.x copier's input and output partitions, its group's `__consumer_offsets` partition,
    `__transaction_state` and the partitions of `topics`, copied under `root/export`: (that
    partition, the broker folder)."""
    export = real_kafka.processing[RELEASE_4]
    copier = export.facts["copier"]
    partition = partition_for(copier.group, int(BROKER_SETTINGS["offsets.topic.num.partitions"]))
    replica = min(p for p in Path(export.segments).iterdir() if p.is_dir())
    wanted = (f"__consumer_offsets-{partition}", "__transaction_state-", copier.input_topic,
              copier.output_topic, *(f"{topic}-" for topic in topics))  # fmt: skip
    copy = root / "export" / replica.name
    for folder in replica.iterdir():
        if folder.is_dir() and folder.name.startswith(wanted):
            shutil.copytree(folder, copy / folder.name)
    return partition, copy


def _first_marker_after_data(log: Path, control_type: str) -> tuple[int, dict]:
    """(position, view) of the first `control_type` marker of `log` that ends a producer's data
    batch just before it."""
    batches = tamper.batches(log)
    return next(
        (position, view)
        for (_, _, before), (position, _, view) in zip(batches, batches[1:], strict=False)
        if view["control_type"] == control_type and not before["is_control"]
        and before["is_transactional"] and before["producer_id"] == view["producer_id"]
    )  # fmt: skip


def _forge_ongoing(copy: Path, transactional_id: str, output_topic: str, last: bool) -> dict:
    """Change `transactional_id`'s first (or last) Ongoing record in the copied
    `__transaction_state` against the first (or last) COMMIT marker its producer wrote in
    `output_topic`-0: the first gets an epoch above the marker's (the coordinator fenced the
    producer while that transaction was open), the last another producer id (the coordinator
    moved the id to a new producer). What was changed, by name."""
    (output,) = sorted((copy / f"{output_topic}-0").glob("*.log"))
    commits = [v for _, _, v in tamper.batches(output) if v["control_type"] == "COMMIT"]
    marker = commits[-1] if last else commits[0]
    ongoing = []
    for log in sorted(copy.glob("__transaction_state-*/*.log")):
        for batch, value, key, record in tamper.record_values(log):
            # Key: version int16, transactional id (int16 length); value: version int16,
            # producer id int64, epoch int16, timeout int32, status int8 (1 Ongoing).
            length = struct.unpack_from(">h", key, 2)[0]
            producer_id, _, _, status = struct.unpack_from(">qhib", record, 2)
            if key[4 : 4 + length].decode() == transactional_id and status == 1:
                assert producer_id == marker["producer_id"]
                ongoing.append((log, batch, value))
    log, batch, value = ongoing[-1] if last else ongoing[0]
    changed = {"producer_id": marker["producer_id"] + 1000} if last else {
        "epoch": marker["producer_epoch"] + 1
    }  # fmt: skip
    tamper.rewrite_transaction_state(log, batch, value, **changed)
    return {
        "id": transactional_id, "topic": output_topic, "marker": marker["base_offset"],
        "epoch": marker["producer_epoch"], "cause": "PRODUCER_ID_REPLACED" if last
        else "EPOCH_FENCED", "current": changed,
        "log_partition": int(log.parent.name.rsplit("-", 1)[1]),
        "log_offset": next(v["base_offset"] for p, _, v in tamper.batches(log) if p == batch),
    }  # fmt: skip


@pytest.fixture(scope="module")
def forged(spark, real_kafka, tmp_path_factory) -> tuple[str, int, int, list[dict]]:
    """The 4.x copier's partitions and the transaction log, copied, with three lies, audited:
    (warehouse, the copier group's partition, the rewritten marker's offset, the fencings).

    The first ABORT marker of a copier's offset commit in `__consumer_offsets` says COMMIT (its
    CRC computed again). The output partitions of `aborted_read` and `transactional_rewind` are
    copied too: the first Ongoing record of `aborted_read`'s producer has an epoch above the one
    its first COMMIT marker has, the last one of `transactional_rewind`'s another producer id.
    Both transactions were held open 2.5 s, beyond the audit's clock skew. Built once for the
    suite's run (the module's tests may run on both workers)."""

    def build(root: Path) -> tuple[str, int, int, list[dict]]:
        facts = real_kafka.processing[RELEASE_4].facts
        reader, rewinder = facts["aborted_read"], facts["transactional_rewind"]
        outputs = (reader.output_topic, rewinder.output_topic)
        partition, copy = _copier_copy(real_kafka, root, *outputs)
        (log,) = sorted((copy / f"__consumer_offsets-{partition}").glob("*.log"))
        position, view = _first_marker_after_data(log, "ABORT")
        tamper.rewrite_marker(log, position, "COMMIT")
        fenced = [
            _forge_ongoing(copy, play.transactional_ids[0], play.output_topic, last)
            for play, last in ((reader, False), (rewinder, True))
        ]
        warehouse = str(root / "warehouse")
        inputs = AuditInputs(batches=(str(root / "export"),))
        run_audit(spark, inputs, ONE_TO_ONE_CONFIG, warehouse)
        return warehouse, partition, view["base_offset"], fenced

    return once_per_run(tmp_path_factory, "real-kafka-forged", build)


def test_an_offset_commits_abort_marker_rewritten_to_commit_is_a_torn_transaction(forged):
    warehouse, partition, at, _ = forged
    found = _sql(
        warehouse, "findings",
        "SELECT cause, severity, topic, partition, base_offset, detail FROM t "
        "WHERE finding_type = 'TORN_TRANSACTION'",
    )  # fmt: skip
    assert [
        (f["cause"], f["severity"], f["topic"], f["partition"], f["base_offset"]) for f in found
    ] == [("COMMIT_WHERE_ABORT", "CRITICAL", "__consumer_offsets", partition, at)]
    assert found[0]["detail"].endswith(
        f"has a COMMIT marker at offset {at}: offsets committed for outputs that aborted: that "
        "input is lost."
    )


def test_the_rewritten_transaction_skipped_its_input_and_its_retry_copied_it(forged, real_kafka):
    """The aborted transaction's offsets now commit with no output: its input is skipped; the
    copier retried that input after the abort, in a transaction whose offsets started where the
    forged commit left them."""
    warehouse, _, at, _ = forged
    group = real_kafka.processing[RELEASE_4].facts["copier"].group
    found = _sql(
        warehouse, "findings",
        "SELECT finding_type, cause, evidence FROM t "
        "WHERE finding_type IN ('SKIPPED_INPUT', 'DUPLICATE_PROCESSING')",
    )  # fmt: skip
    # The copy holds other scenarios' groups too (`rewind_reprocess`'s overlap is judged from
    # its commits alone, though the copy lacks its input): the copier's group's are these two.
    found = [f for f in found if dict(f["evidence"])["group_id"] == group]
    by_type = {f["finding_type"]: (f["cause"], dict(f["evidence"])) for f in found}
    assert len(found) == 2 and sorted(by_type) == ["DUPLICATE_PROCESSING", "SKIPPED_INPUT"]
    cause, skipped = by_type["SKIPPED_INPUT"]
    assert (cause, skipped["group_id"], skipped["marker_offset"]) == (
        "LESS_OUTPUT_THAN_INPUT", group, str(at)
    )  # fmt: skip
    assert skipped["output_records"] == "0" and int(skipped["input_records"]) > 0
    cause, retried = by_type["DUPLICATE_PROCESSING"]
    assert (cause, retried["group_id"], retried["range_start"]) == (
        "MORE_OUTPUT_THAN_INPUT", group, skipped["range_end"]
    )  # fmt: skip
    assert retried["output_records"] == skipped["input_records"]


def test_commits_after_the_transaction_log_fenced_or_replaced_the_producer_are_zombies(forged):
    """The COMMIT markers of the transactions whose Ongoing record now gives the producer a
    higher epoch, or gives the id another producer: a fenced producer's outputs became visible.
    Each marker is judged against the log's record before it (less the clock skew): the forged
    one, two seconds older. The rewinder's marker in `__consumer_offsets`, where the copy holds
    its group's partition, is one too."""
    warehouse, _, _, fenced = forged
    found = _sql(
        warehouse, "findings",
        "SELECT cause, severity, topic, partition, base_offset, producer_epoch, evidence FROM t "
        "WHERE finding_type = 'ZOMBIE_COMMIT'",
    )  # fmt: skip
    assert {dict(f["evidence"])["transactional_id"] for f in found} == {f["id"] for f in fenced}
    for forgery in fenced:
        (zombie,) = [f for f in found if f["topic"] == forgery["topic"]]
        assert (zombie["cause"], zombie["severity"], zombie["partition"], zombie["base_offset"],
                zombie["producer_epoch"]) == (
            forgery["cause"], "CRITICAL", 0, forgery["marker"], forgery["epoch"]
        )  # fmt: skip
        evidence = dict(zombie["evidence"])
        ((field, value),) = forgery["current"].items()
        current = f"current_{'producer_epoch' if field == 'epoch' else field}"
        assert {key: evidence[key] for key in (
            "transactional_id", current, "current_state", "transaction_log_partition",
            "transaction_log_offset",
        )} == {
            "transactional_id": forgery["id"], current: str(value),
            "current_state": "Ongoing", "transaction_log_partition": str(forgery["log_partition"]),
            "transaction_log_offset": str(forgery["log_offset"]),
        }  # fmt: skip
    forged_outputs = {forgery["topic"] for forgery in fenced}
    others = [f for f in found if f["topic"] not in forged_outputs]
    assert {(f["topic"], f["cause"]) for f in others} <= {
        ("__consumer_offsets", "PRODUCER_ID_REPLACED")
    }


@pytest.fixture(scope="module")
def lost(spark, real_kafka, tmp_path_factory) -> tuple[str, dict]:
    """The 4.x copier's copy (as `forged`'s) with three markers changed, as a cleaner bug that
    drops markers or a bad copy would, audited at the time of the test with a 1 s maximum
    transaction timeout and no grace: (warehouse, what was changed). `two_phase_commit`'s output
    partition is copied too, unchanged.

    - the copier producer's last marker in `__consumer_offsets` is cut out;
    - the copier's first COMMIT marker in its output partition says ABORT;
    - `aborted_read`'s output partition is copied too, without the COMMIT marker of its first
      transaction (held open 2.5 s, its data older than its prepare by more than the skew);
      the second transaction's ABORT marker comes after it.

    Built once for the suite's run (the module's tests may run on both workers).
    """

    def build(root: Path) -> tuple[str, dict]:
        facts = real_kafka.processing[RELEASE_4].facts
        reader, prepared = facts["aborted_read"], facts["two_phase_commit"]
        outputs = (reader.output_topic, prepared.output_topic)
        partition, copy = _copier_copy(real_kafka, root, *outputs)
        copier = facts["copier"]
        (log,) = sorted((copy / f"__consumer_offsets-{partition}").glob("*.log"))
        views = tamper.batches(log)
        pid = next(v["producer_id"] for _, _, v in views if v["is_transactional"]
                   and not v["is_control"] and v["producer_id"] >= 0)  # fmt: skip
        cut, _, view = [b for b in views if b[2]["is_control"] and b[2]["producer_id"] == pid][-1]
        tamper.remove_batch(log, cut)
        (output,) = sorted((copy / f"{copier.output_topic}-0").glob("*.log"))
        position, rewritten = _first_marker_after_data(output, "COMMIT")
        tamper.rewrite_marker(output, position, "ABORT")
        (read,) = sorted((copy / f"{reader.output_topic}-0").glob("*.log"))
        position, dropped = _first_marker_after_data(read, "COMMIT")
        tamper.remove_batch(read, position)
        warehouse = str(root / "warehouse")
        config = ONE_TO_ONE_CONFIG.with_overrides(
            transactions={"max_timeout_ms": 1000, "grace_ms": 0}
        )
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        inputs = AuditInputs(batches=(str(root / "export"),), export_time=now)
        run_audit(spark, inputs, config, warehouse)
        return warehouse, {
            "partition": partition, "cut": view["base_offset"], "group": copier.group,
            "output": (copier.output_topic, rewritten["base_offset"]),
            "read": (reader.output_topic, dropped["base_offset"]),
        }  # fmt: skip

    return once_per_run(tmp_path_factory, "real-kafka-lost", build)


def test_a_commit_no_transactional_id_owns_hangs_for_want_of_one(lost, real_kafka):
    """`unowned_commit`'s offsets, committed with an idempotent producer's id, are pending in
    the same `__consumer_offsets` partition as the copier's group, and the copy holds every
    partition of the transaction log, none of whose records has that producer id: no
    coordinator will ever end that transaction. Audited past the (1 s) maximum transaction
    timeout, it is find-hanging's other case."""
    warehouse, changed = lost
    unowned = real_kafka.processing[RELEASE_4].facts["unowned_commit"]
    partitions = int(BROKER_SETTINGS["offsets.topic.num.partitions"])
    # The copy holds the copier group's partition only: the two groups must share it.
    assert partition_for(unowned.group, partitions) == changed["partition"]
    (producer,) = [d for _, what, d in unowned.events if what == "producer id"]
    (hanging,) = _sql(
        warehouse, "findings",
        "SELECT finding_type, cause, severity, partition, producer_id, evidence FROM t "
        f"WHERE finding_type = 'HANGING_OFFSET_TRANSACTION' AND producer_id = "
        f"{producer['producer_id']}",
    )  # fmt: skip
    assert (hanging["cause"], hanging["severity"], hanging["partition"]) == (
        "NO_TRANSACTIONAL_ID", "ERROR", changed["partition"]
    )  # fmt: skip
    assert dict(hanging["evidence"])["group_id"] == unowned.group
    assert _processing_findings(warehouse, unowned.group) == [
        ("HANGING_OFFSET_TRANSACTION", "NO_TRANSACTIONAL_ID", "ERROR")
    ]


def test_a_two_phase_commit_transaction_open_past_the_timeout_is_not_hanging(lost, real_kafka):
    """`two_phase_commit`'s transaction, open past the 1 s timeout, is hanging by its age on its
    output partition and on the `__consumer_offsets` partition it added its offsets to (the
    copier's: the copy holds no other). Its producer id's latest transaction-log record has the
    timeout Kafka gives a two-phase-commit transaction, is open, and lists both partitions: each
    finding is lowered to INFO, cause TWO_PHASE_COMMIT. Its offset commit is not a hanging one:
    its transaction is the producer's current one."""
    warehouse, changed = lost
    prepared = real_kafka.processing[RELEASE_4].facts["two_phase_commit"]
    partitions = int(BROKER_SETTINGS["offsets.topic.num.partitions"])
    assert partition_for(prepared.group, partitions) == changed["partition"]
    (left,) = [d for _, what, d in prepared.events if what == "prepared and left"]
    found = _sql(
        warehouse, "findings",
        "SELECT finding_type, cause, severity, topic, partition FROM t "
        f"WHERE producer_id = {left['producer_id']}",
    )  # fmt: skip
    assert sorted((f["finding_type"], f["cause"], f["severity"], f["topic"]) for f in found) == [
        ("HANGING_TRANSACTION", "TWO_PHASE_COMMIT", "INFO", "__consumer_offsets"),
        ("HANGING_TRANSACTION", "TWO_PHASE_COMMIT", "INFO", prepared.output_topic),
    ]
    assert _processing_findings(warehouse, prepared.group) == []


def test_lost_and_rewritten_markers_are_torn_transactions_and_a_hanging_commit(lost):
    """The commit the cut `__consumer_offsets` marker decided stays pending, and the transaction
    log's current transaction of the copier's id no longer lists the partition: find-hanging's
    rule. Its transaction was completed, so the coordinator wrote that marker: the partition,
    whose data of it is still open (at an epoch below the bumped prepare's), is torn. The
    copier's output marker that says ABORT contradicts the PrepareCommit: its outputs
    are lost while its offsets committed. `aborted_read`'s output has no marker for a transaction
    the coordinator completed, though the partition goes on after it. The `__consumer_offsets`
    partition has an offset no record holds: the rewind and one-to-one checks cannot be decided
    on it. The other scenarios' outputs are not in the copy: their transactions' markers cannot
    be checked."""
    warehouse, changed = lost
    types = ", ".join(f"'{t}'" for t in RAISED_BY_PROCESSING)
    found = _sql(
        warehouse, "findings",
        f"SELECT finding_type, cause, severity, topic, partition, base_offset, evidence FROM t "
        f"WHERE finding_type IN ({types})",
    )  # fmt: skip
    # The copy holds the other groups of the partition too (late_commit's rewind among them).
    serious = sorted(
        ((f["finding_type"], f["cause"], f["severity"], f["topic"]), f) for f in found
        if f["severity"] in ABOVE_INFO
        and dict(f["evidence"]).get("group_id") in (None, changed["group"])
    )  # fmt: skip
    (output, rewritten), (read, _) = changed["output"], changed["read"]
    assert [what for what, _ in serious] == [
        ("HANGING_OFFSET_TRANSACTION", "NOT_IN_CURRENT_TRANSACTION", "ERROR", "__consumer_offsets"),
        ("TORN_TRANSACTION", "ABORT_WHERE_COMMIT", "CRITICAL", output),
        ("TORN_TRANSACTION", "MARKER_MISSING", "CRITICAL", "__consumer_offsets"),
        ("TORN_TRANSACTION", "MARKER_MISSING", "CRITICAL", read),
    ]
    hanging, torn, missing = serious[0][1], serious[1][1], serious[2][1]
    assert (hanging["partition"], dict(hanging["evidence"])["group_id"]) == (
        changed["partition"], changed["group"]
    )  # fmt: skip
    assert (missing["partition"], missing["base_offset"]) == (changed["partition"], -1)
    assert hanging["base_offset"] < changed["cut"]
    assert (torn["partition"], torn["base_offset"]) == (0, rewritten)
    # The torn output names the copier's commit its transaction's offsets marker decided.
    assert (dict(torn["evidence"])["group_id"], dict(torn["evidence"])["offsets_partition"]) == (
        changed["group"], str(changed["partition"])
    )  # fmt: skip
    unverifiable = {
        (f["cause"], dict(f["evidence"])["check"], f["topic"] == "__consumer_offsets")
        for f in found
        if f["finding_type"] == "UNVERIFIABLE"
    }
    assert unverifiable == {
        ("OFFSETS_NOT_WHOLE", "OFFSET_REWIND", True),
        ("OFFSETS_NOT_WHOLE", "ONE_TO_ONE", False),
        ("PARTITION_NOT_EXPORTED", "TORN_TRANSACTION", True),
        ("PARTITION_NOT_EXPORTED", "TORN_TRANSACTION", False),
    }
