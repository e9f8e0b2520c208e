"""The files the help text and README cite ship in the package, once, and can be found there."""

import argparse
import re
import tomllib
from pathlib import Path

import pytest

from eos_audit import package_data
from eos_audit.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
# A cited file: a configuration or a published contract, by its repository path.
CITED_PATH = re.compile(r"\b(conf/[\w.-]+\.toml|schemas/[\w.-]+\.json)\b")


def _help_strings(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if action.help:
            yield action.help
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _help_strings(sub)


def test_the_cited_globs_are_the_package_data_of_pyproject():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["eos_audit"]
    assert sorted(package_data.CITED) == sorted(g for g in globs if "/" in g)


def test_the_package_holds_the_repositorys_files_through_links_not_copies():
    # One file each: the package's folders are the repository's, so they cannot drift apart.
    for folder in ("conf", "schemas"):
        assert (REPO / "eos_audit" / folder).is_symlink(), folder
        assert (REPO / "eos_audit" / folder).resolve() == REPO / folder
    assert (REPO / "eos_audit/docs/rules.md").resolve() == REPO / "docs/rules.md"
    expected = sorted(
        [
            "conf/defaults.toml",
            "conf/nightly.example.toml",
            "docs/rules.md",
            *(f"schemas/{p.name}" for p in (REPO / "schemas").glob("*.json")),
        ]
    )
    assert package_data.names() == expected
    for name in expected:
        location = Path(str(package_data.location(name)))
        assert location.is_relative_to(REPO / "eos_audit"), name
        assert package_data.text(name) == (REPO / name).read_text(encoding="utf-8"), name


def test_every_file_the_help_and_readme_cite_ships():
    cited = {m for text in _help_strings(build_parser()) for m in CITED_PATH.findall(text)}
    assert {"conf/defaults.toml", "schemas/producer_state.json", "schemas/acks.json"} <= cited
    for document in ("README.md", "docs/rules.md", "docs/nightly.md"):
        cited |= set(CITED_PATH.findall((REPO / document).read_text(encoding="utf-8")))
    assert "conf/nightly.example.toml" in cited
    assert sorted(cited - set(package_data.names())) == []


def test_a_file_the_package_does_not_ship_is_refused_naming_what_it_ships():
    for name in ("conf/nope.toml", "conf/../pyproject.toml", "README.md", "schemas.py"):
        with pytest.raises(FileNotFoundError, match=re.escape("it ships: conf/defaults.toml")):
            package_data.location(name)


def test_the_module_prints_every_location_or_one_file(capsys):
    assert package_data.main([]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed == [str(package_data.location(name)) for name in package_data.names()]
    assert any(line.endswith("/schemas/acks.json") for line in printed)

    assert package_data.main(["conf/nightly.example.toml"]) == 0
    assert capsys.readouterr().out == (REPO / "conf/nightly.example.toml").read_text()

    with pytest.raises(SystemExit) as exited:
        package_data.main(["conf/nightly.toml"])
    assert exited.value.code == 2
    assert "eos-audit ships no 'conf/nightly.toml'" in capsys.readouterr().err
