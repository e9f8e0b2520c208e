#!/usr/bin/env bash
# One entry point for people and CI: sets up .venv when needed, then runs what was asked.
#   ./run.sh demo [--warehouse DIR]   sample export with injected faults, audited into ./warehouse
#   ./run.sh test [pytest args]       the test suite
#   ./run.sh audit ARGS...            the eos-audit CLI (same as .venv/bin/eos-audit)
#   ./run.sh bench [ARGS...]          the benchmarks in bench/ (see bench/README.md)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
# Python caches bytecode for .venv and this repository (git ignores both) even where the
# environment sets PYTHONDONTWRITEBYTECODE: the venv is installed without compiling (pip's
# compiling of its ~7,000 files is a third of a fresh set-up, and most are never imported), so
# each module is compiled once, when first imported, instead of by every process that imports it
# (a run of the suite starts more than 100: pytest's workers, Spark's Python workers, the CLIs).
unset PYTHONDONTWRITEBYTECODE

die() { printf 'run.sh: %s\n' "$*" >&2; exit 2; }

check_java() {
    local java_bin="java"
    [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ] && java_bin="$JAVA_HOME/bin/java"
    command -v "$java_bin" >/dev/null 2>&1 || die "Java 17 or newer is required by Spark and was not found.
Install it (Debian/Ubuntu: 'sudo apt-get install openjdk-17-jre-headless'; macOS: 'brew install openjdk@17'),
or set JAVA_HOME to a JDK 17+ installation, then run this command again."
    local version major
    version=$("$java_bin" -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n 1)
    major=${version%%.*}
    [ "$major" = "1" ] && major=$(echo "$version" | cut -d. -f2)
    [[ "$major" =~ ^[0-9]+$ ]] && [ "$major" -ge 17 ] || die "Java 17 or newer is required by Spark; found '${version:-unknown}'.
Install a JDK 17+ (Debian/Ubuntu: 'sudo apt-get install openjdk-17-jre-headless') or point JAVA_HOME at one."
}

pick_python() {
    local candidate
    for candidate in python3.11 python3.12 python3 python; do
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
            echo "$candidate"; return
        fi
    done
    die "Python 3.11 or newer is required (pyproject.toml, requires-python) and was not found; install it and retry."
}

ensure_env() {
    local stamp=.venv/.eos-audit-installed
    local want
    want=$(cat pyproject.toml constraints.txt | cksum)
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return; fi
    if [ ! -x .venv/bin/python ]; then
        echo "run.sh: creating .venv with $(pick_python)" >&2
        "$(pick_python)" -m venv .venv || die "could not create .venv (on Debian/Ubuntu: apt-get install python3-venv)"
    fi
    echo "run.sh: installing eos-audit and its pinned dependencies into .venv (first run takes a few minutes)" >&2
    .venv/bin/python -m pip install --quiet --upgrade pip >&2
    .venv/bin/python -m pip install --quiet --no-compile -c constraints.txt -e ".[local,dev]" >&2
    echo "$want" > "$stamp"
}

ensure_jars() {
    # The real parts the suite runs on the JVM (Kafka brokers and tools, delta-spark, hadoop-aws),
    # pinned in tests/jars.py and fetched once into .jars/ through Maven (or pyspark's Ivy). A set
    # that cannot be fetched is said here; its tests then fail in CI and skip elsewhere, saying so.
    .venv/bin/python -m tests.jars fetch || echo "run.sh: some jars could not be fetched (above)" >&2
}

fetch_jars_early() {
    # With Maven's `mvn` the fetch needs only the standard library, so it runs beside the venv's
    # install (both mostly wait on the network and disk) with the system's Python; ensure_jars
    # then finds the sets there, or fetches again and says why it could not (without `mvn`, the
    # fetch uses pyspark's Ivy, which only the venv has: it waits for the venv as before).
    command -v mvn >/dev/null 2>&1 || return 0
    "$(pick_python)" -m tests.jars fetch >/dev/null 2>&1 || true
}

ensure_browser() {
    # The report's browser test (tests/integration/test_report_browser.py) needs Chromium and
    # ChromeDriver. As root (CI) they are installed from Debian's packages; otherwise, or if that
    # fails, the test is skipped and says how to install them.
    if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then return; fi
    if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then return; fi
    echo "run.sh: installing chromium and chromium-driver for the report's browser test" >&2
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            --no-install-recommends chromium chromium-driver; } >/dev/null 2>&1; then
        echo "run.sh: could not install chromium; the browser test will be skipped" >&2
    fi
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
    # The demo exits as a real run over its export would: 1, for its planted CRITICAL findings.
    # That is what the demo shows, not a failure of this command, which exits 0 then.
    demo)  check_java; ensure_env; code=0; .venv/bin/eos-audit demo "$@" || code=$?
           [ "$code" -eq 1 ] && exit 0; exit "$code" ;;
    # Two workers (pytest-xdist): much of a test's time is the JVM planning or a subprocess
    # starting, which the other worker overlaps. EOS_AUDIT_TEST_WORKERS=0 runs in one process.
    # worksteal: a worker that runs out takes tests queued on the other, so neither idles at the end.
    # The browser's packages (apt) install while the venv's do (pip): both mostly wait on the
    # network and disk, so a fresh machine's set-up takes about the longer of the two. Without
    # the browser its test is skipped, as before: its install never fails the command. The jars'
    # fetch with `mvn` runs meanwhile too (fetch_jars_early). Measured on fresh clones (2 busy
    # cores, pip's cache and ~/.m2 filled, alternated), the set-up before pytest started: 76 and
    # 64 s with the venv, then four mvn runs; 29 and 36 s with one mvn run beside the venv.
    test)  check_java; ensure_browser & browser=$!; fetch_jars_early & jars=$!
           ensure_env; wait "$jars" || true; ensure_jars; wait "$browser" || true
           exec .venv/bin/python -m pytest -n "${EOS_AUDIT_TEST_WORKERS:-2}" --dist worksteal "$@" ;;
    audit) check_java; ensure_env; exec .venv/bin/eos-audit audit "$@" ;;
    bench) check_java; ensure_env; exec .venv/bin/python -m bench.run "$@" ;;
    *) die "usage: ./run.sh demo|test|audit|bench [args...]  (see README.md)" ;;
esac
