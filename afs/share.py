"""AFS's GPU shares (Hwang et al., NSDI 2021, Algorithm 1 "AFS-L"): pure functions.

At a churn event AFS hands the cluster's GPUs out one at a time, each to the job of top priority
under the paper's pairwise rule (its Eq. 3). For two jobs, ``a`` the shorter and ``b`` the longer
by their length at their current share (a job with no GPU is infinitely long), ``b`` takes the
GPU iff

    (p'_b - p_b) / p'_b  >  (p'_a - p_a) / p_a                              (Eq. 3)

where ``p`` is a job's throughput at its current share and ``p'`` at one more GPU. Two jobs with
no GPU compare by their length on one GPU, the shorter first (stage one). Writing ``u = (p' -
p) / p'`` (a job's gain as the longer one) and ``v = (p' - p) / p`` (as the shorter; infinite at
p = 0), the longer job wins iff ``u_longer > v_shorter``.

**The rule is not transitive.** The paper's Appendix C proves only the chain "b beats a, c beats
b => c beats a" (each time the longer one winning). Shorter jobs winning do not chain: jobs
a < b < c by length with p'/p = 1.3, 1.4, 1.5 give a > b (u_b = 0.29 <= v_a = 0.3), b > c (u_c
= 0.33 <= v_b = 0.4) and c > a (u_c > v_a): a cycle. Algorithm 1's ``TOPPRIORITY`` (a linear
scan keeping a champion) then depends on the order it scans the jobs in, which the paper leaves
open ("any job", "at random"). We fix it: **the scan goes through the jobs in increasing length
at their current share** (jobs with no GPU last, by their length on one GPU; ties by job index).
:func:`afs_shares_literal` is Algorithm 1 exactly, with that order, O(GPUs x jobs);
:func:`afs_shares` returns the same shares (a property test checks it) in
O(GPUs x log(states)) typical time: scanned in that order, each challenger is the longer job, so
the champion changes exactly at the first later job with ``u > v_champion`` (ties in length
aside, which are scanned one by one) -- a "first value above a threshold" query on a max segment
tree over every (job, share) state sorted by length. Only the job that received a GPU changes,
so the scan's chain of champions is kept and redone only from the first champion at or after
the changed positions. Whenever some job beats every other (no cycle at the top), every scan
order returns it, so the chosen order only decides genuine cycles.

Decisions the paper leaves open, made here (docs/baselines.md, "AFS"):

* A job takes no GPU that does not raise its throughput: its curve is cut at its first
  non-increase (and at its ``max_gpus``); such a job is left out of the hand-out, and GPUs no
  job can use stay idle (the paper's ``while m > 0`` would give them to a job gaining nothing).
* A job with ``min_gpus > 1`` receives its first ``min_gpus`` GPUs in one hand-out (``p'`` is its
  throughput at ``min_gpus``), only while that many are left.
* Heterogeneous AFS (none of the papers has it, :func:`afs_shares` with several GPU types): the
  candidates are (job, GPU type) pairs, each with the job's length and throughputs on that type;
  a job without GPUs may start on any type, a job with GPUs grows only on its type. The rule and
  the scan order are the same over pairs.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

INF = float("inf")


@dataclass(frozen=True)
class ShareJob:
    """One job as AFS sees it at a churn event.

    ``curves[k][g]`` is the throughput with ``g`` GPUs of type ``k`` (any unit shared by
    ``remaining``, e.g. samples/s and samples); entries below ``min_gpus`` are ignored and the
    curve's length bounds the share (its ``max_gpus + 1``)."""

    remaining: float
    curves: tuple[tuple[float, ...], ...]
    min_gpus: int = 1

    def __post_init__(self) -> None:
        if not self.remaining > 0:
            raise ValueError(f"remaining work must be > 0, got {self.remaining!r}")
        if self.min_gpus < 1:
            raise ValueError(f"min_gpus must be >= 1, got {self.min_gpus!r}")


def usable_cap(curve: Sequence[float], min_gpus: int) -> int:
    """The largest share worth having on ``curve``: from ``min_gpus`` (0 when the job cannot run
    there), up to the first GPU that does not raise the throughput."""
    if len(curve) <= min_gpus or not curve[min_gpus] > 0:
        return 0
    cap = min_gpus
    while cap + 1 < len(curve) and curve[cap + 1] > curve[cap]:
        cap += 1
    return cap


@dataclass(frozen=True)
class _State:
    """Job ``job`` holding ``cnt`` GPUs of type ``gtype``, as a candidate for one more step."""

    job: int
    gtype: int
    cnt: int
    step: int
    p: float
    p_next: float
    length: float
    """Remaining work / p (inf with no GPU)."""
    len_one: float
    """Remaining work / throughput at the first share (pending jobs' stage-one key)."""
    u: float = field(init=False)
    v: float = field(init=False)

    def __post_init__(self) -> None:
        gain = self.p_next - self.p
        object.__setattr__(self, "u", gain / self.p_next)
        object.__setattr__(self, "v", gain / self.p if self.p > 0 else INF)

    @property
    def pending(self) -> bool:
        return self.cnt == 0


def _state(job: ShareJob, j: int, k: int, cnt: int) -> _State:
    curve = job.curves[k]
    step = job.min_gpus if cnt == 0 else 1
    p = curve[cnt] if cnt else 0.0
    return _State(
        j,
        k,
        cnt,
        step,
        p,
        curve[cnt + step],
        job.remaining / p if p > 0 else INF,
        job.remaining / curve[job.min_gpus],
    )


def _scan_key(s: _State) -> tuple[int, float, int, int]:
    """The scan order: by length at the current share, jobs without GPUs last by their length on
    their first share; ties by job index, then GPU type."""
    return (1, s.len_one, s.job, s.gtype) if s.pending else (0, s.length, s.job, s.gtype)


def _winner(champion: _State, challenger: _State) -> _State:
    """Algorithm 1's ``TOPPRIORITY`` loop body, as written: the champion ``j*`` against ``j``."""
    a, b = champion, challenger
    if a.pending and b.pending:
        return a if a.len_one < b.len_one else b
    if a.length >= b.length:
        a, b = b, a
    return b if (b.p_next - b.p) / b.p_next > (a.p_next - a.p) / a.p else a


def top_priority(states: Sequence[_State]) -> _State:
    """Algorithm 1's ``TOPPRIORITY`` over ``states`` in the order given."""
    champion = states[0]
    for s in states:
        champion = _winner(champion, s)
    return champion


def _check(jobs: Sequence[ShareJob], counts: Sequence[int]) -> None:
    for j, job in enumerate(jobs):
        if len(job.curves) != len(counts):
            raise ValueError(f"job {j}: {len(job.curves)} curves for {len(counts)} GPU types")


def afs_shares_literal(jobs: Sequence[ShareJob], counts: Sequence[int]) -> list[tuple[int, int]]:
    """Algorithm 1 (AFS-L) exactly: ``M`` times, scan every candidate (in increasing length) with
    ``TOPPRIORITY`` and give the winner one GPU. Returns ``(GPU type, share)`` per job (type -1,
    share 0 for a job left without GPUs). O(GPUs x candidates): the reference for tests."""
    return _hand_out(jobs, counts, lambda cands: top_priority(sorted(cands, key=_scan_key)))


def _winner_unknown_lengths(champion: _State, challenger: _State) -> _State:
    """AFS-P's ``TOPPRIORITY`` body: Eq. 3 both ways (either job as the shorter); the challenger
    wins only if Eq. 3 says so with it as the longer. Neither way true: the paper picks at random;
    we keep the champion (so the scan order decides)."""
    a, b = champion, challenger
    if b.p_next > 0 and a.p > 0 and (b.p_next - b.p) / b.p_next > (a.p_next - a.p) / a.p:
        return b
    return a


def afs_p_shares(jobs: Sequence[ShareJob], counts: Sequence[int]) -> list[tuple[int, int]]:
    """AFS-P's hand-out without job lengths (the paper's modified ``TOPPRIORITY``), scanning the
    jobs in the order given (:func:`_winner_unknown_lengths`); ``remaining`` is not used.
    O(GPUs x jobs)."""

    def top(cands: list[_State]) -> _State:
        champion = cands[0]
        for s in cands:
            champion = _winner_unknown_lengths(champion, s)
        return champion

    return _hand_out(jobs, counts, top)


def _hand_out(
    jobs: Sequence[ShareJob], counts: Sequence[int], top: Callable[[list[_State]], _State]
) -> list[tuple[int, int]]:
    """Give one GPU (a job's first: ``min_gpus``) at a time to ``top(candidates)`` (candidates
    in job order, then type order) until no job can take one."""
    _check(jobs, counts)
    free = [int(c) for c in counts]
    caps = [[usable_cap(c, job.min_gpus) for c in job.curves] for job in jobs]
    held: list[tuple[int, int]] = [(-1, 0) for _ in jobs]
    while True:
        cands = []
        for j, job in enumerate(jobs):
            k0, cnt = held[j]
            for k in range(len(counts)) if cnt == 0 else (k0,):
                step = job.min_gpus if cnt == 0 else 1
                if cnt + step <= caps[j][k] and step <= free[k]:
                    cands.append(_state(job, j, k, cnt))
        if not cands:
            return held
        best = top(cands)
        held[best.job] = (best.gtype, best.cnt + best.step)
        free[best.gtype] -= best.step


class _MaxTree:
    """A max segment tree over ``values`` (-inf = empty) answering "first leaf at or after ``lo``
    whose value exceeds ``thr``"."""

    def __init__(self, values: np.ndarray) -> None:
        n = len(values)
        self.size = size = 1 << max(1, (n - 1).bit_length())
        tree = np.full(2 * size, -INF)
        tree[size : size + n] = values
        for level in range(size.bit_length() - 2, -1, -1):
            lo = 1 << level
            tree[lo : 2 * lo] = np.maximum(tree[2 * lo : 4 * lo : 2], tree[2 * lo + 1 : 4 * lo : 2])
        self.tree: list[float] = tree.tolist()

    def set(self, i: int, value: float) -> None:
        tree = self.tree
        i += self.size
        tree[i] = value
        i >>= 1
        while i:
            left, right = tree[2 * i], tree[2 * i + 1]
            tree[i] = left if left > right else right
            i >>= 1

    def first_above(self, lo: int, thr: float) -> int:
        """The first leaf index >= ``lo`` with value > ``thr``, or -1."""
        tree, size = self.tree, self.size
        if lo >= size:
            return -1
        i = lo + size
        while True:
            if tree[i] > thr:
                while i < size:
                    i = 2 * i if tree[2 * i] > thr else 2 * i + 1
                return i - size
            while i & 1:
                i >>= 1
            if i == 0:
                return -1
            i += 1


@dataclass
class _Table:
    """Every (job, type, share) state, in scan order, as plain lists indexed by position."""

    job: list[int]
    gtype: list[int]
    cnt: list[int]
    step: list[int]
    pending: list[bool]
    u: list[float]
    v: list[float]
    tie_end: list[int]
    """The last position whose scan key ties with this one's length (or first-share length)."""
    first_state: dict[tuple[int, int], int]
    """Per (job, type): the index of its state 0 before sorting (its other states follow)."""
    position: list[int]
    """Position in scan order of each state, by index before sorting."""
    min_gpus: list[int]

    def pos(self, j: int, k: int, cnt: int) -> int:
        """The position of job ``j`` holding ``cnt`` GPUs of type ``k`` (-1: no such state)."""
        first = self.first_state.get((j, k))
        if first is None:
            return -1
        return self.position[first + (cnt - self.min_gpus[j] + 1 if cnt else 0)]


def _table(jobs: Sequence[ShareJob], caps: list[list[int]]) -> _Table:
    """The states of :func:`_state`, computed with numpy (same float operations) and sorted by
    :func:`_scan_key`."""
    pairs = [(j, k, cap) for j, row in enumerate(caps) for k, cap in enumerate(row) if cap]
    if not pairs:
        return _Table([], [], [], [], [], [], [], [], {}, [], [])
    pj = np.array([j for j, _, _ in pairs])
    pk = np.array([k for _, k, _ in pairs])
    pcap = np.array([c for _, _, c in pairs])
    pmin = np.array([jobs[j].min_gpus for j, _, _ in pairs])
    pwork = np.array([jobs[j].remaining for j, _, _ in pairs])
    curves = [np.asarray(jobs[j].curves[k][: cap + 1], dtype=float) for j, k, cap in pairs]
    offsets = np.concatenate([[0], np.cumsum([len(c) for c in curves])[:-1]])
    flat = np.concatenate(curves)
    sizes = 1 + pcap - pmin  # state 0, then min .. cap - 1
    pair = np.repeat(np.arange(len(pairs)), sizes)
    rank = np.arange(len(pair)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    cnt = np.where(rank == 0, 0, pmin[pair] + rank - 1)
    pending = cnt == 0
    step = np.where(pending, pmin[pair], 1)
    base = offsets[pair]
    p = np.where(pending, 0.0, flat[base + cnt])
    p_next = flat[base + cnt + step]
    work = pwork[pair]
    with np.errstate(divide="ignore"):
        length = np.where(pending, INF, work / np.where(pending, 1.0, p))
        v = np.where(pending, INF, (p_next - p) / np.where(pending, 1.0, p))
    len_one = work / flat[offsets + pmin][pair]
    u = (p_next - p) / p_next
    primary = np.where(pending, len_one, length)
    order = np.lexsort((pk[pair], pj[pair], primary, pending))
    primary, pend_o = primary[order], pending[order]
    same = (primary[1:] == primary[:-1]) & (pend_o[1:] == pend_o[:-1])
    group_end = np.flatnonzero(np.append(~same, True))  # last position of each tie group
    tie_end = group_end[np.searchsorted(group_end, np.arange(len(order)))]
    position = np.empty(len(order), dtype=np.int64)
    position[order] = np.arange(len(order))
    starts = (np.cumsum(sizes) - sizes).tolist()
    return _Table(
        pj[pair][order].tolist(),
        pk[pair][order].tolist(),
        cnt[order].tolist(),
        step[order].tolist(),
        pend_o.tolist(),
        u[order].tolist(),
        v[order].tolist(),
        tie_end.tolist(),
        {(j, k): start for (j, k, _), start in zip(pairs, starts, strict=True)},
        position.tolist(),
        [job.min_gpus for job in jobs],
    )


def afs_shares(jobs: Sequence[ShareJob], counts: Sequence[int]) -> list[tuple[int, int]]:
    """AFS-L's shares, equal to :func:`afs_shares_literal` (module docstring), fast."""
    _check(jobs, counts)
    free = [int(c) for c in counts]
    caps = [[usable_cap(c, job.min_gpus) for c in job.curves] for job in jobs]
    t = _table(jobs, caps)
    n = len(t.job)
    live = [False] * n
    for j, job in enumerate(jobs):
        for k in range(len(counts)):
            if caps[j][k] and job.min_gpus <= free[k]:
                live[t.pos(j, k, 0)] = True
    tree = _MaxTree(np.where(np.array(live, dtype=bool), np.array(t.u), -INF) if n else np.zeros(0))
    by_type: list[set[int]] = [set() for _ in counts]  # live positions per GPU type
    for q in range(n):
        if live[q]:
            by_type[t.gtype[q]].add(q)
    # Pending states needing more than one GPU, per type, largest last: they die as free GPUs
    # fall below their first share.
    multi: list[list[int]] = [
        sorted((q for q in range(n) if t.gtype[q] == k and t.step[q] > 1), key=t.step.__getitem__)
        for k in range(len(counts))
    ]

    def activate(q: int) -> None:
        live[q] = True
        tree.set(q, t.u[q])
        by_type[t.gtype[q]].add(q)

    def kill(q: int) -> None:
        live[q] = False
        tree.set(q, -INF)
        by_type[t.gtype[q]].discard(q)

    def step_from(p: int) -> int:
        """The next champion after the champion at ``p`` (scanning on), or -1."""
        end = t.tie_end[p]
        if t.pending[p]:  # later pending ties win (Algorithm 1: "<" keeps the champion)
            last = -1
            for q in range(p + 1, end + 1):
                if live[q]:
                    last = q
            return last
        u_c = t.u[p]
        for q in range(p + 1, end + 1):  # equal length: the challenger is taken as the shorter
            if live[q] and not u_c > t.v[q]:
                return q
        return tree.first_above(end + 1, t.v[p])

    chain: list[int] = []

    def champion(lo: int) -> int:
        """Redo the scan's chain of champions from the first change at position ``lo``."""
        first = bisect.bisect_left(chain, lo) - 1
        if first < 0:
            chain.clear()
            start = tree.first_above(0, -INF)
            if start < 0:
                return -1
            chain.append(start)
        else:
            del chain[first + 1 :]
        while True:
            nxt = step_from(chain[-1])
            if nxt < 0:
                return chain[-1]
            chain.append(nxt)

    held: list[tuple[int, int]] = [(-1, 0) for _ in jobs]
    lo = 0
    while True:
        p = champion(lo)
        if p < 0:
            return held
        j, k = t.job[p], t.gtype[p]
        changed = [p]
        kill(p)
        if t.pending[p]:  # the job starts on this type: its pending states on others go
            for other in range(len(counts)):
                q = t.pos(j, other, 0)
                if q >= 0 and live[q]:
                    kill(q)
                    changed.append(q)
        cnt = t.cnt[p] + t.step[p]
        held[j] = (k, cnt)
        free[k] -= t.step[p]
        if cnt < caps[j][k] and free[k] >= 1:
            q = t.pos(j, k, cnt)
            activate(q)
            changed.append(q)
        doomed = list(by_type[k]) if free[k] == 0 else []
        while multi[k] and t.step[multi[k][-1]] > free[k]:
            doomed.append(multi[k].pop())
        for q in doomed:
            if live[q]:
                kill(q)
                changed.append(q)
        lo = min(changed)
