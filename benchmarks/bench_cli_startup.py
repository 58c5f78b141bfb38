"""Start-up cost of the ``hadar`` command: each command line in a fresh interpreter, as users and
the end-to-end tests start it, timed by its CPU seconds (user + system, robust on a shared
machine) and its wall seconds (docs/results.md, "CLI start-up").

    .venv/bin/python benchmarks/bench_cli_startup.py [--repeat 5] [--root DIR]

``--root`` times another checkout's sources with this interpreter (e.g. a ``git worktree`` of an
older commit, for a before/after table); by default this one. Prints a Markdown table of medians
with the load average, since wall time depends on what else runs, and whether the sources have
byte code (``scripts/test`` compiles them; with PYTHONDONTWRITEBYTECODE set nothing else does).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS: dict[str, list[str]] = {
    "hadar --help (every command's parser)": ["--help"],
    "hadar simulate --help": ["simulate", "--help"],
    "hadar run --help": ["run", "--help"],
    "hadar compare --help": ["compare", "--help"],
    "hadar simulate, bad input (exit 2)": ["simulate", "--workload", "M-99"],
    "hadar simulate philly-8 (whole run)": ["simulate", "--workload", "philly-8", "--no-progress"],
    "hadar run, refused (nothing to resume)": ["run", "--resume", "nowhere"],
    "hadar run, refused (a job's spec)": [
        *("run", "--cluster", "local-3node", "--workload", "bad-spec.yaml", "--out", "run"),
        "--no-live",
    ],
}
"""What is timed: label -> arguments of ``python -m hadar``."""
BAD_SPEC = (
    "jobs:\n- {id: 0, type: MM, gpus: 1, steps: 20,\n"
    "   spec: {model: MM, size: tiny, data: synthetic, batch_size: -4, lr: 0.001}}\n"
)
"""A job file whose training spec a worker would reject (``hadar run`` refuses it, exit 2)."""


def timed(root: Path, args: list[str], cwd: str) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of ``python -m hadar ARGS`` with ``root``'s sources."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "hadar", *args],
        capture_output=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(root)},
        check=False,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    args = p.parse_args()
    root = args.root.resolve()
    compiled = any((root / "hadar" / "__pycache__").glob("cli.*.pyc"))
    print(
        f"sources: {root} ({'byte-compiled' if compiled else 'no byte code'}); "
        f"load average {os.getloadavg()[0]:.1f}; {args.repeat} repeats\n"
    )
    print("| command | CPU s (median) | wall s (median) |")
    print("|---|---:|---:|")
    with tempfile.TemporaryDirectory() as cwd:
        Path(cwd, "bad-spec.yaml").write_text(BAD_SPEC)
        for label, argv in COMMANDS.items():
            runs = [timed(root, argv, cwd) for _ in range(args.repeat)]
            cpu = statistics.median(c for c, _ in runs)
            wall = statistics.median(w for _, w in runs)
            print(f"| {label} | {cpu:.2f} | {wall:.2f} |")


if __name__ == "__main__":
    main()
