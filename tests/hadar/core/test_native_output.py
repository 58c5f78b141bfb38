"""Standard output stays the program's own: inside ``drop_solver_debug_lines`` a solver's debug
lines are dropped and everything else written to standard output (by C code or by another
thread) comes out, in order (hadar/core/native_output.py). Each case runs in a fresh interpreter
whose stdout is a pipe (C's stdio buffers it fully there)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
INSTANCE = Path(__file__).with_name("highs_prints.json")


def _stdout_of(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stderr == "", out.stderr
    return out.stdout


def test_a_debug_line_inside_is_dropped_and_the_rest_kept_in_order():
    out = _stdout_of(
        "import ctypes; from hadar.core.native_output import drop_solver_debug_lines\n"
        "libc = ctypes.CDLL(None)\n"
        "print('py-before', flush=True)\n"
        "libc.printf(b'c-before\\n')\n"
        "with drop_solver_debug_lines():\n"
        "    libc.printf(b'c-inside\\n')\n"
        "    libc.printf(b'HighsMipSolverData::transformNewIntegerFeasibleSolution x;\\n')\n"
        "    print('py-inside', flush=True)\n"
        "libc.printf(b'c-after\\n')\n"
        "libc.fflush(None)\n"
        "print('py-after')\n"
    )
    assert out.splitlines() == [
        "py-before",
        "c-before",
        "c-inside",
        "py-inside",
        "c-after",
        "py-after",
    ]


def test_what_another_thread_writes_meanwhile_is_not_lost():
    """A live display refreshes from its own thread; its output during a solve comes out after."""
    out = _stdout_of(
        "import threading, time; from hadar.core.native_output import drop_solver_debug_lines\n"
        "go = threading.Event()\n"
        "def writer():\n"
        "    go.wait()\n"
        "    for i in range(20):\n"
        "        print(f'frame {i}', flush=True)\n"
        "        time.sleep(0.005)\n"
        "t = threading.Thread(target=writer)\n"
        "t.start()\n"
        "with drop_solver_debug_lines():\n"
        "    go.set()\n"
        "    t.join()\n"
        "print('done')\n"
    )
    assert out.splitlines() == [f"frame {i}" for i in range(20)] + ["done"]


_SOLVE = (
    "import json, numpy as np\n"
    "from baselines.sia.ilp import Configuration, solve\n"
    f"d = json.load(open({str(INSTANCE)!r}))\n"
    "sizes = sorted(set(d['gpus']))\n"
    "configs = tuple(Configuration(0, 1, g) for g in sizes)\n"
    "cost = np.full((d['jobs'], len(sizes)), np.inf)\n"
    "for c, j, g in zip(d['cost'], d['job'], d['gpus']):\n"
    "    cost[j, sizes.index(g)] = c\n"
)


def test_a_sia_integer_program_that_makes_highs_print_prints_nothing():
    """The recorded program (``highs_prints.json``) makes HiGHS print its debug line when solved
    as Sia builds it; Sia's solve drops it."""
    unguarded = _stdout_of(
        _SOLVE + "import contextlib\n"
        "import baselines.sia.ilp as ilp\n"
        "ilp.drop_solver_debug_lines = contextlib.nullcontext\n"
        "print(list(solve(cost, configs, np.array(d['capacity']))))\n"
    )
    guarded = _stdout_of(_SOLVE + "print(list(solve(cost, configs, np.array(d['capacity']))))\n")
    assert "HighsMipSolverData" in unguarded, "the recorded program no longer makes HiGHS print"
    assert "Highs" not in guarded
    assert guarded.splitlines() == unguarded.splitlines()[-1:]  # the same solution, nothing else
