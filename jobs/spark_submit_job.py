"""spark-submit entry point: the same command line as `eos-audit` (see spark-submit.sh).

No logic here: spark-submit has created the session, `get_spark()` picks it up.
"""

import sys

from eos_audit.cli import main

if __name__ == "__main__":
    sys.exit(main())
