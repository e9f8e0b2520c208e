"""The processing tests' shared audit of their hand-built timelines."""

from __future__ import annotations

from pathlib import Path

import pytest

from eos_audit.audit.pipeline import AuditInputs, run_audit
from eos_audit.config import AuditConfig
from eos_audit.sources.kafka.coordinator_keys import (
    DEFAULT_COORDINATOR_PARTITIONS,
)
from eos_audit.sources.kafka.coordinator_keys import (
    TRANSACTION_STATE_TOPIC as TRANSACTION_STATE,
)
from tests.fixtures.segment_builder import write_empty_partitions
from tests.run_once import once_per_run


@pytest.fixture(scope="session")
def timelines(spark, tmp_path_factory) -> Path:
    """The warehouse of one audit of both hand-built exports of Kafka's bytes.

    `test_transaction_outcomes`' and `test_one_to_one`'s timelines keep their topics, groups,
    transactional ids and coordinator partitions apart, so one run audits both, at the former's
    export time and with the latter's groups declared one-to-one; each module reads only the
    findings of its own partitions.
    """
    from tests.processing import test_one_to_one as one_to_one
    from tests.processing import test_transaction_outcomes as outcomes

    def build(folder: Path) -> Path:
        outcomes.write_export(folder / "export")
        one_to_one.EXPORT.write(folder / "export")
        # Kafka creates all of `__transaction_state`'s partitions at once: the ones no
        # transactional id used are there, empty, and show the export holds the whole log.
        write_empty_partitions(
            folder / "export", 1, TRANSACTION_STATE, DEFAULT_COORDINATOR_PARTITIONS
        )
        warehouse = folder / "warehouse"
        config = AuditConfig().with_overrides(
            processing={"one_to_one_groups": list(one_to_one.DECLARED)},
            topics={
                "compacted": [
                    one_to_one.COMPACTED,
                    one_to_one.CLEANED_FROM_START,
                    one_to_one.COMPACTED_OUTPUT,
                ]
            },
        )
        inputs = AuditInputs(batches=(str(folder / "export"),), export_time=outcomes.EXPORT_TIME)
        run_audit(spark, inputs, config, str(warehouse))
        return warehouse

    return once_per_run(tmp_path_factory, "processing-timelines", build)
