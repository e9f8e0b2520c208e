"""Each check of the processing stage timed alone, over the bench's `__consumer_offsets` records.

    .venv/bin/python -m bench.processing_checks --records 1000000 --repeat 3

Where `./run.sh bench --offset-commits N` gives the processing stage as one figure, this says
where it goes: the records and the replay's history staged as the pipeline stages them
(`pipeline._staged_replay`), then, in every round, each check of
`processing.checks.processing_checks` built (its intermediate stagings included, as they run
while it is built) and its findings run into the no-op sink, and the two tables the stage adds.
The checks read an empty batch-audit stage, as the bench's stage line does (its records and
batches share no topic). One warm session with the bench's settings; the first round warms it
and is printed but not in the least. Never part of the test run.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace


def main() -> None:
    """The command: stage the records, then time every check in each round."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from bench import offset_commits
    from eos_audit.audit import output_records, pipeline
    from eos_audit.config import AuditConfig
    from eos_audit.processing.checks import CheckInputs, processing_checks
    from eos_audit.processing.coordinator_audit import (
        consumer_offsets_table,
        transaction_log_table,
    )
    from eos_audit.session import REPLAY_ARROW_SETTINGS, get_spark
    from eos_audit.sources.tabular.coordinator_records import read_coordinator_records_table

    data = offset_commits.ensure_data(args.records)
    spark = get_spark("eos-audit-bench")
    spark.conf.set("spark.sql.shuffle.partitions", "16")  # as bench/run.py
    for key, value in REPLAY_ARROW_SETTINGS.items():
        spark.conf.set(key, value)
    root = Path(tempfile.mkdtemp(prefix="eos-bench-checks-"))
    try:
        stage = SimpleNamespace(subdir=lambda name: str(root / name))
        started = time.perf_counter()
        coordinator = read_coordinator_records_table(spark, [str(data)])
        records, history = pipeline._staged_replay(spark, coordinator, stage)
        print(f"records and history staged: {time.perf_counter() - started:.2f} s (first, cold)")
        staged = str(root / "staged")
        spark.createDataFrame([], output_records.OUTPUT_RECORD).write.parquet(staged)
        audited = spark.read.schema(output_records.OUTPUT_RECORD).parquet(staged)
        inputs = CheckInputs(
            records, history, output_records.transactions_of(audited),
            output_records.partition_summary_of(audited), AuditConfig(), "bench",
        )  # fmt: skip
        rounds: dict[str, list[tuple[float, float]]] = {}
        for round_number in range(args.repeat):
            folder = root / f"round-{round_number}"

            def staged_as(name: str, folder: Path = folder):
                return lambda part: pipeline.checked_once(spark, part, str(folder / name))

            lines = {
                **processing_checks(inputs, staged_as),
                "consumer_offsets table": lambda: consumer_offsets_table(history, "bench"),
                "transaction_log table": lambda: transaction_log_table(records, "bench"),
            }
            for name, build in lines.items():
                begun = time.perf_counter()
                frame = build()
                built = time.perf_counter() - begun
                if frame is not None:
                    frame.write.format("noop").mode("overwrite").save()
                ran = time.perf_counter() - begun - built
                rounds.setdefault(name, []).append((built, ran))
        print(f"{args.records:,} records, {args.repeat} rounds; the least after the first")
        print(f"  {'check':32s} {'build s':>8s} {'run s':>7s}   every round (build+run)")
        for name, runs in rounds.items():
            timed = runs[1:] or runs
            every = "  ".join(f"{b + r:5.2f}" for b, r in runs)
            print(
                f"  {name:32s} {min(b for b, _ in timed):8.2f} {min(r for _, r in timed):7.2f}"
                f"   {every}"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
