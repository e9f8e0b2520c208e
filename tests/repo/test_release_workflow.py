"""The release workflow: on a version tag it builds, checks and publishes (trusted publishing)."""

from pathlib import Path

import pytest
import yaml

WORKFLOW = Path(__file__).resolve().parents[2] / ".github" / "workflows" / "release.yml"


@pytest.fixture(scope="module")
def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def _runs(job: dict) -> list[str]:
    return [step["run"] for step in job["steps"] if "run" in step]


def _uses(job: dict) -> list[str]:
    return [step["uses"].partition("@")[0] for step in job["steps"] if "uses" in step]


def test_it_runs_on_a_pushed_version_tag_only(workflow):
    # YAML 1.1 reads the bare key `on` as the boolean true.
    trigger = workflow[True]
    assert trigger == {"push": {"tags": ["v*"]}}


def test_the_build_job_builds_both_distributions_then_checks_them(workflow):
    runs = _runs(workflow["jobs"]["build"])
    build = next(i for i, run in enumerate(runs) if run.strip() == "python -m build")
    check = next(i for i, run in enumerate(runs) if run.startswith("twine check"))
    assert build < check
    assert runs[check].split()[-1] == "dist/*"
    assert "actions/upload-artifact" in _uses(workflow["jobs"]["build"])
    # The code that is built never holds the publishing credential.
    assert "id-token" not in str(workflow["jobs"]["build"].get("permissions", {}))
    assert workflow["permissions"] == {"contents": "read"}


def test_the_publish_job_uses_trusted_publishing_on_the_built_files(workflow):
    publish = workflow["jobs"]["publish"]
    assert publish["needs"] == "build"
    assert publish["permissions"] == {"id-token": "write"}
    assert _uses(publish) == ["actions/download-artifact", "pypa/gh-action-pypi-publish"]
    step = publish["steps"][-1]
    # The action's default registry and OpenID Connect: no URL, token or password given.
    assert "with" not in step
    assert _runs(publish) == []


def test_the_workflow_names_no_host():
    assert "://" not in WORKFLOW.read_text()
    assert "pypi.org" not in WORKFLOW.read_text()
