"""Configuration: frozen dataclasses loaded from TOML, validated, unknown keys rejected.

`conf/defaults.toml` documents every key with its default; the dataclass defaults below are the
same values (a test checks it), so the wheel works on Databricks without the file. The default
severities are the finding registry's (`eos_audit.findings`).
"""

from __future__ import annotations

import dataclasses
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eos_audit.errors import ConfigError
from eos_audit.findings import DEFAULT_SEVERITIES, SEVERITY_ORDER

FAIL_ON_CHOICES = ("critical", "error", "warning", "never")
WRITERS = ("auto", "spark", "delta-rs")

_VERSION_RE = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?$")


def parse_kafka_version(text: str) -> tuple[int, int]:
    """Parse "3.7" or "2.8.1" (or "0.11.0") into (major, minor).

    Raises:
        ConfigError: when the text is not a Kafka version.

    """
    match = _VERSION_RE.match(str(text).strip())
    if not match:
        raise ConfigError(
            f'cluster.kafka_version {text!r} is not a Kafka version; write it like "3.7" or "2.8.1"'
        )
    return int(match.group(1)), int(match.group(2))


@dataclass(frozen=True)
class ClusterConfig:
    """What the audited cluster ran: it decides defaults the broker applied."""

    kafka_version: str = "3.7"
    # None: the default of that Kafka version (docs/rules.md#producer-expiry): 1 day from 3.4 on, 7
    # days before.
    producer_id_expiration_ms: int | None = None

    @property
    def version(self) -> tuple[int, int]:
        """The Kafka version as (major, minor)."""
        return parse_kafka_version(self.kafka_version)

    @property
    def effective_expiration_ms(self) -> int:
        """Producer-state expiry the broker applied (docs/rules.md#producer-expiry).

        producer.id.expiration.ms since 3.4 (KIP-854), before it
        transactional.id.expiration.ms (7 days).
        """
        if self.producer_id_expiration_ms is not None:
            return self.producer_id_expiration_ms
        return 86_400_000 if self.version >= (3, 4) else 604_800_000


@dataclass(frozen=True)
class TopicsConfig:
    """Per-topic policies. Names may use * and ? wildcards."""

    compacted: tuple[str, ...] = ()
    coordinator: tuple[str, ...] = ("__consumer_offsets", "__transaction_state")


@dataclass(frozen=True)
class TransactionsConfig:
    """When an open transaction counts as hanging (docs/rules.md#hanging-transaction)."""

    max_timeout_ms: int = 900_000
    grace_ms: int = 300_000


@dataclass(frozen=True)
class ProcessingConfig:
    """The processing audit's settings (docs/rules.md#exactly-once-processing).

    Its rules compare times two brokers stamped: a group coordinator's commit time or a
    transaction coordinator's record with a partition leader's marker. A marker up to this far
    before the other broker's time still counts as after it (`clock_skew_ms`).

    `one_to_one_groups` names the consumer groups (wildcards * and ?) whose processors write one
    output record per input data record, in the transaction that commits its offset: their
    transactions are checked for input processed twice or never
    (docs/rules.md#one-to-one-processors).

    `transaction_state_partitions` is the partition count of the cluster's `__transaction_state`
    (`transaction.state.log.num.partitions` when the topic was created): a producer id no
    transactional id owns can be told only from the whole transaction log
    (docs/rules.md#hanging-offset-transaction).

    `offsets_topic_partitions` is the partition count of the cluster's `__consumer_offsets`
    (`offsets.topic.num.partitions` when the topic was created; Kafka hashes over the topic's
    own count): it tells which partition holds a group declared one-to-one by name, so that a
    group the export holds no commit of is reported, never passed
    (docs/rules.md#one-to-one-processors).
    """

    clock_skew_ms: int = 1000
    one_to_one_groups: tuple[str, ...] = ()
    transaction_state_partitions: int = 50
    offsets_topic_partitions: int = 50


@dataclass(frozen=True)
class RunConfig:
    """Run behaviour."""

    fail_on: str = "critical"
    # A run that quarantines more than this share of the record batches it read is not a clean
    # night: status QUARANTINE_EXCEEDED and exit code 4 (the quarantined batches leave gaps the
    # audit cannot see into).
    max_quarantined_share: float = 0.01


@dataclass(frozen=True)
class OutputConfig:
    """Where and how tables are written."""

    writer: str = "auto"
    # Databricks: write managed tables into this catalog schema (e.g. "main.eos_audit").
    catalog_schema: str = ""


@dataclass(frozen=True)
class AuditConfig:
    """The whole configuration of an audit run."""

    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    topics: TopicsConfig = field(default_factory=TopicsConfig)
    transactions: TransactionsConfig = field(default_factory=TransactionsConfig)
    processing: ProcessingConfig = field(default_factory=ProcessingConfig)
    run: RunConfig = field(default_factory=RunConfig)
    output: OutputConfig = field(default_factory=OutputConfig)
    severity: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_SEVERITIES))

    def to_json(self) -> str:
        """The configuration as JSON, stored with every run."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    def with_overrides(self, **sections: dict[str, Any]) -> AuditConfig:
        """A copy with some keys replaced, validated like a file (used by the CLI flags)."""
        merged = dataclasses.asdict(self)
        for section, values in sections.items():
            merged.setdefault(section, {}).update(values)
        return _build(merged, "command-line options")


# The range of every number of the configuration, checked at load: a value beyond it would
# otherwise reach the compiled replay and overflow there (issue 27). Kafka's own settings keep
# Kafka's type: producer.id.expiration.ms and transaction.max.timeout.ms are ints of at least 1
# (KIP-854; TransactionStateManagerConfig), so their sum with the grace stays far inside a long.
INT_MAX = 2_147_483_647
NUMBER_RANGES: dict[str, tuple[int | float, int | float]] = {
    "cluster.producer_id_expiration_ms": (1, INT_MAX),
    "transactions.max_timeout_ms": (1, INT_MAX),
    "transactions.grace_ms": (0, INT_MAX),
    "processing.clock_skew_ms": (0, INT_MAX),
    # An int of at least 1 in Kafka (TransactionLogConfig), as here.
    "processing.transaction_state_partitions": (1, INT_MAX),
    # An int of at least 1 in Kafka (GroupCoordinatorConfig), as here.
    "processing.offsets_topic_partitions": (1, INT_MAX),
    "run.max_quarantined_share": (0, 1),
}

_SECTIONS: dict[str, type] = {
    "cluster": ClusterConfig,
    "topics": TopicsConfig,
    "transactions": TransactionsConfig,
    "processing": ProcessingConfig,
    "run": RunConfig,
    "output": OutputConfig,
}


def _coerce(where: str, key: str, value: Any, annotation: str) -> Any:
    if "tuple" in annotation:
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where} must be a list of strings, got {value!r}")
        return tuple(value)
    if "float" in annotation or "int" in annotation:
        low, high = NUMBER_RANGES[key]
        if "float" in annotation:
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not low <= value <= high
            ):
                raise ConfigError(f"{where} must be a number from {low} to {high}, got {value!r}")
            return float(value)
        if value is None and "None" in annotation:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ConfigError(f"{where} must be an integer from {low} to {high}, got {value!r}")
        return value
    if not isinstance(value, str):
        raise ConfigError(f"{where} must be a string, got {value!r}")
    return value


def _build(raw: dict[str, Any], origin: str) -> AuditConfig:
    unknown = set(raw) - set(_SECTIONS) - {"severity"}
    if unknown:
        raise ConfigError(
            f"{origin}: unknown section(s) {sorted(unknown)}; known sections are "
            f"{sorted([*_SECTIONS, 'severity'])}"
        )
    sections: dict[str, Any] = {}
    for name, cls in _SECTIONS.items():
        values = raw.get(name, {}) or {}
        if not isinstance(values, dict):
            raise ConfigError(f"{origin}: [{name}] must be a table of keys")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        bad = set(values) - set(fields)
        if bad:
            raise ConfigError(
                f"{origin}: unknown key(s) {sorted(bad)} in [{name}]; known keys are "
                f"{sorted(fields)}"
            )
        kwargs = {
            key: _coerce(f"{origin}: {name}.{key}", f"{name}.{key}", value, str(fields[key].type))
            for key, value in values.items()
        }
        sections[name] = cls(**kwargs)
    severity = dict(DEFAULT_SEVERITIES)
    for finding_type, level in (raw.get("severity") or {}).items():
        if finding_type not in DEFAULT_SEVERITIES:
            raise ConfigError(
                f"{origin}: [severity] names unknown finding type {finding_type!r}; known types "
                f"are {sorted(DEFAULT_SEVERITIES)}"
            )
        if level not in SEVERITY_ORDER:
            raise ConfigError(
                f"{origin}: severity.{finding_type} must be one of {list(SEVERITY_ORDER)}, got "
                f"{level!r}"
            )
        severity[finding_type] = level
    config = AuditConfig(severity=severity, **sections)
    _validate(config, origin)
    return config


def _validate(config: AuditConfig, origin: str) -> None:
    config.cluster.version  # noqa: B018 - parses, raising ConfigError when malformed
    if config.run.fail_on not in FAIL_ON_CHOICES:
        raise ConfigError(
            f"{origin}: run.fail_on must be one of {list(FAIL_ON_CHOICES)}, got "
            f"{config.run.fail_on!r}"
        )
    if config.output.writer not in WRITERS:
        raise ConfigError(
            f"{origin}: output.writer must be one of {list(WRITERS)}, got {config.output.writer!r}"
        )


def load_config(path: str | Path | None = None) -> AuditConfig:
    """Load a TOML configuration over the defaults.

    Args:
        path: a TOML file; None gives the defaults.

    Returns:
        The validated configuration.

    Raises:
        ConfigError: the file is missing, is not TOML, or has an unknown key or a bad value.

    """
    if path is None:
        return AuditConfig()
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"configuration file {file} does not exist; pass an existing --conf FILE")
    try:
        raw = tomllib.loads(file.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file} is not valid TOML: {exc}") from exc
    return _build(raw, str(file))


def glob_to_java_regex(pattern: str) -> str:
    """Translate a topic wildcard (* and ?) into an anchored Java regular expression."""
    out = []
    for ch in pattern:
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        else:
            out.append(re.escape(ch))
    return "^" + "".join(out) + "$"


def has_wildcard(pattern: str) -> bool:
    """Whether a name of the configuration holds a wildcard (* or ?, as `glob_to_java_regex`)."""
    return "*" in pattern or "?" in pattern


def globs_to_java_regex(patterns: tuple[str, ...] | list[str]) -> str | None:
    """One Java regular expression matching any of the topic wildcards; None for none."""
    if not patterns:
        return None
    return "|".join(f"(?:{glob_to_java_regex(p)})" for p in patterns)
