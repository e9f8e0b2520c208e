"""spark-submit entry point: the same command line as `eos-audit` (see spark-submit.sh).

No audit logic here: spark-submit has created the session, `get_spark()` picks it up. Two
hand-offs to spark-submit.sh, which names both in the environment (under a plain spark-submit
neither is set, and the job is `eos-audit` as it is):

- stderr goes to the FIFO the wrapper copies to its own stderr, since spark-submit merges the
  driver's stderr into its stdout;
- the CLI's exit code is written to a file just before the process exits, so the wrapper tells
  eos-audit's codes (1: findings) from spark-submit's own (1 for most launcher and JVM failures).
"""

import os
import sys

from eos_audit.cli import main

EXIT_CODE_FILE_ENV = "EOS_AUDIT_EXIT_CODE_FILE"
STDERR_FIFO_ENV = "EOS_AUDIT_STDERR"


def _stderr_to_wrapper() -> None:
    """Point this process's stderr (logs, errors, tracebacks) at the wrapper's FIFO, if given."""
    path = os.environ.get(STDERR_FIFO_ENV)
    if not path:
        return
    try:
        # Non-blocking: with no reader left, fail (ENXIO) rather than wait forever to open.
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return  # keep spark-submit's stream, as without the wrapper: on its stdout, not lost
    os.set_blocking(fd, True)
    sys.stderr.flush()
    os.dup2(fd, sys.stderr.fileno())
    os.close(fd)


def _exit_code() -> int:
    """The CLI's exit code, including argparse's (bad usage 2, --version 0)."""
    try:
        return main()
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        raise  # not the CLI's: no code is handed back, and the wrapper reports a failure (3)


if __name__ == "__main__":
    _stderr_to_wrapper()
    code = _exit_code()
    if path := os.environ.get(EXIT_CODE_FILE_ENV):
        with open(path, "w") as out:
            out.write(f"{code}\n")
    sys.exit(code)
