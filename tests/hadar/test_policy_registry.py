"""A policy is registered once, with its properties, and everything else learns it from there:
a policy defined here (registered the documented way, ``register_policy``) is a ``--policy``
choice, joins the default sets it declares, runs in ``hadar compare``, takes a driver's knob its
config names, gets the bound its ``forking`` declares and its colour in figures, with no other
edit. The built-in policies' declarations reproduce the lists they replaced."""

from __future__ import annotations

import argparse
import csv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hadar.cli import build_parser, main, sub_parsers
from hadar.core.errors import InputError
from hadar.experiments.bounds import TtdBounds
from hadar.experiments.tables import with_bounds
from hadar.policy import (
    POLICY_REGISTRY,
    Assignment,
    Policy,
    PolicyInfo,
    RoundContext,
    RoundPlan,
    default_policies,
    policy_info,
    preferred_reference,
    register_policy,
    unregister_policy,
)
from hadar.runtime.config import RuntimeKnobs
from hadar.simulator.gavel_mode import policy_options as gavel_mode_options


@dataclass(frozen=True)
class ToyConfig:
    aggregation_overhead_s: float = 99.0


class ToyPolicy(Policy):
    """First come, first served on the first node with room (enough to be run end to end)."""

    name = "toy-fcfs"
    info = PolicyInfo(
        title="Toy FCFS",
        colour="#123456",
        forking=True,
        defaults=frozenset({"compare", "load-sweep"}),
        rank=5,
    )
    config_class = ToyConfig

    def __init__(self, config: ToyConfig | None = None, **knobs: float) -> None:
        self.config = config or ToyConfig(**knobs)

    def decide(self, ctx: RoundContext) -> RoundPlan:
        free = {n.name: dict(n.gpus) for n in ctx.cluster.nodes}
        out = []
        for s in ctx.jobs:
            for node, gpus in free.items():
                gpu = next((g for g, c in sorted(gpus.items()) if c >= s.job.num_gpus), None)
                if gpu is not None:
                    gpus[gpu] -= s.job.num_gpus
                    out.append(Assignment(s.job_id, {node: {gpu: s.job.num_gpus}}))
                    break
        return RoundPlan(tuple(out))


@pytest.fixture
def toy() -> Iterator[type[ToyPolicy]]:
    register_policy(ToyPolicy)
    try:
        yield ToyPolicy
    finally:
        unregister_policy(ToyPolicy.name)


def _command(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    return next(p for p in sub_parsers(parser) if p.prog == f"hadar {name}")


def _default(parser: argparse.ArgumentParser, dest: str) -> str:
    return next(a.default for a in parser._actions if a.dest == dest)


def test_builtin_declarations_reproduce_the_old_lists():
    assert default_policies("compare") == ("hadar", "gavel", "tiresias", "yarn-cs")
    assert default_policies("load-sweep") == ("hadar", "hadare", "gavel", "tiresias", "yarn-cs")
    assert default_policies("decision-times") == ("hadar", "gavel")
    assert default_policies("compare-elastic") == (
        "hadar",
        "hadare",
        "gavel",
        "tiresias",
        "sia",
        "pollux",
    )
    assert [n for n in POLICY_REGISTRY if policy_info(n).forking] == ["hadare"]
    assert [n for n in POLICY_REGISTRY if policy_info(n).gavel_native] == [
        "gavel",
        "gavel-fifo",
        "gavel-makespan",
        "themis",  # Gavel's finish_time_fairness_perf (baselines/themis.py)
    ]
    assert preferred_reference(["gavel", "hadar"]) == "hadar"
    assert preferred_reference(["tiresias", "gavel"]) == "tiresias"
    assert RuntimeKnobs().fixed_for("hadare") == {"aggregation_overhead_s": 2.0}
    assert RuntimeKnobs().fixed_for("hadar") == {}


def test_a_new_policy_reaches_the_cli_defaults_and_knobs(toy):
    parser = build_parser()
    policy_flag = next(a for a in _command(parser, "simulate")._actions if a.dest == "policy")
    assert policy_flag.choices is not None and toy.name in policy_flag.choices
    assert _default(_command(parser, "compare"), "policies").split(",")[0] == toy.name
    load_sweep = _command(parser, "experiment load-sweep")
    assert toy.name in _default(load_sweep, "policies").split(",")
    assert preferred_reference([toy.name, "gavel"]) == toy.name  # it declares no reference
    # a driver's knob goes to the policies whose config has a field of that name
    assert RuntimeKnobs(aggregation_overhead_s=4.0).fixed_for(toy.name) == {
        "aggregation_overhead_s": 4.0
    }
    assert gavel_mode_options(toy.name) == {}  # not one of Gavel's own policies


def test_a_new_policy_leaves_the_registry_with_its_test(toy):
    unregister_policy(toy.name)
    assert toy.name not in POLICY_REGISTRY
    with pytest.raises(InputError, match="unknown policy 'toy-fcfs'"):
        policy_info(toy.name)
    register_policy(toy)  # the fixture takes it out again


def test_a_name_is_registered_once(toy):
    class Other(ToyPolicy):
        name = "toy-fcfs"
        info = PolicyInfo(title="another")

    with pytest.raises(ValueError, match="taken"):
        register_policy(Other)
    with pytest.raises(ValueError, match="unknown default set"):
        PolicyInfo(title="x", defaults=frozenset({"comparison"}))


def test_a_new_policy_runs_in_compare_with_its_title_bound_and_colour(toy, tmp_path: Path):
    out = tmp_path / "cmp"
    argv = ["compare", "--cluster", "sim-60gpu", "--workload", "philly-6"]
    argv += ["--policies", f"{toy.name},gavel", "--workers", "1", "--decision-sizes", "8"]
    assert main([*argv, "--out", str(out)]) == 0
    with (out / "compare.csv").open(newline="") as fh:
        rows = {r["policy"]: r for r in csv.DictReader(fh)}
    assert set(rows) == {toy.name, "gavel"}
    assert int(rows[toy.name]["completed"]) == 6
    assert (out / toy.name / "summary.json").is_file()
    assert (out / "fig3_gru.png").read_bytes()[:4] == b"\x89PNG"

    # the fork bound applies to a policy that declares forking
    bounds = {("c", "m"): TtdBounds(fork_s=100.0, nofork_s=300.0, fastest_job_s=50.0)}
    rows_in = [
        {"cluster": "c", "mix": "m", "policy": p, "ttd_s": 600.0, "completed": 1, "jobs": 1}
        for p in (toy.name, "hadar")
    ]
    lb = {r["policy"]: r["lb_s"] for r in with_bounds(rows_in, bounds)}
    assert lb == {toy.name: 100.0, "hadar": 300.0}


def test_figures_use_the_declared_colour(toy):
    pytest.importorskip("matplotlib")
    from matplotlib.colors import to_hex

    from hadar.plots.figures import completion_figure

    fig = completion_figure({toy.name: [60.0, 120.0], "hadar": [90.0]}, {toy.name: 2, "hadar": 2})
    colours = {
        line.get_label().split(":")[0]: to_hex(line.get_color()) for line in fig.axes[0].lines
    }
    assert colours[toy.name] == "#123456"
    assert colours["hadar"] == to_hex("tab:blue")


def test_a_round_context_finds_a_job_status_by_id() -> None:
    from estimators.throughput import GavelThroughputTable
    from hadar.core.cluster import Cluster, Node
    from hadar.core.jobs import Job, JobStatus
    from hadar.policy import RoundContext

    jobs = [Job(i, "ResNet-18 (batch size 32)", 1, 1e4) for i in (7, 3, 11)]
    statuses = tuple(JobStatus(j, j.total_steps / (k + 1)) for k, j in enumerate(jobs))
    ctx = RoundContext(
        0.0,
        0,
        360.0,
        Cluster("one", (Node("n", {"v100": 1}),)),
        statuses,
        {},
        GavelThroughputTable.bundled(),
    )
    assert [ctx.status(j).remaining_steps for j in (3, 11, 7)] == [5e3, 1e4 / 3, 1e4]
    with pytest.raises(KeyError):
        ctx.status(4)
