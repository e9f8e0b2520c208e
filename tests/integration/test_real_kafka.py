"""Logs that real Apache Kafka brokers wrote, in known situations, audited in all three forms.

The scenarios (`tests/kafka/scenarios.py`) run on a Kafka 4.x cluster (transactions v2) and a 3.9
one (transactions v1), with Kafka's Java producer and librdkafka. Each export is audited from the
brokers' segment folders, from the `kafka-dump-log.sh` text that release prints for them (default
and `--deep-iteration`), and from Parquet of the batches as kafka-python decodes them: the verdicts
must be the same. A real broker's log without a fault gives no finding above INFO; the faults made
here (a broker crash, a zombie, tampering) give the findings Kafka's own rules give.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from eos_audit import engine
from eos_audit.config import AuditConfig
from eos_audit.output_records import findings_of
from eos_audit.pipeline import AuditInputs, read_inputs, run_audit
from tests.cli_runs import (
    no_html_report,  # noqa: F401 (an autouse fixture)
    sql,
)
from tests.jars import KAFKA_3, KAFKA_4, SETS
from tests.kafka import tamper
from tests.kafka.scenarios import SCENARIOS_3, SCENARIOS_4, Export, write_forms

pytestmark = [pytest.mark.slow, pytest.mark.kafka]

# What Kafka's Java producer raises once fenced: transactions v1 and v2 answer differently.
FENCING_ERRORS = ("ProducerFencedException", "InvalidProducerEpochException")
FORMS = ("segments", "dump", "dump_deep", "parquet")
ABOVE_INFO = ("WARNING", "ERROR", "CRITICAL")
RELEASE_4 = f"kafka-{KAFKA_4}"
RELEASE_3 = f"kafka-{KAFKA_3}"
# The scenarios of each release whose logs a broker wrote without a fault (all but `failover`).
FAULTLESS = {
    RELEASE_4: {s.__name__ for s in SCENARIOS_4},
    RELEASE_3: {s.__name__ for s in SCENARIOS_3},
}


def audit(spark, *paths: str) -> tuple[list[tuple], int]:
    """(findings as (type, severity, cause, partition, base offset), batches audited) of `paths`."""
    read = read_inputs(spark, AuditInputs(batches=paths))
    records = engine.audit(
        read.batches, AuditConfig(), "real-kafka", seeds_df=read.seeds,
        log_starts_df=read.log_starts, high_watermarks_df=read.high_watermarks,
        leader_epochs_df=read.leader_epochs,
    )  # fmt: skip
    found = sorted(
        (r.finding_type, r.severity, r.cause, r.partition, r.base_offset, r.topic)
        for r in findings_of(records).collect()
    )
    return found, read.batches.where("quarantine_reason IS NULL").count()


def above_info(found: list[tuple]) -> list[tuple]:
    """The findings of a severity above INFO."""
    return [f for f in found if f[1] in ABOVE_INFO]


@pytest.mark.cost(40)
@pytest.mark.parametrize("release", [RELEASE_4, RELEASE_3])
def test_real_broker_logs_without_a_fault_give_no_finding_above_info(spark, real_kafka, release):
    # Every export of the release but the failover's (its replicas diverged: its own test), one
    # audit per form: each scenario has a topic of its own.
    exports = [
        export for (scenario, of), export in real_kafka.exports.items()
        if of == release and scenario in FAULTLESS[release]
    ]  # fmt: skip
    assert {e.scenario for e in exports} == FAULTLESS[release]
    audited = {form: audit(spark, *(getattr(e, form) for e in exports)) for form in FORMS}
    for form, (found, batches) in audited.items():
        assert batches == sum(e.batches for e in exports), (form, batches)
        assert above_info(found) == [], (form, found)
        # What is INFO is benign by evidence: the log starts past the producer's first batch.
        assert {f[2] for f in found} <= {"LOG_START"}, (form, found)
    # The three forms agree. A segment folder also holds the producer snapshot that precedes its
    # first segment, which the two others lack: a producer it seeds has no INFO finding there.
    texts = {form: audited[form][0] for form in ("dump", "dump_deep", "parquet")}
    assert texts["dump"] == texts["dump_deep"] == texts["parquet"]
    assert set(audited["segments"][0]) <= set(texts["parquet"])


def test_retention_moved_the_log_start_past_live_producers_only_log_start_findings(
    spark, real_kafka
):
    export = real_kafka.exports[("retained", RELEASE_4)]
    first_segment = min(int(p.stem) for p in Path(export.segments).glob("*/*/*.log"))
    assert first_segment >= export.facts["log_start"] > 0  # retention went on until the copy
    found, _ = audit(spark, export.parquet)  # no snapshot: the producers are new to the replay
    assert found
    assert {f[:3] for f in found} == {("UNKNOWN_PRODUCER", "INFO", "LOG_START")}
    assert audit(spark, export.segments)[0] == []  # the snapshot at the log start seeds them


@pytest.mark.cost(15)
def test_a_broker_killed_inside_a_transaction_shows_the_coordinators_abort(
    spark, real_kafka, tmp_path
):
    export = real_kafka.exports[("crash", RELEASE_4)]
    result = run_audit(spark, AuditInputs(batches=(export.segments,)), AuditConfig(),
                       str(tmp_path / "wh"))  # fmt: skip
    assert result.status == "SUCCEEDED"
    rows = sql(
        tmp_path / "wh", "transactions",
        "SELECT partition, outcome, hanging FROM t ORDER BY partition, first_offset",
    )  # fmt: skip
    # Per partition: the committed transaction, then the one the crash left, aborted.
    assert [(r["partition"], r["outcome"]) for r in rows] == [
        (0, "COMMIT"), (0, "ABORT"), (1, "COMMIT"), (1, "ABORT"),
    ]
    assert not any(r["hanging"] for r in rows)
    (findings,) = sql(tmp_path / "wh", "findings", "SELECT count(*) AS n FROM t")
    assert findings["n"] == 0


@pytest.mark.cost(15)
def test_an_open_transaction_agrees_with_kafkas_find_hanging_and_hangs_past_the_timeout(
    spark, real_kafka, tmp_path
):
    export = real_kafka.exports[("hanging", RELEASE_4)]
    # Kafka's tools on the live cluster: the partition's open transaction and where it started;
    # find-hanging found nothing hanging, as the coordinator still had it in progress.
    described = [line.split() for line in export.facts["describe_producers"].splitlines()[1:]]
    open_starts = {int(row[5]) for row in described if row[5] != "None" and int(row[5]) >= 0}
    assert len(open_starts) == 1
    assert export.facts["find_hanging"].strip().splitlines()[1:] == []

    def transactions(export_time_ms: int) -> list[dict]:
        from datetime import UTC, datetime

        at = datetime.fromtimestamp(export_time_ms / 1000, UTC).isoformat()
        warehouse = tmp_path / str(export_time_ms)
        run_audit(spark, AuditInputs(batches=(export.segments,), export_time=at), AuditConfig(),
                  str(warehouse))  # fmt: skip
        txns = sql(warehouse, "transactions", "SELECT * FROM t WHERE outcome = 'OPEN'")
        found = sql(warehouse, "findings", "SELECT finding_type, severity, base_offset FROM t")
        return txns, found

    # At the export: open, not hanging (younger than the timeout and its grace), as Kafka said.
    txns, found = transactions(export.facts["exported_at_ms"])
    assert [(t["first_offset"], t["hanging"]) for t in txns] == [(open_starts.pop(), False)]
    assert found == []
    # The same log exported 30 minutes on (nothing more written: the producer is dead and its
    # one-day timeout has not passed): past the broker's maximum timeout plus grace, it hangs.
    txns, found = transactions(export.facts["exported_at_ms"] + 30 * 60_000)
    assert [t["hanging"] for t in txns] == [True]
    assert [(f["finding_type"], f["severity"], f["base_offset"]) for f in found] == [
        ("HANGING_TRANSACTION", "ERROR", txns[0]["first_offset"])
    ]


def _copy(export: Export, into: Path) -> Path:
    return Path(shutil.copytree(export.segments, into / "segments"))


def _tampered_forms(export: Export, folder: Path, segments: Path) -> Export:
    """The three forms of tampered segments: that release's dump-log text, kafka-python's rows."""
    return write_forms(SETS[export.release], export.scenario, export.release, folder, segments, {})


@pytest.mark.cost(30)
@pytest.mark.parametrize("release", [RELEASE_4, RELEASE_3])
def test_an_old_epoch_batch_spliced_after_the_fence_is_a_fenced_producer_epoch(
    spark, real_kafka, tmp_path, release
):
    export = real_kafka.exports[("zombie", release)]
    # The broker fenced the zombie: its client got the fencing error, and the log is clean.
    assert export.facts["zombie_outcome"] in FENCING_ERRORS
    assert above_info(audit(spark, export.segments)[0]) == []
    segments = _copy(export, tmp_path)
    (log,) = sorted(segments.glob("*/zombie-0/*.log"))
    batches = tamper.batches(log)
    epochs = {view["producer_epoch"] for _, _, view in batches if not view["is_control"]}
    zombie_epoch = min(epochs)
    _, entry, zombie_batch = next(
        b for b in batches if b[2]["producer_epoch"] == zombie_epoch and not b[2]["is_control"]
    )
    at = tamper.next_offset(log)
    tamper.append(log, tamper.restamped(entry, at))
    spliced = _tampered_forms(export, tmp_path, segments)
    for form in FORMS:
        found, _ = audit(spark, getattr(spliced, form))
        assert [(f[0], f[1], f[4]) for f in found if f[1] != "INFO"] == [
            ("FENCED_PRODUCER_EPOCH", "CRITICAL", at)
        ], (form, found, zombie_batch)


@pytest.mark.cost(30)
def test_tampered_real_segments_give_gap_duplicate_and_corrupt_batch(spark, real_kafka, tmp_path):
    export = real_kafka.exports[("clean", RELEASE_4)]
    segments = _copy(export, tmp_path)

    def idempotent_batches(partition: int) -> tuple[Path, list]:
        """The partition's segment, and the batches of its busiest idempotent producer."""
        (log,) = sorted(segments.glob(f"*/clean-{partition}/*.log"))
        idem = [b for b in tamper.batches(log) if not b[2]["is_transactional"]
                and b[2]["producer_id"] >= 0]  # fmt: skip
        producers = {b[2]["producer_id"] for b in idem}
        busiest = max(producers, key=lambda p: sum(b[2]["producer_id"] == p for b in idem))
        own = [b for b in idem if b[2]["producer_id"] == busiest]
        assert len(own) >= 3, own  # the scenario writes three batches per partition
        return log, own

    # Partition 0: an idempotent batch cut out of the middle of its producer's batches.
    log, idem = idempotent_batches(0)
    removed, following = idem[1], idem[2]
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

    tampered = _tampered_forms(export, tmp_path, segments)
    expected = [
        ("CORRUPT_BATCH", "ERROR", 2, view["base_offset"]),
        ("DUPLICATE_BATCH", "CRITICAL", 1, duplicate_at),
        ("SEQUENCE_GAP", "CRITICAL", 0, following[2]["base_offset"]),
    ]
    for form in FORMS:
        found, _ = audit(spark, getattr(tampered, form))
        assert sorted((f[0], f[1], f[3], f[4]) for f in found) == expected, (form, found)


def test_the_cleaner_ran_on_the_compacted_topic(real_kafka):
    export = real_kafka.exports[("compacted", RELEASE_4)]
    views = [
        view for log in sorted(Path(export.segments).glob("*/*/*.log"))
        for _, _, view in tamper.batches(log)
    ]  # fmt: skip
    # Compaction removed records (keys written again, aborted data) and the markers of cleaned
    # transactions: fewer records remain than the offsets the log spans.
    spanned = views[-1]["last_offset"] + 1 - views[0]["base_offset"]
    assert sum(v["record_count"] for v in views) < spanned


@pytest.mark.cost(15)
def test_an_unclean_leader_election_is_replica_divergence_and_a_list_offsets_truncation(
    spark, real_kafka, tmp_path
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
    texts = [audit(spark, getattr(export, form))[0] for form in ("dump", "dump_deep", "parquet")]
    assert texts[0] == texts[1] == texts[2] == []


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
