"""Accounting for every file under the run's inputs: listed on the driver, from metadata only.

Every file (or directory) under an input root that the run considered is one `InputFile`: read,
ignored with the reason, or unreadable. What the readers then make of a read file (batches read,
audited, quarantined, skipped) comes back from the run's one pass (the replay counts the rows of
each file, `eos_audit.replay.runner`), and the pipeline writes both as the `input_files` table.

An input the run was given and cannot read is found here, before any data is read, wherever the
driver can tell: a directory it cannot list, a file it may not open (`os.access`, which asks the
kernel with the process's own identity, so it is right for non-root runs and costs no open).

Only what lies inside an input root is input. A symbolic link found under a root is followed only
when its real target stays inside the root's real path (a root given as a link is the user's
choice, and followed); a link out of it is IGNORED, with its target in the reason, so no batch or
quarantine row is ever built from bytes the run was not given. A file reached twice, directly and
through a link, is read once under one name (`read_once`).
"""

from __future__ import annotations

import logging
import os
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from eos_audit.errors import InputNotFoundError
from eos_audit.sources.files import filesystems as fsys

log = logging.getLogger(__name__)

# input_files.status
READ = "READ"
UNREADABLE = "UNREADABLE"
IGNORED = "IGNORED"
DAMAGED = "DAMAGED"
# input_files.format of a symbolic link the run does not follow: what lies behind it is not told.
SYMLINK = "symlink"


class InputUnreadableError(InputNotFoundError):
    """An input the run was given cannot be read (permission denied, unlistable directory)."""


@dataclass
class InputFile:
    """One file or directory under an input root, as the run considered it.

    Attributes:
        path: absolute path.
        format: what the file is (segment, producer_snapshot, checkpoint, parquet, ...).
        bytes: its size (a directory: null).
        status: READ, IGNORED or UNREADABLE on the driver; the pipeline turns a READ file the
            run found damaged or could not read into DAMAGED or UNREADABLE.
        reason: why it was ignored, or what was wrong.
        counted: whether the run counts this file's record batches (its rows carry the file).
        file_id: the id its rows carry, when the driver handed it to the reader
            (`row_reference.unique_file_ids`); otherwise they carry the CRC-32 of the path in
            one of its spellings (`file_id_spellings`).
    """

    path: str
    format: str
    bytes: int | None
    status: str = READ
    reason: str | None = None
    counted: bool = False
    file_id: int | None = None


def is_uri(path: str) -> bool:
    """A path on an object store or DBFS (listed by Spark, not by this module)."""
    return "://" in path or path.startswith("dbfs:")


def file_id_spellings(path: str) -> list[int]:
    """The ids rows of a local file may carry (`row_reference.file_id`) in each spelling of it.

    Spark names a local file `file:/dir/f` (`_metadata.file_path`) or `file:///dir/f`
    (`inputFiles()`); the segment reader names it `/dir/f`.
    """
    return [zlib.crc32(s.encode("utf-8")) for s in (path, f"file:{path}", f"file://{path}")]


def path_identity(path: str) -> str:
    """One spelling of the place a path names.

    `exp2`, `./exp2/` and a symbolic link to it are one local folder (its real absolute path); a
    URI is itself without its trailing slashes.
    """
    return path.rstrip("/") if is_uri(path) else os.path.realpath(path)


def is_inside(path: str, directory: str) -> bool:
    """Whether `path` is `directory` or lies below it (both spelled alike, e.g. real paths)."""
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def outside_link(path: str, bound: str) -> InputFile | None:
    """The IGNORED row of a symbolic link out of the input root it was found under, else None.

    Args:
        path: a file or directory found while listing an input root.
        bound: the real path of that root (`path_identity`): what lies below it is the input.

    Returns:
        None for a path that is no link (a URI never is), or whose real target is inside `bound`.
    """
    if is_uri(path) or not os.path.islink(path):
        return None
    target = os.path.realpath(path)
    if is_inside(target, bound):
        return None
    reason = f"{path} is a symbolic link to {target}, outside the input root {bound}: not followed"
    return InputFile(path, SYMLINK, None, IGNORED, reason)


def read_once_row(link: str, target: str, kept: str) -> InputFile:
    """The IGNORED row of a symbolic link to a file (or directory) the run reads as `kept`."""
    reason = f"{link} is a symbolic link to {target}, which is read as {kept}: read once"
    return InputFile(link, SYMLINK, None, IGNORED, reason)


def read_once(paths: Iterable[str]) -> tuple[list[str], list[InputFile]]:
    """The paths without second names of one file, and the IGNORED rows of the names left out.

    A file read under two names (itself and a symbolic link to it) gives its batches twice, which
    the replay would report as OFFSET_OVERLAP and DUPLICATE_BATCH. Of the names of one real file,
    one that is no link is kept before any link; otherwise the first.
    """
    real_dirs: dict[str, str] = {}

    def real(path: str) -> tuple[str, bool]:
        if is_uri(path):
            return path, False
        if os.path.islink(path):
            return os.path.realpath(path), True
        # One realpath per directory, not per file: its files are no links.
        directory, name = os.path.split(path)
        if directory not in real_dirs:
            real_dirs[directory] = os.path.realpath(directory)
        return os.path.join(real_dirs[directory], name), False

    named = [(path, *real(path)) for path in paths]
    kept_as: dict[str, str] = {}
    for path, target, _ in sorted(named, key=lambda n: n[2]):  # stable: links last
        kept_as.setdefault(target, path)
    kept, dropped = [], []
    for path, target, _ in named:
        if kept_as[target] == path:
            kept.append(path)
        else:
            dropped.append(read_once_row(path, target, kept_as[target]))
    return kept, dropped


def log_links(files: Iterable[InputFile]) -> None:
    """One warning per symbolic link the run does not follow, with its reason."""
    for f in files:
        if f.format == SYMLINK:
            log.warning("%s", f.reason)


def dedupe_paths(paths: Iterable[str], label: str = "--batches") -> tuple[str, ...]:
    """The paths without repeats: each file is read once however often it is given.

    Two spellings of one path (`./x` and `x/`, a symbolic link) and a path inside another given
    path (a root and a partition directory of it) would read the same batches twice and report
    them as OFFSET_OVERLAP and DUPLICATE_BATCH. The first spelling of a path is kept; each path
    dropped is logged.
    """
    kept: list[tuple[str, str]] = []  # (as given, resolved)
    for path in paths:
        resolved = path_identity(path)
        duplicate = next((given for given, other in kept if is_inside(resolved, other)), None)
        if duplicate is not None:
            log.warning("%s %s is read once: it is %s, or inside it", label, path, duplicate)
            continue
        inside = [given for given, other in kept if is_inside(other, resolved)]
        for given in inside:
            log.warning("%s %s is read once: it is inside %s", label, given, path)
        kept = [(g, o) for g, o in kept if g not in inside]
        kept.append((path, resolved))
    return tuple(given for given, _ in kept)


def unreadable_error(paths: list[str]) -> InputUnreadableError:
    """The one line that stops a run given inputs it cannot read."""
    shown = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
    if all(fsys.is_remote(p) for p in paths):
        return InputUnreadableError(
            f"cannot read input {shown}: the store denied the request or could not be reached; "
            "check the credentials and endpoint in the environment (AWS_ENDPOINT_URL for an "
            "S3-compatible store) or leave the path out"
        )
    return InputUnreadableError(
        f"cannot read input {shown}: permission denied; grant the run's user read access "
        "(directories: read and execute) or leave the path out"
    )


def walk_files(
    root: str, unreadable: list[str], links: list[InputFile] | None = None
) -> Iterator[tuple[str, list[str], list[str]]]:
    """`os.walk` of `root`, sorted; directories it cannot list or enter are noted, not entered.

    Symbolic links out of the root (`outside_link`), to files or directories, are left out of
    what is yielded, and their IGNORED rows added to `links` when it is given. Links to
    directories are never entered (as `os.walk`), so every name yielded lies inside the root.
    The caller may prune the directory names it is given, as with `os.walk`.
    """

    def note(exc: OSError) -> None:
        unreadable.append(exc.filename or root)

    bound = path_identity(root)

    def inside_root(dirpath: str, names: list[str]) -> list[str]:
        kept = []
        for name in names:
            link = outside_link(os.path.join(dirpath, name), bound)
            if link is None:
                kept.append(name)
            elif links is not None:
                links.append(link)
        return kept

    for dirpath, dirnames, filenames in fsys.walk(root, onerror=note):
        dirnames.sort()
        if fsys.is_remote(root):  # listed at once: a prefix that could not be is in `note`
            yield dirpath, dirnames, sorted(filenames)
            continue
        dirnames[:] = inside_root(dirpath, dirnames)
        for d in dirnames:
            full = os.path.join(dirpath, d)
            if not os.access(full, os.R_OK | os.X_OK):
                unreadable.append(full)
        dirnames[:] = [d for d in dirnames if os.path.join(dirpath, d) not in unreadable]
        yield dirpath, dirnames, inside_root(dirpath, sorted(filenames))


def readable(path: str) -> bool:
    """Whether the run's user may read a file (a directory: list and enter it)."""
    return fsys.readable(path)


def size_of(path: str) -> int | None:
    """A file's size, None when it cannot be told."""
    try:
        return fsys.getsize(path)
    except OSError:
        return None


def _is_marker(relative: str) -> bool:
    """Spark's markers and hidden files (_SUCCESS, .crc, _delta_log/...), which Spark skips."""
    return any(part.startswith(("_", ".")) for part in relative.split(os.sep))


# Tabular formats whose rows carry their file's id to the replay (counted per file).
_COUNTED = ("parquet", "json", "csv")


def list_table_files(paths: Iterable[str], fmt: str) -> list[InputFile]:
    """Every file of tabular inputs (Parquet, JSON lines, CSV, dump-log text, a Delta table).

    Raises:
        InputUnreadableError: a directory or file cannot be read.
    """
    files: list[InputFile] = []
    unreadable: list[str] = []
    for given in paths:
        files += _root_files(given, fmt, unreadable)
    if unreadable:
        raise unreadable_error(unreadable)
    return files


def _root_files(given: str, fmt: str, unreadable: list[str]) -> list[InputFile]:
    """The files of one tabular input root, read or IGNORED; what cannot be read is noted."""
    # Spark lists and reads the tabular formats (through the cluster's connectors); the
    # dump-log text of an object store is listed and read by eos-audit (`filesystems`).
    if is_uri(given) and not (fmt == "dump-log" and fsys.is_remote(given)):
        return [InputFile(given, fmt, None)]
    root = fsys.abspath(given)
    if fsys.isfile(root):
        if not readable(root):
            unreadable.append(root)
        return [InputFile(root, fmt, size_of(root), counted=fmt in _COUNTED)]
    if not readable(root):
        unreadable.append(root)
        return []
    remote = fsys.is_remote(root)
    if fmt == "delta":  # one table: its files are whatever its log says, read by Delta
        for _ in walk_files(root, unreadable):
            pass
        return [InputFile(root, fmt, None)]
    files: list[InputFile] = []
    data: list[str] = []
    for dirpath, _, names in walk_files(root, unreadable, files):
        for name in names:
            full = fsys.join(dirpath, name)
            relative = os.path.relpath(full, root) if not remote else full[len(root) + 1 :]
            if not _is_marker(relative):
                data.append(full)
            else:
                files.append(
                    InputFile(
                        full, "other", size_of(full), IGNORED,
                        "a hidden or marker file (_SUCCESS, .crc...), which Spark skips too",
                    )
                )  # fmt: skip
    kept, twice = read_once(data)
    for full in kept:
        if not readable(full):
            unreadable.append(full)
        files.append(InputFile(full, fmt, size_of(full), counted=fmt in _COUNTED))
    return files + twice


def followed_paths(paths: Iterable[str], fmt: str) -> list[str]:
    """The paths for a reader that lists directories itself (Spark, `os.walk`), links judged.

    Spark follows a symbolic link to a file wherever it finds one. A local directory holding a
    link the run does not follow (out of the root, or a second name of a file it reads) is
    therefore given as the files the listing (`list_table_files`) reads, so the reader reads
    exactly those; any other path is given as it is. Each link left out is logged.

    Raises:
        InputNotFoundError: such a directory holds no file the run reads.
    """
    out: list[str] = []
    for given in paths:
        if is_uri(given) or not os.path.isdir(given):
            out.append(given)
            continue
        files = _root_files(given, fmt, [])  # what cannot be read: the reader names it
        links = [f for f in files if f.format == SYMLINK]
        if not links:
            out.append(given)
            continue
        log_links(links)
        read = [f.path for f in files if f.status != IGNORED]
        if not read:
            raise InputNotFoundError(
                f"input {given} holds no file to read: the symbolic links in it lead outside "
                "it or to files read under another name, and are not followed"
            )
        out += read
    return out
