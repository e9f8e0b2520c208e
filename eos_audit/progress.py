"""Progress of a long run: each stage with its elapsed time and, while it runs, Spark's own count.

A night over billions of batches takes a while; the log says which stage the run is in, for how
long, and how far Spark is (stages done of stages, tasks done of tasks, from Spark's status
tracker), at a readable rate. The lines go through the `eos_audit` logger, so `--quiet` silences
them and `--log-format json` makes them machine-readable.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

# Seconds between two progress lines of a running stage: readable, yet alive for a scheduler.
PROGRESS_INTERVAL_S = 20.0


@dataclass(frozen=True)
class SparkCounts:
    """How far Spark's running jobs are."""

    stages_done: int
    stages: int
    tasks_done: int
    tasks: int

    def __str__(self) -> str:
        return (
            f"Spark stages {self.stages_done}/{self.stages} done, "
            f"tasks {self.tasks_done}/{self.tasks}"
        )


def spark_counts(tracker: Any) -> SparkCounts | None:
    """Stages and tasks of the active jobs, from a `StatusTracker`; None when none is running."""
    stages_done = stages = tasks_done = tasks = 0
    for job_id in tracker.getActiveJobsIds():
        job = tracker.getJobInfo(job_id)
        if job is None:
            continue
        for stage_id in job.stageIds:
            info = tracker.getStageInfo(stage_id)
            stages += 1
            if info is None:  # not started yet, or skipped (its output was reused)
                continue
            tasks += info.numTasks
            tasks_done += info.numCompletedTasks
            stages_done += int(info.numTasks > 0 and info.numCompletedTasks >= info.numTasks)
    return SparkCounts(stages_done, stages, tasks_done, tasks) if stages else None


@contextmanager
def stage(
    spark: Any, run_id: str, name: str, interval_s: float = PROGRESS_INTERVAL_S
) -> Iterator[None]:
    """Log a stage of a run: when it starts, every `interval_s` while it runs, when it ends.

    Args:
        spark: the session (its status tracker is read from a background thread).
        run_id: the run, named on every line.
        name: what the stage does.
        interval_s: seconds between two progress lines.
    """
    started = time.monotonic()
    log.info("run %s: %s", run_id, name)
    stop = threading.Event()
    tracker = spark.sparkContext.statusTracker()

    def report() -> None:
        while not stop.wait(interval_s):
            counts = spark_counts(tracker)
            log.info(
                "run %s: %s: %.0f s%s",
                run_id, name, time.monotonic() - started, f", {counts}" if counts else "",
            )  # fmt: skip

    reporter = threading.Thread(target=report, name=f"eos-audit progress: {name}", daemon=True)
    reporter.start()
    try:
        yield
    finally:
        stop.set()
        reporter.join()
    log.info("run %s: %s: done in %.1f s", run_id, name, time.monotonic() - started)
