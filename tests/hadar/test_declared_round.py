"""A policy declares its own round (``PolicyInfo.round_s``: Pollux's 60 s interval) once, in its
registration; every driver uses it when no round is given, a typed ``--round`` wins, and a
comparison runs every policy at one common round (the shortest declared), saying so."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from hadar import api
from hadar.cli import build_parser, main
from hadar.commands.experiment import _physical_rounds
from hadar.commands.options import resolve_round
from hadar.policy import (
    DeclaredRound,
    PolicyInfo,
    declared_round,
    policy_info,
    register_policy,
    round_for,
    unregister_policy,
)
from hadar.simulator.metrics import allocation_metrics
from hadar.simulator.records import PlacementRecord
from tests.hadar.test_policy_registry import ToyPolicy

HEADER = "name,time,application,num_replicas,batch_size"


class SlowToy(ToyPolicy):
    name = "toy-every-45s"
    info = PolicyInfo(title="Toy 45 s", round_s=45.0)


@pytest.fixture
def slow_toy() -> Iterator[type[SlowToy]]:
    register_policy(SlowToy)
    try:
        yield SlowToy
    finally:
        unregister_policy(SlowToy.name)


def test_the_shortest_declared_round_is_the_common_one(slow_toy):
    assert policy_info("pollux").round_s == 60.0
    assert declared_round(["hadar", "gavel"]) is None
    assert declared_round(["hadar", "pollux"]) == DeclaredRound(60.0, ("pollux",))
    assert declared_round(["pollux", slow_toy.name, "hadar"]) == DeclaredRound(
        45.0, (slow_toy.name,)
    )
    assert round_for(["hadar"], None, 360.0) == 360.0
    assert round_for(["pollux"], None, 360.0) == 60.0
    assert round_for(["pollux"], 120.0, 360.0) == 120.0  # a given round wins
    with pytest.raises(ValueError, match="round_s"):
        PolicyInfo(title="x", round_s=0.0)


def _two_ncf_jobs(tmp_path: Path) -> str:
    path = tmp_path / "two.csv"
    path.write_text(f"{HEADER}\na,0,ncf,1,256\nb,30,ncf,1,256\n")
    return str(path)


def _round_lengths(sim: api.Simulation) -> set[float]:
    return set(sim.rounds.duration.iloc[:-1])  # the last round ends with the last job


def test_simulate_uses_the_declared_round_unless_one_is_given(tmp_path):
    workload = _two_ncf_jobs(tmp_path)
    assert _round_lengths(api.simulate("pollux-64t4", workload, "pollux")) == {60.0}
    assert _round_lengths(api.simulate("pollux-64t4", workload, "pollux", round_s=120.0)) == {120.0}
    assert _round_lengths(api.simulate("pollux-64t4", workload, "tiresias")) == {360.0}


def test_compare_on_a_pollux_workload_runs_the_pollux_papers_comparison(tmp_path, capsys):
    out = tmp_path / "cmp"
    argv = ["compare", "--cluster", "pollux-64t4", "--workload", _two_ncf_jobs(tmp_path)]
    assert main([*argv, "--workers", "1", "--decision-sizes", "", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "round: 60 s, pollux, sia's declared scheduling interval" in printed
    assert "one common round for every policy" in printed
    meta = json.loads((out / "compare.json").read_text())
    assert meta["round_s"] == 60.0
    rows = {r["policy"]: r for r in meta["policies"]}
    assert list(rows) == ["hadar", "hadare", "gavel", "tiresias", "sia", "pollux"]
    for r in rows.values():
        assert r["completed"] == 2
        assert r["gpu_hours"] > 0 and r["avg_gpus_per_job"] >= 1 and r["avg_batch_per_job"] > 0
    for label in ("GPU-hours", "GPUs / job", "batch / job", "p99 JCT", "TTD"):
        assert label in printed


def test_a_typed_round_wins_and_no_declaration_keeps_the_default(tmp_path, capsys):
    argv = ["compare", "--cluster", "pollux-64t4", "--workload", _two_ncf_jobs(tmp_path)]
    argv += ["--workers", "1", "--decision-sizes", "", "--policies", "tiresias,pollux"]
    assert main([*argv, "--round", "120", "--out", str(tmp_path / "a")]) == 0
    assert "declared" not in capsys.readouterr().out
    assert json.loads((tmp_path / "a" / "compare.json").read_text())["round_s"] == 120.0
    argv[-1] = "tiresias"
    assert main([*argv, "--out", str(tmp_path / "b")]) == 0
    assert json.loads((tmp_path / "b" / "compare.json").read_text())["round_s"] == 360.0


def test_the_physical_grid_sweeps_the_declared_round_and_makes_it_the_main_one():
    rounds, main_round, note = _physical_rounds(None, None, "gavel,pollux")
    assert (rounds, main_round) == ("60,90,180,360", "60")
    assert note is not None and "pollux's declared" in note
    assert _physical_rounds(None, None, "gavel,hadar") == ("90,180,360", None, None)
    assert _physical_rounds("180,360", "360", "pollux") == ("180,360", "360", None)


def _run(job: int, copy: int, node: str, gpus: int, batch: int | None, rnd: int = 0):
    return PlacementRecord(rnd, 0.0, job, copy, node, "t4", gpus, gpus=gpus, batch_size=batch)


def test_allocation_metrics_count_a_run_once_and_a_jobs_copies_together():
    rows = [
        _run(1, 0, "n0", 4, 256),  # job 1 spans two nodes: one run, 8 GPUs in all
        _run(1, 0, "n1", 4, 256),
        _run(2, 1, "n0", 2, 128),  # job 2 forked: two copies of 2 GPUs
        _run(2, 2, "n1", 2, 128),
    ]
    rows = [r if r.job_id != 1 else PlacementRecord(**{**vars(r), "gpus": 8}) for r in rows]
    got = allocation_metrics(7200.0, rows)
    assert got == {"gpu_hours": 2.0, "avg_gpus_per_job": 6.0, "avg_batch_per_job": 256.0}
    rigid = allocation_metrics(0.0, [_run(3, 0, "n0", 1, None)])
    assert rigid["avg_batch_per_job"] is None and rigid["avg_gpus_per_job"] == 1.0


def test_compare_takes_the_load_of_a_pollux_workload(tmp_path):
    out = tmp_path / "load"
    argv = ["compare", "--cluster", "pollux-64t4", "--workload", "pollux-1", "--load", "0.5"]
    argv += ["--policies", "tiresias", "--workers", "1", "--decision-sizes", ""]
    assert main([*argv, "--out", str(out)]) == 0
    meta = json.loads((out / "compare.json").read_text())
    # a pollux-N workload runs every policy on the Pollux paper's 60 s round (its family's)
    assert (meta["workload"], meta["jobs"], meta["round_s"]) == ("pollux-1-load-0.5", 80, 60.0)


@pytest.mark.parametrize(
    ("typed", "policy", "want"),
    [([], "pollux", 60.0), ([], "hadar", 30.0), (["--round", "12"], "pollux", 12.0),
     (["--slot", "12"], "pollux", 12.0)],
)  # fmt: skip
def test_a_real_run_takes_the_declared_round_unless_one_is_typed(typed, policy, want):
    args = build_parser().parse_args(["run", "--policy", policy, *typed])
    note = resolve_round(args, [args.policy])
    assert args.round_s == want and type(args.round_s) is float
    assert (note is not None) == (not typed and policy == "pollux")
