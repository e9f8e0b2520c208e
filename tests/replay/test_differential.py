"""The Spark engine against the sequential reference model, on generated histories.

Hypothesis generates hundreds of realistic histories (tests/oracle/histories.py), each is put on
its own topic-partition, and all of them are audited in ONE Spark job; every finding must agree
with `tests/oracle/broker_model.replay` on type, severity, cause, kafka_error and evidence. On a
disagreement the first differing history is printed whole, ready to paste into a unit test.

The examples are derandomized so CI is repeatable; set EOS_DIFF_RANDOM=1 (and EOS_DIFF_N) to
explore new histories locally.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter

from hypothesis import HealthCheck, given, settings

from eos_audit.audit import replay_plan
from eos_audit.config import AuditConfig
from eos_audit.sources.tabular.canonical import to_canonical
from tests.builders import batches_df, seeds_df
from tests.oracle.broker_model import Finding, replay
from tests.oracle.histories import History, histories

COMPARED = (
    "topic",
    "partition",
    "base_offset",
    "last_offset",
    "finding_type",
    "severity",
    "cause",
    "kafka_error",
    "producer_id",
    "expected_sequence",
    "previous_offset",
)
N = int(os.environ.get("EOS_DIFF_N", "300"))
RANDOM = os.environ.get("EOS_DIFF_RANDOM") == "1"


def generate(n: int, topic: str | None = None) -> list[History]:
    """`n` generated histories, each moved to its own topic-partition."""
    collected: list[History] = []

    @settings(
        max_examples=n,
        deadline=None,
        database=None,
        derandomize=not RANDOM,
        suppress_health_check=list(HealthCheck),
    )
    @given(histories(topic=topic))
    def collect(history):
        collected.append(history)

    collect()
    moved = []
    for i, h in enumerate(collected):
        name, partition = (topic or f"t{i}"), (i if topic else i % 3)

        def place(obj, name=name, partition=partition):
            return dataclasses.replace(obj, topic=name, partition=partition)

        moved.append(
            History(
                batches=[place(b) for b in h.batches],
                seeds=[place(s) for s in h.seeds],
                log_start_offsets=(
                    {(name, partition): next(iter(h.log_start_offsets.values()))}
                    if h.log_start_offsets
                    else None
                ),
                topic=name,
                partition=partition,
            )
        )
    return moved


def _key(t: tuple) -> tuple:
    return tuple((x is None, x) for x in t)


def _engine_findings(spark, all_histories, config: AuditConfig) -> list[tuple]:
    rows = [b.as_row() for h in all_histories for b in h.batches]
    seeds = [s.as_row() for h in all_histories for s in h.seeds]
    starts = [(t, p, o) for h in all_histories for (t, p), o in (h.log_start_offsets or {}).items()]
    records = replay_plan.audit(
        to_canonical(batches_df(spark, rows)),
        config,
        "diff",
        seeds_df=seeds_df(spark, seeds) if seeds else None,
        log_starts_df=(
            spark.createDataFrame(starts, "topic string, partition int, log_start_offset long")
            if starts
            else None
        ),
    )
    out = records.collect()  # one Spark job for every history
    rejected = [r.quarantine for r in out if r.kind == "quarantine"]
    assert not rejected, f"generated rows were quarantined: {rejected[:3]}"
    # The model replays producer state and the partition rules; transactions are tested apart.
    return sorted(
        (
            tuple(r.findings[c] for c in COMPARED)
            for r in out
            if r.kind == "findings" and r.findings.finding_type != "HANGING_TRANSACTION"
        ),
        key=_key,
    )


def _model_findings(all_histories, config: AuditConfig) -> list[tuple]:
    starts = {k: v for h in all_histories for k, v in (h.log_start_offsets or {}).items()}
    found = replay(
        [b for h in all_histories for b in h.batches],
        seeds=[s for h in all_histories for s in h.seeds],
        expiration_ms=config.cluster.effective_expiration_ms,
        kafka_version=config.cluster.version,
        compacted_topics=config.topics.compacted,
        coordinator_topics=config.topics.coordinator,
        log_start_offsets=starts,
        severities=config.severity,
    )
    return sorted((tuple(getattr(f, c) for c in COMPARED) for f in found), key=_key)


def assert_agree(spark, all_histories: list[History], config: AuditConfig) -> Counter:
    expected = _model_findings(all_histories, config)
    actual = _engine_findings(spark, all_histories, config)
    if actual != expected:
        missing = sorted(set(expected) - set(actual), key=_key)
        extra = sorted(set(actual) - set(expected), key=_key)
        first = (missing + extra)[0]
        history = next(h for h in all_histories if (h.topic, h.partition) == first[:2])
        raise AssertionError(
            f"engine and model disagree (fields {COMPARED})\n"
            f"model only ({len(missing)}): {missing[:6]}\nengine only ({len(extra)}): {extra[:6]}\n"
            f"first differing history {first[:2]}:\n  seeds={history.seeds}\n"
            f"  log_start_offsets={history.log_start_offsets}\n"
            + "\n".join(f"  {b}" for b in history.batches)
        )
    return Counter(f[4] for f in expected)


def test_engine_agrees_with_model_on_generated_histories(spark):
    generated = generate(N)
    seen = assert_agree(spark, generated, AuditConfig())
    # The generator must exercise the rules, or agreement proves little.
    assert sum(len(h.batches) for h in generated) > 20 * len(generated) // 4
    assert {
        "DUPLICATE_BATCH",
        "SEQUENCE_GAP",
        "FENCED_PRODUCER_EPOCH",
        "UNKNOWN_PRODUCER",
        "INVALID_TXN_STATE",
        "OFFSET_OVERLAP",
    } <= set(seen), seen


def test_engine_agrees_on_compacted_coordinator_and_old_broker_histories(spark):
    generated = generate(N // 3) + generate(20, topic="__consumer_offsets")
    config = AuditConfig().with_overrides(
        cluster={"kafka_version": "2.3"}, topics={"compacted": ["t1*", "t?7"]}
    )
    seen = assert_agree(spark, generated, config)
    assert "SEQUENCE_GAP" in seen


def test_findings_compared_are_the_models_fields():
    assert set(COMPARED) <= set(Finding.__dataclass_fields__)
