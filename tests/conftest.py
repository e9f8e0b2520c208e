"""One session-scoped local Spark for the whole suite, and a temporary warehouse per test."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Generator
from pathlib import Path

import pytest

from eos_audit.session import PYTHON_WORKER_SOCKETS

REPO = Path(__file__).resolve().parent.parent

# JVM flags for every JVM the suite starts: the session below (which serves Spark Connect too), and
# those of subprocesses (each CLI and spark-submit run inherits the environment, and spark-submit
# reads SPARK_SUBMIT_OPTS; the test cluster's daemons and executors). The serial collector, and C1
# only: hundreds of small, different queries, each planned once, give C2's optimising compiles
# little to win back. Measured on 2 cores: test_cli, test_acked_writes and test_producer_rules in
# subprocess JVMs (-n 2) 322 CPU-s and 170 s with the JDK's defaults, 208 and 113 s with C1; the
# cluster test 259 and 139 CPU-s. For the session and the server (2026-11-27, two runs each way,
# alternated): the spark tests, test_input_files and test_seed_trust (-n 2) 176 and 172 CPU-s (93.5
# and 91.3 s) against 197 and 189 (103.3 and 99.4 s) with C2 for hot code only (Tier4 thresholds
# 8-20x the JDK's), the Spark Connect block (-m connect, one worker, then with a server JVM of its
# own) 107 and 110 CPU-s against 114 and 116; the 1M-batch test 29 s either way. C1 needs room for
# its code: the JDK reserves 48 MB for a JVM without C2, and the session filled 64-74 MB over a run,
# that server 57 MB, one demo in a fresh JVM 39 MB. A full code cache disables the compiler
# ("CodeCache is full. Compiler has been disabled") and the JVM interprets what it has not compiled
# yet: that is why C1 alone measured slower here before. The space is only reserved; the JVM commits
# what it uses. Results are the same either way; the production entry points (run.sh,
# spark-submit.sh, the bundle) keep the JVM's defaults. A SPARK_SUBMIT_OPTS set by the caller wins.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC"


def long_lived_jvm_options(heap_mb: int) -> str:
    """JVM_OPTIONS for a JVM of `heap_mb` (its -Xmx) that lives for the whole suite.

    Its heap is all there from the start, half of it the young generation: the serial collector's
    cost is the objects that survive a collection, and planning hundreds of queries leaves little
    alive for long, so fewer, larger young collections cost less. Measured on 2 cores, a warm
    session auditing the demo's inputs over and over: the collector's thread 0.41 CPU-s an audit
    with the JDK's sizing (a heap that starts at 1/64 of the machine's memory and grows, a third
    of it young), 0.13 with this; the whole audit 5.0 against 4.6 CPU-s.
    """
    return f"{JVM_OPTIONS} -Xms{heap_mb}m -Xmn{heap_mb // 2}m"


os.environ.setdefault("SPARK_SUBMIT_OPTS", JVM_OPTIONS)
# Spark settings for the suite's hundreds of tiny queries, whose plans are large: compiling
# generated code costs more than running them (one file took 104 s with it, 58 s without). Spark
# guarantees the interpreted and generated paths agree. The suite's session uses them, and so do
# the subprocesses that only need a session of their own (permissions, a full disk); the CLI,
# demo, wheel and cluster runs keep Spark's defaults, so the generated path is still exercised end
# to end, and the benchmark measures it.
TINY_QUERIES = {
    # One shuffle partition per core of local[2] (still more than one, so the replay's partitions
    # meet the planning of several), and no adaptive execution: a tiny query's stages re-planned
    # after each shuffle cost the driver more than they save. Measured on 2 cores, the spark tests
    # (-n 2), alternated: 368 and 302 CPU-s with 4 partitions and AQE, 319 and 238 with these.
    # The CLI's and the demo's subprocesses keep eos_audit's own settings (AQE on), as the
    # benchmark measures them.
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.adaptive.enabled": "false",
    "spark.default.parallelism": "2",
    "spark.sql.session.timeZone": "UTC",
    # As eos_audit.session's local sessions: no Python call site recorded for every Column
    # function (about 1 s of the driver's time per audit's plan).
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    # No constraint propagation: the optimizer's PruneFilters derives every operator's constraints
    # and, over the audit's plans (wide projections of CASE and map expressions), pruned nothing in
    # 228 runs that took 146 ms of each warm demo audit (RuleExecutor.dumpTimeSpent); the Py4J
    # threads' CPU went from 1.54-1.67 to 1.42-1.51 s an audit. Only an optimisation: the same rows.
    "spark.sql.constraintPropagation.enabled": "false",
    # As every local session eos_audit starts: Python workers over Unix sockets (about 30 ms
    # less per Python task, eos_audit/session.py).
    **PYTHON_WORKER_SOCKETS,
}
SESSION_DRIVER_MB = 2048
_KERNEL_WARM_UP = pytest.StashKey[subprocess.Popen]()
_REAL_KAFKA = pytest.StashKey[subprocess.Popen]()


def submit_conf_args(settings: dict[str, str]) -> list[str]:
    """`settings` as spark-submit's arguments: `--conf key=value` for each."""
    return [arg for key, value in settings.items() for arg in ("--conf", f"{key}={value}")]


# The classes (and their static methods) pyspark looks up by name on the JVM view, on a classic
# session, for nearly every DataFrame and Column call: counted over warm demo audits, per audit,
# 275 lookups of `PythonUtils` (each list of columns) and 138 of `functions` (each column named by
# a string), 72 of the classic SparkSession. A short name is tried against each of the view's
# wildcard imports first, and each miss is a class search through every jar on the classpath:
# Java Flight Recorder put 13% of the Py4J threads' samples there.
_HOT_JVM_CLASSES = {
    "PythonUtils": ("toSeq",),
    "functions": ("col",),
    "org.apache.spark.sql.classic.SparkSession": ("getActiveSession",),
}


def cache_jvm_lookups(jvm) -> None:
    """Make pyspark find JVM classes and methods once per JVM, not on every call.

    On a classic session, every `F.col`, `F.lit`, `F.when`, ... finds the JVM class
    `org.apache.spark.sql.functions`, then the method, by reflection before calling it: three Py4J
    round trips where the call is one (pyspark 4.2, `functions.builtin._get_jvm_function`), about
    1,400 times in a small audit; and the hot classes above are looked up by name each time. Here
    the functions' lookup is cached by name, and the hot classes and methods are kept on `jvm`
    (a py4j JVM view: an attribute set on it, or on a class it returned, is found before py4j
    asks the JVM). The classes and methods found are the same ones, so results are too.

    Measured on 2 cores (2026-11-27), warm demo audits on the suite's settings, eight each, two
    processes each way: 3.06 and 3.27 CPU-s an audit (JVM and Python) as pyspark does it, 2.95
    and 2.98 with the functions cached, 2.69 and 2.78 with the classes too. Only the suite's own
    processes: eos_audit never patches pyspark. A class or function another pyspark does not
    have is left to pyspark's own lookup.
    """
    from py4j.protocol import Py4JError

    for name, methods in _HOT_JVM_CLASSES.items():
        try:
            java_class = getattr(jvm, name)
        except Py4JError:  # not in this Spark: nothing to keep
            continue
        vars(jvm)[name] = java_class
        for method in methods:
            vars(java_class)[method] = getattr(java_class, method)

    from pyspark.sql.functions import builtin

    lookup = getattr(builtin, "_get_jvm_function", None)
    if lookup is None or getattr(lookup, "cached_by_the_suite", False):
        return
    found: dict[tuple[str, object], object] = {}

    def cached(name, sc):
        key = (name, sc._jvm)  # one JVM view per SparkContext
        if key not in found:
            found[key] = lookup(name, sc)
        return found[key]

    cached.cached_by_the_suite = True
    builtin._get_jvm_function = cached


def pytest_configure(config: pytest.Config) -> None:
    """Compile the replay kernel into numba's cache in the background, once for the whole run.

    The cache is keyed by the kernel's sources (eos_audit.replay.kernel_cache): where they are new
    to the machine it is empty, and each Python process that replays before it is written
    compiles the kernel itself: measured, the spark tests (-n 2) took 181 s and 347 CPU-s from an
    empty cache, 158 s and 300 CPU-s from a full one. The compile (14-16 s) overlaps the workers'
    start; a process that replays before it ends compiles as before. The test cluster's
    executors, which import the library from the zip spark-submit ships, load it too. Only the
    xdist controller (or the single process without xdist) starts it.
    """
    if hasattr(config, "workerinput"):
        return
    config.stash[_KERNEL_WARM_UP] = subprocess.Popen(
        [sys.executable, "-m", "tests.fixtures.warm_kernel"], cwd=REPO,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def pytest_sessionstart(session: pytest.Session) -> None:
    """Start the real-Kafka scenarios in the xdist controller (`_start_real_kafka`)."""
    if not hasattr(session.config, "workerinput"):
        _start_real_kafka(session.config)


def _start_real_kafka(config: pytest.Config) -> None:
    """Play the real-Kafka scenarios in the background from the start of an xdist run.

    `tests/kafka/scenarios.py` takes about a minute of brokers and clients, mostly waiting on
    them; run in a process of its own while the workers start on other tests, the tests that
    audit its exports find it done instead of building it on one worker while the other waits
    (it takes `once_per_run`'s lock, in the folder the workers share). Only where xdist runs,
    the jars are there and the selection can include those tests (`-m` not excluding `kafka`).
    """
    from tests.jars import KAFKA_3_JARS, KAFKA_4_JARS

    markers = config.option.markexpr or ""
    if config.option.collectonly:  # nothing will run: no brokers to start and leave behind
        return
    if not config.getoption("numprocesses", None) or (markers and "kafka" not in markers):
        return
    if "not kafka" in markers or not (KAFKA_4_JARS.present() and KAFKA_3_JARS.present()):
        return
    run_folder = config._tmp_path_factory.getbasetemp()  # noqa: SLF001 - xdist's own base
    log = (run_folder / "real-kafka.log").open("w")
    config.stash[_REAL_KAFKA] = subprocess.Popen(
        [sys.executable, "-m", "tests.kafka.scenarios", str(run_folder)], cwd=REPO,
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    log.close()


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop the kernel's warm-up and the real-Kafka scenarios if the run ended before they did.

    The scenarios' process stops its brokers on SIGTERM.
    """
    warm_up = config.stash.get(_KERNEL_WARM_UP, None)
    if warm_up is not None and warm_up.poll() is None:
        warm_up.kill()
        warm_up.wait()
    scenarios = config.stash.get(_REAL_KAFKA, None)
    if scenarios is not None and scenarios.poll() is None:
        scenarios.terminate()
        try:
            scenarios.wait(60)
        except subprocess.TimeoutExpired:
            scenarios.kill()
            scenarios.wait()


# The suite's session is the one Spark session of each process (`spark` below), known by its name.
SUITE_APP_NAME = "eos-audit-tests"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """Fail a test that left this process a Spark session other than the suite's.

    A test that runs the CLI in process (`cli.main`) without the `spark` fixture makes the CLI
    start a session of its own (eos_audit's local settings, `getOrCreate`) when it is the first
    on its worker to need one. That session then serves every later test of the worker: without
    the suite's settings for tiny queries and without the Spark Connect server, whose tests then
    fail at `bound_port`. Which test comes first depends on the order xdist hands out: measured,
    `pytest -n 2 tests/integration` failed that way, while the whole suite passed. Here the test
    that started such a session fails itself, with what to do. (A test that only reuses the
    suite's session passes: nothing here can tell it lacks the fixture.)
    """
    result = yield
    # pyspark's own record of the process's one SparkContext (nothing is imported or started here).
    context = sys.modules.get("pyspark.core.context")
    active = context.SparkContext._active_spark_context if context else None
    if active is not None and active.appName != SUITE_APP_NAME:
        pytest.fail(
            f"this process's Spark session is {active.appName!r}, not the suite's: this test (or "
            "one before it on this worker, failed with this message) ran Spark without the "
            "`spark` fixture; request it, so that the test runs on the suite's session",
            pytrace=False,
        )
    return result


def _cost(item: pytest.Item) -> float:
    """The seconds a test's `cost` marker says it takes (0 without one)."""
    mark = item.get_closest_marker("cost")
    return float(mark.args[0]) if mark else 0.0


def _layer(item: pytest.Item) -> str:
    """`integration` for a whole run (tests/integration), else `spark` when the test needs the
    suite's session (directly or through a fixture), else `unit`."""
    if "integration" in item.path.relative_to(REPO).parts[:2]:
        return "integration"
    return "spark" if "spark" in getattr(item, "fixturenames", ()) else "unit"


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by the markers given here
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test marked `unit`, `spark` or `integration` by what it needs (`_layer`); then the
    order.

    The folders follow the code (tests/replay beside eos_audit/replay, ...), so what a test needs
    is a marker: `-m unit` runs the tests without Spark in seconds.

    The longest tests first, by their `cost` marker; then the other end-to-end runs (`slow`),
    then the rest.

    pytest-xdist's worksteal hands each worker a contiguous half of this order and a worker that
    runs out steals the tail of the other's queue. A long test near the end would run alone at
    the end; at the head it runs while the other worker gets through the short ones. The order is
    stable otherwise.
    """
    for item in items:
        item.add_marker(_layer(item))
    items.sort(key=lambda item: (-_cost(item), 0 if "slow" in item.keywords else 1))


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """A local[2] session: UI off, few shuffle partitions, UTC; stopped at the end of the run.

    Its JVM also serves Spark Connect (tests/fixtures/connect_server.py; the `connect_server`
    fixture gives the URL).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from tests.fixtures.connect_server import CONNECT_SERVER, python_with_an_older_eos_audit

    # The JVM reads its environment once, as it starts: SPARK_SUBMIT_OPTS (subprocesses read it
    # later) and PYSPARK_PYTHON, which the Spark Connect server's Python workers run.
    classic_python = os.environ["PYSPARK_PYTHON"]
    subprocess_options = os.environ["SPARK_SUBMIT_OPTS"]
    if subprocess_options == JVM_OPTIONS:  # the suite's own, not the caller's
        os.environ["SPARK_SUBMIT_OPTS"] = long_lived_jvm_options(SESSION_DRIVER_MB)
    os.environ["PYSPARK_PYTHON"] = str(
        python_with_an_older_eos_audit(tmp_path_factory.mktemp("connect"))
    )
    try:
        session = (
            SparkSession.builder.master("local[2]")
            .appName(SUITE_APP_NAME)
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.memory", f"{SESSION_DRIVER_MB}m")
            .config(map=TINY_QUERIES)
            .config(map=CONNECT_SERVER)
            .getOrCreate()
        )
    finally:
        os.environ["SPARK_SUBMIT_OPTS"] = subprocess_options
        os.environ["PYSPARK_PYTHON"] = classic_python
    # pyspark read PYSPARK_PYTHON for the classic session's workers as the context started, when
    # it named the server's: they run the suite's interpreter, with eos_audit.
    session.sparkContext.pythonExec = classic_python
    session.sparkContext.setLogLevel("ERROR")
    cache_jvm_lookups(session.sparkContext._jvm)
    yield session
    session.stop()


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    """An empty directory for Delta tables."""
    path = tmp_path / "warehouse"
    path.mkdir()
    return path
