"""Readable figures: the completion CDF on a log time axis with each median in its legend and a
drop line, titles naming workload, cluster and seed, and hadar simulate's own figure set."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from matplotlib.image import imread

from hadar.cli import main
from hadar.plots.figures import completion_figure, median_hours
from hadar.plots.simulation import RUN_FIGURES, finish_times, scenario_text


def test_median_is_when_half_of_all_jobs_had_finished():
    assert median_hours([0.1, 0.2, 0.3, 0.4], 4) == 0.2
    assert median_hours([0.1, 0.2, 0.3], 5) == 0.3  # 3 of 5 is the first count >= 50 %
    assert median_hours([0.1, 0.2], 5) is None  # fewer than half finished
    assert median_hours([], 0) is None


def test_completion_cdf_is_on_a_log_axis_with_medians_in_the_legend():
    fig = completion_figure(
        {"hadar": [600, 1200, 1800, 36000], "gavel": [60, 7200]},
        {"hadar": 4, "gavel": 5},
        title=scenario_text("philly-4", "sim-60gpu", 3),
    )
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    assert ax.get_title() == "philly-4 on sim-60gpu, seed 3"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["hadar: median 20 min", "gavel: median not reached"]
    left, right = ax.get_xlim()
    assert (
        0 < left <= 60 / 3600 and right >= 10
    )  # the first and the last completion are on the axis
    # one dotted drop line from the x axis to 50 % at the median (20 min), for hadar only
    drops = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert len(drops) == 1
    assert np.allclose(drops[0].get_xdata(), [1 / 3, 1 / 3]) and list(drops[0].get_ydata()) == [
        0.0,
        0.5,
    ]


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    out = tmp_path_factory.mktemp("sim") / "run"
    assert (
        main(
            [
                "simulate",
                "--workload",
                "philly-12",
                "--seed",
                "2",
                "--no-progress",
                "--figures",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    return out


def test_simulate_writes_its_figure_set(simulated):
    for name in RUN_FIGURES:
        image = imread(simulated / name)
        assert image.shape[0] > 300 and image.shape[1] > 600, name
        assert image[..., :3].std() > 0.05, f"{name} is blank"


def test_the_figures_are_drawn_from_the_run_files(simulated):
    finish, total = finish_times(simulated)
    summary = json.loads((simulated / "summary.json").read_text())
    assert total == summary["jobs"] == 12 and len(finish) == summary["completed"]
    with (simulated / "jobs.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    first = min(float(r["arrival"]) for r in rows)
    assert sorted(finish) == sorted(float(r["finish"]) - first for r in rows)
