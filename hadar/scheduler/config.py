"""The Hadar policy's knobs (defaults documented in docs/hadar.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from hadar.core.errors import shorten
from primal_dual.utility import ELASTIC_UTILITIES, RANKED_SPEEDUP, UTILITIES

MAX_BEAM = 1024
"""The widest DP beam taken (32x the default): the DP's cost grows with beam x window, and a beam
of 100,000 made a 100-job simulation take a minute and a gigabyte."""
MAX_WINDOW = 1024
"""The longest DP window taken (16x the default ``window_max``), for the same reason."""

DEFAULT_MAX_RHO = 1.0
"""Default deferral bound in finish-time fairness (Themis's rho = JCT / JCT with an equal 1/n
share): a job that would finish later than its fair-share JCT if it waited another round is
placed first. 1 is the sharing-incentive point (no job worse off than with its 1/n share), a
bound relative to the job and to the load rather than a wall-clock constant."""

TTD_SLACK_ROUNDS = 2.0
"""``preset=ttd``: jobs within two rounds of the TTD bound count as critical. A job that waits a
round loses a round, and one whose remaining time is within two rounds of the bound may be
pushed past it by the next round's wait as well; protecting them keeps the longest jobs running
from the start, which is what a makespan objective asks (docs/hadar.md)."""

DEFAULT_TAIL_PERCENTILE = 99.0
"""Default tail guard (issue 27): the p99 JCT, the tail the field reports. With it and type
matching Hadar's p99 on `philly-480` is below Gavel's on every seed (docs/results.md)."""

TTD_BOUNDS = ("makespan-lp", "longest")
"""``ttd_bound`` values, the default first: the TTD guard's bound on the remaining TTD
(``hadar/scheduler/ttd.py``)."""


@dataclass(frozen=True)
class HadarConfig:
    """Knobs of the Hadar policy (defaults documented in docs/hadar.md)."""

    utility: str = "inverse-remaining"
    gamma2: float = 5.0
    eta: float = 1.0
    hold_cost: bool = False
    window_factor: float = 2.0
    window_min: int = 16
    window_max: int = 64
    beam: int = 32
    backfill: bool = True
    replan: str = "preempt"
    upgrade_min_gain_s: float = 360.0
    price_model: str = "lp"
    """GPU prices: ``exponential`` (Eq. 5-7, rising as a node fills), ``lp`` (per type, the exact
    dual of the round's allocation LP) or ``none`` (0: placement by utility alone)."""
    ttd_guard: bool = True
    """Critical-path rule: a job whose remaining time on its best placement reaches the lower bound
    on the remaining TTD (it would extend the TTD if it waited) is placed first, on a placement
    that keeps it within the bound."""
    critical_slack_rounds: float = 0.0
    """With ``ttd_guard``: also treat as critical the jobs within this many rounds of the bound
    (0 = only the jobs on the critical path, up to a tolerance of 1 % of a round)."""
    ttd_bound: str = TTD_BOUNDS[0]
    """With ``ttd_guard``: the bound on the remaining TTD that decides the critical path.
    ``longest``: the longest best remaining time or the remaining work over the GPUs;
    ``makespan-lp``: that, and once every job's gang fits at once, the fluid makespan LP over GPU
    types, which counts jobs contending for the same fast GPUs (``hadar/scheduler/ttd.py``)."""
    tail_percentile: float | None = DEFAULT_TAIL_PERCENTILE
    """Tail guard (``replan=preempt``; ``hadar/scheduler/tail.py``): a job whose JCT, if it waited,
    would raise the bound on this percentile of the JCTs (finished jobs' and, for the jobs present,
    elapsed + best remaining time) is placed right after the TTD guard's jobs, as they are, with
    that bound as deadline (default: 99); only a one-GPU job may preempt a running job for it, a
    gang waits for idle GPUs. None = no tail guard; 100 = the TTD guard's longest path."""
    max_rho: float | None = DEFAULT_MAX_RHO
    """Deferral bound (``replan=preempt``): a job whose finish-time fairness would exceed this if
    it waited another round (:func:`deferred_rho`: elapsed time + a round + its best remaining
    time, over its JCT with an equal 1/n share of the cluster plus a round, n averaged over its
    life so far) is placed right after the critical-path jobs and before the DP, least laxity
    first, on the best-payoff placement that meets that bound, else the fastest, as soon as its
    gang fits (others yield their GPUs if need be). None = no bound."""
    max_wait_s: float | None = None
    """Wall-clock starvation bound (``replan=preempt``): a job not started within this many
    seconds of its arrival is placed first, as with ``max_rho``. None (default) = no bound; it was
    86400 until issue 27 replaced it by ``max_rho``."""
    type_matching: bool = True
    """``replan=preempt``: once the DP and backfill chose which jobs run, re-assign their GPU types
    to minimise the sum of their projected completion times (``hadar/scheduler/matching.py``);
    the guards' and overdue jobs keep their placements."""
    endgame: bool = True
    """With ``ttd_guard``, once every job fits at once and the guard's bound is at most
    ``CONTENDED_HORIZON_ROUNDS`` rounds away: every job on the GPU type of the best
    round-by-round schedule (restarts and mid-round finishes counted; TTD first, then the sum of
    completion times; ``hadar/scheduler/endgame.py``). HadarE's decision over its own state
    turns it off (its replay of Hadar keeps it): its forked copies take the GPUs the schedule
    leaves idle, which the search does not model."""
    single_node: bool = False
    """Place every job on one node when its gang fits on some node (HadarE's per-node copies)."""
    adapt_elastic: bool = True
    """Elastic jobs with a goodput model (Pollux's applications): each round, choose each one's
    GPU type, GPU count and batch by the round's configuration LP and plan it as a gang of that
    size (``hadar/scheduler/elastic.py``). False: every job is a rigid gang of its own size."""
    elastic_utility: str | None = RANKED_SPEEDUP
    """With ``adapt_elastic``: the utility that values each configuration in the configuration
    LP. ``ranked-speedup`` (the default) values it by the job's speed there relative to its best
    configuration, weighted by the job's rank among the jobs present by remaining time (the
    longest 1, the shortest the most): the structure of heSRPT, the allocation that minimises
    the mean JCT of jobs with sub-linear speed-ups, which shares the GPUs among every job, more
    to the shorter. None: the round's ``utility`` (``inverse-remaining``: each job at ``rate /
    remaining``, which leaves long jobs the slow and narrow configurations); ``inverse-slowdown``:
    the relative speed unweighted (Sia's normalised goodput without its fairness exponent).
    Measured on Pollux's workloads in docs/elastic.md."""

    @classmethod
    def legacy(cls) -> HadarConfig:
        """Hadar as first implemented: OASiS's sigmoid utility, non-preemptive (running jobs keep
        their GPUs and only move onto idle ones), prices times the rounds a job holds its GPUs."""
        return cls(
            utility="sigmoid",
            hold_cost=True,
            replan="upgrade",
            price_model="exponential",
            ttd_guard=False,
            tail_percentile=None,
            type_matching=False,
            adapt_elastic=False,
        )

    @classmethod
    def preset(cls, name: str) -> HadarConfig:
        """A named configuration: ``default``, ``legacy`` or ``ttd`` (the TTD objective: the
        critical-path rule also protects jobs within ``TTD_SLACK_ROUNDS`` rounds of the bound)."""
        if name == "default":
            return cls()
        if name == "legacy":
            return cls.legacy()
        if name == "ttd":
            return cls(critical_slack_rounds=TTD_SLACK_ROUNDS)
        raise ValueError(f"unknown preset {name!r} (known: default, legacy, ttd)")

    def __post_init__(self) -> None:
        if self.replan not in ("never", "upgrade", "preempt"):
            raise ValueError("replan must be 'never', 'upgrade' or 'preempt'")
        if self.ttd_bound not in TTD_BOUNDS:
            raise ValueError(f"ttd_bound must be one of {', '.join(TTD_BOUNDS)}")
        if self.critical_slack_rounds < 0:
            raise ValueError("critical_slack_rounds must be >= 0")
        if self.max_rho is not None and not (math.isfinite(self.max_rho) and self.max_rho > 0):
            raise ValueError("max_rho must be a positive number (or None)")
        if self.tail_percentile is not None and not (0 < self.tail_percentile <= 100):
            raise ValueError("tail_percentile must be in (0, 100] (or None)")
        if self.max_wait_s is not None and not (
            math.isfinite(self.max_wait_s) and self.max_wait_s > 0
        ):
            raise ValueError("max_wait_s must be a positive number of seconds (or None)")
        for name, value, known in (
            ("utility", self.utility, UTILITIES),
            ("elastic_utility", self.elastic_utility, ELASTIC_UTILITIES),
        ):
            if value is not None and value not in known:
                raise ValueError(
                    f"{name} must be one of {', '.join(known)} (got {shorten(value)!r})"
                )
        if self.price_model not in ("exponential", "lp", "none"):
            raise ValueError("price_model must be 'exponential', 'lp' or 'none'")
        if not 1 <= self.beam <= MAX_BEAM:
            raise ValueError(f"beam must be between 1 and {MAX_BEAM} (got {self.beam})")
        if self.window_max > MAX_WINDOW:
            raise ValueError(f"window_max must be at most {MAX_WINDOW} (got {self.window_max})")
        if self.eta < 1:
            raise ValueError("eta must be >= 1")
        if self.gamma2 <= 0 or self.window_factor <= 0 or self.upgrade_min_gain_s < 0:
            raise ValueError("gamma2 and window_factor must be > 0, upgrade_min_gain_s >= 0")
        if self.window_min < 1 or self.window_max < self.window_min:
            raise ValueError("need 1 <= window_min <= window_max")
