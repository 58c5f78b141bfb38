"""The wheel's top-level import packages are a deliberate list (docs/install.md, "Top-level
package names"): a package added to ``pyproject.toml`` without being named there fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _included() -> set[str]:
    text = (ROOT / "pyproject.toml").read_text()
    found = re.search(r"\[tool\.setuptools\.packages\.find\]\s*include\s*=\s*\[([^\]]*)\]", text)
    assert found, "pyproject.toml: no [tool.setuptools.packages.find] include list"
    return {name.rstrip("*") for name in re.findall(r'"([^"]+)"', found.group(1))}


def _documented() -> set[str]:
    lines = (ROOT / "docs" / "install.md").read_text().splitlines()
    marker = next(i for i, line in enumerate(lines) if "top-level-packages:" in line)
    return set(re.findall(r"`([a-z_]+)`", lines[marker + 1]))


def test_every_top_level_package_is_documented() -> None:
    assert _included() == _documented()


def test_the_listed_packages_are_the_repositorys_top_level_packages() -> None:
    on_disk = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert _included() <= on_disk
    assert {"hadar", "nodes", "tracker"} <= _included()
