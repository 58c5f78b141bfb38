"""``hadar experiment physical`` and ``load-sweep`` saving their results: every result file is
checked before the first simulation, and a refused or failed save is one line naming the file,
exit 2, with every previous file as it was (a FIFO planted among them, a full filesystem; real
ones)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hadar.cli import main
from tests.hadar.commands.helpers import folder_entries, previous_results, save_on_a_full_filesystem

PHYSICAL = (
    "results.csv",
    "results.json",
    "fig8_cru.png",
    "fig9_ttd.png",
    "fig10_jct.png",
    "fig12_cru_slots_hadar.png",
)
LOAD_SWEEP = ("load_sweep.csv", "load_sweep.json", "load_sweep.png")


def _physical(out: Path) -> int:
    """One cell: aws-5node, M-1, Hadar, the 360 s round (about a second)."""
    return main(
        [
            *("experiment", "physical", "--clusters", "aws-5node", "--mixes", "M-1"),
            *("--policies", "hadar", "--rounds", "360", "--workers", "1", "--out", str(out)),
        ]
    )


def _load_sweep(out: Path) -> int:
    """One cell: Hadar, 4 jobs at 60 jobs/h."""
    return main(
        [
            *("experiment", "load-sweep", "--policies", "hadar", "--rates", "60"),
            *("--num-jobs", "4", "--window", "0:4", "--workers", "1", "--out", str(out)),
        ]
    )


@pytest.mark.parametrize(
    ("run", "names", "planted", "started"),
    [
        (_physical, PHYSICAL, "results.json", "physical experiment:"),
        (_load_sweep, LOAD_SWEEP, "load_sweep.json", "load sweep:"),
    ],
)
def test_a_planted_fifo_refuses_the_experiment_before_it_runs(
    tmp_path, capsys, run, names, planted, started
):
    out = tmp_path / "out"
    previous_results(out, names, "experiment")
    (out / planted).unlink()
    os.mkfifo(out / planted)
    before = folder_entries(out)
    assert run(out) == 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        f"hadar: error: {out}/{planted}: is a FIFO, not a regular file; "
        "hadar writes only regular files"
    ]
    assert started not in captured.out  # refused before the first simulation
    assert "replacing the results" not in captured.out
    assert folder_entries(out) == before


@pytest.mark.parametrize(
    ("run", "names", "first"),
    [(_physical, PHYSICAL, "results.csv"), (_load_sweep, LOAD_SWEEP, "load_sweep.csv")],
)
def test_a_full_filesystem_keeps_the_previous_results_whole(tmp_path, capsys, run, names, first):
    out, code, before, after = save_on_a_full_filesystem(tmp_path, names, "experiment", run)
    assert code == 2
    assert after == before  # no new file, no temporary file or staging folder left
    assert capsys.readouterr().err.strip().splitlines() == [
        f"hadar: error: {out}/{first}: cannot write: No space left on device"
    ]
