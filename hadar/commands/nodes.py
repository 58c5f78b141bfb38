"""``hadar nodes check --cluster FILE``: each node's reachability, Python/torch versions and GPUs,
and whether the GPUs it shows match the ones the cluster file declares.

Exit status 0 when every node is reachable and matches, 3 when a node is unreachable, 2 when a
node's GPUs do not match (one line per node) or the cluster file is bad."""

from __future__ import annotations

import argparse
import contextlib
import json
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from hadar.clusters import load_cluster
from hadar.commands import argtypes
from hadar.core.cluster import Cluster, Node
from hadar.core.errors import InputError, UnreachableNodeError
from hadar.runtime.gpu_inventory import GpuReport, NodeGpus, gpu_report, number_nodes

if TYPE_CHECKING:
    from nodes.provider import NodeHealth

CHECK_RUN_ID = "nodes-check"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("nodes", help="inspect the machines of a local, ssh or aws cluster")
    actions = p.add_subparsers(dest="nodes_action", metavar="ACTION", required=True)
    c = actions.add_parser(
        "check",
        help="reachability, Python/torch versions and GPUs of every node",
        description="Contact every node of the cluster (concurrently) and report whether it is "
        "reachable, its Python and torch versions, the GPUs it sees and whether they match the "
        "declared ones (type, count, memory). Exit 0 if all nodes are reachable and match, 3 if "
        "a node is unreachable, 2 if a node's GPUs do not match.",
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
        type=argtypes.seconds(0, 86400, lo_open=True),
        default=60.0,
        metavar="S",
        help="per-node probe timeout in seconds (default: %(default)s)",
    )
    c.add_argument(
        "--json", action="store_true", help="print one JSON object per node instead of a table"
    )
    c.set_defaults(func=run_check)


def run_check(args: argparse.Namespace) -> int:
    from nodes.provider import make_provider
    from nodes.transport import provider_kind, provider_names

    cluster = load_cluster(args.cluster)
    kind = provider_kind(cluster.provider)
    if kind is None:
        raise InputError(
            f"{args.cluster}: provider: {cluster.provider} clusters have no machines to check "
            f"(use provider: {provider_names()})"
        )
    options = {"trust_new_hosts": True} if args.trust_new_hosts else {}
    with make_provider(cluster, CHECK_RUN_ID, **options) as provider:
        with contextlib.suppress(UnreachableNodeError):
            provider.nodes()  # cloud providers refresh their view of running machines here
        with ThreadPoolExecutor(max_workers=min(16, len(cluster.nodes))) as pool:
            results: list[NodeHealth] = list(
                pool.map(lambda n: provider.check(n, args.timeout), cluster.nodes)
            )
    reports = {h.node: gpu_report(h.details) for h in results if h.reachable}
    numbered, problems = number_nodes(
        [n for n in cluster.nodes if n.name in reports],
        reports,
        shared_machine=kind.shares_machine,
    )
    if args.json:
        for node, h in zip(cluster.nodes, results, strict=True):
            print(
                json.dumps(
                    _row(
                        node,
                        h,
                        reports.get(node.name),
                        numbered.get(node.name),
                        problems.get(node.name),
                    )
                )
            )
    else:
        render(cluster, results, numbered, problems)
        for line in problems.values():
            print(line)
    if not all(h.reachable for h in results):
        return UnreachableNodeError.exit_code
    return InputError.exit_code if problems else 0


def _row(
    node: Node, h: NodeHealth, report: GpuReport | None, gpus: NodeGpus | None, problem: str | None
) -> dict:
    """One node of ``--json``: the health fields, the declared and seen GPUs and the verdict."""
    return {
        **h.as_dict(),
        "declared": dict(node.gpus),
        "emulate": node.emulate,
        "gpus_seen": [vars(g) for g in report.gpus] if report else [],
        "gpu_ids": gpus.as_dict() if gpus else None,
        "gpu_mismatch": problem,
    }


def _verdict(node: Node, gpus: NodeGpus | None, problem: str | None) -> str:
    if problem:
        return "[red]MISMATCH[/]"
    if gpus is None:
        return "-"
    devices = ",".join(str(gpus.device(i)) for ids in gpus.ids.values() for i in ids)
    return f"emulated (devices {devices})" if node.emulate else f"[green]ok[/] (devices {devices})"


def _gpus(node: Node) -> str:
    return ", ".join(f"{count}x {gtype}" for gtype, count in node.gpus.items())


def render(
    cluster: Cluster,
    results: list[NodeHealth],
    numbered: dict[str, NodeGpus],
    problems: dict[str, str],
) -> None:
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
        "GPU check",
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
            _verdict(node, numbered.get(node.name), problems.get(node.name))
            if h.reachable
            else "-",
            h.error or "",
        )
    console.print(table)
    down = [h.node for h in results if not h.reachable]
    ok = len(results) - len(down)
    line = f"{ok}/{len(results)} nodes reachable"
    line += f"; unreachable: {', '.join(down)}" if down else ""
    line += f"; GPUs do not match on {', '.join(problems)}:" if problems else ""
    console.print(line, highlight=False)
