"""HadarE forks a job whose width and batch Hadar adapts onto the GPU types Hadar's decision
leaves idle: Hadar keeps such a job on one type, and copies elsewhere add what it cannot."""

from __future__ import annotations

import pytest

from hadar import api
from hadar.core.jobs import JobStatus
from hadar.policy import RoundContext
from hadar.scenario import load_scenario
from hadar.scheduler import HadarPolicy
from hadar.scheduler.elastic import best_batch
from hadare.policy import HadarEPolicy

HEADER = "name,time,application,num_replicas,batch_size"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, api.Simulation]:
    path = tmp_path_factory.mktemp("one") / "one.csv"
    path.write_text(f"{HEADER}\nimagenet,0,imagenet,16,3200\n")
    out = {}
    for name, policy, opts in (
        ("hadar", "hadar", {}),
        ("hadare", "hadare", {}),
        ("unforked", "hadare", {"fork_adapting": "false"}),
    ):
        out[name] = api.simulate(
            "pollux-hetero-64", str(path), policy, round_s=60.0, policy_options=opts
        )
    return out


def test_an_adapting_job_is_forked_onto_the_types_it_does_not_run_on(
    runs: dict[str, api.Simulation],
) -> None:
    hadar, hadare = runs["hadar"], runs["hadare"]
    assert set(hadar.placements.gpu_type) == {"v100"}  # one type: the 32 T4 and 16 K80 idle
    rounds = hadare.placements.groupby("round")
    forked = [r for _, r in rounds if r["copy"].nunique() > 1]
    assert forked  # copies ran
    for r in forked:
        by_copy = r.groupby("copy").gpu_type.agg(set)
        assert all(len(types) == 1 for types in by_copy)  # each copy on one type
        types = [next(iter(t)) for t in by_copy]
        assert types.count("v100") <= 1  # never a second copy on the type it grows on
    # a copy off Hadar's type takes a node's idle GPUs of one type, at the batch of the largest
    # goodput there for the job's progress then
    copy_rows = hadare.placements[hadare.placements.gpu_type != "v100"]
    assert (copy_rows.gpus == copy_rows["count"]).all()  # single-node copies
    assert set(copy_rows.gpu_type) <= {"t4", "k80"}
    # the whole job: sooner than Hadar, though under the goodput bound its copies' steps counted
    # for less than in full (the copies' step sum exceeds the target)
    assert hadare.jobs.jct[0] < 0.9 * hadar.jobs.jct[0]
    assert hadare.jobs.step_sum[0] > 1.01 * hadare.jobs.target[0]


def test_each_copy_runs_at_the_batch_of_the_largest_goodput_on_its_own_gpus() -> None:
    cluster, jobs, throughput = load_scenario("pollux-hetero-64", "pollux-2-load-1")
    job = next(j for j in jobs if j.job_type == "imagenet")
    status = JobStatus(job, 0.3 * job.total_steps)  # 70 % trained, alone on the cluster
    ctx = RoundContext(0.0, 0, 60.0, cluster, (status,), {}, throughput)
    plan = HadarEPolicy().decide(ctx)
    assert len(plan.assignments) > 1 and plan.info["forked_copies"] == len(plan.assignments) - 1
    (hadar,) = HadarPolicy().decide(ctx).assignments
    # Hadar's gang (on both V100 nodes) at Hadar's batch, and copies beside it
    (primary,) = [a for a in plan.assignments if a.placement == hadar.placement]
    assert primary.batch_size == hadar.batch_size
    copies = [a for a in plan.assignments if a is not primary]
    for a in copies:
        assert len(a.placement) == 1 and a.placement != primary.placement
        assert a.batch_size == best_batch(status, a.placement, cluster, throughput)
    assert len({a.batch_size for a in copies}) > 1  # T4 and K80 nodes: their own batches


def test_without_fork_adapting_hadare_runs_hadar_s_rounds(runs: dict[str, api.Simulation]) -> None:
    hadar, unforked = runs["hadar"], runs["unforked"]
    assert unforked.placements["copy"].nunique() == 1
    assert unforked.jobs.jct[0] == pytest.approx(hadar.jobs.jct[0])
