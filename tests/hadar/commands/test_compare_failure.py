"""``hadar compare`` when one policy's simulation stops: the others are reported, the failed one
is marked with its reason (table, compare.md/csv/json), its run up to the stop is kept, exit 7;
a bug in a policy still surfaces."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from hadar.cli import main
from hadar.core.errors import PARTIAL_RESULT_EXIT_CODE
from hadar.loop import PolicyError
from hadar.policy import policy_class

R18 = "ResNet-18 (batch size 64)"


@pytest.fixture()
def scene(tmp_path: Path) -> Path:
    """One node with a V100 and a P100; a 1-GPU job and a 2-GPU job. Hadar mixes GPU types and
    runs both; Gavel runs a job on one type, finishes job 0 and then can never place job 1."""
    (tmp_path / "c.yaml").write_text("name: c\nnodes:\n  - {name: a, gpus: {v100: 1, p100: 1}}\n")
    (tmp_path / "jobs.csv").write_text(
        f"id,type,gpus,steps\n0,{R18},1,5000\n1,LM (batch size 20),2,3000\n"
    )
    return tmp_path


def _argv(d: Path, policies: str) -> list[str]:
    return [
        "compare",
        "--cluster",
        str(d / "c.yaml"),
        "--workload",
        str(d / "jobs.csv"),
        "--policies",
        policies,
        "--workers",
        "1",
        "--decision-sizes",
        "4",
        "--decision-repeats",
        "1",
        "--out",
        str(d / "cmp"),
    ]


def test_a_stalled_policy_is_marked_failed_and_the_others_are_reported(scene, capsys):
    assert PARTIAL_RESULT_EXIT_CODE not in (0, 1, 2, 3, 4, 5, 6)  # 6: the Job Tracker's busy
    assert main(_argv(scene, "gavel,hadar")) == PARTIAL_RESULT_EXIT_CODE
    printed = capsys.readouterr()
    out = scene / "cmp"
    assert "gavel failed (simulation stopped at " in printed.out
    assert "h): policy gavel cannot place job(s) 1 on cluster c" in printed.out
    assert printed.err.splitlines() == [
        "hadar: error: 1 of 2 policies failed (gavel; the reasons are under the table and in "
        "compare.json); the others are reported"
    ]

    with (out / "compare.csv").open(newline="") as fh:
        rows = {r["policy"]: r for r in csv.DictReader(fh)}
    assert list(rows) == ["gavel", "hadar"]  # the order given
    hadar, gavel = rows["hadar"], rows["gavel"]
    assert hadar["status"] == "ok" and hadar["failed"] == ""
    assert hadar["completed"] == hadar["jobs"] == "2"
    assert float(hadar["ttd_s"]) > 0 and float(hadar["ttd_s_ratio"]) == 1.0
    assert gavel["status"] == "failed" and "cannot place job(s) 1" in gavel["failed"]
    assert (gavel["jobs"], gavel["completed"]) == ("2", "1")  # job 0 finished before the stall
    assert float(gavel["stopped_at_s"]) > 0
    assert gavel["ttd_s"] == gavel["avg_jct_s"] == gavel["gru"] == gavel["ttd_s_ratio"] == ""

    meta = json.loads((out / "compare.json").read_text())
    assert meta["reference"] == "hadar"
    assert list(meta["failed"]) == ["gavel"] and "cannot place" in meta["failed"]["gavel"]

    md = (out / "compare.md").read_text()
    assert "| gavel (FAILED; 1/2 done) | - | - |" in md
    assert "\ngavel failed (simulation stopped at " in md
    assert "h): policy gavel cannot place job(s) 1" in md
    assert "| hadar | " in md

    # the run up to the stop is kept, marked, with the job it finished
    summary = json.loads((out / "gavel" / "summary.json").read_text())
    assert summary["partial"] is True and "cannot place" in summary["failed"]
    assert summary["completed"] == 1 and summary["stopped_at_s"] == float(gavel["stopped_at_s"])
    with (out / "gavel" / "jobs.csv").open(newline="") as fh:
        finished = [r["id"] for r in csv.DictReader(fh) if r["finish"]]
    assert finished == ["0"]
    assert json.loads((out / "hadar" / "summary.json").read_text()).get("failed") is None


def test_when_every_policy_fails_the_table_says_so(scene, capsys):
    assert main(_argv(scene, "gavel")) == PARTIAL_RESULT_EXIT_CODE
    with (scene / "cmp" / "compare.csv").open(newline="") as fh:
        assert [(r["policy"], r["status"]) for r in csv.DictReader(fh)] == [("gavel", "failed")]
    assert "h): policy gavel cannot place" in capsys.readouterr().out


def test_all_policies_completing_exits_0(scene):
    (scene / "jobs.csv").write_text(f"id,type,gpus,steps\n0,{R18},1,5000\n")
    assert main(_argv(scene, "gavel,hadar")) == 0
    with (scene / "cmp" / "compare.csv").open(newline="") as fh:
        assert {r["status"] for r in csv.DictReader(fh)} == {"ok"}


@pytest.mark.parametrize(
    ("bug", "surfaces"),
    [
        (ZeroDivisionError("division by zero"), ZeroDivisionError),
        (PolicyError("policy gavel planned job 7, which is not queued"), None),
    ],
)
def test_a_bug_in_a_policy_is_not_reported_as_a_failed_policy(
    scene, monkeypatch, capsys, bug, surfaces
):
    """A traceback (any exception) propagates; a :class:`PolicyError` (an impossible plan: a
    bug in the policy) ends the command with its own error, exit 1, not exit 6."""

    def broken(self, ctx):
        raise bug

    monkeypatch.setattr(policy_class("gavel"), "decide", broken)
    if surfaces is not None:
        with pytest.raises(surfaces):
            main(_argv(scene, "hadar,gavel"))
    else:
        assert main(_argv(scene, "hadar,gavel")) == 1
        assert capsys.readouterr().err.startswith("hadar: error: policy gavel planned job 7")
