"""Issue 27 without Spark: the run's status from its counts, and input paths given twice."""

import logging
import os

import pytest

from eos_audit.sinks.run_status import (
    INPUT_UNREADABLE,
    QUARANTINE_EXCEEDED,
    SUCCEEDED,
    UNUSABLE_INPUT,
    finished_status,
)
from eos_audit.sources.files.input_files import dedupe_paths


def test_bytes_quarantined_above_the_share_exceed_it_although_the_rows_do_not():
    status, why = finished_status(300, 1, 0.01, bytes_read=60_000, bytes_quarantined=36_864)
    assert status == QUARANTINE_EXCEEDED
    assert "could not audit 36864 of 60000 input bytes (61.4%)" in why
    assert "only 1 of 301 record batches are quarantined" in why
    assert finished_status(300, 1, 0.01, bytes_read=60_000, bytes_quarantined=600) == (
        SUCCEEDED,
        None,
    )


def test_a_truncated_tail_is_not_bad_input_but_other_quarantine_is():
    assert finished_status(10, 1, 0.01, tolerated=1)[0] == SUCCEEDED
    assert finished_status(10, 2, 0.01, tolerated=1)[0] == QUARANTINE_EXCEEDED


def test_a_quarantined_seed_row_is_never_a_green_night():
    status, why = finished_status(1000, 0, 0.01, seeds_quarantined=1)
    assert status == QUARANTINE_EXCEEDED and status in UNUSABLE_INPUT
    assert why.startswith("quarantined 1 seeded producer state row(s) (input producer_state)")
    assert finished_status(1000, 0, 0.01, seeds_quarantined=0) == (SUCCEEDED, None)


def test_files_an_executor_could_not_read_are_never_a_green_night():
    status, why = finished_status(1000, 1, 0.01, unreadable=("/x/1/t-0/0.log", "/x/1/t-1/0.log"))
    assert status == INPUT_UNREADABLE and status in UNUSABLE_INPUT
    assert "/x/1/t-0/0.log, /x/1/t-1/0.log" in why


def test_paths_given_twice_or_inside_another_are_read_once(tmp_path, caplog, monkeypatch):
    (tmp_path / "x" / "1" / "t-0").mkdir(parents=True)
    os.symlink(tmp_path / "x", tmp_path / "link")
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.WARNING):
        kept = dedupe_paths(["./x", "x/", "link", "x/1/t-0", str(tmp_path / "y")])
    assert kept == ("./x", str(tmp_path / "y"))
    assert sum("is read once" in m for m in caplog.messages) == 3
    # A subdirectory given first gives way to the root given after it.
    assert dedupe_paths(["x/1/t-0", "x"]) == ("x",)


@pytest.mark.parametrize("uri", ["s3://bucket/export", "dbfs:/mnt/export"])
def test_uris_are_compared_as_written(uri):
    assert dedupe_paths([uri, uri + "/", uri + "/1"]) == (uri,)


@pytest.mark.parametrize(
    "text",
    [
        "An error occurred while calling o43.parquet.\n: org.apache.spark.SparkException: "
        "java.io.FileNotFoundException: /data/in/b.parquet (Permission denied)\n\tat java.io",
        "py4j: java.nio.file.AccessDeniedException: file:/data/in/b.parquet\n\tat sun.nio",
    ],
)
def test_a_file_spark_may_not_read_is_the_users_problem_named_in_one_line(text):
    from eos_audit.errors import EosAuditError
    from eos_audit.pipeline import as_input_error

    error = as_input_error(Exception(text))
    assert isinstance(error, EosAuditError) and error.exit_code == 2
    assert str(error) == "cannot read /data/in/b.parquet: permission denied"
