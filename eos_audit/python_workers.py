"""What eos-audit's code does for the PySpark Python worker it runs in.

PySpark's daemon runs a full `gc.collect()` in a reused worker after every task. Once eos-audit's
readers or its compiled replay kernel are loaded, a worker tracks well over 100,000 objects
(numba's, pyarrow's and pyspark's modules), and each of those passes walked them all again:
75-90 ms a task, measured, and a fifth of the workers' sampled time in an audit of 10M batches.
An export of many small segment files is many short read tasks, each of which paid it too (16
tasks of a few kB each: 0.85 s where the work was 0.12 s).
"""

from __future__ import annotations

import gc

_frozen: set[str] = set()


def freeze_worker_heap(kind: str) -> None:
    """Take what a worker holds after its first task of `kind` out of the collector's full passes.

    What a task loads (modules, compiled code) lives as long as the worker, so it is frozen
    (`gc.freeze`) once per kind of task, after the first one ran; what later tasks allocate is
    still collected. At most one freeze per kind (a read, a replay) keeps what a freeze might
    catch that is garbage bounded, whatever the number of tasks.

    Args:
        kind: what the task did ("read", "replay").
    """
    if kind not in _frozen:
        _frozen.add(kind)
        gc.freeze()
