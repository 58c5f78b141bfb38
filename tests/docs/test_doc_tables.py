"""Result tables in docs/ come from the commands that print them (scripts/doc_tables.py), and
what the docs say a mode counts is what it counts."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest

from hadar import api
from tests.fixtures.processes import run_group
from tests.fixtures.script_modules import load_script

ROOT = Path(__file__).resolve().parents[2]


def _doc_tables() -> ModuleType:
    """scripts/doc_tables.py as a module (scripts/ is no package)."""
    return load_script("scripts/doc_tables.py")


GENERATORS = tuple(_doc_tables().GENERATORS)


@pytest.mark.slow
# The physical grid takes about 170 CPU s in two processes (490 s with scripts/test-robust's two
# busy processes on a loaded machine): the suite's 600 s is not enough there.
@pytest.mark.timeout(900)
@pytest.mark.parametrize("generator", GENERATORS)
def test_generated_doc_blocks_match_the_commands(generator: str) -> None:
    """One test per generator, so that the generators run side by side under xdist."""
    res = run_group(  # its pool workers end with it on a timeout
        [sys.executable, str(ROOT / "scripts" / "doc_tables.py"), "--check", "--only", generator],
        timeout=880,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.strip() == "up to date"


def test_every_generated_block_in_the_docs_has_its_generator(tmp_path: Path) -> None:
    tables = _doc_tables()
    assert tables.unmatched() == []
    assert set(tables.BLOCKS) == set(tables.GENERATORS)
    assert set(tables.doc_blocks()) == {b for names in tables.BLOCKS.values() for b in names}
    # the same docs with a block no generator makes, and without one a generator makes
    for doc in tables.DOCS:
        (tmp_path / doc).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / doc).write_text((ROOT / doc).read_text())
    stray = "<!-- generated: stray (scripts/doc_tables.py) -->\nx\n<!-- end generated: stray -->\n"
    results = tmp_path / "docs" / "results.md"
    results.write_text(
        tables.BLOCK.sub(
            lambda m: "" if m.group("name") == "reproduce-hadare" else m.group(0),
            results.read_text(),
        )
        + stray
    )
    tables.ROOT = tmp_path
    assert tables.unmatched() == [
        "docs/results.md: no generator for block 'stray'",
        "blocks no doc holds: reproduce-hadare",
    ]


def test_gavel_compatible_mode_counts_restarts_as_the_doc_says() -> None:
    sim = api.simulate("sim-60gpu", "philly-60", "gavel", gavel_compatible=True)
    assert sim.summary["restarts_per_job"] > 0
    row = next(
        line
        for line in (ROOT / "docs" / "baselines.md").read_text().splitlines()
        if line.startswith("| restarts per job |")
    )
    assert "counted the same way" in row and "not counted" not in row
