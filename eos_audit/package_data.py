"""The files the help text and README cite by path, as the installed package holds them.

`conf/defaults.toml`, `conf/nightly.example.toml`, `schemas/<table>.json` and `docs/rules.md` are
cited by their paths in the repository. The package ships each at the same path inside it
(package data): `eos_audit/conf` and `eos_audit/schemas` are links to the repository's folders and
`eos_audit/docs/rules.md` to its document, so every file exists once and a wheel user (a
Databricks job, a cluster's spark-submit) has them without the repository.

`python -m eos_audit.package_data` prints where each one is on this machine;
`python -m eos_audit.package_data conf/nightly.example.toml` prints that file, to start a
configuration from.
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
from collections.abc import Sequence
from importlib.resources import files
from importlib.resources.abc import Traversable

# The globs of pyproject.toml's [tool.setuptools.package-data] for the cited files (a unit test
# keeps the two equal): only what matches them is in a wheel, whatever else a folder holds here.
CITED = ("conf/*.toml", "docs/rules.md", "schemas/*.json")


def _is_cited(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in CITED)


def names() -> list[str]:
    """The cited files the package holds, by their repository paths, sorted.

    Returns:
        Names such as `conf/defaults.toml` and `schemas/acks.json`.
    """
    root = files("eos_audit")
    found = []
    for folder in sorted({pattern.partition("/")[0] for pattern in CITED}):
        directory = root.joinpath(folder)
        if directory.is_dir():
            found += [f"{folder}/{e.name}" for e in directory.iterdir() if e.is_file()]
    return sorted(name for name in found if _is_cited(name))


def location(name: str) -> Traversable:
    """Where the package holds a cited file (a file of the installed package, or inside its zip).

    Args:
        name: the file's repository path, such as `conf/defaults.toml` or `schemas/acks.json`.

    Returns:
        The packaged file.

    Raises:
        FileNotFoundError: when the package ships no such file.
    """
    shipped = names()
    # Only a listed name: a glob's `*` would also match `conf/../../elsewhere.toml`.
    if name not in shipped:
        raise FileNotFoundError(f"eos-audit ships no {name!r}; it ships: {', '.join(shipped)}")
    return files("eos_audit").joinpath(*name.split("/"))


def text(name: str) -> str:
    """The text of a cited file (UTF-8).

    Args:
        name: the file's repository path, such as `conf/nightly.example.toml`.

    Returns:
        The file's contents.
    """
    return location(name).read_text(encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    """Print where each cited file is, or the text of the one named.

    Args:
        argv: the arguments (default: sys.argv[1:]).

    Returns:
        0; a name the package does not ship exits 2, as any other bad argument does.
    """
    parser = argparse.ArgumentParser(
        prog="python -m eos_audit.package_data",
        description="The files eos-audit's help and README cite (configurations, published "
        "contracts, the rules document), as this installed package holds them.",
    )
    parser.add_argument(
        "name",
        nargs="?",
        help="print this file (such as conf/nightly.example.toml) instead of every location",
    )
    args = parser.parse_args(argv)
    if args.name is None:
        for name in names():
            print(location(name))
        return 0
    try:
        content = text(args.name)
    except FileNotFoundError as error:
        parser.error(str(error))
    sys.stdout.write(content)
    return 0


if __name__ == "__main__":
    sys.exit(main())
