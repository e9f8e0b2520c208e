"""What session.py finds out about a classic session: the probes Spark Connect answers otherwise."""

from __future__ import annotations

from eos_audit import session


def test_a_classic_session_is_not_connect(spark):
    assert not session.is_connect(spark)
    assert session.status_tracker(spark) is not None
    assert session.default_parallelism(spark) == spark.sparkContext.defaultParallelism
