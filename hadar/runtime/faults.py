"""How a real run notices that it cannot go on: rounds without progress (per job and for the
whole run, with the likely cause), copies that fail the same way round after round on the same
nodes, and resource errors (disk full, read-only, permission
denied) turned into one-line errors. Pure functions over the journal's round records."""

from __future__ import annotations

import errno
import re
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hadar.core.errors import HadarError, shorten_middle

Copy = Mapping[str, Any]
"""A copy's record in a closed round's timings: job, node, kind, steps, error, ..."""


class RunStalledError(HadarError):
    """The run (or some of its jobs) made no progress for ``--stall-rounds`` rounds in a row."""

    exit_code = 4


class RunResourceError(HadarError):
    """The run directory or a node's work directory is full, read-only or not writable."""

    exit_code = 5


RESOURCE_ERRNOS = {
    errno.ENOSPC: ("no space left on device", "free space on that filesystem"),
    errno.EDQUOT: ("disk quota exceeded", "free space or raise the quota"),
    errno.EROFS: ("read-only file system", "remount it read-write"),
    errno.EACCES: ("permission denied", "make it writable by this user"),
    errno.EPERM: ("operation not permitted", "make it writable by this user"),
}
_SQLITE_ERRNO = (
    ("database or disk is full", errno.ENOSPC),
    ("readonly database", errno.EROFS),
    ("read-only", errno.EROFS),
)
_TEXT_ERRNO = (
    (re.compile(r"No space left on device|\[Errno 28\]"), errno.ENOSPC),
    (re.compile(r"Disk quota exceeded|\[Errno 122\]"), errno.EDQUOT),
    (re.compile(r"Read-only file system|\[Errno 30\]"), errno.EROFS),
    (re.compile(r"Permission denied|\[Errno 13\]"), errno.EACCES),
)


def _line(path: str | Path, code: int, rundir: Path) -> str:
    what, fix = RESOURCE_ERRNOS[code]
    return (
        f"{path}: {what}; {fix}, then continue with: hadar run --resume {rundir} "
        "(the run's state is saved)"
    )


def resource_error(
    exc: BaseException, rundir: Path, db_paths: Sequence[Path] = ()
) -> RunResourceError | None:
    """The one-line error for a disk-full / read-only / permission failure, None for others.

    ``OSError`` names its file when it has one (else the run directory); a SQLite error names
    the first of ``db_paths`` (the run's databases) or the run directory."""
    if isinstance(exc, OSError) and exc.errno in RESOURCE_ERRNOS:
        path = exc.filename or rundir
        return RunResourceError(_line(path, exc.errno, rundir))
    if isinstance(exc, sqlite3.OperationalError):
        msg = str(exc).lower()
        for needle, code in _SQLITE_ERRNO:
            if needle in msg:
                return RunResourceError(_line(db_paths[0] if db_paths else rundir, code, rundir))
    return None


def node_resource_error(
    copies: Iterable[Copy], workdir: Any, rundir: Path
) -> RunResourceError | None:
    """A failed copy whose error says its node's work directory is full, read-only or not
    writable (``workdir(node)`` gives the directory to name), else None."""
    for c in copies:
        if c.get("kind") == "ok" or not c.get("error"):
            continue
        for pattern, code in _TEXT_ERRNO:
            if pattern.search(c["error"]):
                return RunResourceError(
                    f"node {c['node']}: " + _line(workdir(c["node"]), code, rundir)
                )
    return None


def _progressed(copies: Iterable[Copy]) -> bool:
    return any(c.get("kind") == "ok" and int(c.get("steps") or 0) > 0 for c in copies)


def stalled_jobs(rounds: Sequence[Sequence[Copy]], n: int) -> dict[int, list[Copy]]:
    """Jobs whose last ``n`` rounds with a copy of theirs all made no progress (no copy
    trained a step that counted), with those copies. ``rounds`` oldest first; rounds in which a
    job did not run neither count nor reset its streak."""
    streak: dict[int, list[list[Copy]]] = {}
    done: set[int] = set()
    for copies in reversed(rounds):
        by_job: dict[int, list[Copy]] = {}
        for c in copies:
            by_job.setdefault(int(c["job"]), []).append(c)
        for job, cs in by_job.items():
            if job in done:
                continue
            if _progressed(cs):
                done.add(job)
            elif len(streak.setdefault(job, [])) < n:
                streak[job].append(cs)
    return {j: [c for cs in reversed(v) for c in cs] for j, v in streak.items() if len(v) >= n}


def run_stalled(rounds: Sequence[Sequence[Copy]], n: int) -> list[Copy] | None:
    """The copies of the last ``n`` rounds that dispatched anything, if none of them made
    progress; None if the run progressed (or has run fewer such rounds)."""
    busy = [cs for cs in rounds if cs][-n:]
    if len(busy) < n or any(_progressed(cs) for cs in busy):
        return None
    return [c for cs in busy for c in cs]


def placement_nodes(placement: Mapping[str, Mapping[str, int]]) -> tuple[str, ...]:
    """The nodes a placement uses, sorted: with the job id, what makes a dispatch identical."""
    return tuple(sorted(n for n, per in placement.items() if sum(per.values()) > 0))


def repeated_failures(
    rounds: Sequence[Sequence[Copy]], n: int
) -> dict[tuple[int, tuple[str, ...]], list[Copy]]:
    """(job, nodes) whose copy failed the same way (same kind) in each of the last ``n`` rounds
    in which that job ran on exactly those nodes, with those copies. ``rounds`` oldest first;
    rounds in which the pair did not run (or was withheld) neither count nor reset its streak."""
    streak: dict[tuple[int, tuple[str, ...]], list[Copy]] = {}
    settled: set[tuple[int, tuple[str, ...]]] = set()
    for copies in reversed(rounds):
        for c in copies:
            key = (int(c["job"]), placement_nodes(c["placement"]))
            if c.get("kind") == "withheld" or key in settled:
                continue
            s = streak.setdefault(key, [])
            if c.get("kind") == "ok" or (s and s[0].get("kind") != c.get("kind")):
                settled.add(key)
                continue
            s.append(c)
            if len(s) >= n:
                settled.add(key)
    return {k: list(reversed(v)) for k, v in streak.items() if len(v) >= n}


def likely_cause(copies: Sequence[Copy], round_s: float, warm: bool) -> str:
    """The most likely reason these copies made no progress, in words, for the stop line."""
    kinds = {c.get("kind") for c in copies}
    errors = [str(c["error"]) for c in copies if c.get("error")]
    last = f" (last error: {shorten_middle(errors[-1], 200)})" if errors else ""
    if kinds & {"corrupt-checkpoint", "mismatched-checkpoint"} or any(
        "checkpoint" in e.lower() for e in errors
    ):
        return f"unreadable or mismatched checkpoint{last}"
    if kinds == {"withheld"}:
        return f"every placement the policy chose had failed the same way {len(copies)} times before{last}"
    if kinds == {"ok"}:
        hint = "use a longer --round" + ("" if warm else " or drop --cold-workers")
        return (
            "slot shorter than worker start-up and the checkpoint save: copies trained 0 steps "
            f"in {round_s:g} s slots; {hint}"
        )
    if "worker-error" in kinds:
        return f"failing job spec or worker{last}"
    if "timeout" in kinds:
        return f"copies hung past the slot and --grace{last}"
    if kinds & {"unreachable", "transfer"}:
        return f"nodes unreachable or transfers failing{last}"
    return f"copies failed ({', '.join(sorted(str(k) for k in kinds))}){last}"
