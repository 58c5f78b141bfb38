"""``hadar nodes check --cluster FILE``: each node's reachability, Python/torch versions and GPUs.

Exit status 0 when every node is reachable, 3 otherwise (2 for a bad cluster file)."""

from __future__ import annotations

import argparse
import contextlib
import json
from concurrent.futures import ThreadPoolExecutor

from hadar.cluster import Cluster, Node
from hadar.cluster_config import load_cluster
from hadar.errors import InputError, UnreachableNodeError

CHECK_RUN_ID = "nodes-check"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("nodes", help="inspect the machines of a local, ssh or aws cluster")
    actions = p.add_subparsers(dest="nodes_action", metavar="ACTION", required=True)
    c = actions.add_parser(
        "check",
        help="reachability, Python/torch versions and GPUs of every node",
        description="Contact every node of the cluster (concurrently) and report whether it is "
        "reachable, its Python and torch versions and the GPUs it sees. Exit 0 if all nodes "
        "are reachable, else 3.",
    )
    c.add_argument(
        "--cluster", required=True, metavar="FILE", help="cluster YAML file or bundled name"
    )
    c.add_argument(
        "--trust-new-hosts",
        action="store_true",
        help="accept and record unknown SSH host keys (changed keys are still refused)",
    )
    c.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="per-node probe timeout in seconds (default: %(default)s)",
    )
    c.add_argument(
        "--json", action="store_true", help="print one JSON object per node instead of a table"
    )
    c.set_defaults(func=run_check)


def run_check(args: argparse.Namespace) -> int:
    from nodes.provider import NodeHealth, make_provider

    cluster = load_cluster(args.cluster)
    if cluster.provider == "simulated":
        raise InputError(
            f"{args.cluster}: provider: simulated clusters have no machines to check "
            f"(use provider: local, ssh or aws)"
        )
    options = {"trust_new_hosts": True} if args.trust_new_hosts else {}
    with make_provider(cluster, CHECK_RUN_ID, **options) as provider:
        with contextlib.suppress(UnreachableNodeError):
            provider.nodes()  # cloud providers refresh their view of running machines here
        with ThreadPoolExecutor(max_workers=min(16, len(cluster.nodes))) as pool:
            results: list[NodeHealth] = list(
                pool.map(lambda n: provider.check(n, args.timeout), cluster.nodes)
            )
    if args.json:
        for h in results:
            print(json.dumps(h.as_dict()))
    else:
        render(cluster, results)
    return 0 if all(h.reachable for h in results) else UnreachableNodeError.exit_code


def _gpus(node: Node) -> str:
    return ", ".join(f"{count}x {gtype}" for gtype, count in node.gpus.items())


def render(cluster: Cluster, results: list) -> None:
    """Print the health table and a one-line summary."""
    import sys

    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 200)
    table = Table(title=f"{cluster.name} ({cluster.provider}, {len(cluster.nodes)} nodes)")
    for col in (
        "node",
        "address",
        "declared GPUs",
        "reachable",
        "python",
        "torch",
        "GPUs seen",
        "error",
    ):
        table.add_column(col, overflow="fold")
    for node, h in zip(cluster.nodes, results, strict=True):
        table.add_row(
            node.name,
            h.address or "-",
            _gpus(node),
            "[green]yes[/]" if h.reachable else "[red]NO[/]",
            h.python or "-",
            h.torch or "-",
            ", ".join(h.gpus) if h.gpus else ("none (CPU)" if h.python else "-"),
            h.error or "",
        )
    console.print(table)
    down = [h.node for h in results if not h.reachable]
    ok = len(results) - len(down)
    line = f"{ok}/{len(results)} nodes reachable"
    console.print(line + (f"; unreachable: {', '.join(down)}" if down else ""), highlight=False)
