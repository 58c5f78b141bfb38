"""Every document and test file the code and the docs cite exists: ``docs/NAME.md`` and
``tests/.../test_NAME.py`` anywhere in the sources, tests, scripts and docs (a moved test leaves no
stale path behind), and relative Markdown links between the docs."""

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


def test_every_cited_doc_and_test_file_exists():
    assert missing_references(_texts()) == []


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
