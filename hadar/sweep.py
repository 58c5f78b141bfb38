"""Run independent cells of an experiment (one simulation each) in parallel, locally or on Ray.

A cell is a picklable value and ``fn(cell)`` a module-level function of it alone, so the results
depend only on the cells: serial, a local process pool and a Ray cluster give identical results
(only measured decision times differ), returned in ``cells`` order.

* ``workers=1``: one by one in this process.
* default: a local pool of ``min(workers or CPU count, len(cells))`` processes, spawned (or
  forked, with ``start_method="fork"``: faster to start, for a parent that holds no threads).
* ``ray_address``: the cells run as Ray tasks on that cluster (``"auto"``, ``"ray://host:10001"``,
  ``"host:6379"``); needs the optional ``ray`` extra, and the project installed on the Ray workers
  (for example the same virtual environment, or ``pip install`` in the cluster's set-up).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any, Literal, TypeVar

from hadar.core.errors import InputError, UnreachableNodeError, shorten
from hadar.core.extras import require

C = TypeVar("C")
R = TypeVar("R")


def default_workers(cells: int, workers: int | None = None) -> int:
    """Processes to use: ``workers`` if given, else one per CPU, never more than there are cells."""
    if workers is not None and workers < 1:
        raise InputError(f"--workers: must be >= 1 (got {workers})")
    return max(1, min(cells, workers or os.cpu_count() or 1))


def run_cells(
    fn: Callable[[C], R],
    cells: Sequence[C],
    workers: int | None = None,
    ray_address: str | None = None,
    on_done: Callable[[C, R], None] | None = None,
    *,
    start_method: Literal["spawn", "fork"] = "spawn",
    chunksize: int = 1,
) -> list[R]:
    """``[fn(c) for c in cells]``, in parallel; ``on_done(cell, result)`` as results arrive, in
    ``cells`` order. A local pool hands each process ``chunksize`` cells at a time."""
    if ray_address:
        return _run_on_ray(fn, cells, ray_address, on_done)
    n = default_workers(len(cells), workers)
    if n <= 1:
        out = []
        for c in cells:
            out.append(fn(c))
            if on_done:
                on_done(c, out[-1])
        return out
    with ProcessPoolExecutor(max_workers=n, mp_context=get_context(start_method)) as pool:
        results = []
        for c, r in zip(cells, pool.map(fn, cells, chunksize=max(1, chunksize)), strict=True):
            results.append(r)
            if on_done:
                on_done(c, r)
        return results


def _run_on_ray(
    fn: Callable[[C], R], cells: Sequence[C], address: str, on_done: Callable[[C, R], None] | None
) -> list[R]:
    ray: Any = require("ray", "--ray-address")
    _check_reachable(address)
    started_here = not ray.is_initialized()
    if started_here:
        try:
            ray.init(
                address=address,
                logging_level=logging.ERROR,
                log_to_driver=False,
                include_dashboard=False,
            )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise UnreachableNodeError(
                f"--ray-address {shorten(address)}: cannot connect to the Ray cluster: {shorten(first, 300)}"
            ) from None
    try:
        task: Any = ray.remote(fn)
        refs = [task.remote(c) for c in cells]
        results: list[R] = []
        for c, ref in zip(cells, refs, strict=True):
            results.append(ray.get(ref))
            if on_done:
                on_done(c, results[-1])
        return results
    finally:
        if started_here:
            ray.shutdown()


MAX_PORT = 65535


def check_ray_address(address: str | None) -> None:
    """Before a command creates its output directory: a ``--ray-address`` needs Ray installed
    (:class:`MissingExtraError`) and, in the ``host:port`` forms, a port that is one."""
    if address:
        require("ray", "--ray-address")
        ray_host_port(address)


def ray_host_port(address: str | None) -> tuple[str, int] | None:
    """The host and port of a ``host:port`` or ``ray://host:port`` ``--ray-address`` (None for
    ``auto`` and the other forms Ray reads); an :class:`InputError` for a port that is not one."""
    if not address:
        return None
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    if not port.isascii():  # int() reads other scripts' digits; Ray does not
        raise InputError(f"--ray-address {shorten(address)}: the port must be written in 0-9")
    if int(port) > MAX_PORT:
        raise InputError(
            f"--ray-address {shorten(address)}: port {shorten(port)} is not a TCP port "
            f"(0-{MAX_PORT})"
        )
    return host, int(port)


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast (Ray itself retries for minutes) when a ``host:port`` or ``ray://host:port``
    address does not accept TCP connections; ``auto`` and other forms are left to Ray."""
    found = ray_host_port(address)
    if found is None:
        return
    host, port = found
    try:
        with socket.create_connection((host.strip("[]"), port), timeout=timeout_s):
            pass
    except (OSError, UnicodeError) as exc:  # UnicodeError: a host name IDNA cannot encode
        if isinstance(exc, TimeoutError):
            reason = "timed out"
        elif isinstance(exc, OSError):
            reason = (exc.strerror or type(exc).__name__).lower()
        else:
            reason = "not a valid host name"
        raise UnreachableNodeError(
            f"--ray-address {shorten(address)}: cannot connect to the Ray cluster at "
            f"{shorten(f'{host}:{port}')} ({reason})"
        ) from None
