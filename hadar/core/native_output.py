"""Silence what a C library prints to the process's standard output whatever its options.

HiGHS's MIP solver prints ``HighsMipSolverData::transformNewIntegerFeasibleSolution
tmpSolver.run();`` with C's ``printf`` in some solves (scipy's bundled HiGHS and highspy 1.12
alike), with logging off: one such line appeared at the top of every ``hadar simulate --policy sia``
of pollux-6. :func:`quiet_native_stdout` points file descriptor 1 at the null device for the
duration of a block, flushing Python's and C's buffers on both sides so that nothing printed
before is lost and nothing printed inside comes out later.

File descriptor 1 is the process's: for a block that runs while no other thread writes to
standard output, as a policy's decision (the round loop runs it on its own, before any copy is
dispatched).
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress

STDOUT_FD = 1
_libc: list[ctypes.CDLL] = []


def _flush_c_stdio() -> None:
    """``fflush(NULL)``: every C stdio stream's buffer out to its descriptor (where libc is
    reachable; elsewhere nothing)."""
    with suppress(OSError, AttributeError, TypeError):
        if not _libc:
            _libc.append(ctypes.CDLL(None))
        _libc[0].fflush(None)


def _flush_python_stdout() -> None:
    for stream in (sys.stdout, sys.__stdout__):
        if stream is not None:
            with suppress(OSError, ValueError):
                stream.flush()


@contextmanager
def quiet_native_stdout() -> Iterator[None]:
    """Within the block, what is written to file descriptor 1 (a C library's ``printf``) goes to
    the null device; standard output is as before after it."""
    _flush_python_stdout()
    _flush_c_stdio()
    try:
        saved = os.dup(STDOUT_FD)
    except OSError:  # no descriptor 1 (a daemon with stdout closed): nothing to protect
        yield
        return
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, STDOUT_FD)
        finally:
            os.close(null)
        yield
    finally:
        _flush_c_stdio()  # what the block left in C's buffer goes to the null device too
        os.dup2(saved, STDOUT_FD)
        os.close(saved)
