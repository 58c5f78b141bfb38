"""The CLI reference (``docs/cli.md``) generated from the parser, and a check that the commands
quoted in the README and the docs use flags the parser knows.

``python -m hadar.cli_reference --write`` regenerates ``docs/cli.md`` after a flag changes; the
test suite fails while the file and the parser disagree.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from hadar.cli import build_parser, sub_parsers
from hadar.commands.options import shows_default

REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
HEADER = (
    "# CLI reference\n\nGenerated from the parser by `python -m hadar.cli_reference --write` (a test checks it "
    "is current). Every command also takes `--log-level {debug,info,warning,error}` and `--debug` (the "
    "traceback behind an error). Bad input is one line on stderr and exit code 2. On a terminal, "
    "output fits its width (lines wrap, tables fold their cells); written to a file or a pipe "
    "(a log, CI), lines are never wrapped, so paths and commands stay whole, and tables are laid "
    "out in `$COLUMNS` or 200 columns.\n"
)


def visible_options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The parser's options as ``--help`` lists them (deprecated aliases and diagnostics left out)."""
    return [
        a
        for a in parser._actions
        if a.option_strings
        and a.help != argparse.SUPPRESS
        and not isinstance(a, argparse._HelpAction)
        and a.dest not in ("log_level", "debug")
    ]


def render(parser: argparse.ArgumentParser | None = None) -> str:
    """The markdown reference: one section per sub-command, one table row per option."""
    parser = parser or build_parser()
    parts = [HEADER]
    for command in sub_parsers(parser):
        if any(isinstance(a, argparse._SubParsersAction) for a in command._actions):
            continue
        parts.append(f"\n## `{command.prog}`\n\n{_one_line(command.description or '')}\n")
        positionals = [
            a for a in command._actions if not a.option_strings and a.help != argparse.SUPPRESS
        ]
        if positionals:
            parts.append(
                "\nArguments: "
                + ", ".join(
                    f"`{a.metavar or a.dest}` ({_one_line(a.help or '')})" for a in positionals
                )
                + "\n"
            )
        parts.append("\n| option | default | meaning |\n|---|---|---|\n")
        for action in visible_options(command):
            parts.append(f"| {_flags(action)} | {_default(action)} | {_meaning(action)} |\n")
    return "".join(parts)


def _flags(action: argparse.Action) -> str:
    name = ", ".join(f"`{s}`" for s in action.option_strings)
    if action.nargs == 0:
        return name
    if action.choices is not None and action.metavar is None:
        return f"{name} `{{{','.join(map(str, action.choices))}}}`"
    return f"{name} `{action.metavar or action.dest.upper()}`"


def _default(action: argparse.Action) -> str:
    return f"`{action.default}`" if shows_default(action) else "-"


def _meaning(action: argparse.Action) -> str:
    text = _one_line(action.help or "")
    text = re.sub(r"\s*\(default: %\(default\)s\)", "", text)
    return text.replace("%(default)s", str(action.default)).replace("|", "\\|")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def quoted_commands(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, "run --round 30 ...")`` for each ``hadar COMMAND ...`` in a markdown text:
    inside a code span up to its closing backtick, in a code block up to the end of the line."""
    in_block = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_block = not in_block
            continue
        spans = [line] if in_block else re.findall(r"`([^`]*)`", line)
        for span in spans:
            for m in re.finditer(r"(?:^|[\s/])hadar ((?:[a-z][\w-]*)(?:[^`#]*))", span):
                yield number, m.group(1)


def unknown_flags(text: str, parser: argparse.ArgumentParser | None = None) -> list[str]:
    """``"line N: hadar CMD: --flag"`` for every flag a quoted command uses that its parser lacks
    (deprecated aliases count as unknown: the docs should show the current spelling)."""
    parser = parser or build_parser()
    problems = []
    for number, command in quoted_commands(text):
        tokens = command.split()
        nodes: list[argparse.ArgumentParser] = [parser]
        path: list[str] = []
        while tokens and (children := _children(nodes, tokens[0])):
            nodes, path = children, [*path, tokens.pop(0)]
        if not path:
            continue
        known = set.intersection(
            *(
                {s for a in node._actions if a.help != argparse.SUPPRESS for s in a.option_strings}
                for node in nodes
            )
        )
        for token in tokens:
            flag = token.strip("[](),.;:'\"").split("=")[0]
            if flag.startswith("--") and flag not in known:
                problems.append(f"line {number}: hadar {' '.join(path)}: {flag}")
    return problems


def _children(nodes: list[argparse.ArgumentParser], token: str) -> list[argparse.ArgumentParser]:
    """The sub-parsers ``token`` names under each of ``nodes`` (``up/down/status`` names three);
    empty unless every name is a sub-command."""
    found = [_child(node, name) for node in nodes for name in token.split("/")]
    return [c for c in found if c is not None] if all(c is not None for c in found) else []


def _child(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            child: argparse.ArgumentParser = action.choices[name]
            return child
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m hadar.cli_reference", description="Print (or --write) docs/cli.md."
    )
    ap.add_argument(
        "--write", action="store_true", help=f"write {REFERENCE.name} instead of printing it"
    )
    text = render()
    if ap.parse_args(argv).write:
        REFERENCE.write_text(text)
        print(f"wrote {REFERENCE}")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
