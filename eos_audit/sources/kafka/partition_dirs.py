"""Finding the partition directories of an export: directory listings on the driver, no data.

A broker keeps each partition in `<log.dir>/<topic>-<partition>/`
(docs/formats.md#partition-directory); an export is usually
`<export>/<broker-id>/<topic>-<partition>/`, so the folder above a partition directory names the
replica. The readers of the files in them (`segments`, `kafka_files`) take what this module finds;
nothing here reads a file's content.

A symbolic link is followed only inside the input root it was found under
(`input_files.outside_link`): every file a reader is handed comes from `partition_files` and
`log_dir_files`, which leave the others out, and `account_files` lists them IGNORED.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from eos_audit.errors import InputNotFoundError
from eos_audit.sources.files import filesystems as fsys
from eos_audit.sources.files.input_files import (
    IGNORED,
    InputFile,
    is_inside,
    log_links,
    outside_link,
    path_identity,
    read_once,
    read_once_row,
    readable,
    size_of,
    unreadable_error,
    walk_files,
)

log = logging.getLogger(__name__)

# Topic names are [a-zA-Z0-9._-]+ (Topic.java); the partition is the trailing integer.
_PARTITION_DIR = re.compile(r"^([A-Za-z0-9._-]+)-(\d+)$")


def partition_of_folder(name: str) -> tuple[str, int] | None:
    """(topic, partition) a folder named `<topic>-<partition>` holds; None for any other name."""
    match = _PARTITION_DIR.match(name)
    return (match.group(1), int(match.group(2))) if match else None
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
        root: the real path of the input root it was found under: its files are read only
            where they lie inside it (a symbolic link out of it is not followed).
        read_elsewhere: names of its segment files that are symbolic links to a segment the
            run reads under another name (read once, there).

    """

    topic: str
    partition: int
    path: str
    replica: str
    log_dir: str
    root: str
    read_elsewhere: frozenset[str] = frozenset()


def partition_files(pd: PartitionDir) -> dict[str, int]:
    """The files of a partition directory the run may read, and their sizes (one listing).

    Symbolic links out of the input root and second names of a segment are left out
    (`account_files` lists them, IGNORED).
    """
    return {
        name: size
        for name, size in fsys.files_in(pd.path).items()
        if name not in pd.read_elsewhere and outside_link(fsys.join(pd.path, name), pd.root) is None
    }


def _log_dir_bound(pd: PartitionDir) -> str:
    """What the files of a partition directory's log dir may link into.

    The input root; or the log dir itself when it lies above the root (a partition directory
    given alone, whose log dir's checkpoints are read).
    """
    log_dir = path_identity(pd.log_dir)
    return pd.root if is_inside(log_dir, pd.root) else log_dir


def log_dir_files(pd: PartitionDir) -> dict[str, int]:
    """The files of a partition directory's log dir the run may read, and their sizes."""
    bound = _log_dir_bound(pd)
    return {
        name: size
        for name, size in fsys.files_in(pd.log_dir).items()
        if outside_link(fsys.join(pd.log_dir, name), bound) is None
    }


def _as_partition_dir(
    path: str, bound: str, unreadable: list[str] | None = None
) -> PartitionDir | None:
    name = fsys.basename(path)
    m = _PARTITION_DIR.match(name)
    if not m or _IGNORED_DIR.search(name):
        return None
    try:
        entries = fsys.listdir(path)
    except OSError:
        # Never a partition that vanishes without a word: the run names it and stops.
        if unreadable is not None:
            unreadable.append(path)
        return None
    # A folder named like `kafka-0` may be a broker folder: a partition dir holds Kafka files,
    # of its own (a link out of the root is none).
    if not any(
        _KAFKA_FILE.match(e) and outside_link(fsys.join(path, e), bound) is None for e in entries
    ):
        return None
    parent = fsys.dirname(path)
    return PartitionDir(
        topic=m.group(1),
        partition=int(m.group(2)),
        path=path,
        replica=fsys.basename(parent),
        log_dir=parent,
        root=bound,
    )


def _ignore_tree(path: str, reason: str, ignored: list[InputFile], bound: str) -> None:
    """Every file under `path` as IGNORED with the reason, and a warning naming the directory.

    A symbolic link out of the root (`bound`) is IGNORED as such, once.
    """
    log.warning("ignoring %s: %s", path, reason)
    seen = {f.path for f in ignored}
    for dirpath, dirnames, names in fsys.walk(path):
        for name in [*sorted(dirnames), *sorted(names)]:
            full = fsys.join(dirpath, name)
            row = outside_link(full, bound)
            if row is None and name in names:
                row = InputFile(full, _kind_of(name), size_of(full), IGNORED, reason)
            if row is not None and full not in seen:
                ignored.append(row)


def _walk(root: str, ignored: list[InputFile], unreadable: list[str]) -> Iterator[PartitionDir]:
    bound = path_identity(root)
    own = _as_partition_dir(root, bound, unreadable)
    if own is not None:
        yield own
        return
    for dirpath, dirnames, filenames in walk_files(root, unreadable, ignored):
        if dirpath != root and any(_SEGMENT.match(f) for f in filenames):
            # Segment files in a folder not named <topic>-<partition> (a non-ASCII or renamed
            # folder): the topic and partition cannot be told, so its batches are not audited,
            # and the run says so for each file.
            _ignore_tree(
                dirpath,
                f"holds segment files but its name {fsys.basename(dirpath)!r} is not "
                "<topic>-<partition> (topic: [A-Za-z0-9._-]+): topic and partition unknown",
                ignored,
                bound,
            )
            dirnames[:] = []
            continue
        keep = []
        for d in dirnames:
            full = fsys.join(dirpath, d)
            if _IGNORED_DIR.search(d):
                _ignore_tree(
                    full, "a deleted, moving or stray log (-delete, -future, -stray): not the "
                    "live log", ignored, bound,
                )  # fmt: skip
                continue
            found = _as_partition_dir(full, bound, unreadable)
            if found is not None:
                yield found
            else:
                keep.append(d)
        dirnames[:] = keep


def discover_partition_dirs(
    root_paths: list[str], ignored: list[InputFile] | None = None
) -> list[PartitionDir]:
    """Find the `<topic>-<partition>` directories under one or more roots.

    A root may be a log dir, a single partition dir, a `.log` file inside one, or a tree such as
    `<export>/<broker-id>/<topic>-<partition>/`. The files of `-delete`, `-future` and `-stray`
    directories, and of folders holding segment files under another name, are ignored with a
    warning and listed in `ignored`. So are symbolic links out of the root (a root given as a link
    is followed), and links to a partition directory or segment the run reads under another name.

    Args:
        root_paths: the roots.
        ignored: where the ignored files are listed (`InputFile`, status IGNORED).

    Returns:
        Partition dirs sorted by topic, partition, replica and path (deduplicated).

    Raises:
        InputNotFoundError: a root does not exist, or no partition directory was found.
        InputUnreadableError: a directory under a root cannot be listed.

    """
    if isinstance(root_paths, str):
        root_paths = [root_paths]
    ignored = [] if ignored is None else ignored
    unreadable: list[str] = []
    found: dict[str, PartitionDir] = {}  # by real path: a directory reached twice is read once

    def add(pd: PartitionDir) -> None:
        real = path_identity(pd.path)
        other = found.setdefault(real, pd)
        if other.path == pd.path:
            return
        kept, dropped = (pd, other) if _is_link(other.path) else (other, pd)
        found[real] = kept
        if _is_link(dropped.path):
            ignored.append(read_once_row(dropped.path, real, kept.path))

    for root in root_paths:
        path = _root_path(root)
        if not fsys.exists(path):
            raise InputNotFoundError(f"input path does not exist: {root}")
        if fsys.isfile(path):
            directory = fsys.dirname(path)
            pd = _as_partition_dir(directory, path_identity(directory), unreadable)
            if pd is None and not unreadable:
                raise InputNotFoundError(
                    f"{root} is a file outside a <topic>-<partition> directory: pass the "
                    "partition directory or a folder above it"
                )
            if pd is not None:
                add(pd)
            continue
        if not readable(path):
            unreadable.append(path)
            continue
        for pd in _walk(path, ignored, unreadable):
            add(pd)
    if unreadable:
        raise unreadable_error(sorted(set(unreadable)))
    if not found:
        raise InputNotFoundError(
            "no Kafka partition directory (<topic>-<partition>/ holding .log files) found under "
            + ", ".join(root_paths)
        )
    dirs = sorted(found.values(), key=lambda d: (d.topic, d.partition, d.replica, d.path))
    return _segments_read_once(dirs, ignored)


def _is_link(path: str) -> bool:
    return not fsys.is_remote(path) and os.path.islink(path)


def _root_path(root: str) -> str:
    """A root as it is read: absolute; a local file given as a symbolic link, its target.

    A root given as a link is the user's choice: a segment file given so is read in the
    partition directory it really is in.
    """
    path = fsys.abspath(root)
    return os.path.realpath(path) if _is_link(path) and os.path.isfile(path) else path


def _segments_read_once(dirs: list[PartitionDir], ignored: list[InputFile]) -> list[PartitionDir]:
    """The partition directories less the segment files that are links to another one read.

    Segments only: they give the batches, which read twice would be reported as
    OFFSET_OVERLAP and DUPLICATE_BATCH. The links left out are listed in `ignored`.
    """
    local = [pd for pd in dirs if not fsys.is_remote(pd.path)]  # an object store has no links
    segments = [
        fsys.join(pd.path, name)
        for pd in local
        for name in sorted(partition_files(pd))
        if _SEGMENT.match(name)
    ]
    _, twice = read_once(segments)
    if not twice:
        return dirs
    ignored += twice
    names: dict[str, set[str]] = {}
    for f in twice:
        names.setdefault(fsys.dirname(f.path), set()).add(fsys.basename(f.path))
    return [
        dataclasses.replace(pd, read_elsewhere=frozenset(names[pd.path]))
        if pd.path in names
        else pd
        for pd in dirs
    ]


def _kind_of(name: str) -> str:
    """What a file of a log directory is, by its name (input_files.format)."""
    if _TRANSIENT.search(name):
        return "transient"
    for suffix, kind in _SUFFIX_KINDS.items():
        if name.endswith(suffix):
            return kind
    if name in _NAMED_KINDS:
        return _NAMED_KINDS[name]
    return "other"


_SUFFIX_KINDS = {
    ".log": "segment",
    ".index": "offset_index",
    ".timeindex": "time_index",
    ".txnindex": "transaction_index",
    ".snapshot": "producer_snapshot",
}
_NAMED_KINDS = {
    "leader-epoch-checkpoint": "leader_epoch_checkpoint",
    "partition.metadata": "partition_metadata",
    "log-start-offset-checkpoint": "checkpoint",
    "replication-offset-checkpoint": "checkpoint",
    "recovery-point-offset-checkpoint": "checkpoint",
    "cleaner-offset-checkpoint": "checkpoint",
    "meta.properties": "meta_properties",
}
# Why the audit does not read a file it leaves alone (input_files.reason).
_NOT_READ = {
    "offset_index": "an index, derived from the segment: the audit reads the segment",
    "time_index": "an index, derived from the segment: the audit reads the segment",
    "transaction_index": "an index of aborted transactions, derived from the segment",
    "partition_metadata": "the partition's topic id: not used by the audit",
    "meta_properties": "the log dir's broker and cluster ids: not used by the audit",
    "checkpoint": "a checkpoint the audit does not use",
    "transient": "a transient file of the log cleaner or of a deletion (.deleted, .cleaned, "
    ".swap): not part of the log",
    "other": "not a file Kafka keeps in a log directory",
}


def account_files(
    dirs: list[PartitionDir], read: set[str], ignored: list[InputFile], roots: list[str]
) -> list[InputFile]:
    """Every file of the partition directories and of their log dirs, read or ignored.

    Args:
        dirs: the partition directories found.
        read: paths the run reads (segments, the seed snapshot, checkpoints).
        ignored: files already ignored while discovering (kept first).
        roots: the input roots: a log dir above a root (a partition directory given alone)
            contributes the checkpoints the run reads, not its other files.

    Returns:
        One `InputFile` per file; read segments are `counted` (their batches carry the file).
        A symbolic link the run does not follow is IGNORED with its target, and logged.
    """
    out: list[InputFile] = []
    seen: set[str] = set()
    for f in ignored:  # a link may be met twice while discovering: one row
        if f.path not in seen:
            seen.add(f.path)
            out.append(f)

    def add(full: str, name: str, where: str, size: int | None, bound: str) -> None:
        if full in seen:
            return
        seen.add(full)
        link = outside_link(full, bound)
        if link is not None:
            out.append(link)
            return
        kind = _kind_of(name)
        if full in read:
            out.append(InputFile(full, kind, size, counted=kind == "segment"))
            return
        if kind == "transient":
            log.warning("ignoring transient segment file %s (cleaner/deletion leftover)", full)
        reason = _NOT_READ.get(kind)
        if kind == "producer_snapshot":
            reason = "not the snapshot that seeds the audited replica (the newest at or below "
            reason += "its first segment's offset)"
        elif kind == "leader_epoch_checkpoint":
            reason = "the checkpoint of a replica that is compared, not audited"
        elif kind == "checkpoint" and where == "partition":
            reason = _NOT_READ["other"]
        elif where == "elsewhere":
            reason = "outside the partition directories and their log dirs: not part of a log"
        out.append(InputFile(full, kind, size, IGNORED, reason))

    # Sizes from one listing per directory (an object store: one request, not one per file).
    for pd in dirs:
        for name, size in sorted(fsys.files_in(pd.path).items()):
            add(fsys.join(pd.path, name), name, "partition", size, pd.root)
    inside = tuple(fsys.abspath(r).rstrip(os.sep) + os.sep for r in roots)
    for log_dir, pd in sorted({pd.log_dir: pd for pd in dirs}.items()):
        for name, size in sorted(fsys.files_in(log_dir).items()):
            full = fsys.join(log_dir, name)
            if full in read or full.startswith(inside):
                add(full, name, "log_dir", size, _log_dir_bound(pd))
    # Anything else under a root (notes, a stray file beside the broker folders) is listed too.
    for root in roots:
        if fsys.isdir(root):
            bound = path_identity(root)
            for dirpath, _, names in fsys.walk(fsys.abspath(root)):
                for name in sorted(names):
                    full = fsys.join(dirpath, name)
                    if full not in seen:
                        add(full, name, "elsewhere", size_of(full), bound)
    log_links(out)
    return out


def discover_segment_files(paths: list[str]) -> list[dict]:
    """The `.log` segment files under `paths`, with their topic and partition.

    A path naming a `.log` file selects that file only.

    Args:
        paths: as for `discover_partition_dirs`.

    Returns:
        Dicts `{"path", "topic", "partition", "replica", "bytes"}` sorted by path.

    Raises:
        InputNotFoundError: as for `discover_partition_dirs`.

    """
    if isinstance(paths, str):
        paths = [paths]
    explicit = {_root_path(p) for p in paths if fsys.isfile(p)}
    files: dict[str, dict] = {}
    for pd in discover_partition_dirs(paths):
        for name, size in sorted(partition_files(pd).items()):  # one listing, with sizes
            full = fsys.join(pd.path, name)
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
                "bytes": size,
            }
    return [files[k] for k in sorted(files)]


def _under_any(full: str, paths: Iterable[str], explicit: set[str]) -> bool:
    dirs = [_root_path(p) for p in paths if _root_path(p) not in explicit]
    return any(full.startswith(d.rstrip(os.sep) + os.sep) for d in dirs)
