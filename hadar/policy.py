"""The one policy interface shared by the simulator and the real cluster loop, and the registry
of policies (:func:`register_policy`, :data:`POLICY_REGISTRY`).

Each round the driver (simulator or coordinator) builds a :class:`RoundContext` and calls
``policy.decide(ctx)``; the policy returns a :class:`RoundPlan`: which jobs (or HadarE copies)
run where this round (``hadar/loop.py`` is the loop around it). Policies keep no hidden state
that matters for correctness: what they need about the past is in ``ctx.jobs`` (attained
service, time per GPU type, ...) or in their explicit :meth:`Policy.state`, which the loop
persists every round and a restarted driver restores, so it gets the same decisions. Caches
are fine.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from estimators.throughput import ThroughputModel
from hadar.core.cluster import Cluster
from hadar.core.defaults import FORK_PROGRESS, SIMULATED
from hadar.core.errors import InputError, shorten
from hadar.core.jobs import JobStatus, Placement
from hadar.core.renames import renamed_attribute
from hadar.core.suggest import did_you_mean

REFILL_MIN_S = 1.0
"""A refill (:attr:`Assignment.after`) is not planned, or on real nodes not started, with less
than this many seconds of the round left."""


@dataclass(frozen=True)
class Assignment:
    """One job (``copy == 0``) or one HadarE copy (``copy >= 1``) placed for one round."""

    job_id: int
    placement: Placement
    copy: int = 0
    step_budget: float | None = None
    """Steps this run should do this round; None = as many as the round allows."""
    overhead_s: float = 0.0
    """Fixed seconds of this round spent on something other than training (e.g. aggregation)."""
    batch_size: int | None = None
    """Total batch size of an elastic job this round (None: the job's own batch size)."""
    after: int | None = None
    """A refill: the job whose run on these GPUs this run follows within the round. It starts
    when that run stops (its job finished or its step budget spent); None: with the round."""
    restart: bool | None = None
    """Whether this run pays the checkpoint-restart penalty this round; None lets the driver
    decide (it does when the placement differs from last round's for the same job and copy)."""

    @property
    def run_key(self) -> tuple[int, int]:
        return (self.job_id, self.copy)

    @property
    def num_gpus(self) -> int:
        return sum(c for per in self.placement.values() for c in per.values())

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted(n for n, per in self.placement.items() if sum(per.values()) > 0))


@dataclass(frozen=True)
class RoundPlan:
    """A policy's decision for one round, plus free-form diagnostics (e.g. DP statistics)."""

    assignments: tuple[Assignment, ...] = ()
    info: Mapping[str, Any] = field(default_factory=dict)

    def allocation(self) -> dict[tuple[int, int], Placement]:
        """``{(job id, copy): placement}``."""
        return {a.run_key: a.placement for a in self.assignments}

    def jobs(self) -> set[int]:
        return {a.job_id for a in self.assignments}


@dataclass(frozen=True)
class RoundContext:
    """Everything a policy may look at when deciding a round."""

    now: float
    round_index: int
    round_s: float
    cluster: Cluster
    """Nodes available this round (nodes that are down are left out)."""
    jobs: Sequence[JobStatus]
    """Arrived, unfinished jobs, ordered by (arrival, job id)."""
    current: Mapping[tuple[int, int], Placement]
    """Last round's placements by (job id, copy); empty for jobs that were not running. Drivers
    leave out placements on nodes that are not in ``cluster`` any more (down or gone)."""
    throughput: ThroughputModel
    restart_penalty_s: float = SIMULATED.restart_penalty_s
    fork_progress: str = FORK_PROGRESS[0]
    """How the driver counts the progress of a job's copies running together (HadarE's forks):
    ``goodput`` (the simulator's default: at most as one job at their combined batch) or
    ``steps`` (every copy's steps in full, as the Job Tracker sums them in real runs)."""
    nodes_may_change: bool = False
    """Whether nodes join and leave during the run (the driver runs a node stream,
    ``--node-stream``): a plan projected over later rounds on the nodes up now may not hold."""

    if not TYPE_CHECKING:  # a plug-in policy may still read an old name (hadar.core.renames)

        def __getattr__(self, name: str) -> Any:
            return renamed_attribute(self, name)

    def status(self, job_id: int) -> JobStatus:
        """The status of job ``job_id`` (KeyError if it is not among :attr:`jobs`)."""
        return self._statuses[job_id]

    @cached_property
    def _statuses(self) -> dict[int, JobStatus]:
        """:attr:`jobs` by job id, built on the first :meth:`status` (the first of a repeated
        id, as a scan finds it); a context is never changed once built."""
        out: dict[int, JobStatus] = {}
        for s in self.jobs:
            out.setdefault(s.job_id, s)
        return out


@dataclass(frozen=True)
class LineStyle:
    """How figures draw a policy's series: matplotlib line style, marker and line width."""

    line: str = "-"
    marker: str = "o"
    width: float = 1.6


@dataclass(frozen=True)
class PolicyInfo:
    """What the harness knows about a policy besides its decisions, declared by the policy
    (``Policy.info``) so that nothing else names it: listings, default sets, tables and figures
    read it from the registry (:func:`policy_info`)."""

    title: str
    """Its name in tables and figure legends (``HadarE``)."""
    colour: str | None = None
    """Its colour in figures (any matplotlib colour); None = the next colour of ``tab10``."""
    line: LineStyle = LineStyle()
    """Its line style, marker and width in figures."""
    forking: bool = False
    """Runs copies of one job on several nodes at once (its TTD lower bound is the fork bound)."""
    gavel_native: bool = False
    """One of Gavel's own policies: Gavel-compatible mode gives it Gavel's reallocation interval
    (``hadar.simulator.gavel_mode.policy_options``)."""
    defaults: frozenset[str] = frozenset()
    """The default policy sets it belongs to (:data:`DEFAULT_SETS`)."""
    rank: int = 100
    """Its place in a default set (smaller first, ties by name)."""
    reference: bool = False
    """The preferred reference (denominator of ratio columns) when it is compared."""
    adapts_batch: bool = False
    """Adapts the batch size of jobs with statistical-efficiency data (Pollux); the others (not
    one of Pollux's applications) get their GPU count adapted only, which the outputs say
    (``hadar.commands.common.adaptation_note``)."""
    round_s: float | None = None
    """Its own scheduling interval in seconds (Pollux: 60 s), the round length the drivers use
    when none is given (:func:`declared_round`); None = the driver's default. An explicit
    ``--round`` (``round_s=``) always wins."""

    def __post_init__(self) -> None:
        if self.round_s is not None and not (0 < self.round_s < float("inf")):
            raise ValueError(f"round_s must be a positive number of seconds (got {self.round_s})")
        unknown = sorted(set(self.defaults) - set(DEFAULT_SETS))
        if unknown:
            raise ValueError(f"unknown default set(s) {unknown} (known: {', '.join(DEFAULT_SETS)})")
        object.__setattr__(self, "defaults", frozenset(self.defaults))


DEFAULT_SETS: Mapping[str, str] = {
    "compare": "hadar compare --policies and hadar.compare()",
    "compare-elastic": "the same on a workload of jobs with efficiency data (pollux-N): the "
    "Pollux paper's comparison",
    "load-sweep": "hadar experiment load-sweep --policies",
    "decision-times": "the policies hadar compare times one decision of (Fig. 5)",
}
"""The default policy sets a policy may join (``PolicyInfo.defaults``), with where each is used."""


class Policy(ABC):
    """A scheduling policy. Subclasses set ``name`` and ``info``, implement :meth:`decide` and
    join the registry with :func:`register_policy` (CONTRIBUTING.md, "Adding a policy")."""

    name: ClassVar[str] = "policy"
    info: ClassVar[PolicyInfo] = PolicyInfo(title="policy")
    """Title, colour, default sets and other properties the harness reads (:class:`PolicyInfo`)."""
    config_class: ClassVar[type | None] = None
    """The frozen dataclass of the policy's knobs (``--policy-opt`` converts values by its fields)."""

    @abstractmethod
    def decide(self, ctx: RoundContext) -> RoundPlan:
        """Return the next round's placements."""

    def state(self) -> dict[str, Any]:
        """The policy's own state that later decisions depend on, as JSON-serialisable data
        (empty for a stateless policy). The round loop takes it after every decision and a
        resumed run hands it to :meth:`restore`, so it decides as an uninterrupted run would."""
        return {}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Take back a :meth:`state` (after a restart, on a freshly built policy)."""
        if state:
            raise ValueError(f"policy {self.name} keeps no state, got {sorted(state)}")


POLICY_PACKAGES = (
    "hadar.scheduler",
    "hadare",
    "pollux.policy",
    "afs.policy",
    "bftrainer.policy",
    "malletrain.policy",
    "baselines",
)
"""Where the registry looks for policies: every module of these packages (or the module itself)
is imported once, on first use, and registers its policies with :func:`register_policy`. A
policy elsewhere (a plug-in) registers through the ``hadar.policies`` entry-point group."""

ENTRY_POINT_GROUP = "hadar.policies"

P = TypeVar("P", bound=type[Policy])

_REGISTERED: dict[str, type[Policy]] = {}
_discovered = False


def register_policy(cls: P) -> P:
    """Class decorator: make ``cls`` a policy the CLI, the API, comparisons and figures know by
    ``cls.name``. A second class under a taken name is an error (a typo would hide a policy)."""
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        raise TypeError(f"register_policy: {cls!r} is not a Policy subclass")
    if "name" not in vars(cls) or "info" not in vars(cls):
        raise TypeError(f"register_policy: {cls.__name__} must set its own name and info")
    taken = _REGISTERED.get(cls.name)
    if taken is not None and _where(taken) != _where(cls):  # the same class again: a reload
        raise ValueError(f"register_policy: policy name {cls.name!r} is taken by {taken!r}")
    _REGISTERED[cls.name] = cls
    return cls


def _where(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def unregister_policy(name: str) -> None:
    """Forget policy ``name`` (tests that register a policy of their own take it out again)."""
    _REGISTERED.pop(name, None)


def _discover() -> None:
    global _discovered
    if _discovered:
        return
    import importlib
    import pkgutil
    from importlib.metadata import entry_points

    for package in POLICY_PACKAGES:
        module = importlib.import_module(package)
        for sub in sorted(m.name for m in pkgutil.iter_modules(getattr(module, "__path__", []))):
            importlib.import_module(f"{package}.{sub}")
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        ep.load()
    _discovered = True  # only once every module imported: a failed import is raised again


class _Registry(Mapping[str, type[Policy]]):
    """The registered policies by name (read-only; policies are found on first use)."""

    def __getitem__(self, name: str) -> type[Policy]:
        _discover()
        return _REGISTERED[name]

    def __iter__(self) -> Iterator[str]:
        _discover()
        return iter(sorted(_REGISTERED))

    def __len__(self) -> int:
        _discover()
        return len(_REGISTERED)


POLICY_REGISTRY: Mapping[str, type[Policy]] = _Registry()
"""Every registered policy by name, in name order (``--policy`` choices)."""


def policy_names() -> list[str]:
    """The registered policies' names, sorted."""
    return list(POLICY_REGISTRY)


def policy_class(name: str, flag: str = "--policy") -> type[Policy]:
    """The class of a registered policy; an unknown name is an InputError naming ``flag`` and
    the closest registered names ("did you mean")."""
    cls = POLICY_REGISTRY.get(name)
    if cls is None:
        raise InputError(
            f"{flag}: unknown policy {shorten(name)!r}{did_you_mean(name, POLICY_REGISTRY)} "
            f"(known: {', '.join(POLICY_REGISTRY)})"
        )
    return cls


def policy_info(name: str) -> PolicyInfo:
    """The declared properties of a registered policy (InputError for an unknown name)."""
    return policy_class(name).info


def find_policy_info(name: str) -> PolicyInfo | None:
    """The declared properties of policy ``name``, None when it is not registered (rows read
    back from outputs may name a policy this installation lacks)."""
    cls = POLICY_REGISTRY.get(name)
    return cls.info if cls is not None else None


def policy_title(name: str) -> str:
    """The policy's title for tables and figures (the name itself for an unknown policy)."""
    info = find_policy_info(name)
    return info.title if info is not None else name


def default_policies(default_set: str) -> tuple[str, ...]:
    """The policies that declare ``default_set`` (:data:`DEFAULT_SETS`), by rank, then name."""
    if default_set not in DEFAULT_SETS:
        raise ValueError(f"unknown default set {default_set!r}")
    chosen = [c for c in POLICY_REGISTRY.values() if default_set in c.info.defaults]
    return tuple(c.name for c in sorted(chosen, key=lambda c: (c.info.rank, c.name)))


def preferred_reference(policies: Sequence[str]) -> str:
    """The reference of a comparison: the first policy that declares itself one (Hadar), else
    the first policy."""
    for name in policies:
        info = find_policy_info(name)
        if info is not None and info.reference:
            return name
    return policies[0]


@dataclass(frozen=True)
class DeclaredRound:
    """The round length a run or comparison uses when none is given, and who declared it."""

    seconds: float
    declared_by: tuple[str, ...]
    """The policies declaring exactly this round (:attr:`PolicyInfo.round_s`)."""


def declared_round(policies: Sequence[str | type[Policy]]) -> DeclaredRound | None:
    """The one round length a run or a comparison of ``policies`` uses when no round is given:
    the shortest scheduling interval any of them declares (:attr:`PolicyInfo.round_s`), for
    every policy alike, so arrivals, completions and restarts are seen at the same moments under
    each; None when none declares one (the driver's default applies). Unknown names declare
    nothing."""
    declared: list[tuple[float, str]] = []
    for p in policies:
        cls = POLICY_REGISTRY.get(p) if isinstance(p, str) else p
        if cls is not None and cls.info.round_s is not None:
            declared.append((cls.info.round_s, cls.name))
    if not declared:
        return None
    shortest = min(s for s, _ in declared)
    return DeclaredRound(shortest, tuple(sorted({n for s, n in declared if s == shortest})))


def round_for(
    policies: Sequence[str | type[Policy]], given: float | None, driver_default: float
) -> float:
    """The round length to use: ``given`` when given, else :func:`declared_round`, else the
    driver's default."""
    if given is not None:
        return given
    declared = declared_round(policies)
    return driver_default if declared is None else declared.seconds


def make_policy(name: str, **options: Any) -> Policy:
    """Instantiate a registered policy by name; unknown names are an InputError."""
    return policy_class(name)(**options)


_PER_RUN_MEMOS: list[Callable[[], None]] = []


def remember_per_run(forget: Callable[[], None]) -> None:
    """Register ``forget``, which empties a memo a policy keeps across its decisions (results of
    pure computations by their arguments). Every memo is emptied when a simulation starts
    (:func:`forget_memos`), so what one run measures, such as its decision times, never depends on
    what ran before it in the same process."""
    _PER_RUN_MEMOS.append(forget)


def forget_memos() -> None:
    """Empty every memo registered with :func:`remember_per_run`."""
    for forget in _PER_RUN_MEMOS:
        forget()
