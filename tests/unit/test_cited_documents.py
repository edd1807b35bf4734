"""Every document a test cites (a ``*.md`` named in a docstring or comment) is in the repository: a reader of a
test must be able to open what it says its numbers come from, in a fresh clone as anywhere."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import REPO

CITED = re.compile(r"(?<![\w/.-])([\w./-]+\.md)\b")


def _documents() -> set[str]:
    """Every markdown file of the checkout, by its path from the repository (node_modules left out)."""
    return {str(p.relative_to(REPO)) for p in REPO.rglob("*.md") if "node_modules" not in p.parts}


def missing(root: Path = REPO / "tests", documents: set[str] | None = None) -> list[str]:
    """``file:line name`` of every cited document that no markdown file of the repository is (a short name
    such as ``overview.md`` may be any file's tail: ``docs/guide/overview.md``)."""
    docs = _documents() if documents is None else documents
    out = []
    for path in sorted(root.rglob("*.py")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for name in CITED.findall(line):
                name = name.removeprefix("./")
                if not any(d == name or d.endswith("/" + name) for d in docs):
                    out.append(f"{path.relative_to(root)}:{n} {name}")
    return out


def test_every_cited_document_is_in_the_repository() -> None:
    assert missing() == []


def test_a_citation_of_an_absent_document_is_found(tmp_path: Path) -> None:
    absent = "kineto_anatomy" + ".md"  # spelled in two parts, so this file cites nothing absent itself
    (tmp_path / "test_x.py").write_text(f'"""Figures from {absent} §6.1 and docs/guide/overview.md."""\n')
    found = missing(tmp_path, {"docs/guide/overview.md", "README.md"})
    assert found == [f"test_x.py:1 {absent}"]
