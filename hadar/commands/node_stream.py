"""``hadar node-stream generate|from-slurm|stats``: make, convert and describe node-availability
streams (``time,node,event`` CSV) for ``--node-stream`` (docs/node-streams.md)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from hadar.commands import Subparsers, argtypes
from hadar.commands.options import add_out_file_arg, refuse_output_over_input

if TYPE_CHECKING:
    from hadar.core.node_stream import NodeStream


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "node-stream",
        help="generate, convert or describe a node-availability stream (--node-stream)",
    )
    actions = p.add_subparsers(dest="stream_action", metavar="ACTION", required=True)

    gen = actions.add_parser(
        "generate",
        help="a seeded stream calibrated to a supercomputer's published idle-node statistics",
        description="Write a time,node,event stream over the cluster's nodes: join and leave "
        "events at the preset's rates (BFTrainer Table 1), log-normal idle-fragment lengths "
        "fitted to Summit's Fig. 1 (58 % under 10 minutes holding 10 % of the idle node-time), "
        "and the preset's idle share of the nodes (or --idle-share).",
    )
    gen.add_argument("--cluster", required=True, help="cluster YAML file or bundled name")
    gen.add_argument(
        "--preset", default="summit", help="summit, theta or mira (default: %(default)s)"
    )
    gen.add_argument(
        "--duration",
        dest="duration_s",
        type=argtypes.seconds(60, 366 * argtypes.DAY, units=True),
        metavar="DURATION",
        default=argtypes.DAY,
        help="length, in seconds or with a unit (90m, 36h, 7d) (default: %(default)s, one day)",
    )
    gen.add_argument("--seed", type=argtypes.seed, default=0, help="seed (default: %(default)s)")
    gen.add_argument(
        "--idle-share",
        type=argtypes.fraction,
        default=None,
        help="mean share of the nodes idle (default: the preset's, e.g. 0.111 for Summit)",
    )
    add_out_file_arg(gen, "stream CSV to write", required=True, short=True)
    gen.set_defaults(func=run_generate)

    conv = actions.add_parser(
        "from-slurm",
        help="convert Slurm's output (sinfo -i, sacct -P, or a Timestamp|NodeName|State log) to a stream",
        description="Read what sinfo -i prints (time lines and node tables), sacct -P output with "
        "Start, End and NodeList columns (a node is idle while no job holds it), or a '|'-separated "
        "log with Timestamp, NodeName and State columns (snapshots or changes), and write the "
        "stream of its idle spells (state exactly 'idle'); times are seconds since the first row.",
    )
    conv.add_argument("log", help="the Slurm log")
    conv.add_argument(
        "--min-fragment",
        dest="min_fragment_s",
        type=argtypes.seconds(0, 86400),
        default=0.0,
        metavar="S",
        help="drop idle spells shorter than S seconds (default: %(default)s)",
    )
    conv.add_argument("--cluster", default=None, help="check the nodes against this cluster file")
    add_out_file_arg(conv, "stream CSV to write", required=True, short=True)
    conv.set_defaults(func=run_from_slurm)

    stats = actions.add_parser(
        "stats",
        help="the published statistics of a stream (events per hour, fragment lengths, idle nodes)",
        description="Read a time,node,event stream and print the statistics its calibration is "
        "published with: rows, hours and nodes; join and leave events per hour; idle fragments "
        "(how many, the share under 10 minutes and the share of idle node-time they hold, the "
        "median length); the mean number of idle nodes. With --cluster, every node must be one "
        "of the cluster file's.",
    )
    stats.add_argument("stream", help="the stream CSV")
    stats.add_argument("--cluster", default=None, help="check the nodes against this cluster file")
    stats.set_defaults(func=run_stats)


def _declared(cluster: str | None) -> tuple[tuple[str, ...] | None, str]:
    if cluster is None:
        return None, "the cluster file"
    from hadar.clusters import load_cluster

    c = load_cluster(cluster)
    return c.node_names, c.source or cluster


def _write(stream: NodeStream, out: str) -> None:
    from hadar.core.io import write_csv
    from hadar.core.node_stream import COLUMNS, stream_rows

    write_csv(out, stream_rows(stream), COLUMNS)
    print_stats(stream, f"wrote {out}: ")


def print_stats(stream: NodeStream, prefix: str = "") -> None:
    from hadar.core.node_stream import stream_stats

    st = stream_stats(stream)
    print(
        f"{prefix}{len(stream.events)} rows, {st.hours:.2f} h, {len(stream.nodes)} nodes named; "
        f"join events {st.join_events_per_hour:.1f}/h, leave events {st.leave_events_per_hour:.1f}/h; "
        f"{st.fragments} fragments, {100 * st.short_fragment_share:.0f} % under 10 min holding "
        f"{100 * st.short_node_time_share:.0f} % of the idle node-time (median "
        f"{st.median_fragment_s / 60:.1f} min); {st.mean_idle_nodes:.1f} nodes idle on average"
    )


def run_generate(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from hadar.clusters import load_cluster
    from hadar.workloads.node_streams import generate_stream, preset

    refuse_output_over_input(args.out, "--out", {"--cluster": args.cluster})
    c = load_cluster(args.cluster)
    machine = preset(args.preset)
    if args.idle_share is not None:
        machine = replace(machine, idle_share=args.idle_share)
    stream = generate_stream(
        c.node_names,
        args.duration_s / 3600,
        args.seed,
        machine,
        source=f"{args.preset} stream (seed {args.seed})",
    )
    _write(stream, args.out)
    return 0


def run_from_slurm(args: argparse.Namespace) -> int:
    from hadar.core.errors import InputError
    from hadar.workloads.slurm_formats import load_slurm_output

    refuse_output_over_input(args.out, "--out", {"log": args.log, "--cluster": args.cluster})
    names, source = _declared(args.cluster)
    stream = load_slurm_output(args.log, args.min_fragment_s, names)
    if names is not None:
        unknown = sorted(set(stream.nodes) - set(names))
        if unknown:
            raise InputError(
                f"{args.log}: field NodeName: node {unknown[0]!r} is not declared in {source}"
            )
    _write(stream, args.out)
    return 0


def run_stats(args: argparse.Namespace) -> int:
    from hadar.core.node_stream import load_node_stream

    names, source = _declared(args.cluster)
    print_stats(load_node_stream(args.stream, names, source))
    return 0
