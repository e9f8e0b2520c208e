"""The Databricks Asset Bundle: every entry point, file, parameter and reference it names exists;
the serverless job needs no cluster, and the notebook installs eos-audit where it is missing."""

import argparse
import copy
import fnmatch
import importlib
import importlib.util
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from eos_audit.cli import build_parser
from eos_audit.config import load_config
from eos_audit.options import AUDIT_OPTIONS

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
# Dynamic value references Databricks fills in at run time that the bundle uses besides
# {{job.parameters.<name>}}.
RUN_TIME_VALUES = {"job.run_id", "job.start_time.iso_date"}
NOTEBOOK = REPO / "jobs" / "databricks_notebook.py"
# Keys that put a task or a job on classic compute; a serverless job has none of them.
CLUSTER_KEYS = {
    "job_clusters",
    "job_cluster_key",
    "new_cluster",
    "existing_cluster_id",
    "libraries",
}
# The first serverless environment version with Python >= 3.11 (requires-python) and a Spark 4
# client, Databricks Connect 17 (1 has Python 3.10; 2 and 3 Databricks Connect 15.4 and 16.4,
# whose Spark is 3.5).
FIRST_SERVERLESS_ENVIRONMENT = 4


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


def _is_serverless(job: dict) -> bool:
    return "environments" in job


def _serverless_jobs(bundle):
    """(path, key, job) of each job that runs on serverless compute (a job environment)."""
    jobs = [(path, key, job) for path, key, job in _jobs(bundle) if _is_serverless(job)]
    assert jobs, "the bundle has no serverless job"  # the tests over them cannot pass empty
    return jobs


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _wheel_name() -> str:
    """The file name `pip wheel` gives the package: a pure-Python wheel (PEP 427 naming)."""
    project = PYPROJECT["project"]
    return f"{_normalized(project['name'])}-{project['version']}-py3-none-any.whl"


def _artifact_dir(root: dict) -> Path:
    """Where the bundle's artifact build puts the wheel."""
    (artifact,) = root["artifacts"].values()
    source = (REPO / artifact["path"]).resolve()
    return (source / re.search(r"--wheel-dir (\S+)", artifact["build"]).group(1)).resolve()


def _variables(root: dict, target: str) -> dict[str, str]:
    """The bundle's variables as a deployment to `target` without --var resolves them."""
    values = {name: str(v.get("default")) for name, v in root["variables"].items()}
    values.update({k: str(v) for k, v in root["targets"][target].get("variables", {}).items()})
    return values


def _resolve(text: str, variables: dict[str, str]) -> str:
    return re.sub(r"\$\{var\.(\w+)\}", lambda m: variables[m.group(1)], text)


def _subcommand(name: str) -> argparse.ArgumentParser:
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert name in commands.choices, f"eos-audit has no subcommand {name!r}"
    return commands.choices[name]


def _widgets(notebook: Path) -> set[str]:
    """The widgets the notebook's source names, and one per audit option when it makes those."""
    source = notebook.read_text()
    named = set(re.findall(r'dbutils\.widgets\.\w+\(\s*"(\w+)"', source))
    if "for option in AUDIT_OPTIONS:" in source:
        named |= {option.name for option in AUDIT_OPTIONS}
    return named


def test_the_bundle_includes_its_resources(bundle):
    root, resources = bundle
    assert root["bundle"]["name"] == "eos-audit"
    assert resources, "resources/*.yml matches no file"
    assert {"dev", "prod"} <= set(root["targets"])
    assert root["targets"]["dev"]["default"] is True
    jobs = {key: job for _, key, job in _jobs(bundle)}
    # The same nightly job on classic compute and on serverless compute.
    assert {_is_serverless(job) for job in jobs.values()} == {False, True}, sorted(jobs)


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
    assert (REPO / artifact["path"] / "pyproject.toml").is_file()
    for path, key, job in _jobs(bundle):
        # A classic task installs it as a library, a serverless task through its environment.
        wheels = [library["whl"] for task in job["tasks"] for library in task.get("libraries", [])]
        wheels += [d for env in job.get("environments", []) for d in env["spec"]["dependencies"]]
        assert wheels, key
        for wheel in wheels:
            wheel = (path.parent / wheel).resolve()
            assert wheel.parent == _artifact_dir(root), (key, wheel)
            assert fnmatch.fnmatch(_wheel_name(), wheel.name), (key, wheel.name)


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
    checked = set()
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
            checked.add(key)
    assert checked == {key for _, key, _ in _jobs(bundle)}


def test_the_serverless_job_runs_what_the_classic_job_runs(bundle):
    """Only the compute differs: the same parameters, command line and report task."""

    def tasks(job):
        return {
            task["task_key"]: {
                k: copy.deepcopy(v)
                for k, v in task.items()
                if k not in CLUSTER_KEYS | {"environment_key"}
            }
            for task in job["tasks"]
        }

    jobs = {_is_serverless(job): job for _, _, job in _jobs(bundle)}
    classic, serverless = jobs[False], jobs[True]
    assert serverless["parameters"] == classic["parameters"]
    cron = "quartz_cron_expression"
    assert serverless["schedule"][cron] == classic["schedule"][cron]
    classic_tasks, serverless_tasks = tasks(classic), tasks(serverless)
    # The serverless report task also says which wheel its notebook installs.
    serverless_tasks["report"]["notebook_task"]["base_parameters"].pop("install")
    assert serverless_tasks == classic_tasks


def test_notebook_tasks_name_the_notebook_and_its_widgets(bundle):
    for path, key, job in _jobs(bundle):
        notebook_tasks = [task for task in job["tasks"] if "notebook_task" in task]
        assert len(notebook_tasks) == 1, key
        for task in notebook_tasks:
            notebook = (path.parent / task["notebook_task"]["notebook_path"]).resolve()
            assert notebook == NOTEBOOK
            assert notebook.read_text().startswith("# Databricks notebook source\n")
            parameters = set(task["notebook_task"].get("base_parameters", {}))
            assert parameters <= _widgets(notebook), (key, parameters - _widgets(notebook))


def test_job_parameters_and_run_time_values(bundle):
    for _, key, job in _jobs(bundle):
        declared = {p["name"] for p in job["parameters"]}
        assert all("default" in p for p in job["parameters"])
        references = {m for s in _strings(job["tasks"]) for m in re.findall(r"\{\{([^}]+)\}\}", s)}
        used = {r.split(".", 2)[2] for r in references if r.startswith("job.parameters.")}
        assert used == declared, key
        assert {r for r in references if not r.startswith("job.parameters.")} <= RUN_TIME_VALUES
        tasks = {t["task_key"] for t in job["tasks"]}
        for task in job["tasks"]:
            assert {d["task_key"] for d in task.get("depends_on", [])} <= tasks


def test_classic_tasks_run_on_a_job_cluster_of_the_job(bundle):
    for _, key, job in _jobs(bundle):
        if _is_serverless(job):
            continue
        clusters = {c["job_cluster_key"]: c for c in job["job_clusters"]}
        assert all("new_cluster" in c for c in clusters.values()), key
        for task in job["tasks"]:
            assert task["job_cluster_key"] in clusters, (key, task["task_key"])
            assert "environment_key" not in task, (key, task["task_key"])


def test_the_job_runs_every_night(bundle):
    for _, key, job in _jobs(bundle):
        schedule = job["schedule"]
        assert len(schedule["quartz_cron_expression"].split()) in (6, 7), key
        assert schedule["timezone_id"]
        assert job["max_concurrent_runs"] == 1


@pytest.mark.parametrize(("target", "running"), [("prod", {False}), ("dev", set())])
def test_one_variant_is_scheduled_in_production_and_none_in_development(bundle, target, running):
    """Both variants are deployed; the two would audit the same night into the same tables."""
    root, _ = bundle
    variables = _variables(root, target)
    status = {
        _is_serverless(job): _resolve(job["schedule"]["pause_status"], variables)
        for _, _, job in _jobs(bundle)
    }
    assert set(status.values()) <= {"PAUSED", "UNPAUSED"}
    assert {serverless for serverless, s in status.items() if s == "UNPAUSED"} == running


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


def test_the_serverless_job_defines_no_cluster_and_every_task_its_environment(bundle):
    serverless = [(key, job) for _, key, job in _jobs(bundle) if _is_serverless(job)]
    assert serverless
    for key, job in serverless:
        assert not CLUSTER_KEYS & set(job), key
        environments = {env["environment_key"] for env in job["environments"]}
        assert len(environments) == len(job["environments"]), key
        for task in job["tasks"]:
            assert not CLUSTER_KEYS & set(task), (key, task["task_key"])
            if "notebook_task" in task:
                # Serverless notebook tasks take no job environment: the notebook installs
                # eos-audit itself (test_the_notebooks_first_code_cell_installs_...).
                assert "environment_key" not in task, (key, task["task_key"])
            else:
                assert task["environment_key"] in environments, (key, task["task_key"])


def test_the_serverless_environment_holds_the_package_and_a_spark_4_client(bundle):
    root, _ = bundle
    variables = _variables(root, "prod")
    for path, key, job in _serverless_jobs(bundle):
        for env in job["environments"]:
            spec = env["spec"]
            # `client` is the deprecated name of `environment_version`.
            assert "client" not in spec, key
            version = _resolve(spec["environment_version"], variables)
            assert int(version) >= FIRST_SERVERLESS_ENVIRONMENT, (key, version)
            dependencies = spec["dependencies"]
            wheels = [d for d in dependencies if d.endswith(".whl")]
            assert [(path.parent / w).resolve().parent for w in wheels] == [_artifact_dir(root)]
            # The runtime brings its own Spark client; a second one (pyspark, eos-audit[local])
            # breaks a serverless session.
            assert not [d for d in dependencies if "pyspark" in d or "[local]" in d], key


def test_the_serverless_report_installs_the_wheel_the_bundle_uploads(bundle):
    for _, key, job in _serverless_jobs(bundle):
        (report,) = [task for task in job["tasks"] if "notebook_task" in task]
        install = report["notebook_task"]["base_parameters"]["install"]
        # The CLI uploads the wheels a job references to <artifact_path>/.internal, emptied before
        # every upload: the pattern matches the one wheel of this deployment, and no other package.
        folder, _, pattern = install.rpartition("/")
        assert folder == "${workspace.artifact_path}/.internal", key
        assert fnmatch.fnmatch(_wheel_name(), pattern), (key, pattern)
        assert not fnmatch.fnmatch("eos_audit_other-0.1.0-py3-none-any.whl", pattern)


def test_the_serverless_job_writes_catalog_tables_and_volume_paths(bundle):
    """Serverless has no DBFS root and no local disk: tables in the catalog, files in volumes."""
    root, _ = bundle
    variables = _variables(root, "prod")
    for _, key, job in _serverless_jobs(bundle):
        defaults = {p["name"]: _resolve(str(p["default"]), variables) for p in job["parameters"]}
        assert defaults["warehouse"].startswith("/Volumes/"), key
        assert defaults["batches"].startswith("/Volumes/"), key
        assert not [s for s in _strings(job) if "dbfs:" in s or s.startswith("/dbfs")], key
        config = load_config(REPO / defaults["conf"].replace("${workspace.file_path}/", "", 1))
        # Managed tables of the catalog schema, through Spark's Delta writer (the runtime has it).
        assert re.fullmatch(r"\w+\.\w+", config.output.catalog_schema), key
        assert config.output.writer in ("spark", "auto"), key


class _NotebookStandIns:
    """dbutils, get_ipython() and their calls, in order, for one cell run outside Databricks."""

    def __init__(self, values: dict[str, str]):
        self.values = values
        self.calls: list[tuple[str, str]] = []
        self.widgets = self
        self.library = self

    def text(self, name, default, label=None):
        self.calls.append(("widget", name))
        self.values.setdefault(name, default)

    def dropdown(self, name, default, choices, label=None):
        self.text(name, default)

    def get(self, name):
        return self.values[name]

    def restartPython(self):  # noqa: N802 - dbutils' name
        self.calls.append(("restart", ""))

    def run_line_magic(self, magic, line):
        self.calls.append((magic, line))

    def run_first_code_cell(self):
        cells = NOTEBOOK.read_text().split("# COMMAND ----------")
        # Cell 0 is the notebook's header and its Markdown: cell 1 is the first code cell.
        markdown = [line for line in cells[0].splitlines()[1:] if line.strip()]
        assert markdown[0] == "# MAGIC %md" and all(s.startswith("# MAGIC") for s in markdown)
        namespace = {"dbutils": self, "get_ipython": lambda: self}
        exec(compile(cells[1], str(NOTEBOOK), "exec"), namespace)


@pytest.fixture
def without_eos_audit(monkeypatch):
    """The notebook's Python as a cluster or serverless notebook without eos-audit sees it."""
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == "eos_audit" else find_spec(name, *args),
    )


def test_the_notebooks_first_code_cell_installs_nothing_when_eos_audit_is_there():
    notebook = _NotebookStandIns({})
    notebook.run_first_code_cell()
    assert notebook.calls and {call for call, _ in notebook.calls} == {"widget"}
    assert ("widget", "install") not in notebook.calls


def test_the_notebooks_first_code_cell_installs_eos_audit_when_missing(without_eos_audit):
    notebook = _NotebookStandIns({})
    notebook.run_first_code_cell()
    # %pip before anything imports eos_audit; Python restarted last, once the widgets exist.
    first_option = notebook.calls.index(("widget", "batches"))
    assert notebook.calls[:2] == [("widget", "install"), ("pip", "install eos-audit")]
    assert first_option == 2
    assert notebook.calls[-1] == ("restart", "")
    assert len(notebook.calls) == len(_widgets(NOTEBOOK)) + 2


def test_the_notebooks_first_code_cell_installs_the_serverless_jobs_wheel(
    bundle, without_eos_audit, tmp_path
):
    (install,) = [
        task["notebook_task"]["base_parameters"]["install"]
        for _, _, job in _jobs(bundle)
        if _is_serverless(job)
        for task in job["tasks"]
        if "notebook_task" in task
    ]
    internal = tmp_path / "artifacts" / ".internal"
    internal.mkdir(parents=True)
    wheel = internal / _wheel_name()
    wheel.touch()
    pattern = install.replace("${workspace.artifact_path}", str(tmp_path / "artifacts"))
    notebook = _NotebookStandIns({"install": pattern})
    notebook.run_first_code_cell()
    assert ("pip", f"install {wheel}") in notebook.calls
    assert notebook.calls[-1] == ("restart", "")

    # No wheel there (not deployed, another artifact_path): the notebook says so and stops.
    wheel.unlink()
    with pytest.raises(Exception, match=re.escape(f"install {pattern}: 0 files match it")):
        _NotebookStandIns({"install": pattern}).run_first_code_cell()
