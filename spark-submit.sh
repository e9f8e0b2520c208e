#!/usr/bin/env bash
# The nightly job through spark-submit: the eos-audit package shipped to the executors, Delta Lake
# from the delta-spark package, every argument passed through to `eos-audit`.
#
#   ./spark-submit.sh audit --batches /exports/kafka --warehouse /lake/eos_audit
#   SPARK_MASTER=yarn ./spark-submit.sh audit ...      # any cluster manager
#   ./spark-submit.sh --no-delta audit ...              # no Maven access: write with delta-rs
#   ./spark-submit.sh --print-command audit ...         # show what would run
#
# Environment: SPARK_SUBMIT (default: .venv/bin/spark-submit, else spark-submit on PATH),
# SPARK_MASTER (default local[*]), DELTA_VERSION (default 4.4.0, for Spark 4.2: see below),
# EXTRA_SUBMIT_ARGS (more spark-submit options, e.g. "--driver-memory 8g").
#
# Exit code: eos-audit's own (0, 1 findings, 2, 3, 4: README's "Running it") when the job ran to its
# end, and 3 when spark-submit failed before or around it: spark-submit exits 1 for most launcher
# and JVM failures (--packages that do not resolve, a JVM that cannot start), which a scheduler
# would read as findings, and a signal's code for a killed driver. The job hands its code back through a file, so the
# driver must run on this machine (client deploy mode, spark-submit's default).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

use_delta=1
print_only=0
while [ $# -gt 0 ]; do
    case "$1" in
        --no-delta) use_delta=0; shift ;;
        --print-command) print_only=1; shift ;;
        *) break ;;
    esac
done
usage="usage: ./spark-submit.sh [--no-delta] [--print-command] audit|demo ARGS..."
[ $# -gt 0 ] || { echo "$usage" >&2; exit 2; }

python="$here/.venv/bin/python"
[ -x "$python" ] || python="$(command -v python3)"

# Help is answered here, without spark-submit: no JVM, and no Maven resolution of --packages
# (which needs the network, and fails with an Ivy stack trace without it).
for arg in "$@"; do
    case "$arg" in
        -h|--help)
            echo "$usage"
            echo "Runs eos-audit under spark-submit (see the top of $0); the CLI's own help:"
            echo
            cd "$here" && exec "$python" -m eos_audit "$@" ;;
    esac
done

submit="${SPARK_SUBMIT:-}"
if [ -z "$submit" ]; then
    if [ -x "$here/.venv/bin/spark-submit" ]; then submit="$here/.venv/bin/spark-submit"; else submit="spark-submit"; fi
fi

# The library goes to the executors as a zip: Python data sources (segments, dump-log) run there.
build_dir="$(mktemp -d)"
trap 'rm -rf "$build_dir"' EXIT
(cd "$here" && "$python" -c "import shutil; shutil.make_archive('$build_dir/eos_audit', 'zip', '.', 'eos_audit')")

args=(--master "${SPARK_MASTER:-local[*]}" --name eos-audit
      --py-files "$build_dir/eos_audit.zip"
      --conf "spark.pyspark.python=$python"
      --conf "spark.sql.session.timeZone=UTC"
      --conf "spark.python.sql.dataFrameDebugging.enabled=false"  # why: eos_audit/session.py
      --conf "spark.python.unix.domain.socket.enabled=true"  # why: eos_audit/session.py
      --driver-java-options "-Dlog4j2.configurationFile=file:$here/eos_audit/log4j2.properties")
if [ "$use_delta" = 1 ]; then
    # delta-spark's jars for the Spark that constraints.txt pins (4.2). Not the Python delta-spark
    # package's version (4.4.1 there): Maven Central serves no delta-spark_2.13 4.4.1 (its jar and
    # pom are not found), so `--packages` with it fails to resolve; 4.4.0 is the newest it serves
    # (tests/jars.py pins the same). The Python package only configures sessions; the jars write.
    version="${DELTA_VERSION:-4.4.0}"
    # What Spark itself ships stays out of the resolution: the closure's older Hadoop client (3.4),
    # Parquet (1.16), Jackson (2.13), Scala, log4j and SLF4J would sit on the class path behind
    # Spark's own, never used. And Ivy settles SLF4J on 2.0.13 where Maven settles on 1.7.36, so a
    # local Maven repository that Maven filled lacks that jar: with it excluded, `--packages`
    # resolves from ~/.m2 alone, offline (measured: delta-spark, delta-storage, delta-kernel-*,
    # unitycatalog-* and a few small libraries resolved "from local-m2-cache").
    provided="org.scala-lang:scala-library,org.slf4j:slf4j-api,org.apache.logging.log4j:*"
    provided+=",org.apache.hadoop:*,org.apache.parquet:*,com.fasterxml.jackson.core:*"
    args+=(--packages "io.delta:delta-spark_2.13:$version" --exclude-packages "$provided"
           --conf "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension"
           --conf "spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog")
fi
# shellcheck disable=SC2206
args+=(${EXTRA_SUBMIT_ARGS:-} "$here/jobs/spark_submit_job.py" "$@")

if [ "$print_only" = 1 ]; then
    printf '%q ' "$submit" "${args[@]}"; echo
    exit 0
fi

# spark-submit runs the Python driver with its stderr merged into its own stdout (Spark's
# PythonRunner), which would put eos-audit's logs among the summary and the findings table. The
# job (jobs/spark_submit_job.py) writes its stderr into this FIFO instead, copied to ours.
# This shell holds it open read-write (fd 3) until spark-submit has ended, so no open blocks and the
# copy ends when both closed it. The copy's read end is opened here too, before the copy starts: a
# `cat FIFO` started in the background could open it after fd 3 was closed (a spark-submit that
# fails at once, a busy machine) and then wait for a writer forever.
exit_code_file="$build_dir/exit-code"
stderr_fifo="$build_dir/stderr"
mkfifo "$stderr_fifo"
exec 3<>"$stderr_fifo"
exec 4<"$stderr_fifo"
cat <&4 >&2 3>&- 4<&- &
relay=$!
exec 4<&-
export PYSPARK_PYTHON="$python"
export EOS_AUDIT_EXIT_CODE_FILE="$exit_code_file" EOS_AUDIT_STDERR="$stderr_fifo"
# Not exec'd, so the outcome can be read afterwards; a scheduler's TERM (or `timeout`) sent to this
# shell alone is passed on, as it reached spark-submit when it was exec'd.
"$submit" "${args[@]}" <&0 3>&- &
submit_pid=$!
trap 'kill -TERM "$submit_pid" 2>/dev/null || true' TERM INT HUP
while :; do
    submit_code=0
    wait "$submit_pid" || submit_code=$?
    # A trapped signal ends the wait (code > 128) while spark-submit still runs: wait again.
    kill -0 "$submit_pid" 2>/dev/null || break
done
trap - TERM INT HUP
exec 3>&-
wait "$relay" || true

code="$(cat "$exit_code_file" 2>/dev/null || true)"
if ! [[ "$code" =~ ^[0-9]{1,3}$ ]] || [ "$code" -gt 255 ]; then
    echo "spark-submit.sh: error: spark-submit failed (exit $submit_code) before eos-audit" \
        "finished; its output above says why. Exit 3, not eos-audit's findings code." >&2
    exit 3
fi
# The job's code wins over a different one of spark-submit's: it was written after the run's
# tables and audit_runs record, so what fails later (the JVM's shutdown) cannot change the night.
if [ "$code" != "$submit_code" ]; then
    echo "spark-submit.sh: spark-submit exited $submit_code after eos-audit had finished;" \
        "exit $code, eos-audit's outcome." >&2
fi
exit "$code"
