"""The demo's audit, run once for the integration tests that read its warehouse."""

import pytest

from eos_audit.config import AuditConfig
from eos_audit.demo import demo_inputs, write_demo_evidence, write_demo_export
from eos_audit.pipeline import run_audit


@pytest.fixture(scope="session")
def demo_run(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    export, faults = write_demo_export(root / "export")
    evidence = write_demo_evidence(root / "export")
    warehouse = root / "warehouse"
    inputs = demo_inputs(export, evidence)
    result = run_audit(spark, inputs, AuditConfig(), str(warehouse), run_id="night-1")
    return result, faults + evidence.faults, warehouse, inputs
