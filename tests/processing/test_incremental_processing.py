"""The processing audit on an incremental night (--since-state): skipped batches are exported too.

Two nights of one cluster, Kafka's bytes (`segment_builder`). Night 2's export holds night 1's
batches again and the new ones; seeded with night 1's state, the run skips the batches below the
offsets that state covers (docs/nightly.md). The coordinator topics are decoded whole each night,
so night 2 judges every commit again, against input partitions part of which it did not replay.

| input | night 1 | night 2 | covered by night 1's state |
|---|---|---|---|
| `src`-0 | offsets 0-9 | 0-14 | below 10 |
| `tail`-0 | offsets 0-4, written after the commits | 0-4: every batch skipped | below 5 |
| `holey`-0 | offsets 0-4 | 0-4, then 8-12: 5-7 exported by neither night | below 5 |
| `plain`-0 | offsets 0-9, no idempotent producer | 5-14 (the log starts at 0) | nothing |

`copy` is declared one-to-one; INPUT_SKIPPED is an UNVERIFIABLE finding's cause: the records of
a range over skipped offsets are not counted, and where the range starts is still judged.

| group | night 1 | night 2 adds | expected of night 2 |
|---|---|---|---|
| `copy` | T1 reads [0, 5), writes 5 | an operator commits 7 | |
| | | T2 reads [7, 10), writes 3 | T1, T2: INPUT_SKIPPED; T2: SKIPPED_INPUT RANGE_GAP |
| | | T3 reads [10, 15), writes 4 | SKIPPED_INPUT LESS_OUTPUT_THAN_INPUT |
| `lagging` | commits 3 of `src`-0 | - | nothing: offset 3 is exported, skipped |
| `ahead` | - | commits 9 of `tail`-0 | COMMIT_BEYOND_LOG: the log ends at 5 |
| `archive` | one transaction: `archived`-0, its offsets' partition | - | nothing: both skipped |
| `gapped` | T1 reads [0, 5) of `holey` | T2 reads [5, 13), writes 5 | T1: INPUT_SKIPPED; |
| | | | T2: INPUT_NOT_WHOLE (5-7 held no record here) |
| `stalled` | T1 reads [0, 5), writes 5 | T2 reads [5, 5), writes 3 | T1: INPUT_SKIPPED; T2: |
| | | | DUPLICATE_PROCESSING MORE_OUTPUT_THAN_INPUT (an empty range counts 0) |
| `behind` | commits 3 of `plain`-0 | - | nothing: night 2's export of `plain` starts at 5, |
| | | | and an incremental export may start anywhere |

`gapped` and `stalled` are declared one-to-one too.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

from eos_audit.audit.pipeline import AuditInputs, run_audit
from eos_audit.config import AuditConfig
from eos_audit.sources.kafka.coordinator_keys import DEFAULT_COORDINATOR_PARTITIONS
from tests.fixtures.segment_builder import data_batch, record_batch, write_empty_partitions
from tests.processing.test_one_to_one import CO, TS_TOPIC, Export, Processor, at
from tests.run_once import once_per_run
from tests.sources.test_coordinator_records import offset_commit_key, offset_commit_value

pytestmark = pytest.mark.slow


def build_night(night: int) -> tuple[Export, dict[str, int]]:
    """The export of `night` (1 or 2), and each group's `__consumer_offsets` partition."""
    export = Export()
    for seq in range(10 if night == 1 else 15):  # an idempotent producer: its state covers src
        export.add("src", 0, lambda o, seq=seq: data_batch(
            o, 1, producer_id=42, producer_epoch=0, base_sequence=seq,
            timestamp=at(1 + seq)), 1)  # fmt: skip
    for seq in range(5):
        export.add("tail", 0, lambda o, seq=seq: data_batch(
            o, 1, producer_id=43, producer_epoch=0, base_sequence=seq,
            timestamp=at(100 + seq)), 1)  # fmt: skip
    for seq in range(5 if night == 1 else 10):  # offsets 5-7 are in neither night's export
        if seq == 5:
            export.next[("holey", 0)] = 8
        export.add("holey", 0, lambda o, seq=seq: data_batch(
            o, 1, producer_id=44, producer_epoch=0, base_sequence=seq,
            timestamp=at(1 + seq)), 1)  # fmt: skip
    export.next[("plain", 0)] = 0 if night == 1 else 5
    for _ in range(10):
        export.add("plain", 0, lambda o: data_batch(o, 1, timestamp=at(1)), 1)
    copy = Processor(export, "copy", 5000, "src", "dst")
    copy.transaction(20, outputs=5, commit_to=5)
    lagging = Processor(export, "lagging", 5100, "src", "unused")
    lagging.operator_commits(30, 3)
    ahead = Processor(export, "ahead", 5200, "tail", "unused")
    archive = Processor(export, "archive", 5300, "src", "archived")
    archive.transaction(25, outputs=2, commit_to=2)
    gapped = Processor(export, "gapped", 5400, "holey", "holey-out")
    gapped.transaction(20, outputs=5, commit_to=5)
    stalled = Processor(export, "stalled", 5500, "src", "restated")
    stalled.transaction(20, outputs=5, commit_to=5)
    behind = Processor(export, "behind", 5600, "plain", "unused")
    behind.operator_commits(30, 3)
    if night == 2:
        gapped.transaction(40, outputs=5, commit_to=13)
        stalled.transaction(40, outputs=3, commit_to=5)
        copy.operator_commits(35, 7)  # a forward reset: offsets 5-6 are never processed
        copy.transaction(40, outputs=3, commit_to=10)
        copy.transaction(50, outputs=4, commit_to=15)
        commit = (offset_commit_key("ahead", "tail", 0), offset_commit_value(3, 9, "", at(60)))
        export.add(CO, ahead.co, lambda o: record_batch(o, [commit], timestamp=at(60)))
    groups = {
        processor.group: processor.co
        for processor in (copy, lagging, ahead, archive, gapped, stalled, behind)
    }
    assert len(set(groups.values())) == len(groups)
    return export, groups


@pytest.fixture(scope="module")
def nights(spark, tmp_path_factory) -> Path:
    """The warehouse of both nights, the second run with --since-state."""

    def build(folder: Path) -> Path:
        warehouse = folder / "warehouse"
        config = AuditConfig().with_overrides(
            processing={"one_to_one_groups": ["copy", "gapped", "stalled"]}
        )
        for night in (1, 2):
            export = folder / f"night-{night}"
            build_night(night)[0].write(export)
            write_empty_partitions(export, 1, TS_TOPIC, DEFAULT_COORDINATOR_PARTITIONS)
            inputs = AuditInputs(batches=(str(export),), since_state=night == 2)
            run_audit(spark, inputs, config, str(warehouse), run_id=f"night-{night}")
        return warehouse

    return once_per_run(tmp_path_factory, "incremental-processing", build)


def _rows(warehouse: Path, table: str, sql: str) -> list[dict]:
    query = QueryBuilder().register(table, DeltaTable(str(warehouse / table)))
    return pa.table(query.execute(sql).read_all()).to_pylist()


def _judged(warehouse: Path, run_id: str) -> set[tuple]:
    """The run's findings above INFO and its UNVERIFIABLE ones: type, cause, topic, partition."""
    return {
        (r["finding_type"], r["cause"], r["topic"], r["partition"])
        for r in _rows(
            warehouse,
            "findings",
            f"SELECT * FROM findings WHERE run_id = '{run_id}' "
            "AND (severity <> 'INFO' OR finding_type = 'UNVERIFIABLE')",
        )
    }


def test_night_one_audits_every_batch_and_finds_nothing(nights):
    assert _judged(nights, "night-1") == set()


def test_night_two_judges_commits_against_the_exported_log_skipped_batches_included(nights):
    groups = build_night(2)[1]
    skipped = _rows(
        nights,
        "partition_summary",
        "SELECT topic, batches, batches_skipped FROM partition_summary "
        "WHERE run_id = 'night-2' AND topic IN ('src', 'tail', 'archived', 'holey', 'plain') "
        "ORDER BY topic",
    )
    assert skipped == [
        {"topic": "archived", "batches": 0, "batches_skipped": 2},
        {"topic": "holey", "batches": 5, "batches_skipped": 5},
        {"topic": "plain", "batches": 10, "batches_skipped": 0},
        {"topic": "src", "batches": 5, "batches_skipped": 10},
        {"topic": "tail", "batches": 0, "batches_skipped": 5},
    ]
    # No COMMIT_BELOW_LOG_START for `lagging`: the batches at 0-9 were skipped, not missing; nor
    # for `behind`: night 2's export of `plain` was cut at 5, where its log did not start. No
    # UNVERIFIABLE of `archive`'s transaction: its partitions' batches were skipped too.
    assert _judged(nights, "night-2") == {
        ("COMMIT_BEYOND_LOG", None, CO, groups["ahead"]),
        ("SKIPPED_INPUT", "LESS_OUTPUT_THAN_INPUT", CO, groups["copy"]),
        ("SKIPPED_INPUT", "RANGE_GAP", CO, groups["copy"]),
        # The operator's plain commit among the group's transactional ones, as in a full run.
        ("MIXED_OFFSET_COMMITS", "PLAIN_AND_TRANSACTIONAL", CO, groups["copy"]),
        ("UNVERIFIABLE", "INPUT_SKIPPED", "src", 0),  # of `copy`, and of `stalled`
        ("UNVERIFIABLE", "INPUT_SKIPPED", "holey", 0),
        # Offsets 5-7 of `holey`, which no export held, are not counted as records.
        ("UNVERIFIABLE", "INPUT_NOT_WHOLE", "holey", 0),
        # An empty range below the covered offset holds no input record to count.
        ("DUPLICATE_PROCESSING", "MORE_OUTPUT_THAN_INPUT", CO, groups["stalled"]),
    }
    (unverifiable,) = _rows(
        nights,
        "findings",
        "SELECT detail FROM findings WHERE run_id = 'night-2' AND cause = 'INPUT_SKIPPED' "
        "AND evidence['group_id'] = 'copy'",
    )
    assert "group copy, 2 transaction(s)" in unverifiable["detail"]
    assert "an earlier run audited" in unverifiable["detail"]
    assert "the seeded state covers offsets below 10" in unverifiable["detail"]
    (gap,) = _rows(
        nights,
        "findings",
        "SELECT detail FROM findings WHERE run_id = 'night-2' AND cause = 'RANGE_GAP'",
    )
    assert "no committed transaction of the group processed offsets [5, 7)" in gap["detail"]
    (beyond,) = _rows(
        nights,
        "findings",
        "SELECT detail FROM findings WHERE run_id = 'night-2' "
        "AND finding_type = 'COMMIT_BEYOND_LOG'",
    )
    assert "committed tail-0 at offset 9" in beyond["detail"]
    assert "beyond the log's end 5" in beyond["detail"]
