"""Where numba caches the compiled kernel: by what the kernel's source is, not where it lies.

numba keys its on-disk cache by the source file's path. Shipped with `spark-submit --py-files`,
the library is a zip in a new directory per application and per executor, so every executor
compiled the kernel again on every run (about 14 CPU-s, at the start of its first replaying
task), even on a node that had compiled the same code the night before. Keyed by the content of
the modules the compiled code is made of, an executor finds what another process on its node
compiled from the same release, wherever that process imported it from: an installed wheel, the
source tree or a zip.

The cache lives under `NUMBA_CACHE_DIR` when it is set, else under the user's cache directory
(numba's own user-wide choice). Where neither can be written, numba's own locators decide, as
before. numba checks the rest itself: its version, the Python version, the signatures and the
CPU each compiled version is for.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import os

from numba.core import caching, config

# The kernel's module and every module of the library it imports: numba freezes their values
# (row kinds, finding codes, state layouts) into the compiled code, so a change to any of them
# is a new key (this module's own included: how the cache is keyed is part of what it holds).
# tests/unit/test_kernel_cache.py checks this list against kernel.py's imports.
KERNEL_MODULE = "eos_audit.replay.kernel"
COMPILED_FROM = (KERNEL_MODULE, "eos_audit.findings", "eos_audit.replay.rows",
                 "eos_audit.replay.state", __name__)  # fmt: skip
# The last directory of the cache's path: one per content key.
CACHE_SUBDIR = "eos_audit_kernel"


@functools.cache
def source_key() -> str:
    """The SHA-256 of the sources in `COMPILED_FROM`, read through their loaders (zip or not)."""
    digest = hashlib.sha256()
    for name in COMPILED_FROM:
        module = importlib.import_module(name)
        digest.update(name.encode())
        digest.update(module.__loader__.get_data(module.__file__))
    return digest.hexdigest()


def cache_root() -> str:
    """`NUMBA_CACHE_DIR` if set, else the user-wide cache directory numba itself would use."""
    if config.CACHE_DIR:
        return config.CACHE_DIR
    return caching.AppDirs(appname="numba", appauthor=False).user_cache_dir


class SourceKeyedLocator(caching._CacheLocator):
    """A numba cache locator for the replay kernel's functions only, keyed by `source_key`."""

    def __init__(self, py_func, py_file: str) -> None:
        self._lineno = py_func.__code__.co_firstlineno
        self._key = source_key()
        self._cache_path = os.path.join(cache_root(), CACHE_SUBDIR, self._key[:32])

    def get_cache_path(self) -> str:
        """The directory of this release's compiled kernel."""
        return self._cache_path

    def get_source_stamp(self) -> str:
        """The content key: numba drops an index whose stamp differs."""
        return self._key

    def get_disambiguator(self) -> str:
        """The function's first line, as numba's own locators use it."""
        return str(self._lineno)

    @classmethod
    def from_function(cls, py_func, py_file: str) -> SourceKeyedLocator | None:
        """The locator of a kernel function; None for any other, or where nothing is writable."""
        if py_func.__module__ != KERNEL_MODULE:
            return None
        try:
            locator = cls(py_func, py_file)
            locator.ensure_cache_path()
        except (OSError, AttributeError, ImportError):
            # Not writable here, or sources no loader can read back (a frozen application):
            # numba's own locators decide, rather than the kernel failing to compile.
            return None
        return locator


def locator_classes() -> str | None:
    """The value of numba's `CACHE_LOCATOR_CLASSES` that puts `SourceKeyedLocator` first.

    After it come the locators already configured (`NUMBA_CACHE_LOCATOR_CLASSES`) or numba's
    defaults. None where this numba has no such setting (before 0.68): its defaults then apply.
    """
    if not hasattr(config, "CACHE_LOCATOR_CLASSES"):
        return None
    configured = config.CACHE_LOCATOR_CLASSES or ",".join(
        cls.__name__ for cls in caching.CacheImpl._locator_classes
    )
    return f"{__name__}.{SourceKeyedLocator.__name__},{configured}"
