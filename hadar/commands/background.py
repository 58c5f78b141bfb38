"""Runs in the background: ``hadar run --detach`` starts the run as its own process (new
session, output in ``RUNDIR/run.log``, its pid in ``RUNDIR/detached.json``) and returns;
``hadar status`` lists runs, ``hadar logs RUNDIR [-f]`` shows (follows) the log and
``hadar stop RUNDIR`` stops it cleanly, as a first Ctrl-C does: the round in progress finishes,
state is saved, and ``hadar run --resume RUNDIR`` continues it."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import IO, Any

from hadar.commands import Subparsers, argtypes
from hadar.core.defaults import REAL_RUN
from hadar.core.errors import InputError
from hadar.core.io import open_append, write_json
from hadar.core.safe_paths import refuse_links
from hadar.core.state_db import StateFileError, check_side_files
from hadar.core.validation import look_up

LOG = "run.log"
PIDFILE = "detached.json"
RUNS = Path("runs")
STARTUP_WAIT_S = 300.0
"""How long ``--detach`` waits for the new process to start its first round (inputs checked,
nodes answered): a run that fails before that shows its error here, with its exit code."""
KILL_WAIT_S = 10.0
"""How long ``hadar stop`` waits for a process group it sent SIGKILL to disappear."""
MAX_PID = 1 << 22
"""Linux's largest pid (``PID_MAX_LIMIT``): a pid file naming more, or less than 2 (0 and -1
signal whole process groups, 1 is init), was not written by ``--detach``."""
SMALL_FILE_BYTES = 1 << 20
"""How much of ``run.json``, ``summary.json`` and ``detached.json`` ``hadar status`` reads."""
MAX_EVENT_LINE = 1 << 20
"""Longer lines of ``events.jsonl`` are read in pieces (and skipped): never held whole."""


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
        "progress finishes, the state is saved, and hadar run --resume RUNDIR continues. A run "
        "still going after --timeout gets SIGTERM (the round in progress is abandoned, the "
        "state of the last closed round kept), and one still going --grace seconds later gets "
        "SIGKILL with its whole process group. Says which signal stopped it.",
    )
    sp.add_argument("rundir", metavar="RUNDIR", help="the run directory")
    sp.add_argument(
        "--timeout",
        dest="timeout_s",
        type=argtypes.seconds(0, argtypes.DAY),
        default=REAL_RUN.stop_wait_s,
        metavar="S",
        help="seconds to wait after SIGINT before SIGTERM; 0 sends SIGINT and returns at once "
        "(default: %(default)s)",
    )
    sp.add_argument(
        "--grace",
        dest="grace_s",
        type=argtypes.seconds(0, argtypes.DAY),
        default=REAL_RUN.stop_grace_s,
        metavar="S",
        help="seconds to wait after SIGTERM before SIGKILL of the run's process group "
        "(default: %(default)s)",
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
    refuse_links(rundir, "the run directory")  # run.log is appended to: never through a link
    rundir.mkdir(parents=True, exist_ok=True)
    starts = _starts(rundir)
    command = child_argv(argv, rundir, resume)
    log_path = rundir / LOG
    with open_append(log_path) as log:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # no SIGHUP when the terminal closes, no Ctrl-C from it
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    pidfile = {"pid": proc.pid, "started_at": time.time(), "argv": command[3:]}
    write_json(rundir.resolve() / PIDFILE, pidfile, nofollow=True)  # the run goes on meanwhile
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


# -- reading a run directory ---------------------------------------------------------------
@contextmanager
def _open_regular(path: Path) -> Iterator[IO[bytes] | None]:
    """``path`` opened to read if it is a regular file, else None: a link is not followed
    (hadar never makes one in a run directory) and a FIFO or device is not waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        yield None
        return
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # a folder cannot even be wrapped in a file
        os.close(fd)
        yield None
        return
    with os.fdopen(fd, "rb") as fh:
        yield fh


def _read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in ``path`` (a regular file of at most :data:`SMALL_FILE_BYTES`), or
    ``{}`` for anything else: ``hadar status`` shows what it can of a damaged run."""
    with _open_regular(path) as fh:
        data = fh.read(SMALL_FILE_BYTES + 1) if fh is not None else b""
    try:
        value = json.loads(data) if 0 < len(data) <= SMALL_FILE_BYTES else None
    except (ValueError, RecursionError):  # not JSON, not UTF-8, nested too deeply
        return {}
    return value if isinstance(value, dict) else {}


# -- finding runs --------------------------------------------------------------------------
def _pidfile(rundir: Path) -> dict[str, Any] | None:
    """``detached.json`` if it names a pid ``--detach`` could have written (see :data:`MAX_PID`)."""
    data = _read_json_object(rundir / PIDFILE)
    pid = data.get("pid")
    return data if type(pid) is int and 2 <= pid <= MAX_PID else None


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
        pass  # alive, someone else's: its command line still says whether it is this run
    cmdline = Path(f"/proc/{pid}/cmdline")
    if cmdline.exists():
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            return None
        if not _is_hadar_run(args) or not _names_rundir(args, pid, rundir):
            return None  # not a `hadar run` of this directory
        if _zombie(pid):
            return None
    return pid


def _is_hadar_run(args: list[bytes]) -> bool:
    """Whether a command line is ``PYTHON -m hadar run ...`` (what ``--detach`` starts) or
    ``.../hadar run ...``: another program whose arguments hold the word ``run`` is not one."""
    for start in range(min(2, len(args))):
        rest = args[start:]
        if rest[:3] == [b"-m", b"hadar", b"run"] or (
            len(rest) >= 2 and os.path.basename(rest[0]) == b"hadar" and rest[1] == b"run"
        ):
            return True
    return False


_DIR_FLAGS = (b"--out=", b"--resume=")
"""How a command line may name the run directory in one word (``--out=DIR``)."""


def _names_rundir(args: list[bytes], pid: int, rundir: Path) -> bool:
    """Whether one of a process's arguments names ``rundir``: as typed (``run/``, ``./run``,
    ``--out=run``), read from the process's working directory, or its real path."""
    want = {str(rundir).encode(), str(rundir.resolve()).encode()}
    try:
        cwd: Path | None = Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        cwd = None
    real = rundir.resolve()
    for word in args:
        arg = next((word[len(f) :] for f in _DIR_FLAGS if word.startswith(f)), word)
        if arg in want:
            return True
        if cwd is not None and arg and word != b"run":  # the command's word, not a folder
            try:
                if (cwd / os.fsdecode(arg)).resolve() == real:
                    return True
            except (OSError, RuntimeError, ValueError):
                continue
    return False


def _zombie(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return fields[0] == "Z"


def _rounds_done(rundir: Path) -> int | None:
    import sqlite3

    path = rundir / "state.sqlite"
    if not path.is_file() or path.is_symlink():
        return None
    try:
        check_side_files(path)
    except StateFileError:
        return None
    try:  # as_uri: a '?' or '#' in the folder's name is not read as URI parameters
        con = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=2.0)
        try:
            kind = con.execute("SELECT type FROM sqlite_master WHERE name = 'rounds'").fetchone()
            if kind != ("table",):  # a view (or none) is not the tracker's: not read
                return None
            # a damaged file's query ends after a bounded amount of work, not in a spin that
            # signals cannot interrupt (SQLite runs without returning to Python)
            con.set_progress_handler(_stop_after(STATUS_QUERY_S), 10_000)
            (n,) = con.execute("SELECT COUNT(*) FROM rounds WHERE state = 'closed'").fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        return None
    return int(n) if isinstance(n, int) else None


STATUS_QUERY_S = 2.0
"""The longest ``hadar status`` spends counting one run's rounds in its state file."""


def _stop_after(seconds: float) -> Callable[[], int]:
    """A SQLite progress handler that interrupts the statement after ``seconds``."""
    deadline = time.monotonic() + seconds
    return lambda: int(time.monotonic() > deadline)


def _last_line(rundir: Path) -> str:
    with _open_regular(rundir / LOG) as fh:
        if fh is None:
            return ""
        fh.seek(max(0, os.fstat(fh.fileno()).st_size - 4096))
        lines = [
            line.strip() for line in fh.read().decode(errors="replace").splitlines() if line.strip()
        ]
    return lines[-1] if lines else ""


def _events(rundir: Path) -> list[str]:
    """The names of the run's events, in order (lines cut short by a crash skipped)."""
    names = []
    with _open_regular(rundir / "events.jsonl") as fh:
        for line in iter(partial(fh.readline, MAX_EVENT_LINE), b"") if fh is not None else ():
            try:
                names.append(str(json.loads(line).get("event")))
            except (ValueError, AttributeError, RecursionError):
                continue
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
        s = _read_json_object(rundir / "summary.json")
        done, jobs = s.get("completed"), s.get("jobs")
        if type(done) is int and type(jobs) is int:
            return f"finished ({done}/{jobs} jobs)"
        return "finished"
    return "stopped (hadar run --resume)" if (rundir / "run.json").exists() else "not started"


def _run_dirs(given: Sequence[str]) -> list[Path]:
    if given:
        dirs = [Path(d) for d in given]
        for d in dirs:
            if look_up(d, "run directory") is None or (
                not (d / "run.json").exists() and not (d / PIDFILE).exists()
            ):
                raise InputError(f"{d}: not a run directory (no run.json)")
        return dirs
    if not RUNS.is_dir():
        return []
    return sorted(d for d in RUNS.iterdir() if (d / "run.json").exists() or (d / PIDFILE).exists())


# -- the commands --------------------------------------------------------------------------
def run_status(args: argparse.Namespace) -> int:
    from rich.table import Table

    from hadar.commands.terminal import cell, console
    from hadar.core.text import counted

    dirs = _run_dirs(args.rundirs)
    out = console(highlight=False)
    if not dirs:
        out.print("no runs under runs/ (start one with: hadar run --detach ...)")
        return 0
    table = Table(title=counted(len(dirs), "run"))
    for col in ("run", "policy", "workload", "state", "rounds", "last log line"):
        table.add_column(col, overflow="fold")
    for d in dirs:
        cfg = _read_json_object(d / "run.json")
        rounds = _rounds_done(d)
        table.add_row(  # run.json and run.log are shown as text, never read as markup
            cell(d),
            cell(cfg.get("policy", "-")),
            cell(cfg.get("workload", "-")),
            state(d),
            "-" if rounds is None else str(rounds),
            cell(_last_line(d)),
        )
    out.print(table)
    return 0


def run_logs(args: argparse.Namespace) -> int:
    rundir = Path(args.rundir)
    path = rundir / LOG
    look_up(path, "run directory")  # a name over 255 bytes, a link loop: one line
    if not path.exists() and not path.is_symlink():
        raise InputError(
            f"{path}: no log (only runs started with hadar run --detach write one; "
            f"see {rundir}/events.jsonl)"
        )
    with _open_regular(path) as fh:
        if fh is None:
            raise InputError(
                f"{path}: not a regular file (a link, FIFO or device, which hadar never makes "
                "there); hadar logs does not read it"
            )
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
    try:
        group = os.getpgid(pid)
    except ProcessLookupError:
        group = None  # it ended meanwhile
    _signal(rundir, pid, signal.SIGINT)  # the coordinator's first-Ctrl-C path: finish the round
    print(f"asked {rundir} (pid {pid}) to stop after the round in progress (SIGINT)")
    if args.timeout_s == 0:
        return 0
    resume = f"continue with: hadar run --resume {rundir}"
    if _ended(rundir, args.timeout_s):
        print(f"stopped by SIGINT; {resume}")
        return 0
    print(f"still running after {args.timeout_s:g} s: sending SIGTERM (abandons the round)")
    _signal(rundir, pid, signal.SIGTERM)
    if _ended(rundir, args.grace_s):
        print(f"stopped by SIGTERM; {resume}")
        return 0
    print(f"still running after {args.grace_s:g} s: sending SIGKILL to its process group")
    if group is not None and group == pid:  # its own session (--detach): workers go with it
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
    else:
        _signal(rundir, pid, signal.SIGKILL)
    if _ended(rundir, KILL_WAIT_S):
        print(f"stopped by SIGKILL (the round in progress is lost); {resume}")
        return 0
    print(f"pid {pid} survived SIGKILL (a process stuck in the kernel); hadar status shows it")
    return 1


def _signal(rundir: Path, pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass  # it ended meanwhile
    except PermissionError:
        raise InputError(
            f"{rundir}: the run's process (pid {pid}) belongs to another user; stop it as them"
        ) from None


def _ended(rundir: Path, wait_s: float) -> bool:
    """Whether the run of ``rundir`` ends within ``wait_s`` seconds."""
    deadline = time.monotonic() + wait_s
    while running_pid(rundir) is not None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True
