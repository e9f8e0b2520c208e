"""The demo's audit, run once for the integration tests that read its warehouse."""

import os
import shutil

import pytest

from eos_audit.audit.pipeline import run_audit
from eos_audit.config import AuditConfig
from eos_audit.demo import demo_inputs, write_demo_evidence, write_demo_export
from tests.run_once import once_per_run


@pytest.fixture(scope="session")
def demo_run(spark, tmp_path_factory):
    """The demo's export audited as run "night-1": (result, faults, warehouse, inputs).

    Audited once for the whole run (tests/run_once.py); the export is shared and read only, and
    each worker gets a copy of the warehouse of its own, which tests write into (a re-run of
    night-1, reports).
    """

    def audit_the_demo(root):
        export, faults = write_demo_export(root / "export")
        evidence = write_demo_evidence(root / "export")
        inputs = demo_inputs(export, evidence)
        result = run_audit(spark, inputs, AuditConfig(), str(root / "warehouse"), run_id="night-1")
        return result, faults + evidence.faults, root / "warehouse", inputs

    result, faults, audited, inputs = once_per_run(tmp_path_factory, "demo", audit_the_demo)
    warehouse = tmp_path_factory.mktemp("demo-warehouse") / "warehouse"
    shutil.copytree(audited, warehouse)
    return result, faults, warehouse, inputs


@pytest.fixture(scope="session")
def connect_server(spark) -> str:
    """The sc:// URL of the Spark Connect server in this worker's session JVM, from pyspark's own
    jars (tests/fixtures/connect_server.py)."""
    from tests.fixtures.connect_server import bound_port

    return f"sc://127.0.0.1:{bound_port(spark)}"


@pytest.fixture(scope="session")
def real_kafka(tmp_path_factory):
    """The real-Kafka scenarios' exports (`tests/kafka/scenarios.py`), played once for the run.

    Without the Kafka jars (`tests/jars.py`) the tests that need them skip saying how to fetch
    them, except in CI (`CI=true`), where a real part that cannot start fails the run.
    """
    from tests.jars import HOW_TO_FETCH, KAFKA_3_JARS, KAFKA_4_JARS, required
    from tests.kafka import scenarios

    missing = [jars.name for jars in (KAFKA_4_JARS, KAFKA_3_JARS) if not jars.present()]
    if missing or not shutil.which("javac"):
        reason = (
            f"the Kafka jars {missing} are not fetched: {HOW_TO_FETCH}"
            if missing
            else "javac (a JDK 17+) is needed to compile the suite's Java producer"
        )
        if required():
            pytest.fail(f"CI needs real Kafka: {reason}", pytrace=False)
        pytest.skip(reason)
    # A build that the background process of an xdist run (tests/conftest.py) could not finish
    # left its error: reported by every test that needs it, instead of playing them all again.
    failed = tmp_path_factory.getbasetemp().parent / f"{scenarios.RUN_NAME}.error"

    def build(folder):
        if "PYTEST_XDIST_WORKER" in os.environ and failed.exists():
            raise RuntimeError(f"the real-Kafka scenarios failed: {failed.read_text()}")
        return scenarios.build(folder)

    return once_per_run(tmp_path_factory, scenarios.RUN_NAME, build)
