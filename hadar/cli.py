"""The ``hadar`` command line. Each sub-command lives in ``hadar/commands/<name>.py`` and exposes
``register(subparsers)``; this module only wires them and turns HadarErrors into one-line
messages with their exit code (2 for bad input), never a traceback (unless ``--debug``)."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import traceback
from collections.abc import Iterator
from typing import NoReturn

from hadar.commands.options import DefaultsHelpFormatter, add_global_args
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


class HadarParser(argparse.ArgumentParser):
    """A parser whose usage errors are one line, like every other bad input (exit 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = HadarParser(
        prog="hadar",
        description="Heterogeneity-aware scheduling of deep-learning training jobs (Hadar/HadarE).",
        formatter_class=DefaultsHelpFormatter,
    )
    add_global_args(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    for command in sub_parsers(parser):
        command.formatter_class = DefaultsHelpFormatter
        if not any(isinstance(a, argparse._SubParsersAction) for a in command._actions):
            add_global_args(command, top=False)
    return parser


def sub_parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """Every sub-command's parser, depth first (``hadar experiment physical`` included)."""
    seen: set[int] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                if id(child) not in seen:
                    seen.add(id(child))
                    yield child
                    yield from sub_parsers(child)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = "debug" if args.debug else args.log_level
    logging.basicConfig(level=level.upper(), format="%(levelname)s %(name)s: %(message)s", force=True)
    if level != "debug":  # paramiko logs every failed handshake with a traceback; hadar reports it in one line
        logging.getLogger("paramiko").setLevel(logging.CRITICAL)
    try:
        return int(args.func(args) or 0)
    except HadarError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"hadar: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("hadar: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
