"""Drawing figures writes nothing outside the output folder: matplotlib's settings and font cache
go to a folder inside it, removed before the command ends, unless the user set MPLCONFIGDIR."""

from __future__ import annotations

from pathlib import Path

import pytest

from hadar.outputs_schema import RUN_FIGURES
from hadar.simulator.output import RUN_FILES
from tests.fixtures.cli import hadar_cli

pytest.importorskip("matplotlib")


def _all_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _home_env(home: Path, mplconfigdir: str = "") -> dict[str, str]:
    """A fresh HOME with the XDG folders matplotlib would otherwise use under it."""
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "MPLCONFIGDIR": mplconfigdir,
    }


def test_simulate_figures_write_nothing_in_home(tmp_path: Path) -> None:
    home, out = tmp_path / "home", tmp_path / "out"
    home.mkdir()
    res = hadar_cli(
        "simulate", "--cluster", "lab-5node", "--workload", "M-1", "--policy", "hadar",
        "--figures", "--no-progress", "--out", str(out),
        cwd=tmp_path, env=_home_env(home),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert _all_under(home) == []
    assert _all_under(out) == sorted([*RUN_FILES, *RUN_FIGURES])


def test_compare_figures_write_nothing_in_home(tmp_path: Path) -> None:
    home, out = tmp_path / "home", tmp_path / "out"
    home.mkdir()
    res = hadar_cli(
        "compare", "--cluster", "lab-5node", "--workload", "M-1", "--policies", "hadar,gavel",
        "--out", str(out),
        cwd=tmp_path, env=_home_env(home),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert _all_under(home) == []
    assert not [n for n in _all_under(out) if "matplotlib" in n]
    assert (out / "fig3_gru.png").is_file()


def test_a_users_mplconfigdir_is_used(tmp_path: Path) -> None:
    home, out, mine = tmp_path / "home", tmp_path / "out", tmp_path / "mpl"
    home.mkdir()
    res = hadar_cli(
        "simulate", "--cluster", "lab-5node", "--workload", "M-1", "--policy", "hadar",
        "--figures", "--no-progress", "--out", str(out),
        cwd=tmp_path, env=_home_env(home, str(mine)),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert _all_under(home) == []
    assert any(n.startswith("fontlist") for n in _all_under(mine))
    assert _all_under(out) == sorted([*RUN_FILES, *RUN_FIGURES])
