"""PolluxSched's production search: exact GPU counts by dynamic programming, then packing.

Pollux searches allocation matrices with a genetic algorithm (§4.3; the reference GA is in
``benchmarks/pollux_ga.py``). The objective is separable: Σ_j utility(SPEEDUP_j), and a job's
speedup depends only on its GPU type, its GPU count and whether it spans nodes, which the
no-needless-split rule fixes from the count. So:

1. **Types** (mixed clusters only): each job gets one GPU type, by Lagrangian prices per type
   (each job picks the type and count with the best utility minus price, prices rising until no
   type is over-asked).
2. **Counts**: per type, the exact best counts under the type's GPU total, by a max-plus DP over
   jobs (keeping the current count on the current type is worth the unpenalised speedup, every
   other choice pays REALLOC_FACTOR).
3. **Packing**: jobs that keep their count keep their exact GPUs; the others are placed largest
   first, on one node (best fit) when they fit one, else on the fewest nodes hosting no other
   distributed job. A job that cannot be placed takes the best count that can.
4. **Fill**: GPUs left free go, one best-utility move at a time, to jobs that gain from them.
"""

from __future__ import annotations

import numpy as np

from pollux.fitness import utility
from pollux.problem import AllocationProblem, job_counts, nodes_used

_NEG = -np.inf


def option_utilities(problem: AllocationProblem) -> np.ndarray:
    """``[job, type, K]`` utility of giving a job K GPUs of a type (−inf: not allowed), placed
    by the no-needless-split rule; the job's current (count, type) keeps its unpenalised value."""
    k = np.arange(problem.max_k + 1)
    local_ok = k[None, :] <= problem.node_size[:, None]  # [type, K]
    s = np.where(local_ok[None], problem.local, problem.spread)
    s = np.where(np.isfinite(s), s, np.nan)
    penalised = s * problem.factor[:, None, None]
    cur_k = job_counts(problem.current)
    cur_t = problem.current.sum(axis=1).argmax(axis=1)
    cur_spread = nodes_used(problem.current) > 1
    jobs = np.flatnonzero((cur_k > 0) & (cur_k <= problem.max_k))
    for j in jobs:
        table = problem.spread if cur_spread[j] else problem.local
        keep = table[j, cur_t[j], cur_k[j]]
        if np.isfinite(keep):
            penalised[j, cur_t[j], cur_k[j]] = np.fmax(keep, penalised[j, cur_t[j], cur_k[j]])
    penalised[:, :, 0] = 0.0
    u = utility(np.nan_to_num(penalised, nan=0.0), problem.p, problem.eps)
    u = np.where(np.isnan(penalised), _NEG, u)
    u[:, problem.capacity.sum(axis=0) == 0, 1:] = _NEG
    return u


def assign_types(u: np.ndarray, supply: np.ndarray, sweeps: int = 4) -> np.ndarray:
    """``[job]`` one GPU type per job, by Lagrangian prices on GPUs of each type."""
    num_types = u.shape[1]
    if num_types == 1:
        return np.zeros(u.shape[0], dtype=np.int64)
    k = np.arange(u.shape[2])
    price = np.zeros(num_types)

    def demand(prices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        val = u - prices[None, :, None] * k[None, None, :]
        flat = val.reshape(u.shape[0], -1).argmax(axis=1)
        t, kk = np.divmod(flat, u.shape[2])
        return np.bincount(t, weights=kk, minlength=num_types), t

    finite = u[np.isfinite(u)]
    hi_bound = float(finite.max() - finite.min()) + 1.0 if finite.size else 1.0
    for _ in range(sweeps):
        for t in range(num_types):
            lo, hi = 0.0, hi_bound
            trial = price.copy()
            trial[t] = 0.0
            if demand(trial)[0][t] <= supply[t]:
                price[t] = 0.0
                continue
            for _ in range(30):
                trial[t] = (lo + hi) / 2
                if demand(trial)[0][t] > supply[t]:
                    lo = trial[t]
                else:
                    hi = trial[t]
            price[t] = hi
    # A job that takes no GPUs at these prices goes to the type where one GPU serves it best.
    val = u - price[None, :, None] * k[None, None, :]
    best_pos = np.where(k[None, None, :] > 0, val, _NEG).max(axis=2)
    best: np.ndarray = best_pos.argmax(axis=1)
    return best


def best_counts(u: np.ndarray, supply: int) -> np.ndarray:
    """``[job]`` counts maximising Σ u[j, K_j] with Σ K_j <= supply (max-plus DP over jobs)."""
    num_jobs = u.shape[0]
    best = np.full(supply + 1, _NEG)
    best[0] = 0.0
    choice = np.zeros((num_jobs, supply + 1), dtype=np.int32)
    allowed = np.isfinite(u)
    allowed[:, 0] = True
    top = np.minimum(np.array([int(np.flatnonzero(row).max()) for row in allowed]), supply)
    for j in range(num_jobs):
        ks = np.flatnonzero(allowed[j, : top[j] + 1])
        shifted = np.full((len(ks), supply + 1), _NEG)
        for row, k in enumerate(ks):
            shifted[row, k:] = best[: supply + 1 - k] + u[j, k]
        pick = shifted.argmax(axis=0)
        choice[j] = ks[pick]
        best = shifted[pick, np.arange(supply + 1)]
    g = int(best.argmax())
    out = np.zeros(num_jobs, dtype=np.int64)
    for j in range(num_jobs - 1, -1, -1):
        out[j] = choice[j, g]
        g -= int(out[j])
    return out


class _Packer:
    """Places jobs on the nodes of one GPU type under the interference and split rules."""

    def __init__(self, capacity: np.ndarray, node_size: int) -> None:
        self.free = capacity.astype(np.int64).copy()
        self.dist = np.zeros(len(capacity), dtype=bool)
        self.size = max(int(node_size), 1)

    def feasible(self, k: int, own: np.ndarray | None = None) -> np.ndarray | None:
        """Where ``k`` GPUs would go (``[node]`` counts), with ``own`` counted as free; or None."""
        free: np.ndarray = self.free if own is None else self.free + own
        if k <= 0:
            return np.zeros_like(free)
        if k <= self.size:
            fits = np.flatnonzero(free >= k)
            if len(fits) == 0:
                return None
            if own is not None and own.sum() and own.argmax() in fits:
                node = int(own.argmax())  # stay where it is when it still fits
            else:
                node = int(fits[np.argmin(free[fits])])
            out = np.zeros_like(free)
            out[node] = k
            return out
        need = -(-k // self.size)
        reopen = self.dist & False
        if own is not None and np.count_nonzero(own) > 1:  # a distributed job's own nodes
            reopen = own > 0
        open_nodes = np.flatnonzero(~self.dist | reopen)
        order = open_nodes[np.argsort(-free[open_nodes], kind="stable")][:need]
        if len(order) < need or free[order].sum() < k:
            return None
        out = np.zeros_like(free)
        left = k
        for n in order:
            take = min(int(free[n]), left)
            out[n] = take
            left -= take
        return out

    def take(self, alloc: np.ndarray) -> None:
        self.free -= alloc
        if np.count_nonzero(alloc) > 1:
            self.dist |= alloc > 0

    def release(self, alloc: np.ndarray) -> None:
        self.free += alloc
        if np.count_nonzero(alloc) > 1:
            self.dist &= ~(alloc > 0)


def solve(problem: AllocationProblem) -> np.ndarray:
    """A ``[job, node, type]`` allocation for ``problem`` (see the module docstring)."""
    u = option_utilities(problem)
    num_jobs, num_nodes, num_types = problem.current.shape
    supply = problem.capacity.sum(axis=0)
    gtype = assign_types(u, supply)
    counts = np.zeros(num_jobs, dtype=np.int64)
    for t in range(num_types):
        members = np.flatnonzero(gtype == t)
        if len(members):
            counts[members] = best_counts(u[members, t], int(supply[t]))
    alloc = np.zeros_like(problem.current)
    packers = [_Packer(problem.capacity[:, t], problem.node_size[t]) for t in range(num_types)]
    cur_k = job_counts(problem.current)
    keep = (counts == cur_k) & (counts > 0)
    for j in np.flatnonzero(keep):
        t = int(gtype[j])
        held = problem.current[j, :, t]
        clash = np.count_nonzero(held) > 1 and bool(np.any(packers[t].dist[held > 0]))
        if held.sum() == counts[j] and np.all(held <= packers[t].free) and not clash:
            packers[t].take(held)
            alloc[j, :, t] = held
        else:
            keep[j] = False
    for j in sorted(np.flatnonzero((counts > 0) & ~keep), key=lambda j: (-counts[j], j)):
        t = int(gtype[j])
        placed = packers[t].feasible(int(counts[j]))
        if placed is None:
            k = _best_feasible(u[j, t], packers[t], int(counts[j]) - 1)
            placed = packers[t].feasible(k)
        assert placed is not None
        packers[t].take(placed)
        alloc[j, :, t] = placed
    _fill(problem, u, alloc, gtype, packers)
    return alloc


def _best_feasible(
    u_row: np.ndarray, packer: _Packer, k_max: int, own: np.ndarray | None = None
) -> int:
    best_k, best_u = 0, u_row[0]
    for k in range(1, k_max + 1):
        if u_row[k] > best_u and packer.feasible(k, own) is not None:
            best_k, best_u = k, u_row[k]
    return best_k


def _fill(
    problem: AllocationProblem,
    u: np.ndarray,
    alloc: np.ndarray,
    gtype: np.ndarray,
    packers: list[_Packer],
) -> None:
    """Give free GPUs away one best move at a time (a job grows, or a waiting job starts on any
    type with room) while that raises Σ utility."""
    k_now = job_counts(alloc)
    while any(p.free.sum() > 0 for p in packers):
        best = (0.0, -1, -1, -1)
        for j in range(problem.num_jobs):
            types = [int(gtype[j])] if k_now[j] else range(len(packers))
            for t in types:
                packer = packers[t]
                if packer.free.sum() == 0:
                    continue
                own = alloc[j, :, t]
                room = int(packer.free.sum() + own.sum())
                cur = u[j, t, k_now[j]] if k_now[j] else u[j, t, 0]
                for k in range(k_now[j] + 1, min(room, problem.max_k) + 1):
                    gain = u[j, t, k] - cur
                    if gain > best[0] and packer.feasible(k, own) is not None:
                        best = (gain, j, t, k)
        gain, j, t, k = best
        if j < 0:
            return
        own = alloc[j, :, t].copy()
        packers[t].release(own)
        placed = packers[t].feasible(k)
        assert placed is not None
        packers[t].take(placed)
        alloc[j, :, t] = placed
        gtype[j] = t
        k_now[j] = k
