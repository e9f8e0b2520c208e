"""The rules document ships in the package, and every finding's spec_ref resolves in it."""

from pathlib import Path

from eos_audit import rules_doc
from eos_audit.findings import REGISTRY, RULES_DOC

REPO = Path(__file__).resolve().parents[1]


def test_the_packaged_rules_document_is_the_repositorys():
    assert rules_doc.text() == (REPO / RULES_DOC).read_text(encoding="utf-8")
    assert Path(str(rules_doc.location())).is_relative_to(REPO / "eos_audit")


def test_every_spec_ref_names_a_section_of_the_packaged_document():
    for kind in REGISTRY.values():
        assert kind.spec_ref.startswith(f"{RULES_DOC}#")
        section = rules_doc.section(kind.spec_ref)
        assert section is not None and section.startswith("## "), kind.spec_ref


def test_a_section_ends_where_the_next_one_starts():
    section = rules_doc.section("docs/rules.md#duplicate-batch")
    assert section.splitlines()[0] == "## Duplicate batch"
    assert "findDuplicateBatch" in section
    assert "## Sequence gap" not in section
    assert rules_doc.section("docs/rules.md#no-such-rule") is None
