"""``hadar cluster up|down|status --config FILE``: EC2 instances for a ``provider: aws`` cluster.

``up`` shows the instance types, count and hourly price it is about to launch (from a bundled,
dated price table: :mod:`hadar.providers.aws.prices`) and asks (``-y`` skips the question; ``--dry-run``
asks EC2 whether the launch would succeed and launches nothing), then launches one instance per
node (skipping nodes that already have one), waits until they run and answer on SSH, runs
``aws.setup`` on each, and writes the SSH cluster file; ``down``
asks, then terminates exactly the instances tagged for the cluster (a second ``down`` has
nothing to do; ``-y`` skips the question); ``status`` lists them."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hadar.clusters import load_cluster
from hadar.commands import Subparsers, argtypes
from hadar.commands.options import add_out_file_arg
from hadar.core.errors import InputError

if TYPE_CHECKING:
    from rich.console import Console

    from hadar.core.cluster import Node
    from hadar.providers.aws.provider import AwsCluster, Instance


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "cluster", help="launch, list or terminate the EC2 instances of an aws cluster"
    )
    actions = p.add_subparsers(dest="cluster_action", metavar="ACTION", required=True)

    up = actions.add_parser(
        "up",
        help="launch one instance per node and write the SSH cluster file",
        description="Show the instance types, count and hourly price of what would be launched "
        "(bundled on-demand price table, dated; it says when stale) and ask (unless -y; "
        "without a terminal -y is required). Then launch one EC2 instance per node of the "
        "cluster file that has none (its instance_type, with the aws section's AMI, key pair, "
        "security groups, subnet and tags), wait until they are running and reachable over "
        "SSH, and write a provider: ssh cluster file. --dry-run asks EC2 (DryRun) instead.",
    )
    _config_arg(up)
    up.add_argument(
        "-y", "--yes", action="store_true", help="launch without asking for confirmation"
    )
    up.add_argument(
        "--dry-run",
        action="store_true",
        help="check with EC2's DryRun that the launch would succeed (permissions, AMI, types, "
        "key pair, network); launch nothing",
    )
    add_out_file_arg(up, "SSH cluster file to write (default: ./<cluster name>-ssh.yaml)")
    up.add_argument("--no-wait-ssh", action="store_true", help="do not wait for SSH to answer")
    up.add_argument(
        "--ssh-wait-timeout",
        dest="ssh_wait_timeout_s",
        type=argtypes.seconds(0, 86400, lo_open=True),
        metavar="S",
        help="seconds to wait for SSH (default: aws.ssh_wait_timeout_s)",
    )
    up.set_defaults(func=run_up)

    down = actions.add_parser(
        "down",
        help="terminate the instances tagged for this cluster (asks first)",
        description="List the live instances tagged for the cluster, ask for confirmation "
        "(unless -y), terminate them and wait until EC2 reports them terminated. Without a "
        "terminal on stdin, -y is required.",
    )
    _config_arg(down)
    down.add_argument(
        "-y", "--yes", action="store_true", help="terminate without asking for confirmation"
    )
    down.add_argument(
        "--no-wait", action="store_true", help="do not wait until the instances are terminated"
    )
    down.set_defaults(func=run_down)

    status = actions.add_parser(
        "status",
        help="list the instances tagged for this cluster",
        description="List the EC2 instances tagged hadar-cluster=<name> for the cluster file "
        "(live ones; --all adds terminated ones), with type, state and addresses.",
    )
    _config_arg(status)
    status.add_argument("--all", action="store_true", help="include terminated instances")
    status.set_defaults(func=run_status)


def _config_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        "--cluster",
        dest="config",
        required=True,
        metavar="FILE",
        help="cluster YAML with provider: aws and an aws section",
    )


def _aws_cluster(path: str) -> AwsCluster:
    """The cluster's lifecycle; ``hadar cluster``'s prices, dry run and SSH file are EC2's."""
    from hadar.providers.base import make_lifecycle

    lifecycle = make_lifecycle(load_cluster(path), "hadar cluster")  # names a missing extra
    from hadar.providers.aws.provider import AwsCluster

    if not isinstance(lifecycle, AwsCluster):
        raise InputError(f"{path}: provider: hadar cluster up|down|status manage EC2 instances")
    return lifecycle


def _console() -> Console:
    import sys

    from rich.console import Console

    return Console(width=None if sys.stdout.isatty() else 200, highlight=False)


def _print_instances(console: Console, title: str, instances: Sequence[Instance]) -> None:
    from rich.table import Table

    table = Table(title=title)
    for col in ("node", "instance", "type", "state", "public ip", "private ip"):
        table.add_column(col)
    for i in instances:
        table.add_row(
            i.node, i.instance_id, i.instance_type, i.state, i.public_ip or "-", i.private_ip or "-"
        )
    console.print(table)


def print_cost(console: Console, aws: AwsCluster, nodes: Sequence[Node]) -> float:
    """The table of what launching ``nodes`` costs per hour; returns the known total."""
    from rich.table import Table

    from hadar.providers.aws.prices import estimate

    s = aws.settings
    cost = estimate(
        [str(aws.instance_types[n.name]) for n in nodes],
        region=s.region,
        spot=s.spot,
        spot_max_price=s.spot_max_price,
    )
    table = Table(title=f"{aws.cluster.name}: {len(nodes)} instances to launch")
    for col in ("instance type", "count", "USD/hour each", "USD/hour"):
        table.add_column(col, justify="left" if col == "instance type" else "right")
    for line in cost.lines:
        each = "?" if line.usd_per_hour is None else f"{line.usd_per_hour:.3f}"
        total = "?" if line.total is None else f"{line.total:.2f}"
        table.add_row(
            line.instance_type + (" (spot)" if s.spot else ""), str(line.count), each, total
        )
    table.add_row("total", str(len(nodes)), "", f"{cost.usd_per_hour:.2f}")
    console.print(table)
    for note in cost.notes:
        console.print(f"note: {note}", style="yellow")
    return cost.usd_per_hour


def run_up(args: argparse.Namespace) -> int:
    aws = _aws_cluster(args.config)
    console = _console()
    name = aws.cluster.name
    out = Path(args.out) if args.out else Path(f"{name}-ssh.yaml")
    missing, have = aws.to_launch()
    for node, inst in have.items():
        console.print(f"{node}: already has {inst.instance_id} ({inst.state})")
    if missing:
        hourly = print_cost(console, aws, missing)
        if args.dry_run:
            aws.dry_run(missing)
            console.print(
                f"dry run: EC2 would launch all {len(missing)} instances (DryRun accepted "
                "every request); nothing launched"
            )
            return 0
        question = (
            f"launch {len(missing)} instances of cluster {name} (about {hourly:.2f} USD/hour)?"
        )
        if not confirm(question, args.yes, "launch"):
            console.print("nothing launched")
            return 1
    elif args.dry_run:
        console.print(f"dry run: every node of {name} already has an instance; nothing to launch")
        return 0
    instances = aws.up(wait_ssh=False, log=console.print)
    if not args.no_wait_ssh:
        console.print(f"waiting for SSH on {len(instances)} instances...")
        aws.wait_ssh(instances, args.ssh_wait_timeout_s)
        if aws.settings.setup:
            console.print(f"running aws.setup on {len(instances)} instances...")
            aws.run_setup(instances, log=console.print)
    elif aws.settings.setup:
        console.print("aws.setup not run (--no-wait-ssh): run `hadar cluster up` again to run it")
    aws.write_ssh_cluster(out, instances)
    _print_instances(console, f"{name}: {len(instances)} instances running", instances)
    console.print(
        f"wrote SSH cluster file {out} ({len(instances)} nodes); check the nodes with "
        f"hadar nodes check --cluster {args.config} (or {out}); they cost money until "
        f"hadar cluster down --config {args.config} (or hadar run --down-after)"
    )
    return 0


def confirm(question: str, assume_yes: bool, verb: str = "terminate") -> bool:
    """Ask on the terminal; without one (and without ``-y``) refuse with one line (exit 2)."""
    import sys

    if assume_yes:
        return True
    if not sys.stdin.isatty():
        raise InputError(
            f"{question.rstrip('?')}: refusing without confirmation "
            f"(stdin is not a terminal); pass -y to {verb}"
        )
    try:
        answer = input(f"{question} [y/N] ").strip().lower()
    except EOFError:
        return False
    return answer in ("y", "yes")


def run_down(args: argparse.Namespace) -> int:
    from hadar.providers.aws.provider import ACTIVE_STATES

    aws = _aws_cluster(args.config)
    console = _console()
    name = aws.cluster.name
    live = aws.instances(ACTIVE_STATES)
    if live:
        _print_instances(console, f"{name}: {len(live)} instances to terminate", live)
        question = f"terminate {len(live)} instances of cluster {name}?"
        if not confirm(question, args.yes):
            console.print("nothing terminated")
            return 1
    ids = aws.down(log=console.print, wait=not args.no_wait)
    if not ids:
        console.print(f"nothing to do: no live instances tagged hadar-cluster={name}")
    else:
        console.print(f"terminated {len(ids)} instances of cluster {name}")
    return 0


def teardown(
    config: str,
    minutes: float,
    log: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """``hadar run --down-after``: after ``minutes`` (Ctrl-C keeps the cluster), terminate
    every machine of the cluster ``config`` (its provider's lifecycle); returns their ids."""
    from hadar.providers.base import make_lifecycle

    lifecycle = make_lifecycle(load_cluster(config), "--down-after")
    name = lifecycle.cluster.name
    if minutes > 0:
        log(
            f"--down-after: terminating the instances of {name} in {minutes:g} min (Ctrl-C keeps them)"
        )
        try:
            sleep(minutes * 60.0)
        except KeyboardInterrupt:
            log(f"--down-after: kept the instances of {name}; hadar cluster down --config {config}")
            return []
    ids = lifecycle.down(log=log)
    log(
        f"--down-after: terminated {len(ids)} instances of cluster {name}"
        if ids
        else f"--down-after: no live instances of cluster {name}"
    )
    return ids


def run_status(args: argparse.Namespace) -> int:
    aws = _aws_cluster(args.config)
    from hadar.providers.aws.provider import ACTIVE_STATES, ALL_STATES

    instances = aws.instances(ALL_STATES if args.all else ACTIVE_STATES)
    _print_instances(_console(), f"{aws.cluster.name}: {len(instances)} instances", instances)
    return 0
