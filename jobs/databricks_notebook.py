# Databricks notebook source
# MAGIC %md
# MAGIC # eos-audit nightly
# MAGIC Audits exported Kafka record batches for exactly-once violations and writes the `findings`,
# MAGIC `quarantine` and `audit_runs` Delta tables into a catalog schema, then shows this run's
# MAGIC findings. Install the eos-audit wheel on the cluster or job environment (the runtime brings
# MAGIC Spark and Delta). Parameters are the widgets below.

# COMMAND ----------

dbutils.widgets.text("batches", "", "Record batches (paths, comma-separated)")
dbutils.widgets.dropdown(
    "batches_format", "auto", ["auto", "parquet", "json", "csv", "delta", "segments", "dump-log"],
    "Input format",
)
dbutils.widgets.text("catalog_schema", "main.eos_audit", "Catalog schema for the tables")
dbutils.widgets.text("staging", "/tmp/eos_audit", "Staging folder (a Volume path)")
dbutils.widgets.text("run_id", "", "Run id (empty: derived from inputs and date)")
dbutils.widgets.text("conf", "", "Configuration file (TOML, optional)")
dbutils.widgets.dropdown("fail_on", "critical", ["critical", "error", "warning", "never"],
                         "Fail the job on")

# COMMAND ----------

from eos_audit.cli import _fails
from eos_audit.config import load_config
from eos_audit.pipeline import AuditInputs, run_audit

w = dbutils.widgets.get
config = load_config(w("conf") or None).with_overrides(
    run={"fail_on": w("fail_on")}, output={"catalog_schema": w("catalog_schema")}
)
inputs = AuditInputs(
    batches=tuple(p.strip() for p in w("batches").split(",") if p.strip()),
    batches_format=w("batches_format"),
)
result = run_audit(spark, inputs, config, w("staging"), run_id=w("run_id") or None)
print(f"run {result.run_id}: {result.status}; read {result.batches_read} = audited "
      f"{result.batches_audited} + quarantined {result.batches_quarantined}")

# COMMAND ----------

from pyspark.sql import functions as F

from eos_audit.sources.files import read_delta

display(
    read_delta(spark, result.tables["findings"])
    .where(F.col("run_id") == result.run_id)
    .orderBy("severity", "topic", "partition", "base_offset")
)

# COMMAND ----------

if _fails(result.findings_by_severity, config.run.fail_on):
    raise Exception(f"eos-audit found violations at or above {config.run.fail_on}: "
                    f"{result.findings_by_severity}")
