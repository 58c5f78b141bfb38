"""``hadar run``: schedule and train a batch of jobs on real nodes, round by round."""

from __future__ import annotations

import argparse
import secrets
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from hadar.commands import argtypes
from hadar.commands.common import add_policy_opt_arg, estimates_note
from hadar.errors import HadarError, InputError
from hadar.extras import plots_missing_note, require
from hadar.policy_options import parse_pairs
from hadar.runtime.config import RunConfig, RuntimeKnobs, load_config, save_config
from hadar.workloads.mixes import SIZES


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="train a workload on real nodes (local, SSH or AWS)",
                       description="Run a workload on the nodes of a cluster file under a policy, round by round. "
                                   "RUNDIR gets events.jsonl, rounds.csv, jobs.csv, summary.json and charts; a "
                                   "killed run continues with --resume RUNDIR.")
    p.add_argument("--cluster", default="cluster_configs/local-3node.yaml", help="cluster file (default: %(default)s)")
    p.add_argument("--workload", default="M-3", help="M-1..M-12 or a job file with training specs (default: %(default)s)")
    p.add_argument("--size", default="tiny", choices=SIZES, help="model/workload size (default: %(default)s)")
    p.add_argument("--policy", default="hadare", help="hadare, hadar, gavel, ... (default: %(default)s)")
    add_policy_opt_arg(p)
    p.add_argument("--slot", type=argtypes.seconds(0, argtypes.DAY, lo_open=True), default=30.0,
                   help="round length in seconds (default: %(default)s)")
    p.add_argument("--grace", type=argtypes.seconds(0, argtypes.DAY), default=20.0,
                   help="seconds past the slot before a copy counts as hung")
    p.add_argument("--seed", type=argtypes.seed, default=0)
    p.add_argument("--threads", type=argtypes.count(1, 1024, "threads"), default=1,
                   help="torch threads per worker (default: %(default)s)")
    p.add_argument("--out", type=argtypes.out_dir, help="run directory (default: runs/<policy>-<time>)")
    p.add_argument("--resume", metavar="RUNDIR", help="continue the run in RUNDIR after a crash or Ctrl-C")
    p.add_argument("--no-eval", action="store_true", help="do not score finished models on held-out data")
    p.add_argument("--no-live", action="store_true", help="one line per round instead of the live view")
    p.add_argument("--cold-workers", action="store_true",
                   help="start a fresh worker process every round instead of forking a warm per-node server")
    p.add_argument("--trust-new-hosts", action="store_true", help="SSH: accept and record unknown host keys")
    p.add_argument("--restart-penalty", type=argtypes.seconds(0, argtypes.DAY), default=RuntimeKnobs.restart_penalty_s,
                   help="what policies assume a restart costs, s (default: %(default)s)")
    p.add_argument("--aggregation-overhead", type=argtypes.seconds(0, argtypes.DAY),
                   default=RuntimeKnobs.aggregation_overhead_s,
                   help="what HadarE assumes averaging costs per round, s (default: %(default)s)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # imported here: they bring torch, which `hadar --help` and the other commands do not need
    require("torch", "hadar run (real training)")
    from hadar.runtime.coordinator import Coordinator, StopRequested
    from hadar.runtime.live import LiveView
    from hadar.runtime.outputs import write_report

    console = Console()
    if args.resume:
        rundir = Path(args.resume)
        cfg = load_config(rundir)
        console.print(f"resuming {rundir} ({cfg.policy} on {cfg.cluster}, workload {cfg.workload})")
    else:
        if args.slot <= 0:
            raise InputError(f"--slot: must be positive (got {args.slot:g})")
        rundir = Path(args.out or f"runs/{args.policy}-{time.strftime('%Y%m%d-%H%M%S')}")
        if (rundir / "run.json").exists():
            raise InputError(f"--out: {rundir} already holds a run (use --resume {rundir} or another --out)")
        cfg = RunConfig(run_id=f"{rundir.name}-{secrets.token_hex(3)}"[-60:].lstrip(".-_") or "run",
                        cluster=args.cluster, workload=args.workload, size=args.size, policy=args.policy,
                        policy_options=parse_pairs(args.policy_opt),
                        slot_s=args.slot, grace_s=args.grace, seed=args.seed, threads=args.threads,
                        evaluate=not args.no_eval, warm_workers=not args.cold_workers, started_at=time.time())
    knobs = RuntimeKnobs(args.restart_penalty, args.aggregation_overhead)
    view = None
    coordinator = Coordinator(rundir, cfg, provider_options=_provider_options(args), knobs=knobs)
    if not args.resume:
        try:
            coordinator.preflight()  # nodes and their GPUs match the cluster file, before run.json
        except HadarError:
            coordinator.close()
            raise
        save_config(cfg, rundir)
    note = estimates_note(coordinator.estimated_cells)
    if note:
        console.print(note, style="yellow", highlight=False)
    try:
        if not args.no_live:
            view = LiveView(coordinator.by_id, console)
        coordinator.view = view or _LineView(coordinator.by_id, console)
        coordinator.run()
    except StopRequested:
        _close(view)
        write_report(rundir)
        console.print(f"stopped cleanly; state saved. Continue with: hadar run --resume {rundir}")
        return 130
    except KeyboardInterrupt:
        _close(view)
        console.print(f"abandoned the current round; continue with: hadar run --resume {rundir}")
        return 130
    except HadarError:
        _close(view)
        raise
    _close(view)
    summary = write_report(rundir)
    print_run_summary(summary, rundir, console)
    return 0


def _provider_options(args: argparse.Namespace) -> dict:
    return {"trust_new_hosts": True} if getattr(args, "trust_new_hosts", False) else {}


def _close(view) -> None:
    if view is not None:
        view.close()


def _LineView(jobs, console):  # noqa: N802 - a constructor
    """The live view without a live display (one line per round)."""
    from hadar.runtime.live import LiveView

    return LiveView(jobs, Console(file=console.file, force_terminal=False))


def print_run_summary(summary: dict, rundir: Path, console: Console | None = None) -> None:
    console = console or Console()
    t = Table(title=f"{summary['policy']} on {summary['cluster']} ({summary['workload']}, {summary['size']}): "
                    f"{summary['completed']}/{summary['jobs']} jobs")
    t.add_column("metric")
    t.add_column("value", justify="right")
    fmt = lambda v, unit="s": "-" if v is None else f"{v:,.1f} {unit}"  # noqa: E731
    t.add_row("total time duration (TTD)", fmt(summary["ttd_s"]))
    t.add_row("average JCT", fmt(summary["avg_jct_s"]))
    t.add_row("cluster resource utilisation (CRU)", f"{summary['cru']:.3f}")
    t.add_row("rounds / failed copies", f"{summary['rounds']} / {summary['failures']}")
    t.add_row("coordination per round (decide, stage, fetch, average)", fmt(summary["avg_coordination_s"]))
    t.add_row("non-training time per round (adds worker start-up)", fmt(summary["avg_overhead_s"]))
    for jid, q in summary["quality"].items():
        if q["metric"]:
            t.add_row(f"job {jid} {q['metric']}", f"{q['value']:.4f}")
    console.print(t)
    no_plots = plots_missing_note("charts")
    if no_plots:
        console.print(no_plots, style="yellow", markup=False, highlight=False, soft_wrap=True)
    console.print(f"results in {rundir}/ (summary.json, jobs.csv, rounds.csv, events.jsonl{'' if no_plots else ', *.png'})")
