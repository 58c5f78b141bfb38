"""BFTrainer's MILP (Liu et al., "BFTrainer: Low-Cost Training of Neural Networks on Unfillable
Supercomputer Nodes", §3), solved with HiGHS through ``scipy.optimize.milp``.

At every event (nodes join or leave the pool, a Trainer completes or arrives) it decides how
many of the idle nodes ``N`` each Trainer ``j`` gets, maximising (Eq. 16)::

    sum_j T_fwd * O_j(N_j)  -  sum_j O_j(C_j) * (R_up_j * zu_j + R_dw_j * zd_j)

over ``N_j`` = 0 or ``N_min_j <= N_j <= N_max_j`` (Eq. 3-4, binaries ``yl``, ``yu``), each node
to at most one Trainer (Eq. 5), no migration (Eq. 6-10: a Trainer keeps a subset or a superset
of its current nodes ``C``; binaries ``u = x xor c`` and ``z``), scale-up/down indicators
``zu``, ``zd`` (Eq. 13-15), and ``O_j`` piecewise linear through the Trainer's measured points
(Eq. 11-12). ``T_fwd`` is the forward-looking time during which no node is expected to leave.

Three formulations of the same model:

* ``"nodes"`` is the paper's, variable for variable: ``x[j, n]`` per Trainer and node, ``u`` and
  ``z`` for the migration rule.
* ``"counts"`` drops the node index. The objective depends on the nodes only
  through ``N_j`` and ``C_j``, and every count vector with ``sum_j N_j <= |N|`` can be realised
  without migration (Trainers that shrink release nodes, Trainers that grow take free or
  released ones), so both have the same optimum; :func:`assign_nodes` turns the counts back into
  the node map ``x``. Tests check the two optima agree; benchmarks/bench_bftrainer_milp.py times
  both.

HiGHS has no special ordered sets, so Eq. 11's S2 condition (at most two adjacent weights
non-zero) is written with one binary per segment, its exact MILP equivalent; where ``O_j`` is
concave (with the point (0, 0)) the binaries are left out, since a maximiser then puts its weight
on adjacent points anyway.

A time limit returns HiGHS's best solution with its gap; as in the paper (§3.6), when the limit
binds the better of that solution and the current map is kept, and with no solution at all the
current map is kept. With the count formulations a local search (:func:`improve`: one Trainer's
count at a time, the largest gain first) then starts from the better map, so a decision never
keeps a map worse than a feasible one in hand (under load the ``counts`` formulation once kept a
current map 6x worse than what ``choices`` found in the same time).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from hadar.core.native_output import drop_solver_debug_lines

Formulation = Literal["choices", "counts", "nodes"]
DEFAULT_T_FWD_S = 120.0
"""Forward-looking time: BFTrainer's utilisation saturates at about 120 s (Fig. 9)."""
DEFAULT_TIME_LIMIT_S = 10.0
_DISP = False


@dataclass(frozen=True)
class Trainer:
    """One malleable job as the MILP sees it."""

    key: int
    n_min: int
    n_max: int
    points: tuple[tuple[int, float], ...]
    """``(nodes, gain per second)`` breakpoints of ``O_j``, nodes ascending and >= 1; (0, 0)
    is added. Between points ``O_j`` is linear; beyond the last it is not defined (use n_max)."""
    current: int = 0
    """``C_j``: nodes the Trainer holds now (among the nodes still in the pool)."""
    r_up: float = 0.0
    """Seconds a scale-up costs (the Trainer's current nodes wait meanwhile)."""
    r_dw: float = 0.0

    def __post_init__(self) -> None:
        if not 1 <= self.n_min <= self.n_max:
            raise ValueError(f"trainer {self.key}: need 1 <= n_min <= n_max")
        xs = [p[0] for p in self.points]
        if not xs or xs[0] < 1 or any(b <= a for a, b in zip(xs, xs[1:], strict=False)):
            raise ValueError(f"trainer {self.key}: points need ascending node counts >= 1")
        if self.r_up < 0 or self.r_dw < 0 or self.current < 0:
            raise ValueError(f"trainer {self.key}: costs and current nodes must be >= 0")

    @property
    def curve(self) -> tuple[tuple[int, float], ...]:
        """The breakpoints with (0, 0) first."""
        return ((0, 0.0), *self.points)

    def gain(self, n: float) -> float:
        """``O_j(n)`` by linear interpolation (0 at 0 nodes; the last point's value beyond it)."""
        xs, ys = zip(*self.curve, strict=True)
        return float(np.interp(n, xs, ys))


@dataclass(frozen=True)
class MilpResult:
    """The decision: nodes per Trainer, the objective, and how the solve went."""

    counts: Mapping[int, int]
    objective: float
    status: str
    """``optimal``, ``time-limit`` (HiGHS's best solution, with ``gap``), ``improved`` (the limit
    bound and a local search from the best map in hand beat it) or ``kept-current`` (the limit
    bound and the current map was the best in hand, or the solver found no solution)."""
    gap: float
    """HiGHS's relative optimality gap (0 when proven optimal)."""
    seconds: float
    variables: int = 0
    nodes_map: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    """With the ``nodes`` formulation, the node map ``x`` the solver chose."""
    time_limit_hit: bool = False
    """Whether HiGHS stopped at the time limit (the decision is then the best map in hand)."""


def objective_value(trainers: Sequence[Trainer], counts: Mapping[int, int], t_fwd: float) -> float:
    """Eq. 16 for a given decision."""
    total = 0.0
    for t in trainers:
        n = counts.get(t.key, 0)
        cost = t.r_up if n > t.current else t.r_dw if n < t.current else 0.0
        total += t_fwd * t.gain(n) - t.gain(t.current) * cost
    return total


def solve(
    trainers: Sequence[Trainer],
    nodes: int | Sequence[str],
    t_fwd: float = DEFAULT_T_FWD_S,
    *,
    time_limit: float = DEFAULT_TIME_LIMIT_S,
    formulation: Formulation = "choices",
    current_nodes: Mapping[int, Sequence[str]] | None = None,
) -> MilpResult:
    """Solve the MILP for ``trainers`` over ``nodes`` idle nodes (a count, or their names: the
    ``nodes`` formulation needs the names and ``current_nodes``, each Trainer's current nodes)."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    t0 = time.perf_counter()
    names = list(nodes) if not isinstance(nodes, int) else None
    total = nodes if isinstance(nodes, int) else len(nodes)
    if formulation == "nodes" and (names is None or current_nodes is None):
        raise ValueError("the nodes formulation needs node names and each Trainer's current nodes")
    current = {t.key: t.current for t in trainers}
    if not trainers:
        return MilpResult({}, 0.0, "optimal", 0.0, time.perf_counter() - t0)
    b = _Builder(total)
    for t in trainers:
        if formulation == "choices":
            b.add_choices(t, t_fwd, total)
        else:
            b.add_trainer(t, t_fwd, names if formulation == "nodes" else None, current_nodes)
    if formulation != "nodes":
        b.break_symmetry(trainers)
    if names is not None and formulation == "nodes":
        b.node_capacity(len(names))
    elif formulation == "choices":
        b.row(b.size_terms, 0.0, float(total))
    else:
        b.count_capacity([b.n_var[t.key] for t in trainers], total)
    a = coo_matrix((b.vals, (b.rows, b.cols)), shape=(len(b.lo_row), len(b.c))).tocsr()
    cost = np.asarray(b.c)
    scale = float(np.abs(cost).max()) or 1.0  # HiGHS prefers costs near 1; Eq. 16 is recomputed
    with drop_solver_debug_lines():  # HiGHS printf's a debug line in some solves
        res = milp(
            c=-cost / scale,
            constraints=LinearConstraint(a, np.asarray(b.lo_row), np.asarray(b.hi_row)),
            integrality=np.asarray(b.integrality),
            bounds=Bounds(np.asarray(b.lb), np.asarray(b.ub)),
            options={"time_limit": time_limit, "disp": _DISP},
        )
    keep_obj = objective_value(trainers, current, t_fwd)
    timed_out = res.status == 1  # HiGHS stopped at the time limit
    if res.x is None:
        return _best_in_hand(
            trainers, total, t_fwd, [], current, keep_obj, 1.0, t0, len(b.c), timed_out, formulation
        )
    counts = {t.key: b.count_of(t.key, res.x) for t in trainers}
    obj = objective_value(trainers, counts, t_fwd)
    gap = float(res.mip_gap) if getattr(res, "mip_gap", None) is not None else 0.0
    if res.status == 0:
        status = "optimal"
    elif formulation == "nodes" and obj >= keep_obj:  # its node map is HiGHS's
        status = "time-limit"
    else:
        return _best_in_hand(
            trainers,
            total,
            t_fwd,
            [(obj, counts)],
            current,
            keep_obj,
            gap,
            t0,
            len(b.c),
            timed_out,
            formulation,
        )
    seconds = time.perf_counter() - t0
    nodes_map: dict[int, tuple[str, ...]] = {}
    if formulation == "nodes" and names is not None:
        for t in trainers:
            cols = b.x_vars[t.key]
            nodes_map[t.key] = tuple(
                n for n, col in zip(names, cols, strict=True) if res.x[col] > 0.5
            )
    return MilpResult(
        counts,
        obj,
        status,
        gap if status != "optimal" else max(gap, 0.0),
        seconds,
        len(b.c),
        nodes_map,
        timed_out,
    )


def _best_in_hand(
    trainers: Sequence[Trainer],
    total: int,
    t_fwd: float,
    found: list[tuple[float, dict[int, int]]],
    current: Mapping[int, int],
    keep_obj: float,
    gap: float,
    t0: float,
    variables: int,
    timed_out: bool,
    formulation: Formulation,
) -> MilpResult:
    """The decision when HiGHS proved no optimum: the best of its solution (``found``), the
    current map and, for the count formulations, :func:`improve` from the better of them; never
    a map worse than one in hand. Status ``time-limit`` (HiGHS's solution), ``improved`` (the
    search beat both) or ``kept-current``."""
    best_obj, best, status = keep_obj, dict(current), "kept-current"
    for obj, counts in found:
        if obj >= best_obj:
            best_obj, best, status = obj, counts, "time-limit"
    if formulation != "nodes":
        searched = improve(trainers, total, t_fwd, best)
        searched_obj = objective_value(trainers, searched, t_fwd)
        if searched_obj > best_obj:
            best_obj, best, status = searched_obj, searched, "improved"
    return MilpResult(
        best,
        best_obj,
        status,
        gap,
        time.perf_counter() - t0,
        variables,
        time_limit_hit=timed_out,
    )


def improve(
    trainers: Sequence[Trainer], total: int, t_fwd: float, start: Mapping[int, int]
) -> dict[int, int]:
    """Local search from the feasible ``start``: change one Trainer's node count (0 or
    ``n_min..n_max``, within the pool) at a time, the largest gain in Eq. 16 first, until no change
    gains. Every count vector within the pool can be realised without migration (module
    docstring), so the result is feasible."""
    terms: dict[int, np.ndarray] = {}
    for t in trainers:
        ns = np.arange(t.n_max + 1)
        xs, ys = zip(*t.curve, strict=True)
        gain = np.interp(ns, xs, ys)
        cost = np.where(ns > t.current, t.r_up, np.where(ns < t.current, t.r_dw, 0.0))
        term = t_fwd * gain - t.gain(t.current) * cost
        term[1 : t.n_min] = -np.inf  # N_j = 0 or n_min <= N_j <= n_max
        terms[t.key] = term
    counts = {t.key: int(start.get(t.key, 0)) for t in trainers}
    for _ in range(4 * len(trainers) + 4):
        slack = total - sum(counts.values())
        best_gain, best_key, best_n = 1e-9, None, 0
        for t in trainers:
            now = counts[t.key]
            term = terms[t.key][: min(t.n_max, now + slack) + 1]
            n = int(np.argmax(term))
            if term[n] - terms[t.key][now] > best_gain:
                best_gain, best_key, best_n = float(term[n] - terms[t.key][now]), t.key, n
        if best_key is None:
            break
        counts[best_key] = best_n
    return counts


def assign_nodes(
    counts: Mapping[int, int],
    current: Mapping[int, Sequence[str]],
    pool: Sequence[str],
) -> dict[int, tuple[str, ...]]:
    """Node map for ``counts`` without migration: a Trainer that shrinks keeps the first of its
    current nodes (by ``pool`` order), one that grows keeps all and takes free nodes in ``pool``
    order (released ones included). Deterministic given the order of ``pool``."""
    order = {n: i for i, n in enumerate(pool)}
    held: dict[int, list[str]] = {}
    for key, nodes in current.items():
        mine = sorted((n for n in nodes if n in order), key=order.__getitem__)
        held[key] = mine[: counts.get(key, 0)]
    taken = {n for nodes in held.values() for n in nodes}
    free = [n for n in pool if n not in taken]
    out: dict[int, tuple[str, ...]] = {}
    for key in sorted(counts):
        mine = held.get(key, [])
        need = counts[key] - len(mine)
        if need > len(free):
            raise ValueError(f"counts ask for more nodes than the pool holds (trainer {key})")
        mine = mine + free[:need]
        free = free[need:]
        out[key] = tuple(mine)
    return out


def _is_concave(curve: Sequence[tuple[int, float]]) -> bool:
    slopes = [(y2 - y1) / (x2 - x1) for (x1, y1), (x2, y2) in zip(curve, curve[1:], strict=False)]
    return all(b <= a + 1e-12 for a, b in zip(slopes, slopes[1:], strict=False))


class _Builder:
    """Columns and sparse rows of the MILP, added one Trainer at a time."""

    def __init__(self, total_nodes: int) -> None:
        # The paper's BigM is "> |N|"; Eq. 10's second row needs N - C + sum u <= M when a
        # Trainer grows, up to 2 |N|, so M = 2 |N| + 1 (a smaller M cuts off valid decisions).
        self.total = total_nodes
        self.big_m = float(2 * total_nodes + 1)
        self.c: list[float] = []
        self.lb: list[float] = []
        self.ub: list[float] = []
        self.integrality: list[int] = []
        self.rows: list[int] = []
        self.cols: list[int] = []
        self.vals: list[float] = []
        self.lo_row: list[float] = []
        self.hi_row: list[float] = []
        self.n_var: dict[int, int] = {}
        self.x_vars: dict[int, list[int]] = {}
        self.choice_vars: dict[int, list[tuple[int, int]]] = {}
        self.size_terms: list[tuple[int, float]] = []

    def count_of(self, key: int, x: np.ndarray) -> int:
        """``N_j`` in a solution vector."""
        if key in self.choice_vars:
            return next((n for n, col in self.choice_vars[key] if x[col] > 0.5), 0)
        return round(float(x[self.n_var[key]]))

    def size_expr(self, key: int) -> list[tuple[int, float]]:
        """``N_j`` as a linear expression of the columns."""
        if key in self.choice_vars:
            return [(col, float(n)) for n, col in self.choice_vars[key] if n]
        return [(self.n_var[key], 1.0)]

    def break_symmetry(self, trainers: Sequence[Trainer]) -> None:
        """Interchangeable Trainers (same curve, limits, costs and current count; e.g. HPO
        trials) can swap decisions without changing Eq. 16, which makes branch-and-bound
        explore every permutation; ordering their sizes (``N_a >= N_b`` for consecutive ones,
        by key) keeps one optimum of each class and loses none."""
        groups: dict[tuple[object, ...], list[int]] = {}
        for t in sorted(trainers, key=lambda t: t.key):
            sig = (t.points, t.n_min, t.n_max, t.current, t.r_up, t.r_dw)
            groups.setdefault(sig, []).append(t.key)
        for keys in groups.values():
            for a, b in zip(keys, keys[1:], strict=False):
                neg = [(col, -v) for col, v in self.size_expr(b)]
                self.row([*self.size_expr(a), *neg], 0.0, np.inf)

    def add_choices(self, t: Trainer, t_fwd: float, total: int) -> None:
        """The ``choices`` formulation: one binary per feasible ``N_j`` (0 or N_min..N_max, at
        most ``|N|``) valued by Eq. 16 at that count; exactly one is chosen."""
        lost = t.gain(t.current)
        cols = []
        for n in [0, *range(t.n_min, min(t.n_max, total) + 1)]:
            cost = t.r_up if n > t.current else t.r_dw if n < t.current else 0.0
            col = self.var(0, 1, True, t_fwd * t.gain(n) - lost * cost)
            cols.append((n, col))
            if n:
                self.size_terms.append((col, float(n)))
        self.choice_vars[t.key] = cols
        self.row([(col, 1.0) for _, col in cols], 1.0, 1.0)

    def var(self, lo: float, hi: float, integer: bool, cost: float = 0.0) -> int:
        self.c.append(cost)
        self.lb.append(lo)
        self.ub.append(hi)
        self.integrality.append(1 if integer else 0)
        return len(self.c) - 1

    def row(self, terms: Sequence[tuple[int, float]], lo: float, hi: float) -> None:
        r = len(self.lo_row)
        for col, val in terms:
            self.rows.append(r)
            self.cols.append(col)
            self.vals.append(val)
        self.lo_row.append(lo)
        self.hi_row.append(hi)

    def add_trainer(
        self,
        t: Trainer,
        t_fwd: float,
        names: Sequence[str] | None,
        current_nodes: Mapping[int, Sequence[str]] | None,
    ) -> None:
        m, inf = self.big_m, np.inf
        cur = float(t.current)
        n = self.var(0, min(t.n_max, self.total), True)
        self.n_var[t.key] = n
        # Eq. 4: N_j = 0 or N_min <= N_j <= N_max
        yl, yu = self.var(0, 1, True), self.var(0, 1, True)
        self.row([(n, 1.0), (yl, m)], t.n_min, inf)  # N >= Nmin - M yl
        self.row([(n, 1.0), (yl, m)], -inf, m)  # N <= M (1 - yl)
        self.row([(n, -1.0), (yu, m)], -t.n_max, inf)  # Nmax >= N - M yu
        self.row([(n, 1.0), (yu, m)], -inf, m)  # N <= M (1 - yu)
        # Eq. 13-15: scale-up / scale-down indicators and their one-time cost (Eq. 14, 16)
        lost = t.gain(cur)
        zu = self.var(0, 1, True, -lost * t.r_up)
        zd = self.var(0, 1, True, -lost * t.r_dw)
        self.row([(n, 1.0), (zu, -(m - cur))], -inf, cur)  # N <= C + (M - C) zu
        self.row([(n, 1.0), (zu, -(cur + 1))], 0.0, inf)  # N >= (C + 1) zu
        self.row([(n, 1.0), (zd, m - (cur - 1))], -inf, m)  # N <= C-1 + (M-(C-1))(1-zd)
        self.row([(n, 1.0), (zd, cur)], cur, inf)  # N >= C (1 - zd)
        # Eq. 11-12: O_j(N_j) by weights on the breakpoints (S2 as segment binaries)
        curve = t.curve
        w = [self.var(0, 1, False, t_fwd * s) for _, s in curve]
        self.row([(wi, 1.0) for wi in w], 1.0, 1.0)
        self.row([*((wi, float(x)) for wi, (x, _) in zip(w, curve, strict=True)), (n, -1.0)], 0, 0)
        if not _is_concave(curve):
            seg = [self.var(0, 1, True) for _ in range(len(curve) - 1)]
            self.row([(s, 1.0) for s in seg], 1.0, 1.0)
            for i, wi in enumerate(w):
                near = [seg[k] for k in (i - 1, i) if 0 <= k < len(seg)]
                self.row([(wi, 1.0), *((s, -1.0) for s in near)], -inf, 0.0)
        if names is None or current_nodes is None:
            return
        # Eq. 1-2, 5-10: node variables, no migration
        mine = set(current_nodes.get(t.key, ()))
        c_vec = [1.0 if name in mine else 0.0 for name in names]
        x = [self.var(0, 1, True) for _ in names]
        self.x_vars[t.key] = x
        self.row([*((xi, 1.0) for xi in x), (n, -1.0)], 0, 0)  # N_j = sum_n x_jn
        u = [self.var(0, 1, True) for _ in names]
        for xi, ui, ci in zip(x, u, c_vec, strict=True):  # Eq. 9: u = x xor c
            self.row([(ui, 1.0), (xi, -1.0)], -inf, ci)
            self.row([(ui, 1.0), (xi, -1.0)], -ci, inf)
            self.row([(ui, 1.0), (xi, 1.0)], ci, inf)
            self.row([(ui, 1.0), (xi, 1.0)], -inf, 2 - ci)
        z = self.var(0, 1, True)
        c_sum = sum(c_vec)
        # Eq. 10: N - C >= sum u - M z ;  N - C <= -sum u + M (1 - z)
        self.row([(n, 1.0), *((ui, -1.0) for ui in u), (z, m)], c_sum, inf)
        self.row([(n, 1.0), *((ui, 1.0) for ui in u), (z, m)], -inf, c_sum + m)

    def node_capacity(self, count: int) -> None:
        """Eq. 5: each node to at most one Trainer."""
        for i in range(count):
            self.row([(x[i], 1.0) for x in self.x_vars.values()], 0.0, 1.0)

    def count_capacity(self, n_vars: Sequence[int], total: int) -> None:
        """Eq. 5 summed over the nodes: the Trainers hold at most ``|N|`` nodes."""
        self.row([(v, 1.0) for v in n_vars], 0.0, float(total))
