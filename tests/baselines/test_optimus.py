"""Optimus+Oracle as the Pollux paper ran it: one GPU per job oldest first, then GPUs by the
largest cut in remaining time; batch sizes stay the workload's; unchanged counts keep their GPUs."""

from __future__ import annotations

from hadar import api
from hadar.core.cluster import Cluster, Node
from hadar.core.jobs import JobStatus
from hadar.policy import RoundContext, make_policy
from hadar.workloads.pollux import jobs_from_pollux_csv
from hadar.workloads.pollux_throughput import PolluxThroughput
from tests.hadar.helpers import TABLE

CSV = """name,time,application,num_replicas,batch_size
a,0,cifar10,1,128
b,10,imagenet,4,800
c,20,ncf,1,256
"""


def _ctx(jobs, gpus_per_node: int, nodes: int) -> RoundContext:
    cluster = Cluster("t", tuple(Node(f"n{i}", {"t4": gpus_per_node}) for i in range(nodes)))
    statuses = [JobStatus(j, j.total_steps) for j in jobs]
    return RoundContext(0.0, 0, 60.0, cluster, statuses, {}, PolluxThroughput(TABLE))


def test_every_job_gets_a_gpu_before_any_gets_two_and_the_rest_go_by_gain() -> None:
    jobs = jobs_from_pollux_csv(CSV, source="t")
    policy = make_policy("optimus")
    counts = policy.counts(_ctx(jobs, 4, 4))
    assert set(counts) == {0, 1, 2} and min(counts.values()) >= 1
    assert sum(counts.values()) <= 16
    assert counts[1] == max(counts.values())  # ImageNet has by far the most work left
    few = policy.counts(_ctx(jobs, 2, 1))  # two GPUs, three jobs: the oldest two run
    assert few == {0: 1, 1: 1}


def test_a_simulated_run_keeps_each_jobs_own_batch(tmp_path) -> None:
    path = tmp_path / "w.csv"
    path.write_text(CSV)
    sim = api.simulate("pollux-64t4", str(path), "optimus")
    assert sim.summary["completed"] == 3
    placed = sim.placements
    tuned = {0: 128, 1: 800, 2: 256}
    for job, batch in tuned.items():  # split over k GPUs, a local batch rounds up
        rows = placed[placed.job == job]
        assert ((rows.batch_size >= batch) & (rows.batch_size < batch + rows.gpus)).all()
    assert placed[placed.job == 1].gpus.max() > 1  # it grows where the gain is
