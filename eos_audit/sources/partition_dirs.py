"""Finding the partition directories of an export: directory listings on the driver, no data.

A broker keeps each partition in `<log.dir>/<topic>-<partition>/`
(docs/formats.md#partition-directory); an export is usually
`<export>/<broker-id>/<topic>-<partition>/`, so the folder above a partition directory names the
replica. The readers of the files in them (`segments`, `kafka_files`) take what this module finds;
nothing here reads a file's content.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from eos_audit.errors import InputNotFoundError

log = logging.getLogger(__name__)

# Topic names are [a-zA-Z0-9._-]+ (Topic.java); the partition is the trailing integer.
_PARTITION_DIR = re.compile(r"^([A-Za-z0-9._-]+)-(\d+)$")
# LocalLog.scala: `<topic>-<partition>.<uuid>-delete|-future|-stray` while deleted/moved/stray.
_IGNORED_DIR = re.compile(r"-(delete|future|stray)$")
_SEGMENT = re.compile(r"^\d{20}\.log$")
_KAFKA_FILE = re.compile(
    r"^(\d{20}\.(log|index|timeindex|txnindex|snapshot)|leader-epoch-checkpoint|partition\.metadata)$"
)
# LogFileUtils: transient files of the cleaner / deletion; not part of the log.
_TRANSIENT = re.compile(r"\.(deleted|cleaned|swap)$")


@dataclass(frozen=True)
class PartitionDir:
    """One `<topic>-<partition>` directory of one replica.

    Attributes:
        topic: topic name.
        partition: partition number.
        path: absolute path of the directory.
        replica: name of the parent folder (the broker id dir of an export, or the log dir name);
            identifies the copy when several replicas of a partition are exported.
        log_dir: absolute path of the parent folder, where log-dir level checkpoints live.

    """

    topic: str
    partition: int
    path: str
    replica: str
    log_dir: str


def _as_partition_dir(path: str) -> PartitionDir | None:
    name = os.path.basename(path)
    m = _PARTITION_DIR.match(name)
    if not m or _IGNORED_DIR.search(name):
        return None
    try:
        entries = os.listdir(path)
    except OSError:
        return None
    # A folder named like `kafka-0` may be a broker folder: a partition dir holds Kafka files.
    if not any(_KAFKA_FILE.match(e) for e in entries):
        return None
    parent = os.path.dirname(path)
    return PartitionDir(
        topic=m.group(1),
        partition=int(m.group(2)),
        path=path,
        replica=os.path.basename(parent),
        log_dir=parent,
    )


def _walk(root: str) -> Iterator[PartitionDir]:
    own = _as_partition_dir(root)
    if own is not None:
        yield own
        return
    for dirpath, dirnames, _ in os.walk(root):
        keep = []
        for d in sorted(dirnames):
            full = os.path.join(dirpath, d)
            if _IGNORED_DIR.search(d):
                log.warning("ignoring %s: a deleted, moving or stray log (not the live log)", full)
                continue
            found = _as_partition_dir(full)
            if found is not None:
                yield found
            else:
                keep.append(d)
        dirnames[:] = keep


def discover_partition_dirs(root_paths: list[str]) -> list[PartitionDir]:
    """Find the `<topic>-<partition>` directories under one or more roots.

    A root may be a log dir, a single partition dir, a `.log` file inside one, or a tree such as
    `<export>/<broker-id>/<topic>-<partition>/`. `-delete`, `-future` and `-stray` directories are
    skipped with a warning.

    Args:
        root_paths: the roots.

    Returns:
        Partition dirs sorted by topic, partition, replica and path (deduplicated).

    Raises:
        InputNotFoundError: a root does not exist, or no partition directory was found.

    """
    if isinstance(root_paths, str):
        root_paths = [root_paths]
    found: dict[str, PartitionDir] = {}
    for root in root_paths:
        path = os.path.abspath(root)
        if not os.path.exists(path):
            raise InputNotFoundError(f"input path does not exist: {root}")
        if os.path.isfile(path):
            pd = _as_partition_dir(os.path.dirname(path))
            if pd is None:
                raise InputNotFoundError(
                    f"{root} is a file outside a <topic>-<partition> directory: pass the "
                    "partition directory or a folder above it"
                )
            found[pd.path] = pd
            continue
        for pd in _walk(path):
            found[pd.path] = pd
    if not found:
        raise InputNotFoundError(
            "no Kafka partition directory (<topic>-<partition>/ holding .log files) found under "
            + ", ".join(root_paths)
        )
    return sorted(found.values(), key=lambda d: (d.topic, d.partition, d.replica, d.path))


def discover_segment_files(paths: list[str]) -> list[dict]:
    """The `.log` segment files under `paths`, with their topic and partition.

    A path naming a `.log` file selects that file only.

    Args:
        paths: as for `discover_partition_dirs`.

    Returns:
        Dicts `{"path", "topic", "partition", "replica"}` sorted by path.

    Raises:
        InputNotFoundError: as for `discover_partition_dirs`.

    """
    if isinstance(paths, str):
        paths = [paths]
    explicit = {os.path.abspath(p) for p in paths if os.path.isfile(p)}
    files: dict[str, dict] = {}
    for pd in discover_partition_dirs(paths):
        for name in sorted(os.listdir(pd.path)):
            full = os.path.join(pd.path, name)
            if _TRANSIENT.search(name) and ".log" in name:
                log.warning("ignoring transient segment file %s (cleaner/deletion leftover)", full)
                continue
            if not _SEGMENT.match(name):
                continue
            if explicit and full not in explicit and not _under_any(full, paths, explicit):
                continue
            files[full] = {
                "path": full,
                "topic": pd.topic,
                "partition": pd.partition,
                "replica": pd.replica,
            }
    return [files[k] for k in sorted(files)]


def _under_any(full: str, paths: Iterable[str], explicit: set[str]) -> bool:
    dirs = [os.path.abspath(p) for p in paths if os.path.abspath(p) not in explicit]
    return any(full.startswith(d.rstrip(os.sep) + os.sep) for d in dirs)
