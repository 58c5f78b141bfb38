"""``hadar fit-report``: the fits' errors per application, and bad tables as one line (exit 2)."""

from __future__ import annotations

import shutil
from importlib import resources

import pandas as pd

from hadar.cli import main


def _copy(tmp_path, name: str = "yolov3"):
    dest = tmp_path / "traces" / name
    with resources.as_file(
        resources.files("goodput").joinpath(f"data/pollux/traces/{name}")
    ) as src:
        shutil.copytree(src, dest)
    return dest


def test_fit_report_writes_each_applications_error(tmp_path, capsys):
    _copy(tmp_path)
    out = tmp_path / "fit.csv"
    assert main(["fit-report", "--traces", str(tmp_path / "traces"), "--csv", str(out)]) == 0
    table = pd.read_csv(out)
    assert list(table.application) == ["yolov3"] and table.points[0] == 648
    assert 0 < table.median_rel_error[0] <= 0.10 <= table.max_rel_error[0]
    assert "yolov3" in capsys.readouterr().out


def test_a_bad_trace_is_one_line_and_exit_2_before_any_fit(tmp_path, capsys):
    folder = _copy(tmp_path)
    path = folder / "scalability.csv"
    frame = pd.read_csv(path)
    frame.loc[4, "step_time"] = -0.5
    frame.to_csv(path, index=False)
    out = tmp_path / "fit.csv"
    assert main(["fit-report", "--traces", str(folder), "--csv", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"{path}: row[4].step_time: must be a number > 0" in err
    assert not out.exists()


def test_a_traces_folder_the_system_cannot_look_up_is_one_line(tmp_path, capsys):
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    for folder, why in ((tmp_path / ("x" * 300), "file name too long"), (tmp_path / "a", "loop")):
        assert main(["fit-report", "--traces", str(folder)]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line.startswith("hadar: error: --traces: ") and why in line
        assert len(line) < 200
