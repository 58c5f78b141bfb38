"""``hadar run``: schedule and train a batch of jobs on real nodes, round by round."""

from __future__ import annotations

import argparse
import secrets
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from hadar.commands import Subparsers, argtypes, terminal
from hadar.commands.common import add_policy_opt_arg, estimates_note
from hadar.commands.options import (
    add_policy_arg,
    add_restart_penalty_arg,
    add_round_arg,
    add_size_arg,
    is_file,
    resolve_round,
)
from hadar.commands.resume_options import check_resume_options, track_given
from hadar.core.defaults import REAL_RUN, SIMULATED
from hadar.core.errors import HadarError, InputError
from hadar.core.extras import plots_missing_note, require_installed
from hadar.policy_options import parse_pairs
from hadar.runtime.config import RunConfig, load_config, save_config
from hadar.runtime.identity import (
    RunIdentity,
    check_same_run,
    defaults_changed_since,
    run_identity,
)

if TYPE_CHECKING:
    from hadar.core.jobs import Job
    from hadar.runtime.live import LiveView


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "run",
        help="train a workload on real nodes (local, SSH or AWS)",
        description="Run a workload on the nodes of a cluster file under a policy, round by round. "
        "RUNDIR gets events.jsonl, rounds.csv, jobs.csv, summary.json and charts; a "
        "killed run continues with --resume RUNDIR.",
    )
    p.add_argument(
        "--cluster",
        default="cluster_configs/local-3node.yaml",
        help="cluster file (default: %(default)s)",
    )
    p.add_argument(
        "--workload",
        default="M-3",
        help="M-1..M-12, elastic-2..elastic-4 (elastic jobs; cluster local-elastic) or a job "
        "file with training specs (default: %(default)s)",
    )
    add_size_arg(p, REAL_RUN.size)
    add_policy_arg(p, REAL_RUN.policy)
    add_policy_opt_arg(p)
    add_round_arg(p, REAL_RUN.round_s, old="--slot")
    p.add_argument(
        "--grace",
        dest="grace_s",
        type=argtypes.seconds(0, argtypes.DAY),
        default=REAL_RUN.grace_s,
        metavar="SECONDS",
        help="seconds past the round before a copy counts as hung",
    )
    p.add_argument(
        "--seed",
        type=argtypes.seed,
        default=0,
        help="workload and training seed (default: %(default)s)",
    )
    p.add_argument(
        "--threads",
        type=argtypes.count(1, 1024, "threads"),
        default=1,
        help="torch threads per worker (default: %(default)s)",
    )
    p.add_argument(
        "--out", type=argtypes.out_dir, help="run directory (default: runs/<policy>-<time>)"
    )
    p.add_argument(
        "--resume", metavar="RUNDIR", help="continue the run in RUNDIR after a crash or Ctrl-C"
    )
    p.add_argument(
        "--detach",
        action="store_true",
        help="run in the background (output in RUNDIR/run.log) and return; then hadar status, "
        "hadar logs RUNDIR -f, hadar stop RUNDIR",
    )
    p.add_argument(
        "--no-eval", action="store_true", help="do not score finished models on held-out data"
    )
    p.add_argument(
        "--no-live", action="store_true", help="one line per round instead of the live view"
    )
    p.add_argument(
        "--cold-workers",
        action="store_true",
        help="start a fresh worker process every round instead of forking a warm per-node server",
    )
    p.add_argument(
        "--trust-new-hosts", action="store_true", help="SSH: accept and record unknown host keys"
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="with --resume: continue although the cluster file changed while the run was stopped "
        "(a different workload, size or policy is never accepted)",
    )
    add_restart_penalty_arg(
        p,
        REAL_RUN.restart_penalty_s,
        unset=True,
        what="what policies assume a restart costs on real nodes, fixed for a run "
        f"(the simulator charges {SIMULATED.restart_penalty_s:g})",
    )
    p.add_argument(
        "--aggregation-overhead",
        dest="aggregation_overhead_s",
        type=argtypes.seconds(0, argtypes.DAY),
        default=None,
        metavar="SECONDS",
        help="what HadarE assumes averaging costs per round, fixed for a run, in seconds "
        f"(default: {REAL_RUN.aggregation_overhead_s})",
    )
    p.add_argument(
        "--keep-checkpoints",
        type=int,
        default=2,
        metavar="K",
        help="verified checkpoints kept per job, the latest and K-1 to roll back to (default: %(default)s)",
    )
    p.add_argument(
        "--stall-rounds",
        type=int,
        default=5,
        metavar="N",
        help="give up a job (or stop the run) after N rounds in a row without progress (default: %(default)s)",
    )
    p.add_argument(
        "--down-after",
        nargs="?",
        const=0,
        default=None,
        type=argtypes.count(0, 24 * 60, "minutes"),
        metavar="MINUTES",
        help="aws clusters: terminate the cluster's instances once the run ends (completed, "
        "stalled or failed; not after a clean stop, which you resume), or MINUTES after it "
        "ends if given (the idle cluster waits that long; Ctrl-C keeps it)",
    )
    p.add_argument(
        "--node-stream",
        default=None,
        metavar="FILE|slurm:PARTITION",
        help="CSV time,node,event, counted from the run's start: local nodes join and leave on "
        "its schedule; a leaving node's workers are killed (SIGKILL) and its copies preempted "
        "(docs/node-streams.md); or slurm:PARTITION on a slurm cluster: nodes join while Slurm "
        "shows them idle and leave when another Slurm job takes them (docs/slurm.md)",
    )
    p.add_argument(
        "--keep-node-dirs",
        action="store_true",
        help="keep the nodes' work directories after the run completes (deleted by default)",
    )
    p.set_defaults(func=run)
    track_given(p)


def run(args: argparse.Namespace) -> int:
    # torch is imported with the coordinator, once the options are checked: `hadar --help`, a
    # refused command line and the parent of --detach never pay for it (~1 s of CPU)
    require_installed("torch", "hadar run (real training)")
    if args.detach:
        from hadar.commands.background import detach

        rundir = Path(args.resume or args.out or default_rundir(args.policy))
        return detach(args.argv, rundir, resume=bool(args.resume))
    console = terminal.console()
    if args.resume:
        rundir = Path(args.resume)
        cfg = load_config(rundir)
        check_resume_options(args, cfg, rundir)
        _check_options_unchanged(args, cfg)
        recorded = cfg.identity
        if recorded is not None:  # before anything opens the run's state
            defaults = cfg.model_copy(update={"policy_options": {}}).all_policy_options()
            cfg = _keep_started_defaults(cfg, recorded, defaults, console)
            check_same_run(
                recorded,
                current_identity(cfg),
                str(rundir / "run.json"),
                cluster_file=cfg.cluster,
                workload=cfg.workload,
                force=args.force,
                defaults=defaults,
            )
        if args.keep_node_dirs:
            cfg = cfg.model_copy(update={"keep_node_dirs": True})
        if "stall_rounds" in getattr(args, "given", ()):  # this session's patience
            _at_least_one("--stall-rounds", args.stall_rounds)
            cfg = cfg.model_copy(update={"stall_rounds": args.stall_rounds})
        console.print(
            f"resuming {rundir} ({cfg.policy} on {cfg.cluster}, workload {cfg.workload})",
            markup=False,
        )
    else:
        _at_least_one("--keep-checkpoints", args.keep_checkpoints)
        _at_least_one("--stall-rounds", args.stall_rounds)
        rundir = Path(args.out or default_rundir(args.policy))
        if (rundir / "run.json").exists():
            raise InputError(
                f"--out: {rundir} already holds a run (use --resume {rundir} or another --out)"
            )
        round_note = resolve_round(args, [args.policy])
        if round_note:
            console.print(round_note, highlight=False, soft_wrap=True, markup=False)
        cfg = RunConfig(
            run_id=f"{rundir.name}-{secrets.token_hex(3)}"[-60:].lstrip(".-_") or "run",
            cluster=_absolute(args.cluster, "--cluster"),
            workload=_absolute(args.workload, "--workload"),
            size=args.size,
            policy=args.policy,
            policy_options=parse_pairs(args.policy_opt, policy=args.policy),
            round_s=args.round_s,
            grace_s=args.grace_s,
            seed=args.seed,
            threads=args.threads,
            evaluate=not args.no_eval,
            warm_workers=not args.cold_workers,
            started_at=time.time(),
            keep_checkpoints=args.keep_checkpoints,
            stall_rounds=args.stall_rounds,
            keep_node_dirs=args.keep_node_dirs,
            node_stream=_stream_value(args.node_stream),
            restart_penalty_s=_given(args.restart_penalty_s, REAL_RUN.restart_penalty_s),
            aggregation_overhead_s=_given(
                args.aggregation_overhead_s, REAL_RUN.aggregation_overhead_s
            ),
        )
    if args.down_after is not None:
        check_down_after(cfg.cluster)
    from hadar.runtime.run_inputs import accept_run_inputs

    inputs = accept_run_inputs(cfg)  # bad input is refused before torch is imported
    from hadar.runtime.coordinator import Coordinator, StopRequested
    from hadar.runtime.faults import RunStalledError
    from hadar.runtime.live import LiveView
    from hadar.runtime.outputs import write_report

    view: LiveView | None = None
    coordinator = Coordinator(rundir, cfg, provider_options=_provider_options(args), inputs=inputs)
    if not args.resume:
        try:
            coordinator.preflight()  # nodes and their GPUs match the cluster file, before run.json
        except HadarError:
            coordinator.close()
            raise
    identity = current_identity(cfg)  # recorded once the coordinator accepted the inputs
    if cfg.identity != identity:
        save_config(cfg.model_copy(update={"identity": identity}), rundir)
    if args.resume and coordinator.nothing_to_resume():  # all complete and scored: start nothing
        coordinator.close()
        summary = write_report(rundir)
        console.print(
            f"nothing to resume: {rundir} has finished ({summary['completed']}/{summary['jobs']} "
            f"jobs complete); its results are in {rundir}/ (summary.json, jobs.csv, rounds.csv; "
            f"hadar report {rundir} prints them)",
            markup=False,
            highlight=False,
        )
        _down_after(args, cfg, console)
        return 0
    note = estimates_note(coordinator.estimated_cells)
    if note:
        console.print(note, style="yellow", highlight=False, soft_wrap=True, markup=False)
    try:
        if not args.no_live:
            view = LiveView(coordinator.by_id, console)
        coordinator.view = view or _LineView(coordinator.by_id, console)
        coordinator.run()
    except StopRequested:
        _close(view)
        write_report(rundir)
        console.print(
            f"stopped cleanly{_by(coordinator.stop_signal)}; state saved. "
            f"Continue with: hadar run --resume {rundir}",
            markup=False,
        )
        return 128 + coordinator.stop_signal
    except (
        KeyboardInterrupt
    ) as exc:  # a second signal, or SIGTERM/SIGHUP (hadar.cli) before the run
        _close(view)
        signum = int(getattr(exc, "signum", coordinator.stop_signal))
        console.print(
            f"abandoned the current round{_by(signum)}; continue with: hadar run --resume {rundir}",
            markup=False,
        )
        return 128 + signum
    except RunStalledError:
        _close(view)
        write_report(rundir)  # what did finish is reported; the error line says what did not
        _down_after(args, cfg, console)
        raise
    except HadarError:
        _close(view)
        _down_after(args, cfg, console)
        raise
    _close(view)
    summary = write_report(rundir)
    print_run_summary(summary, rundir, console)
    _down_after(args, cfg, console)
    return 0


def _stream_value(value: str | None) -> str | None:
    """``--node-stream``: a live Slurm stream (``slurm:PARTITION``) as typed, a file made
    absolute."""
    if value is None or value.startswith("slurm:"):
        return value
    return _absolute(value, "--node-stream")


def _absolute(value: str, flag: str) -> str:
    """A file named relative to here, made absolute so that ``--resume`` works from any
    directory (run.json also records its digest); a bundled name (a cluster or a built-in
    workload) as it is. A path the system cannot look up is refused naming ``flag``."""
    return str(Path(value).absolute()) if is_file(value, flag) else value


def _at_least_one(flag: str, value: int) -> None:
    if value < 1:
        raise InputError(f"{flag}: must be at least 1 (got {value})")


def _by(signum: int) -> str:
    """`` (SIGTERM)`` for a stop by a signal other than Ctrl-C's SIGINT."""
    return "" if signum == signal.SIGINT else f" ({signal.Signals(signum).name})"


def check_down_after(cluster_file: str) -> None:
    """``--down-after`` terminates machines: only for a cluster whose provider launches them."""
    from hadar.clusters import load_cluster
    from hadar.providers.registry import provider_kind, provider_kinds

    provider = load_cluster(cluster_file).provider
    kind = provider_kind(provider)
    if kind is None or not kind.launches_nodes:
        launching = " or ".join(f"provider: {k.name}" for k in provider_kinds() if k.launches_nodes)
        raise InputError(
            f"--down-after: {cluster_file} is a provider: {provider} cluster; --down-after "
            f"terminates the instances of a {launching} cluster (pass that file to hadar run)"
        )


def _down_after(args: argparse.Namespace, cfg: RunConfig, console: Console) -> None:
    if args.down_after is not None:
        from hadar.commands.cluster import teardown

        teardown(cfg.cluster, args.down_after, console.print)


def default_rundir(policy: str) -> str:
    """``runs/<policy>-<YYYYmmdd-HHMMSS>``: where a run without ``--out`` goes."""
    return f"runs/{policy}-{time.strftime('%Y%m%d-%H%M%S')}"


def _given(value: float | None, default: float) -> float:
    return default if value is None else value


def _keep_started_defaults(
    cfg: RunConfig, recorded: RunIdentity, defaults: Mapping[str, str], console: Console
) -> RunConfig:
    """``cfg`` with the knobs whose default changed since the run started pinned to the values
    it started with (a resume makes the decisions the uninterrupted run would have made); ``cfg``
    unchanged where a recorded value cannot be given back (the identity check then refuses)."""
    pinned = defaults_changed_since(recorded, defaults, cfg.policy_options)
    if not pinned:
        return cfg
    kept = cfg.model_copy(update={"policy_options": {**cfg.policy_options, **pinned}})
    try:
        now = kept.all_policy_options()
    except InputError:
        return cfg
    if any(now.get(k) != v for k, v in recorded.policy_options.items() if k in now):
        return cfg
    console.print(
        f"resuming with the policy options this run started with: {_pairs(pinned)} "
        f"(their defaults changed since)",
        markup=False,
        highlight=False,
    )
    return kept


def _check_options_unchanged(args: argparse.Namespace, cfg: RunConfig) -> None:
    """Policy options are part of what a run is: ``--resume`` may repeat them, not change them."""
    for flag, value, recorded in (
        ("--restart-penalty", args.restart_penalty_s, cfg.restart_penalty_s),
        ("--aggregation-overhead", args.aggregation_overhead_s, cfg.aggregation_overhead_s),
    ):
        if value is not None and value != recorded:
            raise InputError(f"{flag}: {value:g} differs from this run's {recorded:g} ({FIXED})")
    given = parse_pairs(args.policy_opt, policy=cfg.policy)
    if given and given != cfg.policy_options:
        raise InputError(
            f"--policy-opt: {_pairs(given)} differs from this run's {_pairs(cfg.policy_options) or 'none'} "
            f"({FIXED})"
        )


FIXED = "policy options are fixed for a run; start a new run with --out to change them"


def _pairs(options: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(options.items()))


def current_identity(cfg: RunConfig) -> RunIdentity:
    """The identity of ``cfg``'s inputs as they are now."""
    return run_identity(
        cfg.cluster, cfg.workload, cfg.seed, cfg.size, cfg.policy, cfg.all_policy_options()
    )


def _provider_options(args: argparse.Namespace) -> dict[str, Any]:
    return {"trust_new_hosts": True} if getattr(args, "trust_new_hosts", False) else {}


def _close(view: LiveView | None) -> None:
    if view is not None:
        view.close()


def _LineView(jobs: dict[int, Job], console: Console) -> LiveView:  # noqa: N802 - a constructor
    """The live view without a live display (one line per round)."""
    from hadar.runtime.live import LiveView

    return LiveView(jobs, terminal.console(file=console.file, force_terminal=False))


METRIC_HINTS = {
    "accuracy": "held-out share right; 1 is perfect",
    "token_accuracy": "held-out target tokens right, teacher-forced; 1 is perfect, "
    "chance is about 1/vocabulary; the tiny/small demo models reach well under 1",
    "perplexity": "lower is better; 1 is perfect",
    "rmse": "lower is better, in the target's units",
    "mse": "lower is better",
}
"""What a good value of each held-out metric looks like (printed next to it)."""

JCT_TAIL_KEYS = ("median_jct_s", "p99_jct_s", "max_jct_s")


def print_run_summary(
    summary: Mapping[str, Any], rundir: Path, console: Console | None = None
) -> None:
    console = console or terminal.console()
    t = Table(  # the workload's path and the cluster's name come from files: shown as text
        title=terminal.cell(
            f"{summary['policy']} on {summary['cluster']} ({summary['workload']}, {summary['size']}): "
            f"{summary['completed']}/{summary['jobs']} jobs"
        )
    )
    t.add_column("metric")
    t.add_column("value", justify="right")

    def fmt(v: float | None, unit: str = "s") -> str:
        return "-" if v is None else f"{v:,.1f} {unit}"

    t.add_row("total time duration (TTD, wall clock)", fmt(summary["ttd_s"]))
    active = summary.get("active_s")
    if active is not None and summary["ttd_s"] is not None:
        t.add_row(
            "time in rounds (active_s; excludes stops)",
            f"{fmt(active)} ({fmt(summary['ttd_s'] - active)} outside rounds)",
        )
    t.add_row("average JCT", fmt(summary["avg_jct_s"]))
    t.add_row("median / p99 / max JCT", " / ".join(fmt(summary[k]) for k in JCT_TAIL_KEYS))
    t.add_row("average queueing delay", fmt(summary["avg_queueing_s"]))
    t.add_row("GPU resource utilisation (GRU, training)", f"{summary['gru']:.3f}")
    t.add_row("cluster (node) resource utilisation (CRU, training)", f"{summary['cru']:.3f}")
    if summary.get("startup_cru") is not None:
        t.add_row("node time in worker start-up (startup_cru)", f"{summary['startup_cru']:.3f}")
    t.add_row("rounds / failed copies", f"{summary['rounds']} / {summary['failures']}")
    t.add_row(
        "coordination per round (decide, stage, fetch, average)", fmt(summary["avg_coordination_s"])
    )
    t.add_row("non-training time per round (adds worker start-up)", fmt(summary["avg_overhead_s"]))
    for jid, q in summary["quality"].items():
        if q["metric"]:
            hint = METRIC_HINTS.get(q["metric"], "")
            value = "-" if q["value"] is None else f"{q['value']:.4f}"  # None: not a number
            t.add_row(f"job {jid} {q['metric']}" + (f" ({hint})" if hint else ""), value)
    console.print(t)
    no_plots = plots_missing_note("charts")
    if no_plots:
        console.print(no_plots, style="yellow", markup=False, highlight=False, soft_wrap=True)
    console.print(
        f"results in {rundir}/ (summary.json, jobs.csv, rounds.csv, events.jsonl{'' if no_plots else ', *.png'})",
        markup=False,
    )
