"""``hadar experiment`` runs the elastic-era policies (Pollux, AFS-L, AFS-het, AFS-P, Themis):
every cell of a small physical grid and of a small load sweep finishes all its jobs."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from hadar.cli import main

POLICIES = ("pollux", "afs", "afs-het", "afs-p", "themis")


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_the_physical_grid_runs_every_policy(tmp_path):
    argv = ["experiment", "physical", "--clusters", "lab-5node", "--mixes", "M-1,M-3"]
    argv += ["--policies", ",".join(POLICIES), "--rounds", "360", "--workers", "1"]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    rows = _rows(tmp_path / "results.csv")
    assert sorted((r["policy"], r["mix"]) for r in rows) == sorted(
        (p, m) for p in POLICIES for m in ("M-1", "M-3")
    )
    assert all(r["completed"] == r["jobs"] and float(r["ttd_s"]) > 0 for r in rows)


@pytest.mark.parametrize("policy", POLICIES)
def test_the_load_sweep_runs_every_policy(policy, tmp_path):
    argv = ["experiment", "load-sweep", "--policies", policy, "--num-jobs", "6"]
    argv += ["--window", "0:6", "--rates", "4", "--workers", "1", "--out", str(tmp_path)]
    assert main(argv) == 0
    (row,) = _rows(tmp_path / "load_sweep.csv")
    assert row["policy"] == policy and float(row["avg_jct_s"]) > 0
