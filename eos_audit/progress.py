"""Progress of a long run: each stage with its elapsed time and, while it runs, Spark's own count.

A night over billions of batches takes a while; the log says which stage the run is in, for how
long, and how far Spark is (stages done of stages, tasks done of tasks), at a readable rate. A
classic session's counts come from its status tracker; a Spark Connect session has none (it has
no JVM in this process), so there they come from the progress the server streams with each operation
(`SparkSession.registerProgressHandler`). The lines go through the `eos_audit` logger, so
`--quiet` silences them and `--log-format json` makes them machine-readable.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from eos_audit.session import connect_server, server_answers, status_tracker

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


class ConnectProgress:
    """A Spark Connect progress handler that keeps the counts of the operation running now.

    The client calls it (on the thread running the operation) with every progress message the
    server streams; the stage's reporter thread reads `counts` at its own pace.
    """

    def __init__(self) -> None:
        self.counts: SparkCounts | None = None

    def __call__(
        self,
        stages: Iterable[Any] | None,
        inflight_tasks: int,
        operation_id: str | None,
        done: bool,
    ) -> None:
        """Record the counts of an operation's stages (`StageInfo`s); none once it is done."""
        infos = list(stages or [])
        if done or not infos:
            self.counts = None
            return
        self.counts = SparkCounts(
            stages_done=sum(int(info.done) for info in infos),
            stages=len(infos),
            tasks_done=sum(info.num_completed_tasks for info in infos),
            tasks=sum(info.num_tasks for info in infos),
        )


@contextmanager
def _counts_source(spark: Any) -> Iterator[Callable[[], SparkCounts | None]]:
    """What says how far Spark is: the status tracker, or a Spark Connect progress handler."""
    tracker = status_tracker(spark)
    if tracker is not None:
        yield lambda: spark_counts(tracker)
        return
    if not hasattr(spark, "registerProgressHandler"):  # a Connect client older than Spark 4
        yield lambda: None
        return
    handler = ConnectProgress()
    spark.registerProgressHandler(handler)
    try:
        yield lambda: handler.counts
    finally:
        spark.removeProgressHandler(handler)


@contextmanager
def stage(
    spark: Any, run_id: str, name: str, interval_s: float = PROGRESS_INTERVAL_S
) -> Iterator[None]:
    """Log a stage of a run: when it starts, every `interval_s` while it runs, when it ends.

    Args:
        spark: the session, classic (its status tracker is read from a background thread) or
            Spark Connect (a progress handler is registered for the stage).
        run_id: the run, named on every line.
        name: what the stage does.
        interval_s: seconds between two progress lines.
    """
    started = time.monotonic()
    log.info("run %s: %s", run_id, name)
    stop = threading.Event()
    with _counts_source(spark) as current_counts:
        server = connect_server(spark)

        def report() -> None:
            while not stop.wait(interval_s):
                elapsed = time.monotonic() - started
                if server is not None and not server_answers(server):
                    # The client retries for a while: say why nothing moves, not stale counts.
                    log.warning(
                        "run %s: %s: %.0f s, the Spark Connect server %s does not answer; the "
                        "run fails if it does not come back", run_id, name, elapsed, server,
                    )  # fmt: skip
                    continue
                counts = current_counts()
                log.info(
                    "run %s: %s: %.0f s%s", run_id, name, elapsed, f", {counts}" if counts else ""
                )

        reporter = threading.Thread(target=report, name=f"eos-audit progress: {name}", daemon=True)
        reporter.start()
        try:
            yield
        finally:
            stop.set()
            reporter.join()
    log.info("run %s: %s: done in %.1f s", run_id, name, time.monotonic() - started)
