"""``hadar cluster up|down|status --config FILE``: EC2 instances for a ``provider: aws`` cluster.

``up`` launches one instance per node (skipping nodes that already have one), waits until they
run and answer on SSH, runs ``aws.setup`` on each, and writes the SSH cluster file; ``down``
asks, then terminates exactly the instances tagged for the cluster (a second ``down`` has
nothing to do; ``-y`` skips the question); ``status`` lists them."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hadar.clusters import load_cluster
from hadar.commands import argtypes
from hadar.core.cluster import Cluster
from hadar.core.errors import InputError
from hadar.core.extras import require

if TYPE_CHECKING:
    from rich.console import Console

    from nodes.aws import AwsCluster, Instance


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "cluster", help="launch, list or terminate the EC2 instances of an aws cluster"
    )
    actions = p.add_subparsers(dest="cluster_action", metavar="ACTION", required=True)

    up = actions.add_parser(
        "up",
        help="launch one instance per node and write the SSH cluster file",
        description="Launch one EC2 instance per node of the cluster file (its instance_type, "
        "with the aws section's AMI, key pair, security groups, subnet and tags), wait until "
        "they are running and reachable over SSH, and write a provider: ssh cluster file.",
    )
    _config_arg(up)
    up.add_argument(
        "--out",
        metavar="FILE",
        type=argtypes.out_file,
        help="SSH cluster file to write (default: ./<cluster name>-ssh.yaml)",
    )
    up.add_argument("--no-wait-ssh", action="store_true", help="do not wait for SSH to answer")
    up.add_argument(
        "--ssh-wait-timeout",
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
    AwsCluster = require("nodes.aws", f"{path}: hadar cluster").AwsCluster

    cluster: Cluster = load_cluster(path)
    if cluster.provider != "aws":
        raise InputError(
            f"{path}: provider: `hadar cluster` needs provider: aws (got {cluster.provider})"
        )
    return AwsCluster(cluster)


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


def run_up(args: argparse.Namespace) -> int:
    aws = _aws_cluster(args.config)
    console = _console()
    name = aws.cluster.name
    out = Path(args.out) if args.out else Path(f"{name}-ssh.yaml")
    instances = aws.up(wait_ssh=False, log=console.print)
    if not args.no_wait_ssh:
        console.print(f"waiting for SSH on {len(instances)} instances...")
        aws.wait_ssh(instances, args.ssh_wait_timeout)
        if aws.settings.setup:
            console.print(f"running aws.setup on {len(instances)} instances...")
            aws.run_setup(instances, log=console.print)
    elif aws.settings.setup:
        console.print("aws.setup not run (--no-wait-ssh): run `hadar cluster up` again to run it")
    aws.write_ssh_cluster(out, instances)
    _print_instances(console, f"{name}: {len(instances)} instances running", instances)
    console.print(
        f"wrote SSH cluster file {out} ({len(instances)} nodes); "
        f"check it with: hadar nodes check --cluster {out}"
    )
    return 0


def confirm_termination(question: str, assume_yes: bool) -> bool:
    """Ask on the terminal; without one (and without ``-y``) refuse with one line (exit 2)."""
    import sys

    if assume_yes:
        return True
    if not sys.stdin.isatty():
        raise InputError(
            f"{question.rstrip('?')}: refusing without confirmation "
            f"(stdin is not a terminal); pass -y to terminate"
        )
    try:
        answer = input(f"{question} [y/N] ").strip().lower()
    except EOFError:
        return False
    return answer in ("y", "yes")


def run_down(args: argparse.Namespace) -> int:
    from nodes.aws import ACTIVE_STATES

    aws = _aws_cluster(args.config)
    console = _console()
    name = aws.cluster.name
    live = aws.instances(ACTIVE_STATES)
    if live:
        _print_instances(console, f"{name}: {len(live)} instances to terminate", live)
        question = f"terminate {len(live)} instances of cluster {name}?"
        if not confirm_termination(question, args.yes):
            console.print("nothing terminated")
            return 1
    ids = aws.down(log=console.print, wait=not args.no_wait)
    if not ids:
        console.print(f"nothing to do: no live instances tagged hadar-cluster={name}")
    else:
        console.print(f"terminated {len(ids)} instances of cluster {name}")
    return 0


def run_status(args: argparse.Namespace) -> int:
    aws = _aws_cluster(args.config)
    from nodes.aws import ACTIVE_STATES, ALL_STATES

    instances = aws.instances(ALL_STATES if args.all else ACTIVE_STATES)
    _print_instances(_console(), f"{aws.cluster.name}: {len(instances)} instances", instances)
    return 0
