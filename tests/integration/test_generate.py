"""Generated exports audited end to end: every fault kind found exactly, nothing else."""

import time

import pytest
from pyspark.sql import functions as F

from eos_audit import cli, session
from eos_audit.audit.pipeline import AuditInputs, run_audit
from eos_audit.config import load_config
from eos_audit.generate.plan import FAULT_KINDS, FaultRates, GenerationPlan
from eos_audit.generate.spark_export import write_export
from eos_audit.schemas import FINDINGS, GROUND_TRUTH
from eos_audit.score import EXIT_PERFECT, read_delta, score
from eos_audit.session import session_has_delta
from eos_audit.sinks.delta import choose_writer
from tests.run_once import once_per_run

pytestmark = pytest.mark.slow

# Small blocks and sessions and high rates, so that a small export plants every kind.
HIGH_RATES = FaultRates(
    duplicate_in_cache=0.2, duplicate_beyond_cache=0.2, lost_batch=0.2, acked_write_lost=0.2,
    retention_evicted_producer=0.3, wraparound=0.3, zombie_producer=0.25, sequence_reset=0.25,
    expired_producer=0.25, hanging_transaction=0.5,
)  # fmt: skip
SMALL = dict(
    batches=12_000, topics=3, partitions=2, block_batches=12, session_blocks=3, rates=HIGH_RATES
)


def _audit(spark, export, warehouse):
    inputs = AuditInputs(
        batches=(str(export.batches),),
        acks=(str(export.acks),),
        list_offsets=(str(export.list_offsets),),
        export_time=export.export_time,
    )
    return run_audit(spark, inputs, load_config(str(export.conf)), str(warehouse), run_id="gen")


@pytest.fixture(scope="session")
def small_run(spark, tmp_path_factory):
    """A small generated export, audited and scored once for the whole run (tests/run_once.py):
    (export, warehouse, score). Read only."""

    def generate_audit_score(root):
        export = write_export(spark, GenerationPlan(**SMALL), root / "export")
        _audit(spark, export, root / "warehouse")
        return export, root / "warehouse", score(spark, str(root / "warehouse"),
                                                 str(export.ground_truth))  # fmt: skip

    return once_per_run(tmp_path_factory, "generated", generate_audit_score)


@pytest.mark.parametrize("kind", sorted(FAULT_KINDS))
def test_each_fault_kind_is_found_exactly(small_run, kind):
    _, _, report = small_run
    line = next((k for k in report.kinds if k.name == kind), None)
    assert line is not None and line.planted > 0, f"{kind} was not planted"
    assert (line.precision, line.recall) == (1.0, 1.0), "\n".join(report.lines())


def test_nothing_but_the_planted_findings(small_run):
    _, _, report = small_run
    assert report.perfect, "\n".join(report.lines())
    assert report.findings == report.planted


def test_benign_kinds_get_their_cause_and_severity(spark, small_run):
    export, warehouse, _ = small_run
    truth = read_delta(spark, str(export.ground_truth), GROUND_TRUTH)
    findings = read_delta(spark, str(warehouse / "findings"), FINDINGS)
    key = ["finding_type", "topic", "partition", "base_offset"]
    joined = truth.alias("t").join(findings.alias("f"), key)
    wrong = joined.where(
        ~F.col("t.cause").eqNullSafe(F.col("f.cause"))
        | (F.col("t.severity") != F.col("f.severity"))
    )
    assert wrong.count() == 0
    benign = {
        (r["fault_kind"], r["cause"], r["severity"])
        for r in truth.where(F.col("severity").isin("INFO", "WARNING"))
        .select("fault_kind", "cause", "severity")
        .distinct()
        .collect()
    }
    assert {
        ("retention_evicted_producer", "LOG_START", "INFO"),
        ("expired_producer", "PRODUCER_EXPIRY", "INFO"),
        ("compacted_gap", "COMPACTION", "INFO"),
        ("leader_change_transient", "LEADER_CHANGE_TRANSIENT", "WARNING"),
    } <= benign


def test_cli_generate_audit_score(spark, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("eos_audit.cli._write_report", lambda *args, **kwargs: None)
    out, warehouse = tmp_path / "export", tmp_path / "warehouse"
    code = cli.main(
        ["generate", "--output", str(out), "--batches", "4000", "--seed", "7", "--files",
         "--fault-scale", "5"]
    )  # fmt: skip
    printed = capsys.readouterr().out
    assert code == 0
    assert "ground truth (" in printed and "eos-audit score --warehouse" in printed
    assert (out / "segments").is_dir() and any((out / "dump-log").glob("*.txt"))
    audit = [a for a in printed.splitlines() if a.startswith("audit it:")][0].split()[4:]
    audit = [str(warehouse) if a == "WAREHOUSE" else a for a in audit]
    assert cli.main(["audit", *audit, "--fail-on", "never"]) == 0
    capsys.readouterr()
    assert cli.main(["score", "--warehouse", str(warehouse), "--ground-truth",
                     str(out / "ground_truth")]) == EXIT_PERFECT  # fmt: skip
    assert "PERFECT" in capsys.readouterr().out


def test_score_exits_1_when_a_planted_fault_is_missed(spark, small_run, tmp_path, capsys):
    export, warehouse, _ = small_run
    # The run's own truth plus one planted duplicate at an offset no batch has: the audit cannot
    # have reported it, so exactly that one fault is missed and every finding still matches.
    truth = read_delta(spark, str(export.ground_truth), GROUND_TRUTH)
    planted = truth.where(F.col("fault_kind") == "duplicate_in_cache").limit(1)
    missed = planted.withColumn("base_offset", F.col("base_offset") + 10**12)
    generation = truth.select("run_id").first()["run_id"]
    writer = choose_writer(spark, str(tmp_path), "auto", "", has_delta=session_has_delta(spark),
                           staging_dir=str(tmp_path / "_staging"))  # fmt: skip
    writer.replace_run("ground_truth", truth.unionByName(missed), GROUND_TRUTH, generation)

    missed_path = str(tmp_path / "ground_truth")
    assert cli.main(["score", "--warehouse", str(warehouse), "--ground-truth", missed_path]) == 1
    assert "NOT PERFECT" in capsys.readouterr().out
    (kind,) = [k for k in score(spark, str(warehouse), missed_path).kinds
               if k.name == "duplicate_in_cache"]  # fmt: skip
    assert (kind.planted - kind.reported, kind.unmatched) == (1, 0)
    assert cli.main(["score", "--warehouse", str(warehouse), "--ground-truth",
                     str(export.ground_truth)]) == EXIT_PERFECT  # fmt: skip


@pytest.fixture
def codegen(spark):
    """Code generation on for one test: the session turns it off for the suite's tiny queries,
    but 200,000 rows of the generator's wide expressions run 3-5x slower interpreted."""
    keys = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}
    before = {k: spark.conf.get(k, None) for k in keys}
    for k, v in keys.items():
        spark.conf.set(k, v)
    yield
    for k, v in before.items():
        if v is None:
            spark.conf.unset(k)
        else:
            spark.conf.set(k, v)


# The default plan's size: the smallest round size at which its default rates plant every fault
# kind (seed 0: at 200,000 slots each hanging-transaction kind 4 times, every other kind 7 or more;
# at 100,000 neither hanging kind). Scale itself is the benchmark's (`./run.sh bench`, 1M and 10M).
DEFAULT_PLAN_BATCHES = 200_000
# Rows per Arrow batch handed to the replay: a tenth of the run's own 100,000
# (eos_audit.session.REPLAY_ARROW_SETTINGS), so that at this size too every replay task's rows
# (about 100,000 on the suite's two shuffle partitions) cross several Arrow batches and each
# partition's producer state is carried from one batch to the next, as at 1M batches.
REPLAY_ROWS_PER_ARROW_BATCH = "10000"


@pytest.mark.cost(30)  # 200,000 batches generated, audited, scored
def test_the_default_plan_plants_every_kind_and_is_scored_perfect(
    spark, codegen, tmp_path, monkeypatch
):
    monkeypatch.setitem(
        session.REPLAY_ARROW_SETTINGS,
        "spark.sql.execution.arrow.maxRecordsPerBatch",
        REPLAY_ROWS_PER_ARROW_BATCH,
    )
    start = time.perf_counter()
    export = write_export(spark, GenerationPlan(batches=DEFAULT_PLAN_BATCHES), tmp_path / "export")
    generated = time.perf_counter()
    _audit(spark, export, tmp_path / "warehouse")
    audited = time.perf_counter()
    report = score(spark, str(tmp_path / "warehouse"), str(export.ground_truth))
    print(
        f"\n{DEFAULT_PLAN_BATCHES:,} batches: generate {generated - start:.1f}s, audit "
        f"{audited - generated:.1f}s, score {time.perf_counter() - audited:.1f}s\n"
        + "\n".join(report.lines())
    )
    planted = {k.name for k in report.kinds if k.planted}
    assert planted == set(FAULT_KINDS), f"not planted: {set(FAULT_KINDS) - planted}"
    assert report.perfect, "\n".join(report.lines())
