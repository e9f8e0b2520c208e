"""The finding registry is the one source of a finding type; what else names one agrees with it."""

import datetime as dt
import re
import tomllib
from pathlib import Path

import pytest

from eos_audit import findings
from eos_audit.config import AuditConfig
from eos_audit.findings import (
    FACTS_PER_FINDING,
    REGISTRY,
    RULES_DOC,
    SEVERITY_ORDER,
    SLOT_OF_FACT,
    at_or_above,
    lowered_to,
)
from eos_audit.instants import epoch_micros, epoch_millis, parse_instant
from eos_audit.replay.state import FINDING_EVENT

REPO = Path(__file__).resolve().parents[1]
# A document named by the code, and every anchor written after it ("docs/rules.md#a, #b and #c").
CITED = re.compile(r"(rules|replay_semantics)\.md((?:#[\w-]+(?:,\s*|\s+and\s+|\s+or\s+)?)+)")


def github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a document's headings (lower case, punctuation dropped, spaces
    to hyphens, a repeated one suffixed -1, -2, ...), code blocks left out."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if in_code or not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def test_github_anchors_follow_githubs_rule():
    text = "# Top\n## Duplicate batch\n```\n# not a heading\n```\n## Causes and severity (A, B)\n"
    text += "## `--acks` input\n## Duplicate batch\n"
    assert github_anchors(text) == {
        "top", "duplicate-batch", "causes-and-severity-a-b", "--acks-input", "duplicate-batch-1",
    }  # fmt: skip


def test_every_registry_anchor_is_a_heading_of_the_rules_document():
    headings = github_anchors((REPO / RULES_DOC).read_text(encoding="utf-8"))
    assert len(headings) > len(REGISTRY)
    assert sorted(t.anchor for t in REGISTRY.values() if t.anchor not in headings) == []


def test_every_rules_and_replay_semantics_anchor_the_code_writes_exists():
    headings = {
        doc: github_anchors((REPO / "docs" / f"{doc}.md").read_text(encoding="utf-8"))
        for doc in ("rules", "replay_semantics")
    }
    cited = [
        (str(path.relative_to(REPO)), doc, anchor)
        for path in sorted((REPO / "eos_audit").rglob("*.py"))
        for doc, anchors in CITED.findall(path.read_text(encoding="utf-8"))
        for anchor in re.findall(r"#([\w-]+)", anchors)
    ]
    assert "rules" in {doc for _, doc, _ in cited}
    assert [c for c in cited if c[2] not in headings[c[1]]] == []


def test_the_defaults_file_states_every_registry_severity_and_nothing_else():
    raw = tomllib.loads((REPO / "conf" / "defaults.toml").read_text(encoding="utf-8"))
    assert raw["severity"] == {t.name: t.severity for t in REGISTRY.values()}
    assert AuditConfig().severity == raw["severity"]


def test_the_readme_table_lists_every_type_with_its_default_severity():
    rows = re.findall(r"^\| ([A-Z][A-Z_]+) \| ([A-Z]+)\b", (REPO / "README.md").read_text(), re.M)
    assert dict(rows) == {t.name: t.severity for t in REGISTRY.values()}


def test_registry_entries_are_complete():
    for kind in REGISTRY.values():
        assert re.fullmatch(r"[A-Z][A-Z_]+", kind.name), kind.name
        assert kind.severity in SEVERITY_ORDER, kind.name
        assert kind.raised_by in (
            findings.REPLAY, findings.ACKS, findings.LIST_OFFSETS, findings.PROCESSING
        )
        assert kind.mark in (findings.MARK_GAP, findings.MARK_DUPLICATE, findings.MARK_FENCED,
                             findings.MARK_LOST, findings.MARK_OTHER), kind.name  # fmt: skip
        assert kind.kafka_error is None or kind.kafka_error in findings.KafkaError.__members__
        assert kind.meaning.endswith(".") and kind.previous_offset_means, kind.name
        if kind.raised_by != findings.REPLAY:
            assert kind.facts == (), f"only the kernel fills facts: {kind.name}"


def test_every_fact_has_one_slot_and_a_constant_the_kernel_can_use():
    for kind in REGISTRY.values():
        for slot, name in enumerate(kind.facts):
            assert SLOT_OF_FACT[name] == slot
            assert getattr(findings, f"FACT_{name.upper()}") == slot
    constants = {k for k, v in vars(findings).items() if k.startswith("FACT_") and type(v) is int}
    assert constants == {f"FACT_{name.upper()}" for name in SLOT_OF_FACT}
    # The module's comment lists them for the reader; it must name the same constants.
    assert set(re.findall(r"FACT_[A-Z_]+", Path(findings.__file__).read_text())) >= constants
    # The kernel's finding record has a slot for every fact of the widest type.
    assert FINDING_EVENT["facts"].shape == (FACTS_PER_FINDING,)


def test_one_severity_order():
    assert SEVERITY_ORDER == ("CRITICAL", "ERROR", "WARNING", "INFO")
    assert at_or_above("critical") == ("CRITICAL",)
    assert at_or_above("warning") == ("CRITICAL", "ERROR", "WARNING")
    assert [lowered_to(s, "WARNING") for s in SEVERITY_ORDER] == [
        "WARNING", "WARNING", "WARNING", "INFO",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "micros"),
    [
        ("1970-01-01T00:00:01Z", 1_000_000),
        ("1970-01-01 00:00:01", 1_000_000),  # no zone: UTC
        ("1970-01-01T01:00:01+01:00", 1_000_000),
        ("1970-01-01T00:00:00.001999Z", 1_999),
        (" 2026-11-21T03:00:00Z ", 1_795_230_000_000_000),
    ],
)
def test_one_iso_parser(text, micros):
    assert epoch_micros(text) == micros
    assert epoch_millis(text) == micros // 1000  # rounded down, exactly
    assert parse_instant(text).tzinfo is not None


def test_the_iso_parser_reads_naive_datetimes_as_utc_and_rejects_other_text():
    naive = dt.datetime(2026, 11, 21, 3)
    assert parse_instant(naive) == naive.replace(tzinfo=dt.UTC)
    assert epoch_millis(naive) == 1_795_230_000_000
    with pytest.raises(ValueError):
        parse_instant("yesterday")
