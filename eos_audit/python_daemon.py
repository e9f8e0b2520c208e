"""PySpark's Python daemon, without the trace of a worker whose reader went away.

A local session eos-audit starts runs its Python workers through this module
(`spark.python.daemon.module`, eos_audit.session). It is PySpark's own daemon (`pyspark.daemon`),
with one difference: when the JVM closes a worker's socket before the worker wrote all it had (a
`first()` or a `limit` that needed fewer rows than a task makes), the worker's last flush fails
with BrokenPipeError, Spark ends that worker (`spark.python.daemon.killWorkerOnFlushFailure`) and
starts another, and PySpark's daemon prints the error's traceback on the JVM's stderr. Nothing is
lost and nothing failed, but a clean run showed a Python trace (measured on a local session with
eos-audit's settings: one trace for each of 15 `first()` and `limit` queries over Python
functions, none with this module). Those traces are not printed here; every other exception's
still is.
"""

from __future__ import annotations

import sys
import traceback

from pyspark import daemon

_print_exc = traceback.print_exc
# What a worker's write raises when the JVM no longer reads from it.
_READER_GONE = (BrokenPipeError, ConnectionResetError)


def print_exc_unless_reader_gone(*args: object, **kwargs: object) -> None:
    """`traceback.print_exc`, silent for the exception of a worker whose reader went away."""
    if isinstance(sys.exc_info()[1], _READER_GONE):
        return
    _print_exc(*args, **kwargs)  # type: ignore[arg-type]


if __name__ == "__main__":
    # The daemon's manager and the workers it forks print through the module's `traceback`.
    traceback.print_exc = print_exc_unless_reader_gone
    daemon.manager()
