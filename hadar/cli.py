"""The ``hadar`` command line. Each sub-command lives in ``hadar/commands/<name>.py`` and exposes
``register(subparsers)``; this module only wires them and turns HadarErrors into one-line
messages with their exit code (2 for bad input), never a traceback."""

from __future__ import annotations

import argparse
import importlib
import sys

from hadar.errors import HadarError

COMMAND_MODULES = [
    "hadar.commands.simulate",
    "hadar.commands.compare",
    "hadar.commands.run",
    "hadar.commands.report",
    "hadar.commands.nodes",
    "hadar.commands.cluster",
    "hadar.commands.estimate",
    "hadar.commands.export_gavel",
    "hadar.commands.experiment",
]
"""Modules that contribute sub-commands (order = order in ``hadar --help``)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hadar",
        description="Heterogeneity-aware scheduling of deep-learning training jobs (Hadar/HadarE).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except HadarError as exc:
        print(f"hadar: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("hadar: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
