"""Synthetic `__consumer_offsets` records for the bench: `./run.sh bench --offset-commits N`.

About N coordinator records in the coordinator_records contract (schemas/coordinator_records.json,
the `--coordinator-records` Parquet input), written once under bench/data/offset-commits-<N>/:
what the group coordinators of a busy cluster write to the 50 partitions of `__consumer_offsets`.

- one group per 400 records (2,500 at 1M), each in the coordinator partition Kafka gives its id,
  consuming 4-32 partitions of one of 64 input topics; a member (or, for a transactional group,
  an instance with its own producer id) commits its share of the partitions, 1-8 records a batch;
- 30% of the groups commit transactionally (TxnOffsetCommit records, then their producer's COMMIT
  marker a few batches later, other groups' records in between; 2% of them end with ABORT and are
  done again), the others plainly (producer id -1);
- a GroupMetadata record at each group's start and about every 50 of its commits (a rebalance),
  a few tombstones (expired offsets), and a few transactions still open at the end;
- rare faults, so that every finding type and cause of the replay shows: a late commit below the
  committed offset (OFFSET_REWIND LATE_COMMIT), an operator's reset of an emptied group
  (ADMIN_RESET), a commit below an expired offset (EXPIRED_RESET), a plain commit during a
  transaction that aborts (MIXED_OFFSET_COMMITS, ABORTED_RANGE_COMMITTED), and a zombie producer
  committing a key another instance has pending, both committed (CONCURRENT_OFFSET_OWNERS).

The generator loops once per record in Python, seeded, so the same N gives the same files; it
runs once per N (a few seconds at 1M). The timed lines are in bench/run.py (`offset_lines`).
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from eos_audit.sources.kafka.coordinator_keys import (
    CONSUMER_OFFSETS_TOPIC,
    DEFAULT_COORDINATOR_PARTITIONS,
    partition_for,
)

HERE = Path(__file__).resolve().parent
RECORDS_PER_GROUP = 400
TOPICS = 64
TRANSACTIONAL_SHARE = 0.3
ABORT_SHARE = 0.02
REBALANCE_EVERY = 50  # a group's commits between two GroupMetadata records, on average
# One fault of each kind every this many commits (each ~0.01-0.05% of them).
LATE_COMMIT_EVERY, ADMIN_RESET_EVERY, TOMBSTONE_EVERY = 9_973, 19_997, 4_999
ABORTED_RANGE_EVERY, ZOMBIE_EVERY = 14_983, 24_989
ROWS_PER_FILE = 250_000
BASE_TS = 1_700_000_000_000

SCHEMA = pa.schema(
    [
        ("coordinator_topic", pa.string()),
        ("coordinator_partition", pa.int32()),
        ("offset", pa.int64()),
        ("base_offset", pa.int64()),
        ("batch_producer_id", pa.int64()),
        ("batch_producer_epoch", pa.int32()),
        ("is_transactional", pa.bool_()),
        ("control_type", pa.string()),
        ("timestamp", pa.int64()),
        ("record_type", pa.int32()),
        ("record_type_name", pa.string()),
        ("value_version", pa.int32()),
        ("is_tombstone", pa.bool_()),
        ("is_skipped", pa.bool_()),
        ("group_id", pa.string()),
        ("committed_topic", pa.string()),
        ("committed_partition", pa.int32()),
        ("committed_offset", pa.int64()),
        ("leader_epoch", pa.int32()),
        ("metadata", pa.string()),
        ("commit_timestamp_ms", pa.int64()),
        ("protocol_type", pa.string()),
        ("generation", pa.int32()),
        ("protocol", pa.string()),
        ("leader", pa.string()),
        ("current_state_timestamp_ms", pa.int64()),
        ("member_count", pa.int32()),
    ]
)


def data_path(records: int) -> Path:
    """Where the bench's coordinator records of about `records` rows live (generated once)."""
    return HERE / "data" / f"offset-commits-{records}"


class _Group:
    """One consumer group: its input partitions, committed offsets and members (or instances)."""

    def __init__(self, index: int, rng: random.Random) -> None:
        self.group_id = f"bench-group-{index}"
        self.coordinator = partition_for(self.group_id)
        self.topic = f"input-{index % TOPICS}"
        self.partitions = rng.choice((4, 8, 16, 32))
        self.members = max(1, self.partitions // rng.choice((2, 4, 8)))
        self.transactional = rng.random() < TRANSACTIONAL_SHARE
        # Each instance's producer id (KIP-447: one transactional producer per instance).
        self.producer_ids = [1_000_000 + index * 64 + m for m in range(self.members)]
        self.epoch = 0
        self.generation = 0
        self.offsets = [0] * self.partitions  # the committed offset of each input partition
        self.commits = 0

    def share(self, member: int) -> range:
        """The input partitions `member` owns."""
        return range(member, self.partitions, self.members)


class _Writer:
    """The rows of every coordinator partition, as column lists, with each partition's offsets."""

    def __init__(self) -> None:
        self.columns: dict[str, list] = {name: [] for name in SCHEMA.names}
        self.next_offset = [0] * DEFAULT_COORDINATOR_PARTITIONS
        self.rows = 0
        self.clock = BASE_TS

    def batch(self, coordinator: int, producer_id: int, epoch: int, rows: list[dict]) -> int:
        """Append one batch of records (or one marker, `control_type` set); its base offset."""
        base = self.next_offset[coordinator]
        self.clock += 3
        for i, row in enumerate(rows):
            values = {
                "coordinator_topic": CONSUMER_OFFSETS_TOPIC,
                "coordinator_partition": coordinator,
                "offset": base + i,
                "base_offset": base,
                "batch_producer_id": producer_id,
                "batch_producer_epoch": epoch,
                "is_transactional": producer_id >= 0,
                "timestamp": self.clock,
                "is_tombstone": False,
                "is_skipped": False,
                **row,
            }
            for name, column in self.columns.items():
                column.append(values.get(name))
        self.next_offset[coordinator] = base + len(rows)
        self.rows += len(rows)
        return base

    def table(self) -> pa.Table:
        return pa.table(self.columns, schema=SCHEMA)


def _commit(group: _Group, partition: int, value: int, clock: int) -> dict:
    return {
        "record_type": 1, "record_type_name": "OffsetCommit", "value_version": 3,
        "group_id": group.group_id, "committed_topic": group.topic,
        "committed_partition": partition, "committed_offset": value, "leader_epoch": 0,
        "metadata": "", "commit_timestamp_ms": clock,
    }  # fmt: skip


def _group_metadata(group: _Group, members: int, clock: int) -> dict:
    return {
        "record_type": 2, "record_type_name": "GroupMetadata", "value_version": 3,
        "group_id": group.group_id, "protocol_type": "consumer", "generation": group.generation,
        "protocol": "range" if members else None, "leader": "member-0" if members else None,
        "current_state_timestamp_ms": clock, "member_count": members,
    }  # fmt: skip


def _tombstone(group: _Group, partition: int) -> dict:
    return {
        "record_type": 1, "record_type_name": "OffsetCommit", "is_tombstone": True,
        "group_id": group.group_id, "committed_topic": group.topic,
        "committed_partition": partition,
    }  # fmt: skip


def generate(records: int, path: Path, seed: int = 20261130) -> Path:
    """Write about `records` coordinator records as Parquet files under `path` (once).

    Returns:
        `path`.
    """
    if path.exists():
        return path
    rng = random.Random(seed)
    groups = [_Group(g, rng) for g in range(max(8, records // RECORDS_PER_GROUP))]
    out = _Writer()
    # Markers waiting to be written, by producer id: (due at this many batches, coordinator,
    # epoch, COMMIT or ABORT).
    markers: dict[int, tuple[int, int, int, str]] = {}
    batches = 0

    def write_markers(until: int) -> None:
        due = sorted((m, pid) for pid, m in markers.items() if m[0] <= until)
        for (_, coordinator, epoch, kind), pid in due:
            out.batch(coordinator, pid, epoch, [{"control_type": kind}])
            del markers[pid]

    def rebalance(group: _Group, members: int) -> None:
        group.generation += 1
        out.batch(group.coordinator, -1, -1, [_group_metadata(group, members, out.clock)])

    for group in groups:
        rebalance(group, group.members)
    commits = 0
    while out.rows < records:
        batches += 1
        write_markers(batches)
        group = rng.choice(groups)
        member = rng.randrange(group.members)
        share = [p for p in group.share(member)][:8]
        advance = [rng.randrange(1, 500) for _ in share]
        commits += len(share)
        if rng.random() < 1 / REBALANCE_EVERY:
            rebalance(group, group.members)
        if group.commits and commits % ADMIN_RESET_EVERY < len(share) and not group.transactional:
            # An operator empties the group and resets one partition to 0, then it rejoins.
            rebalance(group, 0)
            out.batch(group.coordinator, -1, -1, [_commit(group, share[0], 0, out.clock)])
            group.offsets[share[0]] = 0
            rebalance(group, group.members)
        if commits % TOMBSTONE_EVERY < len(share):
            # Offsets expire; the group later commits lower than the removed offset.
            out.batch(group.coordinator, -1, -1, [_tombstone(group, share[0])])
            group.offsets[share[0]] = max(0, group.offsets[share[0]] - 1_000)
        group.commits += 1
        if not group.transactional:
            values = [group.offsets[p] + a for p, a in zip(share, advance, strict=True)]
            if commits % LATE_COMMIT_EVERY < len(share):
                values[0] = max(0, group.offsets[share[0]] - 100)  # a late commit, lower
            rows = [_commit(group, p, v, out.clock) for p, v in zip(share, values, strict=True)]
            out.batch(group.coordinator, -1, -1, rows)
            for p, v in zip(share, values, strict=True):
                group.offsets[p] = max(group.offsets[p], v)
            continue
        pid = group.producer_ids[member]
        if pid in markers:  # its previous transaction ends before it begins the next
            write_markers(markers[pid][0])
        values = [group.offsets[p] + a for p, a in zip(share, advance, strict=True)]
        rows = [_commit(group, p, v, out.clock) for p, v in zip(share, values, strict=True)]
        out.batch(group.coordinator, pid, group.epoch, rows)
        aborts = rng.random() < ABORT_SHARE
        if commits % ABORTED_RANGE_EVERY < len(share):
            # The consumer auto-commits its position while the transaction is open; it aborts.
            middle = (group.offsets[share[0]] + values[0]) // 2
            out.batch(group.coordinator, -1, -1, [_commit(group, share[0], middle, out.clock)])
            group.offsets[share[0]] = middle
            aborts = True
        if commits % ZOMBIE_EVERY < len(share):
            # A zombie instance (a producer id of its own) commits the same partition; both commit.
            zombie = 2_000_000 + batches
            out.batch(group.coordinator, zombie, 0, [_commit(group, share[0], values[0] - 1, 0)])
            markers[zombie] = (batches + 2, group.coordinator, 0, "COMMIT")
        due = batches + 1 + rng.randrange(8)
        markers[pid] = (due, group.coordinator, group.epoch, "ABORT" if aborts else "COMMIT")
        if not aborts:
            for p, v in zip(share, values, strict=True):
                group.offsets[p] = v
    # The export ends with a few transactions still open: their markers are not written.
    write_markers(batches + 4)
    tmp = path.with_suffix(".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    table = out.table()
    for start in range(0, table.num_rows, ROWS_PER_FILE):
        pq.write_table(
            table.slice(start, ROWS_PER_FILE), tmp / f"part-{start // ROWS_PER_FILE:05d}.parquet"
        )
    tmp.rename(path)
    return path


def ensure_data(records: int) -> Path:
    """The bench's coordinator records, generated by a child process if they are not there yet.

    In a child, as bench/run.py generates the batches: the generation's rows never count in the
    driver's resident set.
    """
    import subprocess
    import sys

    path = data_path(records)
    if not path.exists():
        code = ("import sys; from bench.offset_commits import data_path, generate; "
                "generate(int(sys.argv[1]), data_path(int(sys.argv[1])))")  # fmt: skip
        subprocess.run([sys.executable, "-c", code, str(records)], check=True, cwd=HERE.parent)
    return path


def offset_lines(spark, data: Path) -> dict:
    """The timed lines of the processing audit over the coordinator records at `data`.

    - `transfer`: the records read in the contract (`read_coordinator_records_table`), the
      replay's events (`offset_events`), the one shuffle and the sort, into a `mapInArrow` that
      only receives them: Spark's part of the replay;
    - `replay`: the same with the replay (`replay_offsets`), its history into the no-op sink;
    - `stage`: the pipeline's processing stage (`pipeline._stage_processing`: the records staged,
      replayed, the history staged, its findings and the quarantine staged) and its two tables
      (`consumer_offsets`, `transaction_log`) into the no-op sink, in place of the Delta writes.
    """
    from types import SimpleNamespace

    from eos_audit.audit import output_records, pipeline
    from eos_audit.config import AuditConfig
    from eos_audit.processing.coordinator_audit import offset_events, replay_offsets
    from eos_audit.sources.tabular.coordinator_records import read_coordinator_records_table

    def records():
        return read_coordinator_records_table(spark, [str(data)])

    def transfer() -> None:
        def receive(batches_in):
            for batch in batches_in:
                batch.num_rows  # noqa: B018 - receive, nothing more
            return iter(())

        events = offset_events(records())
        (events.repartition("coordinator_partition")
         .sortWithinPartitions("coordinator_partition", "offset")
         .mapInArrow(receive, "n long").write.format("noop").mode("overwrite").save())  # fmt: skip

    def replay() -> None:
        replay_offsets(offset_events(records())).write.format("noop").mode("overwrite").save()

    def stage() -> None:
        root = Path(tempfile.mkdtemp(prefix="eos-bench-offsets-"))
        try:
            staging = SimpleNamespace(subdir=lambda name: str(root / name))
            # The stage joins the batch audit's staged transactions and partitions, which these
            # records come without: an empty stage in their place.
            staged = str(root / "staged")
            empty = spark.createDataFrame([], output_records.OUTPUT_RECORD)
            empty.write.partitionBy("kind").parquet(staged)
            tables = pipeline._stage_processing(
                spark, records(), AuditConfig(), "bench", staging, staged, None
            )
            for table in (tables.consumer_offsets, tables.transaction_log):
                table.write.format("noop").mode("overwrite").save()
        finally:
            shutil.rmtree(root, ignore_errors=True)

    meter = CpuMeter(spark)
    lines = {"offsets_transfer": transfer, "offsets_replay": replay, "offsets_stage": stage}
    return {name: meter.measured(name, action) for name, action in lines.items()}


class CpuMeter:
    """The CPU time each run of a line cost the JVM and its Python workers (local mode only).

    From /proc/<pid>/stat (user and system time, of the process and its waited-for children),
    cheap to read, unlike the memory maps MemorySampler reads: it does not slow what it
    measures. On a shared machine a line's CPU time varies much less than its wall time.
    """

    def __init__(self, spark) -> None:
        self.jvm_pid = None
        if spark.sparkContext.master.startswith("local"):
            self.jvm_pid = int(spark._jvm.java.lang.ProcessHandle.current().pid())
        self.runs: dict[str, list[tuple[float, float]]] = {}

    def _now(self) -> tuple[float, float]:
        from bench.run import descendants

        return _cpu_s(self.jvm_pid), sum(_cpu_s(pid) for pid in descendants(self.jvm_pid))

    def measured(self, name: str, action):
        """`action`, its CPU time recorded under `name` at every run."""
        if self.jvm_pid is None:
            return action

        def run() -> None:
            before = self._now()
            action()
            after = self._now()
            self.runs.setdefault(name, []).append((after[0] - before[0], after[1] - before[1]))

        run.meter = self
        return run

    def least(self, name: str) -> tuple[float, float] | None:
        """The least (JVM, Python workers) CPU seconds of the line's runs after its first."""
        runs = self.runs.get(name, [])[1:]
        if not runs:
            return None
        return min(j for j, _ in runs), min(p for _, p in runs)


def _cpu_s(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:  # gone
        return 0.0
    # utime, stime, cutime, cstime (fields 14-17 of stat(5), counted after the command name)
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def replay_mix(spark, data: Path) -> dict:
    """What the replay made of the records (untimed): rows by kind and outcome, findings by type
    and cause."""
    from pyspark.sql import functions as F

    from eos_audit.processing.coordinator_audit import offset_events, replay_offsets
    from eos_audit.sources.tabular.coordinator_records import read_coordinator_records_table

    history = replay_offsets(offset_events(read_coordinator_records_table(spark, [str(data)])))
    history = history.cache()
    try:
        rows = {
            f"{r['kind']} {r['outcome']}": r["count"]
            for r in history.groupBy("kind", "outcome").count().collect()
        }
        findings = {
            f"{r['t']} {r['c']}": r["count"]
            for r in history.select(F.explode("findings").alias("f"))
            .groupBy(F.col("f.finding_type").alias("t"), F.col("f.cause").alias("c"))
            .count()
            .collect()
        }
    finally:
        history.unpersist()
    return {"rows": dict(sorted(rows.items())), "findings": dict(sorted(findings.items()))}
