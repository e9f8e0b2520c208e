"""The compiled kernel's cache is keyed by its source's content (eos_audit.replay.kernel_cache)."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numba")

from eos_audit.replay import kernel_cache  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
# Where a process that imported the kernel would cache it: the locator numba chose for one of its
# functions (choosing it compiles nothing).
WHERE = """
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
kernel = importlib.import_module(sys.argv[2])
locator = kernel.replay._cache._impl.locator
print(json.dumps([kernel.__file__, type(locator).__name__, locator.get_cache_path()]))
"""


def _where(path: Path, cache_dir: Path, module: str = kernel_cache.KERNEL_MODULE) -> list[str]:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir), "EOS_AUDIT_JIT": "1"}
    done = subprocess.run([sys.executable, "-c", WHERE, str(path), module], env=env,
                          cwd=path.parent, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def _zipped(package: Path, into: Path) -> Path:
    into.mkdir()
    return Path(shutil.make_archive(str(into / "eos_audit"), "zip", package.parent, "eos_audit"))


def test_the_key_covers_every_module_of_the_library_the_kernel_imports():
    imported = set(kernel_cache.KERNEL_MODULES)
    for name in kernel_cache.KERNEL_MODULES:
        tree = ast.parse((REPO / (name.replace(".", "/") + ".py")).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("eos_audit"):
                modules = [f"{node.module}.{alias.name}" for alias in node.names]
                # `from eos_audit.replay import wire` imports a module; `from .findings import X`,
                # names
                found = [m for m in modules if (REPO / (m.replace(".", "/") + ".py")).exists()]
                imported.update(found or [node.module])
    assert imported == set(kernel_cache.COMPILED_FROM)


def test_the_offset_kernels_key_covers_the_modules_of_the_library_it_imports():
    name = kernel_cache.OFFSET_KERNEL_MODULE
    tree = ast.parse((REPO / (name.replace(".", "/") + ".py")).read_text())
    imported = {name}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("eos_audit"):
            modules = [f"{node.module}.{alias.name}" for alias in node.names]
            found = [m for m in modules if (REPO / (m.replace(".", "/") + ".py")).exists()]
            imported.update(found or [node.module])
    assert imported == set(kernel_cache.COMPILED_MODULES[name])


def test_the_kernels_modules_are_the_replay_folders_compiled_modules():
    # A module added to the kernel and not listed would run uncompiled, and not key the cache.
    compiled = {"basics", "unpack", "producer_entry", "emit", "lookups", "append_info",
                "producer_state_manager", "partition_log", "acks", "kernel"}  # fmt: skip
    assert {m.rsplit(".", 1)[1] for m in kernel_cache.KERNEL_MODULES} == compiled
    for name in kernel_cache.KERNEL_MODULES:
        assert (REPO / (name.replace(".", "/") + ".py")).exists(), name


def test_a_zip_shipped_kernel_finds_what_the_installed_one_compiled(tmp_path):
    # spark-submit --py-files: a zip in a new directory per application and executor.
    cache = tmp_path / "numba-cache"
    installed = _where(REPO, cache)
    shipped = _where(_zipped(REPO / "eos_audit", tmp_path / "app-1"), cache)
    assert ".zip" in shipped[0] and ".zip" not in installed[0]
    assert installed[1] == shipped[1] == "SourceKeyedLocator"
    assert installed[2] == shipped[2]
    assert Path(installed[2]).is_relative_to(cache)


def test_a_zip_shipped_offset_kernel_finds_what_the_installed_one_compiled(tmp_path):
    # The processing audit's executors, under --py-files, as the broker kernel's above.
    cache = tmp_path / "numba-cache"
    module = kernel_cache.OFFSET_KERNEL_MODULE
    installed = _where(REPO, cache, module)
    shipped = _where(_zipped(REPO / "eos_audit", tmp_path / "app-1"), cache, module)
    assert installed[1] == shipped[1] == "SourceKeyedLocator"
    assert installed[2] == shipped[2]
    assert installed[2] != _where(REPO, cache)[2]  # not the broker kernel's cache


def test_another_release_of_the_kernel_is_another_cache(tmp_path):
    # A changed state layout changes the compiled code without touching kernel.py.
    changed = tmp_path / "src" / "eos_audit"
    shutil.copytree(REPO / "eos_audit", changed, ignore=shutil.ignore_patterns("__pycache__"))
    with (changed / "replay" / "state.py").open("a") as state:
        state.write("\n# another release\n")
    cache = tmp_path / "numba-cache"
    assert _where(changed.parent, cache)[2] != _where(REPO, cache)[2]


def test_only_the_kernel_is_located_and_numbas_setting_is_restored():
    import numba

    from eos_audit.replay import kernel  # compiling it sets the setting, then restores it

    configured = os.environ.get("NUMBA_CACHE_LOCATOR_CLASSES", "")
    restored = numba.config.CACHE_LOCATOR_CLASSES
    assert restored == configured
    assert kernel_cache.SourceKeyedLocator.from_function(len, "") is None
    function = getattr(kernel.replay, "py_func", kernel.replay)  # compiled or not
    locator = kernel_cache.SourceKeyedLocator.from_function(function, kernel.__file__)
    assert locator.get_source_stamp() == kernel_cache.source_key()
    assert locator.get_cache_path().startswith(kernel_cache.cache_root())


def test_sources_it_cannot_read_leave_the_choice_to_numba(monkeypatch):
    from eos_audit.replay import kernel

    def unreadable(*_: object) -> str:
        raise OSError("no loader can read the kernel's source back")

    monkeypatch.setattr(kernel_cache, "source_key", unreadable)
    function = getattr(kernel.replay, "py_func", kernel.replay)
    assert kernel_cache.SourceKeyedLocator.from_function(function, kernel.__file__) is None
