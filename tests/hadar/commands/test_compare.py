"""``hadar compare`` end to end on philly-48 / sim-60gpu: files, figures, parallel == serial."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

from hadar.cli import main
from tests.fixtures.filesystems import fill, small_tmpfs

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


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--policies", "hadar,,gavel", "--policies: an empty item between commas"),
        ("--policies", "hadar,gavel,", "--policies: an empty item between commas"),
        ("--policies", " , ", "--policies: nothing given"),
        ("--policies", "hadar, hadar", "--policies: 'hadar' given twice"),
        ("--decision-sizes", "4,4", "--decision-sizes: '4' given twice"),
        ("--decision-sizes", "4,04", "--decision-sizes: a size is given twice"),
        ("--decision-sizes", "4,,8", "--decision-sizes: an empty item between commas"),
    ],
)
def test_a_comma_list_with_an_empty_or_repeated_item_is_one_line_exit_2(
    tmp_path, capsys, flag, value, message
):
    args = ["compare", "--workload", "philly-8", "--out", str(tmp_path / "out"), flag, value]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not (tmp_path / "out").exists()


# -- a comparison's results are one save ------------------------------------------------------
PREVIOUS = [
    *("compare.csv", "compare.json", "decision_times.csv", "compare.md", *PNGS),
    *(f"{p}/{f}" for p in ("hadar", "gavel") for f in RUN_FILES),
]


def _previous_comparison(out: Path) -> None:
    for name in PREVIOUS:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(f"the previous comparison's {name}\n")


def _entries(out: Path) -> dict[str, str]:
    """Every entry below ``out``, hidden ones too: a file's text, a FIFO's kind."""
    return {
        str(p.relative_to(out)): p.read_text() if p.is_file() else "FIFO"
        for p in sorted(out.rglob("*"))
        if not p.is_dir()
    }


def _small_compare(out: Path) -> int:
    return main(
        [
            *("compare", "--workload", "philly-8", "--policies", "hadar,gavel"),
            *("--workers", "1", "--decision-sizes", "32", "--decision-repeats", "1"),
            *("--out", str(out)),
        ]
    )


def test_a_fifo_in_one_policys_folder_refuses_the_comparison_and_keeps_every_file(tmp_path, capsys):
    out = tmp_path / "out"
    _previous_comparison(out)
    (out / "gavel" / "rounds.csv").unlink()
    os.mkfifo(out / "gavel" / "rounds.csv")
    before = _entries(out)
    assert _small_compare(out) == 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        f"hadar: error: {out}/gavel/rounds.csv: is a FIFO, not a regular file; "
        "hadar writes only regular files"
    ]
    assert "simulating" not in captured.out  # refused before any work
    assert _entries(out) == before  # hadar/ and the tables too


def test_a_full_filesystem_keeps_the_previous_comparison_whole(tmp_path, capsys):
    with small_tmpfs(tmp_path / "fs", size="1m") as fs:
        out = fs / "out"
        _previous_comparison(out)
        before = _entries(out)
        fill(fs)
        code = _small_compare(out)
        after = _entries(out)
    assert code == 2
    assert after == before  # no policy's files, no table, no temporary file or staging folder
    assert capsys.readouterr().err.strip().splitlines() == [
        f"hadar: error: {out}/hadar/summary.json: cannot write: No space left on device"
    ]
