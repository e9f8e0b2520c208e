"""The rules document a finding's `spec_ref` names, as the installed package holds it.

`spec_ref` is `docs/rules.md#<anchor>`: the path of the document in the repository and, since
the package ships it (`eos_audit/docs/rules.md`, package data), also its path inside the installed
package, so it resolves for a wheel user (a Databricks job, a cluster) who has no repository.
`section` gives a rule's text, for the report to show where it links; `location` says where the
document is on this machine.
"""

from __future__ import annotations

import re
from importlib.resources import files
from importlib.resources.abc import Traversable

# Relative to the package, the same as relative to the repository (findings.RULES_DOC).
RULES_RESOURCE = ("docs", "rules.md")
_ANCHOR = re.compile(r'^<a id="([a-z0-9-]+)"></a>\s*$', re.M)


def location() -> Traversable:
    """The packaged rules document (a file of the installed package, or inside its zip)."""
    return files("eos_audit").joinpath(*RULES_RESOURCE)


def text() -> str:
    """The whole rules document (Markdown)."""
    return location().read_text(encoding="utf-8")


def section(spec_ref: str) -> str | None:
    """The Markdown of the section a `spec_ref` names, from its heading to the next anchor.

    Args:
        spec_ref: a finding's `spec_ref` (`docs/rules.md#duplicate-batch`), or a bare anchor.

    Returns:
        The section's text, or None when the document has no such anchor.
    """
    anchor = spec_ref.rpartition("#")[2]
    document = text()
    anchors = list(_ANCHOR.finditer(document))
    for i, match in enumerate(anchors):
        if match.group(1) == anchor:
            end = anchors[i + 1].start() if i + 1 < len(anchors) else len(document)
            return document[match.end() : end].strip()
    return None
