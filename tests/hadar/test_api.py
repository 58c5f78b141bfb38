"""The Python API (``from hadar import simulate, compare``): names or objects in, the CLI's
schema out as DataFrames, and the CLI's files are exactly these tables."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from estimators.throughput import GavelThroughputTable
from hadar import compare, simulate
from hadar.cli import main
from hadar.clusters import load_cluster
from hadar.core.errors import InputError
from hadar.policy import make_policy
from hadar.simulator.output import (
    CSV_DECIMALS,
    ELASTIC_PLACEMENT_COLUMNS,
    ELASTIC_ROUND_COLUMNS,
    JOB_COLUMNS,
    PLACEMENT_COLUMNS,
    PROGRESS_JOB_COLUMNS,
    ROUND_COLUMNS,
)
from hadar.workloads import load_workload


def test_simulate_by_name_returns_the_cli_files_as_tables(tmp_path):
    sim = simulate("sim-60gpu", "philly-24", "hadar", seed=2)
    assert list(sim.jobs.columns) == JOB_COLUMNS + PROGRESS_JOB_COLUMNS
    assert ((sim.jobs.step_sum - sim.jobs.target).abs() <= 1e-6 * sim.jobs.target).all()
    assert list(sim.rounds.columns) == ROUND_COLUMNS + ELASTIC_ROUND_COLUMNS
    assert list(sim.placements.columns) == PLACEMENT_COLUMNS + ELASTIC_PLACEMENT_COLUMNS
    assert sim.rounds["goodput"].isna().all()  # no elastic job in philly-24
    assert len(sim.jobs) == 24 and sim.jobs["jct"].notna().all()  # jct is a column, not dropped
    assert (sim.jobs["jct"] == sim.jobs["finish"] - sim.jobs["arrival"]).all()
    assert sim.summary["avg_jct_s"] == pytest.approx(sim.jobs["jct"].mean())
    out = tmp_path / "cli"
    assert (
        main(
            [
                "simulate",
                "--workload",
                "philly-24",
                "--seed",
                "2",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    on_disk = json.loads((out / "summary.json").read_text())
    for key in ("ttd_s", "avg_jct_s", "median_jct_s", "gru", "rounds", "completed"):
        assert on_disk[key] == sim.summary[key]
    for name, frame in (("jobs", sim.jobs), ("placements", sim.placements)):
        pd.testing.assert_frame_equal(
            pd.read_csv(out / f"{name}.csv"), frame.round(CSV_DECIMALS), check_dtype=False
        )


def test_objects_and_names_give_the_same_run():
    table = GavelThroughputTable.bundled()
    by_name = simulate("sim-60gpu", "philly-24", "gavel", seed=5)
    jobs = load_workload("philly-24", table, seed=5)
    by_object = simulate(load_cluster("sim-60gpu"), jobs, make_policy("gavel"), throughputs=table)
    pd.testing.assert_frame_equal(by_name.jobs, by_object.jobs)
    pd.testing.assert_frame_equal(by_name.placements, by_object.placements)


def test_compare_tabulates_ratios_against_the_reference():
    result = compare("sim-60gpu", "philly-24", policies=("gavel", "hadar"), seed=1)
    assert result.reference == "hadar" and list(result.table.index) == ["gavel", "hadar"]
    assert result.table.loc["hadar", "avg_jct_s_ratio"] == 1.0
    gavel = result.runs["gavel"].summary
    assert result.table.loc["gavel", "ttd_s_ratio"] == pytest.approx(
        gavel["ttd_s"] / result.runs["hadar"].summary["ttd_s"]
    )


def test_bad_arguments_are_one_line_input_errors():
    with pytest.raises(InputError, match="nope"):
        simulate(policy="nope")
    with pytest.raises(InputError, match="not one of the policies"):
        compare(policies=("gavel",), reference="hadar")


def test_import_hadar_stays_cheap():
    code = "import sys, hadar; print(sorted(m for m in ('hadar.api', 'pandas', 'torch') if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_summary_json_records_every_knob_the_policy_ran_with(tmp_path) -> None:
    typed = simulate(workload="philly-8", policy="hadar", policy_options={"max_rho": "2"})
    default = simulate(workload="philly-8", policy="hadar")
    typed_knobs = json.loads((typed.save(tmp_path / "a") / "summary.json").read_text())
    default_knobs = json.loads((default.save(tmp_path / "b") / "summary.json").read_text())
    assert typed_knobs["policy_options"]["max_rho"] == "2"
    assert default_knobs["policy_options"]["max_rho"] == "1"
    # every knob, not only the typed ones: the two differ in exactly the one typed
    assert set(typed_knobs["policy_options"]) == set(default_knobs["policy_options"])
    differing = {
        k
        for k, v in typed_knobs["policy_options"].items()
        if default_knobs["policy_options"][k] != v
    }
    assert differing == {"max_rho"}


def test_a_policy_object_records_no_knobs(tmp_path) -> None:
    sim = simulate(workload="philly-8", policy=make_policy("gavel"))
    assert json.loads((sim.save(tmp_path) / "summary.json").read_text())["policy_options"] == {}
