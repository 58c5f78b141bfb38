"""Every document and test file the code and the docs cite exists: ``docs/NAME.md`` and
``tests/.../test_NAME.py`` anywhere in the sources, tests, scripts and docs (a moved test leaves no
stale path behind), relative Markdown links between the docs, and the heading each link's
``#anchor`` names (a renamed or moved section leaves no dead link behind)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = (
    "hadar",
    "hadare",
    "primal_dual",
    "tracker",
    "estimators",
    "nodes",
    "baselines",
    "benchmarks",
    "cluster_configs",
    "scripts",
    "tests",
    "docs",
)
DOC_PATH = re.compile(r"\bdocs/[A-Za-z0-9_./-]+\.md\b")
TEST_PATH = re.compile(r"\btests/[A-Za-z0-9_./-]+\.py\b")
MD_LINK = re.compile(r"\]\((?!https?:|mailto:|#)([^)#\s]+\.md)(?:#[^)]*)?\)")
MD_ANCHOR = re.compile(r"\]\(((?:(?!https?:|mailto:)[^)#\s]+\.md)?)#([^)\s]+)\)")
"""A link with an anchor: ``[x](page.md#a-heading)`` or ``[x](#a-heading)`` (group 1 empty)."""
HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.MULTILINE)
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def _texts() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "pyproject.toml"]
    for top in SOURCES:
        files += [
            p
            for p in (ROOT / top).rglob("*")
            if p.suffix in (".py", ".md", ".yaml", ".toml")
            or (p.parent.name == "scripts" and p.is_file())
        ]
    return sorted(f for f in files if f != Path(__file__).resolve())  # this file cites examples


def missing_references(files: list[Path], root: Path = ROOT) -> list[str]:
    """``"FILE: REF"`` for each ``docs/*.md`` or ``tests/*.py`` path (from ``root``) or relative
    Markdown link (from the citing file) that names no file."""
    out = []
    for f in files:
        text = f.read_text(encoding="utf-8", errors="replace")
        refs = {(root / m, m) for m in DOC_PATH.findall(text) + TEST_PATH.findall(text)}
        if f.suffix == ".md":
            refs |= {(f.parent / m, m) for m in MD_LINK.findall(text)}
        out += [
            f"{f.relative_to(root)}: {ref}" for target, ref in sorted(refs) if not target.is_file()
        ]
    return out


def slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, markup and punctuation dropped
    (hyphens and underscores kept), each space a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    return re.sub(r"[^\w\- ]", "", text.replace("`", "")).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings (fenced code skipped), a repeated one as ``NAME-1``..."""
    out: set[str] = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        base, n = slug(heading), 0
        while (name := base if n == 0 else f"{base}-{n}") in out:
            n += 1
        out.add(name)
    return out


def dead_anchors(files: list[Path], root: Path = ROOT) -> list[str]:
    """``"FILE: LINK"`` for each Markdown link whose ``#anchor`` is no heading of the page it
    names (a missing page is :func:`missing_references`' to report)."""
    out = []
    for f in files:
        if f.suffix != ".md":
            continue
        for page, anchor in MD_ANCHOR.findall(f.read_text(encoding="utf-8")):
            target = f.parent / page if page else f
            if target.is_file() and anchor not in anchors(target):
                out.append(f"{f.relative_to(root)}: {page}#{anchor}")
    return out


def test_every_cited_doc_and_test_file_exists():
    assert missing_references(_texts()) == []


def test_every_anchor_names_a_heading():
    assert dead_anchors(_texts()) == []


def test_the_anchor_check_catches_a_renamed_section(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "results.md").write_text(
        "# Results\n\n## Hadar vs Gavel: the `philly-480` runs\n\n```\n# not a heading\n```\n"
        "## Scale\n\n## Scale\n"
    )
    page = tmp_path / "docs" / "guide.md"
    page.write_text(
        "[ok](results.md#hadar-vs-gavel-the-philly-480-runs) [ok](results.md#scale-1)\n"
        "[old](results.md#hadar-vs-gavel-issue-27) [code](results.md#not-a-heading)\n"
        "[here](#guide) [gone](#nothing)\n\n# Guide\n"
    )
    assert dead_anchors([page], tmp_path) == [
        "docs/guide.md: results.md#hadar-vs-gavel-issue-27",
        "docs/guide.md: results.md#not-a-heading",
        "docs/guide.md: #nothing",
    ]


def test_the_check_catches_a_missing_doc(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "cli.md").write_text("# CLI\n")
    code = tmp_path / "mod.py"
    (tmp_path / "tests" / "core").mkdir(parents=True)
    (tmp_path / "tests" / "core" / "test_io.py").write_text("")
    code.write_text(
        '"""Rates: see docs/simulator.md; flags: docs/cli.md; tests/core/test_io.py and\n'
        'tests/cli/test_gone.py."""\n'
    )
    page = tmp_path / "docs" / "guide.md"
    page.write_text(
        "See [the CLI](cli.md#simulate), [the model](simulator.md#rates), [web](https://x.org/a.md).\n"
    )
    assert missing_references([code, page], tmp_path) == [
        "mod.py: docs/simulator.md",
        "mod.py: tests/cli/test_gone.py",
        "docs/guide.md: simulator.md",
    ]
