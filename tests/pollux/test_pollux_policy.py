"""The ``pollux`` policy in the simulator on Pollux's traces: jobs start on one GPU, explore,
grow and change batch size; every round keeps interference avoidance and no needless split;
a job without efficiency data runs on its gang (GPU count only); one GPU type per job."""

from __future__ import annotations

import pytest

from hadar.core.cluster import Cluster, Node
from hadar.core.jobs import Job
from hadar.loop import Decision, RoundLoop
from hadar.policy import make_policy
from hadar.simulator.engine import SimConfig, SimulatorExecutor
from hadar.workloads.pollux import jobs_from_pollux_csv
from hadar.workloads.pollux_throughput import PolluxThroughput
from tests.hadar.helpers import TABLE, RecordingExecutor

CSV = """name,time,application,num_replicas,batch_size
a,0,cifar10,1,128
b,0,cifar10,2,256
c,120,deepspeech2,2,40
"""


@pytest.fixture(scope="module")
def decisions() -> list[Decision]:
    jobs = jobs_from_pollux_csv(CSV, source="test")
    rigid = Job(3, "ResNet-18 (batch size 64)", 2, 1e9, arrival=0.0)
    # Three T4 nodes and a V100 node: the rigid job has rates on V100s only (Gavel's table).
    nodes = tuple(Node(f"n{i}", {"t4": 4}) for i in range(3)) + (Node("v", {"v100": 4}),)
    cluster = Cluster("mixed", nodes)
    cfg = SimConfig(round_s=60.0, restart_penalty_s=30.0)
    ex = RecordingExecutor(
        SimulatorExecutor(cluster, [*jobs, rigid], "test", PolluxThroughput(TABLE), cfg)
    )
    RoundLoop(make_policy("pollux"), ex).run(max_rounds=12)
    return ex.decisions


def _gpus(d: Decision, job: int) -> int:
    return sum(a.num_gpus for a in d.plan.assignments if a.job_id == job)


def _batch(d: Decision, job: int) -> int | None:
    return next((a.batch_size for a in d.plan.assignments if a.job_id == job), None)


def test_jobs_start_on_one_gpu_then_grow_and_change_batch_size(decisions):
    # At its arrival a job's REALLOC_FACTOR is 0 (age 0): it is placed the round after.
    assert not decisions[0].plan.assignments
    second = decisions[1]
    assert _gpus(second, 0) == 1 and _gpus(second, 1) == 1
    assert _batch(second, 0) == 128  # M0 of cifar10 on one GPU
    for job in (0, 1):
        counts = [_gpus(d, job) for d in decisions[1:]]
        assert max(counts) >= 4  # explored beyond its first allocation
        # never more than twice the most GPUs held before (prior-driven exploration)
        assert all(c <= 2 * max(counts[:i] or [1]) for i, c in enumerate(counts))
        assert len({_batch(d, job) for d in decisions[1:]}) > 1
    assert any(_gpus(d, 2) for d in decisions[2:])  # the later arrival is placed


def test_rules_hold_every_round_and_the_rigid_job_keeps_its_gang(decisions):
    for d in decisions:
        spans = {a.job_id: len(a.nodes) for a in d.plan.assignments}
        for a in d.plan.assignments:
            assert len(a.nodes) <= -(-a.num_gpus // 4)
        shared: dict[str, int] = {}
        for a in d.plan.assignments:
            if spans[a.job_id] > 1:
                for n in a.nodes:
                    shared[n] = shared.get(n, 0) + 1
        assert all(v <= 1 for v in shared.values())
        assert _gpus(d, 3) in (0, 2)
        for a in d.plan.assignments:  # one GPU type per job
            assert len({t for per in a.placement.values() for t in per}) == 1
        assert _batch(d, 3) is None
        assert d.plan.info["throughput_only_jobs"] == 1
    assert any(_gpus(d, 3) == 2 for d in decisions)


def test_restarts_count_every_reallocation_after_the_first(decisions):
    for job in (0, 1):
        placements = [
            next((a.placement for a in d.plan.assignments if a.job_id == job), None)
            for d in decisions
        ]
        first = next(i for i, p in enumerate(placements) if p)
        moves = sum(
            1
            for prev, cur in zip(placements[first:], placements[first + 1 :], strict=False)
            if cur and cur != prev
        )
        assert decisions[-1].policy_state["restarts"][str(job)] == moves


def test_ncf_jobs_run_as_the_official_simulator_runs_them(tmp_path):
    """The artifact pins NCF under Pollux to one GPU at its largest batch; ``pin=false``
    adapts it like the others (it starts at its initial batch)."""
    from hadar import api

    path = tmp_path / "w.csv"
    path.write_text(
        "name,time,application,num_replicas,batch_size\n"
        "a,0,ncf,1,256\nb,30,ncf,1,256\nc,0,cifar10,1,128\n"
    )
    pinned = api.simulate("pollux-64t4", str(path), "pollux").placements
    ncf = pinned[pinned.job.isin([0, 1])]
    assert not ncf.empty and set(ncf.gpus) == {1} and set(ncf.batch_size) == {32768}
    other = pinned[pinned.job == 2]
    assert other.batch_size.min() < 32768  # cifar10 is not pinned
    free = api.simulate(
        "pollux-64t4", str(path), "pollux", policy_options={"pin": "false"}
    ).placements
    assert free[free.job.isin([0, 1])].batch_size.min() < 32768
