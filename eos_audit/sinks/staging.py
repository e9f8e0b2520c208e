"""A run's private staging folder under `<warehouse>/_staging`, held by a lock while the run lives.

Every run stages its intermediate Parquet (the audit's output records, the rows streamed into
delta-rs) in `<warehouse>/_staging/<key>/`, where `<key>` is derived from the run id. The folder
holds a `.lock` file the run keeps an exclusive `flock` on; the operating system releases it
when the process ends in any way, SIGKILL included. So a later run can tell a live run's folder
from a dead run's leftovers without clocks or heartbeats: a folder whose lock it can take belongs
to no living process and is removed, and the run id written in the lock file names the run that
left it (the pipeline then settles that run's rows, see `eos_audit.audit.pipeline`).

Two runs of the same run id at once are refused: the second cannot take the lock.

Where the file system does not support `flock` (some FUSE mounts), the folder works without a lock:
nothing is cleaned up for other runs, and concurrent runs of one run id rely on Delta's conflict
checks alone (which never double rows; see `eos_audit.sinks.delta`).

A warehouse on an object store (`s3://`, `s3a://`, `abfss://`...) has no files to lock: its runs
keep the folder and its lock on this machine's disk, under the temporary directory (`$TMPDIR`,
else `/tmp`), in `eos-audit-<uid>/warehouses/<the warehouse's URI and digest>/<key>`
(`local_staging_root`), one per user and warehouse (`s3://b/wh` and `s3a://b/wh/` are one). The
lock therefore guards against processes of this user on this machine only: two machines running
the same run id on one object-store warehouse are not stopped by it. They still never double
rows, since each commit replaces the run's rows and Delta's commits are atomic on the store
(delta-rs uses the store's conditional writes). For the same reason a run on an object store
settles only the runs that died on this machine (their folder is here, unlocked): a RUNNING run
of another machine is left alone, alive or not, until a run there, or a re-run of its id,
settles or replaces it. What Spark stages goes to the local folder when the session's executors
share this machine's disk (a `local` master), else to `<warehouse>/_staging/<key>` on the store,
which every executor reaches (removed when the run ends, and when a run here finds it dead).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from eos_audit.errors import SinkError
from eos_audit.sources.files import filesystems as fsys

try:  # POSIX only; elsewhere runs stage without a lock (see the module docstring)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

STAGING = "_staging"
LOCK = ".lock"


class RunInProgressError(SinkError):
    """Another living process is running the same run id on this warehouse."""


def stage_key(run_id: str) -> str:
    """A folder name for a run id: its safe characters, then a digest (ids may hold anything)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", run_id)[:60]
    return f"{safe}-{hashlib.sha256(run_id.encode()).hexdigest()[:8]}"


def local_staging_root(warehouse: str) -> Path:
    """Where the runs of an object-store warehouse keep their staging folders and locks.

    On this machine, per user (a lock file another user created could not be opened for
    writing), under the temporary directory; named by the warehouse's URI spelled one way
    (`filesystems.canonical`) and a digest of it, so each warehouse has its own.
    """
    uri = fsys.canonical(warehouse)
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", uri)[:80]
    digest = hashlib.sha256(uri.encode()).hexdigest()[:12]
    user = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
    return Path(tempfile.gettempdir()) / f"eos-audit-{user}" / "warehouses" / f"{safe}-{digest}"


def _try_lock(fd: int) -> bool | None:
    """Lock without waiting: True taken, False held elsewhere, None not supported here."""
    if fcntl is None:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:  # ENOLCK, EOPNOTSUPP: a file system without locks
        return None
    return True


@dataclass
class DeadRun:
    """What a dead run left in `_staging`: its folder and the run id written in its lock."""

    path: Path
    run_id: str | None


@dataclass
class RunStage:
    """The staging folder of one run; use as a context manager.

    Attributes:
        warehouse: the warehouse directory or URI (or the staging area in catalog mode).
        run_id: the run's id.
        executors_share_disk: whether Spark's executors write to this machine's disk (a `local`
            master); only a URI warehouse asks, to tell where Spark stages (module docstring).
        path: the run's folder, holding its lock: `<warehouse>/_staging/<key>`, or for a URI
            warehouse `<local_staging_root>/<key>`.
        data: where `subdir` puts what the run stages: `path`, or for a URI warehouse whose
            executors do not share this disk, `<warehouse>/_staging/<key>` on the store.
        dead_runs: folders of dead runs found (and removed) on entering.
        locked: whether the run holds its lock (False where the file system has no locks).
        is_uri: whether the warehouse is a URI (its lock is this machine's).

    """

    warehouse: str
    run_id: str
    executors_share_disk: bool = True
    path: Path = field(init=False)
    data: str = field(init=False)
    is_uri: bool = field(default=False, init=False)
    dead_runs: list[DeadRun] = field(default_factory=list, init=False)
    locked: bool = field(default=False, init=False)
    _fd: int | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        key = stage_key(self.run_id)
        self.is_uri = fsys.is_uri(self.warehouse)
        root = local_staging_root(self.warehouse) if self.is_uri else Path(self.warehouse) / STAGING
        self.path = root / key
        self.data = str(self.path)
        if self.is_uri and not self.executors_share_disk:
            self.data = self._shared_folder(key)

    def _shared_folder(self, key: str) -> str:
        """A run's staging folder on the warehouse's store (URIs joined as text, never Paths)."""
        return fsys.join(self.warehouse, STAGING, key)

    def subdir(self, name: str) -> str:
        """A path inside the run's staging folder (not created): a local path, or a URI."""
        return fsys.join(self.data, name)

    def __enter__(self) -> RunStage:
        self._acquire()
        self.dead_runs = self._remove_dead_folders(self.path.parent)
        return self

    def _acquire(self) -> None:
        lock = self.path / LOCK
        for attempt in range(10):
            try:
                self.path.mkdir(parents=True, exist_ok=True)
                fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
            except FileNotFoundError:  # removed meanwhile by another run's clean-up: again
                continue
            taken = _try_lock(fd)
            if taken is False:
                os.close(fd)
                if attempt < 4:  # another run may hold it for a moment while removing it
                    time.sleep(0.05)
                    continue
                raise RunInProgressError(
                    f"run {self.run_id} is already running on {self.warehouse} (its lock "
                    f"{lock} is held by a living process); wait for it to finish, or pass another "
                    "--run-id"
                )
            # Another run's clean-up may have removed the folder between our open and our lock:
            # then the locked file is no longer the one at the path, so start again.
            try:
                same = os.fstat(fd).st_ino == os.stat(lock).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.write(fd, self.run_id.encode())
            self._fd, self.locked = fd, bool(taken)
            if taken:  # what a killed run of this same id staged is of no use: start empty
                for leftover in self.path.iterdir():
                    if leftover.name != LOCK:
                        shutil.rmtree(leftover, ignore_errors=True)
                if self.data != str(self.path):
                    fsys.remove_tree(self.data)
            if taken is None:
                log.warning("%s does not support file locks: staging without one", lock)
            return
        raise SinkError(f"cannot create the staging folder {self.path}: it keeps disappearing")

    def is_alive(self, run_id: str) -> bool:
        """Whether a living process runs `run_id` on this warehouse (holds its staging lock).

        A run without a staging folder or lock is not running: it died, or it ended without
        recording its end (a full disk). Where this run holds no lock (a file system without
        locks) nothing can be told, and every run counts as alive. On a URI warehouse the locks
        are this machine's: a run without a folder here may be running elsewhere, so only a run
        whose folder was found here unlocked (`dead_runs`) is dead.
        """
        if not self.locked:
            return True
        if run_id == self.run_id:
            return True
        lock = self.path.parent / stage_key(run_id) / LOCK
        try:
            fd = os.open(lock, os.O_RDWR)
        except FileNotFoundError:
            if self.is_uri:
                return run_id not in {dead.run_id for dead in self.dead_runs}
            return False
        except OSError:
            return True
        try:
            return _try_lock(fd) is not True  # taken: nobody held it (released on close)
        finally:
            os.close(fd)

    def _remove_dead_folders(self, root: Path) -> list[DeadRun]:
        """Remove every other folder whose lock no living process holds."""
        if not self.locked:
            return []
        dead = []
        for folder in sorted(p for p in root.iterdir() if p != self.path):
            lock = folder / LOCK
            if not folder.is_dir():
                continue
            try:
                fd = os.open(lock, os.O_RDWR)  # never created here: a folder being set up waits
            except FileNotFoundError:
                if not any(folder.iterdir()):
                    with contextlib.suppress(OSError):
                        folder.rmdir()
                continue
            except OSError:
                continue
            try:
                if _try_lock(fd) is not True:
                    continue
                run_id = os.read(fd, 4096).decode(errors="replace") or None
                shutil.rmtree(folder, ignore_errors=True)
                if self.data != str(self.path):  # what it staged on the store
                    fsys.remove_tree(self._shared_folder(folder.name))
                log.info("removed the staging folder %s of a dead run (%s)", folder, run_id)
                dead.append(DeadRun(folder, run_id))
            finally:
                os.close(fd)
        return dead

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Remove the folder unless the process is dying like a killed one, then unlock.

        A normal end, an error and Ctrl-C clean up. Any other BaseException (the test suite's
        simulated kill, a signal handler's exit) leaves the folder exactly as SIGKILL would, for
        the next run to remove.
        """
        is_kill = exc_type is not None and not issubclass(exc_type, Exception | KeyboardInterrupt)
        try:
            if not is_kill:
                if self.data != str(self.path):
                    fsys.remove_tree(self.data)
                shutil.rmtree(self.path, ignore_errors=True)
                with contextlib.suppress(OSError):  # only when empty: another run may be staging
                    self.path.parent.rmdir()
        finally:
            if self._fd is not None:
                os.close(self._fd)  # releases the lock, as the process's death would
                self._fd = None
