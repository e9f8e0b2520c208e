"""Property-based fuzzing of the three Kafka readers (issue 12), small enough for every run.

The parsers run without Spark here; `bench/fuzz_corpus.py` runs the same checks over 100k+
inputs. The last test sends a sample through the readers in Spark, which must agree with the
parsers and never fail a task. The invariants are in `tests/fuzz/corpus.py`.
"""

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eos_audit.sources.kafka.dump_log import read_dump_log
from eos_audit.sources.kafka.export import read_kafka_export
from tests.fuzz import corpus

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SEGMENTS = range(len(corpus.seed_segments()))


@pytest.mark.parametrize("seed", SEGMENTS)
def test_a_segment_truncated_at_every_byte(seed):
    data = corpus.seed_segments()[seed].data
    for k in range(len(data) + 1):
        assert corpus.check_segment(data[:k], seed=seed, damage_at=k) == [], k


@FAST
@given(st.sampled_from(SEGMENTS), st.floats(0, 1, exclude_max=True), st.integers(0, 7))
def test_a_segment_with_a_flipped_bit(seed, where, bit):
    data = corpus.seed_segments()[seed].data
    position = int(where * len(data))
    damaged = corpus.flip(data, position, bit)
    assert corpus.check_segment(damaged, seed=seed, damage_at=position) == []


@FAST
@given(st.sampled_from(SEGMENTS), st.booleans(), st.randoms(use_true_random=False))
def test_random_lengths_and_magic_values(seed, after_valid, rng):
    prefix = corpus.seed_segments()[seed].data if after_valid else b""
    data = prefix + corpus.random_header(rng)
    damage = len(prefix) if after_valid else None
    assert corpus.check_segment(data, seed=seed if after_valid else None, damage_at=damage) == []


@FAST
@given(st.binary(max_size=600))
def test_random_bytes_as_a_segment(data):
    assert corpus.check_segment(data) == []


def test_a_snapshot_truncated_at_every_byte_or_flipped_anywhere():
    snap = corpus.seed_snapshot()
    assert corpus.check_snapshot(snap, valid=True) == []
    for k in range(len(snap)):
        assert corpus.check_snapshot(snap[:k], valid=False) == [], k
    for p in range(len(snap)):
        assert corpus.check_snapshot(corpus.flip(snap, p, p % 8), valid=False) == [], p


@FAST
@given(st.binary(max_size=300))
def test_random_bytes_as_a_snapshot(data):
    assert corpus.check_snapshot(data, valid=False) == []


@FAST
@given(st.randoms(use_true_random=False))
def test_damaged_and_random_checkpoints(rng):
    assert corpus.check_checkpoint(corpus.mutate_lines(rng, corpus.seed_checkpoint())) == []
    assert corpus.check_checkpoint(corpus.random_text(rng)) == []


@FAST
@given(st.randoms(use_true_random=False))
def test_damaged_dump_log_text(rng):
    text = rng.choice(corpus.seed_dump_texts())
    assert corpus.check_dump_log(corpus.mutate_lines(rng, text)) == []


@FAST
@given(st.randoms(use_true_random=False))
def test_random_long_and_invalid_utf8_text_as_dump_log(rng):
    assert corpus.check_dump_log(corpus.random_text(rng)) == []


def test_a_sample_through_the_spark_data_sources(spark, tmp_path):
    """Fuzzed files in a broker export and as dump-log text: read on executors, never fatal."""
    rng = random.Random(2026)
    expected_rows = 0
    for p in range(6):
        seed = corpus.seed_segments()[p % len(SEGMENTS)]
        data = seed.data[: rng.randint(0, len(seed.data))] + corpus.random_header(rng)
        partition = tmp_path / "export" / "1" / f"orders-{p}"
        partition.mkdir(parents=True)
        (partition / "00000000000000000000.log").write_bytes(data)
        (partition / "00000000000000000000.snapshot").write_bytes(rng.randbytes(60))
        (partition / "leader-epoch-checkpoint").write_bytes(corpus.random_text(rng))
        expected_rows += len(corpus.parse_segment(data, topic="orders", partition=p, path="x"))
    export = read_kafka_export(spark, [str(tmp_path / "export")])
    batches = export.batches.select("quarantine_reason").collect()
    assert len(batches) == expected_rows
    export.problems.collect()  # corrupt snapshots and checkpoint lines: rows, not failures
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    for i in range(4):
        (dumps / f"{i}.txt").write_bytes(corpus.random_text(rng))
    rows = read_dump_log(spark, [str(dumps)], topic="orders", partition=0).collect()
    expected = sum(
        len(corpus.parse_dump_log((dumps / f"{i}.txt").read_bytes(), path="x")) for i in range(4)
    )
    assert len(rows) == expected
