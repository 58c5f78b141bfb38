"""The physical mixes as ``hadar run`` loads them: ``--seed`` reaches every job's training seed."""

from __future__ import annotations

from hadar.scenario import load_table
from hadar.workloads import load_workload


def test_the_run_seed_reaches_the_jobs_training_seeds() -> None:
    table = load_table(None)
    first = load_workload("M-5", table, seed=0, size="tiny")
    other = load_workload("M-5", table, seed=3, size="tiny")
    assert [j.spec["seed"] for j in first] == [0, 1, 2, 3, 4]
    assert [j.spec["seed"] for j in other] == [3, 4, 5, 6, 7]
    # only the training seed differs: the jobs, their steps and models are the mix's
    assert [(j.model, j.total_steps) for j in first] == [(j.model, j.total_steps) for j in other]
