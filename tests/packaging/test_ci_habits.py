"""CI runs the habits (lint, format, types) before the tests, and the type checker is set up to
be strict where it matters: no blanket ignores, every ``type: ignore`` names its error code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[2]


def _commands(script: Path) -> list[str]:
    return [
        ln.strip()
        for ln in script.read_text().splitlines()
        if ln.strip() and not ln.lstrip().startswith("#")
    ]


def test_ci_runs_scripts_check_before_the_tests():
    lines = _commands(ROOT / ".ci" / "run")
    assert "scripts/check" in lines
    # the test command, possibly after environment assignments (HADAR_REQUIRE_SLURM=1 scripts/test)
    test_line = next(
        i for i, ln in enumerate(lines) if re.match(r"(?:[A-Z_]+=\S*\s+)*scripts/test\b", ln)
    )
    assert lines.index("scripts/check") < test_line


def test_scripts_check_runs_lint_format_and_types():
    text = "\n".join(_commands(ROOT / "scripts" / "check"))
    assert re.search(r"ruff check \.", text)
    assert re.search(r"ruff format --check\b.* \.", text)
    assert re.search(r"\bmypy\b", text)


def test_scripts_check_runs_the_speed_guard():
    text = "\n".join(_commands(ROOT / "scripts" / "check"))
    assert re.search(r"benchmarks/speed_guard\.py --check", text)


# The options --strict turns on; setting one to false (globally or for a module) relaxes it.
STRICT_OPTIONS = (
    "warn_unused_configs",
    "disallow_any_generics",
    "disallow_subclassing_any",
    "disallow_untyped_calls",
    "disallow_untyped_defs",
    "disallow_incomplete_defs",
    "check_untyped_defs",
    "disallow_untyped_decorators",
    "warn_redundant_casts",
    "warn_unused_ignores",
    "warn_return_any",
    "no_implicit_reexport",
    "strict_equality",
)


def test_mypy_is_strict_has_no_blanket_ignores_and_the_test_extra_installs_it():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    mypy = project["tool"]["mypy"]
    assert mypy["strict"] is True
    assert "ignore_missing_imports" not in mypy and "ignore_errors" not in mypy
    assert "ignore-without-code" in mypy["enable_error_code"]
    for override in [mypy, *mypy.get("overrides", [])]:
        relaxed = [o for o in STRICT_OPTIONS if override.get(o) is False]
        assert not relaxed, f"{override.get('module', '[tool.mypy]')}: {relaxed}"
    for override in mypy.get("overrides", []):
        assert "ignore_errors" not in override
        assert all(
            m != "*" and not m.startswith(("hadar", "nodes", "tracker")) for m in override["module"]
        )
    extra = " ".join(project["project"]["optional-dependencies"]["test"])
    for tool in ("mypy", "pandas-stubs", "types-PyYAML", "types-paramiko", "boto3-stubs"):
        assert re.search(rf"\b{re.escape(tool)}[><=]", extra), tool
    assert "format" in project["tool"]["ruff"]
