"""Steps of a Hadar round that both round algorithms use: admission (the DP over a window of
the queue, the greedy remainder, backfill) and small helpers on candidates. The upgrade step
(moving running jobs onto faster idle GPUs) is the policy's (``HadarPolicy.upgrade``)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from hadar.core.jobs import Placement
from hadar.policy import RoundContext
from hadar.scheduler.config import HadarConfig
from primal_dual.dp import CandidateCache, QueueEntry, StateKey, plan_queue
from primal_dual.find_alloc import Candidate, best_candidate


def fits(cand: Candidate, free: np.ndarray) -> bool:
    """``(cand.alloc <= free).all()`` for a ``free`` without negative cells, through the
    placement's few cells."""
    flat = free.reshape(-1)
    return all(flat[i] >= n for i, n in zip(*cand.cells, strict=True))


def placement_of(cand: Candidate, ctx: RoundContext) -> Placement:
    """A candidate's placement ``{node: {type: count}}`` (as ``placement_from_matrix``, from its cells)."""
    nodes, types, n_types = (
        ctx.cluster.node_names,
        ctx.cluster.gpu_types,
        len(ctx.cluster.gpu_types),
    )
    out: dict[str, dict[str, int]] = {}
    for i, n in zip(*cand.cells, strict=True):
        h, k = divmod(i, n_types)
        out.setdefault(nodes[h], {})[types[k]] = n
    return out


def job_id_of(key: object) -> int:
    """The job id a Hadar queue entry is keyed by (HadarE keys its copies otherwise)."""
    if not isinstance(key, (int, np.integer)):
        raise TypeError(f"a Hadar queue entry is keyed by its job id, not {key!r}")
    return int(key)


def admit(
    entries: list[QueueEntry],
    free: np.ndarray,
    ctx: RoundContext,
    bounds_cache: CandidateCache,
    config: HadarConfig,
) -> tuple[list[tuple[object, Candidate]], dict[str, object]]:
    """Steps 3-5 of the round: DP window, greedy remainder, backfill. Mutates ``free``."""
    cache = bounds_cache
    key: StateKey = free.tobytes()
    total_free = int(free.sum())
    standalone: list[tuple[float, int]] = []
    for i, e in enumerate(entries):
        best = cache.best(e, free, key) if total_free >= e.request.num_gpus else None
        if best is not None:
            standalone.append((best[1], i))
    min_w = min((entries[i].request.num_gpus for _, i in standalone), default=1)
    k = int(
        np.clip(  # capped before rounding up: a huge window_factor is the largest window
            math.ceil(min(config.window_factor * total_free / min_w, config.window_max)),
            config.window_min,
            config.window_max,
        )
    )
    ranked = sorted(standalone, key=lambda t: (-t[0], t[1]))
    window_idx = sorted(i for _, i in ranked[:k])
    result = plan_queue([entries[i] for i in window_idx], free, cache, beam=config.beam)
    placed: list[tuple[object, Candidate]] = []
    taken: set[int] = set()

    def commit(i: int, cand: Candidate) -> None:
        nonlocal key, total_free
        placed.append((entries[i].key, cand))
        taken.add(i)
        cand.take_from(free)
        key = (
            cache.fresh_key()
        )  # a new state: hashing a large cluster's bytes per placement is costly
        total_free -= cand.gpus

    for wi, cand, _ in result.chosen:
        commit(window_idx[wi], cand)
    greedy = 0
    lineage = object()  # from here on ``free`` only loses GPUs
    for _, i in ranked[k:]:
        if total_free >= entries[i].request.num_gpus:
            best = cache.best(entries[i], free, key, lineage)
            if best is not None:
                commit(i, best[0])
                greedy += 1
    backfilled = (
        backfill(
            [entries[i] for i in range(len(entries)) if i not in taken],
            free,
            ctx,
            lambda e, c: placed.append((e.key, c)),
        )
        if config.backfill
        else 0
    )
    info: dict[str, object] = {
        "queue": len(entries),
        "eligible": len(standalone),
        "window": len(window_idx),
        "dp_admitted": len(result.chosen),
        "dp_exact": result.exact and len(window_idx) == len(standalone),
        "dp_states": result.states,
        "greedy_admitted": greedy,
        "backfilled": backfilled,
    }
    return placed, info


def backfill(
    entries: list[QueueEntry],
    free: np.ndarray,
    ctx: RoundContext,
    commit: Callable[[QueueEntry, Candidate], None],
) -> int:
    """Step 5: offer the GPUs still free, at zero price, to ``entries``, highest utility first.
    Mutates ``free``; returns how many were placed."""
    zero = CandidateCache(ctx.cluster.capacity, None)
    total = int(free.sum())
    key: StateKey = free.tobytes()

    def best(e: QueueEntry) -> Candidate | None:
        if total < e.request.num_gpus:
            return None
        b = best_candidate(zero.candidates(e, free, key), e.payoff)
        return None if b is None else b[0]

    scored = []
    for i, e in enumerate(entries):
        c = best(e)
        if c is not None:
            scored.append((-e.payoff(c), i))
    done = 0
    for _, i in sorted(scored):
        c = best(entries[i])
        if c is not None:
            commit(entries[i], c)
            c.take_from(free)
            total -= c.gpus
            key = zero.fresh_key()  # a new state (its bytes would be a large cluster's copy)
            done += 1
    return done
