"""An expensive fixture built once for the whole run, whatever the number of xdist workers.

A session-scoped fixture is built once per pytest-xdist worker, and worksteal hands the tail of
one worker's queue to the other, so the tests that share a fixture (the demo's audit, the
generated export) are often split over both workers, and each worker built it: measured
2026-11-27, `small_run` 8.3 s and 6.3 s, `demo_run` 10.2 s and 4.8 s in one run. Here the first
worker to ask builds it into a folder the run's workers share, under a lock, and leaves what the
build returned next to it (pickled); a worker that asks later, or while it is being built, waits
for the lock and loads it. Without xdist it is built as before.
"""

from __future__ import annotations

import fcntl
import os
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")
_BUILT = ".built.pickle"


def once_per_run(
    tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], T]
) -> T:
    """`build(folder)` once for the run, its return value for every worker that asks.

    Args:
        tmp_path_factory: pytest's factory (its base folder's parent is the run's, under xdist).
        name: the folder's name, unique in the run.
        build: writes what it makes under `folder` and returns a picklable value. What it writes
            is shared: a test that writes into it must work on a copy of its own.

    Returns:
        What `build` returned, in this worker.
    """
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return build(tmp_path_factory.mktemp(name))
    run_folder = tmp_path_factory.getbasetemp().parent  # pytest-N/, above each worker's popen-gwK/
    folder = run_folder / name
    with (run_folder / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released as the file closes
        built = folder / _BUILT
        if built.exists():
            return pickle.loads(built.read_bytes())
        shutil.rmtree(folder, ignore_errors=True)  # what a failed build left
        folder.mkdir()
        value = build(folder)
        built.write_bytes(pickle.dumps(value))
        return value
