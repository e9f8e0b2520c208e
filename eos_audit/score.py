"""Precision and recall of an audit run against a generated export's ground truth.

`eos-audit score --warehouse W --ground-truth G` matches the run's findings with the ground truth
on (finding_type, cause, topic, partition, base_offset) and prints, per fault kind, how many
findings were planted, how many the audit reported, and its precision and recall, then the same
overall. The matching and counting run in Spark; only the per-kind counts (a few dozen rows) reach
the driver.

- recall of a kind: planted findings the audit reported / planted findings of the kind;
- precision of a kind: its matched findings / (its matched findings + the run's unmatched findings
  of the same finding type and cause). An unmatched finding whose type and cause no kind plants is
  listed on a line of its own, with precision 0.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from typing import TextIO

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eos_audit.errors import InputNotFoundError, InputSchemaError
from eos_audit.schemas import AUDIT_RUNS, FINDINGS, GROUND_TRUTH
from eos_audit.sinks.delta_reader import warehouse_table
from eos_audit.sinks.run_status import UNUSABLE_INPUT
from eos_audit.sources.files import filesystems as fsys

EXIT_PERFECT, EXIT_IMPERFECT = 0, 1
MATCH_KEY = ("finding_type", "cause", "topic", "partition", "base_offset")
FINISHED = ("SUCCEEDED", *UNUSABLE_INPUT)


def read_delta(spark: SparkSession, path: str, schema: T.StructType) -> DataFrame:
    """A Delta table by path or URI, in `schema`'s columns, read on the executors.

    Read as the warehouse's own tables are (`warehouse_table`): the audit's, or the generator's
    ground truth, both written by eos-audit.

    Raises:
        InputNotFoundError: there is no Delta table at `path`.
    """
    if not (fsys.is_uri(path) and not fsys.is_remote(path)) and not fsys.is_delta_table(path):
        raise InputNotFoundError(f"{path} is not a Delta table (no _delta_log)")
    return warehouse_table(spark, path, schema).select(*schema.fieldNames())


@dataclass(frozen=True)
class KindScore:
    """One line of the score: a fault kind, or unexpected findings of one type and cause."""

    name: str
    planted: int
    reported: int
    unmatched: int
    pairs: tuple[str, ...]

    @property
    def recall(self) -> float | None:
        """Reported planted findings / planted findings (None when nothing was planted)."""
        return self.reported / self.planted if self.planted else None

    @property
    def precision(self) -> float | None:
        """Matched / (matched + unmatched findings of the kind's types and causes)."""
        total = self.reported + self.unmatched
        return self.reported / total if total else None


@dataclass
class ScoreReport:
    """The score of one run against one generation."""

    run_id: str
    generation_id: str
    kinds: list[KindScore] = field(default_factory=list)
    findings: int = 0
    matched_findings: int = 0
    planted: int = 0
    matched_planted: int = 0

    @property
    def precision(self) -> float | None:
        """Findings that match a planted fault / all findings of the run."""
        return self.matched_findings / self.findings if self.findings else None

    @property
    def recall(self) -> float | None:
        """Planted findings the run reported / all planted findings."""
        return self.matched_planted / self.planted if self.planted else None

    @property
    def perfect(self) -> bool:
        """Precision and recall are 1.0 on every line and overall."""
        values = [self.precision, self.recall]
        for k in self.kinds:
            values += [k.precision, k.recall]
        return all(v is None or v == 1.0 for v in values) and self.planted > 0

    def lines(self) -> list[str]:
        """The printed table."""

        def pct(value: float | None) -> str:
            return "    n/a" if value is None else f"{value:7.4f}"

        width = max([len(k.name) for k in self.kinds] + [len("overall")])
        out = [
            f"run {self.run_id} against ground truth {self.generation_id}",
            "",
            f"{'fault kind'.ljust(width)}  planted  reported  unmatched  precision   recall",
        ]
        for k in self.kinds:
            out.append(
                f"{k.name.ljust(width)}  {k.planted:7d}  {k.reported:8d}  {k.unmatched:9d}  "
                f"  {pct(k.precision)}  {pct(k.recall)}"
            )
        out.append(
            f"{'overall'.ljust(width)}  {self.planted:7d}  {self.matched_planted:8d}  "
            f"{self.findings - self.matched_findings:9d}    {pct(self.precision)}  "
            f"{pct(self.recall)}"
        )
        out.append("")
        out.append(
            "PERFECT: precision and recall 1.0 on every kind"
            if self.perfect
            else "NOT PERFECT: see the lines below 1.0"
        )
        return out


def latest_finished_run(spark: SparkSession, warehouse: str) -> str:
    """The run id of the warehouse's latest finished run (by finished_at).

    Raises:
        InputNotFoundError: the warehouse has no finished run.
    """
    runs = read_delta(spark, f"{warehouse}/audit_runs", AUDIT_RUNS)
    row = (
        runs.where(F.col("status").isin(*FINISHED))
        .orderBy(F.col("finished_at").desc())
        .select("run_id")
        .head()
    )
    if row is None:
        raise InputNotFoundError(f"{warehouse}/audit_runs holds no finished run")
    return row["run_id"]


def _generation(ground_truth: DataFrame, generation_id: str | None, path: str) -> str:
    ids = [r["run_id"] for r in ground_truth.select("run_id").distinct().collect()]
    if generation_id is not None:
        if generation_id not in ids:
            raise InputSchemaError(f"{path} holds no generation {generation_id}; it holds {ids}")
        return generation_id
    if len(ids) != 1:
        raise InputSchemaError(
            f"{path} holds {len(ids)} generations ({', '.join(sorted(ids)) or 'none'}); "
            "name one with --generation"
        )
    return ids[0]


def match_counts(findings: DataFrame, ground_truth: DataFrame) -> DataFrame:
    """Planted, reported and unmatched counts per (fault_kind, finding_type, cause).

    Findings and planted rows are counted per match key first, so a key planted once and
    reported twice gives one match and one unmatched finding. `fault_kind` is null on the rows of
    findings that match no planted key.
    """
    planted = ground_truth.groupBy("fault_kind", *MATCH_KEY).agg(F.count("*").alias("planted"))
    reported = findings.groupBy(*MATCH_KEY).agg(F.count("*").alias("reported"))
    p, r = planted.alias("p"), reported.alias("r")
    on = [F.col(f"p.{c}").eqNullSafe(F.col(f"r.{c}")) for c in MATCH_KEY]
    condition = on[0]
    for more in on[1:]:
        condition = condition & more
    joined = p.join(r, condition, "full_outer").select(
        F.col("p.fault_kind").alias("fault_kind"),
        F.coalesce(F.col("p.finding_type"), F.col("r.finding_type")).alias("finding_type"),
        F.when(F.col("p.fault_kind").isNotNull(), F.col("p.cause"))
        .otherwise(F.col("r.cause"))
        .alias("cause"),
        F.coalesce(F.col("planted"), F.lit(0)).alias("planted"),
        F.coalesce(F.col("reported"), F.lit(0)).alias("found"),
    )
    matched = F.least(F.col("planted"), F.col("found"))
    return joined.groupBy("fault_kind", "finding_type", "cause").agg(
        F.sum("planted").alias("planted"),
        F.sum(matched).alias("matched"),
        F.sum(F.col("found") - matched).alias("unmatched"),
        F.sum("found").alias("found"),
    )


def score(
    spark: SparkSession,
    warehouse: str,
    ground_truth_path: str,
    run_id: str | None = None,
    generation_id: str | None = None,
) -> ScoreReport:
    """Score one audit run against one generation's ground truth.

    Args:
        spark: the session.
        warehouse: the audit's warehouse (its `findings` and `audit_runs` tables).
        ground_truth_path: the `ground_truth` Delta table `eos-audit generate` wrote.
        run_id: the run to score (default: the warehouse's latest finished run).
        generation_id: the generation to score against (default: the table's only one).

    Returns:
        The score per fault kind and overall.
    """
    run_id = run_id or latest_finished_run(spark, warehouse)
    truth = read_delta(spark, ground_truth_path, GROUND_TRUTH)
    generation_id = _generation(truth, generation_id, ground_truth_path)
    truth = truth.where(F.col("run_id") == generation_id)
    findings = read_delta(spark, f"{warehouse}/findings", FINDINGS).where(F.col("run_id") == run_id)
    rows = [r.asDict() for r in match_counts(findings, truth).collect()]  # a few dozen rows
    unmatched_by_pair: dict[tuple[str, str | None], int] = {}
    for r in rows:
        pair = (r["finding_type"], r["cause"])
        unmatched_by_pair[pair] = unmatched_by_pair.get(pair, 0) + int(r["unmatched"])
    kinds: dict[str, dict] = {}
    for r in rows:
        if r["fault_kind"] is None:
            continue
        k = kinds.setdefault(r["fault_kind"], {"planted": 0, "reported": 0, "pairs": set()})
        k["planted"] += int(r["planted"])
        k["reported"] += int(r["matched"])
        k["pairs"].add((r["finding_type"], r["cause"]))
    report = ScoreReport(run_id=run_id, generation_id=generation_id)
    for name in sorted(kinds):
        k = kinds[name]
        report.kinds.append(
            KindScore(
                name=name,
                planted=k["planted"],
                reported=k["reported"],
                # A shared (type, cause) charges its unmatched findings to every kind planting
                # it: conservative, never flattering.
                unmatched=sum(unmatched_by_pair.get(pair, 0) for pair in k["pairs"]),
                pairs=tuple(sorted(f"{t}/{c}" for t, c in k["pairs"])),
            )
        )
    planted_pairs = {pair for k in kinds.values() for pair in k["pairs"]}
    for (finding_type, cause), count in sorted(unmatched_by_pair.items(), key=str):
        if count and (finding_type, cause) not in planted_pairs:
            report.kinds.append(
                KindScore(
                    name=f"(unexpected {finding_type}/{cause or '-'})",
                    planted=0,
                    reported=0,
                    unmatched=count,
                    pairs=(f"{finding_type}/{cause}",),
                )
            )
    report.findings = sum(int(r["found"]) for r in rows)
    report.matched_findings = sum(int(r["matched"]) for r in rows)
    report.planted = sum(int(r["planted"]) for r in rows)
    report.matched_planted = report.matched_findings
    return report


def add_score_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register `eos-audit score` on the CLI's subcommands."""
    parser = commands.add_parser(
        "score",
        help="precision and recall of an audit run against a generated export's ground truth",
        description="Match a run's findings with the ground truth of `eos-audit generate` on "
        "(finding_type, cause, topic, partition, base_offset) and print precision and recall per "
        "fault kind and overall. Exit code 0 when every precision and recall is 1.0, 1 when any "
        "is below 1.0 (or nothing was planted), 2 on bad usage or input.",
    )
    parser.add_argument("--warehouse", required=True, metavar="DIR", help="the audit's warehouse")
    parser.add_argument(
        "--ground-truth", required=True, metavar="DIR",
        help="the ground_truth Delta table eos-audit generate wrote (<export>/ground_truth)",
    )  # fmt: skip
    parser.add_argument("--run-id", help="the run to score (default: the latest finished run)")
    parser.add_argument(
        "--generation", help="the generation to score against (default: the table's only one)"
    )
    return parser


def run_score(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """`eos-audit score`: print the score; 0 when perfect, else 1."""
    from eos_audit.session import get_spark

    report = score(get_spark(), args.warehouse, args.ground_truth, args.run_id, args.generation)
    print("\n".join(report.lines()), file=out or sys.stdout)
    return EXIT_PERFECT if report.perfect else EXIT_IMPERFECT
