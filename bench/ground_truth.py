"""Precision and recall of the audit on a generated export: `python -m bench.ground_truth`.

    .venv/bin/python -m bench.ground_truth --rows 50000000
    .venv/bin/python -m bench.ground_truth --rows 1000000 --seed 3

Generates the export once (cached under bench/data/gt-<rows>-<seed>, reused while the plan is the
same), audits it with `run_audit` into a temporary warehouse, scores the run against the ground
truth, prints precision and recall per fault kind with the time of each step, and appends the
figures to bench/results/results.jsonl. Exit code 0 when every precision and recall is 1.0.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=50_000_000, help="batch slots to generate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the warehouse (printed)")
    args = parser.parse_args()

    from eos_audit.audit.pipeline import AuditInputs, run_audit
    from eos_audit.config import load_config
    from eos_audit.generate.plan import GenerationPlan
    from eos_audit.generate.spark_export import export_layout, write_export
    from eos_audit.score import score
    from eos_audit.session import get_spark

    spark = get_spark("eos-audit-bench-ground-truth")
    plan = GenerationPlan(batches=args.rows, seed=args.seed)
    data = HERE / "data" / f"gt-{args.rows}-{args.seed}"
    manifest = data / "manifest.json"
    generate_s = None
    cached = manifest.exists() and json.loads(manifest.read_text())["plan"] == json.loads(
        json.dumps(plan.to_json())
    )
    if not cached:
        shutil.rmtree(data, ignore_errors=True)
        start = time.perf_counter()
        write_export(spark, plan, data)
        generate_s = time.perf_counter() - start
    export = export_layout(plan, data)
    warehouse = Path(tempfile.mkdtemp(prefix="eos-bench-gt-"))
    try:
        inputs = AuditInputs(
            batches=(str(export.batches),),
            acks=(str(export.acks),),
            list_offsets=(str(export.list_offsets),),
            export_time=export.export_time,
        )
        start = time.perf_counter()
        result = run_audit(spark, inputs, load_config(str(export.conf)), str(warehouse), "gt")
        audit_s = time.perf_counter() - start
        start = time.perf_counter()
        report = score(spark, str(warehouse), str(export.ground_truth), run_id="gt")
        score_s = time.perf_counter() - start
    finally:
        if not args.keep:
            shutil.rmtree(warehouse, ignore_errors=True)
    print("\n".join(report.lines()))
    gen = "cached" if generate_s is None else f"{generate_s:.1f}s"
    print(
        f"\n{args.rows:,} batch slots ({result.batches_read:,} batches): generate {gen}, "
        f"audit {audit_s:.1f}s ({result.batches_read / audit_s:,.0f} batches/s), "
        f"score {score_s:.1f}s" + (f"; warehouse {warehouse}" if args.keep else "")
    )
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    with (out / "results.jsonl").open("a") as f:
        f.write(
            json.dumps(
                {
                    "bench": "ground_truth",
                    "rows": args.rows,
                    "seed": args.seed,
                    "batches": result.batches_read,
                    "generate_s": None if generate_s is None else round(generate_s, 2),
                    "audit_s": round(audit_s, 2),
                    "score_s": round(score_s, 2),
                    "planted": report.planted,
                    "precision": report.precision,
                    "recall": report.recall,
                    "perfect": report.perfect,
                    "kinds": {
                        k.name: [k.planted, k.precision, k.recall] for k in report.kinds
                    },
                    "spark": spark.version,
                    "machine": platform.node(),
                    "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                }
            )
            + "\n"
        )
    return 0 if report.perfect else 1


if __name__ == "__main__":
    sys.exit(main())
