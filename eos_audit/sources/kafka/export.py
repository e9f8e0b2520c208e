"""A broker export (partition directories of one or more replicas) as the engine's inputs.

Decisions made on the driver from file names only (no data is read there):

- the *primary* replica of each partition, the one audited: the most complete copy by its files
  (highest last segment base offset, then most segment bytes, then replica name);
- the producer snapshot that seeds the replay: the primary's newest `.snapshot` at or below its
  first segment's base offset, i.e. the producer state right before the exported log
  (docs/formats.md#producer-snapshot, docs/rules.md#seeded-state).

Everything else is read on the executors: every replica's segments (the other replicas are
compared with the primary for REPLICA_DIVERGENCE), the leader-epoch checkpoint of the primary, and
the log-dir checkpoints (log start offsets, high watermarks).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from eos_audit.sources.files import filesystems as fsys
from eos_audit.sources.files import row_reference as ref
from eos_audit.sources.files.input_files import InputFile, readable, unreadable_error
from eos_audit.sources.kafka.partition_dirs import (
    PartitionDir,
    account_files,
    discover_partition_dirs,
    log_dir_files,
    partition_files,
)
from eos_audit.sources.kafka.segments import read_segment_files
from eos_audit.sources.kafka.state_files import (
    LEADER_EPOCH_FILE,
    OFFSET_CHECKPOINTS,
    read_leader_epoch_checkpoints,
    read_offset_checkpoints,
    read_snapshot_files,
)
from eos_audit.sources.tabular.canonical import to_canonical

log = logging.getLogger(__name__)
_SEGMENT = re.compile(r"^(\d{20})\.log$")
_SNAPSHOT = re.compile(r"^(\d{20})\.snapshot$")


@dataclass
class KafkaExport:
    """The inputs a broker export gives the engine."""

    batches: DataFrame  # to_canonical output plus `_replica` and `_replica_rank` (0: primary)
    seeds: DataFrame | None  # schemas.PRODUCER_STATE
    log_starts: DataFrame  # topic, partition, log_start_offset
    high_watermarks: DataFrame  # topic, partition, high_watermark
    leader_epochs: DataFrame  # topic, partition, leader_epoch, start_offset (primary replica)
    problems: DataFrame  # input, source, reason: unusable snapshot or checkpoint content
    primaries: dict[tuple[str, int], str]  # (topic, partition) -> primary replica
    # Every file under the roots: read (segments carry their file id) or ignored with a reason.
    files: list[InputFile] = field(default_factory=list)
    # The text before a batch's byte position, by the id of its segment file (row_reference).
    source_files: dict[int, str] = field(default_factory=dict)
    # The records and markers of the primary replicas of the coordinator topics' partitions
    # (coordinator_segments); None when the export has none.
    coordinator_records: DataFrame | None = None
    # Every (topic, partition) with a segment file in the export, empty or not.
    partitions_listed: frozenset[tuple[str, int]] = frozenset()


def _segments(pd: PartitionDir) -> list[tuple[int, str, int]]:
    out = []
    for name, size in partition_files(pd).items():  # one listing (an object store: a request)
        match = _SEGMENT.match(name)
        if match:
            out.append((int(match.group(1)), fsys.join(pd.path, name), size))
    return sorted(out)


def _rank_replicas(dirs: list[PartitionDir]) -> dict[tuple[str, int], list[PartitionDir]]:
    """Replicas of each partition, the most complete first."""
    by_partition: dict[tuple[str, int], list[PartitionDir]] = {}
    for pd in dirs:
        by_partition.setdefault((pd.topic, pd.partition), []).append(pd)

    def completeness(pd: PartitionDir) -> tuple:
        segments = _segments(pd)
        last_base = segments[-1][0] if segments else -1
        return (-last_base, -sum(size for _, _, size in segments), pd.replica)

    return {key: sorted(replicas, key=completeness) for key, replicas in by_partition.items()}


def _seed_snapshot(pd: PartitionDir) -> dict | None:
    segments = _segments(pd)
    if not segments:
        return None
    first_base = segments[0][0]
    candidates = []
    for name in partition_files(pd):
        match = _SNAPSHOT.match(name)
        if match and int(match.group(1)) <= first_base:
            candidates.append((int(match.group(1)), fsys.join(pd.path, name)))
    if not candidates:
        return None
    _, path = max(candidates)
    return {"path": path, "topic": pd.topic, "partition": pd.partition, "replica": pd.replica}


def read_kafka_export(
    spark: SparkSession, paths: list[str], *, verify_crc: bool = True
) -> KafkaExport:
    """Read partition directories (one or more replicas per partition) for the engine.

    Args:
        spark: the session.
        paths: log dirs, partition dirs or export trees (`<export>/<broker>/<topic>-<p>/`).
        verify_crc: verify CRC-32C of every batch.

    Returns:
        The export's batches, seeds, checkpoints and file problems.

    Raises:
        InputNotFoundError: no partition directory under `paths`.
    """
    ignored: list[InputFile] = []
    dirs = discover_partition_dirs(paths, ignored)
    ranked = _rank_replicas(dirs)
    files, ranks = [], {}
    for (topic, partition), replicas in ranked.items():
        for rank, pd in enumerate(replicas):
            segments = _segments(pd)
            for k, (_, path, size) in enumerate(segments):
                # The last segment of a replica may end in a batch cut by the copy of an active
                # segment (what Kafka's recovery truncates): the reader says so (TRUNCATED_TAIL).
                last = k == len(segments) - 1
                files.append(
                    {
                        "path": path,
                        "topic": topic,
                        "partition": partition,
                        "last_segment": last,
                        "bytes": size,
                    }
                )
                ranks[path] = (pd.replica, rank)
        if len(replicas) > 1:
            log.info(
                "%s-%s: auditing replica %s, comparing %s",
                topic,
                partition,
                replicas[0].replica,
                ", ".join(r.replica for r in replicas[1:]),
            )
    files.sort(key=lambda f: f["path"])
    # Batches are located by their file's id and byte position (row_reference): the driver
    # hands out the ids, and names the rows the run shows from them.
    ids = ref.unique_file_ids(f["path"] for f in files)
    for f in files:
        f["file_id"] = ids[f["path"]]
    primaries = {key: replicas[0] for key, replicas in ranked.items()}
    snapshot_files = [s for s in (_seed_snapshot(pd) for pd in primaries.values()) if s]
    read = _files_read(files, snapshot_files, list(primaries.values()), dirs)
    raw = read_segment_files(spark, files, verify_crc=verify_crc)
    # Each batch carries its file's id, so the replay counts the batches of every file in its
    # one pass (input_files). The small file table is broadcast, so the batches are not
    # shuffled to attach their replica; its path is read for quarantined rows only.
    replica_of = spark.createDataFrame(
        [(ids[path], replica, rank, path) for path, (replica, rank) in sorted(ranks.items())],
        f"{ref.SOURCE_FILE} long, _replica string, _replica_rank int, {ref.SOURCE_PATH} string",
    )
    with_replica = raw.join(F.broadcast(replica_of), ref.SOURCE_FILE, "left")
    batches = to_canonical(
        with_replica,
        keep=("_replica", "_replica_rank", ref.SOURCE_FILE, ref.SOURCE_ROW),
        source_fallback=ref.source_text(
            F.col(ref.SOURCE_PATH), F.col(ref.SOURCE_ROW), ref.BYTE_POSITION
        ),
        fallback_columns=(ref.SOURCE_PATH,),
    )

    snapshots = read_snapshot_files(spark, snapshot_files) if snapshot_files else None
    seeds = None
    if snapshots is not None:
        seeds = snapshots.data.select(
            *[c for c in snapshots.data.columns if c not in ("snapshot_offset", "replica")]
        )
    epochs = read_leader_epoch_checkpoints(spark, list(primaries.values()))
    offsets = read_offset_checkpoints(spark, dirs)
    primary_df = spark.createDataFrame(
        [(t, p, pd.replica) for (t, p), pd in sorted(primaries.items())],
        "topic string, partition int, replica string",
    )
    primary_offsets = offsets.data.join(F.broadcast(primary_df), ["topic", "partition", "replica"])
    log_starts = primary_offsets.where(F.col("kind") == "log_start").select(
        "topic", "partition", F.col("offset").alias("log_start_offset")
    )
    high_watermarks = (
        offsets.data.where(F.col("kind") == "high_watermark")
        .groupBy("topic", "partition")
        .agg(F.max("offset").alias("high_watermark"))
    )
    problems = offsets.problems.withColumn("input", F.lit("checkpoint")).unionByName(
        epochs.problems.withColumn("input", F.lit("leader_epoch_checkpoint"))
    )
    if snapshots is not None:
        problems = problems.unionByName(
            snapshots.problems.withColumn("input", F.lit("producer_snapshot"))
        )
    # A partition directory without a segment has nothing to audit: say so in quarantine rather
    # than pass over it in silence (issue 12, case 3).
    empty = [pd for pd in dirs if not _segments(pd)]
    if empty:
        problems = problems.unionByName(
            spark.createDataFrame(
                [
                    (
                        pd.path,
                        "partition directory holds no .log segment file: nothing of this replica "
                        "can be audited",
                        "partition_directory",
                    )
                    for pd in empty
                ],
                "source string, reason string, input string",
            )
        )
    return KafkaExport(
        batches=batches,
        seeds=seeds,
        log_starts=log_starts,
        high_watermarks=high_watermarks,
        leader_epochs=epochs.data.select("topic", "partition", "leader_epoch", "start_offset"),
        problems=problems.select("input", "source", "reason"),
        primaries={key: pd.replica for key, pd in primaries.items()},
        files=[
            dataclasses.replace(f, file_id=ids.get(f.path)) if f.counted else f
            for f in account_files(dirs, read, ignored, paths)
        ],
        source_files=ref.row_prefixes(
            {file_id: path for path, file_id in ids.items()}, ref.BYTE_POSITION
        ),
        coordinator_records=_coordinator_records(spark, files, ranks),
        partitions_listed=frozenset((f["topic"], f["partition"]) for f in files),
    )


def _coordinator_records(
    spark: SparkSession, files: list[dict], ranks: dict[str, tuple[str, int]]
) -> DataFrame | None:
    """The decoded records of the coordinator partitions' primary replicas, if there are any.

    The primary only, as for the batch replay: the replicas of `__consumer_offsets` hold the same
    records, and the coordinator replay must see each once.
    """
    from eos_audit.sources.kafka.coordinator_rows import COORDINATOR_TOPICS
    from eos_audit.sources.kafka.coordinator_segments import read_coordinator_segment_files

    primary = [
        f for f in files if f["topic"] in COORDINATOR_TOPICS and ranks[f["path"]][1] == 0
    ]
    if not primary:
        return None
    return read_coordinator_segment_files(spark, primary)


def _files_read(
    segments: list[dict], snapshots: list[dict], primaries: list[PartitionDir], dirs: list
) -> set[str]:
    """The paths the run reads; any the run's user may not read stops the run, naming them.

    Raises:
        InputUnreadableError: a file to read is not readable.
    """
    read = {f["path"] for f in segments} | {f["path"] for f in snapshots}
    # From the listings the readers take theirs from (a link out of the root is in neither).
    read |= {
        fsys.join(pd.path, LEADER_EPOCH_FILE)
        for pd in primaries
        if LEADER_EPOCH_FILE in partition_files(pd)
    }
    for log_dir, pd in {pd.log_dir: pd for pd in dirs}.items():
        present = log_dir_files(pd)
        read |= {fsys.join(log_dir, name) for name in OFFSET_CHECKPOINTS if name in present}
    unreadable = sorted(path for path in read if not readable(path))
    if unreadable:
        raise unreadable_error(unreadable)
    return read
