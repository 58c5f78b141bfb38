"""Helpers for the end-to-end tests of ``hadar run``: real coordinator processes, real workers."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from tests.fixtures.processes import run_group

REPO = Path(__file__).resolve().parents[2]
LOCAL_3 = str(REPO / "cluster_configs" / "local-3node.yaml")


def write_jobs(path: Path, steps: dict[str, int]) -> Path:
    """A job file of tiny real-training jobs: {"LT": 60, "MM": 300, ...} (keys may repeat via 'MM#2')."""
    jobs = []
    for i, (name, n) in enumerate(steps.items()):
        model = name.split("#")[0]
        jobs.append(
            {
                "id": i,
                "type": model,
                "gpus": 1,
                "steps": n,
                "spec": {
                    "model": model,
                    "size": "tiny",
                    "data": "synthetic",
                    "batch_size": 16,
                    "lr": 0.001 if model != "IC" else 0.05,
                    "seed": i,
                },
            }
        )
    path.write_text(yaml.safe_dump({"jobs": jobs}))
    return path


def write_unfinishable_job(path: Path) -> Path:
    """One IC job at paper size: a worker keeps ~1.6 s of a round for its checkpoint save
    (11.2 M parameters), so no machine trains it in a 1 s round and such a run stalls."""
    write_jobs(path, {"IC": 500})
    doc = yaml.safe_load(path.read_text())
    doc["jobs"][0]["spec"]["size"] = "paper"
    path.write_text(yaml.safe_dump(doc))
    return path


def hadar(
    *args: str, timeout: float = 900, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``python -m hadar ARGS`` to the end; ``env`` entries are added to this process's. In
    its own process group, killed whole when it times out or the test fails meanwhile."""
    return run_group(
        [sys.executable, "-m", "hadar", *args],
        timeout=timeout,
        cwd=REPO,
        env={**os.environ, **env} if env else None,
    )


def start(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "hadar", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
        start_new_session=True,
    )


def events(rundir: Path) -> list[dict[str, Any]]:
    p = rundir / "events.jsonl"
    if not p.exists():
        return []
    out = []
    for line in p.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            out.append(json.loads(line))
    return out


def wait_for(
    predicate, timeout: float, what: str, proc: subprocess.Popen | None = None, poll_s: float = 0.2
) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(
                f"process ended before {what}: {proc.stdout.read() if proc.stdout else ''}"
            )
        time.sleep(poll_s)
    raise AssertionError(f"timed out waiting for {what}")


def _proc(pid: str) -> tuple[str, bytes, int] | None:
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return cwd, cmd, ppid


def worker_pids(rundir: Path, node: str) -> list[int]:
    """Training processes of ``node`` in this run: plain workers, or children forked by the
    node's warm server (same command line as their parent server, working where it works; the
    server itself may be a child of the run's zygote, which works in the run's node folder)."""
    base = str((rundir / "nodes").resolve())
    procs = {int(p): info for p in os.listdir("/proc") if p.isdigit() and (info := _proc(p))}
    out = []
    for pid, (cwd, cmd, ppid) in procs.items():
        if not (cwd.startswith(base) and cwd.rstrip("/").endswith(f"/{node}")):
            continue
        if (
            b"nodes.worker" in cmd
            or b"nodes.warm" in cmd
            and b"serve" in cmd
            and ppid in procs
            and b"serve" in procs[ppid][1]
            and procs[ppid][0] == cwd
        ):
            out.append(pid)
    return out


def run_pids(rundir: Path, node: str | None = None) -> list[int]:
    """Every process working in one of this run's node directories (workers, warm servers and
    their children), or in ``node``'s alone, e.g. to end what a SIGKILLed coordinator left
    behind."""
    base = str((rundir / "nodes").resolve())
    return [
        int(p)
        for p in os.listdir("/proc")
        if p.isdigit()
        and (info := _proc(p))
        and (info[0] + "/").startswith(base + "/")
        and (node is None or info[0].rstrip("/").endswith(f"/{node}"))
    ]


def kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)


def closed_rounds(rundir: Path) -> set[int]:
    """Rounds whose aggregation the coordinator has logged."""
    return {e["round"] for e in events(rundir) if e["event"] == "aggregation"}


def stop_cleanly(proc: subprocess.Popen, timeout: float = 300) -> str:
    """Ctrl-C a background run (it finishes the round in flight), check it exits 130, return its output."""
    return stop_all_cleanly([proc], timeout)[0]


def stop_all_cleanly(procs: list[subprocess.Popen], timeout: float = 300) -> list[str]:
    """:func:`stop_cleanly` for runs side by side: Ctrl-C every one, then wait for each (their
    rounds in flight end together)."""
    for proc in procs:
        os.kill(proc.pid, signal.SIGINT)
    outputs = []
    for proc in procs:
        rc = proc.wait(timeout=timeout)
        output = proc.stdout.read() if proc.stdout else ""
        assert rc == 130, output
        outputs.append(output)
    return outputs


def summary(rundir: Path) -> dict[str, Any]:
    return json.loads((rundir / "summary.json").read_text())


def steps_added(rundir: Path) -> dict[int, int]:
    """Steps the tracker added per job, summed over the aggregation events (each round once)."""
    total: dict[int, int] = {}
    seen: set[tuple[int, int]] = set()
    for e in events(rundir):
        if e["event"] == "aggregation" and (e["round"], e["job"]) not in seen:
            seen.add((e["round"], e["job"]))
            total[e["job"]] = total.get(e["job"], 0) + e["steps_added"]
    return total


def tracker_progress(rundir: Path, wait_s: float = 10.0) -> dict[int, int]:
    """Steps per job in the run's tracker. Opening it waits up to ``wait_s`` for its lock: a
    coordinator SIGKILLed while starting a worker leaves the lock with the forked child until it
    execs (the descriptor is close-on-exec), milliseconds that a loaded machine stretches."""
    from tracker.errors import TrackerBusyError
    from tracker.tracker import JobTracker

    end = time.monotonic() + wait_s
    while True:
        try:
            t = JobTracker.open(rundir / "state.sqlite", rundir / "checkpoints")
            break
        except TrackerBusyError:
            if time.monotonic() > end:
                raise
            time.sleep(0.05)
    try:
        return {s.job_id: s.steps_done for s in t.jobs() if s.completed} | {
            s.job_id: s.steps_done for s in t.jobs() if not s.completed
        }
    finally:
        t.close()


def run_argv(
    out: Path,
    workload: Path | str,
    *extra: str,
    cluster: str = LOCAL_3,
    live: bool = False,
    evaluate: bool = False,
) -> list[str]:
    """The arguments of ``hadar run`` of ``workload`` on ``cluster`` into ``out`` (no live view and
    no evaluation unless told, which pass neither ``--no-live`` nor ``--no-eval``), then ``extra``."""
    flags = [*([] if live else ["--no-live"]), *([] if evaluate else ["--no-eval"])]
    return [
        "run",
        "--cluster",
        cluster,
        "--workload",
        str(workload),
        *flags,
        "--out",
        str(out),
        *extra,
    ]


def run_to_end(
    out: Path,
    workload: Path | str,
    *extra: str,
    timeout: float = 900,
    env: dict[str, str] | None = None,
    **options: Any,
) -> subprocess.CompletedProcess:
    """``hadar run`` (arguments as :func:`run_argv`) in the foreground, to the end."""
    return hadar(*run_argv(out, workload, *extra, **options), timeout=timeout, env=env)


def start_run(
    out: Path,
    workload: Path,
    cluster: str = LOCAL_3,
    round_s: str = "12",
    policy: str = "hadare",
    extra: tuple[str, ...] = (),
) -> subprocess.Popen:
    """A run of ``workload`` in the background (HadarE unless told; no live view, no evaluation;
    ``extra`` flags are appended)."""
    return start(
        *run_argv(out, workload, "--policy", policy, "--round", round_s, *extra, cluster=cluster)
    )


def wait_until_dispatched(
    out: Path, round_: int, proc: subprocess.Popen, timeout: float = 300
) -> None:
    """Block until the coordinator has dispatched round ``round_`` (or later)."""
    wait_for(
        lambda: any(e["event"] == "dispatch" and e["round"] >= round_ for e in events(out)),
        timeout,
        f"round {round_} to be dispatched",
        proc,
    )


def train_one_tiny_job(cluster_file: Path, tmp_path: Path) -> Path:
    """``hadar run`` of one tiny job (LT, 20 steps, 3 s rounds) on ``cluster_file``: it must
    finish with every step counted by the tracker; returns the run directory."""
    from hadar.cli import main

    jobs = write_jobs(tmp_path / "jobs.yaml", {"LT": 20})
    out = tmp_path / "run"
    argv = ["run", "--cluster", str(cluster_file), "--workload", str(jobs)]
    assert main([*argv, "--out", str(out), "--round", "3", "--no-live"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["completed"] == summary["jobs"] == 1
    assert tracker_progress(out) == {0: 20}
    return out
