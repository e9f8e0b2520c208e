"""Rules over ListOffsets observations (docs/rules.md#list-offsets-regression; KIP-207, KIP-360).

Observations (`eos_audit.sources.evidence.list_offsets.LIST_OFFSETS`) are grouped per key (topic,
partition, spec, isolation) and ordered by `observed_at`, in ONE window specification: the small
observation data is shuffled once, and the second-level window functions reuse that partitioning and
order.
The isolation level is not part of the key for `earliest`, whose answer (the log start offset)
does not depend on it. Rows with `_source_error`, errors (OFFSET_NOT_AVAILABLE etc.) and rows
without an offset are not observations of an offset: they never raise or lower the running maximum.

* **LIST_OFFSETS_REGRESSION**: an offset below the highest earlier offset of the key. One finding
  per *drop*: an observation below the running maximum and below the observation just before it
  (choice: a partition that stays below an earlier maximum, or climbs back towards it, is one
  finding and not one per observation; a second drop while still below is a new finding).
  `cause`:
    - EARLIEST_ACROSS_FAILOVER (WARNING): spec earliest and the leader epoch increased: KIP-360
      notes the log start offset is not strictly monotonic across a leader failover.
    - LEADER_CHANGE_TRANSIENT (WARNING): the leader epoch increased (versus the observation that
      held the earlier maximum) and a later observation is at least that maximum again: the new
      leader's high watermark lagged the old one's (the pre-KIP-207 behaviour; KIP-207 brokers,
      2.2+, answer OFFSET_NOT_AVAILABLE instead, unless unclean leader election is enabled).
    - TRUNCATION (the configured severity, CRITICAL by default): the offset never recovers, or the
      epoch did not increase (null epochs count as not increased).
  On a partition that keeps being written, an unclean truncation followed by new writes also
  "recovers"; ACKED_DATA_MISSING_FROM_LOG and the log's own rules confirm a loss.
* **ACKED_DATA_MISSING_FROM_LOG** (CRITICAL): a `latest` observation (high watermark or last stable
  offset, both at most the high watermark, so everything below was acknowledged) made before the
  export, above the exported log end offset. One finding per key, on its first such observation,
  with the highest one and the count in the evidence. Partitions absent from `log_end_df` are not
  judged.

Severities: `config.severity[type]` when the configuration knows the type, else the finding
registry's default (`eos_audit.findings`); a benign cause (the two WARNING causes) lowers the
severity to WARNING (never raises it).
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eos_audit.config import AuditConfig
from eos_audit.errors import InputSchemaError
from eos_audit.findings import configured_severity as severity_of
from eos_audit.instants import epoch_micros as _micros
from eos_audit.schemas import LIST_OFFSETS_ERRORS
from eos_audit.sinks.finding_rows import finding_struct, sentence
from eos_audit.sources.evidence.list_offsets import SOURCE_ERROR

REGRESSION = "LIST_OFFSETS_REGRESSION"
ACKED_DATA_MISSING = "ACKED_DATA_MISSING_FROM_LOG"

CAUSE_TRANSIENT = "LEADER_CHANGE_TRANSIENT"
CAUSE_TRUNCATION = "TRUNCATION"
CAUSE_EARLIEST_FAILOVER = "EARLIEST_ACROSS_FAILOVER"

KEY = ["topic", "partition", "spec", "_iso"]
ORDER = ["observed_at", "offset", "leader_epoch", "error", "source"]
_EVIDENCE = T.MapType(T.StringType(), T.StringType(), True)


def _observations(observations_df: DataFrame) -> DataFrame:
    """Rows that can take part: parsed, keyed; `_valid` marks an offset answer."""
    df = observations_df
    required = ["observed_at", "topic", "partition", "spec", "offset"]
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise InputSchemaError(f"ListOffsets observations lack column(s) {missing}")
    for name in ("isolation", "leader_epoch", "error", "source"):
        if name not in df.columns:
            df = df.withColumn(name, F.lit(None))
    if SOURCE_ERROR in df.columns:
        df = df.where(F.col(SOURCE_ERROR).isNull())
    df = df.where(
        F.col("observed_at").isNotNull()
        & F.col("topic").isNotNull()
        & F.col("partition").isNotNull()
        & F.col("spec").isNotNull()
    )
    return df.select(
        F.col("observed_at").cast("timestamp").alias("observed_at"),
        F.col("topic").cast("string").alias("topic"),
        F.col("partition").cast("int").alias("partition"),
        F.col("spec").cast("string").alias("spec"),
        F.col("isolation").cast("string").alias("isolation"),
        F.col("offset").cast("long").alias("offset"),
        F.col("leader_epoch").cast("int").alias("leader_epoch"),
        F.nullif(F.upper(F.trim(F.col("error").cast("string"))), F.lit("")).alias("error"),
        F.col("source").cast("string").alias("source"),
        F.when(F.col("spec") != "earliest", F.col("isolation").cast("string")).alias("_iso"),
    ).withColumn("_valid", F.col("error").isNull() & F.col("offset").isNotNull())


def list_offsets_error_counts(observations_df: DataFrame, run_id: str) -> DataFrame:
    """How many ListOffsets answers failed, per partition, spec and error: the errors table.

    Errors (OFFSET_NOT_AVAILABLE while a new leader's high watermark catches up, KIP-207;
    LEADER_NOT_AVAILABLE; ...) are retriable answers, not regressions
    (docs/rules.md#list-offsets-regression), but a partition that answers them for an hour is worth
    a look.

    Args:
        observations_df: `read_list_offsets` output (rows with `_source_error` are skipped).
        run_id: the audit run.

    Returns:
        Rows in the `list_offsets_errors` contract (schemas/list_offsets_errors.json).

    """
    obs = _observations(observations_df).where(F.col("error").isNotNull())
    counts = obs.groupBy("topic", "partition", "spec", "error").agg(
        F.count(F.lit(1)).alias("observations"),
        F.min("observed_at").alias("first_observed_at"),
        F.max("observed_at").alias("last_observed_at"),
    )
    return counts.select(
        *[
            (F.lit(run_id) if f.name == "run_id" else F.col(f.name)).cast(f.dataType).alias(f.name)
            for f in LIST_OFFSETS_ERRORS.fields
        ]
    )


def _record(
    finding_type: str,
    config: AuditConfig,
    run_id: str,
    *,
    severity: Column | None,
    cause: Column | None,
    previous_offset: Column | None,
    sentence_values: dict[str, Column],
    evidence: dict[str, Column],
) -> Column:
    """One finding of an observation, through the one finding builder (`findings`).

    Its `detail` is the registry's sentence of the type (`findings.REGISTRY`), filled from the
    finding's columns and `sentence_values`, the other values the sentence names.
    """
    evidence_map = F.map_filter(
        F.create_map(*[x for k, v in evidence.items() for x in (F.lit(k), v.cast("string"))]),
        lambda _k, v: v.isNotNull(),
    )
    values = {
        "cause": cause if cause is not None else F.lit(None),
        "topic": F.col("topic"),
        "partition": F.col("partition"),
        "base_offset": F.col("offset"),
        "last_offset": F.col("offset"),
        "previous_offset": previous_offset if previous_offset is not None else F.lit(None),
        "observed_at": F.col("observed_at"),
        **sentence_values,
        "evidence": evidence_map,
        "batch_timestamp": F.unix_millis(F.col("observed_at")),
        "source": F.col("source"),
    }
    identity = [
        F.col("topic"),
        F.col("partition"),
        F.col("spec"),
        F.coalesce(F.col("_iso"), F.lit("")),
        F.unix_micros(F.col("observed_at")),
    ]
    return finding_struct(
        finding_type, config, run_id, identity=identity, values=values, severity=severity
    )


def _log_ends(log_end_df: DataFrame) -> DataFrame:
    missing = [c for c in ("topic", "partition", "log_end_offset") if c not in log_end_df.columns]
    if missing:
        raise InputSchemaError(
            f"log_end_df lacks column(s) {missing}; it needs topic, partition, log_end_offset "
            "(last offset of the exported log + 1)"
        )
    # One row per partition (the most generous end when several are given).
    return log_end_df.groupBy(
        F.col("topic").cast("string").alias("topic"),
        F.col("partition").cast("int").alias("partition"),
    ).agg(F.max(F.col("log_end_offset").cast("long")).alias("_log_end"))


def list_offsets_findings(
    observations_df: DataFrame,
    config: AuditConfig,
    run_id: str,
    *,
    log_end_df: DataFrame | None = None,
    export_time: dt.datetime | str | None = None,
) -> DataFrame:
    """Findings from ListOffsets observations: regressions and acknowledged data the log lacks.

    Args:
        observations_df: `read_list_offsets` output (LIST_OFFSETS columns; rows with
            `_source_error` are skipped).
        config: the run configuration (severities, Kafka version).
        run_id: the audit run.
        log_end_df: optional (topic, partition, log_end_offset): the exported log's last offset
            + 1 per partition; enables ACKED_DATA_MISSING_FROM_LOG. Small: it is broadcast.
        export_time: when the export was taken (a datetime, naive = UTC, or ISO-8601 text); only
            observations made before it are compared with the exported log end. None: all.

    Returns:
        Findings with exactly the columns and types of `eos_audit.schemas.FINDINGS`.

    """
    obs = _observations(observations_df)
    if log_end_df is not None:
        obs = obs.join(F.broadcast(_log_ends(log_end_df)), ["topic", "partition"], "left")
    else:
        obs = obs.withColumn("_log_end", F.lit(None).cast("long"))

    window = Window.partitionBy(*KEY).orderBy(*ORDER)
    before = window.rowsBetween(Window.unboundedPreceding, -1)
    after = window.rowsBetween(1, Window.unboundedFollowing)
    whole = window.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    valid = F.col("_valid")

    in_time = F.lit(True)
    if export_time is not None:
        in_time = F.col("observed_at") < F.timestamp_micros(F.lit(_micros(export_time)))
    above = (
        valid
        & (F.col("spec") == "latest")
        & F.col("_log_end").isNotNull()
        & (F.col("offset") > F.col("_log_end"))
        & in_time
    )
    above = F.coalesce(above, F.lit(False))

    # Level 1: running facts. The holder of the earlier maximum is its latest observation.
    holder = F.max(F.when(valid, F.struct("offset", "observed_at", "leader_epoch"))).over(before)
    obs = obs.select(
        "*",
        holder.alias("_holder"),
        F.last(F.when(valid, F.col("offset")), ignorenulls=True).over(before).alias("_prev"),
        above.alias("_above"),
        F.max(above.cast("int")).over(before).alias("_above_before"),
        F.sum(above.cast("int")).over(whole).alias("_above_count"),
        F.max(F.when(above, F.col("offset"))).over(whole).alias("_above_max"),
        F.max(F.when(above, F.col("observed_at"))).over(whole).alias("_above_last_at"),
    )
    prev_max = F.col("_holder.offset")
    reaches = valid & (prev_max.isNull() | (F.col("offset") >= prev_max))
    # Level 2 (same window spec: no second shuffle): the first later observation at or above the
    # running maximum is the first one at or above this row's earlier maximum.
    obs = obs.select(
        "*", F.min(F.when(reaches, F.col("observed_at"))).over(after).alias("_recovered_at")
    )

    holder_epoch = F.col("_holder.leader_epoch")
    epoch_increased = F.coalesce(F.col("leader_epoch") > holder_epoch, F.lit(False))
    recovered = F.col("_recovered_at").isNotNull()
    drop = F.coalesce(
        valid & (F.col("offset") < prev_max) & (F.col("offset") < F.col("_prev")), F.lit(False)
    )
    cause = (
        F.when((F.col("spec") == "earliest") & epoch_increased, F.lit(CAUSE_EARLIEST_FAILOVER))
        .when(epoch_increased & recovered, F.lit(CAUSE_TRANSIENT))
        .otherwise(F.lit(CAUSE_TRUNCATION))
    )
    asked = F.concat(
        F.col("spec"), F.when(F.col("_iso").isNotNull(), F.concat(F.lit(" "), F.col("_iso")))
    )
    regression = F.when(
        drop,
        _record(
            REGRESSION,
            config,
            run_id,
            severity=None,  # the configured level, lowered by the cause (findings.CAUSE_CEILING)
            cause=cause,
            previous_offset=prev_max,
            sentence_values={
                "asked": asked,
                "earlier_max_leader_epoch": holder_epoch,
                "earlier_max_observed_at": F.col("_holder.observed_at"),
                "leader_epoch": F.col("leader_epoch"),
                # The sentence's last clause: which one depends on the row, so the rule says it.
                "recovery": F.when(
                    recovered,
                    sentence("; back at %s or above from %s", prev_max, F.col("_recovered_at")),
                ).otherwise(F.lit("; never back at the earlier offset in the observations")),
            },
            evidence={
                "observed_offset": F.col("offset"),
                "earlier_max_offset": prev_max,
                "recovered_at": F.col("_recovered_at"),
                "leader_epoch": F.col("leader_epoch"),
                "earlier_max_leader_epoch": holder_epoch,
                "earlier_max_observed_at": F.col("_holder.observed_at"),
                "observed_at": F.col("observed_at"),
                "kip_207_broker": F.lit(str(config.cluster.version >= (2, 2)).lower()),
            },
        ),
    )

    missing_from = F.col("_log_end")
    acked = F.when(
        F.col("_above") & F.coalesce(F.col("_above_before") == 0, F.lit(True)),
        _record(
            ACKED_DATA_MISSING,
            config,
            run_id,
            severity=F.lit(severity_of(ACKED_DATA_MISSING, config)),
            cause=None,
            previous_offset=None,
            sentence_values={
                "asked": asked,
                "max_observed_offset": F.col("_above_max"),
                "exported_log_end_offset": missing_from,
                "last_missing_offset": F.col("_above_max") - 1,
            },
            evidence={
                "observed_offset": F.col("offset"),
                "exported_log_end_offset": missing_from,
                "max_observed_offset": F.col("_above_max"),
                "missing_offsets": F.col("_above_max") - missing_from,
                "observations_above_log_end": F.col("_above_count"),
                "last_observed_at": F.col("_above_last_at"),
                "observed_at": F.col("observed_at"),
                "export_time": (
                    F.timestamp_micros(F.lit(_micros(export_time)))
                    if export_time is not None
                    else F.lit(None)
                ),
            },
        ),
    )
    found = F.filter(F.array(regression, acked), lambda f: f.isNotNull())
    return obs.select(F.explode(found).alias("f")).select("f.*")
