"""Standard output stays the program's own: what a C library prints inside
``quiet_native_stdout`` is dropped, what is printed before and after is kept (hadar/core/native_output.py).
Each case runs in a fresh interpreter whose stdout is a pipe (C's stdio buffers it fully there)."""

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


def test_c_level_printing_inside_is_dropped_and_around_it_kept():
    out = _stdout_of(
        "import ctypes; from hadar.core.native_output import quiet_native_stdout\n"
        "libc = ctypes.CDLL(None)\n"
        "print('py-before')\n"
        "libc.printf(b'c-before\\n')\n"
        "with quiet_native_stdout():\n"
        "    libc.printf(b'c-inside\\n')\n"
        "libc.printf(b'c-after\\n')\n"
        "print('py-after')\n"
    )
    lines = out.splitlines()
    assert "c-inside" not in lines
    assert {"py-before", "c-before", "c-after", "py-after"} <= set(lines), out
    assert lines.index("py-before") < lines.index("c-after")


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
    """The recorded program makes HiGHS print its debug line when solved as Sia builds it; Sia's
    solve runs HiGHS inside ``quiet_native_stdout``."""
    unguarded = _stdout_of(
        _SOLVE + "import hadar.core.native_output as q, contextlib\n"
        "import baselines.sia.ilp as ilp\n"
        "ilp.quiet_native_stdout = contextlib.nullcontext\n"
        "print(list(solve(cost, configs, np.array(d['capacity']))))\n"
    )
    guarded = _stdout_of(_SOLVE + "print(list(solve(cost, configs, np.array(d['capacity']))))\n")
    assert "HighsMipSolverData" in unguarded, "the recorded program no longer makes HiGHS print"
    assert "Highs" not in guarded
    assert guarded.splitlines()[-1] == unguarded.splitlines()[-1]  # the same solution
