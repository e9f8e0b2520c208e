"""Getting a SparkSession without creating one at import time, and finding out what it can do."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import socket
import sys
import tempfile
import time
import urllib.parse
import weakref
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession

from eos_audit import __version__
from eos_audit.errors import SparkConnectError

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

log = logging.getLogger(__name__)

# Spark's Python workers (the readers, the replay) over Unix domain sockets instead of loopback
# TCP, where Spark has the setting (4.1+; older versions ignore the key) and the OS has the
# sockets. Measured on 2 cores, warm local[2] session: 16 empty `mapInArrow` tasks took 0.56 s
# over TCP and 0.28 s over Unix sockets; each Python task waited some 30 ms more over TCP. That
# is the fixed cost of every Python stage: reading 1,000 batches of segments went from 0.17 s
# to 0.10 s, a small audit from about 2.9 s to 2.5 s. `spark-submit.sh` sets it too.
PYTHON_WORKER_SOCKETS = (
    {"spark.python.unix.domain.socket.enabled": "true"} if hasattr(socket, "AF_UNIX") else {}
)

# Local sessions only: on Databricks and under spark-submit the runtime owns these settings.
_LOCAL_DEFAULTS = {
    **PYTHON_WORKER_SOCKETS,
    # PySpark's daemon without the BrokenPipeError trace of a worker whose reader went away
    # (eos_audit/python_daemon.py): the workers of a local session run this interpreter, which
    # has eos_audit.
    "spark.python.daemon.module": "eos_audit.python_daemon",
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    "spark.driver.memory": "4g",
    "spark.sql.adaptive.enabled": "true",
    # Quiet the "Spark UI" and native-hadoop warnings at start; stage logs stay at WARN.
    "spark.ui.showConsoleProgress": "false",
    # PySpark records the Python call site of every Column function called (five calls to the
    # JVM and a walk of the Python stack each) for error messages, which would point into
    # eos_audit's own code. Building the audit's plan makes about 900 such calls: measured, it
    # took 1.6-1.8 s of the driver's time with the recording, 0.6-0.9 s without: paid once a
    # run, but a tenth of the benchmark's whole 10M-batch audit. Spark's documentation warns of
    # the overhead.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # The classes Spark generates for operators and expressions are kept in one cache per JVM,
    # of 100 by default; a static setting, so only a session that starts its JVM can set it. A
    # run with the processing audit generates some 230 (its thirty-odd plans), so a JVM that
    # audits again (a notebook's session, the benchmark's rounds) compiled them all again every
    # time, and the JIT compiled the new classes again. Measured on 2 cores, the processing stage
    # over the benchmark's 1M coordinator records, a warm session's third round: 238 classes
    # compiled and 23.7 JVM CPU-s with 100 entries, 28 and 14.5 CPU-s with 1000. A first run
    # compiles each once either way. docs/nightly.md has it for long-lived clusters.
    "spark.sql.codegen.cache.maxEntries": "1000",
}


def get_spark(
    app_name: str = "eos-audit",
    master: str | None = None,
    remote: str | None = None,
    jvm_output_as_logs: bool = False,
) -> SparkSession:
    """Return the active SparkSession (Databricks, notebook, spark-submit, tests) or a new one.

    Args:
        app_name: application name for a new local session.
        master: Spark master for a new session; defaults to `local[*]`.
        remote: a Spark Connect URL (`sc://host:port`) for a Spark Connect session; default:
            `SPARK_REMOTE` of the environment, when set.
        jvm_output_as_logs: a new local session's JVM writes its stderr (the JVM's own warnings,
            Spark's log, its Python workers' output) through this process's logging, a record
            per line (`_relay_jvm_stderr`), so that logs in JSON are JSON from the first line.

    Returns:
        The session. A new local session has its UI off, UTC time and Spark's own logs at WARN; a
        Spark Connect session is the server's, with the server's settings.

    """
    remote = remote or os.environ.get("SPARK_REMOTE")
    if remote:
        return _connect(remote)
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if os.environ.get("PYSPARK_GATEWAY_PORT") and master is None:
        # Started by spark-submit: its JVM is up with --master, --conf and spark-defaults.conf
        # applied; a master or local default set here would silently override them (the job
        # would run in local mode on the driver instead of on the cluster).
        spark = SparkSession.builder.config(map=_quiet_spark_default_logging()).getOrCreate()
        log.info("Spark %s from spark-submit (%s)", spark.version, spark.sparkContext.master)
        return spark
    # Spark's Python workers must run this interpreter, or they import another environment.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name).master(master or "local[*]")
    for key, value in _LOCAL_DEFAULTS.items():
        builder = builder.config(key, value)
    log4j = Path(__file__).with_name("log4j2.properties")
    builder = builder.config(
        "spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}"
    )
    if jvm_output_as_logs:
        _launch_jvm_relaying_stderr(builder)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    log.info("started local Spark %s (%s)", spark.version, spark.sparkContext.master)
    return spark


# A line of the package's log4j2.properties pattern: `yy/MM/dd HH:mm:ss LEVEL Logger: message`.
_LOG4J_LINE = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (?P<level>[A-Z]+) (?P<logger>[^:\s]+): ")
_JVM_LEVELS = {
    "TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
    "WARN": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL,
}  # fmt: skip


def _launch_jvm_relaying_stderr(builder: SparkSession.Builder) -> None:
    """Start the local session's JVM with its stderr read by a thread of this process.

    pyspark starts the JVM with this process's stderr, where the JVM writes what no logging
    configuration governs (`WARNING: Using incubator modules`), Spark's log lines (before and
    after the session starts) and its Python workers' output. Here the JVM is started as pyspark
    starts it (`launch_gateway`, with the builder's settings) but with a pipe for its stderr, and
    the SparkContext the builder then creates uses it. Each line becomes a record of the logger
    `spark.jvm.<Logger>` (`spark.jvm` when the line is not one of log4j's), at the line's level
    (a line that is not log4j's: WARNING, or the level of the log4j line it continues). Nothing is
    lost: the thread reads until the JVM closes its stderr.
    """
    import subprocess
    import threading

    from pyspark import SparkConf
    from pyspark.core.context import SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:  # noqa: SLF001 - a JVM is up: nothing to start
        return
    conf = SparkConf(loadDefaults=False).setAll(builder._options.items())  # noqa: SLF001
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    stderr = gateway.proc.stderr
    threading.Thread(target=_relay_jvm_stderr, args=(stderr,), daemon=True).start()
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)  # noqa: SLF001


def _relay_jvm_stderr(stream: Any) -> None:
    """Log each line the JVM writes to `stream` (`_launch_jvm_relaying_stderr`)."""
    level, name = logging.WARNING, "spark.jvm"
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if not line.strip():
            continue
        match = _LOG4J_LINE.match(line)
        if match:
            level = _JVM_LEVELS.get(match["level"], logging.WARNING)
            name = f"spark.jvm.{match['logger']}"
            line = line[match.end():]
        elif not line.startswith((" ", "\t", "at ", "Caused by", "...")):
            level, name = logging.WARNING, "spark.jvm"
        logging.getLogger(name).log(level, "%s", line)
    stream.close()


# Where Spark's default log4j profile (root at INFO) is, as its LoggerContext names it when Spark
# fell back to it: no log4j configuration was given (org.apache.spark.internal.Logging).
_SPARK_DEFAULT_LOG4J = "org/apache/spark/log4j2-defaults.properties"


def _quiet_spark_default_logging() -> dict[str, str]:
    """Under spark-submit: the setting that gives Spark's logs the package's level, if it needs it.

    spark-submit starts the JVM before any of our code runs, so the `-Dlog4j2.configurationFile`
    a local session gets cannot be given; without it Spark logs at INFO: measured from an
    installed wheel, 3,099 lines for the demo (3 with this setting: the SparkContext's first).
    Levels set in the JVM before the SparkContext starts do not hold (it initialises logging
    again), so the level goes in as `spark.log.level`, which the SparkContext applies first
    thing: the root level of the package's `log4j2.properties`. Only
    when Spark fell back to its default profile and `spark.log.level` was not given: a log4j
    configuration of the user's or the cluster's (`-Dlog4j2.configurationFile`,
    `conf/log4j2.properties`) is theirs and left alone. Best effort: logging is never a reason
    to fail a run.

    Returns:
        `{"spark.log.level": <level>}`, or nothing to set.
    """
    from importlib.resources import files

    from pyspark import SparkContext

    try:
        SparkContext._ensure_initialized()  # noqa: SLF001 - the JVM spark-submit started
        jvm = SparkContext._jvm  # noqa: SLF001
        location = jvm.org.apache.logging.log4j.LogManager.getContext(False).getConfigLocation()
        if location is None or not location.toString().endswith(_SPARK_DEFAULT_LOG4J):
            return {}
        if jvm.java.lang.System.getProperty("spark.log.level") is not None:
            return {}
        text = files("eos_audit").joinpath("log4j2.properties").read_text()
        pairs = (line.partition("=") for line in text.splitlines() if not line.startswith("#"))
        level = {key.strip(): value.strip() for key, _, value in pairs}["rootLogger.level"]
        return {"spark.log.level": level.upper()}
    except Exception as exc:  # noqa: BLE001 - Spark's own levels stay: louder, not wrong
        log.debug("Spark's log levels left as they are: %s", exc)
        return {}


def _without_parameters(url: str) -> str:
    """A Spark Connect URL as messages show it: its `;token=...` parameters left out."""
    return url.split(";", 1)[0].rstrip("/")


def _connect(url: str) -> SparkSession:
    """A Spark Connect session to `url`; the server owns every Spark setting."""
    _check_reachable(url)
    shown = _without_parameters(url)
    try:
        spark = SparkSession.builder.remote(url).getOrCreate()
        version = spark.version  # the first call that reaches the server
    except ImportError as exc:
        raise SparkConnectError(
            f"--remote {shown}: the Spark Connect client is not installed ({exc}); install "
            "eos-audit[local] or pyspark[connect]"
        ) from exc
    except Exception as exc:  # noqa: BLE001 - gRPC's errors have no common base worth naming
        first = _first_line(exc)
        raise SparkConnectError(
            f"--remote {shown}: the Spark Connect server failed ({first})"
        ) from exc
    _bound_retries(spark)
    _CONNECT_SERVERS[str(spark.session_id)] = shown
    log.info("Spark Connect session to %s (Spark %s)", shown, version)
    return spark


# Retries of a call the server does not answer (pyspark's DefaultPolicy backs off 50 ms x4 per
# attempt up to 60 s): 8 retries wait about 3 minutes in all, where pyspark's 15 wait at least
# 10 (its own note). A server that restarts comes back within that; a dead one fails the run.
# EOS_AUDIT_CONNECT_RETRIES sets another number (0: none).
_CONNECT_RETRIES = 8


def _connect_retries() -> int:
    text = os.environ.get("EOS_AUDIT_CONNECT_RETRIES", "")
    if not text:
        return _CONNECT_RETRIES
    if not text.isdigit():
        raise SparkConnectError(
            f"EOS_AUDIT_CONNECT_RETRIES={text!r}: a whole number of retries, 0 or more"
        )
    return int(text)


# The URL (without its parameters) of each Connect session this process opened, by session id.
_CONNECT_SERVERS: dict[str, str] = {}


def _bound_retries(spark: Any) -> None:
    """Bound the client's retries of an unanswered call (`_CONNECT_RETRIES`); best effort."""
    retries = _connect_retries()  # a bad value is the user's to fix, not left to a default
    try:
        from pyspark.sql.connect.client.retries import DefaultPolicy

        spark.client.set_retry_policies([DefaultPolicy(max_retries=retries)])
    except Exception as exc:  # noqa: BLE001 - an older client keeps its own retries
        log.debug("the Connect client's retries are its own: %s", exc)


def connect_server(spark: Any) -> str | None:
    """The `sc://host:port` of a Spark Connect session this process opened; None otherwise."""
    if not is_connect(spark):
        return None
    return _CONNECT_SERVERS.get(str(spark.session_id))


def server_answers(url: str) -> bool:
    """Whether something accepts connections at a `sc://host:port` URL (within 2 s)."""
    try:
        socket.create_connection(_address(url), timeout=2).close()
    except (OSError, ValueError):
        return False
    return True


def _address(url: str) -> tuple[str | None, int]:
    """(host, port) of a `sc://host:port` URL without its parameters; the default port if none.

    Raises:
        ValueError: a malformed URL (an out-of-range port).
    """
    parsed = urllib.parse.urlparse(url)
    return parsed.hostname, parsed.port or _CONNECT_DEFAULT_PORT


def _first_line(exc: BaseException) -> str:
    """The first line of an error's message (a JVM's or gRPC's carries a whole trace)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


# What the client raises once its retries of an unanswered call are spent (its class names).
_LOST = ("RetriesExceeded", "SparkConnectGrpcException", "_InactiveRpcError")


def lost_server_error(exc: BaseException, spark: Any) -> SparkConnectError | None:
    """The error of a run whose Spark Connect server stopped answering, else None.

    Told by the client's exception and by the server's port refusing connections now: an error
    the server answered (a failed query) is not a lost server.
    """
    url = connect_server(spark)
    if url is None:
        return None
    seen, cause = [], exc
    while cause is not None and cause not in seen:
        seen.append(cause)
        cause = cause.__cause__ or cause.__context__
    if not any(type(e).__name__ in _LOST for e in seen) or server_answers(url):
        return None
    return SparkConnectError(
        f"--remote {url}: the Spark Connect server stopped answering during the run (retried "
        f"{_connect_retries()} times); the run is FAILED: restart the server and run again"
    )


# Spark Connect's default port (`spark.connect.grpc.binding.port`), when the URL names none.
_CONNECT_DEFAULT_PORT = 15002
_CONNECT_TIMEOUT_S = 10.0


def _check_reachable(url: str) -> None:
    """Fail at once, in one line, when nothing listens at a `sc://` URL's host and port.

    The Connect client retries an unreachable server with backoff for minutes before it gives
    up; a mistyped host or port, or a server that is down, should say so now.
    """
    if not url.startswith("sc://"):  # `local`: pyspark starts a server of its own
        return
    shown = _without_parameters(url)  # a token never reaches a message
    try:
        host, port = _address(shown)
    except ValueError as exc:
        raise SparkConnectError(f"--remote {shown}: not a Spark Connect URL ({exc})") from exc
    if not host:
        raise SparkConnectError(f"--remote {shown}: not a Spark Connect URL (sc://host:port)")
    try:
        socket.create_connection((host, port), timeout=_CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise SparkConnectError(
            f"--remote {shown}: no Spark Connect server answers at {host}:{port} ({exc})"
        ) from exc
    _check_grpc_answers(url, host, port)


def _check_grpc_answers(url: str, host: str, port: int) -> None:
    """Fail in seconds when what listens at the URL does not speak gRPC (Spark Connect's wire).

    An HTTP server, or a port that accepts connections and never answers, would leave the Connect
    client's first call waiting with no end (its retries have no deadline). A gRPC channel becomes
    ready once the HTTP/2 handshake is done, which a Spark Connect server answers in
    milliseconds whatever its load; nothing else does.
    """
    try:
        import grpc
    except ImportError:  # no Connect client either: the session's start says what to install
        return
    # TLS as pyspark's ChannelBuilder chooses it: `use_ssl=true`, or a token (only sent over TLS).
    parameters = [part.strip().lower() for part in url.split(";")[1:]]
    secure = "use_ssl=true" in parameters or any(p.startswith("token=") for p in parameters)
    target = f"{host}:{port}"
    channel = (
        grpc.secure_channel(target, grpc.ssl_channel_credentials())
        if secure
        else grpc.insecure_channel(target)
    )
    try:
        grpc.channel_ready_future(channel).result(timeout=_CONNECT_TIMEOUT_S)
    except grpc.FutureTimeoutError:
        raise SparkConnectError(
            f"--remote {_without_parameters(url)}: {target} accepts connections but gave no "
            f"gRPC answer in {_CONNECT_TIMEOUT_S:.0f} s: it is not a Spark Connect server (or "
            "one that is not ready; check the port, and use_ssl)"
        ) from None
    finally:
        channel.close()


def is_connect(spark: Any) -> bool:
    """Whether `spark` is a Spark Connect session (no JVM in this process, no SparkContext).

    Told by its class rather than by `pyspark.sql.utils.is_remote()`, which reads an environment
    variable of the process and would call a classic session remote once any Connect session
    was started in it.
    """
    return type(spark).__module__.startswith("pyspark.sql.connect")


def shares_driver_disk(spark: Any) -> bool:
    """Whether the session's executors write to this process's local disk (a `local` master).

    Then scratch files Spark writes to a local path are files this process can read, and remove.
    A cluster's executors (and a Spark Connect server, wherever it runs) write to their own
    machines' disks: scratch space must be storage every one of them and this process reach.
    """
    if is_connect(spark):
        return False
    master = spark.sparkContext.master
    return master == "local" or master.startswith("local[")


def status_tracker(spark: Any) -> Any | None:
    """The classic session's `StatusTracker`; None on Spark Connect, which has no SparkContext."""
    if is_connect(spark):
        return None
    return spark.sparkContext.statusTracker()


def default_parallelism(spark: SparkSession) -> int:
    """How many tasks the session runs at once by default (`SparkContext.defaultParallelism`).

    Spark Connect has no SparkContext: there, `spark.default.parallelism` when the server sets
    it, else the partitions of a `range` without a partition count, which Spark splits into
    exactly the default parallelism (`spark.sql.leafNodeDefaultParallelism`): one tiny query.
    """
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    configured = spark.conf.get("spark.default.parallelism", None)
    if configured:
        return int(configured)
    # Asked once per session: every reader of a run packs its files with it.
    known = _probed_parallelism.get(spark)
    if known is not None:
        return known
    from pyspark.sql import functions as F

    # 2**16 rows: every split holds rows (so its partition id shows) up to 65,536 cores.
    # Projected first: Spark refuses a non-deterministic expression inside an aggregate.
    ids = spark.range(0, 1 << 16).select(F.spark_partition_id().alias("partition_id"))
    (last,) = ids.agg(F.max("partition_id")).first()
    _probed_parallelism[spark] = int(last) + 1
    return int(last) + 1


_probed_parallelism: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


def adaptive_execution(spark: SparkSession) -> bool:
    """Whether the session re-plans a query's stages as they run (`spark.sql.adaptive.enabled`).

    Spark's default, and eos_audit's local sessions', is on; a session may turn it off (the
    suite's does, for its tiny queries).
    """
    return spark.conf.get("spark.sql.adaptive.enabled", "true").strip().lower() == "true"


# What the replay's hand-over to Python needs from Spark, set for the run's actions only.
# Below Int.MaxValue, `maxBytesPerBatch` makes Spark measure the Arrow batch being built after every
# row (BatchedPythonArrowInput.underBatchSizeLimit walks every vector's buffers): measured on the
# bench, that walk was 40% of handing the rows to `mapInArrow`. At Int.MaxValue Spark skips it;
# batches stay bounded by rows (`maxRecordsPerBatch`), and a replay row is a few dozen bytes.
# `maxRecordsPerBatch`: every Arrow batch costs the runner a fixed few milliseconds (its columns
# unpacked, the kernel called, its events turned into Arrow rows). Measured on the bench at 10M
# batches, the Python workers' CPU went from 4.2 s at Spark's default 10,000 rows to 2.7 s at
# 100,000, and the JVM's from 21.9 to 18.0 s; 200,000 gained nothing more. It costs memory per
# worker, not per input: the bench's two workers went from 380 to 488 MB in all (a batch is about
# 10 MB of Arrow and 15 MB of kernel rows, plus their copies), at 10M batches as at 50M.
REPLAY_ARROW_SETTINGS = {
    "spark.sql.execution.arrow.maxBytesPerBatch": str(2**31 - 1),
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
}


@contextmanager
def temporary_settings(
    spark: SparkSession, settings: Mapping[str, str], refused: str
) -> Iterator[None]:
    """Apply `settings` for the duration of the block, then restore the session's.

    A setting the runtime refuses (some managed Spark Connect sessions allow only a list of
    settings) is left as it is, with one message saying what that costs (`refused`): the run is
    slower, not wrong.
    """
    previous: dict[str, str | None] = {}
    for key, value in settings.items():
        try:
            previous[key] = spark.conf.get(key, None)
            spark.conf.set(key, value)
        except Exception as exc:  # noqa: BLE001 - any refusal only costs speed
            log.info(
                "could not set %s=%s (%s): %s",
                key,
                value,
                str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                refused,
            )
    try:
        yield
    finally:
        for key, value in previous.items():
            try:
                if value is None:
                    spark.conf.unset(key)
                else:
                    spark.conf.set(key, value)
            except Exception:  # noqa: BLE001, S110 - restoring is best effort, like setting
                pass


def replay_arrow_settings(spark: SparkSession) -> AbstractContextManager[None]:
    """`REPLAY_ARROW_SETTINGS` for the duration of the block (`temporary_settings`)."""
    return temporary_settings(spark, REPLAY_ARROW_SETTINGS, "the replay's hand-over is slower")


# HotSpot compiles no method above 8,000 bytes of bytecode (-XX:+DontCompileHugeMethods, on by
# default): it runs it in its bytecode interpreter. Spark falls back from whole-stage code
# generation only above 64 kB (`spark.sql.codegen.hugeMethodLimit`); at the JIT's own limit, a stage
# whose one method would be larger runs each operator's code instead, which Spark splits into
# small methods. The generator's slots are such a stage (13-14 kB): measured at 1M batches on 2
# cores, 2.1 s compiled this way against 3.8 s interpreted (tests/generate/test_spark_export.py).
JIT_SIZED_CODE = {"spark.sql.codegen.hugeMethodLimit": "8000"}


def jit_sized_code(spark: SparkSession) -> AbstractContextManager[None]:
    """`JIT_SIZED_CODE` for the duration of the block (`temporary_settings`)."""
    return temporary_settings(
        spark, JIT_SIZED_CODE, "the widest generated code runs in the JVM's interpreter"
    )


def session_has_delta(spark: SparkSession) -> bool:
    """Whether Spark itself can write Delta tables (Databricks, or delta-spark jars on the path).

    On Databricks the runtime always has Delta. Elsewhere we ask the JVM for Delta's data source
    class: the Python `delta-spark` package alone is not enough, its jars must be on the classpath
    (spark-submit --packages io.delta:delta-spark_2.13:<version>).
    """
    if os.environ.get("DATABRICKS_RUNTIME_VERSION"):
        return True
    if is_connect(spark):
        return _connect_has_delta(spark)
    if spark not in _classic_has_delta:
        _classic_has_delta[spark] = _jvm_has_delta(spark)
    return _classic_has_delta[spark]


def _jvm_has_delta(spark: SparkSession) -> bool:
    """Whether the driver's JVM loads Delta's data source, as Spark would look it up.

    Through the thread's context class loader, where Spark finds data sources
    (`Utils.getContextOrSparkClassLoader`): jars given with `--packages`, `--jars` or `spark.jars`
    are there, not in the JVM's application class loader, which a one-argument `Class.forName`
    called through Py4J searches (measured: under spark-submit with delta-spark's jars, that found
    no Delta and the run wrote with delta-rs).
    """
    try:
        jvm = spark.sparkContext._jvm  # noqa: SLF001 - the only way to probe the classpath
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(
            "org.apache.spark.sql.delta.sources.DeltaDataSource", False, loader
        )
        return True
    except Exception:  # noqa: BLE001 - any failure means "not available"
        return False


# Classic sessions already probed: the driver's classpath is fixed when its JVM starts, and a
# probe that misses costs about 80 round trips to the JVM (the ClassNotFoundException and its
# stack trace come back to Python), asked by every table read and write of a run.
_classic_has_delta: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


# Spark Connect sessions (by id) already asked whether they have Delta: the answer is a round trip
# to the server, and a run asks from several places.
_CONNECT_HAS_DELTA: dict[str, bool] = {}


def _connect_has_delta(spark: Any) -> bool:
    """Ask a Spark Connect server whether it resolves the `delta` data source.

    Without a JVM in this process the classpath cannot be probed; the server's analyzer can: a
    read of a path that does not exist fails with DATA_SOURCE_NOT_FOUND when Delta is missing,
    and with another error (the path is not there) when Delta is present. Nothing is read.
    """
    session_id = str(spark.session_id)
    if session_id not in _CONNECT_HAS_DELTA:
        missing = Path(tempfile.gettempdir()) / "eos-audit-delta-probe-does-not-exist"
        try:
            spark.read.format("delta").load(str(missing)).schema  # noqa: B018 - analysed only
            found = True
        except Exception as exc:  # noqa: BLE001 - only DATA_SOURCE_NOT_FOUND means "no Delta"
            condition = getattr(exc, "getCondition", lambda: None)()
            found = condition is not None and condition != "DATA_SOURCE_NOT_FOUND"
        _CONNECT_HAS_DELTA[session_id] = found
    return _CONNECT_HAS_DELTA[session_id]


# The package whose code the server's Python workers run (the replay and the readers of Kafka's
# formats, each in a `mapInArrow`).
_PACKAGE_DATA = {"log4j2.properties"}
# Spark Connect sessions (by id) known to run this very code on their Python workers.
_CODE_ON_SERVER: set[str] = set()


def _package_files(root: Traversable, prefix: str = "") -> Iterator[tuple[str, Traversable]]:
    """(relative name, file) of the package's sources and data, sorted; from a folder or a zip."""
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        name = f"{prefix}{entry.name}"
        if entry.is_dir():
            if entry.name != "__pycache__":
                yield from _package_files(entry, f"{name}/")
        elif entry.name.endswith(".py") or entry.name in _PACKAGE_DATA:
            yield name, entry


def package_digest() -> str:
    """SHA-256 of eos_audit's source files (names and contents): which code this is, exactly.

    Compared with the server's, so a server with another eos-audit installed (an older release)
    never runs a different replay than the client planned. Read through `importlib.resources`,
    so it is the same whether the package was imported from a folder or from a shipped zip.
    """
    digest = hashlib.sha256()
    for name, file in _package_files(resources.files("eos_audit")):
        if name.endswith(".py"):
            digest.update(name.encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()


def _server_package_digest(_: Any) -> str:
    """Runs on a Python worker of the server: the digest of the eos_audit it imports.

    Pickled by reference (module and name), so a worker without eos_audit fails to load it:
    that failure is the answer "not installed".
    """
    return package_digest()


# What a worker says when it cannot import the package (the probe's pickled reference).
_NOT_INSTALLED = re.compile(r"No module named '?eos_audit|ModuleNotFoundError|ImportError")
# Attempts of the probe when its job fails for another reason (a lost worker, a server under
# load): such a failure says nothing about the workers' package.
_PROBE_ATTEMPTS = 3


def _probe_server_code(spark: Any) -> str | None:
    """The digest of the eos_audit the server's Python workers import; None when they cannot.

    Raises:
        SparkConnectError: the probe's job failed, every attempt, for a reason other than the
            package missing from the workers (then it is not known whether they have it).
    """
    from pyspark.sql import functions as F

    probe = F.udf(_server_package_digest, "string", useArrow=False)
    for attempt in range(1, _PROBE_ATTEMPTS + 1):
        try:
            row = spark.range(1).select(probe(F.col("id"))).first()
        except Exception as exc:  # noqa: BLE001 - the worker's ImportError arrives as any of several
            if _NOT_INSTALLED.search(str(exc)):
                log.debug("the server's Python workers cannot import eos_audit: %s", exc)
                return None
            first = _first_line(exc)
            if attempt == _PROBE_ATTEMPTS:
                raise SparkConnectError(
                    "could not ask the Spark Connect server's Python workers which eos_audit "
                    f"they run: the probe failed {attempt} times ({first})"
                ) from exc
            log.warning("the probe of the server's Python workers failed (%s); again", first)
            time.sleep(attempt)
            continue
        return row[0] if row is not None else None
    return None  # pragma: no cover - the loop returns or raises


# One timestamp for every entry of the shipped zip (the earliest a zip can hold), so the same code
# is the same bytes whenever and wherever it is zipped.
_ZIP_ENTRY_TIME = (1980, 1, 1, 0, 0, 0)


def _package_zip(directory: Path, digest: str) -> Path:
    """The package's sources as a zip for `addArtifacts(pyfile=True)`; named by its digest.

    The same code gives the same bytes (fixed entry times and modes): a server without artifact
    isolation between sessions (`spark.sql.artifact.isolation.enabled=false`) keeps the files
    every session adds in one folder, and Spark refuses a file that "exists and does not match
    contents" of the one a second client ships under the same name.
    """
    path = directory / f"eos_audit-{digest[:16]}.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for name, file in _package_files(resources.files("eos_audit")):
            entry = zipfile.ZipInfo(f"eos_audit/{name}", date_time=_ZIP_ENTRY_TIME)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = 0o644 << 16
            archive.writestr(entry, file.read_bytes())
    return path


def ensure_code_on_server(spark: Any) -> None:
    """Make sure a Spark Connect server's Python workers run this client's eos_audit.

    On a classic session the executors get the code from the cluster's installation or
    spark-submit's `--py-files`. A Spark Connect server (Databricks serverless, a shared cluster,
    a server started with `--remote`) may not have eos_audit installed, or another version of it.
    So the client first ships its own sources to the session (`addArtifacts(pyfile=True)`, which
    the server puts on its Python workers' path ahead of their installed packages) and only then
    asks the workers which eos_audit they import. Asking first would make a worker import the
    installed one: Spark reuses its Python workers, and a worker keeps the modules it imported,
    so the shipped code would not be the code that runs.

    Raises:
        SparkConnectError: the server's workers do not run this eos_audit: the server refused the
            shipped sources and has another (or none) installed, or its workers had imported
            another one before this session (reused workers keep it), or they cannot import it.
    """
    if not is_connect(spark) or str(spark.session_id) in _CODE_ON_SERVER:
        return
    digest = package_digest()
    refused = None
    try:
        with tempfile.TemporaryDirectory(prefix="eos-audit-artifacts-") as directory:
            spark.addArtifacts(str(_package_zip(Path(directory), digest)), pyfile=True)
        log.info("shipped this client's eos_audit to the Spark Connect session")
    except Exception as exc:  # noqa: BLE001 - a server may refuse artifacts by policy
        refused = exc
    found = _probe_server_code(spark)
    if found != digest:
        if refused is not None:
            raise SparkConnectError(
                "the Spark Connect server's Python workers do not have this eos_audit and the "
                f"server refused it as an artifact ({_first_line(refused)}): install eos-audit "
                f"{__version__} on the server, in the Python its workers run"
            ) from refused
        if found is not None:
            raise SparkConnectError(
                "the Spark Connect server's Python workers run another eos_audit than the one "
                "shipped: a worker that imported it before keeps it (Spark reuses its Python "
                f"workers). Install eos-audit {__version__} on the server, or restart its workers "
                "(or set spark.python.worker.reuse=false on the server)"
            )
        raise SparkConnectError(
            "the Spark Connect server's Python workers cannot run eos_audit even with its "
            "code shipped (addArtifacts): install eos-audit and its dependencies (pyarrow, "
            "numpy, numba, crc32c) on the server, in the Python its workers run"
        )
    if refused is not None:
        log.info("the server refused this client's eos_audit as an artifact; its workers have it")
    _CODE_ON_SERVER.add(str(spark.session_id))
