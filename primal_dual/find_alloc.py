"""FIND_ALLOC: candidate placements of one gang job on the free GPUs, and the best by payoff.

For every candidate bottleneck level (a distinct throughput a free GPU offers the job, fastest
first) the eligible GPUs are those at least that fast, and three placements are built:

* consolidated: all W tasks on the single node where they cost least;
* fewest nodes: when no node has W eligible GPUs, fill the nodes with the most eligible GPUs;
* non-consolidated: the W cheapest eligible GPUs anywhere, across nodes.

A placement's rate is its bottleneck: the minimum over the cells it uses of the consolidated
rate (one node) or the unconsolidated rate (several nodes, which carries the communication
cost). Its per-round cost is the sum of current prices of the GPUs it takes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class JobRequest:
    """What FIND_ALLOC needs to know about a job: gang size and per-cell rates ``[node, type]``."""

    num_gpus: int
    rates_cons: np.ndarray
    rates_unc: np.ndarray
    node_groups: np.ndarray | None = None
    """Optional static group id per node: equal ids = equal capacity and rates (see
    :func:`static_node_groups`); lets large clusters be pruned cheaply."""


@dataclass(frozen=True)
class Candidate:
    """A placement ``alloc[node, type]`` with its bottleneck rate and per-round price cost."""

    alloc: np.ndarray
    rate: float
    unit_cost: float
    nodes: int
    kept: bool = False
    """The job's placement of last round, kept (no checkpoint-restart)."""

    @property
    def consolidated(self) -> bool:
        return self.nodes == 1

    @cached_property
    def gpus(self) -> int:
        """GPUs the placement takes."""
        return int(self.alloc.sum())

    @cached_property
    def cells(self) -> tuple[list[int], list[int]]:
        """The placement sparsely: flat ``[node, type]`` indices (ascending) and their GPU counts."""
        idx = np.flatnonzero(self.alloc)
        return idx.tolist(), self.alloc.ravel()[idx].tolist()

    def take_from(self, free: np.ndarray) -> None:
        """``free -= alloc`` in place, touching only the placement's cells."""
        if not free.flags.c_contiguous:
            free -= self.alloc
            return
        flat = free.reshape(-1)  # a view of a C-contiguous array
        for i, n in zip(*self.cells, strict=True):
            flat[i] -= n


class SparseCandidate(Candidate):
    """A :class:`Candidate` built from its cells (flat ``[node, type]`` indices, ascending, and
    their GPU counts), whose dense read-only ``alloc`` is built on first use: the DP and a greedy
    pass on a large cluster read only the cells of the many candidates they build."""

    alloc = cached_property(lambda self: self._dense())

    def __init__(
        self,
        shape: tuple[int, int],
        cells: tuple[list[int], list[int]],
        rate: float,
        unit_cost: float,
        nodes: int,
    ) -> None:
        for name, value in (("rate", rate), ("unit_cost", unit_cost), ("nodes", nodes)):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "kept", False)
        self.__dict__.update(gpus=sum(cells[1]), cells=cells, _shape=shape)

    def _dense(self) -> np.ndarray:
        alloc = np.zeros(self.__dict__["_shape"], dtype=np.int64)
        alloc.flat[self.cells[0]] = self.cells[1]
        alloc.flags.writeable = False
        return alloc


def _take(
    order_cells: np.ndarray, counts: np.ndarray, need: int, shape: tuple[int, int]
) -> np.ndarray:
    """Take ``need`` GPUs from cells in ``order_cells`` order (flat indices) with ``counts`` free."""
    alloc = np.zeros(shape[0] * shape[1], dtype=np.int64)
    c = counts[order_cells]
    cum = np.cumsum(c)
    last = int(np.searchsorted(cum, need))
    alloc[order_cells[:last]] = c[:last]
    alloc[order_cells[last]] = need - (int(cum[last - 1]) if last > 0 else 0)
    return alloc.reshape(shape)


def _cheapest_single_node(
    efree: np.ndarray, price: np.ndarray, eligible: np.ndarray, fits: np.ndarray, w: int
) -> np.ndarray:
    """Vectorised over nodes: on each node take W eligible GPUs cheapest type first; pick the
    node with the lowest total (first node on ties) and return its allocation."""
    p = np.where(eligible, price, np.inf)[fits]
    f = efree[fits]
    if p.shape[1] == 1 or bool(((f > 0).sum(axis=1) <= 1).all()):
        # Fast path: one eligible type per node, so the cost is W x that cell's price.
        col = np.argmax(f > 0, axis=1)
        rows = np.arange(len(fits))
        i = int(np.argmin(p[rows, col]))
        alloc = np.zeros_like(efree)
        alloc[fits[i], col[i]] = w
        return alloc
    order = np.argsort(p, axis=1, kind="stable")
    ps = np.take_along_axis(p, order, axis=1)
    fs = np.take_along_axis(f, order, axis=1)
    before = np.cumsum(fs, axis=1) - fs
    take = np.clip(w - before, 0, fs)
    cost = (np.where(take > 0, ps, 0.0) * take).sum(axis=1)
    i = int(np.argmin(cost))
    alloc = np.zeros_like(efree)
    alloc[fits[i], order[i]] = take[i]
    return alloc


def _cheapest_cells(flat_free: np.ndarray, flat_price: np.ndarray, w: int) -> np.ndarray:
    """Flat indices of eligible cells, cheapest first (ties by position), enough to hold W GPUs.

    Avoids sorting every cell: cells strictly cheaper than the W-th cheapest cell price are
    sorted; cells at exactly that price follow in position order, at most W of them.
    """
    cells = np.flatnonzero(flat_free)
    prices = flat_price[cells]
    k = min(w, cells.size) - 1
    kth = np.partition(prices, k)[k]
    cheaper = cells[prices < kth]
    cheaper = cheaper[np.lexsort((cheaper, flat_price[cheaper]))]
    at_kth = cells[prices == kth][:w]
    return np.concatenate([cheaper, at_kth])


def _make(
    alloc: np.ndarray, req: JobRequest, price: np.ndarray, kept: bool = False
) -> Candidate | None:
    used = alloc > 0
    nodes = int(used.any(axis=1).sum())
    rates = req.rates_cons if nodes == 1 else req.rates_unc
    rate = float(rates[used].min())
    if rate <= 0:
        return None
    return Candidate(
        alloc=alloc,
        rate=rate,
        unit_cost=float((price[used] * alloc[used]).sum()),
        nodes=nodes,
        kept=kept,
    )


def kept_candidate(
    alloc: np.ndarray, req: JobRequest, free: np.ndarray, price: np.ndarray
) -> Candidate | None:
    """A running job's current placement as a candidate, if its GPUs are all free in ``free``."""
    if not (alloc <= free).all():
        return None
    return _make(alloc, req, price, kept=True)


def kept_candidate_on_cells(
    alloc: np.ndarray, idx: np.ndarray, req: JobRequest, price: np.ndarray
) -> Candidate | None:
    """``kept_candidate(alloc, req, alloc, price)`` through the placement's cells ``idx``
    (``np.flatnonzero(alloc)``): the same rate and cost, bit for bit (the same elements in the
    same order), without a pass over the whole cluster."""
    if idx.size == 0:
        return kept_candidate(alloc, req, alloc, price)
    if idx.size == 1:  # most kept placements: one cell (a minimum and a sum of one element)
        i = int(idx[0])
        h, k = divmod(i, alloc.shape[1])
        rate = float(req.rates_cons[h, k])
        if rate <= 0:
            return None
        n = int(alloc[h, k])
        cand = Candidate(
            alloc=alloc, rate=rate, unit_cost=float(price[h, k] * n), nodes=1, kept=True
        )
        cand.__dict__["cells"] = ([i], [n])
        return cand
    rows, cols = np.divmod(idx, alloc.shape[1])
    nodes = len(set(rows.tolist()))
    rate = float((req.rates_cons if nodes == 1 else req.rates_unc)[rows, cols].min())
    if rate <= 0:
        return None
    cost = float((price[rows, cols] * alloc[rows, cols]).sum())
    cand = Candidate(alloc=alloc, rate=rate, unit_cost=cost, nodes=nodes, kept=True)
    cand.__dict__["cells"] = (idx.tolist(), alloc.ravel()[idx].tolist())  # as Candidate.cells
    return cand


PRUNE_ABOVE_NODES = 64
"""Clusters with more nodes are pruned to interchangeable-node representatives first."""

SMALL_CELLS = 256
"""States with at most this many [node, type] cells use the pure-Python construction
(numpy's per-call overhead dominates there); larger ones the vectorised one. Same results."""


def candidate_allocations(req: JobRequest, free: np.ndarray, price: np.ndarray) -> list[Candidate]:
    """All distinct FIND_ALLOC candidates for ``req`` on ``free`` GPUs at ``price`` (may be empty)."""
    if free.shape[0] > PRUNE_ABOVE_NODES:
        keep = relevant_nodes(req, free, price)
        if keep.size < free.shape[0]:
            sub = JobRequest(req.num_gpus, req.rates_cons[keep], req.rates_unc[keep])
            n_types = free.shape[1]
            rows = keep.tolist()
            out: list[Candidate] = []
            for c in _dispatch(sub, free[keep], price[keep]):
                # the placement on the whole cluster by its cells (``keep`` ascends, so do they):
                # a dense copy per candidate would hold a whole cluster's matrix each
                sub_cells, counts = c.cells
                cells = [rows[i // n_types] * n_types + i % n_types for i in sub_cells]
                shape = (free.shape[0], n_types)
                out.append(SparseCandidate(shape, (cells, counts), c.rate, c.unit_cost, c.nodes))
            return out
    return _dispatch(req, free, price)


def _dispatch(req: JobRequest, free: np.ndarray, price: np.ndarray) -> list[Candidate]:
    return (
        _candidates_small(req, free, price)
        if free.size <= SMALL_CELLS
        else _candidates(req, free, price)
    )


def relevant_nodes(req: JobRequest, free: np.ndarray, price: np.ndarray) -> np.ndarray:
    """Indices (ascending) of the nodes any candidate can use: nodes identical in free GPUs,
    prices and rates are interchangeable and every construction breaks ties by position, so
    only the first W nodes of each identical group matter. Exact, not a heuristic."""
    small = None if req.node_groups is None else _small_group_keys(req.node_groups, free)
    if small is not None:
        order = np.argsort(small, kind="stable")  # a radix sort: 16-bit keys
        g_sorted = small[order]
    elif req.node_groups is not None and free.max(initial=0) < 64 and free.shape[1] <= 9:
        # Prices follow from (capacity, free), capacity and rates from the static group: one
        # integer key per node, and a stable sort keeps each group's nodes in position order.
        packed = (free.astype(np.int64) * (64 ** np.arange(free.shape[1]))).sum(axis=1)
        key = req.node_groups.astype(np.int64) * (64 ** free.shape[1]) + packed
        order = np.argsort(key, kind="stable")
        g_sorted = key[order]
    else:
        rows = np.ascontiguousarray(
            np.concatenate([free.astype(float), price, req.rates_cons, req.rates_unc], axis=1)
        )
        void = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()
        group = np.unique(void, return_inverse=True)[1].ravel()
        order = np.argsort(group, kind="stable")
        g_sorted = group[order]
    return np.sort(order[rank_in_runs(g_sorted) < req.num_gpus])


def _small_group_keys(node_groups: np.ndarray, free: np.ndarray) -> np.ndarray | None:
    """One 16-bit key per node, equal exactly for nodes of one static group with equal free
    GPUs (the grouping :func:`relevant_nodes` needs: which nodes are interchangeable, not in what
    order the groups come), or None when the mixed-radix key ``group, free GPUs per type`` (base:
    the most free GPUs of a cell + 1) does not fit in 16 bits or a cell is negative. NumPy sorts
    16-bit keys stably by radix sort, several times faster than 64-bit ones."""
    if free.size == 0 or free.shape[1] > 9:
        return None
    lo, hi = int(free.min()), int(free.max())
    base = hi + 1
    n_groups = int(node_groups.max(initial=0)) + 1
    if lo < 0 or n_groups * base ** free.shape[1] > 2**16:
        return None
    digits = free.astype(np.int64) @ (base ** np.arange(free.shape[1], dtype=np.int64))
    key: np.ndarray = (node_groups.astype(np.int64) * base ** free.shape[1] + digits).astype(
        np.uint16
    )
    return key


def rank_in_runs(sorted_keys: np.ndarray) -> np.ndarray:
    """Each element's position within its run of equal keys (0 for the first of each run)."""
    index = np.arange(sorted_keys.size)
    new_run = np.empty(sorted_keys.size, dtype=bool)
    new_run[:1] = True
    np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=new_run[1:])
    return index - np.maximum.accumulate(np.where(new_run, index, 0))


def static_node_groups(
    capacity: np.ndarray, rates_cons: np.ndarray, rates_unc: np.ndarray
) -> np.ndarray:
    """A group id per node such that equal ids have equal capacity rows and rates."""
    rows = np.ascontiguousarray(
        np.concatenate([capacity.astype(float), rates_cons, rates_unc], axis=1)
    )
    void = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()
    return np.unique(void, return_inverse=True)[1].ravel()


def _candidates(req: JobRequest, free: np.ndarray, price: np.ndarray) -> list[Candidate]:
    w = req.num_gpus
    shape = free.shape
    runnable = (free > 0) & (req.rates_cons > 0)
    if int(free[runnable].sum()) < w:
        return []
    levels = np.unique(req.rates_cons[runnable])[::-1]
    flat_free = free.ravel()
    flat_price = price.ravel()
    out: list[Candidate] = []
    seen: set[bytes] = set()

    def add(alloc: np.ndarray) -> None:
        key = alloc.tobytes()
        if key in seen:
            return
        seen.add(key)
        cand = _make(alloc, req, price)
        if cand is not None:
            out.append(cand)

    for level in levels:
        eligible = runnable & (req.rates_cons >= level)
        efree = np.where(eligible, free, 0)
        per_node = efree.sum(axis=1)
        if int(per_node.sum()) < w:
            continue
        order = _cheapest_cells(efree.ravel(), flat_price, w)
        fits = np.flatnonzero(per_node >= w)
        if fits.size:
            # (a) consolidated: the node where W GPUs cost least.
            add(_cheapest_single_node(efree, price, eligible, fits, w))
        else:
            # (b) fewest nodes: nodes with the most eligible GPUs first.
            node_order = np.lexsort((np.arange(shape[0]), -per_node))
            cum = np.cumsum(per_node[node_order])
            chosen = node_order[: int(np.searchsorted(cum, w)) + 1]
            sub = np.zeros_like(efree)
            sub[chosen] = efree[chosen]
            add(_take(_cheapest_cells(sub.ravel(), flat_price, w), flat_free, w, shape))
        # (c) non-consolidated: the W cheapest eligible GPUs anywhere.
        add(_take(order, flat_free, w, shape))
    return out


def _candidates_small(req: JobRequest, free: np.ndarray, price: np.ndarray) -> list[Candidate]:
    """:func:`_candidates` on Python lists: identical placements, rates and order; costs equal up
    to float summation order."""
    n_nodes, n_types = free.shape
    f, p = free.tolist(), price.tolist()
    rc, ru = req.rates_cons.tolist(), req.rates_unc.tolist()
    w = req.num_gpus
    runnable = [
        (h, k) for h in range(n_nodes) for k in range(n_types) if f[h][k] > 0 and rc[h][k] > 0
    ]
    if sum(f[h][k] for h, k in runnable) < w:
        return []
    out: list[Candidate] = []
    seen: set[tuple[tuple[int, int, int], ...]] = set()

    def add(take: list[tuple[int, int, int]]) -> None:
        key = tuple(sorted(take))
        if key in seen:
            return
        seen.add(key)
        nodes = len({h for h, _, _ in key})
        rates = rc if nodes == 1 else ru
        rate = min(rates[h][k] for h, k, _ in key)
        if rate <= 0:
            return
        alloc = np.zeros((n_nodes, n_types), dtype=np.int64)
        for h, k, c in key:
            alloc[h, k] = c
        out.append(Candidate(alloc, float(rate), float(sum(p[h][k] * c for h, k, c in key)), nodes))

    def take_from(cells: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
        need, taken = w, []
        for h, k in cells:
            t = min(f[h][k], need)
            taken.append((h, k, t))
            need -= t
            if need == 0:
                break
        return taken

    for level in sorted({rc[h][k] for h, k in runnable}, reverse=True):
        eligible = [(h, k) for h, k in runnable if rc[h][k] >= level]
        per_node = [0] * n_nodes
        for h, k in eligible:
            per_node[h] += f[h][k]
        if sum(per_node) < w:
            continue
        order = sorted(eligible, key=lambda c: (p[c[0]][c[1]], c[0] * n_types + c[1]))
        fits = [h for h in range(n_nodes) if per_node[h] >= w]
        if fits:  # (a) consolidated on the cheapest node
            types_on: dict[int, list[int]] = {}  # eligible types per node, in cell order
            for h, k in eligible:
                types_on.setdefault(h, []).append(k)
            best: tuple[float, list[tuple[float, int]], int] | None = None
            for h in fits:
                cells = sorted((p[h][k], k) for k in types_on[h])
                need, cost = w, 0.0  # take_from's cost, without building its list
                for price_hk, k in cells:
                    t = min(f[h][k], need)
                    cost += price_hk * t
                    need -= t
                    if need == 0:
                        break
                if best is None or cost < best[0]:
                    best = (cost, cells, h)
            add(take_from([(best[2], k) for _, k in best[1]]))  # type: ignore[index]
        else:  # (b) fewest nodes
            chosen, total = set(), 0
            for h in sorted(range(n_nodes), key=lambda h: (-per_node[h], h)):
                chosen.add(h)
                total += per_node[h]
                if total >= w:
                    break
            add(take_from([c for c in order if c[0] in chosen]))
        add(take_from(order))  # (c) the W cheapest eligible GPUs anywhere
    return out


def best_candidate(
    candidates: list[Candidate], payoff: Callable[[Candidate], float]
) -> tuple[Candidate, float] | None:
    """The candidate with the highest payoff (first wins ties), or None if none is positive."""
    best: tuple[Candidate, float] | None = None
    for cand in candidates:
        value = payoff(cand)
        if value > 0 and (best is None or value > best[1]):
            best = (cand, value)
    return best
