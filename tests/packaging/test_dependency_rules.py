"""The dependency rules (CONTRIBUTING.md, "Dependency rules") hold, cover every package and module,
and catch a break: ``lint-imports`` is what ``scripts/check`` runs."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def _layer_modules(config: dict) -> list[str]:
    (layers,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    return [m.strip() for layer in layers["layers"] for m in layer.replace(":", "|").split("|")]


def test_scripts_check_runs_lint_imports_and_the_test_extra_installs_it():
    assert "lint-imports" in (ROOT / "scripts" / "check").read_text()
    assert any(
        d.startswith("import-linter>=")
        for d in _config()["project"]["optional-dependencies"]["test"]
    )


def test_the_contracts_hold_on_this_tree():
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_every_package_and_hadar_module_is_placed_in_a_layer():
    config = _config()
    roots = set(config["tool"]["importlinter"]["root_packages"])
    shipped = {
        p.rstrip("*") for p in config["tool"]["setuptools"]["packages"]["find"]["include"]
    } - {"cluster_configs"}
    assert shipped == roots
    placed = set(_layer_modules(config))
    assert roots - {"hadar"} <= placed
    hadar_modules = {
        f"hadar.{p.stem}"
        for p in (ROOT / "hadar").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists()
    }
    assert hadar_modules - placed == set(), "modules in no layer (add them to pyproject.toml)"
    assert _layer_modules(config)[-1] == "hadar.core"


def test_an_upward_import_from_the_core_breaks_the_check(tmp_path):
    for package in _config()["tool"]["importlinter"]["root_packages"]:
        shutil.copytree(
            ROOT / package,
            tmp_path / package,
            ignore=shutil.ignore_patterns("__pycache__", "data"),
        )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    jobs = tmp_path / "hadar" / "core" / "jobs.py"
    jobs.write_text(jobs.read_text() + "\nfrom hadar.scheduler import HadarPolicy  # noqa\n")
    result = _lint_imports(tmp_path)
    assert result.returncode != 0
    assert "hadar.core.jobs -> hadar.scheduler" in result.stdout
