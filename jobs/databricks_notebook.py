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

# The widgets are the options of `eos-audit audit`, from the one table the CLI's arguments come
# from too (eos_audit.options, which imports no Spark), plus the catalog schema.
from eos_audit.options import AUDIT_OPTIONS

for option in AUDIT_OPTIONS:
    kind, arguments = option.widget()
    getattr(dbutils.widgets, kind)(option.name, *arguments)
dbutils.widgets.text("catalog_schema", "", "Catalog schema (empty: from conf, else paths)")

if not has_eos_audit:
    # Last in this cell, once the widgets exist: %pip may have replaced a package this Python had
    # already imported (numpy, pyarrow), so the cells below start in a fresh Python, which keeps
    # the notebook's installed packages.
    dbutils.library.restartPython()

# COMMAND ----------

from eos_audit.config import load_config
from eos_audit.options import AUDIT_OPTIONS, config_overrides, inputs_fields
from eos_audit.audit.pipeline import AuditInputs, run_audit
from eos_audit.report import run_overview, write_report

# Each option's value as the CLI's parser gives it (None, or [] for paths, when not given).
values = {o.name: o.from_widget(dbutils.widgets.get(o.name)) for o in AUDIT_OPTIONS}
overrides = config_overrides(values)
catalog_schema = dbutils.widgets.get("catalog_schema").strip()
if catalog_schema:
    overrides["output"] = {"catalog_schema": catalog_schema}
config = load_config(values["conf"])
if overrides:
    config = config.with_overrides(**overrides)
warehouse = values["warehouse"]
run_id = values["run_id"]

if values["batches"]:
    inputs = AuditInputs(**inputs_fields(values))
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
