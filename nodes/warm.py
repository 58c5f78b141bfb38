"""A warm worker: one long-lived server per node keeps torch imported and forks a child per
round, so a round's start-up costs milliseconds instead of seconds of ``import torch``.

    python -m nodes.warm run [--zygote DIR] -- <worker arguments>   # what the coordinator runs
    python -m nodes.warm serve --socket PATH [--zygote]   # started by ``run`` when none is up
    python -m nodes.warm stop [--zygote DIR]   # end this directory's server (or DIR's zygote)

``run`` (light: it never imports torch) connects to the server listening on
``.hadar-warm.sock`` in its working directory, starting one if there is none, sends its
arguments and environment and waits. The server forks a child that takes the client's
environment (``CUDA_VISIBLE_DEVICES``, ``RANK``, ...: the server never initialises CUDA, so the
child's CUDA sees only its devices) and runs :func:`nodes.worker.main` exactly as
``python -m nodes.worker`` would, with the deadline counted from the client's start. The
client relays the child's output and exit status. If the client goes away (the coordinator's
timeout killed it), the server kills the child. The server exits after ``--idle-exit`` seconds
without work. Everything else (files, results, exit codes) is the plain worker's contract.

Nodes that share one machine (the local provider's) pass ``--zygote DIR``, their run's folder
of node directories: one process there (``serve --zygote``) imports torch once and forks each
node's warm server on request, so a run of five local nodes imports torch once, not five times.
A node's server is still its own process working in the node's directory (a node that leaves
loses it); the zygote forks servers only for directories directly inside its own.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

SOCKET_NAME = ".hadar-warm.sock"
LOCK_NAME = ".hadar-warm.lock"
"""Taken by a client while it starts the server (``SOCKET_NAME`` with this suffix)."""
LOG_NAME = ".hadar-warm.log"
"""The server's output (``SOCKET_NAME`` with this suffix)."""
PID_NAME = ".hadar-warm.pid"
"""The server's process id, beside its socket: ``stop`` ends it (and so its children)."""
IDLE_EXIT_S = 900.0
STOP_GRACE_S = 5.0
"""How long ``stop`` (and a server ending its children) waits after SIGTERM before SIGKILL."""


# -- client ------------------------------------------------------------------------------------
def client(
    worker_args: list[str], start_timeout_s: float = 120.0, zygote: Path | None = None
) -> int:
    """Run one worker invocation through this directory's warm server (forked from ``zygote``'s
    process when given); return its exit status."""
    t0 = time.monotonic()
    # relative to the working directory: AF_UNIX paths are limited to ~107 bytes
    via = None if zygote is None else Path(os.path.relpath(zygote.absolute(), Path.cwd()))
    try:
        conn = _connect_or_spawn(Path(SOCKET_NAME), start_timeout_s, via)
    except (OSError, subprocess.SubprocessError) as e:  # e.g. a directory it cannot write
        raise SystemExit(f"hadar-warm: cannot start the warm server in {Path.cwd()}: {e}") from None
    here = os.stat(".")
    request = {
        "argv": worker_args,
        "cwd": str(Path.cwd()),
        "cwd_id": [here.st_dev, here.st_ino],
        "t0": t0,
        "env": dict(os.environ),
    }
    conn.sendall((json.dumps(request) + "\n").encode())
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            print("hadar-warm: the warm server went away during the round", file=sys.stderr)
            return 1
        data += chunk
    reply = json.loads(data)
    sys.stdout.write(reply.get("stdout", ""))
    sys.stderr.write(reply.get("stderr", ""))
    rc = int(reply["returncode"])
    return 128 - rc if rc < 0 else rc


def _connect(sock_path: Path) -> socket.socket | None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(str(sock_path))
        return s
    except OSError:
        s.close()
        return None


def _connect_or_spawn(
    sock_path: Path, timeout_s: float, zygote: Path | None = None, flags: tuple[str, ...] = ()
) -> socket.socket:
    """A connection to the server on ``sock_path``, starting it when there is none: forked by
    the zygote in ``zygote``, else a new process (``serve`` with ``flags``)."""
    conn = _connect(sock_path)
    if conn is not None:
        return conn
    with open(sock_path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one spawner at a time (gang ranks on one node)
        conn = _connect(sock_path)
        starting = _server_pid(sock_path.parent)  # a server still importing torch: wait for it
        if conn is None and starting is None and zygote is not None:
            starting = _fork_from_zygote(zygote, timeout_s)
        if conn is None and starting is not None:
            end = time.monotonic() + timeout_s
            while conn is None and time.monotonic() < end and _is_warm_server(starting):
                time.sleep(0.05)
                conn = _connect(sock_path)
        if conn is None:
            with contextlib.suppress(FileNotFoundError):
                sock_path.unlink()
            log_path = sock_path.with_suffix(".log")
            with open(log_path, "ab") as log:
                server = subprocess.Popen(
                    [sys.executable, "-m", "nodes.warm", "serve", "--socket", str(sock_path)]
                    + list(flags),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    start_new_session=True,
                    close_fds=True,
                    # the pid file names the server before it runs: a client that takes the lock
                    # after this one was killed waits for it instead of starting a second server
                    preexec_fn=lambda: _record_server_pid(sock_path.parent, os.getpid()),
                )
            end = time.monotonic() + timeout_s
            while conn is None and time.monotonic() < end and server.poll() is None:
                time.sleep(0.05)
                conn = _connect(sock_path)
            if conn is None and server.poll() is not None:
                tail = log_path.read_text(errors="replace").strip().splitlines()[-1:] or [
                    "no output"
                ]
                raise SystemExit(
                    f"hadar-warm: the warm server exited with {server.returncode}: {tail[0]}"
                )
    if conn is None:
        raise SystemExit(
            f"hadar-warm: no warm server answered on {sock_path} within {timeout_s:.0f} s"
        )
    return conn


def _fork_from_zygote(zygote: Path, timeout_s: float) -> int:
    """Ask the zygote in ``zygote`` (started when there is none) to fork a warm server for this
    directory; the new server's process id (its pid file is written before the reply)."""
    conn = _connect_or_spawn(zygote / SOCKET_NAME, timeout_s, flags=("--zygote",))
    with conn:
        conn.settimeout(timeout_s)
        conn.sendall((json.dumps({"serve": str(Path.cwd().resolve())}) + "\n").encode())
        data = b""
        while not data.endswith(b"\n"):
            chunk = conn.recv(4096)
            if not chunk:
                raise SystemExit(f"hadar-warm: the zygote in {zygote} forked no server")
            data += chunk
    return int(json.loads(data)["pid"])


# -- server ------------------------------------------------------------------------------------
class _Job:
    """A forked worker: its client's connection, its process, and its output files (``out``,
    ``err``: names in the folder held by ``folder``, a descriptor)."""

    def __init__(self, conn: socket.socket, pid: int, folder: int, out: str, err: str) -> None:
        self.conn, self.pid, self.folder, self.out, self.err = conn, pid, folder, out, err
        self.killed_at: float | None = None


def serve(sock_path: Path, idle_exit_s: float = IDLE_EXIT_S, zygote: bool = False) -> None:
    """Accept requests until idle for ``idle_exit_s``; fork one child per request (a zygote: one
    warm server per request). The pid file is written before torch is imported, so ``stop`` can
    end a server still starting."""
    os.chdir(sock_path.resolve().parent)  # bind a short relative name (AF_UNIX path limit)
    sock_path = Path(sock_path.name)
    _record_server_pid(Path("."), os.getpid())  # its spawner wrote it; a server started by hand
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    jobs: dict[socket.socket, _Job] = {}
    try:
        preload()  # a server forked by a zygote has all of it already
        if zygote:
            _serve_forks(sock_path, idle_exit_s)
        else:
            _serve(sock_path, idle_exit_s, jobs)
    finally:
        with contextlib.suppress(OSError):
            sock_path.unlink()
        _end_children([job.pid for job in jobs.values()])
        with contextlib.suppress(OSError):
            if Path(PID_NAME).read_text().strip() == str(os.getpid()):
                Path(PID_NAME).unlink()


def _serve(sock_path: Path, idle_exit_s: float, jobs: dict[socket.socket, _Job]) -> None:
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with contextlib.suppress(FileNotFoundError):
        sock_path.unlink()
    srv.bind(str(sock_path))
    srv.listen(64)
    sel = selectors.DefaultSelector()
    sel.register(srv, selectors.EVENT_READ, "accept")
    pending: dict[socket.socket, bytes] = {}
    last_busy = time.monotonic()
    while True:
        for key, _ in sel.select(timeout=0.05):
            if key.data == "accept":
                conn, _ = srv.accept()
                pending[conn] = b""
                sel.register(conn, selectors.EVENT_READ, "conn")
                continue
            if not isinstance(key.fileobj, socket.socket):  # only sockets are registered
                continue
            conn = key.fileobj
            chunk = b""
            with contextlib.suppress(OSError):
                chunk = conn.recv(65536)
            if conn in jobs:
                if not chunk:  # client gone: kill its child
                    _stop(jobs[conn])
                continue
            if not chunk:
                sel.unregister(conn)
                conn.close()
                pending.pop(conn, None)
                continue
            pending[conn] += chunk
            if pending[conn].endswith(b"\n"):
                request = json.loads(pending.pop(conn))
                try:
                    folder = open_client_folder(request)
                except OSError as exc:  # not the client's folder: answer without forking
                    _reply(conn, {"returncode": 2, "stdout": "", "stderr": f"hadar-warm: {exc}\n"})
                    sel.unregister(conn)
                    conn.close()
                    continue
                jobs[conn] = _fork(request, conn, folder)
        for conn, job in list(jobs.items()):
            pid, status = os.waitpid(job.pid, os.WNOHANG)
            if pid == 0:
                if job.killed_at is not None and time.monotonic() - job.killed_at > 5:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(job.pid, signal.SIGKILL)
                continue
            rc = os.waitstatus_to_exitcode(status)
            out, err = _read(job.folder, job.out), _read(job.folder, job.err)
            os.close(job.folder)
            _reply(conn, {"returncode": rc, "stdout": out, "stderr": err})
            sel.unregister(conn)
            conn.close()
            del jobs[conn]
        if jobs or pending:
            last_busy = time.monotonic()
        elif time.monotonic() - last_busy > idle_exit_s or not sock_path.exists():
            return


def _serve_forks(sock_path: Path, idle_exit_s: float) -> None:
    """The zygote's loop: each request names a directory directly inside this one; fork a warm
    server there, write its pid file and reply with its process id."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the servers it forks are reaped for it
    here = Path.cwd().resolve()
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with contextlib.suppress(FileNotFoundError):
        sock_path.unlink()
    srv.bind(str(sock_path))
    srv.listen(64)
    srv.settimeout(0.5)
    last_busy = time.monotonic()
    while sock_path.exists() and time.monotonic() - last_busy <= idle_exit_s:
        try:
            conn, _ = srv.accept()
        except TimeoutError:
            continue
        last_busy = time.monotonic()
        with conn:
            conn.settimeout(30)
            data = b""
            with contextlib.suppress(OSError):
                while not data.endswith(b"\n"):
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
            try:
                directory = Path(str(json.loads(data)["serve"]))
            except (ValueError, KeyError, TypeError):
                continue
            if directory.is_symlink() or directory.resolve().parent != here:
                continue  # only this run's node directories, never through a link
            pid = os.fork()
            if pid == 0:
                srv.close()
                conn.close()
                _become_server(directory, idle_exit_s)
            with contextlib.suppress(OSError):  # the server records itself too
                _record_server_pid(directory, pid)
            with contextlib.suppress(OSError):
                conn.sendall((json.dumps({"pid": pid}) + "\n").encode())


def _become_server(directory: Path, idle_exit_s: float) -> None:
    """In a child of the zygote: become ``directory``'s warm server (its own session, its own
    log), and exit when it ends."""
    code = 1
    try:
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # it reaps the workers it forks
        log = os.open(
            directory / LOG_NAME,
            os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW,
            0o600,
        )
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        serve(directory / SOCKET_NAME, idle_exit_s)
        code = 0
    except SystemExit as e:  # SIGTERM (stop)
        code = e.code if isinstance(e.code, int) else 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _end_children(pids: list[int]) -> None:
    """SIGTERM each child's process group, reap them, SIGKILL what is left after the grace."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
    end = time.monotonic() + STOP_GRACE_S
    alive = set(pids)
    while alive and time.monotonic() < end:
        for pid in list(alive):
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0] == 0:
                    continue
            alive.discard(pid)
        time.sleep(0.05)
    for pid in alive:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def stop(directory: Path, files: tuple[str, ...] = (SOCKET_NAME, PID_NAME)) -> None:
    """End the warm server of ``directory`` (its socket goes first, so no new work reaches it),
    waiting for it and its children: SIGTERM, then SIGKILL after :data:`STOP_GRACE_S`; none of
    ``files`` is left (its socket and pid file; a zygote's lock and log too)."""
    with contextlib.suppress(FileNotFoundError):
        (directory / SOCKET_NAME).unlink()
    pid = _server_pid(directory)
    if pid is not None:
        _end_server(pid, directory)
    # a server killed unclean leaves its files (it may have bound its socket after the unlink
    # above, finishing an import that SIGTERM could not interrupt)
    for name in files:
        with contextlib.suppress(OSError):
            (directory / name).unlink()


def _end_server(pid: int, directory: Path) -> None:
    """SIGTERM the server ``pid`` of ``directory`` and wait; SIGKILL it and its workers after the
    grace."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + 2 * STOP_GRACE_S  # the server itself waits up to the grace
    while _is_warm_server(pid) and time.monotonic() < end:
        time.sleep(0.05)
    if _is_warm_server(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        end = time.monotonic() + STOP_GRACE_S
        while _is_warm_server(pid) and time.monotonic() < end:
            time.sleep(0.05)
        for child in _forked_workers(directory):  # it could not end them itself
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child, signal.SIGKILL)


def _forked_workers(directory: Path) -> list[int]:
    """Workers a warm server of ``directory`` forked (:func:`_fork`): its command line, working
    in ``directory``, each leading its own session; none where there is no ``/proc``."""
    out = []
    where = str(directory.resolve())
    for name in os.listdir("/proc") if Path("/proc").is_dir() else []:
        if not name.isdigit():
            continue
        pid = int(name)
        with contextlib.suppress(OSError):
            if (
                _is_warm_server(pid)
                and os.readlink(f"/proc/{pid}/cwd") == where
                and os.getsid(pid) == pid
            ):
                out.append(pid)
    return out


def _record_server_pid(directory: Path, pid: int) -> None:
    """Write ``directory``'s pid file atomically: a client reading it never sees it empty. The
    temporary name is the writer's own (a zygote and the server it forked write the same pid
    file at the same moment)."""
    tmp = directory / f"{PID_NAME}.{os.getpid()}-{pid}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, f"{pid}\n".encode())
    finally:
        os.close(fd)
    os.replace(tmp, directory / PID_NAME)


def _server_pid(directory: Path) -> int | None:
    """The live warm server of ``directory`` (its pid file), if there is one."""
    try:
        pid = int((directory / PID_NAME).read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _is_warm_server(pid) else None


def _is_warm_server(pid: int) -> bool:
    """Whether ``pid`` is alive and (where /proc shows it) a warm server, not a reused id."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # another user's process: not ours
    try:
        text = Path(f"/proc/{pid}/cmdline").read_bytes()
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[:1]
    except OSError:
        return not Path("/proc").is_dir()  # no /proc: trust the pid file
    return b"nodes.warm" in text and b"serve" in text and state != ["Z"]


def preload() -> None:
    """Import everything a worker imports lazily (torch, its optimizers' compile hooks, the models
    and datasets) once in the server, before any fork. No tensor is created here."""
    import importlib

    for name in (
        "torch",
        "torch.optim",
        "torch._dynamo",
        "torch.nn.parallel",
        "torch.distributed",
        "nodes.worker",
        "nodes.models",
        "nodes.datasets",
        "nodes.checkpoint",
        "nodes.spec",
    ):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def _reply(conn: socket.socket, reply: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        conn.sendall((json.dumps(reply) + "\n").encode())


def open_client_folder(request: dict[str, Any]) -> int:
    """A descriptor of the folder the client works in: its path opened without following a link
    in its last part, and refused (:class:`OSError`) unless it is the very folder the client
    is in (the device and inode the client sent), so a folder swapped for a link or another
    folder between the client's start and the fork is never entered or written in."""
    cwd = request.get("cwd")
    if not isinstance(cwd, str):
        raise OSError("the request names no working directory")
    try:
        fd = os.open(cwd, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise OSError(f"{cwd}: cannot open the working directory: {exc.strerror or exc}") from None
    st = os.fstat(fd)
    if request.get("cwd_id") != [st.st_dev, st.st_ino]:
        os.close(fd)
        raise OSError(f"{cwd}: not the client's working directory (replaced while it ran)")
    return fd


def _fork(request: dict[str, Any], conn: socket.socket, folder: int) -> _Job:
    """Fork the worker of ``request`` in ``folder`` (:func:`open_client_folder`), its output in
    two new files there, created through the descriptor (never through a link)."""
    stamp = f"{os.getpid()}-{time.monotonic_ns()}"
    out, err = f".warm-{stamp}.out", f".warm-{stamp}.err"
    pid = os.fork()
    if pid == 0:  # the child: become the worker
        code = 1
        try:
            os.setsid()
            os.fchdir(folder)
            new = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
            fo, fe = (
                os.open(out, new, 0o600, dir_fd=folder),
                os.open(err, new, 0o600, dir_fd=folder),
            )
            os.close(folder)
            os.dup2(fo, 1)
            os.dup2(fe, 2)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            if isinstance(
                request.get("env"), dict
            ):  # the client's: CUDA_VISIBLE_DEVICES, RANK, ...
                os.environ.clear()
                os.environ.update({str(k): str(v) for k, v in request["env"].items()})
            import nodes.worker as worker

            # as `python -m nodes.worker` would, but the deadline counts from the client's start
            code = worker._main(list(request["argv"]), float(request["t0"]))
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return _Job(conn, pid, folder, out, err)


def _stop(job: _Job) -> None:
    if job.killed_at is None:
        job.killed_at = time.monotonic()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(job.pid, signal.SIGTERM)


def _read(folder: int, name: str) -> str:
    """The text of file ``name`` in ``folder`` (a descriptor), which is then deleted; "" if it
    cannot be read."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=folder)
    except OSError:
        return ""
    try:
        with os.fdopen(fd, "rb") as f:
            text = f.read().decode(errors="replace")
        os.unlink(name, dir_fd=folder)
        return text
    except OSError:
        return ""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="hadar-warm", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run one worker invocation through the warm server")
    r.add_argument("--zygote", type=Path, help="fork the server from the zygote in this folder")
    r.add_argument("worker_args", nargs=argparse.REMAINDER)
    t = sub.add_parser("stop", help="end this directory's warm server and its children")
    t.add_argument("--zygote", type=Path, help="end the zygote in this folder, and its files")
    s = sub.add_parser("serve", help="the warm server (started by run)")
    s.add_argument("--socket", required=True)
    s.add_argument("--idle-exit", type=float, default=IDLE_EXIT_S)
    s.add_argument("--zygote", action="store_true", help="fork warm servers, not workers")
    a = p.parse_args(argv)
    if a.cmd == "serve":
        serve(Path(a.socket), a.idle_exit, zygote=a.zygote)
        return 0
    if a.cmd == "stop":
        if a.zygote is not None:
            stop(a.zygote, (SOCKET_NAME, PID_NAME, LOCK_NAME, LOG_NAME))
        else:
            stop(Path.cwd())
        return 0
    args = a.worker_args[1:] if a.worker_args[:1] == ["--"] else a.worker_args
    return client(args, zygote=a.zygote)


if __name__ == "__main__":
    sys.exit(main())
