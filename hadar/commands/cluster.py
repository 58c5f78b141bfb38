"""``hadar cluster up|down|status --config FILE``: the machines of a cluster whose provider
launches them (``ProviderKind.launches_nodes``; today ``aws``: EC2 instances), through the
provider's :class:`hadar.providers.lifecycle.NodeLifecycle`. For a provider whose machines exist
without hadar (local, ssh) it is one line, exit 2.

``up`` shows what it is about to launch and its hourly price when the provider knows it (aws: a
bundled, dated price table, :mod:`hadar.providers.aws.prices`) and asks (``-y`` skips the
question; ``--dry-run`` asks the provider whether the launch would succeed and launches nothing),
then launches one machine per node (skipping nodes that already have one), waits until they run
and are ready (aws: answer on SSH, ``aws.setup`` run) and writes the cluster file that reaches
them when the provider has one (aws: the SSH cluster file); ``down`` asks, then terminates
exactly the cluster's machines (a second ``down`` has nothing to do; ``-y`` skips the
question); ``status`` lists them."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hadar.clusters import load_cluster
from hadar.commands import Subparsers, argtypes, terminal
from hadar.commands.options import add_out_file_arg
from hadar.core.errors import InputError
from hadar.core.text import counted

if TYPE_CHECKING:
    from rich.console import Console

    from hadar.core.cluster import Node
    from hadar.providers.lifecycle import Machine, NodeLifecycle


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "cluster",
        help="launch, list or terminate the machines of a cluster whose provider launches them "
        "(aws: EC2 instances)",
    )
    actions = p.add_subparsers(dest="cluster_action", metavar="ACTION", required=True)

    up = actions.add_parser(
        "up",
        help="launch one machine per node (aws: and write the SSH cluster file)",
        description="Show what would be launched and its hourly price when the provider knows "
        "it (aws: the instance types and count, from a bundled on-demand price table, dated; "
        "it says when stale) and ask (unless -y; without a terminal -y is required). Then "
        "launch one machine per node of the cluster file that has none, wait until they are "
        "running and ready, and write the cluster file that reaches them if the provider has "
        "one. aws: one EC2 instance per node (its instance_type, with the aws section's AMI, "
        "key pair, security groups, subnet and tags), ready when reachable over SSH and "
        "aws.setup has run; writes a provider: ssh cluster file. --dry-run asks the provider "
        "(EC2's DryRun) instead. A provider whose machines exist without hadar: exit 2.",
    )
    _config_arg(up)
    up.add_argument(
        "-y", "--yes", action="store_true", help="launch without asking for confirmation"
    )
    up.add_argument(
        "--dry-run",
        action="store_true",
        help="check that the launch would succeed (aws: EC2's DryRun checks permissions, AMI, "
        "types, key pair, network); launch nothing",
    )
    add_out_file_arg(
        up,
        "cluster file to write for the launched machines "
        "(aws: the SSH cluster file, default ./<cluster name>-ssh.yaml)",
    )
    up.add_argument(
        "--no-wait-ssh",
        action="store_true",
        help="do not wait until the machines are ready (aws: answer on SSH)",
    )
    up.add_argument(
        "--ssh-wait-timeout",
        dest="ssh_wait_timeout_s",
        type=argtypes.seconds(0, 86400, lo_open=True),
        metavar="S",
        help="seconds to wait until the machines are ready (default: the provider's; aws: "
        "aws.ssh_wait_timeout_s)",
    )
    up.set_defaults(func=run_up)

    down = actions.add_parser(
        "down",
        help="terminate the machines of this cluster (asks first)",
        description="List the cluster's live machines (aws: the instances tagged for the "
        "cluster), ask for confirmation (unless -y), terminate them and wait until the "
        "provider reports them terminated. Without a terminal on stdin, -y is required.",
    )
    _config_arg(down)
    down.add_argument(
        "-y", "--yes", action="store_true", help="terminate without asking for confirmation"
    )
    down.add_argument(
        "--no-wait", action="store_true", help="do not wait until the machines are terminated"
    )
    down.set_defaults(func=run_down)

    status = actions.add_parser(
        "status",
        help="list the machines of this cluster",
        description="List the cluster's machines (live ones; --all adds terminated ones), with "
        "type, state and addresses. aws: List the EC2 instances tagged hadar-cluster=<name>.",
    )
    _config_arg(status)
    status.add_argument("--all", action="store_true", help="include terminated machines")
    status.set_defaults(func=run_status)


def _config_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        "--cluster",
        dest="config",
        required=True,
        metavar="FILE",
        help="cluster YAML whose provider launches its machines (aws: provider: aws and an aws "
        "section)",
    )


def _lifecycle(path: str, action: str) -> NodeLifecycle:
    """The cluster's lifecycle; one line (exit 2) when its provider launches no machines, or
    when the extra it needs is missing."""
    from hadar.providers.lifecycle import make_lifecycle

    return make_lifecycle(load_cluster(path), f"hadar cluster {action}")


def _console() -> Console:
    # markup=False: what is printed quotes the cluster file and EC2 (see terminal.plain)
    return terminal.console(highlight=False, markup=False)


def _say(console: Console) -> Callable[[str], None]:
    """Print one line as literal text (control characters escaped): the lifecycle's ``log``."""
    from hadar.commands.terminal import plain

    return lambda line: plain(console, line)


def _print_machines(
    console: Console, life: NodeLifecycle, title: str, machines: Sequence[Machine]
) -> None:
    from rich.table import Table

    from hadar.commands.terminal import cell

    table = Table(title=cell(title))
    for col in ("node", life.machine_word, "type", "state", "public ip", "private ip"):
        table.add_column(col)
    for m in machines:
        values = (m.node, m.machine_id, m.machine_type, m.state, m.public_ip, m.private_ip)
        table.add_row(*(cell(v or "-") for v in values))
    console.print(table)


def print_cost(console: Console, life: NodeLifecycle, nodes: Sequence[Node]) -> float | None:
    """The table of what launching ``nodes`` costs per hour; returns the known total (None when
    the provider names no price)."""
    from rich.table import Table

    from hadar.commands.terminal import cell, plain

    cost = life.cost(nodes)
    if cost is None:
        return None
    table = Table(title=cell(f"{life.cluster.name}: {len(nodes)} {life.machines_word} to launch"))
    table.add_column(f"{life.machine_word} type")
    for col in ("count", "USD/hour each", "USD/hour"):
        table.add_column(col, justify="right")
    for line in cost.lines:
        each = "?" if line.usd_per_hour is None else f"{line.usd_per_hour:.3f}"
        total = "?" if line.total is None else f"{line.total:.2f}"
        table.add_row(cell(line.label), str(line.count), each, total)
    table.add_row("total", str(len(nodes)), "", f"{cost.usd_per_hour:.2f}")
    console.print(table)
    for note in cost.notes:
        plain(console, f"note: {note}", style="yellow")
    return cost.usd_per_hour


def run_up(args: argparse.Namespace) -> int:
    life = _lifecycle(args.config, "up")
    if args.out and life.cluster_file_word is None:
        raise InputError(
            f"--out: provider {life.cluster.provider} writes no cluster file for its machines "
            f"({args.config} reaches them)"
        )
    console = _console()
    say = _say(console)
    name = life.cluster.name
    words = life.machines_word
    missing, have = life.to_launch()
    for node, machine in have.items():
        say(f"{node}: already has {machine.machine_id} ({machine.state})")
    if missing:
        hourly = print_cost(console, life, missing)
        if args.dry_run:
            say(life.dry_run(missing))
            return 0
        price = "" if hourly is None else f" (about {hourly:.2f} USD/hour)"
        question = f"launch {len(missing)} {words} of cluster {name}{price}?"
        if not confirm(question, args.yes, "launch"):
            say("nothing launched")
            return 1
    elif args.dry_run:
        say(f"dry run: every node of {name} already has {_a(life.machine_word)}; nothing to launch")
        return 0
    machines = life.up(wait_ssh=False, log=say)
    life.prepare(machines, wait=not args.no_wait_ssh, timeout_s=args.ssh_wait_timeout_s, log=say)
    written = (
        None
        if life.cluster_file_word is None
        else life.write_cluster_file(Path(args.out) if args.out else None, machines)
    )
    _print_machines(console, life, f"{name}: {len(machines)} {words} running", machines)
    reach = f"hadar nodes check --cluster {args.config}"
    until = f"hadar cluster down --config {args.config} (or hadar run --down-after)"
    if written is not None:
        say(
            f"wrote {life.cluster_file_word} {written} ({counted(len(machines), 'node')}); check the nodes "
            f"with {reach} (or {written}); they cost money until {until}"
        )
    else:
        say(f"check the nodes with {reach}; they run until {until}")
    return 0


def _a(word: str) -> str:
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


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
    life = _lifecycle(args.config, "down")
    console = _console()
    say = _say(console)
    name = life.cluster.name
    words = life.machines_word
    live = life.machines()
    if live:
        _print_machines(console, life, f"{name}: {len(live)} {words} to terminate", live)
        question = f"terminate {len(live)} {words} of cluster {name}?"
        if not confirm(question, args.yes):
            say("nothing terminated")
            return 1
    ids = life.down(log=say, wait=not args.no_wait)
    if not ids:
        say(f"nothing to do: no live {life.scope()}")
    else:
        say(f"terminated {len(ids)} {words} of cluster {name}")
    return 0


def teardown(
    config: str,
    minutes: float,
    log: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """``hadar run --down-after``: after ``minutes`` (Ctrl-C keeps the cluster), terminate
    every machine of the cluster ``config`` (its provider's lifecycle); returns their ids."""
    from hadar.providers.lifecycle import make_lifecycle

    life = make_lifecycle(load_cluster(config), "--down-after")
    name = life.cluster.name
    words = life.machines_word
    if minutes > 0:
        log(
            f"--down-after: terminating the {words} of {name} in {minutes:g} min (Ctrl-C keeps them)"
        )
        try:
            sleep(minutes * 60.0)
        except KeyboardInterrupt:
            log(f"--down-after: kept the {words} of {name}; hadar cluster down --config {config}")
            return []
    ids = life.down(log=log)
    log(
        f"--down-after: terminated {len(ids)} {words} of cluster {name}"
        if ids
        else f"--down-after: no live {words} of cluster {name}"
    )
    return ids


def run_status(args: argparse.Namespace) -> int:
    life = _lifecycle(args.config, "status")
    machines = life.machines(everything=args.all)
    title = f"{life.cluster.name}: {len(machines)} {life.machines_word}"
    _print_machines(_console(), life, title, machines)
    return 0
