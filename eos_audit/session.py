"""Getting a SparkSession without creating one at import time, and finding out what it can do."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# Local sessions only: on Databricks and under spark-submit the runtime owns these settings.
_LOCAL_DEFAULTS = {
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
}


def get_spark(app_name: str = "eos-audit", master: str | None = None) -> SparkSession:
    """Return the active SparkSession (Databricks, notebook, spark-submit, tests) or a local one.

    Args:
        app_name: application name for a new local session.
        master: Spark master for a new session; defaults to `local[*]`.

    Returns:
        The session. A new local session has its UI off, UTC time and Spark's own logs at WARN.

    """
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
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    log.info("started local Spark %s (%s)", spark.version, spark.sparkContext.master)
    return spark


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
def replay_arrow_settings(spark: SparkSession) -> Iterator[None]:
    """Apply `REPLAY_ARROW_SETTINGS` for the duration of the block, then restore the session's.

    A setting the runtime refuses (some managed Spark Connect sessions allow only a list of
    settings) is left as it is, with one message: the audit is slower, not wrong.
    """
    previous: dict[str, str | None] = {}
    for key, value in REPLAY_ARROW_SETTINGS.items():
        try:
            previous[key] = spark.conf.get(key, None)
            spark.conf.set(key, value)
        except Exception as exc:  # noqa: BLE001 - any refusal only costs speed
            log.info("could not set %s=%s (%s): the replay's hand-over is slower", key, value,
                     str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
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


def session_has_delta(spark: SparkSession) -> bool:
    """Whether Spark itself can write Delta tables (Databricks, or delta-spark jars on the path).

    On Databricks the runtime always has Delta. Elsewhere we ask the JVM for Delta's data source
    class: the Python `delta-spark` package alone is not enough, its jars must be on the classpath
    (spark-submit --packages io.delta:delta-spark_2.13:<version>).
    """
    if os.environ.get("DATABRICKS_RUNTIME_VERSION"):
        return True
    try:
        jvm = spark.sparkContext._jvm  # noqa: SLF001 - the only way to probe the classpath
        jvm.java.lang.Class.forName("org.apache.spark.sql.delta.sources.DeltaDataSource")
        return True
    except Exception:  # noqa: BLE001 - any failure means "not available"
        return False
