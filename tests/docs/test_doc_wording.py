"""The user docs (README.md, CONTRIBUTING.md, docs/*.md) name a feature, never the tracker issue
that asked for it: a reader cannot resolve "issue 27", but can "the tail guard"."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ISSUE_NUMBER = re.compile(r"\bissues?\s+#?\d+|\bissue\s*#\d+", re.IGNORECASE)
"""``issue 27``, ``Issue 11``, ``issue #29``, ``issues 2, 3``, ``issue#4``."""


def user_docs(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", root / "CONTRIBUTING.md", *sorted((root / "docs").glob("*.md"))]


def issue_numbers(files: list[Path], root: Path = ROOT) -> list[str]:
    """``"FILE:LINE: TEXT"`` for each mention of an issue by number."""
    return [
        f"{f.relative_to(root)}:{n}: {m.group(0)}"
        for f in files
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1)
        for m in ISSUE_NUMBER.finditer(line)
    ]


def test_no_user_doc_names_an_issue_by_number() -> None:
    assert issue_numbers(user_docs()) == []


def test_the_check_catches_each_spelling(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("The tail guard (issue 27) and Issue #29.\n")
    (tmp_path / "CONTRIBUTING.md").write_text("Filed as issues 2, 3 and 9.\n")
    (tmp_path / "docs" / "results.md").write_text(
        "# Results\n\nThe tail guard, the issue tracker, 27 issues, tissue 4.\n\nissue#11\n"
    )
    assert issue_numbers(user_docs(tmp_path), tmp_path) == [
        "README.md:1: issue 27",
        "README.md:1: Issue #29",
        "CONTRIBUTING.md:1: issues 2",
        "docs/results.md:5: issue#11",
    ]
