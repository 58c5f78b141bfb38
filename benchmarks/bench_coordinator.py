"""Coordinator bookkeeping cost per round as a run gets long (issue 29's target).

The real :class:`~hadar.runtime.coordinator.Coordinator` (journal, Job Tracker, event log,
history, progress checks, checkpoint verification) drives ``--nodes`` local nodes and ``--jobs``
jobs with the Tiresias policy (it ranks jobs by attained service, so the history matters), but
its copies run on fast in-process fake nodes: a copy "trains" 10 steps in no time and hands back
a tiny checkpoint, with no worker process and no transfer. Every job is far from its target, so
every round has as many copies as nodes.

A run of 10,000 rounds cannot be played in a couple of minutes when a round's cost grows with
the rounds before it, so the history is fast-forwarded: one run directory per depth of
``--depths`` (at most ``--rounds``) plays three real rounds, the last one is cloned in its state
file (state.sqlite: the journal's, the tracker's and the events' tables) up to the depth, and
the run is resumed there (``--resume``: the state is read back; its first round, which reads
the scored jobs from the events once, is not timed). Then the depths take turns, one round each, ``--window`` times, so that every
depth is timed under the same load of the machine. Bookkeeping per round is the time the
coordinator spends in a round minus the fake nodes' time (dispatch), the policy's decision and
the Job Tracker's checkpoint file work (verify, load, average, save, delete old ones: it scales
with the model, not the rounds; shown in its own column).

    .venv/bin/python benchmarks/bench_coordinator.py [--rounds 10000] [--window 15]
        [--nodes 64] [--jobs 500] [--depths 100,1000,3000,10000] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import yaml

import tracker.consolidation
import tracker.registration
import tracker.reports
import tracker.rollback
import tracker.tracker as tracker_module
from hadar.loop import Decision, RoundLoop
from hadar.runtime.config import RunConfig, RuntimeKnobs
from hadar.runtime.coordinator import Coordinator
from hadar.runtime.dispatch import CopyOutcome, CopyTask
from tracker.checkpoints import make_payload, save_atomic

STEPS_PER_COPY = 10
GPU_TYPES = ("v100", "t4", "k80")
JOB_TYPES = ("IC", "LM", "MM", "RS", "LT")


def write_inputs(root: Path, nodes: int, jobs: int) -> tuple[Path, Path, Path, str]:
    """Cluster file, job file and the fake nodes' checkpoint (path, sha256)."""
    cluster = {
        "name": f"bench-{nodes}",
        "provider": "local",
        "nodes": [
            {"name": f"n{i:03d}", "gpus": {GPU_TYPES[i % 3]: 1}, "speed_factor": 1.0}
            for i in range(nodes)
        ],
        "local": {"base_dir": str(root / "nodes")},
    }
    (root / "cluster.yaml").write_text(yaml.safe_dump(cluster))
    job_rows = [
        {
            "id": i,
            "type": JOB_TYPES[i % len(JOB_TYPES)],
            "gpus": 1,
            "steps": 10**8,
            "spec": {
                "model": JOB_TYPES[i % len(JOB_TYPES)],
                "size": "tiny",
                "data": "synthetic",
                "batch_size": 16,
                "lr": 0.001,
                "seed": i,
            },
        }
        for i in range(jobs)
    ]
    (root / "jobs.yaml").write_text(yaml.safe_dump({"jobs": job_rows}))
    payload = make_payload({"w": torch.zeros(4)}, None, STEPS_PER_COPY, None, None)
    ckpt, sha = save_atomic(payload, root / "fake", lambda h: f"copy-{h}.pt", "bench")
    return root / "cluster.yaml", root / "jobs.yaml", ckpt, sha


TRACKER_PARTS = (tracker.consolidation, tracker.registration, tracker.reports, tracker.rollback)


class CheckpointClock:
    """Seconds spent in the Job Tracker's checkpoint file work (verify, load, average and
    save model checkpoints): it grows with the model, not with the rounds, and is reported
    apart from bookkeeping, like the fake nodes' time."""

    spent = 0.0

    @classmethod
    def install(cls) -> None:
        for part in TRACKER_PARTS:  # the tracker's parts that work on checkpoint files
            for name in ("load_checkpoint", "save_atomic", "verify_file", "average_state_dicts"):
                if hasattr(part, name):
                    setattr(part, name, cls._timed(getattr(part, name)))
        # deleting checkpoints that left the retention window is file work too; deciding
        # which ones (``_retained``) is bookkeeping
        tracker_class = tracker_module.JobTracker
        tracker_class._prune = cls._timed(tracker_class._prune)  # type: ignore[method-assign]
        tracker_class._retained = cls._timed(tracker_class._retained, sign=-1)  # type: ignore[method-assign]

    @classmethod
    def _timed(cls, fn: Any, sign: int = 1) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                cls.spent += sign * (time.perf_counter() - t0)

        return wrapper


class FakeNodes:
    """Fast in-process nodes: a copy "trains" its steps in no time and hands back a tiny
    checkpoint, with no worker and no transfer; the round executor's dispatch is timed apart."""

    def __init__(self, coordinator: Coordinator, checkpoint: tuple[Path, str]) -> None:
        self.checkpoint = checkpoint
        self.dispatch_s = 0.0
        rounds = coordinator.rounds
        rounds.run_copy = self.run_copy  # the round executor's seam for the nodes
        real_dispatch = rounds.dispatch

        def dispatch(tasks: list[CopyTask], r: int, attempt: int) -> list[CopyOutcome]:
            t0 = time.perf_counter()
            try:
                return real_dispatch(tasks, r, attempt)
            finally:
                self.dispatch_s += time.perf_counter() - t0

        rounds.dispatch = dispatch  # type: ignore[method-assign]

    def run_copy(self, task: CopyTask, local: Path) -> CopyOutcome:
        path, sha = self.checkpoint
        return CopyOutcome(
            task,
            "ok",
            steps_done=STEPS_PER_COPY,
            train_seconds=1.0,
            wall_seconds=1.0,
            checkpoint=path,
            sha256=sha,
        )


class TimedExecutor:
    """Forwards the loop's executor protocol to the coordinator, timing every call."""

    def __init__(self, inner: Coordinator) -> None:
        self.inner = inner
        self.spent = 0.0
        self.plays_refills = inner.plays_refills
        self.keeps_policy_state = inner.keeps_policy_state

    def _timed(self, fn: Any, *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self.spent += time.perf_counter() - t0

    def finished(self) -> bool:
        return bool(self._timed(self.inner.finished))

    def admit_arrivals(self) -> None:
        self._timed(self.inner.admit_arrivals)

    def prepare(self, index: int) -> None:
        self._timed(self.inner.prepare, index)

    def context(self, index: int) -> Any:
        return self._timed(self.inner.context, index)

    def execute(self, decision: Decision) -> Any:
        return self._timed(self.inner.execute, decision)

    def record(self, decision: Decision, outcome: Any) -> None:
        self._timed(self.inner.record, decision, outcome)


class Player:
    """One run directory's coordinator, resumed, playing one round at a time."""

    def __init__(self, rundir: Path, cfg: RunConfig, fake: tuple[Path, str]) -> None:
        self.c = Coordinator(rundir, cfg, knobs=RuntimeKnobs(0.0, 0.0))
        self.nodes = FakeNodes(self.c, fake)
        self.c.preflight()
        self.r = self.c.recover()
        self.c._restore_policy_state()
        self.timed = TimedExecutor(self.c)
        self.loop = RoundLoop(self.c.policy, self.timed)

    def round(self) -> dict[str, float]:
        """Play a round; its bookkeeping, checkpoint, dispatch and decision seconds."""
        self.timed.spent, self.nodes.dispatch_s, CheckpointClock.spent = 0.0, 0.0, 0.0
        decision = self.loop.play_round(self.r)
        self.timed.finished()  # the loop's check before the next round is part of the round
        self.r += 1
        return {
            "round": self.r - 1,
            "bookkeeping_s": self.timed.spent - self.nodes.dispatch_s - CheckpointClock.spent,
            "checkpoint_s": CheckpointClock.spent,
            "dispatch_s": self.nodes.dispatch_s,
            "decide_s": decision.decision_s,
        }

    def close(self) -> None:
        self.c.close()


def fast_forward(rundir: Path, to_round: int) -> float:
    """Clone the last closed round into every round up to ``to_round - 1`` in the run's state
    file (the journal's, the tracker's and the events' tables), as a run that had played them
    would have them. Returns seconds."""
    t0 = time.perf_counter()
    db = sqlite3.connect(rundir / "state.sqlite", isolation_level=None)
    try:
        last = db.execute("SELECT MAX(round) FROM run_rounds WHERE status = 'closed'").fetchone()[0]
        if last is None or last + 1 >= to_round:
            return 0.0
        row = db.execute(
            "SELECT attempt, plan, started, ended, decision_s, timings, policy_state FROM"
            " run_rounds WHERE round = ?",
            (last,),
        ).fetchone()
        new = range(last + 1, to_round)
        db.execute("BEGIN")
        db.executemany(
            "INSERT INTO run_rounds (round, attempt, status, plan, started, ended, decision_s,"
            " timings, policy_state) VALUES (?, ?, 'closed', ?, ?, ?, ?, ?, ?)",
            ((k, *row) for k in new),
        )
        db.executemany(
            "INSERT INTO rounds (round, state) VALUES (?, 'closed')", ((k,) for k in new)
        )
        reports = db.execute(
            "SELECT copy_id, node, steps, seconds, ckpt_path, ckpt_sha256 FROM reports"
            " WHERE round = ?",
            (last,),
        ).fetchall()
        db.executemany(
            "INSERT INTO reports (round, copy_id, node, steps, seconds, ckpt_path, ckpt_sha256)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            ((k, *rep) for k in new for rep in reports),
        )
        cons = db.execute(
            "SELECT job_id, copies, steps_reported, steps_total, completed, ckpt_path,"
            " ckpt_sha256, ckpt_round FROM consolidations WHERE round = ?",
            (last,),
        ).fetchall()
        db.executemany(
            "INSERT INTO consolidations (round, job_id, copies, steps_reported, steps_added,"
            " steps_total, completed, ckpt_path, ckpt_sha256, ckpt_round)"
            " VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?, ?)",
            ((k, *c) for k in new for c in cons),
        )
        template = [
            (t, name, json.loads(body))
            for t, name, body in db.execute(
                "SELECT t, event, body FROM events WHERE round = ? ORDER BY seq", (last,)
            )
        ]
        db.executemany(
            "INSERT INTO events (t, event, round, body) VALUES (?, ?, ?, ?)",
            ((t, name, k, json.dumps({**e, "round": k})) for k in new for t, name, e in template),
        )
        db.execute("COMMIT")
    finally:
        db.close()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10_000, help="deepest history measured")
    ap.add_argument("--window", type=int, default=15, help="rounds timed at each depth")
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--jobs", type=int, default=500)
    ap.add_argument("--depths", default="100,1000,3000,10000")
    ap.add_argument("--dir", help="work directory (default: a new temporary one)")
    a = ap.parse_args()
    root = Path(a.dir or tempfile.mkdtemp(prefix="bench-coord-"))
    root.mkdir(parents=True, exist_ok=True)
    cluster, jobs, ckpt, sha = write_inputs(root, a.nodes, a.jobs)
    cfg = RunConfig(
        run_id="bench-coord",
        cluster=str(cluster),
        workload=str(jobs),
        policy="tiresias",
        round_s=30.0,
        evaluate=True,
        warm_workers=False,
        max_job_count=max(1000, a.jobs + 1),
        started_at=time.time(),
    )
    depths = sorted({min(int(d), a.rounds) for d in a.depths.split(",")})
    print(
        f"coordinator bookkeeping: {a.nodes} nodes, {a.jobs} jobs, tiresias, fake nodes; "
        f"load average {os.getloadavg()[0]:.2f}; work dir {root}"
    )
    CheckpointClock.install()
    print(
        f"{'round':>7} {'median ms':>10} {'p90 ms':>8} {'checkpoints ms':>15} "
        f"{'dispatch ms':>12} {'decide ms':>10}"
    )
    fake = (ckpt, sha)
    players = {}
    for depth in depths:  # one run per depth, its history cloned up to the depth
        rundir = root / f"run-{depth}"
        first = Player(rundir, cfg, fake)
        try:
            for _ in range(3):  # real first rounds: the history is cloned from these
                first.round()
        finally:
            first.close()
        fast_forward(rundir, depth)
        players[depth] = Player(rundir, cfg, fake)  # resumed: reads the history once
        players[depth].round()  # a first round reads the event log once: not timed
    played: dict[int, list[dict[str, float]]] = {d: [] for d in depths}
    for _ in range(a.window):  # the depths take turns, so they share the machine's load
        for depth in depths:
            played[depth].append(players[depth].round())
    for p in players.values():
        p.close()
    rows = []
    for depth in depths:
        book = sorted(p["bookkeeping_s"] * 1e3 for p in played[depth])
        row = {
            "round": played[depth][0]["round"],
            "median_ms": statistics.median(book),
            "p90_ms": book[min(len(book) - 1, math.ceil(0.9 * len(book)) - 1)],
            "checkpoint_ms": statistics.median(p["checkpoint_s"] * 1e3 for p in played[depth]),
            "dispatch_ms": statistics.median(p["dispatch_s"] * 1e3 for p in played[depth]),
            "decide_ms": statistics.median(p["decide_s"] * 1e3 for p in played[depth]),
        }
        rows.append(row)
        print(
            f"{row['round']:>7} {row['median_ms']:>10.1f} {row['p90_ms']:>8.1f} "
            f"{row['checkpoint_ms']:>15.1f} {row['dispatch_ms']:>12.1f} {row['decide_ms']:>10.1f}",
            flush=True,
        )
    shallow, deep = rows[0], rows[-1]
    print(
        f"round {deep['round']} / round {shallow['round']}: "
        f"{deep['median_ms'] / shallow['median_ms']:.2f}x; load average {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
