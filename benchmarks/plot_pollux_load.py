"""Figure: average JCT against relative job load (Pollux's Fig. 8a) from the Markdown tables
``bench_pollux_fidelity.py`` prints, with the official Pollux simulator's published averages
(``simulator/results-jobload/pollux-L/summary.json`` of its artifact) for the same workload.

    .venv/bin/python benchmarks/plot_pollux_load.py TABLE.md [TABLE.md ...] --workload 6 \
        --out docs/figures/pollux-load-sweep.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

OFFICIAL_POLLUX = {
    1: {0.5: 1060, 1.0: 2089, 1.5: 3856, 2.0: 6186},
    2: {0.5: 1826, 1.0: 3323, 1.5: 3381, 2.0: 4191},
    3: {0.5: 1311, 1.0: 2188, 1.5: 3300, 2.0: 5132},
    4: {0.5: 1498, 1.0: 2721, 1.5: 3903, 2.0: 5262},
    5: {0.5: 977, 1.0: 2674, 1.5: 4007, 2.0: 6591},
    6: {0.5: 1288, 1.0: 2446, 1.5: 3474, 2.0: 5105},
    7: {0.5: 2881, 1.0: 3616, 1.5: 3218, 2.0: 3836},
    8: {0.5: 1432, 1.0: 2952, 1.5: 4345, 2.0: 6010},
}
"""Average JCT (s) of the official Pollux simulator per workload and relative load (rounded)."""


def read_rows(paths: list[Path]) -> list[tuple[str, int, float, float]]:
    """(policy, workload, load, average JCT) from the tables' rows."""
    rows = []
    for path in paths:
        for line in path.read_text().splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) < 4 or not cells[1].isdigit():
                continue
            rows.append(
                (cells[0], int(cells[1]), float(cells[2]), float(cells[3].replace(",", "")))
            )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tables", nargs="+", type=Path)
    ap.add_argument("--workload", type=int, default=6)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in read_rows(args.tables) if r[1] == args.workload]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    official = OFFICIAL_POLLUX[args.workload]
    ax.plot(
        list(official),
        [v / 3600 for v in official.values()],
        "k--o",
        label="Pollux (official sim.)",
    )
    for policy in sorted({r[0] for r in rows}):
        pts = sorted((r[2], r[3]) for r in rows if r[0] == policy)
        ax.plot([p[0] for p in pts], [p[1] / 3600 for p in pts], "-o", label=f"{policy} (ours)")
    ax.set_xlabel("relative job load")
    ax.set_ylabel("average JCT (h)")
    ax.set_title(f"pollux-{args.workload} on pollux-64t4, 60 s rounds")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
