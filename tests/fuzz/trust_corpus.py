"""Fuzz inputs for the seeds and the warehouse (issue 27), and the invariants each check keeps.

Shared by the in-suite sample (`tests/fuzz/test_fuzz_trust.py`) and the large corpus
(`bench/fuzz_corpus.py --corpus trust`). Two families:

- pure-Python cases, one per input (`generate`): a damaged warehouse table (a commit cut at any
  byte, bytes flipped or replaced in it, a data file deleted, cut or replaced, the checkpoint
  pointer garbled) through `check_table`, which must refuse it with `DamagedTableError` or pass
  it, and a table it passes must read whole (as many rows as were written); a seed file of
  random or damaged bytes through `check_parquet_files` and its footer; a random schema through
  `check_seed_schema`, which must refuse it with `InputSchemaError` or pass it, and a schema it
  passes must hold the contract's required columns in usable types.
- Spark cases, all rows in one DataFrame (`seed_value_rows`, `seed_json_lines`): random seed
  values (every limit of kafka_rules.md §1.2/§3.2, one either side, extremes) through
  `check_seeds`, whose verdict must equal an independent Python statement of the same ranges
  (`seed_problem`), and random JSON lines through the file reader, where every line must come
  out as a seed or a quarantine row.

No case may raise anything else: that would be an internal error (exit 3).
"""

from __future__ import annotations

import atexit
import json
import random
import re
import shutil
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import types as T

from eos_audit.errors import InputSchemaError
from eos_audit.sinks.warehouse import DamagedTableError, check_table
from eos_audit.sources.tabular import contract_reader as cr
from eos_audit.sources.tabular.producer_state import CONTRACT, check_seed_schema

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)
TABLE_ROWS = 12  # rows the template table holds (3 commits of 4)
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


# ------------------------------------------------------------------------------------------------
# Templates, made once per process
# ------------------------------------------------------------------------------------------------
@cache
def template_table() -> Path:
    """A small Delta table written by delta-rs: three appends and an overwrite of one run."""
    from deltalake import write_deltalake

    work = tempfile.mkdtemp(prefix="eos-fuzz-table-")
    # Made once per process and kept for its cases: removed as the process ends, so runs leave
    # nothing behind in the temporary folder (each run left one per worker before).
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    root = Path(work) / "t"
    for run in range(3):
        rows = pa.table({"run_id": [f"r{run}"] * 4, "value": list(range(4))})
        write_deltalake(str(root), rows, mode="append")
    rows = pa.table({"run_id": ["r2"] * 4, "value": list(range(10, 14))})
    write_deltalake(str(root), rows, mode="overwrite", predicate="run_id = 'r2'")
    return root


@cache
def template_seed_parquet() -> bytes:
    """A valid seed file's bytes."""
    batches = [{"base_sequence": 0, "last_sequence": 2, "base_offset": 5, "last_offset": 7}]
    table = pa.table(
        {
            "topic": ["t"],
            "partition": [0],
            "producer_id": [1],
            "producer_epoch": [0],
            "batches": [batches],
        }
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def flip(data: bytes, rng: random.Random, count: int = 1) -> bytes:
    """`count` random bytes replaced by random values."""
    out = bytearray(data)
    for _ in range(count):
        if out:
            out[rng.randrange(len(out))] = rng.randrange(256)
    return bytes(out)


# ------------------------------------------------------------------------------------------------
# Warehouse tables
# ------------------------------------------------------------------------------------------------
def damage_table(root: Path, rng: random.Random) -> str:
    """Damage a copy of the template table in place; returns what was done."""
    log = root / "_delta_log"
    commits = sorted(log.glob("*.json"))
    files = sorted(p for p in root.glob("*.parquet"))
    kind = rng.randrange(8)
    if kind <= 1:  # a commit cut at any byte (the latest, most often)
        commit = commits[-1] if kind == 0 else rng.choice(commits)
        data = commit.read_bytes()
        commit.write_bytes(data[: rng.randint(0, len(data))])
        return f"cut {commit.name}"
    if kind == 2:
        commit = rng.choice(commits)
        commit.write_bytes(flip(commit.read_bytes(), rng, rng.randint(1, 4)))
        return f"flipped {commit.name}"
    if kind == 3:
        commit = rng.choice(commits)
        commit.write_bytes(rng.randbytes(rng.randint(0, 300)))
        return f"random {commit.name}"
    if kind == 4:
        file = rng.choice(files)
        file.unlink()
        return f"deleted {file.name}"
    if kind == 5:
        file = rng.choice(files)
        data = file.read_bytes()
        file.write_bytes(data[: rng.randint(0, len(data) - 1)])
        return f"cut {file.name}"
    if kind == 6:
        file = rng.choice(files)
        file.write_bytes(rng.randbytes(file.stat().st_size))
        return f"replaced {file.name}"
    (log / "_last_checkpoint").write_bytes(rng.randbytes(rng.randint(0, 60)))
    return "garbled _last_checkpoint"


def check_damaged_table(rng: random.Random) -> list[str]:
    """One damaged table through `check_table`: refused, or passed and readable whole."""
    from deltalake import DeltaTable

    work = Path(tempfile.mkdtemp(prefix="eos-fuzz-"))
    try:
        root = work / "t"
        shutil.copytree(template_table(), root)
        what = damage_table(root, rng)
        try:
            check_table(str(root), "warehouse table")
        except DamagedTableError as exc:
            text = str(exc)
            if str(root) not in text or "\n" in text:
                return [f"message does not name the table on one line ({what}): {text[:200]}"]
            return []
        except Exception as exc:  # noqa: BLE001 - the finding itself
            return [f"internal error ({what}): {type(exc).__name__}: {str(exc)[:200]}"]
        try:
            rows = DeltaTable(str(root)).to_pyarrow_table().num_rows
        except Exception as exc:  # noqa: BLE001 - the finding itself
            return [f"passed but unreadable ({what}): {type(exc).__name__}: {str(exc)[:120]}"]
        if rows != TABLE_ROWS:
            return [f"passed but read {rows} of {TABLE_ROWS} rows ({what})"]
        return []
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ------------------------------------------------------------------------------------------------
# Seed files and schemas
# ------------------------------------------------------------------------------------------------
def check_seed_bytes(rng: random.Random) -> list[str]:
    """Random or damaged bytes as a seed Parquet file through the driver-side file checks."""
    template = template_seed_parquet()
    choice = rng.randrange(3)
    if choice == 0:
        data = template[: rng.randint(0, len(template))]
    elif choice == 1:
        data = flip(template, rng, rng.randint(1, 3))
    else:
        data = b"PAR1" + rng.randbytes(rng.randint(0, 200)) + b"PAR1"
    work = Path(tempfile.mkdtemp(prefix="eos-fuzz-"))
    try:
        path = work / "state.parquet"
        path.write_bytes(data)
        try:
            cr.check_parquet_files([str(path)], CONTRACT)
        except InputSchemaError:
            return []
        except Exception as exc:  # noqa: BLE001 - the finding itself
            return [f"internal error: {type(exc).__name__}: {str(exc)[:200]}"]
        return []
    finally:
        shutil.rmtree(work, ignore_errors=True)


_NAMES = (*CONTRACT.columns, "base_offset", "last_offset", "x")
_LEAVES = (
    T.ByteType(), T.ShortType(), T.IntegerType(), T.LongType(), T.StringType(), T.DoubleType(),
    T.BooleanType(), T.DecimalType(20, 0), T.BinaryType(), T.TimestampType(), T.NullType(),
)  # fmt: skip


def random_type(rng: random.Random, depth: int = 0) -> T.DataType:
    """A random Spark type; near the contract's batches type now and then."""
    roll = rng.random()
    if depth < 2 and roll < 0.2:
        return T.ArrayType(random_type(rng, depth + 1))
    if depth < 2 and roll < 0.35:
        names = rng.sample(["base_sequence", "last_sequence", "base_offset", "last_offset", "y"],
                           rng.randint(0, 5))  # fmt: skip
        return T.StructType([T.StructField(n, random_type(rng, depth + 1)) for n in names])
    return rng.choice(_LEAVES)


def check_random_schema(rng: random.Random) -> list[str]:
    """A random schema through `check_seed_schema`: refused with InputSchemaError, or usable."""
    names = rng.sample(_NAMES, rng.randint(0, len(_NAMES)))
    if rng.random() < 0.5:  # most of the contract, so the type checks are reached
        names = list(dict.fromkeys([*CONTRACT.required, *names]))
    schema = T.StructType([T.StructField(n, random_type(rng)) for n in names])
    try:
        check_seed_schema(schema, "fuzz.parquet")
    except InputSchemaError as exc:
        return [] if "\n" not in str(exc) else [f"message of several lines: {exc}"]
    except Exception as exc:  # noqa: BLE001 - the finding itself
        return [f"internal error: {type(exc).__name__}: {str(exc)[:200]}"]
    problems = [f"passed without {c}" for c in CONTRACT.required if c not in schema.fieldNames()]
    batches = schema["batches"].dataType if "batches" in schema.fieldNames() else None
    if not isinstance(batches, T.ArrayType) or not isinstance(batches.elementType, T.StructType):
        problems.append(f"passed a batches column of type {batches}")
    return problems


def generate(rng: random.Random) -> tuple[str, Callable[[], list[str]]]:
    """One pure-Python fuzz input and its check: (kind, check)."""
    roll = rng.randrange(10)
    if roll < 6:
        return "warehouse-table", lambda: check_damaged_table(rng)
    if roll < 8:
        return "seed-schema", lambda: check_random_schema(rng)
    return "seed-file-bytes", lambda: check_seed_bytes(rng)


# ------------------------------------------------------------------------------------------------
# Seed values and JSON lines (one Spark DataFrame for all)
# ------------------------------------------------------------------------------------------------
def _edge(rng: random.Random, limits: tuple[int, ...]) -> int | None:
    roll = rng.random()
    if roll < 0.08:
        return None
    if roll < 0.7:
        limit = rng.choice(limits)
        value = limit + rng.choice((-1, 0, 0, 1))
        return max(LONG_MIN, min(LONG_MAX, value))
    return rng.randint(LONG_MIN, LONG_MAX) if rng.random() < 0.3 else rng.randint(-5, 100)


def _random_batch(rng: random.Random) -> dict | None:
    if rng.random() < 0.03:
        return None
    if rng.random() < 0.6:  # a consistent batch, which must pass when the rest is in range
        last_seq = rng.choice((rng.randint(0, 100), rng.randint(0, INT_MAX)))
        span = rng.randint(0, 50)
        base_offset = rng.choice((rng.randint(0, 1000), rng.randint(0, LONG_MAX - 60)))
        first = last_seq - span if last_seq >= span else INT_MAX - (span - last_seq) + 1
        return {
            "base_sequence": first,
            "last_sequence": last_seq,
            "base_offset": base_offset,
            "last_offset": base_offset + span,
        }
    edges = (0, -1, INT_MAX, LONG_MAX, LONG_MIN, 5)
    return {n: _edge(rng, edges) for n in ("base_sequence", "last_sequence", "base_offset",
                                           "last_offset")}  # fmt: skip


def random_seed_row(rng: random.Random, number: int) -> dict:
    """A seed row with every integer as a long: limits, one either side, extremes, nulls."""
    topic = rng.choice(("t", "orders.v1", "a b", "", "x" * 250, None, "ok-topic_2"))
    return {
        "topic": topic,
        "partition": _edge(rng, (0, INT_MAX)),
        "producer_id": number,  # a key to match verdicts; its own range is exercised below
        "producer_epoch": _edge(rng, (-1, 32767)),
        "coordinator_epoch": _edge(rng, (-1, INT_MAX)),
        "txn_first_offset": _edge(rng, (0, LONG_MAX)),
        "last_timestamp": _edge(rng, (-1, LONG_MAX)),
        "batches": None
        if rng.random() < 0.05
        else [_random_batch(rng) for _ in range(rng.choice((0, 1, 2, 5, 6)))],
        "state_offset": _edge(rng, (0, LONG_MAX)),
        "source": "fuzz",
        "run_id": None,
    }


def _out(value: int | None, low: int, high: int, nullable: bool) -> bool:
    return (value is None and not nullable) or (value is not None and not low <= value <= high)


def seed_problem(row: dict) -> bool:
    """Whether a seed row breaks a range of kafka_rules.md §1.2/§3.2 (an independent statement)."""
    topic = row["topic"]
    if topic is None or not _TOPIC.match(topic):
        return True
    if (
        _out(row["partition"], 0, INT_MAX, False)
        or _out(row["producer_id"], 0, LONG_MAX, False)
        or _out(row["producer_epoch"], -1, 32767, False)
        or _out(row["coordinator_epoch"], -1, INT_MAX, True)
        or _out(row["txn_first_offset"], 0, LONG_MAX, True)
        or _out(row["last_timestamp"], -1, LONG_MAX, True)
        or _out(row["state_offset"], 0, LONG_MAX, True)
    ):
        return True
    batches = row["batches"] or []
    if len(batches) > 5:
        return True
    for b in batches:
        if b is None or any(v is None for v in b.values()):
            return True
        if not (0 <= b["base_sequence"] <= INT_MAX and 0 <= b["last_sequence"] <= INT_MAX):
            return True
        if not (0 <= b["base_offset"] <= b["last_offset"]):
            return True
        span, last = b["last_offset"] - b["base_offset"], b["last_sequence"]
        first = last - span if last >= span else INT_MAX - (span - last) + 1
        if b["base_sequence"] != first:
            return True
    return False


def seed_json_lines(rng: random.Random, count: int) -> list[str]:
    """JSON lines for a seed file: valid rows, damaged rows, random text, wrong shapes."""
    lines = []
    for number in range(count):
        row = random_seed_row(rng, number)
        roll = rng.random()
        if roll < 0.5:
            lines.append(json.dumps({k: v for k, v in row.items() if v is not None}))
        elif roll < 0.65:
            text = json.dumps(row)
            lines.append(text[: rng.randint(1, len(text))])
        elif roll < 0.75:
            text = rng.randbytes(rng.randint(1, 40)).decode("latin-1")
            lines.append(text.replace("\n", " ").replace("\r", " "))
        elif roll < 0.9:
            key = rng.choice(list(row))
            value = rng.choice(("x", 1.5, [1], {"a": 1}, True, "9" * 30, -(10**25)))
            lines.append(json.dumps({**row, key: value}))
        else:
            lines.append(json.dumps([row]))
    return lines


def check_seed_values(spark, rng: random.Random, count: int) -> list[str]:
    """`count` random seed rows through `check_seeds` in one DataFrame, against `seed_problem`."""
    from eos_audit.sources.tabular.producer_state import check_seeds

    longs = T.StructType(
        [
            T.StructField("topic", T.StringType()),
            *[
                T.StructField(n, T.LongType())
                for n in ("partition", "producer_id", "producer_epoch", "coordinator_epoch",
                          "txn_first_offset", "last_timestamp")
            ],
            T.StructField(
                "batches",
                T.ArrayType(
                    T.StructType(
                        [T.StructField(n, T.LongType()) for n in
                         ("base_sequence", "last_sequence", "base_offset", "last_offset")]
                    )
                ),
            ),
            T.StructField("state_offset", T.LongType()),
            T.StructField("source", T.StringType()),
            T.StructField("run_id", T.StringType()),
        ]
    )  # fmt: skip
    rows = [random_seed_row(rng, n) for n in range(count)]
    # A few producer ids out of range too; the row number stays the key through `source`.
    for row in rows:
        row["source"] = str(row["producer_id"])
        if rng.random() < 0.05:
            row["producer_id"] = rng.choice((-1, LONG_MIN, None))
    df = spark.createDataFrame([tuple(r[f.name] for f in longs) for r in rows], longs)
    read = check_seeds(df, location=df["source"])
    valid = {int(r["source"]) for r in read.seeds.select("source").collect()}
    rejected = {int(r["source"]): r["reason"] for r in read.problems.collect()}
    problems = []
    if len(valid) + len(rejected) != count or valid & set(rejected):
        problems.append(f"{len(valid)} valid + {len(rejected)} quarantined != {count} rows")
    for number, row in enumerate(rows):
        expected = seed_problem(row)
        if expected and number in valid:
            problems.append(f"an impossible seed passed: {row}")
        elif not expected and number in rejected:
            problems.append(f"a possible seed was quarantined ({rejected[number]}): {row}")
    return problems


def check_seed_json(spark, rng: random.Random, count: int) -> list[str]:
    """`count` random JSON lines as a `--producer-state` file: every line a seed or quarantined."""
    from eos_audit.sources.tabular.producer_state import check_seeds, read_seed_files

    work = Path(tempfile.mkdtemp(prefix="eos-fuzz-"))
    try:
        path = work / "state.json"
        # The first line is whole, as a file's first line must be for its columns to be known.
        first = json.dumps(random_seed_row(rng, 0) | {"batches": []})
        lines = [first, *seed_json_lines(rng, count - 1)]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        try:
            read = check_seeds(read_seed_files(spark, str(path), "json"))
            seeds, rejected = read.seeds.count(), read.problems.count()
        except Exception as exc:  # noqa: BLE001 - the finding itself
            return [f"internal error: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"]
        # Lines as the reader splits them (at \n only), blank after trimming spaces.
        text = path.read_text(encoding="utf-8")
        blank = sum(1 for line in text.split("\n")[:-1] if not line.strip(" "))
        if seeds + rejected != count - blank:
            return [f"{seeds} seeds + {rejected} quarantined != {count - blank} lines"]
        return []
    finally:
        shutil.rmtree(work, ignore_errors=True)
