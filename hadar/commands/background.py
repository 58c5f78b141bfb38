"""Runs in the background: ``hadar run --detach`` starts the run as its own process (new
session, output in ``RUNDIR/run.log``, its pid in ``RUNDIR/detached.json``) and returns;
``hadar status`` lists runs, ``hadar logs RUNDIR [-f]`` shows (follows) the log and
``hadar stop RUNDIR`` stops it cleanly, as a first Ctrl-C does: the round in progress finishes,
state is saved, and ``hadar run --resume RUNDIR`` continues it."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hadar.commands import Subparsers, argtypes
from hadar.core.errors import InputError
from hadar.core.io import write_json

LOG = "run.log"
PIDFILE = "detached.json"
RUNS = Path("runs")
STARTUP_WAIT_S = 300.0
"""How long ``--detach`` waits for the new process to start its first round (inputs checked,
nodes answered): a run that fails before that shows its error here, with its exit code."""


def register(sub: Subparsers) -> None:
    st = sub.add_parser(
        "status",
        help="list runs: running in the background, finished or stopped",
        description="One row per run directory (default: every run under ./runs): policy, "
        "workload, whether it is running (its pid), finished or stopped, rounds done and the "
        "last line of its log.",
    )
    st.add_argument(
        "rundirs", nargs="*", metavar="RUNDIR", help="run directories (default: runs/*)"
    )
    st.set_defaults(func=run_status)

    lg = sub.add_parser(
        "logs",
        help="print (or follow) the log of a run started with --detach",
        description="Print RUNDIR/run.log, the output of a run started with hadar run --detach; "
        "with -f keep printing what it adds until the run ends (Ctrl-C stops following).",
    )
    lg.add_argument("rundir", metavar="RUNDIR", help="the run directory")
    lg.add_argument("-f", "--follow", action="store_true", help="follow until the run ends")
    lg.set_defaults(func=run_logs)

    sp = sub.add_parser(
        "stop",
        help="stop a background run cleanly (like Ctrl-C); resume it with --resume",
        description="Send the run's process SIGINT, as a first Ctrl-C does: the round in "
        "progress finishes, the state is saved, and hadar run --resume RUNDIR continues. Waits "
        "until the process has exited (up to --timeout).",
    )
    sp.add_argument("rundir", metavar="RUNDIR", help="the run directory")
    sp.add_argument(
        "--timeout",
        dest="timeout_s",
        type=argtypes.seconds(0, argtypes.DAY),
        default=600.0,
        metavar="S",
        help="seconds to wait for the run to exit; 0 returns at once (default: %(default)s)",
    )
    sp.set_defaults(func=run_stop)


# -- starting ----------------------------------------------------------------------------
def child_argv(argv: Sequence[str], rundir: Path, resume: bool) -> list[str]:
    """The ``hadar run`` command line the background process runs: ``argv`` without
    ``--detach``, with one line per round instead of the live view, and the run directory
    named explicitly (so that it is found again, and in the process's command line)."""
    kept = [a for a in argv if not (len(a) > 4 and "--detach".startswith(a))]
    extra = ["--no-live"] if "--no-live" not in kept else []
    if not resume and "--out" not in kept and not any(a.startswith("--out=") for a in kept):
        extra += ["--out", str(rundir)]
    return [sys.executable, "-m", "hadar", *kept, *extra]


def detach(argv: Sequence[str], rundir: Path, resume: bool) -> int:
    """Start ``hadar run`` (``argv``) in its own session, writing to ``rundir/run.log``;
    return 0 once it runs (or its exit code and log when it fails within seconds)."""
    if not resume and (rundir / "run.json").exists():
        raise InputError(
            f"--out: {rundir} already holds a run (use --resume {rundir} or another --out)"
        )
    alive = running_pid(rundir)
    if alive is not None:
        raise InputError(f"{rundir}: already running in the background (pid {alive})")
    rundir.mkdir(parents=True, exist_ok=True)
    starts = _starts(rundir)
    command = child_argv(argv, rundir, resume)
    log_path = rundir / LOG
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # no SIGHUP when the terminal closes, no Ctrl-C from it
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    write_json(rundir / PIDFILE, {"pid": proc.pid, "started_at": time.time(), "argv": command[3:]})
    deadline = time.monotonic() + STARTUP_WAIT_S
    while time.monotonic() < deadline and proc.poll() is None and _starts(rundir) <= starts:
        time.sleep(0.2)
    if proc.returncode is not None:
        sys.stdout.write(log_path.read_text(errors="replace"))
        print(f"hadar: the background run exited with code {proc.returncode} ({log_path})")
        return proc.returncode
    started = "started" if _starts(rundir) > starts else "starting"
    print(f"{started} {rundir} in the background (pid {proc.pid})")
    print(f"  follow it:  hadar logs {rundir} -f")
    print("  list runs:  hadar status")
    print(f"  stop it:    hadar stop {rundir}   (resume later with: hadar run --resume {rundir})")
    return 0


# -- finding runs --------------------------------------------------------------------------
def _pidfile(rundir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((rundir / PIDFILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("pid"), int) else None


def running_pid(rundir: Path) -> int | None:
    """The pid of the background process of ``rundir`` if it is still running (a pid reused
    by another program does not count: its command line must name the run directory)."""
    data = _pidfile(rundir)
    if data is None:
        return None
    pid: int = data["pid"]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid  # alive, someone else's
    cmdline = Path(f"/proc/{pid}/cmdline")
    if cmdline.exists():
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            return None
        if str(rundir).encode() not in args and str(rundir.resolve()).encode() not in args:
            return None
        if _zombie(pid):
            return None
    return pid


def _zombie(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return fields[0] == "Z"


def _rounds_done(rundir: Path) -> int | None:
    import sqlite3

    path = rundir / "state.sqlite"
    if not path.exists():
        return None
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=2.0)
        try:
            (n,) = con.execute("SELECT COUNT(*) FROM rounds WHERE state = 'closed'").fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        return None
    return int(n)


def _last_line(rundir: Path) -> str:
    path = rundir / LOG
    if not path.exists():
        return ""
    with open(path, "rb") as fh:
        fh.seek(max(0, path.stat().st_size - 4096))
        lines = [
            line.strip() for line in fh.read().decode(errors="replace").splitlines() if line.strip()
        ]
    return lines[-1] if lines else ""


def _events(rundir: Path) -> list[str]:
    """The names of the run's events, in order (lines cut short by a crash skipped)."""
    names = []
    try:
        with open(rundir / "events.jsonl", "rb") as fh:
            for line in fh:
                try:
                    names.append(str(json.loads(line).get("event")))
                except (ValueError, AttributeError):
                    continue
    except OSError:
        return []
    return names


def _starts(rundir: Path) -> int:
    """How many sessions of the run have started (``start`` events)."""
    return _events(rundir).count("start")


def _finished(rundir: Path) -> bool:
    """Whether the run's last session ended with a ``finish`` event (not stopped or crashed)."""
    marks = [e for e in _events(rundir) if e in ("start", "finish")]
    return bool(marks) and marks[-1] == "finish"


def state(rundir: Path) -> str:
    """``running (pid N)``, ``finished (k/n jobs)``, ``stopped`` or ``not started``."""
    pid = running_pid(rundir)
    if pid is not None:
        return f"running (pid {pid})"
    if _finished(rundir):
        try:
            s = json.loads((rundir / "summary.json").read_text())
            return f"finished ({s['completed']}/{s['jobs']} jobs)"
        except (OSError, ValueError, KeyError):
            return "finished"
    return "stopped (hadar run --resume)" if (rundir / "run.json").exists() else "not started"


def _run_dirs(given: Sequence[str]) -> list[Path]:
    if given:
        dirs = [Path(d) for d in given]
        for d in dirs:
            if not (d / "run.json").exists() and not (d / PIDFILE).exists():
                raise InputError(f"{d}: not a run directory (no run.json)")
        return dirs
    if not RUNS.is_dir():
        return []
    return sorted(d for d in RUNS.iterdir() if (d / "run.json").exists() or (d / PIDFILE).exists())


# -- the commands --------------------------------------------------------------------------
def run_status(args: argparse.Namespace) -> int:
    from rich.table import Table

    from hadar.commands.terminal import console

    dirs = _run_dirs(args.rundirs)
    out = console(highlight=False)
    if not dirs:
        out.print("no runs under runs/ (start one with: hadar run --detach ...)")
        return 0
    table = Table(title=f"{len(dirs)} runs")
    for col in ("run", "policy", "workload", "state", "rounds", "last log line"):
        table.add_column(col, overflow="fold")
    for d in dirs:
        try:
            cfg = json.loads((d / "run.json").read_text())
        except (OSError, ValueError):
            cfg = {}
        rounds = _rounds_done(d)
        table.add_row(
            str(d),
            str(cfg.get("policy", "-")),
            str(cfg.get("workload", "-")),
            state(d),
            "-" if rounds is None else str(rounds),
            _last_line(d),
        )
    out.print(table)
    return 0


def run_logs(args: argparse.Namespace) -> int:
    rundir = Path(args.rundir)
    path = rundir / LOG
    if not path.exists():
        raise InputError(
            f"{path}: no log (only runs started with hadar run --detach write one; "
            f"see {rundir}/events.jsonl)"
        )
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(65536)
            if chunk:
                sys.stdout.write(chunk.decode(errors="replace"))
                sys.stdout.flush()
                continue
            if not args.follow or running_pid(rundir) is None:
                break
            try:
                time.sleep(0.5)
            except KeyboardInterrupt:
                break
        rest = fh.read()  # what the run wrote as it exited
        if rest:
            sys.stdout.write(rest.decode(errors="replace"))
    return 0


def run_stop(args: argparse.Namespace) -> int:
    rundir = Path(args.rundir)
    pid = running_pid(rundir)
    if pid is None:
        raise InputError(f"{rundir}: no background run is running there (hadar status lists runs)")
    os.kill(pid, signal.SIGINT)  # the coordinator's first-Ctrl-C path: finish the round, save
    print(f"asked {rundir} (pid {pid}) to stop after the round in progress")
    deadline = time.monotonic() + args.timeout_s
    while time.monotonic() < deadline:
        if running_pid(rundir) is None:
            print(f"stopped; continue with: hadar run --resume {rundir}")
            return 0
        time.sleep(0.2)
    if args.timeout_s > 0:
        print(f"still running after {args.timeout_s:g} s; hadar logs {rundir} -f shows why")
        return 1
    return 0
