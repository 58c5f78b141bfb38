"""The ``hadar`` command line. Each sub-command lives in ``hadar/commands/<name>.py`` and exposes
``register(subparsers)``; this module only wires them and turns HadarErrors into one-line
messages with their exit code (2 for bad input), never a traceback (unless ``--debug``). Usage
errors (an unknown flag, a value its ``type=`` refuses) are one line too, not argparse's usage
block."""

from __future__ import annotations

import argparse
import importlib
import itertools
import logging
import re
import signal
import sys
import threading
import traceback
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

from hadar import __version__
from hadar.commands.options import DefaultsHelpFormatter, add_global_args
from hadar.core.errors import HadarError, InputError, shorten
from hadar.core.suggest import did_you_mean
from hadar.core.text import printable
from hadar.core.validation import shown_value

COMMANDS = {
    "simulate": "hadar.commands.simulate",
    "compare": "hadar.commands.compare",
    "run": "hadar.commands.run",
    "report": "hadar.commands.report",
    "status": "hadar.commands.background",
    "logs": "hadar.commands.background",
    "stop": "hadar.commands.background",
    "nodes": "hadar.commands.nodes",
    "cluster": "hadar.commands.cluster",
    "estimate-error": "hadar.commands.estimate",
    "fit-report": "hadar.commands.fit_report",
    "export-gavel": "hadar.commands.export_gavel",
    "experiment": "hadar.commands.experiment",
    "node-stream": "hadar.commands.node_stream",
    "reproduce": "hadar.commands.reproduce",
}
"""Which module registers each sub-command: ``hadar simulate ...`` imports only its own module
(the others bring imports the simulation does not need); ``tests/hadar/commands`` checks it is complete."""
COMMAND_MODULES = list(dict.fromkeys(COMMANDS.values()))
"""Modules that contribute sub-commands (order = order in ``hadar --help``)."""


class UsageError(InputError):
    """A command line argparse refused (exit code 2, like every bad input)."""


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line naming the command, raised as
    :class:`UsageError` instead of printing the usage block and exiting (sub-command parsers
    inherit the class)."""

    _argv: list[str] | None = None

    def parse_known_args(  # type: ignore[override]  # the same call, remembering the words
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._argv = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def _value_looks_like_option(self, flag: str) -> bool:
        """Whether ``flag`` was followed by a word starting with "-" (a negative or dashed
        value, which argparse takes for an option)."""
        words = self._argv or []
        return any(w == flag and n.startswith("-") for w, n in itertools.pairwise(words))

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """An invalid choice names the closest valid ones ("did you mean")."""
        choices = action.choices
        if choices is not None and value not in choices:
            names = [str(c) for c in choices]
            hint = did_you_mean(str(value), names)
            listed = ", ".join(map(repr, names)) if len(names) <= 20 else f"{len(names)} names"
            raise argparse.ArgumentError(
                action, f"invalid choice: {shown_value(value)}{hint} (choose from {listed})"
            )

    def error(self, message: str) -> NoReturn:
        command = self.prog.partition(" ")[2]
        flag = re.fullmatch(r"argument (--[\w-]+)(?:/[^:]*)?: expected one argument", message)
        if flag is not None and self._value_looks_like_option(flag[1]):
            message += f" (a value that starts with '-' is written {flag[1]}=VALUE)"
        raise UsageError(f"{command + ': ' if command else ''}{message} (see: {self.prog} --help)")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or with ``command`` (a key of :data:`COMMANDS`) one holding only that
    sub-command, which parses its command lines the same way and imports less."""
    parser = OneLineParser(
        prog="hadar",
        description="Heterogeneity-aware scheduling of deep-learning training jobs (Hadar/HadarE).",
        formatter_class=DefaultsHelpFormatter,
    )
    parser.add_argument(
        "--version", action="version", version=f"hadar {__version__}", help="print the version"
    )
    add_global_args(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in [COMMANDS[command]] if command in COMMANDS else COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    for child in sub_parsers(parser):
        child.formatter_class = DefaultsHelpFormatter
        if not any(isinstance(a, argparse._SubParsersAction) for a in child._actions):
            add_global_args(child, top=False)
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


def command_parser(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> argparse.ArgumentParser:
    """The parser of the (sub-)sub-command ``args`` were parsed for (``hadar nodes check``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = getattr(args, action.dest, None)
            if chosen in action.choices:
                return command_parser(action.choices[chosen], args)
    return parser


def _flags(parser: argparse.ArgumentParser) -> list[str]:
    """The long option strings ``parser`` takes (hidden aliases excluded)."""
    return [
        o
        for a in parser._actions
        if a.help != argparse.SUPPRESS
        for o in a.option_strings
        if o.startswith("--")
    ]


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns its exit code (0 ok, 2 bad input, 3 unreachable node, 4 and 5 a
    real run stalled or out of resources, 6 Job Tracker busy, 7 ``compare`` with failed policies,
    128 + the signal after SIGINT, SIGTERM or SIGHUP)."""
    argv = sys.argv[1:] if argv is None else argv
    args = argparse.Namespace(debug=False)
    try:  # the handlers are installed inside: a signal right after is handled below, too
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGHUP):
                if signal.getsignal(sig) is not signal.SIG_IGN:  # nohup's ignored SIGHUP stays
                    signal.signal(sig, _terminate)
        # imports the command's module: a signal may already arrive here
        parser = build_parser(argv[0] if argv else None)
        if not argv:  # bare `hadar`: the help, exit 0
            parser.print_help()
            return 0
        try:
            args, extras = parser.parse_known_args(argv, namespace=args)
        except SystemExit as exc:  # --help exits through argparse
            return exc.code if isinstance(exc.code, int) else 0
        if extras:  # named after the sub-command, whose --help lists what it takes
            command = command_parser(parser, args)
            name = command.prog.partition(" ")[2]
            hint = "".join(
                did_you_mean(e.partition("=")[0], _flags(command)) for e in extras if e[:1] == "-"
            )
            raise UsageError(
                f"{name}: unrecognized arguments: {shorten(' '.join(extras))}{hint} "
                f"(see: {command.prog} --help)"
            )
        args.argv = list(argv)  # `hadar run --detach` starts the same command in the background
        if getattr(args, "load", None) is not None:  # --load picks a pollux-N workload's load
            from hadar.workloads.pollux import workload_at_load

            args.workload = workload_at_load(args.workload, args.load)
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
        print(f"hadar: error: {printable(str(exc))}{notes}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        return _interrupted(exc.signum if isinstance(exc, Terminated) else signal.SIGINT)
    except Exception as exc:  # a signal inside a C extension's import surfaces as its ImportError
        signum = _signal_behind(exc)
        if signum is None:
            raise
        return _interrupted(signum)


def _interrupted(signum: int) -> int:
    print(f"hadar: interrupted ({signal.Signals(signum).name})", file=sys.stderr)
    return 128 + signum


def _signal_behind(exc: BaseException) -> int | None:
    """The signal of a :class:`Terminated` (or Ctrl-C) that caused ``exc``, if one did."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, Terminated):
            return cause.signum
        if isinstance(cause, KeyboardInterrupt):
            return int(signal.SIGINT)
        cause = cause.__cause__ or cause.__context__
    return None


if __name__ == "__main__":
    sys.exit(main())
