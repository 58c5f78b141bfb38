"""The ``hadar`` command line. Each sub-command lives in ``hadar/commands/<name>.py`` and exposes
``register(subparsers)``; this module only wires them and turns HadarErrors into one-line
messages with their exit code (2 for bad input), never a traceback (unless ``--debug``). Usage
errors (an unknown flag, a value its ``type=`` refuses) are one line too, not argparse's usage
block."""

from __future__ import annotations

import argparse
import importlib
import logging
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from typing import NoReturn

from hadar.commands.options import DefaultsHelpFormatter, add_global_args
from hadar.core.errors import HadarError, InputError

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


class UsageError(InputError):
    """A command line argparse refused (exit code 2, like every bad input)."""


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line naming the command, raised as
    :class:`UsageError` instead of printing the usage block and exiting (sub-command parsers
    inherit the class)."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.partition(" ")[2]
        raise UsageError(f"{command + ': ' if command else ''}{message} (see: {self.prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
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


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the program is, so it unwinds (cleaning up) as after
    Ctrl-C; ``hadar run`` installs its own handler, which first finishes the round."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _terminate(signum: int, _frame: object) -> NoReturn:
    raise Terminated(signum)


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns its exit code (0 ok, 2 bad input, 3 unreachable node, 128 + the
    signal after SIGINT, SIGTERM or SIGHUP)."""
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) is not signal.SIG_IGN:  # nohup's ignored SIGHUP stays so
                signal.signal(sig, _terminate)
    args = argparse.Namespace(debug=False)
    try:
        parser = build_parser()  # imports every command: a signal may already arrive here
        try:
            args, extras = parser.parse_known_args(argv, namespace=args)
        except SystemExit as exc:  # --help exits through argparse
            return exc.code if isinstance(exc.code, int) else 0
        if extras:  # named after the sub-command, whose --help lists what it takes
            raise UsageError(
                f"{args.command}: unrecognized arguments: {' '.join(extras)} "
                f"(see: hadar {args.command} --help)"
            )
        level = "debug" if args.debug else args.log_level
        logging.basicConfig(
            level=level.upper(), format="%(levelname)s %(name)s: %(message)s", force=True
        )
        if (
            level != "debug"
        ):  # paramiko logs every failed handshake with a traceback; hadar reports it in one line
            logging.getLogger("paramiko").setLevel(logging.CRITICAL)
        code = int(args.func(args) or 0)
        for note in getattr(args, "deprecated", []):
            print(f"hadar: warning: {note}", file=sys.stderr)
        return code
    except HadarError as exc:
        if getattr(args, "debug", False):
            traceback.print_exc()
        notes = "".join(f" (note: {n})" for n in getattr(args, "deprecated", []))
        print(f"hadar: error: {_one_line(str(exc))}{notes}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        signum = exc.signum if isinstance(exc, Terminated) else signal.SIGINT
        print(f"hadar: interrupted ({signal.Signals(signum).name})", file=sys.stderr)
        return 128 + signum


def _one_line(message: str) -> str:
    """The message on one printable line: text quoted from a file or the command line may hold
    newlines or other control characters, which are shown escaped (``\\n``, ``\\x0c``)."""
    if message.isprintable():
        return message
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in message
    )


if __name__ == "__main__":
    sys.exit(main())
