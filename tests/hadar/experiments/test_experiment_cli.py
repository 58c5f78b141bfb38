"""``hadar experiment physical`` end to end on a reduced grid: files and PNGs, parallel == serial,
printed numbers == a direct simulate + summarize, estimated pairs reported, bad input -> exit 2."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
from pathlib import Path
from unittest import mock

import pytest

from estimators.composite import CompositeThroughput
from hadar.cli import main
from hadar.clusters import load_cluster
from hadar.policy import make_policy
from hadar.policy_options import policy_with_options
from hadar.scenario import load_table, throughput_for
from hadar.simulator import SimConfig, simulate
from hadar.simulator.metrics import summarize
from hadar.workloads.mixes import mix_jobs

CLUSTERS = ("aws-5node", "lab-5node")
MIXES = ("M-1", "M-5")
POLICIES = ("gavel", "hadar", "hadare")
ROUNDS_S = (180.0, 360.0)
PNGS = (
    "fig8_cru.png",
    "fig9_ttd.png",
    "fig10_jct.png",
    "fig11_cru_slots_hadare.png",
    "fig12_cru_slots_hadar.png",
)


def _args(out: Path, jobs: int) -> list[str]:
    return [
        "experiment",
        "physical",
        "--clusters",
        ",".join(CLUSTERS),
        "--mixes",
        ",".join(MIXES),
        "--policies",
        ",".join(POLICIES),
        "--rounds",
        "180,360",
        "--main-round",
        "360",
        "--workers",
        str(jobs),
        "--out",
        str(out),
    ]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("physical")
    printed = {}
    for name, jobs in (("serial", 1), ("parallel", 2)):
        buf = io.StringIO()
        # tables in a pipe are laid out in $COLUMNS: pinned, whatever another test or the
        # worker's environment left there, so the rows parse
        with contextlib.redirect_stdout(buf), mock.patch.dict(os.environ, {"COLUMNS": "200"}):
            assert main(_args(base / name, jobs)) == 0
        printed[name] = buf.getvalue()
    return base / "serial", base / "parallel", printed["serial"]


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _direct(cluster_name: str, mix: str, policy: str, round_s: float):
    cluster, jobs = load_cluster(cluster_name), mix_jobs(mix, size="paper")
    throughput = throughput_for(jobs, cluster, load_table(None))
    result = simulate(
        cluster,
        jobs,
        make_policy(policy),
        throughput,
        SimConfig(round_s=round_s, restart_penalty_s=10.0),
    )
    return result, summarize(result)


def test_every_cell_file_and_png_is_written(runs):
    out, _, _ = runs
    for name in ("results.csv", "results.json", *PNGS):
        assert (out / name).stat().st_size > 0, name
    for png in PNGS:
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = _csv(out / "results.csv")
    assert [(r["cluster"], r["mix"], r["policy"], float(r["round_s"])) for r in rows] == [
        (c, m, p, s) for c in CLUSTERS for m in MIXES for p in POLICIES for s in ROUNDS_S
    ]
    assert all(r["completed"] == r["jobs"] for r in rows)
    doc = json.loads((out / "results.json").read_text())
    assert doc["grid"]["main_round_s"] == 360.0 and len(doc["cells"]) == len(rows)
    assert set(doc["clusters"]) == set(CLUSTERS)


def test_parallel_equals_serial(runs):
    serial, parallel, _ = runs
    assert (serial / "results.csv").read_bytes() == (parallel / "results.csv").read_bytes()
    a, b = (json.loads((d / "results.json").read_text()) for d in (serial, parallel))
    assert a["workers"] == 1 and b["workers"] == 2
    assert a["cells"] == b["cells"] and a["clusters"] == b["clusters"]


@pytest.mark.parametrize(
    "cluster,mix,policy,round_s",
    [("lab-5node", "M-5", "hadare", 360.0), ("aws-5node", "M-5", "gavel", 180.0)],
)
def test_cell_equals_direct_simulation(runs, cluster, mix, policy, round_s):
    out, _, _ = runs
    result, s = _direct(cluster, mix, policy, round_s)
    jct = [j.jct for j in result.jobs]
    row = next(
        r
        for r in json.loads((out / "results.json").read_text())["cells"]
        if (r["cluster"], r["mix"], r["policy"], r["round_s"]) == (cluster, mix, policy, round_s)
    )
    assert (
        row["ttd_s"] == s["ttd_s"] and row["avg_jct_s"] == s["avg_jct_s"] and row["cru"] == s["cru"]
    )
    assert row["min_jct_s"] == min(jct) and row["max_jct_s"] == max(jct)
    assert row["rounds"] == s["rounds"] and row["restarts_per_job"] == s["restarts_per_job"]


def _printed_rows(text: str, title: str) -> dict[tuple[str, str], list[str]]:
    """(mix, policy) -> cells of the per-mix-and-policy table printed under ``title``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if title in line)
    rows: dict[tuple[str, str], list[str]] = {}
    mix = None
    for line in lines[start + 1 :]:
        if line.startswith("└"):
            break
        if not line.startswith("│"):
            continue
        cells = [c.strip() for c in line.strip("│").split("│")]
        mix = cells[0] or mix
        rows[(mix, cells[1])] = cells
    return rows


def test_printed_table_shows_the_direct_numbers(runs):
    _, _, printed = runs
    table = _printed_rows(printed, "lab-5node, round 360 s: per mix and policy")
    for policy, title in (("gavel", "Gavel"), ("hadar", "Hadar"), ("hadare", "HadarE")):
        result, s = _direct("lab-5node", "M-5", policy, 360.0)
        jct = [j.jct for j in result.jobs]
        cells = table[("M-5", title)]
        assert cells[2] == f"{s['gru']:.3f}"
        assert cells[3] == f"{s['ttd_s']:,.0f}"
        assert cells[6] == f"{s['avg_jct_s']:,.0f}"
        assert cells[7] == f"{min(jct):,.0f}-{max(jct):,.0f}"


def test_ratios_and_targets_follow_the_cells(runs):
    out, _, printed = runs
    doc = json.loads((out / "results.json").read_text())
    cells = {(r["cluster"], r["mix"], r["policy"], r["round_s"]): r for r in doc["cells"]}
    m5 = next(c for c in doc["clusters"]["aws-5node"]["per_mix"] if c["mix"] == "M-5")
    hadar, hadare = (
        cells[("aws-5node", "M-5", "hadar", 360.0)],
        cells[("aws-5node", "M-5", "hadare", 360.0)],
    )
    assert m5["ttd_hadare_vs_hadar"] == pytest.approx(hadar["ttd_s"] / hadare["ttd_s"])
    assert m5["cru_hadare_vs_hadar"] == pytest.approx(hadare["cru"] / hadar["cru"])
    assert m5["hadare_ttd_over_hadar"] == pytest.approx(hadare["ttd_s"] / hadar["ttd_s"])
    ttd_target = next(t for t in doc["clusters"]["aws-5node"]["targets"] if "TTD" in t["target"])
    assert ttd_target["met"] == (hadare["ttd_s"] <= 0.6 * hadar["ttd_s"])
    assert "targets on M-5" in printed and "paper (mean)" in printed and "1.79x" in printed
    for r in doc["cells"]:  # every TTD respects its lower bound
        assert r["ttd_s"] >= r["lb_s"] - 1e-6


def test_estimated_pairs_are_reported_for_lab(runs):
    out, _, printed = runs
    doc = json.loads((out / "results.json").read_text())
    cluster, jobs = load_cluster("lab-5node"), mix_jobs("M-5")
    throughput = throughput_for(jobs, cluster, load_table(None))
    assert isinstance(throughput, CompositeThroughput)
    short = {j.job_type: j.model for j in jobs}
    expected = sorted({(short[t], k) for t, k in throughput.estimated_pairs(jobs, cluster)})
    assert [tuple(p) for p in doc["clusters"]["lab-5node"]["estimated"]["M-5"]] == expected
    assert ("IC", "t400") in expected and ("MM", "rtx3090") in expected
    assert any(line.startswith("lab-5node: throughputs estimated") for line in printed.splitlines())
    assert "MM on rtx-a2000, rtx3090, t4, t400, titan-rtx" in " ".join(printed.split())
    # on AWS, Gavel measured IC on the V100 and K80 but not on the T4
    aws = {tuple(p) for p in doc["clusters"]["aws-5node"]["estimated"]["M-5"]}
    assert ("IC", "t4") in aws and ("IC", "v100") not in aws and ("MM", "v100") in aws
    rows = _csv(out / "results.csv")
    assert (
        "IC@t400"
        in next(r for r in rows if r["cluster"] == "lab-5node" and r["mix"] == "M-5")["estimated"]
    )


def _one_cell_args(out: Path, mix: str, *more: str) -> list[str]:
    """A grid of one cluster (aws-5node), one mix and the 360 s round, and ``more``."""
    args = ["experiment", "physical", "--clusters", "aws-5node", "--mixes", mix, "--rounds"]
    return [*args, "360", *more, "--out", str(out)]


@pytest.mark.parametrize(
    "change,needle",
    [
        (("--mixes", "M-5,M-13"), "--mixes: unknown workload mix 'M-13'"),
        (("--clusters", "aws-5node,nosuch"), "nosuch: cluster file not found"),
        (("--rounds", "0,360"), "--rounds: round lengths must be positive"),
        (("--rounds", "-90"), "--rounds: round lengths must be positive"),
        (("--rounds", "abc"), "--rounds: 'abc' is not a number"),
        (("--main-round", "90"), "--main-round: 90 s is not one of --rounds"),
        (("--policies", "hadar,slurm"), "--policies: unknown policy 'slurm'"),
        (("--workers", "0"), "--workers: must be a whole number of processes in [1, 256]"),
        (("--policy-opt", "hadar:nosuch=1"), "nosuch"),
        (("--policy-opt", "tiresias:preset=legacy"), "'tiresias' is not one of --policies"),
        (("--policy-opt", "hadar"), "--policy-opt: expected POLICY:KEY=VALUE"),
    ],
)
def test_bad_arguments_are_one_line_exit_2(tmp_path, capsys, change, needle):
    args = _one_cell_args(tmp_path / "out", "M-1")
    i = args.index(change[0]) if change[0] in args else None
    if i is None:
        args += list(change)
    else:
        args[i + 1] = change[1]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
    assert not (tmp_path / "out").exists()


def test_policy_options_reach_the_cells_and_the_json(tmp_path):
    """``--policy-opt POLICY:KEY=VALUE`` configures that policy in every cell (the row equals a
    direct simulation with the knob, and differs from the default's), and results.json says so."""
    more = ("--policies", "hadar,gavel", "--policy-opt", "hadar:preset=legacy")
    args = _one_cell_args(tmp_path / "out", "M-5", *more)
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(args) == 0
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    assert doc["grid"]["policy_options"] == {"hadar": {"preset": "legacy"}}
    row = next(r for r in doc["cells"] if r["policy"] == "hadar")
    cluster, jobs = load_cluster("aws-5node"), mix_jobs("M-5", size="paper")
    throughput = throughput_for(jobs, cluster, load_table(None))
    config = SimConfig(round_s=360.0, restart_penalty_s=10.0)
    legacy = summarize(
        simulate(
            cluster, jobs, policy_with_options("hadar", {"preset": "legacy"}), throughput, config
        )
    )
    _, default = _direct("aws-5node", "M-5", "hadar", 360.0)
    assert row["ttd_s"] == legacy["ttd_s"] and row["avg_jct_s"] == legacy["avg_jct_s"]
    assert row["ttd_s"] != default["ttd_s"]


def test_a_line_per_finished_cell_is_printed_as_it_finishes(runs):
    """Not on a terminal (here: a buffer) the grid still says how far it is, one line a cell."""
    _, _, printed = runs
    total = len(CLUSTERS) * len(MIXES) * len(POLICIES) * len(ROUNDS_S)
    lines = [line for line in printed.splitlines() if line.startswith("  [")]
    assert len(lines) == total
    assert [line.split("]")[0].strip() for line in lines] == [
        f"[{k}/{total}" for k in range(1, total + 1)
    ]
    first = lines[0]
    assert f" {MIXES[0]} {POLICIES[0]} round {ROUNDS_S[0]:g} s: TTD " in first
    assert re.search(r"jobs done \[\d+ s\]$", first)
    assert printed.index(lines[-1]) < printed.index("cells simulated in")
