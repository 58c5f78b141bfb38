"""MalleTrain's Job Profiling Advisor (Ma et al., ICPE 2024, §3.3) and FreeTrain's guess, as
pure functions: what the MILP (``bftrainer/milp.py``) is told about a job's
scalability under each system.

* **JPA's measurement schedule** (Fig. 6, "inverse-order rescaling"): scaling up costs several
  times more than scaling down and hardly depends on how many nodes are added (Fig. 5), so a new
  job is scaled up *once*, to the largest scale to be profiled, and then scaled down one
  measured scale at a time to the smallest: one scale-up and ``k - 1`` scale-downs for ``k``
  scales, instead of ``k - 1`` scale-ups going upwards. :func:`profile_schedule` gives the
  scales in that order and :func:`profile_cost` compares the two orders' rescaling seconds.
* **Batch admission** (§3.2, New Jobs): at most ``Pjmax`` jobs run; when jobs arrive together,
  ``Pjmax - running`` of them are admitted as one batch (one re-solve, one round of rescaling)
  and the rest wait first come, first served: :func:`admit_batch`.
* **FreeTrain** (Liu et al., CCGrid 2023; MalleTrain §2.3, §5): the same MILP, but without
  profiling the user must state a job's scalability, and for jobs generated on the fly (NAS,
  HPO) "has to guess a configuration ... solely based on user experience". Our FreeTrain guesses
  one curve for every job: linear scaling at the mean single-node throughput of the jobs it has
  seen (:func:`freetrain_guess`). That guess is ours; the papers do not publish FreeTrain's.
"""

from __future__ import annotations

from collections.abc import Sequence


def profile_scales(n_min: int, n_max: int, pool: int) -> tuple[int, ...]:
    """The scales JPA measures: powers of two from ``n_min`` up to what the job and the pool
    allow, plus that largest scale (Table 2 of BFTrainer measures 1, 2, 4, ..., 64), ascending."""
    top = min(n_max, pool)
    if top < n_min:
        return ()
    scales = {n_min, top}
    n = 1
    while n < top:
        if n >= n_min:
            scales.add(n)
        n *= 2
    return tuple(sorted(scales))


def profile_schedule(scales: Sequence[int]) -> tuple[int, ...]:
    """Inverse order: the largest scale first (one scale-up), then down one scale at a time."""
    return tuple(sorted(scales, reverse=True))


def profile_cost(
    scales: Sequence[int], r_up: float, r_dw: float, start: int = 0
) -> tuple[float, float]:
    """Rescaling seconds of profiling ``scales`` from ``start`` nodes: ``(inverse order,
    ascending order)``. Inverse: one scale-up then a scale-down per further scale; ascending: a
    scale-up per scale."""
    if not scales:
        return 0.0, 0.0
    k = len(scales)
    inverse = (r_up if max(scales) > start else 0.0) + (k - 1) * r_dw
    ascending = sum(r_up for n in sorted(scales) if n > start)
    return inverse, ascending


def admit_batch(
    running: int, waiting: Sequence[int], pj_max: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(admitted, still waiting)``: the first ``pj_max - running`` waiting jobs (FCFS)."""
    room = max(0, pj_max - running)
    return tuple(waiting[:room]), tuple(waiting[room:])


def freetrain_guess(
    single_node_rates: Sequence[float], n_max: int
) -> tuple[tuple[int, float], ...]:
    """FreeTrain's stated curve for a job it knows nothing about: linear scaling at the mean
    single-node throughput of ``single_node_rates`` (the jobs seen so far), up to ``n_max``."""
    if not single_node_rates:
        raise ValueError("freetrain_guess needs at least one known single-node rate")
    per_node = sum(single_node_rates) / len(single_node_rates)
    return ((1, per_node), (n_max, per_node * n_max)) if n_max > 1 else ((1, per_node),)


def can_profile(top: int, free: int, donatable: int) -> bool:
    """Whether JPA starts profiling a job now: its largest scale ``top`` fits in the ``free``
    nodes plus those running Trainers can give up above their minimum (``donatable``). When it
    does not, the job goes back to the queue (MalleTrain §3.2: "Should resources be
    insufficient, the jobs are returned to the queue") instead of being profiled on fewer."""
    return top >= 1 and free + donatable >= top


def extrapolated(points: Sequence[tuple[int, float]], n_max: int) -> tuple[tuple[int, float], ...]:
    """JPA's measured ``(nodes, rate)`` points continued to ``n_max``: beyond the largest
    measured scale the rate grows linearly along the last measured segment's slope (one point:
    in proportion to the node count), never downwards. Flat instead would cap every job at the
    largest scale it was profiled at (half the pool when it arrived)."""
    pts = sorted(points)
    if not pts or pts[-1][0] >= n_max:
        return tuple(pts)
    (n1, r1) = pts[-1]
    slope = r1 / n1 if len(pts) == 1 else (r1 - pts[-2][1]) / (n1 - pts[-2][0])
    return (*pts, (n_max, r1 + max(0.0, slope) * (n_max - n1)))
