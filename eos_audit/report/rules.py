"""The rules a report's findings cite (`findings.spec_ref`), carried inside the report.

`spec_ref` names a section of the rules document, `docs/rules.md#<anchor>`. A report is shared:
attached to a ticket, mailed, opened on another machine, where a link to the reporting machine's
copy of the document (a `file:` URI inside its site-packages) leads nowhere. So the report holds
the text of each rule it cites (`rule_sections`, from `eos_audit.rules_doc`), and a finding links
to it inside the page (`rule_href`).
"""

from __future__ import annotations

from collections.abc import Iterable

from eos_audit import rules_doc


def rule_id(spec_ref: str) -> str:
    """The id of a rule's section in the report: `rule-<anchor>`."""
    return "rule-" + spec_ref.rpartition("#")[2]


def rule_sections(spec_refs: Iterable[str | None]) -> dict[str, str]:
    """The Markdown text of each rule cited, by `spec_ref`, in the document's order of citing.

    A reference the packaged document has no section for (an http(s) URL, an anchor of a newer
    version) is left out: its finding shows the reference as text, or links the URL.
    """
    sections = {}
    for spec_ref in spec_refs:
        if not spec_ref or spec_ref in sections or spec_ref.startswith(("https://", "http://")):
            continue
        text = rules_doc.section(spec_ref)
        if text is not None:
            sections[spec_ref] = text
    return sections


def rule_href(spec_ref: str | None, carried: dict[str, str]) -> str | None:
    """The link target of a rule reference, or None when there is nothing to link to.

    Args:
        spec_ref: `docs/rules.md#<anchor>`, as `findings.spec_ref` holds it.
        carried: the rules the report carries (`rule_sections`).

    Returns:
        `#rule-<anchor>` for a rule the report carries; an http(s) reference as it is; None (the
        reference is shown as text) otherwise.
    """
    if not spec_ref:
        return None
    if spec_ref.startswith(("https://", "http://")):
        return spec_ref
    return "#" + rule_id(spec_ref) if spec_ref in carried else None
