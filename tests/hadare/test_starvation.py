"""Issue 16: no job waits longer than the starvation bound (``max_wait_s``) under HadarE while its
gang fits, even when a stream of shorter jobs would otherwise always outrank it."""

from __future__ import annotations

import pytest

from estimators.throughput import GavelThroughputTable, TableKey
from hadar.core.cluster import Cluster, Node
from hadar.core.jobs import Job
from hadar.scheduler import HadarConfig
from hadar.simulator import SimConfig, simulate
from hadare.policy import HadarEConfig, HadarEPolicy

ROUND = 360.0
TABLE = GavelThroughputTable({TableKey("A", "v100", 1, True): 1.0}, "one type, 1 step/s")
CLUSTER = Cluster("two", (Node("a", {"v100": 1}), Node("b", {"v100": 1})))


def _stream() -> list[Job]:
    """Two GPUs: a 10-hour job (on the critical path, so it runs at once), a 1-hour job, and a
    5-minute job arriving every round for 6 hours. Under a utility that favours finishing soon,
    each short job outranks the 1-hour job for the second GPU."""
    jobs = [Job(0, "A", 1, 36_000.0, arrival=0.0), Job(1, "A", 1, 3_600.0, arrival=0.0)]
    jobs += [Job(2 + r, "A", 1, 300.0, arrival=r * ROUND) for r in range(60)]
    return jobs


def _waits(max_wait_s: float | None) -> dict[int, float]:
    policy = HadarEPolicy(HadarEConfig(hadar=HadarConfig(max_wait_s=max_wait_s)))
    result = simulate(CLUSTER, _stream(), policy, TABLE, SimConfig(round_length=ROUND))
    assert all(j.finish is not None for j in result.jobs)
    return {j.job_id: j.queueing_delay for j in result.jobs}


@pytest.mark.parametrize("bound_h", [1.0, 2.5])
def test_no_job_waits_longer_than_the_bound(bound_h):
    waits = _waits(bound_h * 3600)
    # a job is started at the latest in the round during which it would pass the bound
    assert max(waits.values()) <= bound_h * 3600 + 1e-6, max(waits.items(), key=lambda kv: kv[1])


def test_without_the_bound_the_one_hour_job_starves_behind_the_stream():
    waits = _waits(None)
    assert waits[1] > 5 * 3600  # it waits for the stream to end: the bound is what prevents it


def test_the_bound_is_validated():
    for bad in (0.0, -5.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="max_wait_s"):
            HadarConfig(max_wait_s=bad)
