"""The Databricks notebook source, run locally with stand-ins for dbutils and displayHTML."""

import argparse
import ast
import re
from pathlib import Path

import pytest

from eos_audit.cli import build_parser
from eos_audit.demo import write_demo_export
from eos_audit.report import run_overview

pytestmark = pytest.mark.slow
NOTEBOOK = Path(__file__).resolve().parents[2] / "jobs" / "databricks_notebook.py"
# Widgets of the notebook that are not options of `eos-audit audit`.
NOTEBOOK_ONLY = {"catalog_schema"}
# A notebook runs in the session it is attached to (classic or serverless/Spark Connect): which
# Spark to use is the cluster's, not a widget; and the notebook's logs are the notebook's (the
# CLI's -v, -q and --log-format, which every command takes, are the process's logging).
CLI_ONLY = {"remote", "verbose", "quiet", "log_format"}


class _Widgets:
    def __init__(self, values):
        self.values = values
        self.defined = {}

    def text(self, name, default, label=None):
        self.defined[name] = None
        self.values.setdefault(name, default)

    def dropdown(self, name, default, choices, label=None):
        assert default in choices, name
        self.defined[name] = list(choices)
        self.values.setdefault(name, default)

    def get(self, name):
        return self.values[name]


class _DBUtils:
    def __init__(self, values):
        self.widgets = _Widgets(values)


def _run_notebook(spark, values):
    """Run every cell; return (HTML shown, exception raised or None, the widgets defined)."""
    shown = []
    dbutils = _DBUtils(values)
    namespace = {"dbutils": dbutils, "spark": spark, "displayHTML": shown.append}
    try:
        exec(compile(NOTEBOOK.read_text(), str(NOTEBOOK), "exec"), namespace)
    except Exception as exc:  # noqa: BLE001 - the notebook fails the job by raising
        return shown, exc, dbutils.widgets.defined
    return shown, None, dbutils.widgets.defined


def _audit_options() -> list[argparse.Action]:
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return [a for a in commands.choices["audit"]._actions if a.dest != "help"]


def _widgets_defined() -> dict:
    """The widgets of the notebook's first code cell, without running the rest."""
    dbutils = _DBUtils({})
    first_cell = NOTEBOOK.read_text().split("# COMMAND ----------")[1]
    exec(compile(first_cell, str(NOTEBOOK), "exec"), {"dbutils": dbutils})
    return dbutils.widgets.defined


def test_every_cli_option_is_a_widget():
    widgets = _widgets_defined()
    options = _audit_options()
    assert ({a.dest for a in options} - CLI_ONLY) | NOTEBOOK_ONLY == set(widgets)
    for action in options:
        if action.dest in CLI_ONLY:
            continue
        if action.choices:
            assert set(action.choices) <= set(widgets[action.dest]), action.dest
        if isinstance(action, argparse._StoreTrueAction):
            assert widgets[action.dest] == ["false", "true"], action.dest


def test_the_notebook_calls_public_functions_only():
    tree = ast.parse(NOTEBOOK.read_text())
    imported = [
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module.startswith("eos_audit")
        for alias in node.names
    ]
    assert imported and all(not name.startswith("_") for _, name in imported), imported
    assert not re.search(r"\b_[a-z]\w*\(", NOTEBOOK.read_text())


@pytest.fixture(scope="module")
def audited(spark, tmp_path_factory):
    """The notebook in audit mode on the demo's export, run once, and the run it recorded."""
    root = tmp_path_factory.mktemp("notebook")
    export, faults = write_demo_export(root / "export")
    values = {"batches": str(export), "warehouse": str(root / "wh"), "run_id": "nb"}
    shown, raised, _ = _run_notebook(spark, values)
    return shown, raised, root / "wh", faults, run_overview(spark, root / "wh", "nb")


def test_audit_mode_audits_shows_the_report_and_fails_the_job(audited):
    shown, raised, warehouse, faults, run = audited
    assert run.findings_total == len(faults)
    # The demo has criticals: the notebook fails the job as the CLI's exit code would.
    assert run.failure("critical") is not None
    assert str(raised) == f"eos-audit run nb: {run.failure('critical')}"
    (html,) = shown
    assert "<title>eos-audit run nb</title>" in html
    assert (warehouse / "reports" / "nb.html").read_text() == html


def test_report_mode_shows_a_recorded_run(spark, audited):
    _, _, warehouse, _, run = audited
    values = {"batches": "", "warehouse": str(warehouse), "run_id": "", "fail_on": "never"}
    shown, raised, _ = _run_notebook(spark, values)
    (html,) = shown
    assert "<title>eos-audit run nb</title>" in html  # the latest finished run
    # With fail_on never only a run that did not succeed fails the job.
    failure = run.failure("never")
    assert (str(raised) if raised else None) == (
        f"eos-audit run nb: {failure}" if failure else None
    )
