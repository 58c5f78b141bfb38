"""The Python API: simulate or compare policies from a notebook or script.

    >>> from hadar import simulate, compare
    >>> run = simulate("sim-60gpu", "philly-48", policy="hadar", seed=1)
    >>> run.summary["avg_jct_s"], run.jobs.head()
    >>> table = compare("sim-60gpu", "philly-48", policies=("hadar", "gavel")).table

Every part of a scenario may be a name/path (as on the command line) or an object (a
:class:`~hadar.core.cluster.Cluster`, a list of :class:`~hadar.core.jobs.Job`, a measured table, a
:class:`~hadar.policy.Policy`). Results carry pandas DataFrames with the same columns as the
CSV files the CLI writes (``docs/outputs.md``). The CLI's ``simulate`` and ``compare`` run on
these functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from hadar.core.defaults import DEFAULT_HORIZON_S, FORK_PROGRESS, SIMULATED
from hadar.core.errors import InputError
from hadar.core.node_stream import load_node_stream
from hadar.core.renames import accepts_old_keywords
from hadar.policy import Policy, default_policies, preferred_reference
from hadar.policy_options import effective_options, policy_with_options
from hadar.scenario import (
    ClusterLike,
    TableLike,
    WorkloadLike,
    check_job_restarts,
    check_round,
    comparison_default_set,
    family_options,
    family_round,
    load_scenario,
    workload_family,
)
from hadar.simulator import SimConfig
from hadar.simulator import simulate as run_simulator
from hadar.simulator.metrics import comparison_rows, summarize
from hadar.simulator.output import result_frames, write_result
from hadar.simulator.records import SimulationResult


@dataclass(frozen=True)
class Simulation:
    """One policy's simulated run: the headline summary and the per-job/round/placement tables."""

    summary: dict[str, Any]
    jobs: pd.DataFrame
    rounds: pd.DataFrame
    placements: pd.DataFrame
    records: SimulationResult
    """The raw records (dataclasses), for code that wants more than the tables."""
    policy_options: Mapping[str, str] = field(default_factory=dict)
    """Every knob of the policy as it ran, defaults included (``--policy-opt``'s names and
    values as text; empty for a policy given as an object or without knobs)."""

    def save(self, out: str | Path) -> Path:
        """Write summary.json, jobs.csv, rounds.csv and placements.csv into ``out``."""
        frames = {"jobs": self.jobs, "rounds": self.rounds, "placements": self.placements}
        summary = {**self.summary, "policy_options": dict(self.policy_options)}
        return write_result(self.records, summary, out, frames)


@dataclass(frozen=True)
class Comparison:
    """Several policies on one scenario: ``table`` has one row per policy (summary metrics and
    ``<metric>_ratio`` against ``reference``), ``runs`` each policy's :class:`Simulation`."""

    table: pd.DataFrame
    runs: dict[str, Simulation]
    reference: str


@accepts_old_keywords
def simulate(
    cluster: ClusterLike = "sim-60gpu",
    workload: WorkloadLike = "philly-480",
    policy: str | Policy = SIMULATED.policy,
    *,
    throughputs: TableLike = None,
    seed: int = 0,
    size: str = SIMULATED.size,
    round_s: float | None = None,
    restart_penalty_s: float = SIMULATED.restart_penalty_s,
    policy_options: Mapping[str, str] | None = None,
    gavel_compatible: bool = False,
    progress: bool = False,
    horizon_s: float = DEFAULT_HORIZON_S,
    node_stream: str | Path | None = None,
    fork_progress: str = FORK_PROGRESS[0],
) -> Simulation:
    """Replay ``workload`` on ``cluster`` under ``policy`` (deterministic for a given ``seed``).

    ``policy_options`` are the ``--policy-opt`` knobs as strings (``{"utility": "sigmoid"}``);
    ``gavel_compatible`` runs as Gavel's own simulator does (``docs/baselines.md``). A workload
    that cannot finish within ``horizon_s`` seconds of simulated time is an InputError.
    ``node_stream`` is a ``time,node,event`` CSV of nodes joining and leaving mid-run
    (docs/node-streams.md).
    ``fork_progress`` is how HadarE's forked copies of a job with efficiency data progress
    (``goodput``: at most as one job at their combined batch; ``steps``: the paper's sum).
    ``round_s`` None is the round of the paper the workload comes from
    (:func:`hadar.scenario.workload_family`: Pollux's 60 s on ``pollux-N``), else the policy's
    declared round (``PolicyInfo.round_s``: Pollux's 60 s), else the simulator's default (360
    s); likewise the family's baseline settings fill the ``policy_options`` not given
    (Tiresias' queue threshold on ``pollux-N``)."""
    family = workload_family(workload)
    if isinstance(policy, Policy):
        if policy_options or gavel_compatible:
            raise InputError(
                "policy_options and gavel_compatible need a policy name, not a Policy object"
            )
        chosen = policy
    else:
        policy_options = family_options(family, policy, policy_options)
        chosen = policy_with_options(
            policy, policy_options
        )  # a bad name or knob fails before any loading
    round_s = family_round(family, [type(chosen)], round_s)
    check_round(round_s, 0.0 if gavel_compatible else restart_penalty_s)  # the mode ignores it
    c, jobs, throughput = load_scenario(
        cluster, workload, throughputs, seed=seed, size=size, horizon_s=horizon_s
    )
    check_job_restarts(jobs, round_s, workload if isinstance(workload, str) else "workload")
    stream = None
    if node_stream is not None:
        stream = load_node_stream(node_stream, c.node_names, c.source or f"cluster {c.name}")
    if fork_progress not in FORK_PROGRESS:
        raise InputError(
            f"--fork-progress: must be one of {', '.join(FORK_PROGRESS)} (got {fork_progress!r})"
        )
    config = SimConfig(
        round_s=round_s,
        restart_penalty_s=restart_penalty_s,
        progress=progress,
        horizon_s=horizon_s,
        node_stream=stream,
        fork_progress=fork_progress,
    )
    if gavel_compatible:
        from hadar.simulator.gavel_mode import setup

        chosen, config, throughput = setup(
            str(policy),
            throughput,
            round_s,
            policy_options,
            progress=progress,
            horizon_s=horizon_s,
        )
        config = replace(config, node_stream=stream)
    result = run_simulator(c, jobs, chosen, throughput, config)
    if isinstance(policy, Policy):
        return simulation_of(result)
    fixed: dict[str, Any] = {}
    if gavel_compatible:
        from hadar.simulator.gavel_mode import policy_options as gavel_options

        fixed = gavel_options(policy)
    knobs = effective_options(policy, policy_options, **fixed)
    return replace(simulation_of(result, policy), policy_options=knobs)


def simulation_of(result: SimulationResult, policy: str | None = None) -> Simulation:
    """``result`` as a :class:`Simulation` (summary and tables), named ``policy`` if given; also
    the run up to a stop (``SimulationLimitError.partial``)."""
    summary = summarize(result)
    if policy is not None:
        summary["policy"] = policy
    frames = result_frames(result)
    return Simulation(summary, frames["jobs"], frames["rounds"], frames["placements"], result)


@accepts_old_keywords
def compare(
    cluster: ClusterLike = "sim-60gpu",
    workload: WorkloadLike = "philly-480",
    policies: Sequence[str] | None = None,
    *,
    reference: str | None = None,
    policy_options: Mapping[str, Mapping[str, str]] | None = None,
    **scenario: Any,
) -> Comparison:
    """Simulate each of ``policies`` (default: those that join the ``compare`` default set, or
    ``compare-elastic`` on a workload of jobs with efficiency data: ``pollux-N``) on
    the same scenario (one after another, in this process);
    ``scenario`` takes :func:`simulate`'s keyword arguments. ``reference`` (default: the policy
    declared the reference, Hadar, when compared, else the first policy) is the denominator of
    the ratio columns. Without ``round_s`` every policy runs at one common round: the
    workload family's (:func:`hadar.scenario.workload_family`), else the shortest any of them declares (``hadar.policy.declared_round``), else 360 s. For many
    policies or sweeps in parallel processes or on Ray, use ``hadar compare`` or
    :func:`hadar.sweep.run_cells`."""
    if policies is None:
        _, jobs, _ = load_scenario(
            cluster, workload, scenario.get("throughputs"), seed=scenario.get("seed", 0)
        )
        policies = default_policies(comparison_default_set(jobs))
    if not policies:
        raise InputError("compare: no policy given")
    ref = reference or preferred_reference(policies)
    if ref not in policies:
        raise InputError(
            f"compare: reference {ref!r} is not one of the policies ({', '.join(policies)})"
        )
    scenario["round_s"] = family_round(workload_family(workload), policies, scenario.get("round_s"))
    runs = {
        p: simulate(cluster, workload, p, policy_options=(policy_options or {}).get(p), **scenario)
        for p in policies
    }
    table = pd.DataFrame(comparison_rows([r.summary for r in runs.values()], ref)).set_index(
        "policy"
    )
    return Comparison(table, runs, ref)
