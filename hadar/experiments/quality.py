"""HadarE against Hadar on real training: each job's held-out quality at equal samples and at
equal wall time, mean and 95 % interval over seeds (``benchmarks/hadare_quality.py``).

A run directory of ``hadar run`` with every checkpoint kept (``--keep-checkpoints``) is read
into a :class:`RunRecord`: per job its final held-out score (the run's own evaluation) and its
consolidated checkpoints, each with the Job Tracker's step count and the moment its round
closed. Two comparisons of the same job under the two policies, seed by seed:

- **equal samples**: the final models. The Job Tracker counts a forked job's steps as the sum
  of its copies' steps (the ``steps`` accounting) and closes every job at its step target, so
  both models were trained on the same number of samples by that count. HadarE at least as good
  as Hadar here means forked steps are worth their full count.
- **equal wall time**: each policy's model of the job at the moment the earlier of the two runs
  finished its last job (its TTD): the newest checkpoint whose round had closed by then, scored
  on the held-out split (the final score when the job had finished).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from hadar.experiments.paper import TARGET_PAIR

POLICIES = (TARGET_PAIR[1], TARGET_PAIR[0])
"""The two policies compared (the paper's HadarE against Hadar): the reference first."""

LOWER_IS_BETTER = frozenset({"perplexity", "mse", "rmse"})
"""Held-out metrics where a smaller value is better (``nodes.models``)."""


@dataclass(frozen=True)
class Snapshot:
    """A job's consolidated model after a round."""

    round: int | None  # None: the initial model
    ready_s: float  # seconds from the run's start to the close of that round
    steps: int  # the Job Tracker's count of steps in it
    checkpoint: Path | None


@dataclass(frozen=True)
class JobRecord:
    job_id: int
    model: str
    metric: str | None
    final: float | None  # the run's held-out score of the final model
    finish_s: float | None
    target_steps: int
    forked_steps: int  # steps counted in rounds where the job ran on more than one copy
    spec: Mapping[str, Any]
    snapshots: tuple[Snapshot, ...]  # oldest first

    def at(self, t: float) -> Snapshot | None:
        """The newest snapshot ready by ``t`` seconds (None: not even an initial one)."""
        ready = [s for s in self.snapshots if s.ready_s <= t + 1e-9]
        return ready[-1] if ready else None


@dataclass(frozen=True)
class RunRecord:
    rundir: Path
    policy: str
    workload: str
    seed: int
    ttd_s: float | None
    jobs: Mapping[int, JobRecord]


def load_run(rundir: Path) -> RunRecord:
    """Read a finished run directory (its state file, read-only)."""
    from hadar.core.state_db import reading_state
    from hadar.runtime.outputs import collect
    from hadar.runtime.state_file import reading_run_state
    from hadar.scenario import load_table
    from hadar.workloads import load_workload
    from tracker.store import Store

    cfg, rounds, jobs, summary = collect(rundir)
    specs = {
        j.job_id: dict(j.spec)
        for j in load_workload(cfg.workload, load_table(None), seed=cfg.seed, size=cfg.size)
    }
    ready = {int(r["round"]): float(r["time"]) + float(r["duration"]) for r in rounds}
    records: dict[int, JobRecord] = {}
    with reading_run_state(rundir) as db, reading_state(db.path):
        store = Store(db, read_only=True)
        forked: dict[int, int] = {}
        for r in ready:
            for row in store.consolidations(r):
                if int(row["copies"]) > 1:
                    job = int(row["job_id"])
                    forked[job] = forked.get(job, 0) + int(row["steps_added"])
        for j in jobs:
            jid = int(j["id"])
            snaps = [
                Snapshot(
                    h["round"],
                    0.0 if h["round"] is None else ready[h["round"]],
                    int(h["steps"]),
                    rundir / "checkpoints" / str(h["path"]),
                )
                for h in store.checkpoint_history(jid)
                if h["round"] is None or h["round"] in ready
            ]
            snaps.reverse()
            if not snaps or snaps[0].round is not None:
                snaps.insert(0, Snapshot(None, 0.0, 0, None))
            records[jid] = JobRecord(
                job_id=jid,
                model=str(j["model"]),
                metric=j["metric"],
                final=None if j["metric_value"] is None else float(j["metric_value"]),
                finish_s=j["finish"],
                target_steps=int(j["target_steps"]),
                forked_steps=forked.get(jid, 0),
                spec=specs[jid],
                snapshots=tuple(snaps),
            )
        store.close()
    return RunRecord(rundir, cfg.policy, cfg.workload, cfg.seed, summary["ttd_s"], records)


def load_runs(base: Path) -> list[RunRecord]:
    """Every finished run (a ``summary.json`` beside ``run.json``) under ``base``, in path order."""
    return [
        load_run(p.parent)
        for p in sorted(base.rglob("summary.json"))
        if (p.parent / "run.json").is_file()
    ]


Scorer = Callable[[Mapping[str, Any], Path | None], float]
"""Held-out score of a job's model: (training spec, checkpoint or None for the initial model)."""


def score_checkpoint(spec: Mapping[str, Any], checkpoint: Path | None) -> float:
    """The held-out metric of ``checkpoint`` (the job's initial model when None), computed as
    the worker's ``--eval`` computes it, in this process on the CPU."""
    import torch

    from nodes.checkpoint import load_checkpoint
    from nodes.datasets import open_dataset
    from nodes.models import get_entry
    from nodes.spec import parse_spec
    from nodes.trainer import to_device
    from nodes.worker import restore

    s = parse_spec(dict(spec), "spec")
    ckpt = None if checkpoint is None else load_checkpoint(checkpoint, s.model, s.size)
    data = open_dataset(s.model, s.size, s.data, seed=s.seed, stream=0, batch_size=s.batch_size)
    device = torch.device("cpu")
    model, _ = restore(s, ckpt, None if checkpoint is None else str(checkpoint), device)
    model.eval()
    return float(
        get_entry(s.model).evaluate(model, (to_device(b, device) for b in data.heldout_batches()))
    )


@dataclass(frozen=True)
class Interval:
    """Mean over seeds with the half-width of its 95 % Student-t interval (None for one seed)."""

    mean: float
    half: float | None
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Interval | None:
        if not values:
            return None
        n = len(values)
        mean = math.fsum(values) / n
        if n < 2:
            return cls(mean, None, n)
        from scipy.stats import t

        var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
        return cls(mean, float(t.ppf(0.975, n - 1)) * math.sqrt(var / n), n)

    def text(self, digits: int = 4) -> str:
        if self.half is None:
            return f"{self.mean:.{digits}f}"
        return f"{self.mean:.{digits}f} ± {self.half:.{digits}f}"


@dataclass
class JobRow:
    """One job of one mix across seeds: per comparison and policy the per-seed scores."""

    mix: str
    job_id: int
    model: str
    metric: str
    samples: dict[str, dict[int, float]] = field(default_factory=dict)
    wall: dict[str, dict[int, float]] = field(default_factory=dict)
    forked_share: dict[int, float] = field(default_factory=dict)  # HadarE, per seed
    worth: dict[int, float] = field(default_factory=dict)  # forked jobs, per seed
    worth_capped: set[int] = field(default_factory=set)  # seeds where HadarE beat Hadar's final

    def interval(self, which: str, policy: str) -> Interval | None:
        return Interval.of(list(getattr(self, which).get(policy, {}).values()))

    def gain(self, which: str) -> Interval | None:
        """HadarE's improvement over Hadar, paired by seed, in the metric's units, positive
        when HadarE is better."""
        per = getattr(self, which)
        a, b = per.get(POLICIES[1], {}), per.get(POLICIES[0], {})
        sign = -1.0 if self.metric in LOWER_IS_BETTER else 1.0
        return Interval.of([sign * (a[s] - b[s]) for s in sorted(a.keys() & b.keys())])


@dataclass
class QualityTable:
    rows: list[JobRow]
    ttd: dict[str, dict[str, dict[int, float]]]  # mix -> policy -> seed -> TTD
    wall_s: dict[str, dict[int, float]]  # mix -> seed -> the equal wall time used

    def as_dict(self) -> dict[str, Any]:
        def iv(x: Interval | None) -> dict[str, Any] | None:
            return None if x is None else {"mean": x.mean, "half_95": x.half, "n": x.n}

        return {
            "ttd_s": self.ttd,
            "equal_wall_time_s": self.wall_s,
            "jobs": [
                {
                    "mix": r.mix,
                    "job": r.job_id,
                    "model": r.model,
                    "metric": r.metric,
                    "lower_is_better": r.metric in LOWER_IS_BETTER,
                    "per_seed": {"equal_samples": r.samples, "equal_wall_time": r.wall},
                    "hadare_forked_share": r.forked_share,
                    "hadare_steps_worth": r.worth,
                    "hadare_steps_worth_capped_seeds": sorted(r.worth_capped),
                    **{
                        f"{which}_{p}": iv(r.interval(key, p))
                        for which, key in (
                            ("equal_samples", "samples"),
                            ("equal_wall_time", "wall"),
                        )
                        for p in POLICIES
                    },
                    "equal_samples_gain": iv(r.gain("samples")),
                    "equal_wall_time_gain": iv(r.gain("wall")),
                }
                for r in self.rows
            ],
        }


def build_table(
    runs: Iterable[RunRecord], scorer: Scorer = score_checkpoint, worth: bool = True
) -> QualityTable:
    """Pair each (workload, seed)'s Hadar and HadarE runs and tabulate every job; a seed with
    only one of the two runs is left out. ``scorer`` scores the checkpoints equal wall time
    needs (jobs unfinished at that moment) and, with ``worth``, every Hadar checkpoint of a job
    HadarE forked (:func:`steps_worth`)."""
    pairs: dict[tuple[str, int], dict[str, RunRecord]] = {}
    for run in runs:
        if run.policy in POLICIES:
            pairs.setdefault((Path(run.workload).name, run.seed), {})[run.policy] = run
    rows: dict[tuple[str, int], JobRow] = {}
    ttd: dict[str, dict[str, dict[int, float]]] = {}
    wall: dict[str, dict[int, float]] = {}
    for (mix, seed), both in sorted(pairs.items()):
        if len(both) < len(POLICIES) or any(r.ttd_s is None for r in both.values()):
            continue
        t = min(float(r.ttd_s or 0.0) for r in both.values())
        wall.setdefault(mix, {})[seed] = t
        for policy, run in both.items():
            ttd.setdefault(mix, {}).setdefault(policy, {})[seed] = float(run.ttd_s or 0.0)
            for jid, job in sorted(run.jobs.items()):
                if job.metric is None or job.final is None:
                    continue
                row = rows.setdefault((mix, jid), JobRow(mix, jid, job.model, job.metric))
                row.samples.setdefault(policy, {})[seed] = job.final
                row.wall.setdefault(policy, {})[seed] = _score_at(job, t, scorer)
                if policy == POLICIES[1]:
                    row.forked_share[seed] = job.forked_steps / job.target_steps
        for jid, job in sorted(both[POLICIES[1]].jobs.items() if worth else ()):
            ref = both[POLICIES[0]].jobs.get(jid)
            if job.forked_steps > 0 and job.final is not None and ref is not None:
                row = rows[(mix, jid)]
                share = steps_worth(job.final, ref, scorer)
                row.worth[seed] = min(share, 1.0)
                if share > 1.0:
                    row.worth_capped.add(seed)
    return QualityTable([rows[k] for k in sorted(rows)], ttd, wall)


def steps_worth(value: float, ref: JobRecord, scorer: Scorer) -> float:
    """What a model of held-out score ``value`` is worth in ``ref``'s steps, as a share of its
    target: where ``ref``'s quality-against-steps curve (its checkpoints scored, linear between
    them) first reaches ``value``; above 1 (``inf``) when ``ref``'s final model is worse."""
    assert ref.metric is not None and ref.final is not None
    sign = -1.0 if ref.metric in LOWER_IS_BETTER else 1.0
    points = [
        (float(s.steps), sign * scorer(ref.spec, s.checkpoint))
        for s in ref.snapshots
        if s.steps < ref.target_steps
    ]
    points.append((float(ref.target_steps), sign * ref.final))
    goal = sign * value
    if goal <= points[0][1]:
        return points[0][0] / ref.target_steps
    for (s0, g0), (s1, g1) in pairwise(points):
        if g1 >= goal:
            return (s0 + (s1 - s0) * (goal - g0) / (g1 - g0)) / ref.target_steps
    return math.inf


def _score_at(job: JobRecord, t: float, scorer: Scorer) -> float:
    snap = job.at(t)
    if job.finish_s is not None and job.finish_s <= t + 1e-9 and job.final is not None:
        return job.final
    if snap is None:
        return scorer(job.spec, None)
    return scorer(job.spec, snap.checkpoint)


def render_markdown(tab: QualityTable) -> str:
    """The table in markdown: per mix the TTDs, then per job the two comparisons."""
    out = []
    for mix in sorted(tab.ttd):
        tt = tab.ttd[mix]
        seeds = sorted(tab.wall_s[mix])
        out.append(
            f"**{mix}** (seeds {', '.join(map(str, seeds))}): TTD Hadar "
            f"{_iv(Interval.of(list(tt[POLICIES[0]].values())), 0)} s, HadarE "
            f"{_iv(Interval.of(list(tt[POLICIES[1]].values())), 0)} s; equal wall time = the "
            f"earlier TTD of each seed ({_iv(Interval.of(list(tab.wall_s[mix].values())), 0)} s)"
        )
        out.append("")
        out.append(
            "| job | model (metric) | HadarE steps forked | equal samples: Hadar | HadarE | "
            "HadarE gain | HadarE's steps worth | equal wall time: Hadar | HadarE | HadarE gain |"
        )
        out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in (r for r in tab.rows if r.mix == mix):
            arrow = "↓" if r.metric in LOWER_IS_BETTER else "↑"
            share = Interval.of(list(r.forked_share.values()))
            out.append(
                f"| {r.job_id} | {r.model} ({r.metric} {arrow}) | "
                f"{'-' if share is None else f'{share.mean:.0%}'} | "
                f"{_iv(r.interval('samples', POLICIES[0]))} | {_iv(r.interval('samples', POLICIES[1]))} | "
                f"{_iv(r.gain('samples'))} | {_worth(r)} | {_iv(r.interval('wall', POLICIES[0]))} | "
                f"{_iv(r.interval('wall', POLICIES[1]))} | {_iv(r.gain('wall'))} |"
            )
        out.append("")
    return "\n".join(out)


def _worth(r: JobRow) -> str:
    iv = Interval.of(list(r.worth.values()))
    if iv is None:
        return "-"
    capped = f" ({len(r.worth_capped)} at 1: better than Hadar's)" if r.worth_capped else ""
    return iv.text(2) + capped


def _iv(x: Interval | None, digits: int = 4) -> str:
    return "-" if x is None else x.text(digits)
