"""``hadar nodes check --cluster FILE``: each node's reachability, Python/torch versions and GPUs,
and whether the GPUs it shows match the ones the cluster file declares.

Exit status 0 when every node is ready (reachable, torch installed, GPUs as declared), 3 when a
node is unreachable, 2 when a reachable node cannot train (torch missing, or its GPUs do not
match: one line per node) or the cluster file is bad. For a provider that launches its machines
(aws), both its cluster file and the one ``hadar cluster up`` wrote (aws: the SSH file) are
accepted."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from hadar.clusters import load_cluster
from hadar.commands import Subparsers, argtypes
from hadar.core.cluster import Cluster, Node
from hadar.core.errors import InputError, UnreachableNodeError
from hadar.providers.base import PROBE_TIMEOUT_S
from hadar.runtime.gpu_inventory import GpuReport, NodeGpus, gpu_report, number_nodes

if TYPE_CHECKING:
    from hadar.providers.base import NodeHealth

CHECK_RUN_ID = "nodes-check"


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "nodes", help="inspect the machines of a cluster (any provider with machines)"
    )
    actions = p.add_subparsers(dest="nodes_action", metavar="ACTION", required=True)
    c = actions.add_parser(
        "check",
        help="reachability, Python/torch versions and GPUs of every node",
        description="Contact every node of the cluster (concurrently) and report whether it is "
        "reachable, its Python and torch versions, the GPUs it sees and whether they match the "
        "declared ones (type, count, memory). Exit 0 if every node is ready, 3 if a node is "
        "unreachable, 2 if a reachable node cannot train (torch is not installed, or its GPUs "
        "do not match). For a provider that launches its machines, either its cluster file or "
        "the one `hadar cluster up` wrote (aws: the SSH file).",
    )
    c.add_argument(
        "--cluster",
        required=True,
        metavar="FILE",
        help="cluster YAML file or bundled name, of a provider with machines (or the file "
        "hadar cluster up wrote)",
    )
    c.add_argument(
        "--trust-new-hosts",
        action="store_true",
        help="accept and record unknown SSH host keys (changed keys are still refused)",
    )
    c.add_argument(
        "--timeout",
        dest="timeout_s",
        type=argtypes.seconds(0, 86400, lo_open=True),
        default=PROBE_TIMEOUT_S,
        metavar="S",
        help=(
            "seconds each node's probe may run once connected (default: %(default)s); "
            "an SSH connection is bounded by ssh.connect_attempts x ssh.connect_timeout_s"
        ),
    )
    c.add_argument(
        "--json", action="store_true", help="print one JSON object per node instead of a table"
    )
    c.set_defaults(func=run_check)


def run_check(args: argparse.Namespace) -> int:
    from hadar.providers.base import make_provider
    from hadar.providers.registry import provider_kind, provider_names

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
                pool.map(lambda n: provider.check(n, args.timeout_s), cluster.nodes)
            )
    reports = {h.node: gpu_report(h.details) for h in results if h.reachable}
    numbered, problems = number_nodes(
        [n for n in cluster.nodes if n.name in reports],
        reports,
        shared_machine=kind.shares_machine,
    )
    missing_torch = {h.node: no_torch_line(h) for h in results if h.reachable and not h.torch}
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
                        missing_torch.get(node.name),
                    )
                )
            )
    else:
        render(cluster, results, numbered, problems, missing_torch)
    code = 0
    if not all(h.reachable for h in results):
        code = UnreachableNodeError.exit_code
    elif problems or missing_torch:
        code = InputError.exit_code
    if code:  # the one stderr line of a failed command (docs/inputs.md); the table says more
        print(
            f"hadar: error: nodes check: {summary_line(results, problems, missing_torch)}",
            file=sys.stderr,
        )
    return code


def no_torch_line(h: NodeHealth) -> str:
    """Why a reachable node without torch cannot train, and what to do."""
    if h.python is None:
        return f"node {h.node}: the health probe did not report: {h.error or 'no output'}"
    return (
        f"node {h.node}: torch is not installed for Python {h.python} there, so it cannot train; "
        "install the node's environment (docs/install.md), e.g. pip install "
        "'hadar-scheduler[train]' from a wheel or clone"
    )


def _row(
    node: Node,
    h: NodeHealth,
    report: GpuReport | None,
    gpus: NodeGpus | None,
    problem: str | None,
    torch_problem: str | None,
) -> dict[str, Any]:
    """One node of ``--json``: the health fields, the declared and seen GPUs and the verdict."""
    return {
        "ready": h.reachable and problem is None and torch_problem is None,
        **h.as_dict(),
        "declared": dict(node.gpus),
        "emulate": node.emulate,
        "gpus_seen": [vars(g) for g in report.gpus] if report else [],
        "gpu_ids": gpus.as_dict() if gpus else None,
        "gpu_mismatch": problem,
        "torch_missing": torch_problem,
    }


def _verdict(node: Node, h: NodeHealth, gpus: NodeGpus | None, problem: str | None) -> str:
    if not h.reachable:
        return "[red]UNREACHABLE[/]"
    if problem:
        return "[red]GPU MISMATCH[/]"
    if not h.torch:
        return "[red]NO TORCH[/]"
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
    missing_torch: dict[str, str],
) -> None:
    """Print the health table (narrow enough for 80 columns: the errors go below it, one line
    per node) and a one-line summary naming what is wrong with each node that is not ready."""
    from rich.table import Table

    from hadar.commands.terminal import cell, console, plain

    out = console()
    table = Table(title=cell(f"{cluster.name} ({cluster.provider}, {len(cluster.nodes)} nodes)"))
    for col in ("node", "address", "declared", "python", "torch", "GPUs seen", "verdict"):
        table.add_column(col, overflow="fold")
    for node, h in zip(cluster.nodes, results, strict=True):
        table.add_row(  # what the node answered is shown as text (cell), never as markup
            node.name,
            cell(h.address or "-"),
            _gpus(node),
            cell(h.python or "-"),
            cell(h.torch) if h.torch else ("[red]missing[/]" if h.reachable else "-"),
            cell(", ".join(h.gpus) if h.gpus else ("none (CPU)" if h.python else "-")),
            _verdict(node, h, numbered.get(node.name), problems.get(node.name)),
        )
    out.print(table)
    for h in results:  # full reasons, one line each, wrapped at word boundaries
        line = problems.get(h.node) or missing_torch.get(h.node) or h.error
        if line:
            named = line if line.startswith(f"node {h.node}") else f"node {h.node}: {line}"
            plain(out, named)
    plain(out, summary_line(results, problems, missing_torch))


def summary_line(
    results: list[NodeHealth], problems: dict[str, str], missing_torch: dict[str, str]
) -> str:
    """``2/3 nodes reachable, 1 ready; unreachable: t4 (connection refused); no torch: k80; GPUs do not
    match: v100`` -- every node that is not ready, with the short reason."""
    down = [h for h in results if not h.reachable]
    ready = [
        h for h in results if h.reachable and h.node not in problems and h.node not in missing_torch
    ]
    line = f"{len(results) - len(down)}/{len(results)} nodes reachable, {len(ready)} ready"
    if down:
        line += "; unreachable: " + ", ".join(f"{h.node} ({short_reason(h.error)})" for h in down)
    silent = [n for n in missing_torch if next(h for h in results if h.node == n).python is None]
    no_torch = [n for n in missing_torch if n not in silent]
    if no_torch:
        line += "; no torch: " + ", ".join(no_torch)
    if silent:
        line += "; health probe failed: " + ", ".join(silent)
    if problems:
        line += "; GPUs do not match: " + ", ".join(problems)
    return line


def short_reason(error: str | None) -> str:
    """The last clause of a provider's error (``node t4 (host:22): unreachable after 3
    attempts: connection refused`` -> ``connection refused``)."""
    if not error:
        return "no reason given"
    return error.rsplit(": ", 1)[-1].strip() or error
