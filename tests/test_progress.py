"""Progress of long runs: stage lines with elapsed time, Spark's counts, JSON log lines."""

from __future__ import annotations

import json
import logging
import time
from types import SimpleNamespace

import pytest

from eos_audit import progress
from eos_audit.cli import JsonLogFormatter, build_parser


class FakeTracker:
    """A StatusTracker with one job of three stages: one done, one running, one not started."""

    def getActiveJobsIds(self):  # noqa: N802 - Spark's name
        return [7]

    def getJobInfo(self, job_id):  # noqa: N802
        return SimpleNamespace(jobId=job_id, stageIds=[1, 2, 3])

    def getStageInfo(self, stage_id):  # noqa: N802
        return {
            1: SimpleNamespace(numTasks=4, numCompletedTasks=4),
            2: SimpleNamespace(numTasks=10, numCompletedTasks=3),
        }.get(stage_id)


def fake_spark(tracker=None):
    return SimpleNamespace(sparkContext=SimpleNamespace(statusTracker=lambda: tracker))


def test_counts_of_the_running_jobs():
    counts = progress.spark_counts(FakeTracker())
    assert (counts.stages_done, counts.stages, counts.tasks_done, counts.tasks) == (1, 3, 7, 14)
    assert str(counts) == "Spark stages 1/3 done, tasks 7/14"
    idle = SimpleNamespace(getActiveJobsIds=lambda: [])
    assert progress.spark_counts(idle) is None


def test_a_stage_logs_its_start_its_progress_and_its_end(caplog):
    caplog.set_level(logging.INFO, logger="eos_audit.progress")
    with progress.stage(fake_spark(FakeTracker()), "night-1", "auditing", interval_s=0.05):
        time.sleep(0.2)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "run night-1: auditing"
    assert any("Spark stages 1/3 done, tasks 7/14" in line for line in lines[1:-1])
    assert lines[-1].startswith("run night-1: auditing: done in ")


def test_json_log_lines_are_one_object_each():
    record = logging.LogRecord("eos_audit.audit.pipeline", logging.INFO, __file__, 1,
                               "run %s: wrote %s", ("n", "/wh/findings"), None)  # fmt: skip
    line = json.loads(JsonLogFormatter().format(record))
    assert line["level"] == "INFO" and line["logger"] == "eos_audit.audit.pipeline"
    assert line["message"] == "run n: wrote /wh/findings"
    assert line["time"].endswith("+00:00")


@pytest.mark.parametrize(
    "argv",
    [
        ["-q", "--log-format", "json", "report", "--warehouse", "w"],
        ["report", "--warehouse", "w", "-q", "--log-format", "json"],
        ["--log-format", "json", "audit", "--batches", "b", "--warehouse", "w", "-q"],
        ["generate", "--output", "g", "--batches", "10", "-q", "--log-format", "json"],
    ],
)
def test_the_cli_has_quiet_and_json_logging_before_or_after_the_command(argv):
    args = build_parser().parse_args(argv)
    assert args.quiet and args.log_format == "json" and not args.verbose


def test_the_logging_defaults_without_the_options():
    args = build_parser().parse_args(["audit", "--batches", "b", "--warehouse", "w"])
    assert (args.quiet, args.verbose, args.log_format) == (False, False, "text")
