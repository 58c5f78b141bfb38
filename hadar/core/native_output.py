"""Keep a solver's debug lines off the program's standard output.

HiGHS's MIP solver prints ``HighsMipSolverData::transformNewIntegerFeasibleSolution
tmpSolver.run();`` with C's ``printf`` in some solves (scipy's bundled HiGHS and highspy 1.12
alike), with logging off: one such line appeared at the top of every ``hadar simulate --policy
sia`` of pollux-6. :func:`drop_solver_debug_lines` points file descriptor 1 at an anonymous
in-memory file for the duration of a block, then writes what the block's time put there back to
standard output, without the lines of :data:`DEBUG_PREFIXES`. Nothing else is lost: what another
thread writes meanwhile (a live progress display) comes out when the block ends, in order. Python's
and C's buffers are flushed on both sides. Where the platform has no anonymous memory file
(``os.memfd_create``), the block runs as it is.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress

STDOUT_FD = 1
DEBUG_PREFIXES = (b"HighsMipSolverData::",)
"""Lines a solver prints whatever its options, dropped from standard output."""
_libc: list[ctypes.CDLL] = []


def _flush() -> None:
    """Python's standard output, then every C stdio stream (``fflush(NULL)``), to their
    descriptors."""
    for stream in (sys.stdout, sys.__stdout__):
        if stream is not None:
            with suppress(OSError, ValueError):
                stream.flush()
    with suppress(OSError, AttributeError, TypeError):
        if not _libc:
            _libc.append(ctypes.CDLL(None))
        _libc[0].fflush(None)


def _memory_file() -> int | None:
    create = getattr(os, "memfd_create", None)
    if create is None:
        return None
    try:
        fd: int = create("hadar-stdout", getattr(os, "MFD_CLOEXEC", 0))
    except OSError:
        return None
    return fd


def _kept(data: bytes) -> bytes:
    return b"".join(
        line for line in data.splitlines(keepends=True) if not line.startswith(DEBUG_PREFIXES)
    )


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


@contextmanager
def drop_solver_debug_lines() -> Iterator[None]:
    """Within the block, standard output (file descriptor 1) is held in memory; after it, what was
    written there comes out without the solvers' debug lines."""
    held = _memory_file()
    if held is None:
        yield
        return
    _flush()
    try:
        saved = os.dup(STDOUT_FD)
    except OSError:  # no descriptor 1 (stdout closed): nothing to keep clean
        os.close(held)
        yield
        return
    try:
        os.dup2(held, STDOUT_FD)
        yield
    finally:
        _flush()
        os.dup2(saved, STDOUT_FD)
        os.close(saved)
        size = os.lseek(held, 0, os.SEEK_CUR)
        os.lseek(held, 0, os.SEEK_SET)
        chunks = []
        while size > 0 and (chunk := os.read(held, size)):
            chunks.append(chunk)
            size -= len(chunk)
        os.close(held)
        data = b"".join(chunks)
        with suppress(OSError):  # standard output gone (a closed pipe): nothing to write to
            _write_all(STDOUT_FD, _kept(data))
