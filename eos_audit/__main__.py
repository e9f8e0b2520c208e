"""The `eos-audit` command (and `python -m eos_audit`): the CLI, once Spark is known to be there.

pyspark is not a dependency of the package (Databricks and spark-submit bring their own), so a
plain `pip install eos-audit` has none: then one line says what to do instead of an import error
from deep inside the library. Exit code 2, as for any other bad set-up.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence

NO_SPARK = (
    "eos-audit: error: PySpark is not installed in this Python environment: install "
    "'eos-audit[local]' (pip install 'eos-audit[local]') to run Spark locally, or run eos-audit "
    "inside a Spark runtime (spark-submit, Databricks), which brings its own."
)
EXIT_NO_SPARK = 2


def main(argv: Sequence[str] | None = None) -> int:
    """Run `eos_audit.cli.main`, or say in one line that PySpark is missing.

    Args:
        argv: the arguments (default: sys.argv[1:]).

    Returns:
        The CLI's exit code, or 2 without PySpark.
    """
    if importlib.util.find_spec("pyspark") is None:
        print(NO_SPARK, file=sys.stderr)
        return EXIT_NO_SPARK
    from eos_audit.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
