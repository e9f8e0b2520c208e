"""Checks on the warehouse that run before anything is read: a bad one costs seconds, not an audit.

Besides being writable, every Delta table already in the warehouse (the tables the run will
write, and the `producer_state` and `audit_runs` that `--since-state` reads) must open: each
commit since its last checkpoint is whole JSON lines with as many files added and removed as its
`commitInfo` says, and every data file of its current version is there, of the size its commit
recorded, with Parquet's marker at both ends. A damaged table would otherwise fail the run after
the audit, deep in Spark or delta-rs (a Java or Rust trace), or be read without its lost rows.
Only the `_delta_log` and the files' metadata are read (plus 8 bytes a file): no Spark.

A warehouse on an object store (s3://, s3a://, gs://, abfss://...: `filesystems.is_remote`) is
checked the same way through pyarrow's filesystems, with the store's credentials, region and
endpoint from the environment, as delta-rs writes it: writable (an object written and removed),
not inside an input, its tables' commits whole and their data files there at their committed
sizes (one listing a table; the Parquet markers are not read, a request a file). A URI only
Spark's connectors know (dbfs:) is left to the writer.
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from eos_audit.errors import SinkError
from eos_audit.sources.files import filesystems as fsys

# Commit files read at once from an object store: each is a request of some tens of ms.
_REMOTE_READS = 16


def _inside(child: Path, parent: Path) -> bool:
    return child == parent or parent in child.parents


def check_warehouse(warehouse: str, inputs: Iterable[str], *, create: bool = True) -> None:
    """Refuse a warehouse that cannot be written or that lies inside an input directory.

    Args:
        warehouse: the `--warehouse` directory (or the staging area in catalog mode).
        inputs: every input path of the run.
        create: create the directory and prove it writable by writing a file in it; without,
            only what can be seen without writing is checked (the CLI's check before Spark).

    Raises:
        SinkError: the warehouse is a file, cannot be created or written, or is inside (or is) an
            input directory: a later run would read its own output as input.

    """
    if fsys.is_uri(warehouse):
        _check_uri_warehouse(warehouse, inputs, create)
        return
    target = Path(warehouse).expanduser().resolve()
    for path in inputs:
        if fsys.is_uri(path):
            continue
        source = Path(path).expanduser().resolve()
        if source.is_dir() and _inside(target, source):
            raise SinkError(
                f"--warehouse {warehouse} is inside the input directory {path}: a later run would "
                "read the audit's own tables as input; write the warehouse somewhere else"
            )
    if target.exists() and not target.is_dir():
        raise SinkError(f"--warehouse {warehouse} is a file, not a directory; pass a directory")
    check_tables(target)
    if not create:
        existing = next(p for p in (target, *target.parents) if p.exists())
        if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
            raise SinkError(
                f"--warehouse {warehouse} is not writable ({existing} cannot be written); pass a "
                "directory this user can write"
            )
        return
    try:
        target.mkdir(parents=True, exist_ok=True)
        # os.access is not enough (read-only mounts, ACLs): create and remove a file.
        probe = target / f".eos-audit-write-check-{uuid.uuid4().hex}"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise SinkError(
            f"--warehouse {warehouse} is not writable ({exc.strerror or exc}); pass a directory "
            "this user can write"
        ) from exc


def _check_uri_warehouse(warehouse: str, inputs: Iterable[str], create: bool) -> None:
    """`check_warehouse` for a URI: on an object store, the same checks through pyarrow.fs.

    Raises:
        SinkError: the warehouse is (or is inside) an input's URI, cannot be written, or holds
            a damaged table.
    """
    if not fsys.is_remote(warehouse):  # dbfs: and the like: only Spark's connectors know them
        return
    target = fsys.canonical(warehouse)
    for path in inputs:
        source = fsys.canonical(path)
        if fsys.is_uri(path) and (target == source or target.startswith(source + "/")):
            raise SinkError(
                f"--warehouse {warehouse} is inside the input {path}: a later run would read the "
                "audit's own tables as input; write the warehouse somewhere else"
            )
    if not create:  # the CLI's check before Spark: nothing asked of the store yet
        return
    probe = fsys.join(warehouse, f".eos-audit-write-check-{uuid.uuid4().hex}")
    try:
        fsys.write_bytes(probe, b"")
        fsys.remove(probe)
    except (OSError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise SinkError(
            f"--warehouse {warehouse} is not writable ({first}); check the bucket and the "
            "store's credentials, region and endpoint in the environment (README: Outputs)"
        ) from exc
    check_tables(warehouse)


_COMMIT = re.compile(r"^(\d{20})\.json$")
_PARQUET_MAGIC = b"PAR1"
# What commitInfo.operationMetrics calls the files a commit adds and removes: delta-rs, Spark.
_ADDED = ("num_added_files", "numAddedFiles")
_REMOVED = ("num_removed_files", "numRemovedFiles")


class DamagedTableError(SinkError):
    """A Delta table of the warehouse (or a seed table) has a damaged commit or data file."""


def check_tables(warehouse: Path | str) -> None:
    """`check_table` on every Delta table directly under the warehouse (a path or a URI).

    Raises:
        DamagedTableError: naming the first damaged table and what is damaged.
    """
    root = str(warehouse)
    if not fsys.isdir(root):
        return
    for name in sorted(fsys.listdir(root)):
        table = fsys.join(root, name)
        if name.startswith(("_", ".")) or not fsys.is_delta_table(table):
            continue
        check_table(table, "warehouse table")


def check_table(path: str, role: str = "Delta table") -> None:
    """Refuse a Delta table whose log or data files cannot be read as they were committed.

    Args:
        path: the table's directory, or its URI on an object store (another URI is left alone).
        role: how the message names the table ("warehouse table", "--producer-state").

    Raises:
        DamagedTableError: a commit since the last checkpoint is not whole JSON lines or lacks
            the files its commitInfo counts, the table does not open, or a data file of its
            current version is missing, of another size than committed, or not Parquet (on an
            object store: missing or of another size).
    """
    if fsys.is_uri(path) and not fsys.is_remote(path):
        return
    log = fsys.join(path, "_delta_log")
    where = f"{role} {path}"
    commits, checkpoint = _commits_to_check(log, where)
    # Every file a commit removes was added before (a path damaged inside a remove would leave
    # the file it meant in the table): known from the checkpoint and the commits since.
    added = _checkpoint_files(log, checkpoint)
    for commit, content in zip(commits, _read_all(commits), strict=True):
        problem, actions = _commit_problem(content)
        if problem is None and added is not None:
            for action in actions:
                kind, body = next(iter(action.items()))
                path_of = body.get("path") if isinstance(body, dict) else None
                if kind == "add":
                    added.add(path_of)
                elif kind == "remove" and path_of not in added:
                    problem = f"it removes {str(path_of)[:200]!r}, a file the table never added"
                    break
        if problem:
            raise DamagedTableError(
                f"{where}: its commit _delta_log/{fsys.basename(commit)} is damaged ({problem}); "
                "restore it from a backup, or move the table away to start it anew"
            )
    try:
        from deltalake import DeltaTable

        table = DeltaTable(path, storage_options=fsys.delta_storage_options(path))
        import pyarrow as pa

        actions = pa.table(table.get_add_actions(flatten=True)).select(["path", "size_bytes"])
    except Exception as exc:  # noqa: BLE001 - delta-rs's own words, on one line
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise DamagedTableError(
            f"{where} cannot be opened ({first}); restore its _delta_log from a backup, or move "
            "the table away to start it anew"
        ) from exc
    # On an object store, one listing gives every file's size (not a request a file).
    listed = _listed_sizes(path, where) if fsys.is_remote(path) else None
    for action in actions.to_pylist():
        problem, file = _data_file_problem(path, action["path"], action["size_bytes"], listed)
        if problem:
            raise DamagedTableError(
                f"{where}: its data file {file} {problem} (version {table.version()} lists it); "
                "restore the file from a backup, or move the table away to start it anew"
            )


def _read_all(files: list[str]) -> list[bytes | OSError]:
    """Each file's content, or the error reading it; an object store's read a few at a time."""

    def read(file: str) -> bytes | OSError:
        try:
            return fsys.read_bytes(file)
        except OSError as exc:
            return exc

    if not files or not fsys.is_remote(files[0]):
        return [read(f) for f in files]
    with ThreadPoolExecutor(max_workers=_REMOTE_READS) as pool:
        return list(pool.map(read, files))


def _listed_sizes(path: str, where: str) -> dict[str, int]:
    """Every object under a table's URI (relative name: size), from one listing.

    Raises:
        DamagedTableError: the table cannot be listed.
    """
    try:
        return {name: size for name, size, _ in fsys.remote_tree(path)}
    except (OSError, ValueError) as exc:
        raise DamagedTableError(f"{where} cannot be listed ({exc})") from exc


def _commits_to_check(log: str, where: str) -> tuple[list[str], int]:
    """The commit files above the last checkpoint, oldest first (all of them without one).

    Returns:
        (the commit files, the checkpoint's version or -1).
    """
    try:
        names = fsys.listdir(log)
    except OSError as exc:
        raise DamagedTableError(f"{where}: its _delta_log cannot be listed ({exc})") from exc
    checkpoint = -1
    last = fsys.join(log, "_last_checkpoint")
    if "_last_checkpoint" in names:
        try:
            checkpoint = int(json.loads(fsys.read_bytes(last))["version"])
        except (ValueError, KeyError, TypeError, OSError, UnicodeDecodeError) as exc:
            raise DamagedTableError(
                f"{where}: its _delta_log/_last_checkpoint is damaged ({type(exc).__name__}); "
                "restore it from a backup, or delete it so the log is read from its commits"
            ) from exc
    versions = sorted(int(m.group(1)) for n in names if (m := _COMMIT.match(n)))
    return [fsys.join(log, f"{v:020d}.json") for v in versions if v > checkpoint], checkpoint


def _checkpoint_files(log: str, checkpoint: int) -> set | None:
    """The data files of a single-file checkpoint; None when they cannot be told cheaply.

    An empty set without a checkpoint: every file was added by a commit that is checked.
    """
    if checkpoint < 0:
        return set()
    file = fsys.join(log, f"{checkpoint:020d}.checkpoint.parquet")
    try:
        import pyarrow.parquet as pq

        if fsys.is_remote(file):
            filesystem, inner = fsys.resolve(file)
            adds = pq.read_table(inner, columns=["add"], filesystem=filesystem)
        else:
            adds = pq.read_table(file, columns=["add"])
        adds = adds.column("add").combine_chunks()
        return {p for p in adds.field("path").to_pylist() if p is not None}
    except Exception:  # noqa: BLE001 - multi-part or v2 checkpoints: delta-rs judges them
        return None


def _commit_problem(content: bytes | OSError) -> tuple[str | None, list[dict]]:
    """(what makes one commit file unreadable or incomplete, or None; its actions).

    Args:
        content: the commit file's bytes, or the error reading it.
    """
    if isinstance(content, OSError):
        return content.strerror or str(content), []
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8 text", []
    actions: list[dict] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            action = json.loads(line)
        except ValueError:
            return f"line {number} is not JSON", []
        if not isinstance(action, dict) or len(action) != 1:
            return f"line {number} is not one Delta action", []
        actions.append(action)
    if not actions:
        return "it holds no action", []
    kinds = [next(iter(a)) for a in actions]
    info = next((a["commitInfo"] for a in actions if "commitInfo" in a), None)
    metrics = info.get("operationMetrics") if isinstance(info, dict) else None
    if isinstance(metrics, dict):
        # A commit cut at a line boundary still parses: its commitInfo's counts tell.
        for keys, kind in ((_ADDED, "add"), (_REMOVED, "remove")):
            expected = next((metrics[k] for k in keys if k in metrics), None)
            try:
                expected = int(expected) if expected is not None else None
            except (TypeError, ValueError):
                expected = None
            if expected is not None and kinds.count(kind) < expected:
                return (
                    f"its commitInfo counts {expected} {kind} actions, the file holds "
                    f"{kinds.count(kind)}: it was cut short"
                ), actions
    return None, actions


def _data_file_problem(
    root: str, relative: str, size: int | None, listed: dict[str, int] | None
) -> tuple[str | None, str]:
    """(what is wrong with a committed data file or None, its path as named in messages).

    Args:
        root: the table's directory or URI.
        relative: the file's path in its add action (relative, URL-encoded).
        size: the size its commit recorded.
        listed: on an object store, every object under the table by relative name and size.
    """
    if "://" in relative:
        return None, relative
    if listed is not None:
        name = urllib.parse.unquote(relative)
        file = fsys.join(root, name)
        if name not in listed:
            return "is missing", file
        if size is not None and listed[name] != size:
            return f"has {listed[name]} bytes where its commit recorded {size}", file
        return None, file
    file = Path(root) / urllib.parse.unquote(relative)
    try:
        actual = file.stat().st_size
    except FileNotFoundError:
        return "is missing", str(file)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})", str(file)
    if size is not None and actual != size:
        return f"has {actual} bytes where its commit recorded {size}", str(file)
    if actual < 2 * len(_PARQUET_MAGIC):
        return "is too short to be Parquet", str(file)
    try:
        with open(file, "rb") as fh:
            head = fh.read(len(_PARQUET_MAGIC))
            fh.seek(-len(_PARQUET_MAGIC), os.SEEK_END)
            tail = fh.read(len(_PARQUET_MAGIC))
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})", str(file)
    if head != _PARQUET_MAGIC or tail != _PARQUET_MAGIC:
        return "is not Parquet (no PAR1 marker at its start and end)", str(file)
    return None, str(file)
