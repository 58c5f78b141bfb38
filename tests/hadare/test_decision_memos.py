"""What HadarE remembers within a decision (a copy's run rate, whether a placement moved, the
copies' shared fork bounds) gives exactly what computing it afresh gives; how far one growth
step of a job's copies searches."""

from __future__ import annotations

import numpy as np

from estimators.throughput import GavelThroughputTable
from hadar.core.cluster import Cluster, Node
from hadar.core.jobs import Job, JobStatus, Placement
from hadar.policy import RoundContext
from hadar.round_progress import play_job_round
from hadar.valuation import value_jobs
from hadar.workloads.mixes import mix_jobs
from hadare.policy import HadarEPolicy, _Check, _grow
from hadare.shadow import HadarReplay

TABLE = GavelThroughputTable.bundled()


def _cluster(n: int) -> Cluster:
    types = ("v100", "p100", "k80")
    return Cluster(f"one-gpu-{n}", tuple(Node(f"n{i}", {types[i % 3]: 1}) for i in range(n)))


def test_moved_answers_as_comparing_the_placements_does() -> None:
    job = Job(0, "ResNet-18 (batch size 32)", 2, 1e5)
    ran = {"a": {"v100": 1, "k80": 0}, "b": {"v100": 1}}
    cluster = Cluster("two", (Node("a", {"v100": 1, "k80": 1}), Node("b", {"v100": 1})))
    ctx = RoundContext(
        0.0,
        1,
        360.0,
        cluster,
        (JobStatus(job, 5e4),),
        {(0, 1): ran, (7, 1): {"a": {"k80": 1}}},
        TABLE,
    )
    same_other_order = {"b": {"v100": 1}, "a": {"k80": 0, "v100": 1}}
    without_the_zero = {"a": {"v100": 1}, "b": {"v100": 1}}
    other_job_s = {"a": {"k80": 1}}
    policy = HadarEPolicy()
    for placement in (ran, same_other_order, without_the_zero, other_job_s):
        expected = placement not in [ran]  # what a list of last round's placements answered
        assert policy.moved(0, placement, ctx) is expected
        assert policy.moved(0, placement, ctx) is expected  # and again, remembered
    assert policy.moved(7, other_job_s, ctx) is False


def test_a_played_round_is_the_round_played_afresh() -> None:
    """On 30 one-GPU nodes, every job's copies as HadarE forked them: the check's play (run
    rates remembered across plays, copies on like GPUs sharing one fork bound) equals
    ``play_job_round`` computing every run rate itself, under both accountings."""
    cluster = _cluster(30)
    jobs = mix_jobs("M-5")
    for accounting in ("goodput", "steps"):
        ctx = RoundContext(
            0.0,
            0,
            360.0,
            cluster,
            tuple(JobStatus(j, j.total_steps) for j in jobs),
            {},
            TABLE,
            fork_progress=accounting,
        )
        policy = HadarEPolicy(lookahead_nodes=0)
        plan = policy.decide(ctx)
        copies: dict[int, dict[str, Placement]] = {}
        for a in plan.assignments:
            copies.setdefault(a.job_id, {})[a.nodes[0]] = a.placement
        assert max(len(c) for c in copies.values()) > 3  # forked, so the bound applies
        by_id = {v.status.job_id: v for v in value_jobs(ctx, ctx.jobs)}
        replay = HadarReplay(policy.config.hadar).step(ctx, followed=True)
        check = _Check(ctx, replay, by_id, policy)
        for job_id, per_node in sorted(copies.items()):
            for _ in range(2):  # the second play of the same copies is remembered
                played = check.play(job_id, per_node)
                st = ctx.status(job_id)
                assigns = policy.job_assignments(job_id, per_node, ctx)
                afresh = play_job_round(
                    st.job,
                    st.remaining_steps,
                    assigns,
                    ctx.current,
                    ctx.throughput,
                    ctx.cluster,
                    ctx.round_s,
                    ctx.restart_penalty_s,
                    ctx.fork_progress,
                    [policy._refills.get((job_id, a.nodes[0]), (None, 0.0))[1] for a in assigns],
                )
                assert played == afresh


def _grown(have_nodes: list[str]) -> dict[str, Placement] | None:
    """``_grow`` for a job on ``have_nodes`` of six one-GPU nodes, under a check that accepts
    any two or more copies added at once, never one."""
    cluster = _cluster(6)
    job = Job(0, "ResNet-18 (batch size 32)", 1, 1e6)
    ctx = RoundContext(0.0, 0, 360.0, cluster, (JobStatus(job, 1e6),), {}, TABLE)
    policy = HadarEPolicy(lookahead_nodes=0)
    v = value_jobs(ctx, ctx.jobs)[0]
    have = {n: {n: dict(cluster.node(n).gpus)} for n in have_nodes}
    free = cluster.capacity.copy()
    for placement in have.values():
        free -= cluster.placement_matrix(placement)

    class SeveralAtOnce(_Check):
        def accepts(self, job_id: int, before: object, after: object) -> bool:
            return len(after) - len(before) >= 2  # type: ignore[arg-type]

    check = SeveralAtOnce(ctx, None, {0: v}, policy)  # type: ignore[arg-type]
    first = divmod(int(np.argmax(np.where(free > 0, v.request.rates_cons, -1.0))), free.shape[1])
    return _grow(0, v, have, free, ctx, 6, check, first)


def test_only_a_job_not_yet_forked_jumps_several_copies_at_once() -> None:
    """Two or more copies at once can cross the aggregation overhead a job starts paying when
    it is forked; a job forked already grows one copy at a time (else every count is tried
    for every copy, about nodes^3 per round)."""
    alone = _grown(["n0"])
    assert alone is not None and len(alone) > 2
    assert _grown(["n0", "n1"]) is None


def test_hadars_inside_hadare_share_their_configurations_and_decide_as_apart() -> None:
    from hadar import api
    from hadar.scheduler.elastic import ConfigurationMemo
    from hadar.workloads.pollux import pollux_jobs

    shared = HadarEPolicy()
    assert shared.replay.hadar.configurations is shared._own.configurations
    apart = HadarEPolicy()
    apart.replay.hadar.configurations = ConfigurationMemo()  # as before they were shared
    jobs = pollux_jobs("pollux-2")[:8]
    runs = [api.simulate("pollux-hetero-64", jobs, p, round_s=60.0) for p in (shared, apart)]
    assert runs[0].placements.equals(runs[1].placements)
    assert runs[0].placements["copy"].max() > 0  # it forked: copies' batches came from the memo
    restored = HadarEPolicy()
    restored.restore(shared.state())
    assert restored.replay.hadar.configurations is restored._own.configurations
