"""Logs that real Apache Kafka brokers wrote, in known situations, audited in all three forms.

The scenarios (`tests/kafka/scenarios.py`) run on a Kafka 4.x cluster (transactions v2) and a 3.9
one (transactions v1), with Kafka's Java producer and librdkafka. Each export is audited from the
brokers' segment folders, from the `kafka-dump-log.sh` text that release prints for them (default
and `--deep-iteration`), and from Parquet of the batches as kafka-python decodes them: the verdicts
must be the same. A real broker's log without a fault gives no finding above INFO; the faults made
here (a broker crash, a zombie, tampering) give the findings Kafka's own rules give.

Each scenario's topic is its own and names its release, so the exports are audited together: one
audit per form of every export as the brokers left it (`as_exported`), and one per form of every
tampered copy (`tampered`); each test reads its own topic's findings.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from eos_audit.audit import replay_plan
from eos_audit.audit.output_records import findings_of
from eos_audit.audit.pipeline import AuditInputs, read_inputs, run_audit
from eos_audit.config import AuditConfig, TopicsConfig
from tests.cli_runs import (
    no_html_report,  # noqa: F401 (an autouse fixture)
    sql,
)
from tests.jars import KAFKA_3, KAFKA_4, SETS
from tests.kafka import tamper
from tests.kafka.scenarios import SCENARIOS_3, SCENARIOS_4, Export, new_export, write_dumps
from tests.run_once import once_per_run

pytestmark = [pytest.mark.slow, pytest.mark.kafka]

# What Kafka's Java producer raises once fenced: transactions v1 and v2 answer differently.
FENCING_ERRORS = ("ProducerFencedException", "InvalidProducerEpochException")
FORMS = ("segments", "dump", "dump_deep", "parquet")
ABOVE_INFO = ("WARNING", "ERROR", "CRITICAL")
# The compacted scenario's topic is declared as an operator would ([topics] compacted).
CONFIG = AuditConfig(topics=TopicsConfig(compacted=("compacted-*",)))
RELEASE_4 = f"kafka-{KAFKA_4}"
RELEASE_3 = f"kafka-{KAFKA_3}"
# The scenarios of each release whose logs a broker wrote without a fault (all but `failover`).
FAULTLESS = {
    RELEASE_4: {s.__name__ for s in SCENARIOS_4},
    RELEASE_3: {s.__name__ for s in SCENARIOS_3},
}


@dataclass
class Audited:
    """One audit's findings, each (type, severity, cause, partition, base offset, topic), and the
    batches it audited by topic."""

    findings: list[tuple]
    batches: dict[str, int]

    def of(self, topic: str) -> list[tuple]:
        """The findings of one topic."""
        return [f for f in self.findings if f[5] == topic]


def audit(spark, *paths: str) -> Audited:
    """The audit of `paths` (one form each) in one run."""
    read = read_inputs(spark, AuditInputs(batches=paths))
    records = replay_plan.audit(
        read.batches, CONFIG, "real-kafka", seeds_df=read.seeds,
        log_starts_df=read.log_starts, high_watermarks_df=read.high_watermarks,
        leader_epochs_df=read.leader_epochs,
    )  # fmt: skip
    found = sorted(
        (r.finding_type, r.severity, r.cause, r.partition, r.base_offset, r.topic)
        for r in findings_of(records).collect()
    )
    counted = read.batches.where("quarantine_reason IS NULL").groupBy("topic").count().collect()
    return Audited(found, {row["topic"]: row["count"] for row in counted})


def above_info(found: list[tuple]) -> list[tuple]:
    """The findings of a severity above INFO."""
    return [f for f in found if f[1] in ABOVE_INFO]


@pytest.fixture(scope="session")
def as_exported(spark, real_kafka, tmp_path_factory) -> dict[str, Audited]:
    """Every export as the brokers left it, one audit per form, for the whole run.

    The failover's segment folders are left to their own test, which audits them with the
    offsets polled across the failover.
    """

    def build(_folder: Path) -> dict[str, Audited]:
        exports = real_kafka.exports.values()
        return {
            form: audit(spark, *(
                getattr(e, form) for e in exports
                if not (form == "segments" and e.scenario == "failover")
            ))
            for form in FORMS
        }  # fmt: skip

    return once_per_run(tmp_path_factory, "real-kafka-as-exported", build)


@pytest.mark.cost(20)
@pytest.mark.parametrize("release", [RELEASE_4, RELEASE_3])
def test_real_broker_logs_without_a_fault_give_no_finding_above_info(
    real_kafka, as_exported, release
):
    exports = [
        export for (scenario, of), export in real_kafka.exports.items()
        if of == release and scenario in FAULTLESS[release]
    ]  # fmt: skip
    assert {e.scenario for e in exports} == FAULTLESS[release]
    topics = {e.topic for e in exports}
    found = {
        form: sorted(f for f in as_exported[form].findings if f[5] in topics) for form in FORMS
    }
    for form in FORMS:
        counted = {e.topic: as_exported[form].batches.get(e.topic) for e in exports}
        assert counted == {e.topic: e.batches for e in exports}, form
        assert above_info(found[form]) == [], (form, found[form])
        # What is INFO is benign by evidence: the log starts past the producer's first batch, or
        # the cleaner of the compacted topic left a hole.
        assert {f[2] for f in found[form]} <= {"LOG_START", "COMPACTION"}, (form, found[form])
        assert {f[5] for f in found[form] if f[2] == "COMPACTION"} <= {
            e.topic for e in exports if e.scenario == "compacted"
        }, (form, found[form])
    # The three forms agree. A segment folder also holds the producer snapshot that precedes its
    # first segment, which the two others lack: a producer it seeds has no INFO finding there.
    assert found["dump"] == found["dump_deep"] == found["parquet"]
    assert set(found["segments"]) <= set(found["parquet"])


def test_retention_moved_the_log_start_past_live_producers_only_log_start_findings(
    real_kafka, as_exported
):
    export = real_kafka.exports[("retained", RELEASE_4)]
    first_segment = min(int(p.stem) for p in Path(export.segments).glob("*/*/*.log"))
    assert first_segment >= export.facts["log_start"] > 0  # retention went on until the copy
    found = as_exported["parquet"].of(export.topic)  # no snapshot: the producers are new there
    assert found
    assert {f[:3] for f in found} == {("UNKNOWN_PRODUCER", "INFO", "LOG_START")}
    assert as_exported["segments"].of(export.topic) == []  # the log start's snapshot seeds them


@pytest.fixture(scope="session")
def crash_and_hanging(real_kafka, spark, tmp_path_factory) -> dict[str, list[dict]]:
    """The crash's and the hanging transaction's exports in one run (as of the hanging one's
    export), and the hanging one alone as if exported 30 minutes later: their tables' rows."""

    def build(folder: Path) -> dict[str, list[dict]]:
        crashed = real_kafka.exports[("crash", RELEASE_4)]
        hanging = real_kafka.exports[("hanging", RELEASE_4)]
        tables = {}
        for name, exports, at_ms in (
            ("exported", (crashed, hanging), hanging.facts["exported_at_ms"]),
            ("30 min later", (hanging,), hanging.facts["exported_at_ms"] + 30 * 60_000),
        ):
            warehouse = folder / name.replace(" ", "-")
            result = run_audit(
                spark,
                AuditInputs(batches=tuple(e.segments for e in exports), export_time=_iso(at_ms)),
                AuditConfig(), str(warehouse),
            )  # fmt: skip
            assert result.status == "SUCCEEDED", result
            tables[f"transactions {name}"] = sql(
                warehouse, "transactions",
                "SELECT topic, partition, first_offset, outcome, hanging FROM t "
                "ORDER BY topic, partition, first_offset",
            )  # fmt: skip
            tables[f"findings {name}"] = sql(
                warehouse, "findings", "SELECT finding_type, severity, topic, base_offset FROM t"
            )
        return tables

    return once_per_run(tmp_path_factory, "real-kafka-crash-and-hanging", build)


def _iso(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()


def test_a_broker_killed_inside_a_transaction_shows_the_coordinators_abort(
    real_kafka, crash_and_hanging
):
    topic = real_kafka.exports[("crash", RELEASE_4)].topic
    rows = [r for r in crash_and_hanging["transactions exported"] if r["topic"] == topic]
    # Per partition: the committed transaction, then the one the crash left, aborted.
    assert [(r["partition"], r["outcome"]) for r in rows] == [
        (0, "COMMIT"), (0, "ABORT"), (1, "COMMIT"), (1, "ABORT"),
    ]  # fmt: skip
    assert not any(r["hanging"] for r in rows)
    assert [f for f in crash_and_hanging["findings exported"] if f["topic"] == topic] == []


def test_an_open_transaction_agrees_with_kafkas_find_hanging_and_hangs_past_the_timeout(
    real_kafka, crash_and_hanging
):
    export = real_kafka.exports[("hanging", RELEASE_4)]
    # Kafka's tools on the live cluster: the partition's open transaction and where it started;
    # find-hanging found nothing hanging, as the coordinator still had it in progress.
    described = [line.split() for line in export.facts["describe_producers"].splitlines()[1:]]
    open_starts = {int(row[5]) for row in described if row[5] != "None" and int(row[5]) >= 0}
    assert len(open_starts) == 1
    assert export.facts["find_hanging"].strip().splitlines()[1:] == []

    def opened(name: str) -> list[dict]:
        rows = crash_and_hanging[f"transactions {name}"]
        return [r for r in rows if r["topic"] == export.topic and r["outcome"] == "OPEN"]

    # At the export: open, not hanging (younger than the timeout and its grace), as Kafka said.
    assert [(t["first_offset"], t["hanging"]) for t in opened("exported")] == [
        (open_starts.pop(), False)
    ]
    assert [f for f in crash_and_hanging["findings exported"] if f["topic"] == export.topic] == []
    # The same log exported 30 minutes on (nothing more written: the producer is dead and its
    # one-day timeout has not passed): past the broker's maximum timeout plus grace, it hangs.
    (later,) = opened("30 min later")
    assert later["hanging"] is True
    assert [
        (f["finding_type"], f["severity"], f["base_offset"])
        for f in crash_and_hanging["findings 30 min later"]
    ] == [("HANGING_TRANSACTION", "ERROR", later["first_offset"])]


@dataclass
class Tampered:
    """The tampered copies' audits, one per form, and where each fault was made."""

    audited: dict[str, Audited]
    zombie_at: dict[str, int]  # release: the offset of the spliced old-epoch batch
    clean_expected: list[tuple]  # (type, severity, partition, base offset) of `clean` 4.x


def _copy(export: Export, into: Path) -> Path:
    return Path(shutil.copytree(export.segments, into / "segments"))


def _splice_zombie(export: Export, segments: Path) -> int:
    """Append a batch of the fenced producer's epoch after the fence; the offset it got."""
    (log,) = sorted(segments.glob(f"*/{export.topic}-0/*.log"))
    batches = tamper.batches(log)
    epochs = {view["producer_epoch"] for _, _, view in batches if not view["is_control"]}
    zombie_epoch = min(epochs)
    _, entry, _ = next(
        b for b in batches if b[2]["producer_epoch"] == zombie_epoch and not b[2]["is_control"]
    )
    at = tamper.next_offset(log)
    tamper.append(log, tamper.restamped(entry, at))
    return at


def _tamper_clean(export: Export, segments: Path) -> list[tuple]:
    """A batch cut out, one written again, one byte flipped: the findings they must give."""

    def idempotent_batches(partition: int) -> tuple[Path, list]:
        """The partition's segment, and the batches of its busiest idempotent producer."""
        (log,) = sorted(segments.glob(f"*/{export.topic}-{partition}/*.log"))
        idem = [b for b in tamper.batches(log) if not b[2]["is_transactional"]
                and b[2]["producer_id"] >= 0]  # fmt: skip
        producers = {b[2]["producer_id"] for b in idem}
        busiest = max(producers, key=lambda p: sum(b[2]["producer_id"] == p for b in idem))
        own = [b for b in idem if b[2]["producer_id"] == busiest]
        assert len(own) >= 3, own  # the scenario writes three batches per partition
        return log, own

    # Partition 0: an idempotent batch cut out of the middle of its producer's batches: a hole in
    # the offsets before the batch after it in the log, and in its producer's sequences.
    log, idem = idempotent_batches(0)
    removed, following = idem[1], idem[2]
    after_hole = min(
        view["base_offset"] for _, _, view in tamper.batches(log)
        if view["base_offset"] > removed[2]["last_offset"]
    )  # fmt: skip
    tamper.remove_batch(log, removed[0])
    # Partition 1: an acknowledged batch written again at the end, offsets and CRC rewritten.
    log, idem = idempotent_batches(1)
    duplicate_at = tamper.next_offset(log)
    tamper.append(log, tamper.restamped(idem[0][1], duplicate_at))
    # Partition 2: one byte of a batch's records flipped, in the middle of its producer's batches
    # (the gap it leaves is the corrupt batch's own: docs/replay_semantics.md, Corrupt batches).
    log, idem = idempotent_batches(2)
    position, entry, view = idem[1]
    tamper.flip_byte(log, position + len(entry) - 2)
    return [
        ("CORRUPT_BATCH", "ERROR", 2, view["base_offset"]),
        ("DUPLICATE_BATCH", "CRITICAL", 1, duplicate_at),
        ("OFFSET_GAP", "CRITICAL", 0, after_hole),
        ("SEQUENCE_GAP", "CRITICAL", 0, following[2]["base_offset"]),
    ]


@pytest.fixture(scope="session")
def tampered(spark, real_kafka, tmp_path_factory) -> Tampered:
    """Copies of real segments changed after the broker wrote them, in the three forms (each
    release's dump-log text of the changed files), audited together: one audit per form."""

    def build(folder: Path) -> Tampered:
        copies: list[Export] = []
        zombie_at = {}
        for key in (("zombie", RELEASE_4), ("zombie", RELEASE_3), ("clean", RELEASE_4)):
            export = real_kafka.exports[key]
            into = folder / "-".join(key)
            segments = _copy(export, into)
            if export.scenario == "zombie":
                zombie_at[export.release] = _splice_zombie(export, segments)
            else:
                clean_expected = _tamper_clean(export, segments)
            copies.append(new_export(export.scenario, export.release, export.topic, into,
                                     segments, {}))  # fmt: skip
        for release in (RELEASE_4, RELEASE_3):
            write_dumps(SETS[release], [c for c in copies if c.release == release])
        audited = {form: audit(spark, *(getattr(c, form) for c in copies)) for form in FORMS}
        return Tampered(audited, zombie_at, clean_expected)

    return once_per_run(tmp_path_factory, "real-kafka-tampered", build)


@pytest.mark.cost(20)
@pytest.mark.parametrize("release", [RELEASE_4, RELEASE_3])
def test_an_old_epoch_batch_spliced_after_the_fence_is_a_fenced_producer_epoch(
    real_kafka, as_exported, tampered, release
):
    export = real_kafka.exports[("zombie", release)]
    # The broker fenced the zombie: its client got the fencing error, and the log is clean.
    assert export.facts["zombie_outcome"] in FENCING_ERRORS
    assert above_info(as_exported["segments"].of(export.topic)) == []
    for form in FORMS:
        found = tampered.audited[form].of(export.topic)
        assert [(f[0], f[1], f[4]) for f in found if f[1] != "INFO"] == [
            ("FENCED_PRODUCER_EPOCH", "CRITICAL", tampered.zombie_at[release])
        ], (form, found)


def test_tampered_real_segments_give_gap_duplicate_and_corrupt_batch(real_kafka, tampered):
    topic = real_kafka.exports[("clean", RELEASE_4)].topic
    for form in FORMS:
        found = tampered.audited[form].of(topic)
        assert sorted((f[0], f[1], f[3], f[4]) for f in found) == tampered.clean_expected, (
            form, found,
        )  # fmt: skip


def test_the_cleaner_ran_on_the_compacted_topic(real_kafka, as_exported):
    export = real_kafka.exports[("compacted", RELEASE_4)]
    views = [
        view for log in sorted(Path(export.segments).glob("*/*/*.log"))
        for _, _, view in tamper.batches(log)
    ]  # fmt: skip
    # Compaction removed records (keys written again, aborted data) and the markers of cleaned
    # transactions: fewer records remain than the offsets the log spans.
    spanned = views[-1]["last_offset"] + 1 - views[0]["base_offset"]
    assert sum(v["record_count"] for v in views) < spanned
    # Whole batches went with them: holes between batches, each an OFFSET_GAP that the
    # compacted topic explains, the same in every form.
    holes = sorted(
        after["base_offset"] for before, after in zip(views, views[1:], strict=False)
        if after["base_offset"] > before["last_offset"] + 1
    )  # fmt: skip
    assert holes
    for form in FORMS:
        gaps = [f for f in as_exported[form].of(export.topic) if f[0] == "OFFSET_GAP"]
        assert sorted(f[4] for f in gaps) == holes, (form, gaps)
        assert {f[1:3] for f in gaps} == {("INFO", "COMPACTION")}, form


@pytest.mark.cost(10)
def test_an_unclean_leader_election_is_replica_divergence_and_a_list_offsets_truncation(
    spark, real_kafka, as_exported, tmp_path
):
    export = real_kafka.exports[("failover", RELEASE_4)]
    facts = export.facts
    # What the brokers did: broker 2 alone took offsets 6-11 (latest 12); broker 3, elected
    # uncleanly, wrote a new producer's batch at offset 6 (latest 7); broker 2 rejoined and
    # truncated to it.
    assert (facts["acknowledged_before"], facts["high"], facts["new_offset"]) == (6, 12, 6)
    assert facts["after"] == facts["settled"] == 7
    run_audit(
        spark, AuditInputs(batches=(export.segments,), list_offsets=(facts["list_offsets"],)),
        AuditConfig(), str(tmp_path / "wh"),
    )  # fmt: skip
    found = sql(
        tmp_path / "wh", "findings",
        "SELECT finding_type, severity, cause, base_offset, previous_offset, detail FROM t "
        "ORDER BY finding_type, detail",
    )  # fmt: skip
    # The copy taken before broker 2 rejoined is the most complete replica: both replicas as they
    # ended hold another batch at offset 6, below its high watermark (12).
    assert [(f["finding_type"], f["severity"], f["base_offset"]) for f in found] == [
        ("LIST_OFFSETS_REGRESSION", "CRITICAL", 7),
        ("REPLICA_DIVERGENCE", "CRITICAL", 6),
        ("REPLICA_DIVERGENCE", "CRITICAL", 6),
    ]
    regression = found[0]
    assert (regression["cause"], regression["previous_offset"]) == ("TRUNCATION", 12)
    assert ["Replica 2 " in found[1]["detail"], "Replica 3 " in found[2]["detail"]] == [True, True]
    # The three forms of the replicas' batches agree on the log rules (the replica comparison
    # needs the segment folders: a dump or a table names no replica).
    for form in ("dump", "dump_deep", "parquet"):
        assert as_exported[form].batches[export.topic] == export.batches, form
        assert as_exported[form].of(export.topic) == [], form


@pytest.mark.parametrize("release, most_epochs", [(RELEASE_4, 3), (RELEASE_3, 2)])
def test_the_clusters_ran_transactions_v2_and_v1(real_kafka, release, most_epochs):
    # Transactions v2 (KIP-890, Kafka 4's default) bump the producer epoch at every marker; v1
    # keeps one epoch per initTransactions (the restarted producer's session is the second).
    export = real_kafka.exports[("clean", release)]
    epochs: dict[int, set[int]] = {}
    for log in sorted(Path(export.segments).glob("*/*/*.log")):
        for _, _, view in tamper.batches(log):
            if view["is_control"]:
                epochs.setdefault(view["producer_id"], set()).add(view["producer_epoch"])
    busiest = max(len(e) for e in epochs.values())
    assert busiest >= most_epochs if release == RELEASE_4 else busiest == most_epochs, epochs
