"""Child process of the crash-safety test (also importable: :func:`run`).

Drives a real JobTracker through rounds until every job is complete, resuming from whatever
state it finds on disk, exactly as a restarted coordinator would. Deterministic: what a copy
reports depends only on (round, copy id) and its job's last consolidated checkpoint, so a run
killed any number of times must end in the same database and checkpoints as an unbroken run.

Usage: python crash_child.py ROOT   (prints READY once the tracker is open); the test also runs
:func:`run` in forked children, which are just as killable and start without re-importing torch.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import torch  # noqa: E402
from tracker_testlib import perturbed, write_ckpt  # noqa: E402

from tracker import JobTracker  # noqa: E402

TARGETS = {1: 41, 2: 37, 3: 64}
WITH_INITIAL = 2
COPIES = 3
MAX_JOB_COUNT = 10
WIDTH = 256


def initial_state(job_id: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(job_id)
    return {
        "fc1.weight": torch.randn(WIDTH, WIDTH, generator=g),
        "fc1.bias": torch.randn(WIDTH, generator=g),
        "bn.weight": torch.ones(WIDTH),
        "bn.bias": torch.zeros(WIDTH),
        "bn.running_mean": torch.zeros(WIDTH),
        "bn.running_var": torch.ones(WIDTH),
        "bn.num_batches_tracked": torch.tensor(0),
        "fc2.weight": torch.randn(WIDTH, WIDTH, generator=g),
    }


def steps_for(round_: int, copy_id: int) -> int:
    return (round_ * 7 + copy_id * 5) % 9


def paths(root: Path) -> tuple[Path, Path]:
    return root / "db" / "tracker.sqlite", root / "ckpt"


def run(root: Path, announce: bool = False) -> None:
    db, ckpt = paths(root)
    t = JobTracker.open(db, ckpt, max_job_count=MAX_JOB_COUNT)
    if announce:
        print("READY", flush=True)
    try:
        for j, target in TARGETS.items():
            if j == WITH_INITIAL:
                init = root / "init" / f"job{j}.pt"
                sha = write_ckpt(init, initial_state(j))
                t.register_job(j, target, "IC", "tiny", initial_checkpoint=init, initial_sha256=sha)
            else:
                t.register_job(j, target, "IC", "tiny")
            if not t.is_complete(j):
                t.register_copies(j, COPIES)
        while not all(t.is_complete(j) for j in TARGETS):
            r = t.current_round()
            if r is None:
                last = t.last_closed_round()
                r = 0 if last is None else last + 1
                t.open_round(r)
            done = {x.copy_id for x in t.reports(r)}
            for j in TARGETS:
                state = t.job_state(j)
                if state.completed:
                    continue
                if state.checkpoint is None:
                    start = initial_state(j)
                else:
                    start = torch.load(state.checkpoint.path, weights_only=True)["state_dict"]
                for cid in state.active_copies:
                    if cid in done:
                        continue
                    steps = steps_for(r, cid)
                    path = root / "reports" / f"r{r}-c{cid}.pt"
                    sha = write_ckpt(path, perturbed(start, r * 100 + cid, steps), steps=steps)
                    t.report(r, cid, f"node{cid % MAX_JOB_COUNT}", steps, 0.1 * steps, path, sha)
            t.close_round(r)
    finally:
        t.close()


if __name__ == "__main__":
    torch.set_num_threads(1)  # same arithmetic as the forked children and the reference run
    run(Path(sys.argv[1]), announce=True)
