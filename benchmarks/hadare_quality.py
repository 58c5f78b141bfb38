"""HadarE against Hadar on real training: held-out quality per job at equal samples and at equal
wall time, mean and 95 % interval over seeds (docs/hadar.md, "Quality on real training").

    # the runs (sequential, resumable: a finished run is kept, a killed one resumed)
    PYTHONPATH=. .venv/bin/python benchmarks/hadare_quality.py run --out runs/quality \
        [--mixes M-3,M-5] [--seeds 0,1,2,3,4] [--size small] [--round 30] \
        [--cluster cluster_configs/local-5node.yaml]
    # the table from the run directories (scores the checkpoints equal wall time needs)
    PYTHONPATH=. .venv/bin/python benchmarks/hadare_quality.py table runs/quality [--json F]

Every run keeps all its checkpoints (``--keep-checkpoints``), so a job's model can be scored at
any round after the fact; run directories are ``OUT/<mix>/seed-<s>/<policy>``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
POLICIES = ("hadare", "hadar")
KEEP_ALL = 100_000
"""``--keep-checkpoints`` of the runs: every round's checkpoint stays."""


def run_all(a: argparse.Namespace) -> int:
    base = Path(a.out)
    for seed in (int(s) for s in a.seeds.split(",")):
        for mix in a.mixes.split(","):
            for policy in a.policies.split(","):
                out = base / mix / f"seed-{seed}" / policy
                if (out / "summary.json").exists():
                    print(f"{out}: done", flush=True)
                    continue
                cmd = [sys.executable, "-m", "hadar", "run", "--no-live"]
                if (out / "run.json").exists():
                    cmd += ["--resume", str(out)]
                else:
                    out.parent.mkdir(parents=True, exist_ok=True)
                    cmd += [
                        "--out",
                        str(out),
                        "--cluster",
                        a.cluster,
                        "--workload",
                        mix,
                        "--size",
                        a.size,
                        "--policy",
                        policy,
                        "--seed",
                        str(seed),
                        "--round",
                        str(a.round_s),
                        "--keep-checkpoints",
                        str(KEEP_ALL),
                    ]
                t0 = time.monotonic()
                proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
                took = time.monotonic() - t0
                tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or [""]
                print(f"{out}: exit {proc.returncode} in {took:.0f} s: {tail[0]}", flush=True)
    return 0


def table(a: argparse.Namespace) -> int:
    from hadar.experiments.quality import build_table, load_runs, render_markdown, score_checkpoint

    base = Path(a.runs)
    cache_file = base / "scores.json"  # checkpoint -> held-out score, kept between calls
    cache: dict[str, float] = json.loads(cache_file.read_text()) if cache_file.is_file() else {}

    def scorer(spec: Mapping[str, Any], checkpoint: Path | None) -> float:
        key = f"{checkpoint}" if checkpoint is not None else json.dumps(dict(spec), sort_keys=True)
        if key not in cache:
            cache[key] = score_checkpoint(spec, checkpoint)
            cache_file.write_text(json.dumps(cache, indent=0) + "\n")
        return cache[key]

    tab = build_table(load_runs(base), scorer, worth=not a.no_worth)
    print(render_markdown(tab))
    if a.json:
        Path(a.json).write_text(json.dumps(tab.as_dict(), indent=1) + "\n")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="train every mix x seed x policy on local nodes")
    r.add_argument("--out", default="runs/quality")
    r.add_argument("--mixes", default="M-3,M-5")
    r.add_argument("--seeds", default="0,1,2,3,4")
    r.add_argument("--policies", default=",".join(POLICIES))
    r.add_argument("--size", default="small")
    r.add_argument("--round", dest="round_s", type=float, default=30.0)
    r.add_argument("--cluster", default=str(REPO / "cluster_configs" / "local-5node.yaml"))
    r.set_defaults(func=run_all)
    t = sub.add_parser("table", help="the quality table from the run directories")
    t.add_argument("runs")
    t.add_argument("--json", default=None, help="also write the table as JSON here")
    t.add_argument(
        "--no-worth",
        action="store_true",
        help="skip what HadarE's forked models are worth in Hadar's steps (scores every Hadar "
        "checkpoint of a forked job)",
    )
    t.set_defaults(func=table)
    a = ap.parse_args()
    rc: int = a.func(a)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
