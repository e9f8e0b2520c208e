"""Where numba caches the compiled code: by what its source is, not where it lies.

The library compiles three programs with numba: the replay kernel (`eos_audit.replay.kernel` and
the modules it is made of, `KERNEL_MODULES`, through `compile_program`), the segment reader's
header walk (`eos_audit.sources.kafka.segment_walk`) and the group coordinator's offset replay
(`eos_audit.processing.offset_kernel`), both through `compile_in_place`.

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

import contextlib
import functools
import hashlib
import importlib
import os
import types
from collections.abc import Iterator, Sequence

from numba.core import caching, config

# The kernel's module and every module of the library it imports: numba freezes their values
# (row kinds, finding codes, state layouts) into the compiled code, so a change to any of them
# is a new key (this module's own included: how the cache is keyed is part of what it holds).
# tests/replay/test_kernel_cache.py checks this list against kernel.py's imports.
KERNEL_MODULE = "eos_audit.replay.kernel"
# The kernel's own modules, leaf first (replay.kernel's docstring says what each holds).
KERNEL_MODULES = tuple(
    f"eos_audit.replay.{name}"
    for name in ("basics", "unpack", "producer_entry", "emit", "lookups", "append_info",
                 "producer_state_manager", "partition_log", "acks", "kernel")
)  # fmt: skip
COMPILED_FROM = (*KERNEL_MODULES, "eos_audit.findings", "eos_audit.replay.wire",
                 "eos_audit.replay.state", __name__)  # fmt: skip
# Every compiled module, with the modules its compiled code is made of (the walk imports none;
# the offset kernel freezes its reference's names and codes, `offset_metadata_manager`).
WALK_MODULE = "eos_audit.sources.kafka.segment_walk"
OFFSET_KERNEL_MODULE = "eos_audit.processing.offset_kernel"
OFFSET_KERNEL_FROM = (OFFSET_KERNEL_MODULE, "eos_audit.processing.offset_metadata_manager",
                      __name__)  # fmt: skip
COMPILED_MODULES = {
    KERNEL_MODULE: COMPILED_FROM,
    WALK_MODULE: (WALK_MODULE, __name__),
    OFFSET_KERNEL_MODULE: OFFSET_KERNEL_FROM,
}
# The last directory of the cache's path: one per content key.
CACHE_SUBDIR = "eos_audit_kernel"


@functools.cache
def source_key(module: str = KERNEL_MODULE) -> str:
    """The SHA-256 of the sources `module` is compiled from, read through their loaders.

    Args:
        module: a compiled module, a key of `COMPILED_MODULES` (default: the replay kernel).

    Returns:
        The hex digest.
    """
    digest = hashlib.sha256()
    for name in COMPILED_MODULES[module]:
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
    """A numba cache locator for the compiled modules' functions only, keyed by `source_key`."""

    def __init__(self, py_func, py_file: str) -> None:
        self._lineno = py_func.__code__.co_firstlineno
        self._key = source_key(py_func.__module__)
        self._cache_path = os.path.join(cache_root(), CACHE_SUBDIR, self._key[:32])

    def get_cache_path(self) -> str:
        """The directory of this release's compiled module."""
        return self._cache_path

    def get_source_stamp(self) -> str:
        """The content key: numba drops an index whose stamp differs."""
        return self._key

    def get_disambiguator(self) -> str:
        """The function's first line, as numba's own locators use it."""
        return str(self._lineno)

    @classmethod
    def from_function(cls, py_func, py_file: str) -> SourceKeyedLocator | None:
        """The locator of a compiled module's function; None for others, or if none is writable."""
        if py_func.__module__ not in COMPILED_MODULES:
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


def _numba():
    """numba, or None where the kernel stays plain Python (`EOS_AUDIT_JIT=0`, or no numba)."""
    if os.environ.get("EOS_AUDIT_JIT", "1") == "0":
        return None
    try:
        import numba
    except ImportError:  # reported once by replay.runner
        return None
    return numba


@contextlib.contextmanager
def _source_keyed_locators(numba) -> Iterator[None]:
    """Put `SourceKeyedLocator` first among numba's cache locators while functions are wrapped.

    numba picks a function's cache locator as it wraps it: ours is keyed by the source's content,
    so that executors share what their node compiled.
    """
    configured = getattr(numba.config, "CACHE_LOCATOR_CLASSES", None)
    try:
        locators = locator_classes()
    except AttributeError:  # another numba's internals: its own locators, as before
        locators = None
    if locators is not None:
        numba.config.CACHE_LOCATOR_CLASSES = locators
    try:
        yield
    finally:
        if locators is not None:
            numba.config.CACHE_LOCATOR_CLASSES = configured


def _njit(numba, function: types.FunctionType, inline: bool):
    """One kernel function, compiled as the library compiles (see `compile_in_place`)."""
    return numba.njit(cache=True, nogil=True, _nrt=False, inline="always" if inline else "never")(
        function
    )


def compile_program(
    modules: Sequence[dict], into: dict, inlined: frozenset[str] = frozenset()
) -> list[str]:
    """Compile the functions of `modules` as one program; put the compiled ones in `into`.

    The modules themselves stay plain Python (`runner.uncompiled_kernel` runs them so). Each
    function is compiled from a copy of it whose globals are the program's one namespace: every
    module's names, each of the program's functions there as its compiled version. So compiled
    code calls compiled code, across modules, and numba inlines `inlined` into their callers. The
    copies belong to `into`'s module (`into["__name__"]`): the cache's locator keys them by the
    content of all of `COMPILED_FROM`.

    Args:
        modules: the program's modules' namespaces (`vars(module)`); a function belongs to the
            module that defines it.
        into: the namespace that gets the compiled functions (the kernel module's `globals()`),
            by name.
        inlined: the names of the functions numba inlines into their callers.

    Returns:
        The names of the program's functions (compiled or not: `EOS_AUDIT_JIT=0`, or no numba,
        leaves `into` as it is).
    """
    functions = {
        name: value
        for module in modules
        for name, value in module.items()
        if isinstance(value, types.FunctionType) and value.__module__ == module["__name__"]
    }
    numba = _numba()
    if numba is None:
        return list(functions)
    program: dict = {}
    for module in modules:
        program.update(module)
    program["__name__"] = into["__name__"]
    with _source_keyed_locators(numba):
        for name, function in functions.items():
            copy = types.FunctionType(
                function.__code__, program, name, function.__defaults__, function.__closure__
            )
            copy.__qualname__ = function.__qualname__
            copy.__doc__ = function.__doc__
            program[name] = _njit(numba, copy, name in inlined)
    for name in functions:
        into[name] = program[name]
    return list(functions)


def compile_in_place(
    namespace: dict, names: list[str], inlined: frozenset[str] = frozenset()
) -> bool:
    """Replace the functions `names` of a compiled module by their numba-compiled versions.

    Compiled functions call each other through the module's globals, so compiling them after all
    are defined compiles the module as one program. `EOS_AUDIT_JIT=0` (or numba missing) keeps the
    plain Python. Compiled without numba's runtime (`_nrt=False`): the compiled code allocates
    nothing and holds no object that needs it (its tables are plain arrays), and under it every
    array passed to a function was reference-counted on every call: measured, about half the
    kernel's time.

    Args:
        namespace: the module's `globals()`.
        names: the functions to compile (the module's own).
        inlined: those numba inlines into their callers (see kernel.INLINED_PER_ROW).

    Returns:
        Whether they were compiled.
    """
    numba = _numba()
    if numba is None:
        return False
    with _source_keyed_locators(numba):
        for name in names:
            namespace[name] = _njit(numba, namespace[name], name in inlined)
    return True
