"""A large fuzz corpus through the three Kafka readers' parsers, without Spark (issue 12).

    .venv/bin/python bench/fuzz_corpus.py                      # 100,000 inputs, 2 processes
    .venv/bin/python bench/fuzz_corpus.py --inputs 1000000 --processes 8 --seed 7
    .venv/bin/python bench/fuzz_corpus.py --corpus trust --inputs 20000   # seeds and warehouse

Every input (a segment truncated at a random byte, a flipped bit, random batch lengths and magic
values, random bytes; damaged and random snapshots; damaged and random checkpoint text; damaged
`kafka-dump-log.sh` output, random lines, very long lines, invalid UTF-8) is parsed and checked
against the invariants of `tests/fuzz/corpus.py`. Prints how many inputs of each kind ran and every
distinct violation found, with one input that shows it (kind, input number, message); exits 1 when
anything was found. Deterministic for a seed.

`--corpus trust` runs the seeds' and the warehouse's corpus instead (issue 27,
`tests/fuzz/trust_corpus.py`): `--inputs` damaged warehouse tables, seed files and schemas through
the driver-side checks (no Spark), then `--inputs` random seed rows through the seed checks and
`--inputs` random JSON lines through the seed file reader, each set as one Spark DataFrame on a
local session (`--no-spark` skips them).
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CHUNK = 2_000


def run_chunk(args: tuple[str, int, int, int]) -> tuple[collections.Counter, dict]:
    """Inputs [start, stop) of the corpus of `seed`: (inputs per kind, violations)."""
    if args[0] == "trust":
        from tests.fuzz.trust_corpus import generate
    else:
        from tests.fuzz.corpus import generate

    _, seed, start, stop = args
    kinds: collections.Counter = collections.Counter()
    found: dict[tuple[str, str], tuple[int, int, str]] = {}
    for number in range(start, stop):
        kind, check = generate(random.Random(seed * 1_000_003 + number))
        kinds[kind] += 1
        for problem in check():
            key = (kind, problem.split(":")[0][:80])
            count, first, message = found.get(key, (0, number, problem))
            found[key] = (count + 1, first, message)
    return kinds, found


def main(argv: list[str] | None = None) -> int:
    """Run the corpus and print what it found."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--inputs", type=int, default=100_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--corpus", choices=("readers", "trust"), default="readers")
    parser.add_argument("--no-spark", action="store_true", help="trust: only the pure checks")
    args = parser.parse_args(argv)
    chunks = [
        (args.corpus, args.seed, s, min(s + CHUNK, args.inputs))
        for s in range(0, args.inputs, CHUNK)
    ]
    started = time.monotonic()
    kinds: collections.Counter = collections.Counter()
    found: dict[tuple[str, str], tuple[int, int, str]] = {}
    with multiprocessing.Pool(args.processes) as pool:
        for chunk_kinds, chunk_found in pool.imap_unordered(run_chunk, chunks):
            kinds.update(chunk_kinds)
            for key, (count, first, message) in chunk_found.items():
                old = found.get(key, (0, first, message))
                found[key] = (old[0] + count, min(old[1], first), old[2])
    if args.corpus == "trust" and not args.no_spark:
        for kind, problems in _spark_cases(args.inputs, args.seed):
            kinds[kind] += args.inputs
            for problem in problems:
                key = (kind, problem.split(":")[0][:80])
                count, first, message = found.get(key, (0, 0, problem))
                found[key] = (count + 1, first, message)
    elapsed = time.monotonic() - started
    total = sum(kinds.values())
    print(f"fuzz corpus: {total} inputs in {elapsed:.0f} s (seed {args.seed})")
    for kind, count in sorted(kinds.items()):
        print(f"  {kind:<20} {count:>9}")
    if not found:
        print("found nothing: no exception escaped, every invariant held")
        return 0
    print(f"found {sum(c for c, _, _ in found.values())} violations, {len(found)} distinct:")
    for (kind, _), (count, first, message) in sorted(found.items()):
        print(f"  {count:>7} x {kind}, first at input {first}: {message}")
    return 1


def _spark_cases(count: int, seed: int) -> list[tuple[str, list[str]]]:
    """The trust corpus's Spark cases: `count` seed rows and `count` JSON lines, one job each."""
    import random

    from eos_audit.session import get_spark
    from tests.fuzz.trust_corpus import check_seed_json, check_seed_values

    spark = get_spark()
    return [
        ("seed-values", check_seed_values(spark, random.Random(seed), count)),
        ("seed-json-lines", check_seed_json(spark, random.Random(seed + 1), count)),
    ]


if __name__ == "__main__":
    sys.exit(main())
