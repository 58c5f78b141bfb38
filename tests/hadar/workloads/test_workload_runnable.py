"""A job that no placement on the cluster can run is refused up front, naming the job; the check
is answered once per gang size and rate arrays (jobs of one class share the answer)."""

from __future__ import annotations

import re

import pytest

from estimators.throughput import GavelThroughputTable, TableKey
from hadar.clusters import cluster_from_dict
from hadar.core.errors import InputError
from hadar.core.jobs import Job
from hadar.workloads import validate_workload
from tests.fixtures.cli import hadar_cli, one_error_line

FAST, SLOW = "ResNet-18 (batch size 64)", "LM (batch size 20)"


def table() -> GavelThroughputTable:
    return GavelThroughputTable(
        {
            TableKey(FAST, "v100", 1, True): 10.0,
            TableKey(FAST, "v100", 2, True): 18.0,
            # SLOW's 2-GPU gang runs only across nodes, and this cluster's v100 nodes have one GPU
            # each with no unconsolidated figure: no 2-GPU placement has a positive rate
            TableKey(SLOW, "v100", 1, True): 4.0,
            TableKey(SLOW, "v100", 2, True): 0.0,
        },
        source="t.json",
    )


def cluster():
    return cluster_from_dict(
        {
            "name": "ones",
            "provider": "simulated",
            "nodes": [{"name": "n", "count": 3, "gpus": {"v100": 1}}],
        }
    )


def test_runnable_jobs_pass_and_the_first_unrunnable_one_is_named():
    t, c = table(), cluster()
    ok = [Job(0, FAST, 1, 100), Job(1, FAST, 2, 100), Job(2, SLOW, 1, 100), Job(3, FAST, 2, 50)]
    validate_workload(ok, c, t, source="jobs.csv")
    with pytest.raises(InputError, match=r"jobs\.csv: job 7 .*can never run on cluster ones"):
        validate_workload([*ok, Job(7, SLOW, 2, 100), Job(8, SLOW, 2, 100)], c, t, "jobs.csv")


def test_a_horizon_under_a_minute_is_said_in_seconds(tmp_path) -> None:
    """``--horizon 10``: both durations in a unit that shows them, not ``0.00 h``."""
    res = hadar_cli(
        "simulate", "--workload", "philly-5", "--horizon", "10", "--out", "o", cwd=tmp_path
    )
    assert res.returncode == 2, res.stderr
    line = one_error_line(res)
    assert re.search(r"job \d+: cannot finish before \d+\.\d (s|min) of simulated time", line), line
    assert line.endswith("beyond the horizon of 10.0 s (--horizon)"), line
    assert not (tmp_path / "o").exists()
