"""One session-scoped local Spark for the whole suite, and a temporary warehouse per test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from eos_audit.session import PYTHON_WORKER_SOCKETS

REPO = Path(__file__).resolve().parent.parent

# JVM flags for the JVMs the suite starts in subprocesses: each CLI and spark-submit run (they
# inherit the environment; spark-submit reads SPARK_SUBMIT_OPTS) and the test cluster's daemons and
# executors. Such a JVM lives a minute and plans each query once, so C2's optimising compiles cost
# more CPU than they save: measured on 2 cores, test_cli, test_acked_writes and test_producer_rules
# (-n 2) took 322 CPU-s and 170 s with the JDK's defaults, 208 and 113 s with these; the cluster
# test 259 and 139 CPU-s.
# The session below lives for the whole suite: the serial collector, and C2 only for code that is
# really hot (a method called 100,000 times, a loop run 600,000 times, against the JDK's 5,000 and
# 40,000+). Its hundreds of small, different queries otherwise kept C2 compiling all along: the JIT
# compiler threads were 217 of the suite's ~1,000 CPU-s. Measured on 2 cores: tests/spark (-n 2)
# 199 s and 388 CPU-s with only the serial collector, 158 s and 300 CPU-s with these; the whole
# suite 8:23 against 7:17. C1 alone did as well on tests/spark but the 1M-batch test's audit was
# 33% slower; with these it is within 16% and still gets C2 for its hot loops. Results are the same
# either way; the production entry points (run.sh, spark-submit.sh, the bundle) keep the JVM's
# defaults. A SPARK_SUBMIT_OPTS set by the caller wins.
SUBPROCESS_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
SESSION_JVM_OPTIONS = (
    "-XX:+UseSerialGC -XX:Tier4InvocationThreshold=100000 -XX:Tier4MinInvocationThreshold=30000 "
    "-XX:Tier4CompileThreshold=120000 -XX:Tier4BackEdgeThreshold=600000"
)


def long_lived_jvm_options(heap_mb: int) -> str:
    """SESSION_JVM_OPTIONS for a JVM of `heap_mb` (its -Xmx) that lives for the whole suite.

    Its heap is all there from the start, half of it the young generation: the serial collector's
    cost is the objects that survive a collection, and planning hundreds of queries leaves little
    alive for long, so fewer, larger young collections cost less. Measured on 2 cores, a warm
    session auditing the demo's inputs over and over: the collector's thread 0.41 CPU-s an audit
    with the JDK's sizing (a heap that starts at 1/64 of the machine's memory and grows, a third
    of it young), 0.13 with this; the whole audit 5.0 against 4.6 CPU-s.
    """
    return f"{SESSION_JVM_OPTIONS} -Xms{heap_mb}m -Xmn{heap_mb // 2}m"


os.environ.setdefault("SPARK_SUBMIT_OPTS", SUBPROCESS_JVM_OPTIONS)
# Spark settings for the suite's hundreds of tiny queries, whose plans are large: compiling
# generated code costs more than running them (one file took 104 s with it, 58 s without). Spark
# guarantees the interpreted and generated paths agree. The suite's session uses them, and so do
# the subprocesses that only need a session of their own (permissions, a full disk); the CLI,
# demo, wheel and cluster runs keep Spark's defaults, so the generated path is still exercised end
# to end, and the benchmark measures it.
TINY_QUERIES = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
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


def pytest_configure(config: pytest.Config) -> None:
    """Compile the replay kernel into numba's cache in the background, once for the whole run.

    The cache is keyed by the kernel's sources (eos_audit.replay.kernel_cache): where they are new
    to the machine it is empty, and each Python process that replays before it is written
    compiles the kernel itself: measured, tests/spark (-n 2) took 181 s and 347 CPU-s from an
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


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop the kernel's warm-up if the run ended before it did."""
    warm_up = config.stash.get(_KERNEL_WARM_UP, None)
    if warm_up is not None and warm_up.poll() is None:
        warm_up.kill()
        warm_up.wait()


def _cost(item: pytest.Item) -> float:
    """The seconds a test's `cost` marker says it takes (0 without one)."""
    mark = item.get_closest_marker("cost")
    return float(mark.args[0]) if mark else 0.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest tests first, by their `cost` marker; then the other end-to-end runs (`slow`),
    then the rest. The Spark Connect tests count as one block, at their sum.

    pytest-xdist's worksteal hands each worker a contiguous half of this order and a worker that
    runs out steals the tail of the other's queue. A long test near the end would run alone at
    the end; at the head it runs while the other worker gets through the short ones. The Spark
    Connect tests stay together at the head of one worker's share, so one worker starts their
    server, and only one. The order is stable otherwise.
    """
    connect = sum(_cost(i) for i in items if "connect" in i.keywords)

    def key(item: pytest.Item) -> tuple[float, int]:
        cost = connect if "connect" in item.keywords else _cost(item)
        return -cost, 0 if "slow" in item.keywords else 1

    items.sort(key=key)


@pytest.fixture(scope="session")
def spark():
    """A local[2] session: UI off, few shuffle partitions, UTC; stopped at the end of the run."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    # The session's JVM reads SPARK_SUBMIT_OPTS once, as it starts; subprocesses read it later.
    subprocess_options = os.environ["SPARK_SUBMIT_OPTS"]
    if subprocess_options == SUBPROCESS_JVM_OPTIONS:  # the suite's own, not the caller's
        os.environ["SPARK_SUBMIT_OPTS"] = long_lived_jvm_options(SESSION_DRIVER_MB)
    try:
        session = (
            SparkSession.builder.master("local[2]")
            .appName("eos-audit-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.memory", f"{SESSION_DRIVER_MB}m")
            .config(map=TINY_QUERIES)
            .getOrCreate()
        )
    finally:
        os.environ["SPARK_SUBMIT_OPTS"] = subprocess_options
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    """An empty directory for Delta tables."""
    path = tmp_path / "warehouse"
    path.mkdir()
    return path
