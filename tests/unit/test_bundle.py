"""The Databricks Asset Bundle: every entry point, file, parameter and reference it names exists."""

import argparse
import importlib
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from eos_audit.cli import build_parser
from eos_audit.config import load_config

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
# Dynamic value references Databricks fills in at run time that the bundle uses besides
# {{job.parameters.<name>}}.
RUN_TIME_VALUES = {"job.run_id", "job.start_time.iso_date"}


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


@pytest.fixture(scope="module")
def bundle():
    root = _load(REPO / "databricks.yml")
    files = sorted({p for pattern in root["include"] for p in REPO.glob(pattern)})
    return root, {path: _load(path) for path in files}


def _strings(node):
    if isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)
    elif isinstance(node, str):
        yield node


def _jobs(bundle):
    _, resources = bundle
    for path, doc in resources.items():
        for key, job in doc.get("resources", {}).get("jobs", {}).items():
            yield path, key, job


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _subcommand(name: str) -> argparse.ArgumentParser:
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert name in commands.choices, f"eos-audit has no subcommand {name!r}"
    return commands.choices[name]


def _widgets(notebook: Path) -> set[str]:
    return set(re.findall(r'dbutils\.widgets\.\w+\(\s*"(\w+)"', notebook.read_text()))


def test_the_bundle_includes_its_resources(bundle):
    root, resources = bundle
    assert root["bundle"]["name"] == "eos-audit"
    assert resources, "resources/*.yml matches no file"
    assert {"dev", "prod"} <= set(root["targets"])
    assert root["targets"]["dev"]["default"] is True
    assert list(_jobs(bundle)), "no job in the bundle"


def test_every_variable_it_uses_is_declared_and_every_declared_one_is_used(bundle):
    root, resources = bundle
    declared = set(root["variables"])
    texts = [s for doc in [root, *resources.values()] for s in _strings(doc)]
    used = {m for s in texts for m in re.findall(r"\$\{var\.(\w+)\}", s)}
    assert used == declared
    namespaces = {m for s in texts for m in re.findall(r"\$\{(\w+)\.", s)}
    assert namespaces <= {"var", "workspace", "bundle"}


def test_the_artifact_builds_the_wheel_the_tasks_install(bundle):
    root, _ = bundle
    (artifact,) = root["artifacts"].values()
    assert artifact["type"] == "whl"
    source = (REPO / artifact["path"]).resolve()
    assert (source / "pyproject.toml").is_file()
    out = re.search(r"--wheel-dir (\S+)", artifact["build"]).group(1)
    for path, key, job in _jobs(bundle):
        for task in job["tasks"]:
            for library in task.get("libraries", []):
                wheel = (path.parent / library["whl"]).resolve()
                assert wheel.parent == (source / out).resolve(), (key, task["task_key"])
                assert wheel.name.endswith(".whl")


def test_wheel_tasks_name_an_entry_point_of_the_package(bundle):
    scripts = {
        **PYPROJECT["project"].get("scripts", {}),
        **{
            name: target
            for group in PYPROJECT["project"].get("entry-points", {}).values()
            for name, target in group.items()
        },
    }
    wheel_tasks = [
        task["python_wheel_task"]
        for _, _, job in _jobs(bundle)
        for task in job["tasks"]
        if "python_wheel_task" in task
    ]
    assert wheel_tasks, "the nightly job runs as a python_wheel_task"
    for task in wheel_tasks:
        assert _normalized(task["package_name"]) == _normalized(PYPROJECT["project"]["name"])
        target = scripts[task["entry_point"]]
        module, _, function = target.partition(":")
        assert callable(getattr(importlib.import_module(module), function)), target


def test_wheel_task_parameters_are_options_of_the_command(bundle):
    for _, key, job in _jobs(bundle):
        for task in job["tasks"]:
            if "python_wheel_task" not in task:
                continue
            command, *arguments = task["python_wheel_task"]["parameters"]
            parser = _subcommand(command)
            options = {s for a in parser._actions for s in a.option_strings}
            flags = [a for a in arguments if a.startswith("--")]
            assert flags and set(flags) <= options, (key, set(flags) - options)
            # Every value follows its flag, and required options are all given.
            required = {a.option_strings[0] for a in parser._actions if a.required}
            assert required <= set(flags), (key, required - set(flags))
            # The arguments as a run gets them, with the job parameters' defaults: they parse.
            defaults = {f"job.parameters.{p['name']}": str(p["default"]) for p in job["parameters"]}
            values = {**defaults, "job.run_id": "123", "job.start_time.iso_date": "2026-11-21"}
            resolved = [
                re.sub(r"\{\{([^}]+)\}\}", lambda m, v=values: v[m.group(1)], a) for a in arguments
            ]
            args = parser.parse_args(resolved)
            assert args.run_id == "2026-11-21-123"


def test_notebook_tasks_name_the_notebook_and_its_widgets(bundle):
    notebook_tasks = 0
    for path, key, job in _jobs(bundle):
        for task in job["tasks"]:
            if "notebook_task" not in task:
                continue
            notebook_tasks += 1
            notebook = (path.parent / task["notebook_task"]["notebook_path"]).resolve()
            assert notebook.read_text().startswith("# Databricks notebook source\n")
            parameters = set(task["notebook_task"].get("base_parameters", {}))
            assert parameters <= _widgets(notebook), (key, parameters - _widgets(notebook))
    assert notebook_tasks == 1


def test_job_parameters_and_run_time_values(bundle):
    for _, key, job in _jobs(bundle):
        declared = {p["name"] for p in job["parameters"]}
        assert all("default" in p for p in job["parameters"])
        references = {m for s in _strings(job["tasks"]) for m in re.findall(r"\{\{([^}]+)\}\}", s)}
        used = {r.split(".", 2)[2] for r in references if r.startswith("job.parameters.")}
        assert used == declared, key
        assert {r for r in references if not r.startswith("job.parameters.")} <= RUN_TIME_VALUES
        tasks = {t["task_key"] for t in job["tasks"]}
        clusters = {c["job_cluster_key"] for c in job.get("job_clusters", [])}
        for task in job["tasks"]:
            assert {d["task_key"] for d in task.get("depends_on", [])} <= tasks
            assert task.get("job_cluster_key", next(iter(clusters))) in clusters


def test_the_job_runs_every_night(bundle):
    for _, key, job in _jobs(bundle):
        schedule = job["schedule"]
        assert len(schedule["quartz_cron_expression"].split()) in (6, 7), key
        assert schedule["timezone_id"]
        assert job["max_concurrent_runs"] == 1


def test_the_configuration_it_deploys_is_valid_and_names_the_catalog_schema(bundle):
    root, _ = bundle
    files = [
        m
        for s in _strings(root["variables"])
        for m in re.findall(r"\$\{workspace\.file_path\}/(\S+)", s)
    ]
    assert files == ["jobs/databricks.toml"]
    config = load_config(REPO / files[0])
    assert config.output.catalog_schema and config.output.writer == "spark"
    excluded = root["sync"]["exclude"]
    assert not any(Path(files[0]).match(pattern) for pattern in excluded)
