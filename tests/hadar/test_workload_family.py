"""A workload carries the set-up of the paper it comes from (``WorkloadFamily``): on Pollux's
workloads every driver runs every policy on Pollux's 60 s round and Tiresias with the Pollux
artifact's queue threshold, with no knobs typed; a typed ``--round`` or ``--policy-opt`` wins."""

from __future__ import annotations

import json

from hadar import api
from hadar.cli import main
from hadar.core.defaults import PHILLY_FAMILY, POLLUX_FAMILY
from hadar.scenario import family_note, family_options, family_round, workload_family
from hadar.workloads.pollux import pollux_jobs

SMALL = "pollux-1-load-0.5"  # 80 of Pollux's jobs


def _rounds(sim: api.Simulation) -> set[float]:
    return set(sim.rounds.duration.iloc[:-1])


def test_the_family_is_decided_from_the_name_or_the_jobs_without_loading():
    assert workload_family("pollux-6") is POLLUX_FAMILY
    assert workload_family(SMALL) is POLLUX_FAMILY
    assert workload_family("philly-480-arrivals") is PHILLY_FAMILY
    assert workload_family("M-5") is None
    assert workload_family("pollux-jobs.csv") is None  # a file is taken as given
    assert workload_family(pollux_jobs("pollux-2")) is POLLUX_FAMILY
    assert workload_family([]) is None


def test_typed_settings_win_over_the_familys():
    assert family_round(POLLUX_FAMILY, ["tiresias"], None) == 60.0
    assert family_round(POLLUX_FAMILY, ["tiresias"], 360.0) == 360.0
    assert family_round(PHILLY_FAMILY, ["tiresias"], None) == 360.0
    assert family_round(PHILLY_FAMILY, ["pollux"], None) == 60.0  # its declared round stays
    assert family_options(POLLUX_FAMILY, "tiresias", None) == {"threshold": "57600"}
    assert family_options(POLLUX_FAMILY, "tiresias", {"threshold": "100"}) == {"threshold": "100"}
    assert family_options(POLLUX_FAMILY, "gavel", {"x": "1"}) == {"x": "1"}
    assert family_options(None, "tiresias", None) == {}
    note = family_note(POLLUX_FAMILY, ["tiresias", "pollux"], None, {})
    assert note is not None and "round 60 s" in note and "tiresias: threshold=57600" in note
    assert family_note(POLLUX_FAMILY, ["tiresias"], 60.0, {"tiresias": {"threshold": "1"}}) is None
    assert family_note(None, ["tiresias"], None, {}) is None


def test_simulate_runs_pollux_workloads_with_the_papers_set_up_unless_told_otherwise():
    plain = api.simulate("pollux-64t4", SMALL, "tiresias")
    spelt = api.simulate(
        "pollux-64t4", SMALL, "tiresias", round_s=60.0, policy_options={"threshold": "57600"}
    )
    assert _rounds(plain) == {60.0}
    assert plain.summary["avg_jct_s"] == spelt.summary["avg_jct_s"]
    own = api.simulate("pollux-64t4", SMALL, "tiresias", policy_options={"threshold": "3250"})
    assert _rounds(own) == {60.0}
    assert own.summary["avg_jct_s"] != plain.summary["avg_jct_s"]  # the typed threshold ran
    longer = api.simulate("pollux-64t4", SMALL, "tiresias", round_s=360.0)
    assert _rounds(longer) == {360.0}


def test_simulate_and_compare_agree_with_no_knobs(tmp_path, capsys):
    argv = ["--cluster", "pollux-64t4", "--workload", SMALL]
    assert (
        main(
            [
                "simulate",
                *argv,
                "--policy",
                "tiresias",
                "--no-progress",
                "--out",
                str(tmp_path / "s"),
            ]
        )
        == 0
    )
    said = capsys.readouterr().err
    assert "pollux-N set-up" in said and "tiresias: threshold=57600" in said
    assert (
        main(
            [
                "compare",
                *argv,
                "--policies",
                "tiresias,afs",
                "--workers",
                "1",
                "--decision-sizes",
                "",
                "--out",
                str(tmp_path / "c"),
            ]
        )
        == 0
    )
    meta = json.loads((tmp_path / "c" / "compare.json").read_text())
    assert meta["round_s"] == 60.0
    assert any("tiresias: threshold=57600" in n for n in meta["notes"])
    alone = json.loads((tmp_path / "s" / "summary.json").read_text())
    rows = {r["policy"]: r for r in meta["policies"]}
    assert rows["tiresias"]["avg_jct_s"] == alone["avg_jct_s"]
