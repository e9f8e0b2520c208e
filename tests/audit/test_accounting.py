"""Issue 27 without Spark: the run's status from its counts, input paths given twice, links."""

import logging
import os
import re
from pathlib import Path

import pytest

from eos_audit.errors import InputNotFoundError
from eos_audit.sinks.run_status import (
    INPUT_UNREADABLE,
    QUARANTINE_EXCEEDED,
    SUCCEEDED,
    UNUSABLE_INPUT,
    finished_status,
)
from eos_audit.sources.files.input_files import dedupe_paths, followed_paths, list_table_files


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


def test_a_table_root_is_read_without_its_links_out_and_each_file_once(tmp_path):
    """Spark follows a link to a file wherever it finds one: what it is given (`followed_paths`)
    is what the listing reads."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.parquet").write_bytes(b"PAR1 not the input's PAR1")
    root = tmp_path / "in"
    (root / "part").mkdir(parents=True)
    (root / "part" / "a.parquet").write_bytes(b"PAR1 rows PAR1")
    (root / "_staging").mkdir()
    (root / "_staging" / "s.parquet").write_bytes(b"PAR1 staged PAR1")
    (root / "_SUCCESS").write_text("")
    (root / "out.parquet").symlink_to(elsewhere / "x.parquet")
    (root / "more").symlink_to(elsewhere)
    (root / "again.parquet").symlink_to(Path("part", "a.parquet"))
    (root / "staged.parquet").symlink_to(Path("_staging", "s.parquet"))  # inside: followed
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "b.parquet").write_bytes(b"PAR1 rows PAR1")

    files = {f.path: f for f in list_table_files([str(root), str(plain)], "parquet")}
    status = {path: (f.status, f.format) for path, f in files.items()}
    assert status == {
        str(root / "part" / "a.parquet"): ("READ", "parquet"),
        str(root / "staged.parquet"): ("READ", "parquet"),
        str(root / "_SUCCESS"): ("IGNORED", "other"),
        str(root / "_staging" / "s.parquet"): ("IGNORED", "other"),
        str(root / "out.parquet"): ("IGNORED", "symlink"),
        str(root / "more"): ("IGNORED", "symlink"),
        str(root / "again.parquet"): ("IGNORED", "symlink"),
        str(plain / "b.parquet"): ("READ", "parquet"),
    }
    assert files[str(root / "more")].reason == (
        f"{root / 'more'} is a symbolic link to {os.path.realpath(elsewhere)}, outside the input "
        f"root {os.path.realpath(root)}: not followed"
    )
    assert files[str(root / "again.parquet")].reason.endswith(
        f"which is read as {root / 'part' / 'a.parquet'}: read once"
    )
    # A root without a link to leave out is given whole (Spark's own listing, its partitions).
    assert followed_paths([str(root), str(plain), "s3://b/x"], "parquet") == [
        str(root / "staged.parquet"),
        str(root / "part" / "a.parquet"),
        str(plain),
        "s3://b/x",
    ]
    only_links = tmp_path / "links"
    only_links.mkdir()
    (only_links / "x.parquet").symlink_to(elsewhere / "x.parquet")
    with pytest.raises(InputNotFoundError, match=re.escape(f"input {only_links} holds no file")):
        followed_paths([str(only_links)], "parquet")


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
    from eos_audit.audit.pipeline import as_input_error
    from eos_audit.errors import EosAuditError

    error = as_input_error(Exception(text))
    assert isinstance(error, EosAuditError) and error.exit_code == 2
    assert str(error) == "cannot read /data/in/b.parquet: permission denied"
