"""The code cites the repository's own docs, by anchors that exist (issue 12)."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CITED = re.compile(r"docs/(formats|rules)\.md#([a-z0-9-]+)")


def _anchors(doc: str) -> set[str]:
    return set(re.findall(r'<a id="([a-z0-9-]+)"></a>', (REPO / "docs" / f"{doc}.md").read_text()))


def _sources() -> list[Path]:
    return [
        *sorted((REPO / "eos_audit").rglob("*.py")),
        *sorted((REPO / "conf").glob("*.toml")),
    ]


def test_every_cited_anchor_exists():
    anchors = {doc: _anchors(doc) for doc in ("formats", "rules")}
    cited = [
        (path.relative_to(REPO), doc, anchor)
        for path in _sources()
        for doc, anchor in CITED.findall(path.read_text())
    ]
    assert any(doc == "formats" for _, doc, _ in cited)
    assert [c for c in cited if c[2] not in anchors[c[1]]] == []


def test_sources_and_configuration_cite_no_document_outside_the_repository():
    files = [*sorted((REPO / "eos_audit" / "sources").glob("*.py")), REPO / "eos_audit/config.py",
             *sorted((REPO / "conf").glob("*"))]  # fmt: skip
    stale = [str(p.relative_to(REPO)) for p in files if re.search("kafka_rules|§", p.read_text())]
    assert stale == []
