"""Run the Databricks notebook source on the local session with stand-ins for dbutils/display."""

from pathlib import Path

import pytest

from eos_audit.demo import write_demo_export

pytestmark = pytest.mark.slow
NOTEBOOK = Path(__file__).resolve().parents[2] / "jobs" / "databricks_notebook.py"


class _Widgets:
    def __init__(self, values):
        self.values = values

    def text(self, name, default, label=None):
        self.values.setdefault(name, default)

    def dropdown(self, name, default, choices, label=None):
        assert default in choices
        self.values.setdefault(name, default)

    def get(self, name):
        return self.values[name]


class _DBUtils:
    def __init__(self, values):
        self.widgets = _Widgets(values)


def test_notebook_runs_the_audit_and_fails_the_job_on_criticals(spark, tmp_path):
    export, faults = write_demo_export(tmp_path / "export")
    shown = []
    values = {
        "batches": str(export),
        "catalog_schema": "",
        "staging": str(tmp_path / "wh"),
        "run_id": "nb",
    }
    namespace = {"dbutils": _DBUtils(values), "spark": spark, "display": shown.append}
    with pytest.raises(Exception, match="found violations at or above critical"):
        exec(compile(NOTEBOOK.read_text(), str(NOTEBOOK), "exec"), namespace)
    assert shown and shown[0].count() == len(faults)
