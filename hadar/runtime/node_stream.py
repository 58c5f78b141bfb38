"""A node-availability stream in a real run (``hadar run --node-stream FILE``).

The stream's clock is the run's: ``time`` 0 is ``started_at`` in run.json (a resumed run keeps
it). A node not up at a round's start is left out of that round's context; a node whose
``leave`` falls while the run goes on vanishes as a machine would: every process working in its
directory is killed with SIGKILL (nothing is asked, nothing is saved), and a copy that was
running there is *preempted*: its steps of the round are lost, never reported, and its job goes
on from its last committed checkpoint on whatever nodes are up (docs/node-streams.md).

Pure parts (:func:`leaves_between`, :func:`next_join`) say what the stream does between two
times; :class:`LeaveWatcher` is the thread that acts on the leaves as they come.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from hadar.core.node_stream import NodeEvent, NodeStream

PREEMPTED = "preempted"
"""A copy's outcome kind when its node left the pool while it ran."""


def leaves_between(stream: NodeStream, t0: float, t1: float) -> tuple[NodeEvent, ...]:
    """The ``leave`` events with ``t0 < time <= t1``, in stream order."""
    return tuple(e for e in stream.events if e.event == "leave" and t0 < e.time <= t1)


def next_join(stream: NodeStream, names: Iterable[str], t: float) -> float | None:
    """The first time after ``t`` at which one of ``names`` joins (None when none does)."""
    wanted = set(names)
    return next(
        (e.time for e in stream.events if e.event == "join" and e.time > t and e.node in wanted),
        None,
    )


def kill_processes_in(directory: Path) -> list[int]:
    """SIGKILL every process of this user whose working directory is ``directory`` or below it
    (a local node's workers, its warm server and that server's children); returns their ids."""
    base = str(directory.resolve()).rstrip("/") + "/"
    me, killed = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if (cwd.rstrip("/") + "/").startswith(base):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry), signal.SIGKILL)
                killed.append(int(entry))
    return killed


class LeaveWatcher:
    """Acts on the stream's leaves while a run goes on: at each leave (run-relative time,
    counted from ``started_at``) ``vanish(node)`` kills the node's processes; :meth:`left_since`
    tells the dispatcher whether a copy's node left while the copy ran."""

    def __init__(
        self,
        stream: NodeStream,
        started_at: float,
        vanish: Callable[[str], list[int]],
        on_leave: Callable[[NodeEvent, list[int]], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``clock``: the wall clock (seconds; a test passes one it advances itself)."""
        self.stream, self.started_at, self._clock = stream, started_at, clock
        self._vanish, self._on_leave = vanish, on_leave
        self._stop = threading.Event()
        self._left: dict[str, list[float]] = {}
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._watch, name="node-stream", daemon=True)

    def now(self) -> float:
        """Seconds since the run started (the stream's clock)."""
        return self._clock() - self.started_at

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)

    def up_nodes(self, names: Iterable[str]) -> set[str]:
        """The nodes of ``names`` the stream has up now."""
        return set(self.stream.available(list(names), self.now()))

    def next_join(self, names: Iterable[str]) -> float | None:
        """The stream time of the next join of one of ``names`` (None: none comes)."""
        return next_join(self.stream, names, self.now())

    def left_since(self, node: str, t: float) -> bool:
        """Whether ``node`` left the pool after stream time ``t`` (as far as acted on), or is
        not up now."""
        with self._lock:
            gone = any(x > t for x in self._left.get(node, ()))
        return gone or not self.stream.is_up(node, self.now())

    def _watch(self) -> None:
        pending = list(leaves_between(self.stream, self.now(), self.stream.end))
        for event in pending:
            while not self._stop.is_set() and self.now() < event.time:
                self._stop.wait(min(0.5, max(0.0, event.time - self.now())))
            if self._stop.is_set():
                return
            killed = self._vanish(event.node)
            with self._lock:
                self._left.setdefault(event.node, []).append(event.time)
            self._on_leave(event, killed)
