"""The physical experiment grid: (cluster, mix, policy, slot) cells, run in the simulator.

A cell depends only on its inputs (the simulator and the policies are deterministic), so running
the cells in worker processes gives the same rows as running them one by one. Rows hold no
wall-clock measurements for that reason.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from estimators.composite import CompositeThroughput
from estimators.throughput import ThroughputModel
from hadar import sweep
from hadar.core.cluster import Cluster
from hadar.core.defaults import SIMULATED
from hadar.core.errors import InputError
from hadar.core.jobs import Job
from hadar.core.physical_workloads import mix
from hadar.core.text import comma_items
from hadar.experiments.bounds import TtdBounds, mix_bounds
from hadar.experiments.paper import PAPER_POLICIES
from hadar.policy import make_policy, policy_class
from hadar.scenario import check_round, load_scenario

DEFAULT_CLUSTERS = ("aws-5node", "lab-5node")
DEFAULT_MIXES = ("M-1", "M-3", "M-4", "M-5", "M-8", "M-10", "M-12")
DEFAULT_POLICIES = PAPER_POLICIES
DEFAULT_ROUNDS_S = (90.0, 180.0, 360.0)
DEFAULT_MAIN_ROUND_S = SIMULATED.round_s

ROW_KEYS = (
    "cluster",
    "mix",
    "policy",
    "round_s",
    "jobs",
    "completed",
    "ttd_s",
    "avg_jct_s",
    "min_jct_s",
    "max_jct_s",
    "p99_jct_s",
    "rho_max",
    "cru",
    "gpu_util_gavel",
    "restarts_per_job",
    "rounds",
)
"""What :func:`run_cell` returns, in CSV column order."""


@dataclass(frozen=True)
class GridSpec:
    """The grid: every cluster x mix x policy x round length. ``clusters`` are names or YAML paths."""

    clusters: tuple[str, ...] = DEFAULT_CLUSTERS
    mixes: tuple[str, ...] = DEFAULT_MIXES
    policies: tuple[str, ...] = DEFAULT_POLICIES
    rounds_s: tuple[float, ...] = DEFAULT_ROUNDS_S
    main_round_s: float = DEFAULT_MAIN_ROUND_S
    restart_penalty_s: float = SIMULATED.restart_penalty_s
    options: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    """``--policy-opt`` knobs per policy: ``(("hadar", (("utility", "sigmoid"),)),)``."""


@dataclass(frozen=True)
class Cell:
    """One simulation: plain, picklable values."""

    cluster: str
    mix: str
    policy: str
    round_s: float
    restart_penalty_s: float = SIMULATED.restart_penalty_s
    options: tuple[tuple[str, str], ...] = ()
    """The policy's ``--policy-opt`` knobs (KEY, VALUE)."""


def cells(spec: GridSpec) -> list[Cell]:
    """Every cell of ``spec`` in output order (cluster, mix, policy, round)."""
    knobs = dict(spec.options)
    return [
        Cell(c, m, p, s, spec.restart_penalty_s, knobs.get(p, ()))
        for c in spec.clusters
        for m in spec.mixes
        for p in spec.policies
        for s in spec.rounds_s
    ]


# -- argument parsing --------------------------------------------------------------------------
def _names(text: str, option: str) -> tuple[str, ...]:
    return tuple(comma_items(text, option))


def parse_mixes(text: str) -> tuple[str, ...]:
    out = []
    for name in _names(text, "--mixes"):
        canonical = name.upper()
        try:
            mix(canonical)
        except InputError:
            raise InputError(f"--mixes: unknown workload mix {name!r} (M-1 ... M-12)") from None
        out.append(canonical)
    return tuple(out)


def parse_policies(text: str) -> tuple[str, ...]:
    names = _names(text, "--policies")
    for n in names:
        policy_class(n, "--policies")
    return names


def parse_rounds(text: str, option: str = "--rounds") -> tuple[float, ...]:
    out = []
    for s in _names(text, option):
        try:
            v = float(s)
        except ValueError:
            raise InputError(f"{option}: {s!r} is not a number of seconds") from None
        if not 1 <= v <= 7 * 86400:
            raise InputError(
                f"{option}: round lengths must be positive, from 1 s to 7 days (got {s})"
            )
        out.append(v)
    if len(set(out)) != len(out):
        raise InputError(f"{option}: a round length is given twice")
    return tuple(sorted(out))


def parse_spec(
    clusters: str,
    mixes: str,
    policies: str,
    rounds: str,
    main_round: str | None,
    restart_penalty_s: float = SIMULATED.restart_penalty_s,
    options: Mapping[str, Mapping[str, str]] | None = None,
) -> GridSpec:
    """A validated :class:`GridSpec` from the command-line strings (InputError on bad input).
    ``main_round`` None = 360 s if swept, else the longest round; ``options``: the policies'
    knobs, already checked (``parse_policy_options``)."""
    rounds_s = parse_rounds(rounds)
    if main_round is None:
        main = DEFAULT_MAIN_ROUND_S if DEFAULT_MAIN_ROUND_S in rounds_s else rounds_s[-1]
    else:
        main = parse_rounds(main_round, "--main-round")[0]
        if main not in rounds_s:
            raise InputError(
                f"--main-round: {main:g} s is not one of --rounds ({', '.join(f'{s:g}' for s in rounds_s)})"
            )
    if restart_penalty_s < 0:
        raise InputError(f"--restart-penalty: must be >= 0 (got {restart_penalty_s:g})")
    check_round(min(rounds_s), restart_penalty_s)
    spec = GridSpec(
        _names(clusters, "--clusters"),
        parse_mixes(mixes),
        parse_policies(policies),
        rounds_s,
        main,
        restart_penalty_s,
        tuple((p, tuple(sorted(o.items()))) for p, o in sorted((options or {}).items())),
    )
    names = [
        scenario(c, spec.mixes[0])[0].name for c in spec.clusters
    ]  # loads (and checks) every cluster
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise InputError(f"--clusters: cluster {dup!r} given twice")
    for c in spec.clusters:
        for m in spec.mixes:
            scenario(c, m)
    return spec


# -- running -----------------------------------------------------------------------------------
@lru_cache(maxsize=64)
def scenario(cluster: str, mix_name: str) -> tuple[Cluster, tuple[Job, ...], ThroughputModel]:
    """Cluster, jobs (paper size) and throughput model of one (cluster, mix), as ``hadar simulate``
    builds them: Gavel's measured table where it covers the pair, the PMI/PCIe estimate elsewhere."""
    c, jobs, throughput = load_scenario(cluster, mix_name)
    return c, tuple(jobs), throughput


def run_cell(cell: Cell) -> dict[str, Any]:
    """Simulate one cell; its row (keys :data:`ROW_KEYS`)."""
    from hadar.policy_options import policy_with_options
    from hadar.simulator import SimConfig, simulate  # here: the CLI's parser reads this module
    from hadar.simulator.metrics import summarize

    cluster, jobs, throughput = scenario(cell.cluster, cell.mix)
    config = SimConfig(round_s=cell.round_s, restart_penalty_s=cell.restart_penalty_s)
    policy = policy_with_options(cell.policy, dict(cell.options))
    result = simulate(cluster, list(jobs), policy, throughput, config)
    s = summarize(result)
    jct = [j.jct for j in result.jobs if j.jct is not None]
    return {
        "cluster": cluster.name,
        "mix": cell.mix,
        "policy": cell.policy,
        "round_s": cell.round_s,
        "jobs": s["jobs"],
        "completed": s["completed"],
        "ttd_s": s["ttd_s"],
        "avg_jct_s": s["avg_jct_s"],
        "min_jct_s": min(jct) if jct else None,
        "max_jct_s": max(jct) if jct else None,
        "p99_jct_s": s["p99_jct_s"],
        "rho_max": s["rho_max"],
        "cru": s["cru"],
        "gpu_util_gavel": s["gpu_util_gavel"],
        "restarts_per_job": s["restarts_per_job"],
        "rounds": s["rounds"],
    }


def run_cells(
    todo: Sequence[Cell],
    workers: int = 1,
    on_done: Callable[[Cell, dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Rows of ``todo`` in order (``on_done(cell, row)`` as each arrives, in that order);
    ``workers`` > 1 runs them in that many processes, forked on
    Linux (a spawned worker spends ~3 s importing the policies, torch included via the tracker,
    which is more than a whole default grid's share of work on two cores), spawned elsewhere.
    Cells share no mutable state, so neither the start method nor the workers change a result."""
    if workers > 1 and len(todo) > 1:
        for (
            cell
        ) in todo:  # warm the parent: forked workers inherit the imports and loaded scenarios
            scenario(cell.cluster, cell.mix)
        for name in dict.fromkeys(c.policy for c in todo):
            make_policy(name)
    return sweep.run_cells(
        run_cell,
        todo,
        workers,
        on_done=on_done,
        start_method="fork" if sys.platform.startswith("linux") else "spawn",
        chunksize=len(todo) // (4 * workers),
    )


# -- per (cluster, mix) context ------------------------------------------------------------------
def scenario_bounds(spec: GridSpec) -> dict[tuple[str, str], TtdBounds]:
    """TTD lower bounds per (cluster name, mix)."""
    out = {}
    for c in spec.clusters:
        for m in spec.mixes:
            cluster, jobs, throughput = scenario(c, m)
            out[(cluster.name, m)] = mix_bounds(jobs, cluster, throughput)
    return out


def estimated_pairs(spec: GridSpec) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """Per (cluster name, mix): the (workload, GPU type) pairs whose throughput is the PMI/PCIe
    estimate rather than a measurement (workload = the mix's short name, e.g. ``MM``)."""
    out: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for c in spec.clusters:
        for m in spec.mixes:
            cluster, jobs, throughput = scenario(c, m)
            pairs: set[tuple[str, str]] = set()
            if isinstance(throughput, CompositeThroughput):
                short = {j.job_type: j.model or j.job_type for j in jobs}
                pairs = {(short[t], k) for t, k in throughput.estimated_pairs(jobs, cluster)}
            out[(cluster.name, m)] = sorted(pairs)
    return out
