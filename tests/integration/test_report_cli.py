"""The report from the command line: every audit writes it, `eos-audit report` writes it again."""

import re
from pathlib import Path

import pytest

from eos_audit.cli import main
from tests.builders import NULLABLE_BATCH, data

pytestmark = pytest.mark.slow


def _report_path(out: str) -> Path:
    (line,) = [x for x in out.splitlines() if x.startswith("report: ")]
    return Path(line.removeprefix("report: "))


def test_an_audit_writes_its_report_and_the_report_command_writes_it_again(
    spark, tmp_path, capsys
):
    batches = tmp_path / "batches.parquet"
    rows = [data(0, seq=0), data(1, seq=1), data(2, seq=5)]  # a gap: one finding to draw
    spark.createDataFrame([tuple(r[f.name] for f in NULLABLE_BATCH) for r in rows],
                          NULLABLE_BATCH).write.parquet(str(batches))  # fmt: skip
    warehouse = tmp_path / "wh"
    code = main(["audit", "--batches", str(batches), "--warehouse", str(warehouse),
                 "--run-id", "night-1", "--fail-on", "never"])  # fmt: skip
    out = capsys.readouterr().out
    # --fail-on never: a CRITICAL finding and still exit 0 (the default exits 1, test_cli.py)
    assert code == 0 and re.search(r"^SEQUENCE_GAP +CRITICAL +1$", out, re.MULTILINE), out
    written = _report_path(out)
    assert written == warehouse / "reports" / "night-1.html"
    page = written.read_text()
    assert "SEQUENCE_GAP" in page and "<svg" in page

    written.unlink()
    again = tmp_path / "again.html"
    assert main(["report", "--warehouse", str(warehouse), "--output", str(again)]) == 0
    assert _report_path(capsys.readouterr().out) == again
    assert "SEQUENCE_GAP" in again.read_text()

    # A warehouse where the report cannot go (here `reports` is a file; a read-only share fails
    # the same way): one line saying what to do, exit 2, not a trace.
    (warehouse / "reports").rmdir()
    (warehouse / "reports").write_text("not a folder")
    assert main(["report", "--warehouse", str(warehouse)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("eos-audit: error: cannot write the report to "), err
    assert err.strip().endswith("pass --output FILE to write it elsewhere") and "Trace" not in err
