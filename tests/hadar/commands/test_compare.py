"""``hadar compare`` end to end on philly-48 / sim-60gpu: files, figures, parallel == serial."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from hadar.cli import main

POLICIES = ["hadar", "gavel", "tiresias", "yarn-cs"]
RUN_FILES = ("summary.json", "jobs.csv", "rounds.csv", "placements.csv")
PNGS = ("fig3_gru.png", "fig4_completion.png", "fig5_decision_time.png", "occupancy_hadar.png")
TIMING = ("avg_decision_s", "median_decision_s", "max_decision_s")


def _compare(out: Path, jobs: int) -> int:
    return main(
        [
            "compare",
            "--cluster",
            "sim-60gpu",
            "--workload",
            "philly-48",
            "--policies",
            ",".join(POLICIES),
            "--out",
            str(out),
            "--workers",
            str(jobs),
            "--decision-sizes",
            "32,64",
        ]
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("compare")
    assert _compare(base / "parallel", 2) == 0
    assert _compare(base / "serial", 1) == 0
    return base / "parallel", base / "serial"


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_writes_tables_run_files_and_four_pngs(runs):
    out, _ = runs
    for name in ("compare.csv", "compare.json", "decision_times.csv", *PNGS):
        assert (out / name).stat().st_size > 0, name
    for png in PNGS:
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for p in POLICIES:
        for f in RUN_FILES:
            assert (out / p / f).is_file(), (p, f)
    rows = _rows(out / "compare.csv")
    assert [r["policy"] for r in rows] == POLICIES
    assert all(r["completed"] == r["jobs"] == "48" for r in rows)
    assert float(rows[0]["ttd_s_ratio"]) == 1.0
    for r in rows:
        assert float(r["ttd_s_ratio"]) == pytest.approx(float(r["ttd_s"]) / float(rows[0]["ttd_s"]))
        # delay, efficiency and fairness columns: in range and consistent with each other
        assert float(r["avg_queueing_s"]) >= 0 and 0 < float(r["work_efficiency"]) <= 1 + 1e-9
        assert (
            0 < float(r["rho_median"]) <= float(r["rho_max"]) and 0 <= float(r["rho_above_1"]) <= 1
        )
    meta = json.loads((out / "compare.json").read_text())
    assert meta["reference"] == "hadar" and meta["mode"] == "normal"
    assert {(d["policy"], d["jobs"]) for d in meta["decision_times"]} == {
        (p, n) for p in ("hadar", "gavel") for n in (32, 64)
    }


def test_parallel_equals_serial(runs):
    par, ser = runs
    a, b = _rows(par / "compare.csv"), _rows(ser / "compare.csv")
    drop = {k for k in a[0] if k.startswith(TIMING)}
    assert [{k: v for k, v in r.items() if k not in drop} for r in a] == [
        {k: v for k, v in r.items() if k not in drop} for r in b
    ]
    for p in POLICIES:
        for f in ("jobs.csv", "placements.csv"):
            assert (par / p / f).read_bytes() == (ser / p / f).read_bytes(), (p, f)


def test_bad_policy_list_is_one_line_exit_2(tmp_path, capsys):
    code = main(
        [
            "compare",
            "--workload",
            "philly-8",
            "--policies",
            "hadar,gavel,slurm",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown policy 'slurm'" in err[0]
