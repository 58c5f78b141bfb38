"""Coordinator kill campaign: SIGKILL ``hadar run`` at seeded random moments, resume, count steps.

A multi-round HadarE run of tiny real-training jobs on the three local nodes is started; the
coordinator process is SIGKILLed at ``kills`` moments drawn from ``random.Random(seed)`` (a delay
after each launch, or right after the n-th dispatch, result or aggregation event, so kills land in
start-up and recovery, mid-round, between reports and commit, and after a commit alike) and resumed with ``hadar run --resume`` after each kill; the last life runs to the
end. Every training step is then accounted for twice, independently:

* the tracker's count (SQLite ``steps_done`` per job, and the step count stored in the job's final
  consolidated checkpoint);
* the workers' reports in ``events.jsonl``: for each round the tracker committed, the steps each
  copy reported in the attempt that committed it (attempts a kill aborted are retrained, not
  counted), added up round by round and capped at the job's target as the tracker caps them.

A step the workers trained in a committed round that the tracker does not count is *lost*; a step
the tracker counts that no committed copy trained is *double-counted*. Both must be 0.

    python -m tests.faults.campaign                  # 3 kills, seed 0 (what CI runs)
    python -m tests.faults.campaign --kills 20       # the campaign of docs/results.md's crash table
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e.runlib import REPO, events, run_pids, start, start_run, wait_for, write_jobs
from tests.fixtures.processes import HANG_S, run_group

ROUND_S = 6.0
"""Round length of the campaign's runs: short, so a run has many rounds and kills land anywhere."""
BASE_STEPS = {"MM": 1500, "LT": 400, "MM#2": 900}
"""About 7 rounds of HadarE on local-3node at SLOT_S where one worker trains MM at
:data:`REFERENCE_RATE`; scaled up with the number of kills and the machine's rate."""
REFERENCE_RATE = 170.0
"""Steps per second of MM (tiny, batch 16) on one worker thread of the machine BASE_STEPS was
sized on (:func:`measured_rate`)."""
TRIGGERS = ("time", "time", "dispatch", "result", "aggregation")
"""What a kill waits for (drawn per kill): a random delay, or the n-th (1-3) event of a kind logged
by this life of the coordinator (right after it planned, took a copy's report, or committed a round)."""
KILL_WINDOW_S = (1.0, 2.5 * ROUND_S)
"""A timed kill comes this many seconds after the coordinator's launch (after its first round
began, for the first life): from start-up and recovery to the end of a second round."""


@dataclass(frozen=True)
class Kill:
    life: int
    at: str
    """When it came: a delay after the launch, or as soon as the n-th event of a kind was logged."""
    phase: str
    """The coordinator's last logged event before the kill ("start-up" when it had logged none)."""


@dataclass
class RunFigures:
    """One run of the campaign: its kills and the two step ledgers per job."""

    targets: dict[int, int]
    tracker_steps: dict[int, int] = field(default_factory=dict)
    checkpoint_steps: dict[int, int | None] = field(default_factory=dict)
    reported_steps: dict[int, int] = field(default_factory=dict)
    kills: list[Kill] = field(default_factory=list)
    lives: int = 0
    completed: bool = False
    round_mismatches: int = 0
    """(round, job) pairs where the tracker added other than the committed reports' steps."""
    steps_retrained: int = 0
    """Steps workers trained in attempts a kill aborted (redone after the resume, by design)."""

    @property
    def steps_lost(self) -> int:
        return sum(
            max(0, self.reported_steps.get(j, 0) - self.tracker_steps.get(j, 0))
            for j in self.targets
        )

    @property
    def steps_double_counted(self) -> int:
        return sum(
            max(0, self.tracker_steps.get(j, 0) - self.reported_steps.get(j, 0))
            for j in self.targets
        )


@dataclass
class CampaignFigures:
    kills_per_run: int
    seed: int
    runs: list[RunFigures] = field(default_factory=list)
    wall_s: float = 0.0

    def table(self) -> dict[str, Any]:
        """The figures of docs/results.md's crash table."""
        phases = Counter(k.phase for r in self.runs for k in r.kills)
        return {
            "faults injected (coordinator SIGKILLs)": sum(len(r.kills) for r in self.runs),
            "runs completed": f"{sum(r.completed for r in self.runs)}/{len(self.runs)}",
            "coordinator lives (launch + resumes)": sum(r.lives for r in self.runs),
            "steps trained and committed": sum(sum(r.reported_steps.values()) for r in self.runs),
            "steps lost": sum(r.steps_lost for r in self.runs),
            "steps double-counted": sum(r.steps_double_counted for r in self.runs),
            "rounds where tracker and reports differ": sum(r.round_mismatches for r in self.runs),
            "steps retrained after a kill": sum(r.steps_retrained for r in self.runs),
            "kills by the last event logged": dict(sorted(phases.items())),
            "wall time (s)": round(self.wall_s, 1),
        }


def scaled_steps(kills: int, rate: float = REFERENCE_RATE) -> dict[str, int]:
    """The run's jobs, longer with more kills and on a machine that trains faster than the one
    :data:`BASE_STEPS` was sized on (``rate``: :func:`measured_rate`), so that every kill lands
    before the run ends on any machine; a slower machine keeps them."""
    scale = (1 + kills // 4) * max(1.0, rate / REFERENCE_RATE)
    return {name: round(steps * scale) for name, steps in BASE_STEPS.items()}


def measured_rate(workdir: Path, steps: int = 300) -> float:
    """Steps per second one worker trains the campaign's MM job at on this machine now (its
    training time alone: start-up excluded)."""
    workdir.mkdir(parents=True, exist_ok=True)
    spec = workdir / "rate-spec.json"
    spec.write_text(
        json.dumps(  # the spec tests.e2e.runlib.write_jobs gives an MM job
            {"model": "MM", "size": "tiny", "data": "synthetic", "batch_size": 16, "lr": 0.001}
        )
    )
    result = workdir / "rate-result.json"
    done = run_group(
        [
            sys.executable, "-m", "nodes.worker", "--threads", "1", "--spec", str(spec),
            "--steps", str(steps), "--deadline-s", str(HANG_S),
            "--checkpoint-out", str(workdir / "rate.pt"), "--result", str(result),
        ],
        timeout=HANG_S,
        cwd=REPO,
    )  # fmt: skip
    if done.returncode != 0:
        raise AssertionError(f"measuring the training rate failed: {done.stderr[-2000:]}")
    return float(json.loads(result.read_text())["steps_per_second"])


def run_with_kills(
    workdir: Path, kills: int, rng: random.Random, timeout_s: float = 1800
) -> RunFigures:
    """One run: launch, ``kills`` times SIGKILL the coordinator and resume it, let the last life end."""
    steps = scaled_steps(kills, measured_rate(workdir))
    jobs = write_jobs(workdir / "jobs.yaml", steps)
    out = workdir / "run"
    figures = RunFigures(targets=dict(enumerate(steps.values())))
    deadline = time.monotonic() + timeout_s
    try:
        for life in range(kills + 1):
            proc = (
                start_run(out, jobs, round_s=f"{ROUND_S:g}")
                if life == 0
                else start("run", "--resume", str(out), "--no-live")
            )
            figures.lives += 1
            if life == 0:
                wait_for(
                    lambda: any(e["event"] == "dispatch" for e in events(out)),
                    300,
                    "the first round to be dispatched",
                    proc,
                )
            if life == kills:
                rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
                output = proc.stdout.read() if proc.stdout else ""
                if rc != 0:
                    raise AssertionError(f"the last resume exited {rc}: {output[-2000:]}")
                figures.completed = True
                break
            seen = len(events(out))
            trigger = rng.choice(TRIGGERS)
            nth, delay = rng.randint(1, 3), rng.uniform(*KILL_WINDOW_S)
            if trigger == "time":
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=delay)
            else:
                wait_for(
                    logged(out, trigger, nth, after=seen),
                    6 * ROUND_S + 60,
                    f"event {trigger} #{nth} of life {life}",
                    proc,
                    poll_s=0.02,
                )
            if proc.poll() is not None:
                raise AssertionError(
                    f"the run ended (exit {proc.returncode}) before kill {life + 1} of {kills}; "
                    f"the jobs are too short for this many kills"
                )
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            new = events(out)[seen:]
            at = f"{delay:.1f} s after launch" if trigger == "time" else f"{trigger} event #{nth}"
            figures.kills.append(Kill(life, at, new[-1]["event"] if new else "start-up"))
    finally:
        for pid in run_pids(out):  # orphaned workers and warm servers of this run only
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    account(out, figures)
    return figures


def logged(out: Path, kind: str, nth: int, after: int) -> Callable[[], bool]:
    """A predicate: the run's event log holds ``nth`` events of ``kind`` past its first ``after``."""
    return lambda: sum(e["event"] == kind for e in events(out)[after:]) >= nth


def account(out: Path, figures: RunFigures) -> None:
    """Fill both step ledgers of ``figures`` from the run directory ``out``."""
    from tracker.checkpoints import load_checkpoint
    from tracker.errors import RoundError
    from tracker.tracker import JobTracker

    committed: dict[int, dict[int, int]] = {}  # round -> job -> steps added, from the tracker
    tracker = JobTracker.open(out / "state.sqlite", out / "checkpoints")
    try:
        last = tracker.last_closed_round()
        for r in range(0 if last is None else last + 1):
            with contextlib.suppress(RoundError):  # a round number that never closed has no summary
                committed[r] = {
                    j: res.steps_added for j, res in tracker.round_summary(r).jobs.items()
                }
        for state in tracker.jobs():
            figures.tracker_steps[state.job_id] = state.steps_done
            ckpt = state.checkpoint  # verified against its sha256 and format as it is loaded
            figures.checkpoint_steps[state.job_id] = (
                None
                if ckpt is None
                else load_checkpoint(ckpt.path, ckpt.sha256, f"job {state.job_id}")["steps"]
            )
    finally:
        tracker.close()
    reports = reported_by_attempt(events(out))
    totals = dict.fromkeys(figures.targets, 0)
    for r in sorted(committed):
        attempts = [a for (rr, a) in reports if rr == r]
        last_attempt = reports.get((r, max(attempts)), {}) if attempts else {}
        for j in figures.targets:
            added = min(last_attempt.get(j, 0), figures.targets[j] - totals[j])
            totals[j] += added
            figures.round_mismatches += added != committed[r].get(j, 0)
        figures.steps_retrained += sum(
            sum(reports[(r, a)].values()) for a in attempts if a != max(attempts)
        )
    figures.reported_steps = totals


def reported_by_attempt(log: list[dict[str, Any]]) -> dict[tuple[int, int], dict[int, int]]:
    """``{(round, attempt): {job: steps the copies reported}}`` from the coordinator's event log.
    A result belongs to the latest attempt of its round dispatched before it."""
    attempt: dict[int, int] = {}
    out: dict[tuple[int, int], dict[int, int]] = {}
    for e in log:
        if e["event"] == "dispatch":
            attempt[e["round"]] = e["attempt"]
            out.setdefault((e["round"], e["attempt"]), {})
        elif e["event"] == "result" and e["round"] in attempt:
            per_job = out.setdefault((e["round"], attempt[e["round"]]), {})
            per_job[e["job"]] = per_job.get(e["job"], 0) + e["steps"]
    return out


def run_campaign(workdir: Path, kills: int, seed: int = 0, runs: int = 1) -> CampaignFigures:
    """``runs`` runs with ``kills`` coordinator kills each, in ``workdir``/run-N."""
    rng = random.Random(seed)
    figures = CampaignFigures(kills_per_run=kills, seed=seed)
    t0 = time.perf_counter()
    for n in range(runs):
        d = workdir / f"run-{n}"
        d.mkdir(parents=True, exist_ok=False)
        figures.runs.append(run_with_kills(d, kills, rng))
    figures.wall_s = time.perf_counter() - t0
    return figures


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tests.faults.campaign", description=__doc__.splitlines()[0]
    )
    p.add_argument(
        "--kills",
        type=int,
        default=int(os.environ.get("HADAR_FAULT_KILLS", "3")),
        help="coordinator kills per run (default: $HADAR_FAULT_KILLS or 3)",
    )
    p.add_argument("--runs", type=int, default=1, help="runs (default: %(default)s)")
    p.add_argument(
        "--seed",
        type=int,
        default=int(os.environ.get("HADAR_FAULT_SEED", "0")),
        help="seed of the kill moments (default: $HADAR_FAULT_SEED or 0)",
    )
    p.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="where the runs go (default: a new temporary directory)",
    )
    p.add_argument(
        "--json", type=Path, default=None, help="also write the figures and every kill to this file"
    )
    a = p.parse_args(argv)
    import tempfile

    workdir = a.workdir or Path(tempfile.mkdtemp(prefix="hadar-faults-"))
    figures = run_campaign(workdir, a.kills, a.seed, a.runs)
    table = figures.table()
    width = max(map(len, table))
    print(
        f"coordinator kill campaign: {a.runs} run(s) x {a.kills} kill(s), seed {a.seed}, runs in {workdir}"
    )
    for name, value in table.items():
        print(f"  {name:<{width}}  {value}")
    if a.json:
        a.json.write_text(
            json.dumps({"table": table, "runs": [asdict(r) for r in figures.runs]}, indent=2)
        )
    clean = table["steps lost"] == 0 and table["steps double-counted"] == 0
    return 0 if clean and all(r.completed for r in figures.runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
