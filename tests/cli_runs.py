"""What the integration tests do as a user does: run the CLI in process, query a table."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

from eos_audit.cli import main


def audit(capsys, *args) -> tuple[int, str, str]:
    """`eos-audit audit ARGS` in this process: (exit code, stdout, stderr)."""
    code = main(["audit", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def sql(warehouse: Path, table: str, query: str) -> list[dict]:
    """The rows of a SQL query over one Delta table of a warehouse, registered as `t`."""
    return pa.table(
        QueryBuilder().register("t", DeltaTable(str(warehouse / table))).execute(query).read_all()
    ).to_pylist()


@pytest.fixture(autouse=True)
def no_html_report(monkeypatch):
    """The run's HTML report is not what these tests check (it has its own); it costs seconds.

    Autouse in every test module that imports it.
    """
    monkeypatch.setattr("eos_audit.cli._write_report", lambda *args, **kwargs: None)
