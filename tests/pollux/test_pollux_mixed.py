"""Pollux on a mixed cluster, as Sia's evaluation ran it: each running job on one GPU type, and
jobs without statistical-efficiency data (the Philly jobs) adapt their GPU count only, which the
outputs say."""

from __future__ import annotations

import json

from hadar import api
from hadar.cli import main
from hadar.commands.common import adaptation_note
from hadar.scenario import load_table
from hadar.workloads import load_workload
from hadar.workloads.pollux import pollux_jobs


def test_each_job_runs_on_one_gpu_type_within_its_range():
    sim = api.simulate("sim-60gpu", "philly-12-elastic", "pollux")
    assert sim.summary["completed"] == 12
    per_run = sim.placements.groupby(["round", "job"])
    assert (per_run.gpu_type.nunique() == 1).all()
    assert sim.placements.batch_size.isna().all()  # no batch adaptation without efficiency data
    jobs = {j.job_id: j for j in sim.records.jobs}
    assert len(jobs) == 12
    gpus = per_run.gpus.first()
    assert (gpus >= 1).all() and gpus.max() <= 8


def test_the_outputs_say_which_jobs_adapt_their_gpu_count_only(tmp_path, capsys):
    workload = ["--workload", "philly-6-elastic", "--round", "360"]
    argv = ["simulate", "--policy", "pollux", *workload, "--no-progress"]
    assert main([*argv, "--out", str(tmp_path / "s")]) == 0
    err = capsys.readouterr().err
    assert "6 of 6 jobs have no statistical-efficiency data" in err
    assert "pollux adapts their GPU count only" in err
    out = tmp_path / "c"
    argv = ["compare", *workload, "--policies", "pollux,tiresias", "--workers", "1"]
    assert main([*argv, "--decision-sizes", "", "--out", str(out)]) == 0
    assert "pollux adapts their GPU count only" in capsys.readouterr().out
    assert "GPU count only" in (out / "compare.md").read_text().split("|")[0]  # above the table
    notes = json.loads((out / "compare.json").read_text())["notes"]
    assert any("6 of 6 jobs" in n for n in notes)


def test_nothing_to_say_without_a_batch_adapting_policy_or_jobs_lacking_data():
    philly = load_workload("philly-6-elastic", load_table(None))
    pollux = pollux_jobs("pollux-1")[:3]
    assert adaptation_note(["hadar", "afs"], philly) is None
    assert adaptation_note(["pollux"], pollux) is None
    said = adaptation_note(["pollux", "hadar"], [*pollux, *philly])
    assert said is not None and said.startswith("note: 6 of 9 jobs")
