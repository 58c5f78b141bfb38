"""AFS-L's shares (afs/share.py): the fast hand-out equals Algorithm 1 as written, the
stage-one and efficiency behaviour the paper describes, and the rule's intransitivity."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from afs.share import (
    ShareJob,
    _state,
    afs_p_shares,
    afs_shares,
    afs_shares_literal,
    top_priority,
    usable_cap,
)


def _curve(base: float, gains: list[float]) -> tuple[float, ...]:
    out = [0.0, base]
    for g in gains:
        out.append(out[-1] * g)
    return tuple(out)


@st.composite
def problems(draw, max_types: int = 1):
    types = draw(st.integers(1, max_types))
    counts = draw(st.lists(st.integers(0, 12), min_size=types, max_size=types))
    n = draw(st.integers(1, 9))
    jobs = []
    # Few distinct values so that ties in length and in gain happen often.
    work = st.sampled_from([1.0, 2.0, 3.0, 6.0, 10.0, 30.0])
    gain = st.sampled_from([0.9, 1.0, 1.2, 1.3, 1.4, 1.5, 1.8, 2.0, 2.2])
    for _ in range(n):
        curves = tuple(
            _curve(
                draw(st.sampled_from([0.0, 1.0, 2.0, 3.0])),
                draw(st.lists(gain, min_size=0, max_size=6)),
            )
            for _ in range(types)
        )
        jobs.append(ShareJob(draw(work), curves, draw(st.sampled_from([1, 1, 1, 2, 3]))))
    return jobs, counts


@settings(max_examples=150, deadline=None)
@given(problems())
def test_fast_equals_algorithm_1_homogeneous(problem):
    jobs, counts = problem
    assert afs_shares(jobs, counts) == afs_shares_literal(jobs, counts)


@settings(max_examples=120, deadline=None)
@given(problems(max_types=3))
def test_fast_equals_algorithm_1_over_type_pairs(problem):
    jobs, counts = problem
    assert afs_shares(jobs, counts) == afs_shares_literal(jobs, counts)


@settings(max_examples=80, deadline=None)
@given(problems(max_types=2))
def test_shares_respect_capacity_and_curves(problem):
    jobs, counts = problem
    shares = afs_shares(jobs, counts)
    used = [0] * len(counts)
    for job, (k, g) in zip(jobs, shares, strict=True):
        if g:
            used[k] += g
            assert job.min_gpus <= g <= usable_cap(job.curves[k], job.min_gpus)
        else:
            assert k == -1
    assert all(u <= c for u, c in zip(used, counts, strict=True))
    # GPUs stay idle only when no job could take one more.
    for k, (u, c) in enumerate(zip(used, counts, strict=True)):
        if u < c:
            for job, (kj, g) in zip(jobs, shares, strict=True):
                if kj == k:
                    assert g == usable_cap(job.curves[k], job.min_gpus)
                elif g == 0:
                    cap = usable_cap(job.curves[k], job.min_gpus)
                    assert cap == 0 or job.min_gpus > c - u


def test_stage_one_gives_one_gpu_each_shortest_first():
    # Sublinear jobs, fewer GPUs than jobs: one GPU each, in increasing length.
    curve = (_curve(1.0, [1.5, 1.2]),)
    jobs = [ShareJob(w, curve) for w in (5.0, 1.0, 3.0, 2.0)]
    assert afs_shares(jobs, [3]) == [(-1, 0), (0, 1), (0, 1), (0, 1)]


def test_equal_pending_jobs_tie_as_algorithm_1_breaks_it():
    # TOPPRIORITY keeps the champion only when strictly shorter: of equal jobs the last scanned
    # (by index) takes the one GPU, in both implementations.
    curve = (_curve(1.0, [1.5]),)
    jobs = [ShareJob(2.0, curve), ShareJob(2.0, curve), ShareJob(2.0, curve), ShareJob(4.0, curve)]
    assert afs_shares_literal(jobs, [1]) == [(-1, 0), (-1, 0), (0, 1), (-1, 0)]
    assert afs_shares(jobs, [1]) == afs_shares_literal(jobs, [1])


def test_efficient_long_job_beats_inefficient_short_one():
    # Two jobs with one GPU each; the third GPU goes to the long job that scales (Eq. 3:
    # u_long = 0.9/1.9 = 0.47 > v_short = 0.1), not to the short one that does not.
    short = ShareJob(1.0, (_curve(1.0, [1.1, 1.05]),))
    long = ShareJob(100.0, (_curve(1.0, [1.9, 1.8]),))
    assert afs_shares([short, long], [3]) == [(0, 1), (0, 2)]
    # ... and to the short job when both scale alike (SRTF-like).
    long_alike = ShareJob(100.0, (_curve(1.0, [1.1, 1.05]),))
    assert afs_shares([short, long_alike], [3]) == [(0, 2), (0, 1)]


def test_a_job_takes_no_gpu_that_does_not_help():
    flat = ShareJob(10.0, ((0.0, 1.0, 1.5, 1.5, 2.0),))
    assert usable_cap(flat.curves[0], 1) == 2
    assert afs_shares([flat], [8]) == [(0, 2)]


def test_heterogeneous_pairs_start_a_job_on_its_best_type():
    # Type 0 is 4x faster for job 0, equal for job 1: job 0 (shorter) goes to type 0 first.
    fast_on_0 = ShareJob(4.0, ((0.0, 4.0), (0.0, 1.0)))
    equal = ShareJob(8.0, ((0.0, 1.0), (0.0, 1.0)))
    assert afs_shares([fast_on_0, equal], [1, 1]) == [(0, 1), (1, 1)]


def test_the_pairwise_rule_has_cycles_so_the_scan_order_matters():
    # Lengths a < b < c, gains p'/p = 1.3, 1.4, 1.5 (module docstring): a > b > c > a.
    def job(w: float, r: float) -> ShareJob:
        return ShareJob(w, ((0.0, 1.0, r),))

    a, b, c = (_state(j, i, 0, 1) for i, j in enumerate([job(1, 1.3), job(2, 1.4), job(3, 1.5)]))
    winners = {top_priority(list(order)).job for order in itertools.permutations([a, b, c])}
    assert len(winners) > 1
    # The literal algorithm uses the increasing-length scan, and so does the fast one.
    jobs = [job(1, 1.3), job(2, 1.4), job(3, 1.5)]
    assert afs_shares(jobs, [4]) == afs_shares_literal(jobs, [4])


@settings(max_examples=60, deadline=None)
@given(problems())
def test_a_job_beating_all_others_wins_in_every_scan_order(problem):
    jobs, _ = problem
    # Jobs holding their first share (cnt = min) or none, as mid-hand-out.
    states = [
        _state(j, i, 0, j.min_gpus if i % 2 and cap > j.min_gpus else 0)
        for i, j in enumerate(jobs)
        if (cap := usable_cap(j.curves[0], j.min_gpus))
    ]
    for s in states:
        if all(
            top_priority([s, o]) is s and top_priority([o, s]) is s for o in states if o is not s
        ):
            for order in itertools.islice(itertools.permutations(states), 24):
                assert top_priority(list(order)) is s


def test_afs_p_without_lengths_ignores_remaining_work_and_keeps_eq_3():
    # Same curves, very different remaining work: AFS-L favours the short job, AFS-P cannot
    # tell them apart (scan order decides, first job first), and stage one still gives each a GPU.
    curve = (_curve(1.0, [1.5, 1.2]),)
    jobs = [ShareJob(100.0, curve), ShareJob(1.0, curve)]
    assert afs_shares(jobs, [3]) == [(0, 1), (0, 2)]
    assert afs_p_shares(jobs, [3]) == [(0, 2), (0, 1)]
    assert afs_p_shares(list(reversed(jobs)), [3]) == [(0, 2), (0, 1)]
    # An efficient job wins the extra GPU whatever its length (Eq. 3 holds one way).
    eff = ShareJob(100.0, (_curve(1.0, [1.9, 1.8]),))
    ineff = ShareJob(1.0, (_curve(1.0, [1.1, 1.05]),))
    assert afs_p_shares([ineff, eff], [3]) == [(0, 1), (0, 2)]
