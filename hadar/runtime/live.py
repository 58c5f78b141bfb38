"""The live view of ``hadar run``: the round, each node's job and progress, each job's steps.
On a terminal it is a rich Live display; elsewhere one line per round."""

from __future__ import annotations

import threading
import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table


class LiveView:
    def __init__(self, jobs: dict[int, Any], console: Console | None = None) -> None:
        self.console = console or Console()
        self.jobs = jobs
        self.progress: dict[int, int] = {}
        self.nodes: dict[str, dict[str, Any]] = {}
        self.round = -1
        self.message = ""
        self._lock = threading.Lock()
        self._live: Live | None = None
        if self.console.is_terminal:
            self._live = Live(self, console=self.console, refresh_per_second=2, transient=False)
            self._live.start()

    def __rich__(self) -> Group:
        with self._lock:
            nodes = Table(title=f"round {self.round}", expand=False)
            for col in ("node", "job/copy", "steps planned", "status", "elapsed"):
                nodes.add_column(col)
            for name, n in sorted(self.nodes.items()):
                elapsed = n.get("elapsed") or (time.time() - n["since"])
                nodes.add_row(name, n["label"], str(n["steps"]), n["status"], f"{elapsed:.0f} s")
            jobs = Table(title="jobs")
            for col in ("job", "model", "steps done", "target steps"):
                jobs.add_column(col)
            for jid, job in sorted(self.jobs.items()):
                jobs.add_row(
                    str(jid),
                    str(job.spec.get("model")),
                    str(self.progress.get(jid, 0)),
                    str(int(job.total_steps)),
                )
            return Group(nodes, jobs, self.message)

    def start_round(self, r: int, ctx: Any, tasks: list[Any]) -> None:
        with self._lock:
            self.round = r
            self.nodes = {
                n: {"label": "-", "steps": "", "status": "idle", "since": time.time()}
                for n in ctx.cluster.node_names
            }
            for t in tasks:
                self.nodes[t.node] = {
                    "label": f"J{t.job.job_id}/c{t.copy}",
                    "steps": t.steps,
                    "status": "running",
                    "since": time.time(),
                }

    def copy_done(self, outcome: Any) -> None:
        with self._lock:
            n = self.nodes.get(outcome.task.node)
            if n is not None:
                n["status"] = (
                    f"done {outcome.steps_done}" if outcome.ok else f"FAILED ({outcome.kind})"
                )
                n["elapsed"] = outcome.wall_seconds or (time.time() - n["since"])

    def end_round(self, r: int, progress: dict[int, int]) -> None:
        with self._lock:
            self.progress = dict(progress)
        if self._live is None:
            done = ", ".join(
                f"J{j}:{s}/{int(self.jobs[j].total_steps)}" for j, s in sorted(progress.items())
            )
            busy = sum(1 for n in self.nodes.values() if n["status"] != "idle")
            self.console.print(
                f"round {r}: {busy}/{len(self.nodes)} nodes busy; steps done/target {done}"
            )

    def note(self, message: str) -> None:
        with self._lock:
            self.message = message
        if self._live is None:
            self.console.print(message)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
