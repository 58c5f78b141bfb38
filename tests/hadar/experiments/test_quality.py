"""The quality table (HadarE against Hadar at equal samples and equal wall time) from a recorded
pair of real tiny runs (``data/quality``, see its README), scored with the real evaluation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hadar.experiments.quality import (
    Interval,
    build_table,
    load_runs,
    render_markdown,
    score_checkpoint,
)

DATA = Path(__file__).parent / "data" / "quality"


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    # reading a run's state file may fold its write-ahead log back: never in the source tree
    out = tmp_path / "quality"
    shutil.copytree(DATA, out)
    return out


def _summary(runs_dir: Path, policy: str) -> dict:
    return json.loads((runs_dir / "M-3" / "seed-0" / policy / "summary.json").read_text())


def test_table_from_recorded_runs(runs_dir: Path) -> None:
    runs = load_runs(runs_dir)
    assert sorted(r.policy for r in runs) == ["hadar", "hadare"]
    scored: list[Path | None] = []

    def scorer(spec, checkpoint):  # the real evaluation, recording what it was asked
        scored.append(checkpoint)
        return score_checkpoint(spec, checkpoint)

    tab = build_table(runs, scorer)
    hadar, hadare = _summary(runs_dir, "hadar"), _summary(runs_dir, "hadare")
    # equal wall time is the earlier TTD of the pair
    assert tab.wall_s["M-3"][0] == pytest.approx(min(hadar["ttd_s"], hadare["ttd_s"]))
    assert tab.ttd["M-3"]["hadar"][0] == pytest.approx(hadar["ttd_s"])
    rows = {r.job_id: r for r in tab.rows}
    assert sorted(rows) == [0, 1, 2]
    for jid, row in rows.items():
        # equal samples: the final models, as each run scored them itself
        assert row.samples["hadar"][0] == hadar["quality"][str(jid)]["value"]
        assert row.samples["hadare"][0] == hadare["quality"][str(jid)]["value"]
        # HadarE finished first: its models at that moment are its final ones
        assert row.wall["hadare"][0] == row.samples["hadare"][0]
    # Hadar had finished no job by then: each was scored at its newest checkpoint of that time,
    # the checkpoints of round 1 (round 2 closed after HadarE's TTD)
    wall_scored = [p.parent.name + "/" + p.name[:12] for p in scored[:3] if p is not None]
    assert wall_scored == ["job-0/round-000001", "job-1/round-000001", "job-2/round-000001"]
    for jid in (1, 2):  # the weather jobs had trained under half their steps: a worse MSE
        assert rows[jid].metric == "mse"
        assert rows[jid].wall["hadar"][0] > rows[jid].samples["hadar"][0]
    # HadarE ran job 1 on two or three copies in every round that counted steps, job 0 on one
    assert rows[1].forked_share[0] == 1.0
    assert rows[0].forked_share[0] == 0.0
    assert 0.0 < rows[2].forked_share[0] < 1.0
    # the gain is HadarE better than Hadar, in the metric's units (MSE: lower is better)
    gain = rows[1].gain("samples")
    assert gain is not None and gain.n == 1
    assert gain.mean == pytest.approx(-(row_value(rows[1], "hadare") - row_value(rows[1], "hadar")))
    # what HadarE's forked weather models are worth on Hadar's own curve: their held-out MSE
    # lies between those of the two Hadar checkpoints around that many steps
    for jid in (1, 2):
        worth = rows[jid].worth[0]
        assert 0.0 < worth < 1.0 and not rows[jid].worth_capped
        run = next(r for r in runs if r.policy == "hadar").jobs[jid]
        steps = worth * run.target_steps
        below = [s for s in run.snapshots if s.steps <= steps][-1]
        above = next(s for s in run.snapshots if s.steps > steps)
        mse = rows[jid].samples["hadare"][0]
        above_mse = run.final if above.steps == run.target_steps else score(run, above)
        assert score(run, below) > mse >= above_mse
    assert 0 not in rows[0].worth  # job 0 was never forked
    text = render_markdown(tab)
    assert "**M-3** (seeds 0)" in text
    assert "| 1 | MM (mse ↓) | 100% |" in text
    assert tab.as_dict()["jobs"][1]["equal_samples_gain"]["mean"] == pytest.approx(gain.mean)


def score(job, snap) -> float:
    return score_checkpoint(job.spec, snap.checkpoint)


def row_value(row, policy: str) -> float:
    return row.samples[policy][0]


def test_scorer_reproduces_the_runs_evaluation(runs_dir: Path) -> None:
    """Scoring a job's final checkpoint here gives what the run's own evaluation recorded."""
    run = next(r for r in load_runs(runs_dir) if r.policy == "hadar")
    job = run.jobs[1]
    final = job.snapshots[-1]
    assert final.steps == job.target_steps
    assert score_checkpoint(job.spec, final.checkpoint) == pytest.approx(job.final, rel=1e-6)
    # the initial model is worse than the trained one
    assert score_checkpoint(job.spec, None) > job.final


def test_a_seed_with_one_policy_is_left_out(runs_dir: Path) -> None:
    shutil.rmtree(runs_dir / "M-3" / "seed-0" / "hadar")
    tab = build_table(load_runs(runs_dir), lambda spec, ckpt: pytest.fail("nothing to score"))
    assert tab.rows == [] and tab.ttd == {}


def test_interval() -> None:
    iv = Interval.of([1.0, 2.0, 3.0])
    assert iv is not None and iv.mean == 2.0 and iv.n == 3
    assert iv.half == pytest.approx(4.302653 / 3**0.5, rel=1e-5)  # t(0.975, 2) s / sqrt(n)
    one = Interval.of([0.25])
    assert one is not None and one.half is None and one.text(2) == "0.25"
    assert Interval.of([]) is None
    assert Interval(1.0, 0.5, 2).text(1) == "1.0 ± 0.5"
