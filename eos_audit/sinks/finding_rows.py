"""Findings as Spark rows: the one builder every rule's findings go through.

The registry (`eos_audit.findings`) says what a finding type is; this module turns a type and its
values into a row of the findings table (a struct in the FINDINGS contract): its `detail`
sentence from the type's template, its severity from the configuration and its cause, its
evidence, its id. The replay kernel's findings (`coded_finding_struct`, by code), the client
acknowledgement rules and the ListOffsets rules (`finding_struct`) all build their rows here, so
every finding has the same shape whoever raises it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F

from eos_audit.findings import (
    CAUSE_CEILING,
    REGISTRY,
    SEVERITY_ORDER,
    SLOT_OF_FACT,
    FindingType,
    configured_severity,
    severity_for,
)
from eos_audit.schemas import FINDINGS
from eos_audit.sql_text import cast, lookup

if TYPE_CHECKING:
    from eos_audit.config import AuditConfig


def _utc_millis_text(epoch_ms: Column) -> Column:
    """Epoch milliseconds as ISO-8601 UTC text with milliseconds, whatever the session zone."""
    return F.date_format(
        F.to_utc_timestamp(F.timestamp_millis(epoch_ms), F.current_timezone()),
        "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'",
    )


# How a fact shows in `detail` and `evidence`, beyond its raw value: view name -> (the fact it is
# computed from, how). A type whose facts include the source can name the view.
VIEWS_OF_FACTS: dict[str, tuple[str, Callable[[Column], Column]]] = {
    "acknowledged_at": ("acknowledged_ms", _utc_millis_text),
    # The kernel records the log end offset (last offset + 1); the sentence names the last one.
    "log_last_offset": ("log_end_offset", lambda end: end - 1),
    "age_measured_at": (
        "measured_at_export",
        lambda at_export: F.when(at_export == 1, "export_time").otherwise("log_end"),
    ),
}
assert {source for source, _ in VIEWS_OF_FACTS.values()} <= set(SLOT_OF_FACT)


def fact_values(kind: FindingType, slots: Sequence[Column]) -> dict[str, Column]:
    """A type's facts by name, and their views, from the kernel's positional fact columns.

    Args:
        kind: the finding type.
        slots: the kernel's `FACTS_PER_FINDING` fact columns, by slot.

    Returns:
        Every name the type's detail template and evidence may take from its facts.
    """
    values = {name: slots[SLOT_OF_FACT[name]] for name in kind.facts}
    for view, (source, show) in VIEWS_OF_FACTS.items():
        if source in values:
            values[view] = show(values[source])
    return values


_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def sentence(template: str, *cols: Column) -> Column:
    """A readable sentence from a printf template; nulls print as 'none'."""
    # As contract_reader.format_reason: one literal, and ifnull rather than a coalesce of a list.
    none = F.lit("none")
    return F.format_string(template, *[F.ifnull(c.cast("string"), none) for c in cols])


def finding_struct(
    finding_type: str,
    config: AuditConfig,
    run_id: str,
    *,
    identity: list[Column],
    values: dict[str, Column],
    severity: Column | None = None,
) -> Column:
    """One row of the findings table, as a struct in the FINDINGS contract.

    Args:
        finding_type: a name in REGISTRY.
        config: the run configuration (severities).
        run_id: the run id.
        identity: what makes the finding unique and stable across runs (hashed into finding_id
            together with its type).
        values: findings columns by name, plus the values the type's detail template and
            evidence name; missing findings columns are null.
        severity: overrides the configured severity, cause included (default: the configured
            severity lowered by the cause, `findings.severity_for`).

    Returns:
        The struct; `detail`, `spec_ref`, `severity`, `finding_id` and `evidence` are filled in.
    """
    kind = REGISTRY[finding_type]
    return _build(
        F.lit(kind.code), [kind], config, run_id,
        identity=identity, values=values, severity=severity,
    )  # fmt: skip


def coded_finding_struct(
    code: Column,
    finding_types: Sequence[str],
    config: AuditConfig,
    run_id: str,
    *,
    identity: list[Column],
    values: dict[str, Column],
    type_values: Callable[[FindingType], dict[str, Column]],
) -> Column:
    """`finding_struct` for rows whose type is a code column (the replay kernel's findings).

    Args:
        code: the finding type's code (`FindingType.code`).
        finding_types: the names the code may take.
        config: the run configuration (severities).
        run_id: the run id.
        identity: hashed into finding_id together with the type.
        values: findings columns by name, common to every type.
        type_values: the values one type's detail template and evidence name beyond `values`
            (the kernel's positional facts, named).
    """
    return _build(
        code, [REGISTRY[n] for n in finding_types], config, run_id,
        identity=identity, values=values, type_values=type_values,
    )  # fmt: skip


def lowered_by(cause: str) -> Column:
    """The stage's `findings` struct given `cause`.

    For the causes found after the rules ran, from what they could not see (an unreadable file,
    the transaction log): the finding keeps its type and evidence, and its severity is capped at
    the cause's ceiling (`findings.CAUSE_CEILING`), never raised.
    """
    finding = F.col("findings")
    ceiling = CAUSE_CEILING[cause]
    worse = SEVERITY_ORDER[: SEVERITY_ORDER.index(ceiling)]
    severity = F.when(finding["severity"].isin(*worse), F.lit(ceiling)).otherwise(
        finding["severity"]
    )
    return finding.withField("severity", severity).withField("cause", F.lit(cause))


def severity_column(code: Column, levels: dict[int, str], cause: Column | None) -> Column:
    """`findings.severity_for` as a column: the level of the type `code`, lowered by `cause`.

    Args:
        code: the finding type's code.
        levels: the configured severity of each code.
        cause: the cause column, or None for a rule without causes.
    """
    severity = lookup(code, levels)
    if cause is None:
        return severity
    for cause_name in CAUSE_CEILING:
        lowered = {c: severity_for(level, cause_name) for c, level in levels.items()}
        if lowered != levels:
            severity = F.when(cause == cause_name, lookup(code, lowered)).otherwise(severity)
    return severity


def _build(
    code: Column,
    kinds: list[FindingType],
    config: AuditConfig,
    run_id: str,
    *,
    identity: list[Column],
    values: dict[str, Column],
    severity: Column | None = None,
    type_values: Callable[[FindingType], dict[str, Column]] | None = None,
) -> Column:
    """The one finding builder: a FINDINGS struct whose type is `kinds[code]`.

    What differs by type (name, severity, spec_ref, detail template, evidence keys) is looked up
    by code in literal tables, and the values the templates and evidence name are shared, so the
    expression stays small however many types one struct covers.
    """
    filled = dict(values)
    filled["run_id"] = F.lit(run_id)
    if "batch_timestamp" in values and "batch_time" not in values:
        # The same instant as a timestamp, derived here so that every finding has both alike.
        filled["batch_time"] = F.timestamp_millis(values["batch_timestamp"])
    filled["finding_type"] = lookup(code, {k.code: k.name for k in kinds})
    filled["spec_ref"] = lookup(code, {k.code: k.spec_ref for k in kinds})
    if severity is None:
        levels = {k.code: configured_severity(k.name, config) for k in kinds}
        severity = severity_column(code, levels, values.get("cause"))
    filled["severity"] = severity
    if "kafka_error" not in values:
        filled["kafka_error"] = lookup(
            code, {k.code: k.kafka_error for k in kinds if k.kafka_error is not None}
        )

    # The values the types' templates name, each given once (by name and column); a template
    # picks its own by position (`%3$s`), so one format_string serves every type.
    arguments: dict[tuple[str, str], Column] = {}
    formats: dict[int, str] = {}
    # Evidence by name; a name whose column differs between types is chosen by code.
    evidence_columns: dict[str, dict[str, tuple[Column, list[int]]]] = {}
    evidence_names: dict[int, list[str]] = {}
    for kind in kinds:
        available = {**filled, **(type_values(kind) if type_values else {})}
        positions = []
        for name in _PLACEHOLDER.findall(kind.detail):
            key = (name, str(available[name]))
            arguments.setdefault(key, available[name])
            positions.append(f"%{list(arguments).index(key) + 1}$s")
        pieces = iter(positions)
        formats[kind.code] = _PLACEHOLDER.sub(
            lambda _m, pieces=pieces: next(pieces), kind.detail.replace("%", "%%")
        )
        if "evidence" not in values and kind.evidence:
            evidence_names[kind.code] = list(kind.evidence)
            for name in kind.evidence:
                by_column = evidence_columns.setdefault(name, {})
                by_column.setdefault(str(available[name]), (available[name], []))[1].append(
                    kind.code
                )
    none = F.lit("none")
    strings = [F.ifnull(c.cast("string"), none) for c in arguments.values()]
    filled["detail"] = F.printf(lookup(code, formats), *strings)
    if evidence_names:
        entries = []
        for name, by_column in evidence_columns.items():
            value = F.lit(None)
            for column, codes in by_column.values():
                value = (
                    column
                    if len(by_column) == 1
                    else F.when(code.isin(*codes), column).otherwise(value)
                )
            entries += [F.lit(name), value.cast("string")]
        wanted = lookup(code, evidence_names)
        filled["evidence"] = F.when(
            wanted.isNotNull(),
            F.map_filter(
                F.create_map(*entries),
                lambda k, v: v.isNotNull() & F.array_contains(wanted, k),
            ),
        )
    filled["finding_id"] = F.sha2(
        F.concat_ws("|", filled["finding_type"], *[c.cast("string") for c in identity]), 256
    ).substr(1, 32)
    return F.struct(
        *[
            cast(filled[f.name] if f.name in filled else F.lit(None), f.dataType).alias(f.name)
            for f in FINDINGS.fields
        ]
    )
