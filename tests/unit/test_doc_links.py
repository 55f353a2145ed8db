"""The documents' relative links lead somewhere: the file exists and, for a markdown file, so
does the heading (or `<a id>`) an anchor names (GitHub's anchors: lower case, punctuation
dropped)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = [REPO / "README.md", REPO / "ARCHITECTURE.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(markdown: Path) -> set[str]:
    """The anchors GitHub gives a markdown file's headings, and its explicit `<a id>`s."""
    text = markdown.read_text()
    found = set(re.findall(r'<a id="([^"]+)"', text))
    for heading in re.findall(r"^#+ (.+)$", text, re.M):
        text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
        found.add(text.replace(" ", "-"))
    return found


def test_every_relative_link_resolves() -> None:
    broken = []
    for document in DOCUMENTS:
        text = re.sub(r"```.*?```", "", document.read_text(), flags=re.S)
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto:
            path, _, anchor = target.partition("#")
            linked = (document.parent / path).resolve() if path else document
            if not linked.exists():
                broken.append(f"{document.name}: {target}")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{document.name}: {target} (no such heading)")
    assert broken == []
