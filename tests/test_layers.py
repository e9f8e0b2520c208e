"""No module imports from a layer above its own (the layers of eos_audit/__init__.py's docstring).

Every import counts: at the top of a module, inside a function (the lazy imports that used to hide
an upward one) and under TYPE_CHECKING, since each is a dependency a reader has to follow.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import eos_audit

PACKAGE = Path(eos_audit.__file__).resolve().parent
# "3. replay: `replay`: ..." and its continuation lines, up to the next numbered layer.
_LAYER = re.compile(r"^(\d+)\. ([a-z ]+): (.*?)(?=^\d+\. |^\s*$)", re.M | re.S)
_NAME = re.compile(r"`([a-z_][a-z0-9_.]*)`")


def _layers() -> dict[str, tuple[int, str]]:
    """Module name prefix (dotted, under eos_audit) -> (rank, layer name), from the docstring."""
    prefixes: dict[str, tuple[int, str]] = {}
    for rank, name, text in _LAYER.findall(eos_audit.__doc__ or ""):
        # A layer's modules are the names before its first ": " (the rest says why).
        for prefix in _NAME.findall(text.split(": ", 1)[0]):
            assert prefix not in prefixes, f"{prefix} is in two layers"
            prefixes[prefix] = (int(rank), name)
    return prefixes


def _modules() -> dict[str, Path]:
    """Every module of the package by its name under eos_audit ("" is the package itself)."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _layer_of(module: str, layers: dict[str, tuple[int, str]]) -> tuple[int, str] | None:
    if module == "":  # the package itself (`__version__`): the lowest layer
        return min(layers.values())
    for cut in range(module.count(".") + 1, 0, -1):
        prefix = ".".join(module.split(".")[:cut])
        if prefix in layers:
            return layers[prefix]
    return None


def _imports(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules one module imports, wherever in the file the import stands."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the module's own package
                base = package.split(".") if package else []
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
                source = f"eos_audit.{source}" if source else "eos_audit"
            else:
                source = node.module or ""
            # `from eos_audit.x import y` imports module x.y when there is one, else a name of x.
            names = [
                f"{source}.{alias.name}"
                if f"{source}.{alias.name}".removeprefix("eos_audit.") in modules
                else source
                for alias in node.names
            ]
        else:
            continue
        for name in names:
            if name != "eos_audit" and not name.startswith("eos_audit."):
                continue
            inner = name.removeprefix("eos_audit").removeprefix(".")
            while inner and inner not in modules:
                inner = inner.rpartition(".")[0]
            found.add(inner)
    found.discard(module)
    return found


def test_every_module_has_a_layer():
    layers = _layers()
    assert len({rank for rank, _ in layers.values()}) >= 5, "the docstring's layers were not read"
    assert [m for m in _modules() if _layer_of(m, layers) is None] == []
    assert [p for p in layers if p and p not in _modules()] == [], "a layer names no module"


def test_no_import_goes_to_a_higher_layer():
    layers = _layers()
    modules = _modules()
    upward = []
    for module, path in modules.items():
        rank, name = _layer_of(module, layers)
        for imported in sorted(_imports(module, path, modules)):
            their_rank, their_name = _layer_of(imported, layers)
            if their_rank > rank:
                upward.append(f"eos_audit.{module} ({name}) -> eos_audit.{imported} ({their_name})")
    assert upward == []


def test_the_check_sees_lazy_and_type_checking_imports(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from eos_audit.audit.pipeline import AuditInputs\n"
        "def f():\n    from eos_audit import cli\n    import eos_audit.report.build\n"
    )
    modules = _modules()
    assert _imports("sinks.m", source, modules) == {"audit.pipeline", "cli", "report.build"}
