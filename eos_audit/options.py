"""The options of an audit, in one table: `eos-audit audit`'s arguments and the notebook's widgets.

The CLI adds its `audit` arguments from `AUDIT_OPTIONS` (`add_arguments`) and the Databricks
notebook (`jobs/databricks_notebook.py`) makes a widget of each (`Option.widget`); both turn what
they were given into the run's inputs (`inputs_fields`, the fields of `pipeline.AuditInputs`) and
its configuration's overrides (`config_overrides`) here, so an option added to the table is an
argument, a widget and an input at once. The module imports no Spark: the notebook reads it in
its first cell, before anything else of eos-audit is imported.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from eos_audit.config import FAIL_ON_CHOICES
from eos_audit.sources.formats import ACKS_FORMATS, FORMAT_NAMES, LIST_OFFSETS_FORMATS

# What an option takes: paths (one or more; a notebook's are comma-separated), a choice, a flag,
# a text, an integer or a share from 0 to 1.
PATHS, CHOICE, FLAG, TEXT, INT, SHARE = "paths", "choice", "flag", "text", "int", "share"
# The value of a choice widget whose option was not given (the CLI's default None).
NOT_GIVEN = "configuration"
BATCH_FORMATS = ("auto", *FORMAT_NAMES)


def share(text: str) -> float:
    """A share from 0 to 1 (for argparse: its error is one usage line).

    Raises:
        argparse.ArgumentTypeError: naming what is wrong with `text`.
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number from 0 to 1") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text} is not from 0 to 1 (0.05 is 5%)")
    return value


@dataclass(frozen=True)
class Option:
    """One option of an audit.

    Attributes:
        name: the argument's `dest` and the widget's name.
        kind: PATHS, CHOICE, FLAG, TEXT, INT or SHARE.
        help: the CLI's help.
        label: the widget's label.
        choices: a CHOICE's values.
        default: the value when not given (None: not given).
        metavar: the CLI's placeholder.
        required: whether the CLI requires it (a notebook without it only shows a report).
        input_field: the `pipeline.AuditInputs` field it sets (None: not an input).
        negated: a FLAG that sets its field to False (`--no-verify-crc`: `verify_crc`).
        run_setting: the configuration's `[run]` setting it overrides when given.
        group: options of one group exclude each other (the CLI's mutually exclusive group).
        notebook_default: the widget's value before anyone sets it, where not `default`.
    """

    name: str
    kind: str
    help: str
    label: str
    choices: tuple[str, ...] = ()
    default: Any = None
    metavar: str | None = None
    required: bool = False
    input_field: str | None = None
    negated: bool = False
    run_setting: str | None = None
    group: str | None = None
    notebook_default: str | None = None

    @property
    def flag(self) -> str:
        """The CLI's flag (`--batches-format` for `batches_format`)."""
        return "--" + self.name.replace("_", "-")

    def argparse_kwargs(self) -> dict[str, Any]:
        """What `add_argument` takes for it."""
        kwargs: dict[str, Any] = {"help": self.help}
        if self.kind == FLAG:
            return {**kwargs, "action": "store_true"}
        if self.metavar:
            kwargs["metavar"] = self.metavar
        if self.kind == PATHS:
            kwargs["nargs"] = "+"
            if not self.required:
                kwargs["default"] = []
        elif self.kind == CHOICE:
            kwargs["choices"] = self.choices
        elif self.kind == INT:
            kwargs["type"] = int
        elif self.kind == SHARE:
            kwargs["type"] = share
        if self.required:
            kwargs["required"] = True
        if self.default is not None and self.kind != PATHS:
            kwargs["default"] = self.default
        return kwargs

    def widget(self) -> tuple[str, tuple[Any, ...]]:
        """The notebook's widget: (`text` or `dropdown`, its arguments after the name).

        A flag is a false/true dropdown; a choice without a default offers NOT_GIVEN first.
        """
        if self.kind == FLAG:
            return "dropdown", ("false", ["false", "true"], self.label)
        if self.kind == CHOICE:
            first = self.default if self.default is not None else NOT_GIVEN
            values = [first, *(c for c in self.choices if c != first)]
            return "dropdown", (first, values, self.label)
        return "text", (self.notebook_default or "", self.label)

    def from_widget(self, text: str) -> Any:
        """The value of a widget's text, as the CLI's parser gives it (None: not given)."""
        text = text.strip()
        if self.kind == PATHS:
            return [p.strip() for p in text.split(",") if p.strip()]
        if self.kind == FLAG:
            return text == "true"
        if not text or (self.kind == CHOICE and text == NOT_GIVEN):
            return self.default
        converters: dict[str, Callable[[str], Any]] = {INT: int, SHARE: share}
        return converters.get(self.kind, str)(text)


AUDIT_OPTIONS: tuple[Option, ...] = (
    Option(
        "batches", PATHS,
        "record batches: Parquet/JSON/CSV files, a Delta table, partition directories "
        "(segments) or kafka-dump-log.sh output",
        "Record batches (paths; empty: report only)",
        metavar="PATH", required=True, input_field="batches",
    ),
    Option(
        "batches_format", CHOICE, "input format (default: detected from the path)",
        "Batches format", choices=BATCH_FORMATS, default="auto", input_field="batches_format",
    ),
    Option(
        "warehouse", TEXT, "where the Delta tables are written (DIR/<table>)",
        "Warehouse (staging, reports)", metavar="DIR", required=True,
        notebook_default="/Volumes/main/eos_audit/lake",
    ),
    Option(
        "run_id", TEXT,
        "run id (default: derived from the inputs and config, never the clock; re-running a "
        "run replaces its rows)",
        "Run id (empty: derived; report only: the latest)",
    ),
    Option(
        "fail_on", CHOICE,
        "exit 1 when a finding at or above this severity exists (default: run.fail_on of the "
        "configuration, critical)",
        "Fail on", choices=FAIL_ON_CHOICES, run_setting="fail_on",
    ),
    Option(
        "conf", TEXT,
        "TOML configuration (see conf/defaults.toml; `python -m eos_audit.package_data` prints "
        "where the installed package holds it and the schemas/ files cited below)",
        "Configuration file (TOML)", metavar="FILE",
    ),
    Option(
        "max_quarantined_share", SHARE,
        "the run ends QUARANTINE_EXCEEDED (exit 4) when more than this share (0 to 1) of its "
        "batches or bytes is quarantined (default: run.max_quarantined_share, 0.01)",
        "Max quarantined share, 0 to 1 (empty: configuration's)",
        metavar="SHARE", run_setting="max_quarantined_share",
    ),
    Option(
        "producer_state", PATHS,
        "seeded producer state: Parquet/JSON in the package's schemas/producer_state.json, or "
        "a producer_state Delta table (its latest finished run's state)",
        "Producer state (paths, or a producer_state table)",
        metavar="PATH", input_field="producer_state", group="seeding",
    ),
    Option(
        "since_state", FLAG,
        "nightly runs: seed with the latest finished run's producer_state in --warehouse and "
        "skip the batches it covers already (audited by that run); on the first night every "
        "batch is audited (docs/nightly.md)",
        "Since state (nightly: seed from the warehouse)",
        input_field="since_state", group="seeding",
    ),
    Option(
        "no_verify_crc", FLAG, "segments: skip CRC-32C verification", "Skip CRC-32C (segments)",
        input_field="verify_crc", negated=True,
    ),
    Option(
        "list_offsets", PATHS,
        "ListOffsets observations (the package's schemas/list_offsets.json as Parquet/JSON/CSV, "
        "or periodic kafka-get-offsets.sh output)",
        "ListOffsets observations (paths)", metavar="PATH", input_field="list_offsets",
    ),
    Option(
        "list_offsets_format", CHOICE, "ListOffsets input format (default: detected)",
        "ListOffsets format", choices=("auto", *LIST_OFFSETS_FORMATS), default="auto",
        input_field="list_offsets_format",
    ),
    Option(
        "list_offsets_spec", CHOICE,
        "kafka-get-offsets.sh text: what --time asked (default latest)",
        "ListOffsets spec (get-offsets text)",
        choices=("latest", "earliest", "max_timestamp"), default="latest",
        input_field="list_offsets_spec",
    ),
    Option(
        "acks", PATHS,
        "client send results (the package's schemas/acks.json as Parquet/JSON/CSV): "
        "acknowledged writes are checked against the log",
        "Send results (paths)", metavar="PATH", input_field="acks",
    ),
    Option(
        "acks_format", CHOICE, "send results' input format (default: detected)", "Acks format",
        choices=("auto", *ACKS_FORMATS), default="auto", input_field="acks_format",
    ),
    Option(
        "coordinator_records", PATHS,
        "decoded __consumer_offsets and __transaction_state records and markers (the package's "
        "schemas/coordinator_records.json as Parquet), for the processing audit when --batches "
        "does not hold those topics' segments",
        "Coordinator records (paths)", metavar="PATH", input_field="coordinator_records",
    ),
    Option(
        "export_time", TEXT,
        "when the log was exported: open transactions are aged at it, and only earlier "
        "ListOffsets observations are compared with the log's end",
        "Export time (ISO-8601)", metavar="ISO-8601", input_field="export_time",
    ),
    Option(
        "topic", TEXT, "dump-log: topic of the dumped segment when the text does not name it",
        "Topic (dump-log text without one)", input_field="dump_topic",
    ),
    Option(
        "partition", INT, "dump-log: partition of the dumped segment",
        "Partition (dump-log text without one)", input_field="dump_partition",
    ),
)  # fmt: skip
BY_NAME: dict[str, Option] = {option.name: option for option in AUDIT_OPTIONS}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every audit option to the CLI's `audit` parser, in the table's order."""
    groups: dict[str, argparse._MutuallyExclusiveGroup] = {}
    for option in AUDIT_OPTIONS:
        target: Any = parser
        if option.group:
            if option.group not in groups:
                groups[option.group] = parser.add_mutually_exclusive_group()
            target = groups[option.group]
        target.add_argument(option.flag, **option.argparse_kwargs())


def inputs_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    """The `pipeline.AuditInputs` fields of the options' values (by option name)."""
    fields: dict[str, Any] = {}
    for option in AUDIT_OPTIONS:
        if option.input_field is None:
            continue
        value = values.get(option.name, option.default)
        if option.kind == PATHS:
            value = tuple(value or ())
        elif option.kind == FLAG:
            value = bool(value) != option.negated
        fields[option.input_field] = value
    return fields


def config_overrides(values: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The configuration's overrides of the options given (`AuditConfig.with_overrides`)."""
    run = {
        option.run_setting: values[option.name]
        for option in AUDIT_OPTIONS
        if option.run_setting and values.get(option.name) is not None
    }
    return {"run": run} if run else {}
