"""Where a finding's rule reference (`findings.spec_ref`) leads from the report.

`spec_ref` names a section of the rules document, `docs/rules.md#<anchor>`. The one function here
turns it into a link to the copy of that document the reader has, which `eos_audit.rules_doc`
locates (inside the installed package, `eos_audit/docs/rules.md`, as a wheel ships it). Change
this function, and only it, to point elsewhere (for example a versioned URL of the published
document).
"""

from __future__ import annotations

from pathlib import Path

from eos_audit import rules_doc


def _document(relative: str) -> Path | None:
    """The local copy of the rules document, or None when the reader has none (or no file).

    Where it is, is `rules_doc`'s to say (inside the installed package; a source checkout has it
    there too). A package imported from a zip has no file to link to.
    """
    if relative != "/".join(rules_doc.RULES_RESOURCE):
        return None
    location = rules_doc.location()
    return location if isinstance(location, Path) and location.is_file() else None


def rule_href(spec_ref: str | None) -> str | None:
    """The link target of a rule reference, or None when there is no document to link to.

    Args:
        spec_ref: `docs/rules.md#<anchor>`, as `findings.spec_ref` holds it.

    Returns:
        A `file:` URI of the local rules document with the rule's anchor; an http(s) reference
        as it is; None (the reference is shown as text) when no copy of the document is found.
    """
    if not spec_ref:
        return None
    if spec_ref.startswith(("https://", "http://")):
        return spec_ref
    path, _, anchor = spec_ref.partition("#")
    document = _document(path)
    if document is None:
        return None
    return document.as_uri() + (f"#{anchor}" if anchor else "")
