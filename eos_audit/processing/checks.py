"""The processing audit's checks, each by name, as the pipeline's processing stage runs them.

One list, read by the stage (`pipeline._stage_processing` unions their findings into one write)
and by `bench/processing_checks.py`, which times each alone: a check added here is run and
measured alike.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from pyspark.sql import DataFrame

from eos_audit.config import AuditConfig

# Writes a check's intermediate where the run stages its work and reads it back (the
# pipeline's `checked_once` in a folder of the given name), for what two findings of one
# check read.
StagedAs = Callable[[str], Callable[[DataFrame], DataFrame]]


@dataclass(frozen=True)
class CheckInputs:
    """What the processing checks read: the replay's inputs and outputs and the audit's rows.

    `records`: the decoded coordinator records (staged); `history`: the offset replay's history
    (staged); `transactions` and `partitions`: the batch audit's transactions and partition
    statistics (`output_records`); `partitions_listed`: the (topic, partition) pairs the export
    lists; `as_of_ms`: the export's time (`--export-time`), if given; `incremental`: the run is
    seeded by an earlier run's state (--since-state).
    """

    records: DataFrame
    history: DataFrame
    transactions: DataFrame
    partitions: DataFrame
    config: AuditConfig
    run_id: str
    as_of_ms: int | None = None
    partitions_listed: Collection[tuple[str, int]] = frozenset()
    incremental: bool = False


def processing_checks(
    inputs: CheckInputs, staged_as: StagedAs
) -> dict[str, Callable[[], DataFrame | None]]:
    """Each check by name: a function that builds its FINDINGS rows (None: it has none to give).

    Building a check that stages an intermediate (`staged_as`) runs that staging job.

    Args:
        inputs: what the checks read.
        staged_as: stages a check's intermediate under a folder name (see `StagedAs`).

    Returns:
        The builders, in the order the stage unions them.
    """
    from eos_audit.processing.committed_ranges import offset_out_of_range
    from eos_audit.processing.coordinator_audit import processing_findings
    from eos_audit.processing.downstream_reads import last_stable_offset
    from eos_audit.processing.exported_logs import (
        cleaned_offset_partitions,
        unexported_input_partitions,
        unlogged_offset_transactions,
    )
    from eos_audit.processing.hanging_offsets import find_hanging_transactions
    from eos_audit.processing.one_to_one import send_offsets_to_transaction
    from eos_audit.processing.producer_fencing import prepare_fence_producer_epoch
    from eos_audit.processing.transaction_markers import write_txn_markers

    records, history, config, run_id = inputs.records, inputs.history, inputs.config, inputs.run_id
    transactions, partitions = inputs.transactions, inputs.partitions
    as_of_ms, listed, incremental = inputs.as_of_ms, inputs.partitions_listed, inputs.incremental
    return {
        "offset_replay": lambda: processing_findings(history, config, run_id),
        "write_txn_markers": lambda: write_txn_markers(
            records, history, transactions, partitions, config, run_id,
            staged_as("transaction_markers"),
        ),
        "last_stable_offset": lambda: last_stable_offset(
            history, records, transactions, partitions, config, run_id, incremental,
            staged_as("read_past_lso"),
        ),
        "offset_out_of_range": lambda: offset_out_of_range(
            history, partitions, config, run_id, incremental
        ),
        "prepare_fence_producer_epoch": lambda: prepare_fence_producer_epoch(
            records, transactions, config, run_id
        ),
        "find_hanging_transactions": lambda: find_hanging_transactions(
            history, records, config, run_id, as_of_ms, listed, partitions,
            staged_as("hanging_offsets"),
        ),
        "cleaned_offset_partitions": lambda: cleaned_offset_partitions(
            history, records, config, run_id
        ),
        "unlogged_offset_transactions": lambda: unlogged_offset_transactions(
            history, records, config, run_id, listed, as_of_ms
        ),
        "unexported_input_partitions": lambda: unexported_input_partitions(
            history, records, partitions, config, run_id
        ),
        "send_offsets_to_transaction": lambda: send_offsets_to_transaction(
            records, history, transactions, partitions, config, run_id,
            stage=staged_as("one_to_one"),
        ),
    }  # fmt: skip
