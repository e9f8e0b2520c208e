"""Nightly runs: a night seeded with the previous night's `producer_state` table finds exactly what
one run over both nights finds in the second night.

The faults sit on the boundary, where a run without yesterday's state would be wrong: a duplicate
of yesterday's last batch, a gap between yesterday's last sequence and today's first, a
transaction opened yesterday and committed today, and a zombie write of an epoch bumped yesterday.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

from eos_audit.audit.pipeline import AuditInputs, run_audit
from eos_audit.config import AuditConfig
from tests.builders import NULLABLE_BATCH, data, marker

pytestmark = pytest.mark.slow

DAY_1 = [
    data(0, seq=0), data(1, seq=1), data(2, seq=2),  # producer 1
    data(3, 2, pid=2, seq=0),  # producer 2: sequences 0-1
    data(5, pid=3, seq=0, is_transactional=True),  # producer 3: a transaction opens
    data(6, pid=4, epoch=0, seq=0), data(7, pid=4, epoch=1, seq=0),  # producer 4 bumps its epoch
    data(0, 3, pid=5, seq=0, partition=1),
]  # fmt: skip
# Night 2's export continues where night 1's ended (offset 8 of partition 0, 3 of partition 1).
DAY_2 = [
    data(8, seq=2),  # producer 1 writes yesterday's last batch again: DUPLICATE_BATCH
    data(9, seq=3),
    data(10, pid=2, seq=5),  # producer 2 skips 2-4: SEQUENCE_GAP (expected 2)
    marker(11, pid=3),  # producer 3 commits yesterday's transaction
    data(12, pid=4, epoch=0, seq=1),  # the old epoch of producer 4: FENCED_PRODUCER_EPOCH
    data(13, pid=4, epoch=1, seq=1),
    data(3, 2, pid=5, seq=3, partition=1),
]  # fmt: skip
FINDING_COLUMNS = (
    "finding_type, severity, cause, kafka_error, topic, partition, producer_id, producer_epoch, "
    "base_offset, last_offset, base_sequence, last_sequence, expected_sequence, previous_offset, "
    "detail, evidence, finding_id"
)
TRANSACTION_COLUMNS = "transaction_id, producer_id, first_offset, marker_offset, outcome"


def _sql(path, sql):
    return pa.table(
        QueryBuilder().register("t", DeltaTable(str(path))).execute(sql).read_all()
    ).to_pylist()


def _write(spark, rows, path) -> str:
    spark.createDataFrame([tuple(r[f.name] for f in NULLABLE_BATCH) for r in rows],
                          NULLABLE_BATCH).write.parquet(str(path))  # fmt: skip
    return str(path)


@pytest.fixture(scope="session")
def exports(spark, tmp_path_factory):
    """Night 1's and night 2's exports (Parquet), written once for the tests of this module."""
    root = tmp_path_factory.mktemp("nights")
    return _write(spark, DAY_1, root / "day-1"), _write(spark, DAY_2, root / "day-2")


@pytest.fixture(scope="session")
def combined(spark, exports, tmp_path_factory):
    """One run over both nights' exports (run "night-2"): what a nightly run of night 2 must
    find. Read only; each test below compares its own nights with it.
    """
    warehouse = tmp_path_factory.mktemp("combined")
    run_audit(spark, AuditInputs(batches=exports), AuditConfig(), str(warehouse), run_id="night-2")
    return warehouse


def _night_2(table, run_id, columns, order="base_offset"):
    where = f"run_id = '{run_id}' AND (partition = 1 AND base_offset >= 3 OR base_offset >= 8)"
    if "first_offset" in columns:
        where = f"run_id = '{run_id}' AND marker_offset >= 8"
    return _sql(table, f"SELECT {columns} FROM t WHERE {where} ORDER BY {order}")


@pytest.mark.cost(14)  # two nights, and the combined run (session-scoped) when it runs first
def test_a_night_seeded_with_yesterdays_state_finds_what_one_run_over_both_finds(
    spark, tmp_path, exports, combined
):
    day_1, day_2 = exports
    nightly = tmp_path / "nightly"
    config = AuditConfig()

    run_audit(spark, AuditInputs(batches=(day_1,)), config, str(nightly), run_id="night-1")
    state = str(nightly / "producer_state")
    seeded = AuditInputs(batches=(day_2,), producer_state=(state,))
    run_audit(spark, seeded, config, str(nightly), run_id="night-2")

    findings = _night_2(nightly / "findings", "night-2", FINDING_COLUMNS)
    assert findings == _night_2(combined / "findings", "night-2", FINDING_COLUMNS)
    assert [(f["finding_type"], f["base_offset"]) for f in findings] == [
        ("DUPLICATE_BATCH", 8),
        ("SEQUENCE_GAP", 10),
        ("FENCED_PRODUCER_EPOCH", 12),
    ]
    assert findings[0]["previous_offset"] == 2  # yesterday's copy, remembered by the state
    assert findings[1]["expected_sequence"] == 2
    assert (findings[1]["severity"], findings[1]["cause"]) == ("CRITICAL", "UNEXPLAINED")

    transactions = _night_2(nightly / "transactions", "night-2", TRANSACTION_COLUMNS,
                            order="first_offset")  # fmt: skip
    assert transactions == _night_2(
        combined / "transactions", "night-2", TRANSACTION_COLUMNS, order="first_offset"
    )
    assert [(t["first_offset"], t["marker_offset"], t["outcome"]) for t in transactions] == [
        (5, 11, "COMMIT")
    ]

    # Night 2's final state is the combined run's: the next night starts from the same place.
    state_columns = "topic, partition, producer_id, producer_epoch, coordinator_epoch, " \
        "txn_first_offset, last_timestamp, batches, state_offset"  # fmt: skip
    order = "topic, partition, producer_id"
    assert _sql(
        nightly / "producer_state",
        f"SELECT {state_columns} FROM t WHERE run_id = 'night-2' ORDER BY {order}",
    ) == _sql(
        combined / "producer_state",
        f"SELECT {state_columns} FROM t WHERE run_id = 'night-2' ORDER BY {order}",
    )


def test_without_yesterdays_state_the_boundary_faults_are_missed(spark, tmp_path, exports):
    """The control: the seeded state is what finds them (this test fails if seeding is a no-op)."""
    _, day_2 = exports
    run_audit(spark, AuditInputs(batches=(day_2,)), AuditConfig(), str(tmp_path / "w"),
              run_id="night-2")  # fmt: skip
    found = {
        (f["finding_type"], f["base_offset"])
        for f in _sql(tmp_path / "w" / "findings", "SELECT finding_type, base_offset FROM t")
    }
    assert ("DUPLICATE_BATCH", 8) not in found
    assert ("FENCED_PRODUCER_EPOCH", 12) not in found


def _run_row(warehouse, run_id):
    columns = "status, batches_read, batches_audited, batches_quarantined, batches_skipped, " \
        "seeded_from_run, error"  # fmt: skip
    return _sql(warehouse / "audit_runs", f"SELECT {columns} FROM t WHERE run_id = '{run_id}'")[0]


@pytest.mark.cost(35)  # five nights, and the combined run (session-scoped) when it runs first
def test_since_state_skips_the_reexported_overlap_and_seeds_from_the_latest_finished_run(
    spark, tmp_path, exports, combined
):
    """--since-state: night 2's export repeats night 1's last three batches (a re-exported
    overlap); they are counted as skipped, not audited twice, and the findings are the combined
    run's. Run ids sort against time here (zz- before aa-), so "latest" must come from audit_runs.
    """
    overlap = [DAY_1[-3], DAY_1[-2], DAY_1[-1]]  # offsets 6, 7 of partition 0 and 0-2 of 1
    day_1, _ = exports
    day_2 = _write(spark, overlap + DAY_2, tmp_path / "day-2")
    day_3 = _write(spark, [DAY_2[-2], data(14, pid=4, epoch=1, seq=2)], tmp_path / "day-3")
    nightly = tmp_path / "nightly"
    config = AuditConfig()

    def night(export, run_id):
        inputs = AuditInputs(batches=(export,), since_state=True)
        return run_audit(spark, inputs, config, str(nightly), run_id=run_id)

    first = night(day_1, "zz-night-1")  # the first night: no state yet, everything audited
    assert (first.batches_skipped, first.seeded_from_run) == (0, None)
    second = night(day_2, "aa-night-2")

    # The combined run is night 1 and night 2 without the overlap, as run "night-2": the finding
    # columns compared (finding_id included) do not depend on the run's id.
    assert _night_2(nightly / "findings", "aa-night-2", FINDING_COLUMNS) == _night_2(
        combined / "findings", "night-2", FINDING_COLUMNS
    )
    assert _sql(nightly / "findings", "SELECT count(*) AS n FROM t WHERE run_id = 'aa-night-2'")[
        0
    ]["n"] == 3  # DUPLICATE_BATCH, SEQUENCE_GAP, FENCED_PRODUCER_EPOCH; the overlap adds none
    assert _run_row(nightly, "aa-night-2") == {
        "status": "SUCCEEDED", "batches_read": 10, "batches_audited": 7,
        "batches_quarantined": 0, "batches_skipped": 3, "seeded_from_run": "zz-night-1",
        "error": None,
    }  # fmt: skip
    assert second.batches_read == second.batches_audited + second.batches_skipped == 10
    skipped = _sql(
        nightly / "partition_summary",
        "SELECT partition, batches, batches_skipped, first_offset FROM t "
        "WHERE run_id = 'aa-night-2' ORDER BY partition",
    )
    assert skipped == [
        {"partition": 0, "batches": 6, "batches_skipped": 2, "first_offset": 8},
        {"partition": 1, "batches": 1, "batches_skipped": 1, "first_offset": 3},
    ]

    # Night 3 re-exports night 2's offset 13: seeded by night 2 (the latest finished run, though
    # "zz-night-1" sorts after it), offset 13 is skipped; seeded by night 1 it would be audited.
    third = night(day_3, "mm-night-3")
    assert (third.seeded_from_run, third.batches_skipped, third.batches_audited) == (
        "aa-night-2", 1, 1,
    )  # fmt: skip

    # Re-running night 3 seeds from night 2 again, not from its own first attempt.
    again = night(day_3, "mm-night-3")
    assert (again.seeded_from_run, again.batches_skipped) == ("aa-night-2", 1)

    # An export the state covers entirely: nothing audited, said so, and the state carried on.
    covered = night(day_3, "nn-night-3-covered")
    assert (covered.status, covered.batches_audited, covered.batches_skipped) == (
        "NOTHING_AUDITED", 0, 2,
    )  # fmt: skip
    assert "already" in covered.error
    state_offsets = _sql(
        nightly / "producer_state",
        "SELECT DISTINCT state_offset FROM t WHERE run_id = 'nn-night-3-covered' "
        "AND partition = 0",
    )
    assert state_offsets == [{"state_offset": 15}]


def test_since_state_and_producer_state_are_exclusive(spark, tmp_path):
    from eos_audit.errors import ConfigError

    inputs = AuditInputs(batches=(str(tmp_path),), producer_state=("x",), since_state=True)
    with pytest.raises(ConfigError, match="--since-state"):
        run_audit(spark, inputs, AuditConfig(), str(tmp_path / "w"))
