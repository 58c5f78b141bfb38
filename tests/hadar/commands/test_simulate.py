"""``hadar simulate`` saving its results: a refused or failed save is one line naming the file,
exit 2, and every previous result file stays as it was (a FIFO or folder planted among them, a
full filesystem, an immutable file; real ones)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.fixtures.cli import hadar_cli, one_error_line
from tests.fixtures.filesystems import fill, immutable, small_tmpfs
from tests.hadar.commands.helpers import folder_entries

CLUSTER = (
    "name: c1\nnodes:\n  - {name: a, count: 2, gpus: {v100: 2}}\n  - {name: b, gpus: {k80: 2}}\n"
)
JOBS = "id,type,gpus,steps,arrival\n0,ResNet-18 (batch size 64),1,50000,0\n"
OLD = {
    name: f"the previous run's {name}\n"
    for name in ("summary.json", "jobs.csv", "rounds.csv", "placements.csv")
}


def _inputs(tmp_path: Path) -> None:
    (tmp_path / "c1.yaml").write_text(CLUSTER)
    (tmp_path / "j.csv").write_text(JOBS)


def _previous_run(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, text in OLD.items():
        (out / name).write_text(text)


def _simulate(tmp_path: Path, out: Path):
    return hadar_cli(
        *("simulate", "--cluster", "c1.yaml", "--workload", "j.csv", "--no-progress"),
        *("--out", str(out)),
        cwd=tmp_path,
    )


@pytest.mark.parametrize("planted", ["FIFO", "folder"])
def test_a_planted_result_file_refuses_the_save_and_keeps_every_previous_file(tmp_path, planted):
    _inputs(tmp_path)
    out = tmp_path / "o6"
    _previous_run(out)
    (out / "rounds.csv").unlink()
    if planted == "FIFO":
        os.mkfifo(out / "rounds.csv")
    else:
        (out / "rounds.csv").mkdir()
    res = _simulate(tmp_path, out)
    assert res.returncode == 2
    assert one_error_line(res) == (
        f"hadar: error: {out}/rounds.csv: is a {planted}, not a regular file; "
        "hadar writes only regular files"
    )  # and no "note: replacing the results" before it
    assert folder_entries(out) == {**OLD, "rounds.csv": planted}


def test_a_full_filesystem_is_one_line_and_keeps_the_previous_results(tmp_path):
    _inputs(tmp_path)
    with small_tmpfs(tmp_path / "full") as fs:
        out = fs / "res"
        _previous_run(out)
        fill(fs)
        res = _simulate(tmp_path, out)
        entries = folder_entries(out)
    assert res.returncode == 2
    line = one_error_line(res)
    assert line.startswith(f"hadar: error: {out}/") and line.endswith(
        ": cannot write: No space left on device"
    )
    assert entries == OLD  # no temporary file, no staging folder left either


def test_an_immutable_result_file_refuses_the_save_before_any_is_replaced(tmp_path):
    _inputs(tmp_path)
    out = tmp_path / "o7"
    _previous_run(out)
    with immutable(out / "rounds.csv"):
        res = _simulate(tmp_path, out)
    assert res.returncode == 2
    assert one_error_line(res) == (
        f"hadar: error: {out}/rounds.csv: cannot replace: Operation not permitted; "
        "nothing was replaced"
    )
    assert folder_entries(out) == OLD


@pytest.mark.parametrize("command", ["simulate", "compare"])
def test_job_types_that_look_like_markup_are_printed_as_text(tmp_path: Path, command: str) -> None:
    # the note on estimated throughputs names the job types: "[/]" stopped both commands with a
    # rich MarkupError after the simulation, before anything was saved
    (tmp_path / "c1.yaml").write_text(CLUSTER)
    (tmp_path / "w.csv").write_text("id,type,gpus,steps\n0,[/],1,100\n1,[bold],1,100\n")
    (tmp_path / "t.json").write_text('{"v100": {"(\\"[/]\\", 1)": 10, "(\\"[bold]\\", 1)": 10}}')
    args = ["--cluster", "c1.yaml", "--workload", "w.csv", "--throughputs", "t.json"]
    res = hadar_cli(command, *args, "--out", "out", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    assert "[/]" in res.stdout + res.stderr and "[bold]" in res.stdout + res.stderr
    assert (
        tmp_path / "out" / ("summary.json" if command == "simulate" else "compare.csv")
    ).is_file()
