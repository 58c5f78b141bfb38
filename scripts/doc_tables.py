"""Regenerate the result tables the docs quote from the commands that print them, so they never
go stale by hand. Each block sits between

    <!-- generated: NAME (scripts/doc_tables.py) -->
    ...
    <!-- end generated: NAME -->

in a doc; this script runs the command behind every NAME once and rewrites the blocks.

    .venv/bin/python scripts/doc_tables.py                      # rewrite the blocks
    .venv/bin/python scripts/doc_tables.py --check              # exit 1 naming each stale block
    .venv/bin/python scripts/doc_tables.py --check --only physical   # one generator's blocks

``tests/docs/test_doc_tables.py`` runs ``--check --only NAME`` for each generator (slow tests,
one per generator so that they run side by side: the physical grid, two philly-480 comparisons
and the two reproductions on the physical mixes take some 4 CPU minutes in all, the physical grid
about 170 CPU s of it).
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WIDTH = "200"
"""Columns the commands print at (wide enough that no table folds)."""
BLOCK = re.compile(
    r"(<!-- generated: (?P<name>[\w-]+) \(scripts/doc_tables\.py\) -->\n)(?P<body>.*?)"
    r"(<!-- end generated: (?P=name) -->)",
    re.DOTALL,
)


PROGRESS = re.compile(r"  \[\d+/\d+\] ")
"""A line ``hadar experiment physical`` prints as each cell finishes."""


def _hadar(*args: str) -> str:
    res = subprocess.run(
        [sys.executable, "-m", "hadar", *args],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": WIDTH},
    )
    return res.stdout


def physical(tmp: Path) -> dict[str, str]:
    """``hadar experiment physical`` at its defaults: the printed tables (without the timing
    lines, which vary: a line per finished cell and the total) and HadarE TTD / Hadar TTD per
    cluster, mix and slot from results.csv."""
    out = tmp / "physical"
    printed = [
        line
        for line in _hadar("experiment", "physical", "--out", str(out)).splitlines()
        if not PROGRESS.match(line)
    ]
    cut = next((i for i, line in enumerate(printed) if " cells simulated in " in line), None)
    tables = "\n".join(line.rstrip() for line in printed[1:cut])  # line 0 names the process count
    with (out / "results.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    ttd = {
        (r["cluster"], r["mix"], r["policy"], float(r["round_s"])): float(r["ttd_s"]) for r in rows
    }
    clusters = list(dict.fromkeys(r["cluster"] for r in rows))
    mixes = list(dict.fromkeys(r["mix"] for r in rows))
    rounds_s = sorted({float(r["round_s"]) for r in rows})
    ratio = []
    for c in clusters:
        ratio.append(f"| {c} | " + " | ".join(f"{s:g} s" for s in rounds_s) + " |")
        ratio.append("|---|" + "---|" * len(rounds_s))
        for m in mixes:
            cells = []
            for s in rounds_s:
                e, h = ttd.get((c, m, "hadare", s)), ttd.get((c, m, "hadar", s))
                cells.append(
                    "-" if e is None or h is None else f"{e:,.0f} / {h:,.0f} = {e / h:.3f}"
                )
            ratio.append(f"| {m} | " + " | ".join(cells) + " |")
        ratio.append("")
    return {
        "experiment-physical-tables": f"```\n{tables}\n```\n",
        "experiment-physical-ttd-ratio": "\n".join(ratio),
    }


def _h(v: float) -> str:
    return f"{v / 3600:.2f} h"


def _compare_table(rows: list[dict], gavel: bool) -> str:
    """One markdown table of ``hadar compare``'s rows: TTD (ratio in bold), JCTs with ratios
    to the reference, p99, GRU (Gavel's utilisation in Gavel-compatible mode), restarts."""
    last = "GRU = Gavel util" if gavel else "GRU | restarts/job"
    head = "Gavel-compatible" if gavel else "normal mode"
    lines = [
        f"| {head} | TTD | avg JCT | median JCT | p99 JCT | {last} |",
        "| --- | --- | --- | --- | --- | --- |" + ("" if gavel else " --- |"),
    ]
    for i, r in enumerate(rows):

        def ratio(key: str, bold: bool = False, r: dict = r, i: int = i) -> str:
            x = r.get(f"{key}_ratio")
            if i == 0 or x is None:
                return ""
            return f" (**{x:.2f}x**)" if bold else f" ({x:.2f}x)"

        util = r["gpu_util_gavel"] if gavel else r["gru"]
        cells = [
            r["policy"],
            _h(r["ttd_s"]) + ratio("ttd_s", bold=True),
            _h(r["avg_jct_s"]) + ratio("avg_jct_s"),
            _h(r["median_jct_s"]) + ratio("median_jct_s"),
            _h(r["p99_jct_s"]),
            f"{100 * util:.1f} %",
        ]
        if not gavel:
            cells.append(f"{r['restarts_per_job']:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def baselines(tmp: Path) -> dict[str, str]:
    """``hadar compare`` on philly-480 / sim-60gpu (seed 0), normal and Gavel-compatible (the
    decision-time figure is skipped: it is measured, not a result of the runs)."""
    import json

    out = {}
    for mode, extra in (("normal", []), ("gavel", ["--gavel-compatible"])):
        d = tmp / f"compare-{mode}"
        _hadar(
            "compare", "--workload", "philly-480", "--decision-sizes", "", "--out", str(d), *extra
        )
        rows = json.loads((d / "compare.json").read_text())["policies"]
        out[f"baselines-philly-480-{mode}"] = _compare_table(rows, gavel=mode == "gavel")
    return out


REPRODUCED_HERE = ("hadar", "hadare")
"""The systems whose whole ``hadar reproduce`` run is quick enough to regenerate here (the physical
mixes, under a minute each); the others' full runs take up to 21 minutes and are quoted by hand."""


def reproductions(tmp: Path) -> dict[str, str]:
    """``hadar reproduce NAME`` (the full run): its ``reproduce.md``, the set-up line, the table
    and the notes, as the doc's headline table of that system."""
    out = {}
    for name in REPRODUCED_HERE:
        d = tmp / f"reproduce-{name}"
        _hadar("reproduce", name, "--out", str(d))
        out[f"reproduce-{name}"] = (d / "reproduce.md").read_text()
    return out


GENERATORS: dict[str, Callable[[Path], dict[str, str]]] = {
    "physical": physical,
    "baselines": baselines,
    "reproductions": reproductions,
}
BLOCKS: dict[str, tuple[str, ...]] = {
    "physical": ("experiment-physical-tables", "experiment-physical-ttd-ratio"),
    "baselines": ("baselines-philly-480-normal", "baselines-philly-480-gavel"),
    "reproductions": tuple(f"reproduce-{name}" for name in REPRODUCED_HERE),
}
"""The blocks each generator makes (checked when it runs): a block is known without running
its generator, so one generator's blocks can be checked alone."""
DOCS = ("docs/experiments.md", "docs/baselines.md", "docs/results.md")


def blocks(names: tuple[str, ...] = tuple(GENERATORS)) -> dict[str, str]:
    """The blocks of generators ``names``, each generator run once."""
    with tempfile.TemporaryDirectory() as tmp:
        out: dict[str, str] = {}
        for name in names:
            made = GENERATORS[name](Path(tmp))
            if tuple(made) != BLOCKS[name]:
                raise SystemExit(f"generator {name} made {tuple(made)}, not {BLOCKS[name]}")
            out.update(made)
        return out


def doc_blocks() -> dict[str, str]:
    """Each generated block the docs hold: name -> the doc holding it."""
    held: dict[str, str] = {}
    for doc in DOCS:
        for m in BLOCK.finditer((ROOT / doc).read_text()):
            held.setdefault(m.group("name"), doc)
    return held


def unmatched() -> list[str]:
    """Blocks a doc holds that no generator makes, and blocks made that no doc holds."""
    held = doc_blocks()
    made = {b for names in BLOCKS.values() for b in names}
    return [
        f"{doc}: no generator for block {name!r}" for name, doc in held.items() if name not in made
    ] + [f"blocks no doc holds: {name}" for name in sorted(made - set(held))]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="report stale blocks, change nothing")
    p.add_argument(
        "--only",
        action="append",
        choices=tuple(GENERATORS),
        metavar="GENERATOR",
        help=f"run only this generator and rewrite or check its blocks (repeatable; one of "
        f"{', '.join(GENERATORS)}; default: all)",
    )
    args = p.parse_args(argv)
    problems = unmatched()
    if problems:
        print("; ".join(problems))
        return 1
    fresh = blocks(tuple(dict.fromkeys(args.only)) if args.only else tuple(GENERATORS))
    stale = []
    seen = set()
    for doc in DOCS:
        path = ROOT / doc
        text = path.read_text()

        def replace(m: re.Match[str], doc: str = doc) -> str:
            name = m.group("name")
            if name not in fresh:  # another generator's block
                return m.group(0)
            seen.add(name)
            if m.group("body") != fresh[name]:
                stale.append(f"{doc}: {name}")
            return m.group(1) + fresh[name] + m.group(4)

        new = BLOCK.sub(replace, text)
        if not args.check and new != text:
            path.write_text(new)
    if args.check and stale:
        print("stale (run: .venv/bin/python scripts/doc_tables.py): " + "; ".join(stale))
        return 1
    print("up to date" if args.check else f"wrote {len(seen)} blocks")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
