"""Command line: `eos-audit audit ...` for the nightly job, `eos-audit demo` for a first look.

Exit codes: 0 nothing at or above --fail-on, 1 findings at or above it, 2 bad usage, configuration
or input (nothing was audited; also an input the run may not read), 3 internal error, 4 the run
finished but audited nothing, quarantined more than run.max_quarantined_share of its batches or
of its input bytes, or could not read files it had listed (audit_runs status NOTHING_AUDITED,
QUARANTINE_EXCEEDED or INPUT_UNREADABLE; it wins over 1, since missing batches leave gaps).
This is the only module that configures logging.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from eos_audit import __version__, options
from eos_audit.config import AuditConfig, load_config
from eos_audit.errors import EosAuditError, InputNotFoundError
from eos_audit.findings import failing_findings
from eos_audit.generate.command import add_generate_parser, run_generate
from eos_audit.score import add_score_parser, run_score
from eos_audit.sinks.run_status import UNUSABLE_INPUT
from eos_audit.sinks.warehouse import check_warehouse
from eos_audit.sources.files import filesystems as fsys

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from eos_audit.sinks.run_record import RunResult

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL, EXIT_UNUSABLE_INPUT = 0, 1, 2, 3, 4
# What a finished run's exit code says, as the demo prints it (README's table says more).
EXIT_MEANINGS = {
    EXIT_OK: "nothing at or above --fail-on",
    EXIT_FINDINGS: "findings at or above --fail-on (default critical), as a nightly job would fail",
    EXIT_UNUSABLE_INPUT: "the input was not usable enough for a clean night",
}
DEMO_QUARANTINED_SHARE = 0.05
log = logging.getLogger("eos_audit")


class _Parser(argparse.ArgumentParser):
    """argparse exits with 2 on bad usage, which is our code for it too; keep its message."""

    def error(self, message: str) -> None:  # noqa: D102
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"eos-audit: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (public so the docs and tests can read it)."""
    parser = _Parser(prog="eos-audit", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"eos-audit {__version__}")
    _add_global_options(parser, after_command=False)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    audit = commands.add_parser("audit", help="audit exported record batches into Delta tables")
    options.add_arguments(audit)  # the one table the notebook's widgets come from too

    demo = commands.add_parser(
        "demo", help="write a sample export with injected faults and audit it"
    )
    demo.add_argument(
        "--warehouse",
        default="warehouse",
        metavar="DIR",
        help="where the Delta tables are written (default: ./warehouse)",
    )
    demo.add_argument(
        "--export",
        metavar="DIR",
        help="where the sample export is written (default: a temporary folder)",
    )

    report = commands.add_parser(
        "report", help="write the HTML report of a recorded run (default: the latest finished)"
    )
    report.add_argument("--warehouse", required=True, metavar="DIR", help="the run's --warehouse")
    report.add_argument("--run-id", help="the run (default: the latest finished run)")
    report.add_argument(
        "--conf", metavar="FILE", help="the run's configuration ([output] catalog_schema)"
    )
    report.add_argument(
        "--output", metavar="FILE", help="where to write it (default: DIR/reports/<run_id>.html)"
    )
    add_generate_parser(commands)
    add_score_parser(commands)
    for command in commands.choices.values():
        _add_global_options(command, after_command=True)
    return parser


REMOTE_HELP = (
    "run on a Spark Connect server (default: SPARK_REMOTE of the environment); local paths are "
    "made absolute first, and must be paths the server can read and write too"
)
# The arguments that hold paths (of any command), made absolute before they reach a server.
_PATH_ARGUMENTS = (
    "batches", "producer_state", "list_offsets", "acks", "warehouse", "export", "output",
    "ground_truth", "coordinator_records",
)  # fmt: skip


def _add_global_options(parser: argparse.ArgumentParser, *, after_command: bool) -> None:
    """-v, -q, --log-format and --remote, before the command and after it.

    Users put them on either side (`eos-audit audit ... -q`). After the command their default is
    SUPPRESS: one not given there keeps what was given before the command.
    """
    suppress = {"default": argparse.SUPPRESS} if after_command else {}
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging", **suppress)
    parser.add_argument(
        "-q", "--quiet", action="store_true",
        help="log warnings and errors only (no stage and progress lines)", **suppress,
    )  # fmt: skip
    parser.add_argument(
        "--log-format", choices=("text", "json"),
        help="json: one JSON object per log line on stderr, for schedulers",
        **(suppress or {"default": "text"}),
    )  # fmt: skip
    parser.add_argument("--remote", metavar="sc://HOST:PORT", help=REMOTE_HELP, **suppress)


def absolute_local_path(path: str) -> str:
    """A local path made absolute against this process's directory; a URI as it is.

    A Spark Connect server resolves a relative path against its own working directory, which
    is not the client's: `--batches export/` would read another folder, or none.
    """
    if fsys.is_uri(path) or Path(path).is_absolute():
        return path
    return str(Path(path).absolute())


def _with_absolute_paths(args: argparse.Namespace) -> None:
    """Every path argument of the command made absolute (`absolute_local_path`), in place."""
    for name in _PATH_ARGUMENTS:
        value = getattr(args, name, None)
        if isinstance(value, str):
            setattr(args, name, absolute_local_path(value))
        elif isinstance(value, list):
            setattr(args, name, [absolute_local_path(v) for v in value])


@contextmanager
def _remote_environment(remote: str | None) -> Iterator[None]:
    """`SPARK_REMOTE` set to `remote` for a command whose own code starts the session."""
    if not remote or os.environ.get("SPARK_REMOTE") == remote:
        yield
        return
    previous = os.environ.get("SPARK_REMOTE")
    os.environ["SPARK_REMOTE"] = remote
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("SPARK_REMOTE", None)
        else:
            os.environ["SPARK_REMOTE"] = previous


class JsonLogFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message (and the error, if any)."""

    def format(self, record: logging.LogRecord) -> str:  # noqa: D102
        line = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line)


def configure_logging(verbose: bool, quiet: bool = False, log_format: str = "text") -> None:
    """Configure the process's logging (the CLI owns it): level, format, Spark's noise off."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonLogFormatter()
        if log_format == "json"
        else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    logging.basicConfig(level=level, handlers=[handler])
    for noisy in ("py4j", "pyspark"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _fails(by_severity: dict[str, int], fail_on: str) -> bool:
    return bool(failing_findings(by_severity, fail_on))


def _print_summary(result, out=None) -> None:
    out = out or sys.stdout
    print(f"\neos-audit run {result.run_id}: {result.status} (writer: {result.writer})", file=out)
    skipped = (
        f" + skipped {result.batches_skipped} (audited by run {result.seeded_from_run})"
        if result.batches_skipped
        else ""
    )
    print(
        f"batches read {result.batches_read} = audited {result.batches_audited} + quarantined "
        f"{result.batches_quarantined}{skipped}",
        file=out,
    )
    if result.lines_quarantined:
        lines = "line" if result.lines_quarantined == 1 else "lines"
        print(
            f"{result.lines_quarantined} text {lines} quarantined: no part of kafka-dump-log.sh's "
            "output, counted by their bytes (see input_files), not as batches",
            file=out,
        )
    if result.coordinator_records_skipped:
        counts = ", ".join(f"{k} ({n})" for k, n in result.coordinator_records_skipped.items())
        print(
            f"{sum(result.coordinator_records_skipped.values())} coordinator record(s) skipped, "
            f"of types the audit does not read: {counts}",
            file=out,
        )
    if result.seeded_from_run and not result.batches_skipped:
        print(f"seeded with run {result.seeded_from_run}'s producer_state", file=out)
    if result.error:
        print(f"{result.status}: {result.error}", file=out)
    if result.findings_by_type:
        width = max(len(t) for t, _, _ in result.findings_by_type)
        print(f"\n{'finding_type'.ljust(width)}  severity  count", file=out)
        for finding_type, severity, count in result.findings_by_type:
            print(f"{finding_type.ljust(width)}  {severity.ljust(8)}  {count:5d}", file=out)
    else:
        print("\nno findings", file=out)
    print("\nDelta tables:", file=out)
    width = max((len(t) for t in result.tables), default=0)
    for table, location in result.tables.items():
        print(f"  {table:<{width}}  {location}", file=out)


def _run(args: argparse.Namespace) -> int:
    from eos_audit.audit.pipeline import AuditInputs, export_time_ms, run_audit
    from eos_audit.session import get_spark as _get_spark

    remote = getattr(args, "remote", None) or os.environ.get("SPARK_REMOTE")
    if remote:
        _with_absolute_paths(args)

    def get_spark() -> SparkSession:
        """The session of this command: --remote's, else the active one, else a local one."""
        # JSON logs are JSON from the first line: the JVM's own output goes through them.
        return _get_spark(remote=remote, jvm_output_as_logs=args.log_format == "json")

    if args.command in ("generate", "score"):
        with _remote_environment(remote):
            return run_generate(args) if args.command == "generate" else run_score(args)
    if args.command == "report":
        from eos_audit.report import write_report

        config = load_config(args.conf)
        path = write_report(
            get_spark(), args.warehouse, args.run_id,
            Path(args.output) if args.output else None,
            catalog_schema=config.output.catalog_schema,
        )  # fmt: skip
        print(f"report: {path}")
        return EXIT_OK

    if args.command == "demo":
        from eos_audit.demo import demo_inputs, write_demo_evidence, write_demo_export

        export_dir = (
            Path(args.export) if args.export else Path(tempfile.mkdtemp(prefix="eos-demo-"))
        )
        path, faults = write_demo_export(export_dir)
        evidence = write_demo_evidence(export_dir)
        print(f"sample export with {len(faults)} injected faults and 1 malformed row: {path}")
        print(
            f"client evidence with {len(evidence.faults)} more: {evidence.acks}, "
            f"{evidence.list_offsets}"
        )
        planted = faults + evidence.faults
        width = max(len(fault.finding_type) for fault in planted)
        for fault in planted:
            where = f"@ {fault.base_offset}" if fault.base_offset >= 0 else "(client side)"
            print(
                f"  {fault.finding_type:<{width}} {fault.topic}-{fault.partition} {where}: "
                f"{fault.story}"
            )
        # The sample's one malformed row is planted, 1 of 62 batches: above the default 1% a real
        # night allows. The demo allows 5%, as `--max-quarantined-share 0.05` would, and says so.
        config: AuditConfig = load_config(None).with_overrides(
            run={"max_quarantined_share": DEMO_QUARANTINED_SHARE}
        )
        print(
            f"  allowed quarantined: {DEMO_QUARANTINED_SHARE:.0%} (as --max-quarantined-share "
            f"{DEMO_QUARANTINED_SHARE}; at the default 1% this run would end QUARANTINE_EXCEEDED, "
            f"exit {EXIT_UNUSABLE_INPUT})"
        )
        inputs = demo_inputs(path, evidence)
        # A URI as given: pathlib would make `s3://b/wh` the local `s3:/b/wh`.
        warehouse = (
            args.warehouse if fsys.is_uri(args.warehouse) else str(Path(args.warehouse).resolve())
        )
        result = run_audit(get_spark(), inputs, config, warehouse, run_id="demo")
        _print_summary(result)
        _write_report(get_spark(), warehouse, result.run_id, config)
        # The exit code a real run over this export gives: 1, its planted faults are CRITICAL.
        code = exit_code(result, config.run.fail_on)
        print(f"\nexit code {code}: {EXIT_MEANINGS[code]}")
        return code

    config = load_config(args.conf)
    # Fail before starting Spark (seconds) when a local input is plainly missing.
    paths = [
        *args.batches, *args.producer_state, *args.list_offsets, *args.acks,
        *args.coordinator_records,
    ]  # fmt: skip
    for path in paths:
        if not fsys.is_uri(path) and not Path(path).exists():
            raise InputNotFoundError(
                f"input {path} does not exist; check --batches, --producer-state, "
                "--list-offsets, --acks and --coordinator-records"
            )
    # Before Spark starts (seconds, not a minute); run_audit checks again, creating it.
    check_warehouse(args.warehouse, paths, create=False)
    export_time_ms(args.export_time)  # a malformed time fails here, not after the audit
    overrides = options.config_overrides(vars(args))
    if overrides:
        config = config.with_overrides(**overrides)
    inputs = AuditInputs(**options.inputs_fields(vars(args)))
    result = run_audit(get_spark(), inputs, config, args.warehouse, run_id=args.run_id)
    _print_summary(result)
    _write_report(get_spark(), args.warehouse, result.run_id, config)
    return exit_code(result, config.run.fail_on)


def _write_report(spark: SparkSession, warehouse: str, run_id: str, config: AuditConfig) -> None:
    """Write the run's HTML report and print its path; a report that fails never fails the run."""
    from eos_audit.report import write_report

    try:
        path = write_report(spark, warehouse, run_id, catalog_schema=config.output.catalog_schema)
    except Exception as exc:  # noqa: BLE001 - the audit's tables and exit code stand without it
        log.warning("run %s: the HTML report could not be written: %s", run_id, exc)
        return
    print(f"\nreport: {path}")


def exit_code(result: RunResult, fail_on: str) -> int:
    """The exit code of a finished run (see the module docstring).

    Args:
        result: what the run did.
        fail_on: the severity threshold (critical, error, warning, never).

    Returns:
        4 for NOTHING_AUDITED, QUARANTINE_EXCEEDED and INPUT_UNREADABLE, else 1 when a finding
        is at or above `fail_on`, else 0.
    """
    if result.status in UNUSABLE_INPUT:
        return EXIT_UNUSABLE_INPUT
    return EXIT_FINDINGS if _fails(result.findings_by_severity, fail_on) else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `eos-audit` command.

    Args:
        argv: the arguments (default: sys.argv[1:]).

    Returns:
        The exit code (see the module docstring).

    """
    args = build_parser().parse_args(argv)
    configure_logging(args.verbose, args.quiet, args.log_format)
    try:
        return _run(args)
    except EosAuditError as exc:
        print(f"eos-audit: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - anything else is our bug: say so, trace in debug
        log.debug("internal error", exc_info=True)
        # One line: a Py4J error's message carries the whole JVM stack (hundreds of lines).
        first = (str(exc).strip().splitlines() or [""])[0][:500]
        print(
            f"eos-audit: internal error: {type(exc).__name__}: {first}\n"
            "This is a bug in eos-audit; rerun with -v for the trace and report it.",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
