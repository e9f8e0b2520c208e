"""`eos-audit generate`: write a synthetic export with its ground truth."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import TextIO

from eos_audit.errors import ConfigError
from eos_audit.generate.plan import FAULT_KINDS, FaultRates, GenerationPlan

# Above this, batches are written as Parquet only: segments and dump-log text are built on the
# driver (kept small on purpose, see eos_audit.generate.files).
FILES_MAX_BATCHES = 200_000


def add_generate_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register `eos-audit generate` on the CLI's subcommands."""
    defaults = GenerationPlan(batches=1)
    rate_names = ", ".join(f.name for f in dataclasses.fields(FaultRates))
    parser = commands.add_parser(
        "generate",
        help="write a synthetic export with injected faults and their ground truth",
        description="Write a synthetic Kafka export computed by Spark (Parquet record batches, "
        "acks, ListOffsets observations), the audit configuration that matches it, and a "
        "ground_truth Delta table of every injected fault; with --files, also broker partition "
        "directories and kafka-dump-log.sh text (at most "
        f"{FILES_MAX_BATCHES:,} batches). Fault kinds: {', '.join(FAULT_KINDS)}.",
    )
    parser.add_argument("--output", required=True, metavar="DIR", help="where to write it")
    parser.add_argument("--batches", required=True, type=int, help="batch slots to generate")
    parser.add_argument("--topics", type=int, default=defaults.topics)
    parser.add_argument("--partitions", type=int, default=defaults.partitions, help="per topic")
    parser.add_argument("--producers", type=int, default=defaults.producers, help="per partition")
    parser.add_argument("--hot-producers", type=int, default=defaults.hot_producers)
    parser.add_argument(
        "--hot-weight", type=int, default=defaults.hot_weight,
        help="how many times as often a hot producer writes",
    )  # fmt: skip
    parser.add_argument(
        "--hot-partition-share", type=float, default=defaults.hot_partition_share,
        help="share of all batches in the one hot partition",
    )  # fmt: skip
    parser.add_argument("--compacted-topics", type=int, default=defaults.compacted_topics)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument(
        "--ack-share", type=float, default=defaults.ack_share,
        help="share of producer sessions whose send results are logged in the acks",
    )  # fmt: skip
    parser.add_argument(
        "--fault-scale", type=float, default=1.0, help="multiply every fault rate by this"
    )
    parser.add_argument(
        "--rate", action="append", default=[], metavar="NAME=VALUE",
        help=f"set one fault rate (after --fault-scale); names: {rate_names}",
    )  # fmt: skip
    parser.add_argument(
        "--files", action="store_true",
        help="also write segments (<output>/segments) and dump-log text (<output>/dump-log)",
    )  # fmt: skip
    return parser


def plan_from_args(args: argparse.Namespace) -> GenerationPlan:
    """The generation plan the arguments describe.

    Raises:
        ConfigError: a rate name or value is not valid, or the plan is impossible.
    """
    rates = FaultRates().scaled(args.fault_scale)
    known = {f.name for f in dataclasses.fields(FaultRates)}
    overrides = {}
    for item in args.rate:
        name, _, value = item.partition("=")
        if name not in known:
            raise ConfigError(f"--rate {item}: unknown rate; known: {', '.join(sorted(known))}")
        try:
            overrides[name] = float(value)
        except ValueError as exc:
            raise ConfigError(f"--rate {item}: {value!r} is not a number") from exc
    if overrides:
        rates = dataclasses.replace(rates, **overrides)._capped()
    if args.files and args.batches > FILES_MAX_BATCHES:
        raise ConfigError(
            f"--files writes segments and dump-log text on the driver: at most "
            f"{FILES_MAX_BATCHES:,} batches (asked {args.batches:,}); drop --files for Parquet"
        )
    return GenerationPlan(
        batches=args.batches,
        topics=args.topics,
        partitions=args.partitions,
        producers=args.producers,
        hot_producers=args.hot_producers,
        hot_weight=args.hot_weight,
        hot_partition_share=args.hot_partition_share,
        compacted_topics=args.compacted_topics,
        seed=args.seed,
        rates=rates,
        ack_share=args.ack_share,
    )


def run_generate(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """`eos-audit generate`: write the export, print where and how to audit and score it."""
    from pyspark.sql import functions as F

    from eos_audit.generate.spark_export import write_export
    from eos_audit.schemas import GROUND_TRUTH
    from eos_audit.score import read_delta
    from eos_audit.session import get_spark

    out = out or sys.stdout
    plan = plan_from_args(args)
    spark = get_spark()
    export = write_export(spark, plan, args.output)
    if args.files:
        from eos_audit.generate.files import write_files

        files = write_files(spark, export)
        print(f"segments: {files.segments}\ndump-log text: {files.dump_log}", file=out)
    counts = (
        read_delta(spark, str(export.ground_truth), GROUND_TRUTH)
        .where(F.col("run_id") == export.generation_id)
        .groupBy("fault_kind")
        .count()
        .orderBy("fault_kind")
        .collect()  # one row per fault kind
    )
    print(f"generation {export.generation_id}: {export.directory}", file=out)
    print(f"ground truth ({sum(r['count'] for r in counts)} findings planted):", file=out)
    for r in counts:
        print(f"  {r['fault_kind']:<28} {r['count']:8d}", file=out)
    audit = " ".join(["eos-audit audit", *export.audit_arguments(), "--warehouse", "WAREHOUSE"])
    print(f"audit it:  {audit}", file=out)
    print(
        f"score it:  eos-audit score --warehouse WAREHOUSE --ground-truth {export.ground_truth}",
        file=out,
    )
    return 0
