"""What session.py finds out about a classic session: the probes Spark Connect answers otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from eos_audit import session


def test_a_classic_session_is_not_connect(spark):
    assert not session.is_connect(spark)
    assert session.status_tracker(spark) is not None
    assert session.default_parallelism(spark) == spark.sparkContext.defaultParallelism


@pytest.mark.skipif(not Path("/proc/net/unix").exists(), reason="reads Linux's /proc")
def test_python_workers_talk_to_the_jvm_over_unix_sockets(spark):
    """The suite's session has the setting of eos_audit's local sessions and spark-submit.sh
    (`session.PYTHON_WORKER_SOCKETS`); the worker's connection to the JVM is a Unix socket, so the
    key still means what it meant (a renamed or dropped key would leave loopback TCP)."""
    assert session.PYTHON_WORKER_SOCKETS == {"spark.python.unix.domain.socket.enabled": "true"}
    assert spark.conf.get("spark.python.unix.domain.socket.enabled") == "true"

    # Defined here, so it is pickled by value: the session's Python workers run in a folder of the
    # session's own, where the `tests` package is not importable.
    def socket_families(batches):
        """In a Python worker: the address families of the sockets this process holds."""
        import os

        import pyarrow as pa

        for _ in batches:
            pass
        with open("/proc/net/unix") as table:  # Num RefCount Protocol Flags Type St Inode [Path]
            unix = {line.split()[6] for line in table.readlines()[1:]}
        families = set()
        for fd in os.listdir("/proc/self/fd"):
            path = f"/proc/self/fd/{fd}"
            target = os.readlink(path) if os.path.islink(path) else ""
            if target.startswith("socket:["):
                families.add("unix" if target[8:-1] in unix else "inet")
        yield pa.RecordBatch.from_pydict({"family": sorted(families)})

    rows = spark.range(1).mapInArrow(socket_families, "family string").collect()
    assert {row.family for row in rows} == {"unix"}
