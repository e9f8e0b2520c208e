"""DuckDB over the bench's Parquet: the rules one SQL window query can express.

`python -m bench.duckdb_rules --batches DIR --out FINDINGS.parquet` runs ONE SQL statement (common
table expressions and window functions, no procedural code) over the record-batch Parquet files
and writes its findings as (finding_type, topic, partition, base_offset); it prints one JSON line
with its time and its process's peak resident set. `bench/run.py --compare` runs it as a process
of its own, so its memory is its own, and compares its findings with the engine's.

What the query expresses, against docs/rules.md (the comparable subset, same scope: producer id
>= 0, magic >= 2, CRC not failed, not an empty control batch; no sequence checks on the
coordinator topics or for base sequence -1):

- OFFSET_OVERLAP (#offset-overlap): exact. Base offset at or below the running maximum last
  offset of the earlier batches of the partition, in log order.
- OFFSET_GAP (#offset-gap): exact. A batch of magic 2 (or null) whose base offset is above that
  running maximum plus one.
- FENCED_PRODUCER_EPOCH (#fenced-producer-epoch): a data batch or marker whose epoch is below the
  highest epoch of the producer's earlier rows. Exact within one producer session: fenced and
  duplicate rows never raise the maximum, so the running maximum over all rows is the state's.
- DUPLICATE_BATCH within the 5-batch cache (#duplicate-batch): same epoch, base and last sequence
  as one of the producer's previous 5 data batches (`lag(1..5)`). Approximated: the broker's
  cache holds the 5 previous *applied* batches, and a window cannot skip the rows it is deciding
  (a duplicate of a duplicate, or a fenced row among the 5, shifts the window by one). The
  engine's duplicates found beyond the cache (`kafka_error` OUT_OF_ORDER_SEQUENCE_NUMBER, up to
  64 batches back) are not in this set; the comparison leaves them out of ours too.
- SEQUENCE_GAP (#sequence-gap): same epoch as the producer's state, base sequence not the one
  after the last sequence of the previous applied data batch (-1 when that batch is of an older
  epoch: known only from a marker), not 0, forward distance mod 2^31 below 2^30. "Applied" is
  read from the two rules above (`last_value(... IGNORE NULLS)` over the rows that are neither
  fenced nor duplicates), so one lost batch is one finding as in the engine.

What SQL cannot express here, and the query therefore does not model: producer sessions started
by expiry (a state that restarts empty after `producer.id.expiration.ms` of silence), seeded
producer state, the corrupt batch's claimed range that excuses a gap, and input validation
(rows the engine quarantines are replayed here as they are). None occurs in the bench's data.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

COMPARED_TYPES = (
    "SEQUENCE_GAP", "DUPLICATE_BATCH", "FENCED_PRODUCER_EPOCH", "OFFSET_OVERLAP", "OFFSET_GAP",
)  # fmt: skip
COORDINATOR_TOPICS = ("__consumer_offsets", "__transaction_state")  # conf/defaults.toml
MAX_SEQUENCE = 2147483647

# The canonical columns the query reads, with the value a missing column stands for
# (schemas/record_batch.json: last_sequence derived, magic null meaning 2).
COLUMN_DEFAULTS: dict[str, str] = {
    "topic": "NULL::VARCHAR",
    "partition": "NULL::INTEGER",
    "base_offset": "NULL::BIGINT",
    "last_offset": "NULL::BIGINT",
    "producer_id": "-1::BIGINT",
    "producer_epoch": "-1::INTEGER",
    "base_sequence": "-1::INTEGER",
    "last_sequence": "NULL::INTEGER",
    "record_count": "NULL::INTEGER",
    "is_transactional": "false",
    "is_control": "false",
    "magic": "NULL::INTEGER",
    "crc_valid": "NULL::BOOLEAN",
}

# Log order (docs/replay_semantics.md "Log order"), nulls first; the remaining tie-breaks of the
# engine only order identical rows.
LOG_ORDER = (
    "base_offset, last_offset, producer_id, producer_epoch, base_sequence, is_control, "
    "is_transactional"
)


def rules_query(source: str, present: set[str]) -> str:
    """The one SQL statement: findings of the five rules over `source`.

    Args:
        source: a DuckDB table expression, e.g. `read_parquet('dir/**/*.parquet')`.
        present: the columns `source` has; a missing canonical column takes its default.

    Returns:
        A query whose rows are (finding_type, topic, partition, base_offset).
    """
    columns = ",\n    ".join(
        f"{name}" if name in present else f"{default} AS {name}"
        for name, default in COLUMN_DEFAULTS.items()
    )
    coordinator = ", ".join(f"'{t}'" for t in COORDINATOR_TOPICS)
    lags = " OR ".join(f"lag(seq_range, {k}) OVER cache = seq_range" for k in range(1, 6))
    return f"""
WITH src AS (
  SELECT
    {columns}
  FROM {source}
),
b AS (
  SELECT *,
    CASE WHEN last_sequence IS NOT NULL THEN last_sequence
         WHEN base_sequence < 0 THEN -1
         -- DefaultRecordBatch.incrementSequence: wraps past 2147483647 to 0
         ELSE ((base_sequence::BIGINT + (last_offset - base_offset)) % 2147483648)::INTEGER
    END AS last_seq,
    producer_id >= 0 AND coalesce(magic, 2) >= 2 AND crc_valid IS DISTINCT FROM false
      AND NOT (is_control AND coalesce(record_count, 1) = 0) AS in_replay
  FROM src
),
offset_findings AS (
  SELECT
    CASE WHEN base_offset <= max_last_before THEN 'OFFSET_OVERLAP'
         WHEN base_offset > max_last_before + 1 AND coalesce(magic, 2) >= 2 THEN 'OFFSET_GAP'
    END AS finding_type,
    topic, partition, base_offset
  FROM (
    SELECT topic, partition, base_offset, magic,
      max(last_offset) OVER (PARTITION BY topic, partition ORDER BY {LOG_ORDER} NULLS FIRST
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS max_last_before
    FROM b
  )
),
verdicts AS (
  SELECT *,
    coalesce(producer_epoch < max(producer_epoch) OVER producer_before, false) AS is_fenced,
    max(producer_epoch) OVER producer_before AS state_epoch,
    is_cacheable AND topic NOT IN ({coordinator}) AND coalesce({lags}, false) AS is_dup
  FROM (
    SELECT *,
      NOT is_control AND base_sequence >= 0 AS is_cacheable,
      {{'e': producer_epoch, 'b': base_sequence, 'l': last_seq}} AS seq_range
    FROM b WHERE in_replay
  )
  WINDOW producer_before AS (PARTITION BY topic, partition, producer_id
                             ORDER BY {LOG_ORDER} NULLS FIRST
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
         cache AS (PARTITION BY topic, partition, producer_id, is_cacheable
                   ORDER BY {LOG_ORDER} NULLS FIRST)
),
sequences AS (
  SELECT *,
    CASE WHEN previous_applied.e = producer_epoch THEN previous_applied.l ELSE -1 END AS last
  FROM (
    SELECT *,
      last_value(CASE WHEN NOT is_fenced AND NOT is_dup
                      THEN {{'e': producer_epoch, 'l': last_seq}} END IGNORE NULLS)
        OVER (PARTITION BY topic, partition, producer_id, is_cacheable
              ORDER BY {LOG_ORDER} NULLS FIRST
              ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS previous_applied
    FROM verdicts
  )
),
producer_findings AS (
  SELECT
    CASE WHEN is_fenced THEN 'FENCED_PRODUCER_EPOCH'
         WHEN is_dup THEN 'DUPLICATE_BATCH'
         WHEN is_cacheable AND topic NOT IN ({coordinator})
              AND producer_epoch = state_epoch
              AND NOT (base_sequence = last + 1 OR (base_sequence = 0 AND last = {MAX_SEQUENCE}))
              AND base_sequence <> 0
              AND (last = -1 OR (((base_sequence::BIGINT
                    - CASE WHEN last = {MAX_SEQUENCE} THEN 0 ELSE last + 1 END)
                    % 2147483648) + 2147483648) % 2147483648 < 1073741824)
           THEN 'SEQUENCE_GAP'
    END AS finding_type,
    topic, partition, base_offset
  FROM sequences
)
SELECT finding_type, topic, partition, base_offset FROM producer_findings
WHERE finding_type IS NOT NULL
UNION ALL
SELECT finding_type, topic, partition, base_offset FROM offset_findings
WHERE finding_type IS NOT NULL
"""


def parquet_source(batches: str) -> str:
    """The DuckDB table expression of a Parquet file or a directory of them."""
    path = Path(batches)
    pattern = str(path / "**" / "*.parquet") if path.is_dir() else str(path)
    return "read_parquet('{}')".format(pattern.replace("'", "''"))


def find(con, source: str) -> pa.Table:
    """Run the rules query over `source` on the DuckDB connection `con`.

    Returns:
        The findings as an Arrow table (finding_type, topic, partition, base_offset).
    """
    present = {row[0] for row in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
    relation = con.sql(rules_query(source, present))
    # duckdb 2.x names it to_arrow_table; 1.x arrow()
    fetch = getattr(relation, "to_arrow_table", None) or relation.arrow
    return fetch()


def run(batches: str, threads: int | None = None) -> tuple[pa.Table, float]:
    """The findings of the Parquet under `batches` and the seconds the query took (connection
    made, files scanned, findings fetched)."""
    import duckdb

    spill = tempfile.mkdtemp(prefix="eos-bench-duckdb-")
    try:
        start = time.perf_counter()
        con = duckdb.connect()
        # Windows over all rows may spill at 50M; by default an in-memory database spills to
        # ./.tmp, inside the repository.
        con.execute("SET temp_directory = '{}'".format(spill.replace("'", "''")))
        if threads:
            con.execute(f"SET threads = {int(threads)}")
        findings = find(con, parquet_source(batches))
        con.close()
        return findings, time.perf_counter() - start
    finally:
        shutil.rmtree(spill, ignore_errors=True)


def peak_rss_mb() -> float:
    """This process's peak resident set in MB (Linux reports ru_maxrss in kB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> None:
    """Run the query over `--batches`, write the findings to `--out`, print a JSON summary."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", required=True)
    parser.add_argument("--out", required=True, help="where the findings go (Parquet)")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    findings, seconds = run(args.batches, args.threads)
    pq.write_table(findings, args.out)
    print(json.dumps({"seconds": round(seconds, 2), "findings": findings.num_rows,
                      "peak_rss_mb": round(peak_rss_mb())}), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
