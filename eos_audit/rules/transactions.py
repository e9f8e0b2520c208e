"""Transactions: one record per transaction, and HANGING_TRANSACTION.

Read off the producer window (no new sort): a transaction starts at the first applied
transactional data batch after the producer's last applied marker (§1.6) and ends at the next
applied COMMIT/ABORT marker (§1.7). A transaction still open at the producer's last row is OPEN;
it is hanging when older than transaction.max.timeout.ms plus the broker's grace (§5: it pins the
last stable offset and read_committed consumers stall), its age measured against the export time
when the run knows it, else against the latest timestamp of the partition's audited log.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eos_audit.config import AuditConfig
from eos_audit.rules.common import KIND_AUDITED, KIND_SEED_STATE, finding, sentence, when_true
from eos_audit.rules.producer_state import producer_window
from eos_audit.schemas import TRANSACTIONS

# The transactions table's contract with every field nullable (sinks pin the nullability).
TRANSACTION_STRUCT = T.StructType([T.StructField(f.name, f.dataType, True) for f in TRANSACTIONS])


def _applied() -> Column:
    return ~F.col("_is_dup") & ~F.col("_fenced")


def with_transactions(df: DataFrame) -> DataFrame:
    """Add `_txn` (the open transaction before this row) and `_txn_end` (this row's transaction).

    `_txn_end` is set on the row that closes a transaction (an applied marker) and on a producer's
    last row when a transaction is still open after it.
    """
    window = producer_window()
    before = window.rowsBetween(Window.unboundedPreceding, -1)
    applied = _applied()
    opens = applied & F.col("_is_txn_data") & ~F.col("_txn_open")
    data_count = F.count(F.when(applied & F.col("_is_txn_data"), 1)).over(before)
    df = df.select(
        "*",
        data_count.alias("_txn_data_before"),
        F.lead(F.lit(1)).over(window).isNull().alias("_is_producer_last"),
    )
    start = F.struct(
        F.col("_session").alias("session"),
        F.coalesce(F.when(opens, F.col("base_offset")), F.col("_seed_txn_first_offset")).alias(
            "first_offset"
        ),
        F.when(opens, F.col("last_offset")).alias("first_last_offset"),
        F.col("_ts").alias("first_ts"),
        F.col("producer_epoch").alias("epoch"),
        F.col("_txn_data_before").alias("data_before"),
    )
    is_start = opens | (
        (F.col("_kind") == KIND_SEED_STATE) & F.col("_seed_txn_first_offset").isNotNull()
    )
    # The most recent start or applied marker; a marker's entry holds no start (it closed it).
    last_event = F.last(
        F.when(
            is_start | (applied & F.col("_is_marker")),
            F.struct(F.when(is_start, start).alias("start")),
        ),
        ignorenulls=True,
    ).over(before)
    last_start = last_event["start"]
    df = df.withColumn(
        "_txn",
        F.when(F.col("_txn_open") & (last_start["session"] == F.col("_session")), last_start),
    )
    closes = (F.col("_kind") == KIND_AUDITED) & applied & F.col("_is_marker") & F.col("_txn_open")
    open_after = (
        F.when(applied & F.col("_is_marker"), F.lit(False))
        .when(applied & F.col("_is_txn_data"), F.lit(True))
        .otherwise(F.col("_txn_open"))
    )
    txn = F.coalesce(F.col("_txn"), F.when(opens, start))
    batches_now = F.col("_txn_data_before") + F.when(applied & F.col("_is_txn_data"), 1).otherwise(
        0
    )
    end = F.struct(
        txn["first_offset"].alias("first_offset"),
        txn["first_last_offset"].alias("first_last_offset"),
        txn["first_ts"].alias("first_ts"),
        txn["epoch"].alias("start_epoch"),
        F.when(closes, F.col("producer_epoch")).alias("end_epoch"),
        F.when(closes, F.col("base_offset")).alias("marker_offset"),
        F.when(closes, F.col("control_type")).otherwise(F.lit("OPEN")).alias("outcome"),
        (
            F.when(closes, F.col("_txn_data_before")).otherwise(batches_now) - txn["data_before"]
        ).alias("batches"),
        F.when(closes, F.col("_ts")).alias("end_ts"),
        F.when(closes, F.col("coordinator_epoch")).alias("coordinator_epoch"),
    )
    ends_open = (
        (F.col("_kind") == KIND_AUDITED)
        & F.col("_is_producer_last")
        & F.col("_pkey").isNotNull()
        & F.coalesce(open_after, F.lit(False))
    )
    return df.withColumn("_txn_end", F.when(closes | ends_open, end))


def _age_ms(as_of_ms: int | None) -> Column:
    """Age of the row's transaction at `as_of_ms` (the export time), else at the partition's end.

    Without an export time the log's own latest timestamp is the only clock there is: a quiet
    partition makes open transactions look younger than they are, never older.
    """
    now = F.lit(as_of_ms).cast("long") if as_of_ms is not None else F.col("_p_max_ts_all")
    return now - F.col("_txn_end")["first_ts"]


def _is_hanging(config: AuditConfig, as_of_ms: int | None) -> Column:
    limit = config.transactions.max_timeout_ms + config.transactions.grace_ms
    return (F.col("_txn_end")["outcome"] == "OPEN") & (_age_ms(as_of_ms) > limit)


def hanging_transaction(config: AuditConfig, as_of_ms: int | None = None) -> Column:
    """HANGING_TRANSACTION: open at the end of the audited log and older than timeout + grace.

    Args:
        config: the run configuration (transaction timeout and grace, severity).
        as_of_ms: the export time in epoch ms, when known; the age is measured against it.

    Returns:
        The finding struct, or null.
    """
    end = F.col("_txn_end")
    return when_true(
        end.isNotNull() & _is_hanging(config, as_of_ms),
        finding(
            "HANGING_TRANSACTION",
            config,
            detail=sentence(
                "Producer %s (epoch %s) has a transaction open since offset %s for %s ms, past "
                "the transaction timeout plus grace: it pins the last stable offset, so "
                "read_committed consumers stall.",
                F.col("producer_id"),
                end["start_epoch"],
                end["first_offset"],
                _age_ms(as_of_ms),
            ),
            spec_ref="§1.6, §5",
            previous_offset=end["first_offset"],
            at_offsets=(
                end["first_offset"],
                F.coalesce(end["first_last_offset"], end["first_offset"]),
            ),
            evidence={
                "age_ms": _age_ms(as_of_ms),
                "first_offset": end["first_offset"],
                "age_measured_at": F.lit("export_time" if as_of_ms is not None else "log_end"),
            },
        ),
    )


def transaction_record(config: AuditConfig, run_id: str, as_of_ms: int | None = None) -> Column:
    """The `transactions` table row of the transaction ending at this row, or null."""
    end = F.col("_txn_end")
    open_ = end["outcome"] == "OPEN"
    transaction_id = F.sha2(
        F.concat_ws(
            "|",
            F.col("topic"),
            F.col("partition").cast("string"),
            F.col("producer_id").cast("string"),
            end["first_offset"].cast("string"),
        ),
        256,
    ).substr(1, 32)
    return F.when(
        end.isNotNull(),
        F.struct(
            F.lit(run_id).alias("run_id"),
            transaction_id.alias("transaction_id"),
            F.col("topic"),
            F.col("partition"),
            F.col("producer_id"),
            end["start_epoch"].alias("start_epoch"),
            end["end_epoch"].alias("end_epoch"),
            end["first_offset"].alias("first_offset"),
            end["marker_offset"].alias("marker_offset"),
            end["outcome"].alias("outcome"),
            _is_hanging(config, as_of_ms).alias("hanging"),
            end["batches"].alias("batches"),
            end["first_ts"].alias("first_timestamp"),
            end["end_ts"].alias("end_timestamp"),
            F.when(open_, _age_ms(as_of_ms))
            .otherwise(end["end_ts"] - end["first_ts"])
            .alias("duration_ms"),
            end["coordinator_epoch"].alias("coordinator_epoch"),
        ).cast(TRANSACTION_STRUCT),
    )
