"""Every default the two drivers share, defined once (value objects; nothing else spells the
numbers). The simulator's are the paper's settings in simulated seconds; real runs' (``hadar
run``) are wall-clock seconds on CPU nodes training the tiny models, where a round, a restart and
an averaging step all cost far less. The concepts are the same, so the names are too.

Names (one per concept, docs/glossary.md; the older spellings are read only through
:mod:`hadar.core.renames`): ``round_s`` is the round (the paper's "slot"; ``--round``),
``restart_penalty_s`` the checkpoint-restart penalty (``--restart-penalty``),
``aggregation_overhead_s`` HadarE's per-round averaging cost of a forked job."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DriverDefaults:
    """Defaults of one driver (simulated or real runs)."""

    round_s: float
    """Round (slot) length in seconds."""
    restart_penalty_s: float
    """Seconds a job loses when it is moved or resumed (checkpoint-restart). In real runs, what a
    policy assumes it costs (the run itself pays what it pays)."""
    aggregation_overhead_s: float
    """Seconds of each round every copy of a forked job spends saving its parameters, having
    them averaged and loading the result (HadarE). Simulated: a checkpoint save and load, so the
    paper's restart penalty; real runs: what HadarE assumes averaging costs on real nodes."""
    size: str
    """Model size of the workload mixes (``--size``)."""
    policy: str
    """The policy a run uses when none is named (``--policy``; a registered policy's name)."""


@dataclass(frozen=True)
class RealRunDefaults(DriverDefaults):
    """Real runs' defaults, plus those only a real run has."""

    grace_s: float = 20.0
    """Extra seconds past the round before a silent copy is declared hung and killed."""
    stop_wait_s: float = 600.0
    """``hadar stop``: seconds a run has to finish its round after SIGINT (``--timeout``)."""
    stop_grace_s: float = 30.0
    """``hadar stop``: seconds after SIGTERM before its process group gets SIGKILL (``--grace``)."""


SIMULATED = DriverDefaults(
    round_s=360.0,
    restart_penalty_s=10.0,
    aggregation_overhead_s=10.0,
    size="paper",
    policy="hadar",
)
"""The simulator's defaults (``simulate``, ``compare``, the experiments, the Python API): the
paper's six-minute rounds and 10 s checkpoint-restart penalty, mixes at the paper's sizes, Hadar."""

REAL_RUN = RealRunDefaults(
    round_s=30.0,
    restart_penalty_s=3.0,
    aggregation_overhead_s=2.0,
    size="tiny",
    policy="hadare",
)
"""``hadar run``'s defaults: 30 s wall-clock rounds, short enough for the tiny models on CPUs;
3 s for starting a worker and loading a model; 2 s for averaging; tiny models; HadarE."""

FORK_PROGRESS = ("goodput", "steps")
"""How the simulator's forked copies progress (``SimConfig.fork_progress``, ``--fork-progress``);
the first is the default."""

REAL_RUN_FORK_PROGRESS = FORK_PROGRESS[1]
"""Real runs count every forked copy's steps in full (the Job Tracker sums them)."""

DEFAULT_HORIZON_S = 365 * 86400.0
"""Knob: simulated time by which every job must have finished (one year; ``--horizon``)."""


@dataclass(frozen=True)
class WorkloadFamily:
    """The set-up of the paper a family of workloads comes from. A run of one of its workloads
    (``simulate``, ``compare``, the Python API, ``hadar reproduce``) uses it when no option says
    otherwise: a typed ``--round`` or ``--policy-opt`` wins."""

    name: str
    """What the family is called in notes (``pollux-N``)."""
    paper: str
    """Whose set-up it is, for the notes and the docs."""
    round_s: float | None
    """Every policy's round on these workloads; None: the policies' declared round, else the
    driver's."""
    policy_options: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    """Baseline settings of the paper, as ``--policy-opt`` knobs per policy name."""

    def options_for(self, policy: str) -> dict[str, str]:
        """The family's knobs of ``policy`` (empty when it sets none)."""
        return dict(dict(self.policy_options).get(policy, ()))


POLLUX_FAMILY = WorkloadFamily(
    name="pollux-N",
    paper="the Pollux paper (OSDI 2021, section 5.1) and its artifact's simulator",
    round_s=60.0,
    policy_options=(("tiresias", (("threshold", str(16 * 3600)),)),),
)
"""Pollux's workloads: every policy on Pollux's 60 s scheduling interval; Tiresias with two
queues and the queue threshold the artifact's ``tiresias.py`` sets, 16 GPU-hours (the paper:
"manually tuned to perform well for our synthetic workload")."""

PHILLY_FAMILY = WorkloadFamily(
    name="philly-N", paper="the Hadar paper (its simulations: 360 s rounds)", round_s=None
)
"""The Philly-derived workloads: the simulator's defaults are the Hadar paper's set-up already
(``SIMULATED``); a policy that declares its own round (Pollux) keeps it."""


PROJECT_PACKAGES = (
    "hadar", "hadare", "baselines", "pollux", "afs", "bftrainer", "malletrain", "primal_dual",
    "estimators", "tracker", "nodes", "goodput",
)  # fmt: skip
"""The project's top-level packages: their folders hold its code and bundled data (no command
writes its results there)."""
