"""Regenerate the result tables the docs quote from the commands that print them, so they never
go stale by hand (issue 30). Each block sits between

    <!-- generated: NAME (scripts/doc_tables.py) -->
    ...
    <!-- end generated: NAME -->

in a doc; this script runs the command behind every NAME once and rewrites the blocks.

    .venv/bin/python scripts/doc_tables.py           # rewrite the blocks
    .venv/bin/python scripts/doc_tables.py --check   # exit 1 naming each stale block

``tests/cli/test_doc_tables.py`` runs ``--check`` (a slow test: the physical grid takes ~20 s
on two cores).
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
    line, which varies) and HadarE TTD / Hadar TTD per cluster, mix and slot from results.csv."""
    out = tmp / "physical"
    printed = _hadar("experiment", "physical", "--out", str(out)).splitlines()
    cut = next((i for i, line in enumerate(printed) if " cells simulated in " in line), None)
    tables = "\n".join(line.rstrip() for line in printed[1:cut])  # line 0 names the process count
    with (out / "results.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    ttd = {
        (r["cluster"], r["mix"], r["policy"], float(r["slot_s"])): float(r["ttd_s"]) for r in rows
    }
    clusters = list(dict.fromkeys(r["cluster"] for r in rows))
    mixes = list(dict.fromkeys(r["mix"] for r in rows))
    slots = sorted({float(r["slot_s"]) for r in rows})
    ratio = []
    for c in clusters:
        ratio.append(f"| {c} | " + " | ".join(f"{s:g} s" for s in slots) + " |")
        ratio.append("|---|" + "---|" * len(slots))
        for m in mixes:
            cells = []
            for s in slots:
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


GENERATORS: dict[str, Callable[[Path], dict[str, str]]] = {"physical": physical}
DOCS = ("docs/experiments.md", "docs/baselines.md")


def blocks() -> dict[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        out: dict[str, str] = {}
        for make in GENERATORS.values():
            out.update(make(Path(tmp)))
        return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="report stale blocks, change nothing")
    args = p.parse_args(argv)
    fresh = blocks()
    stale = []
    seen = set()
    for doc in DOCS:
        path = ROOT / doc
        text = path.read_text()

        def replace(m: re.Match[str], doc: str = doc) -> str:
            name = m.group("name")
            seen.add(name)
            if name not in fresh:
                raise SystemExit(f"{doc}: no generator for block {name!r}")
            if m.group("body") != fresh[name]:
                stale.append(f"{doc}: {name}")
            return m.group(1) + fresh[name] + m.group(4)

        new = BLOCK.sub(replace, text)
        if not args.check and new != text:
            path.write_text(new)
    unused = sorted(set(fresh) - seen)
    if unused:
        print(f"blocks no doc holds: {', '.join(unused)}")
        return 1
    if args.check and stale:
        print("stale (run: .venv/bin/python scripts/doc_tables.py): " + "; ".join(stale))
        return 1
    print("up to date" if args.check else f"wrote {len(seen)} blocks")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
