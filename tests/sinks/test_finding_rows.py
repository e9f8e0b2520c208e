"""The finding columns shared by the rules (`eos_audit.sinks.finding_rows`)."""

from __future__ import annotations

from chispa import assert_df_equality
from pyspark.sql import functions as F

from eos_audit.sinks.finding_rows import lowered_by


def test_a_cause_found_after_the_rules_caps_the_severity_and_never_raises_it(spark):
    # EXPIRED_RESET's ceiling is WARNING (findings.CAUSE_CEILING): a worse finding comes down to
    # it, a milder one keeps its own level; both get the cause.
    staged = spark.createDataFrame(
        [("CRITICAL",), ("WARNING",), ("INFO",)], "severity string"
    ).select(F.struct("severity", F.lit(None).cast("string").alias("cause")).alias("findings"))
    expected = spark.createDataFrame(
        [("WARNING", "EXPIRED_RESET"), ("WARNING", "EXPIRED_RESET"), ("INFO", "EXPIRED_RESET")],
        "severity string, cause string",
    ).select(F.struct("severity", "cause").alias("findings"))
    assert_df_equality(
        staged.select(lowered_by("EXPIRED_RESET").alias("findings")),
        expected,
        ignore_nullable=True,
    )
