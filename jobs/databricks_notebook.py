# Databricks notebook source
# MAGIC %md
# MAGIC # eos-audit
# MAGIC Audits exported Kafka record batches for exactly-once violations, writes the Delta tables
# MAGIC (into a catalog schema, or as paths under the warehouse) and shows the run's HTML report.
# MAGIC The widgets are the options of `eos-audit audit` (a list is comma-separated; empty means
# MAGIC not given), plus the catalog schema.
# MAGIC
# MAGIC - **Audit**: give `batches`; the run is audited, then its report is shown.
# MAGIC - **Report only**: leave `batches` empty; the report of `run_id` (or of the latest finished
# MAGIC   run) is shown. The bundle's jobs run this after their audit task.
# MAGIC
# MAGIC Either way the notebook fails, like the CLI's exit code, when the run did not succeed or
# MAGIC has findings at or above `fail_on`. The runtime brings Spark and Delta (the tables are
# MAGIC written through Spark); eos-audit comes from the cluster's libraries or the job, and when
# MAGIC this notebook's Python has none, the first cell installs it (`%pip`, from PyPI, or the wheel
# MAGIC or requirement of the `install` parameter) and restarts Python. Classic or serverless alike.

# COMMAND ----------

# eos-audit first. Installed already (a cluster library, the classic job's wheel, a serverless
# notebook's environment): nothing is installed, so the code that wrote the tables is the code that
# reads them. Missing (serverless, whose notebook tasks take no job environment; a cluster without
# the wheel): %pip installs the `install` parameter, by default eos-audit from PyPI; the serverless
# job passes the wheel it deployed (a pattern: the one file it matches). %pip, not a pip process,
# so that a classic cluster's executors get the package too.
import glob
import importlib
import importlib.util
import shlex

has_eos_audit = importlib.util.find_spec("eos_audit") is not None
if not has_eos_audit:
    dbutils.widgets.text("install", "eos-audit", "Install when missing (pip requirement or wheel)")
    requirement = dbutils.widgets.get("install").strip() or "eos-audit"
    if "*" in requirement:
        wheels = glob.glob(requirement)
        if len(wheels) != 1:
            raise Exception(f"install {requirement}: {len(wheels)} files match it, not one wheel")
        (requirement,) = wheels
    get_ipython().run_line_magic("pip", f"install {shlex.quote(requirement)}")
    importlib.invalidate_caches()

# The input formats come from the one registry the CLI reads too (it imports no Spark).
from eos_audit.sources.formats import ACKS_FORMATS, FORMAT_NAMES, LIST_OFFSETS_FORMATS

dbutils.widgets.text("batches", "", "Record batches (paths; empty: report only)")
dbutils.widgets.dropdown("batches_format", "auto", ["auto", *FORMAT_NAMES], "Batches format")
dbutils.widgets.text("warehouse", "/Volumes/main/eos_audit/lake", "Warehouse (staging, reports)")
dbutils.widgets.text("catalog_schema", "", "Catalog schema (empty: from conf, else paths)")
dbutils.widgets.text("run_id", "", "Run id (empty: derived; report only: the latest)")
dbutils.widgets.text("conf", "", "Configuration file (TOML)")
dbutils.widgets.dropdown(
    "fail_on",
    "configuration",
    ["configuration", "critical", "error", "warning", "never"],
    "Fail on",
)
dbutils.widgets.text("producer_state", "", "Producer state (paths, or a producer_state table)")
dbutils.widgets.dropdown(
    "since_state", "false", ["false", "true"], "Since state (nightly: seed from the warehouse)"
)
dbutils.widgets.dropdown("no_verify_crc", "false", ["false", "true"], "Skip CRC-32C (segments)")
dbutils.widgets.text(
    "max_quarantined_share", "", "Max quarantined share, 0 to 1 (empty: configuration's)"
)
dbutils.widgets.text("list_offsets", "", "ListOffsets observations (paths)")
dbutils.widgets.dropdown(
    "list_offsets_format", "auto", ["auto", *LIST_OFFSETS_FORMATS], "ListOffsets format"
)
dbutils.widgets.dropdown(
    "list_offsets_spec",
    "latest",
    ["latest", "earliest", "max_timestamp"],
    "ListOffsets spec (get-offsets text)",
)
dbutils.widgets.text("acks", "", "Send results (paths)")
dbutils.widgets.dropdown("acks_format", "auto", ["auto", *ACKS_FORMATS], "Acks format")
dbutils.widgets.text("export_time", "", "Export time (ISO-8601)")
dbutils.widgets.text("topic", "", "Topic (dump-log text without one)")
dbutils.widgets.text("partition", "", "Partition (dump-log text without one)")

if not has_eos_audit:
    # Last in this cell, once the widgets exist: %pip may have replaced a package this Python had
    # already imported (numpy, pyarrow), so the cells below start in a fresh Python, which keeps
    # the notebook's installed packages.
    dbutils.library.restartPython()

# COMMAND ----------

from eos_audit.config import load_config
from eos_audit.pipeline import AuditInputs, run_audit
from eos_audit.report import run_overview, write_report


def value(name):
    """A widget's value, None when empty."""
    return dbutils.widgets.get(name).strip() or None


def paths(name):
    """A comma-separated widget as a tuple of paths."""
    return tuple(p.strip() for p in (value(name) or "").split(",") if p.strip())


run_overrides = {}
if value("fail_on") != "configuration":
    run_overrides["fail_on"] = value("fail_on")
if value("max_quarantined_share"):
    run_overrides["max_quarantined_share"] = float(value("max_quarantined_share"))
overrides = {"run": run_overrides} if run_overrides else {}
if value("catalog_schema"):
    overrides["output"] = {"catalog_schema": value("catalog_schema")}
config = load_config(value("conf"))
if overrides:
    config = config.with_overrides(**overrides)
warehouse = value("warehouse")
run_id = value("run_id")

if paths("batches"):
    inputs = AuditInputs(
        batches=paths("batches"),
        batches_format=value("batches_format"),
        producer_state=paths("producer_state"),
        since_state=value("since_state") == "true",
        verify_crc=value("no_verify_crc") != "true",
        dump_topic=value("topic"),
        dump_partition=int(value("partition")) if value("partition") else None,
        list_offsets=paths("list_offsets"),
        list_offsets_format=value("list_offsets_format"),
        list_offsets_spec=value("list_offsets_spec"),
        export_time=value("export_time"),
        acks=paths("acks"),
        acks_format=value("acks_format"),
    )
    result = run_audit(spark, inputs, config, warehouse, run_id=run_id)
    run_id = result.run_id
    print(
        f"run {result.run_id}: {result.status}; read {result.batches_read} = audited "
        f"{result.batches_audited} + quarantined {result.batches_quarantined} + skipped "
        f"{result.batches_skipped}"
    )

# COMMAND ----------

run = run_overview(spark, warehouse, run_id, catalog_schema=config.output.catalog_schema)
report = write_report(spark, warehouse, run.run_id, catalog_schema=config.output.catalog_schema)
print(f"report of run {run.run_id}: {report}")
try:
    displayHTML(report.read_text(encoding="utf-8"))
except NameError:  # not on Databricks: the path above is the report
    pass

# COMMAND ----------

failure = run.failure(config.run.fail_on)
if failure:
    raise Exception(f"eos-audit run {run.run_id}: {failure}")
