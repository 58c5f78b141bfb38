import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hadar.core.cluster import Cluster, Node
from hadar.core.jobs import Job
from hadar.scheduler import HadarConfig, HadarPolicy
from hadar.simulator.engine import validate_plan
from tests.hadar.helpers import TABLE, context, small_cluster

JOB_TYPES = sorted(t for t in TABLE.job_types if TABLE.gang_sizes(t) >= {1, 2, 4, 8})


@settings(max_examples=60, deadline=None)
@given(
    nodes=st.lists(
        st.tuples(st.sampled_from(["v100", "p100", "k80"]), st.sampled_from([1, 2, 4, 8])),
        min_size=1,
        max_size=6,
    ),
    jobs=st.lists(
        st.tuples(st.sampled_from(JOB_TYPES), st.sampled_from([1, 2, 4, 8]), st.integers(1, 10**6)),
        min_size=1,
        max_size=25,
    ),
)
def test_capacity_and_gang_are_never_violated(nodes, jobs):
    cluster = Cluster("h", tuple(Node(f"n{i}", {t: c}) for i, (t, c) in enumerate(nodes)))
    js = [Job(i, t, w, float(s)) for i, (t, w, s) in enumerate(jobs) if w <= cluster.total_gpus]
    if not js:
        return
    ctx = context(cluster, js)
    plan = HadarPolicy().decide(ctx)
    validate_plan(plan, ctx)  # raises on capacity / gang / unknown job violations
    used = sum(
        (cluster.placement_matrix(a.placement) for a in plan.assignments),
        np.zeros_like(cluster.capacity),
    )
    assert (used <= cluster.capacity).all()
    for a in plan.assignments:
        assert a.num_gpus == next(j.num_gpus for j in js if j.job_id == a.job_id)
    # work conserving: an idle GPU means no waiting job fits in what is idle
    idle = int((cluster.capacity - used).sum())
    placed = {a.job_id for a in plan.assignments}
    assert all(
        j.num_gpus > idle or j.job_id in placed for j in js if _runnable_on_some(j, cluster, used)
    )


def _runnable_on_some(job, cluster, used):
    free = cluster.capacity - used
    cons, _ = TABLE.cell_rates(job, cluster)
    return int(free[cons > 0].sum()) >= job.num_gpus


def test_task_level_placement_spans_types_when_no_single_type_fits():
    # the paper's motivating case: 4 GPUs wanted, 3 V100 and 3 K80 free -> Hadar mixes types
    cluster = Cluster("m", (Node("a", {"v100": 3}), Node("b", {"k80": 3})))
    job = Job(0, "ResNet-50 (batch size 16)", 4, 1e5)
    plan = HadarPolicy().decide(context(cluster, [job]))
    assert len(plan.assignments) == 1
    placement = plan.assignments[0].placement
    assert set(placement) == {"a", "b"} and sum(sum(p.values()) for p in placement.values()) == 4


def test_running_jobs_keep_their_placement():
    cluster = small_cluster()
    jobs = [Job(0, "ResNet-18 (batch size 64)", 2, 1e6), Job(1, "LM (batch size 20)", 2, 1e6)]
    current = {(0, 0): {"k": {"k80": 2}}}
    plan = HadarPolicy(replan="never").decide(
        context(cluster, jobs, current=current, now=360, remaining={0: 9e5})
    )
    assert plan.allocation()[(0, 0)] == {"k": {"k80": 2}}


def test_upgrade_moves_a_long_job_from_slow_to_idle_fast_gpus():
    cluster = small_cluster()
    job = Job(0, "ResNet-50 (batch size 64)", 2, 1e6)
    current = {(0, 0): {"k": {"k80": 2}}}
    ctx = context(cluster, [job], current=current, now=360, remaining={0: 9e5})
    plan = HadarPolicy(HadarConfig(replan="upgrade")).decide(ctx)
    assert plan.allocation()[(0, 0)] == {"v": {"v100": 2}}
    assert plan.info["upgraded"] == 1
    stay = HadarPolicy(HadarConfig(replan="never")).decide(ctx)
    assert stay.allocation()[(0, 0)] == {"k": {"k80": 2}}


def test_jobs_go_to_their_fastest_type_when_free():
    cluster = small_cluster()
    job = Job(0, "ResNet-50 (batch size 64)", 2, 1e6)
    plan = HadarPolicy().decide(context(cluster, [job]))
    assert plan.allocation()[(0, 0)] == {"v": {"v100": 2}}


def test_decision_is_deterministic():
    cluster = small_cluster()
    jobs = [Job(i, JOB_TYPES[i % len(JOB_TYPES)], [1, 2, 4][i % 3], 1e5 + i) for i in range(30)]
    a = HadarPolicy().decide(context(cluster, jobs))
    b = HadarPolicy().decide(context(cluster, jobs))
    assert a.allocation() == b.allocation()
