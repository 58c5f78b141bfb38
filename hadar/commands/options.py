"""Flags every sub-command spells the same way: one name, one default and one help text per
concept (round length, restart penalty, workload size, worker processes, output directory),
plus the global ``--log-level``/``--debug`` and the help formatter that shows every default.

Defaults that differ between the simulator and real training are named here side by side, with
the reason, so that ``--help`` of each command says which one applies.
"""

from __future__ import annotations

import argparse
import stat
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hadar.commands import argtypes
from hadar.core.defaults import PROJECT_PACKAGES, REAL_RUN, SIMULATED, WorkloadFamily
from hadar.core.errors import InputError
from hadar.core.validation import look_up

if TYPE_CHECKING:
    from rich.console import Console

LOG_LEVELS = ("debug", "info", "warning", "error")
WORKERS = argtypes.count(1, 256, "processes")
"""``--workers``: parallel processes."""


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Appends ``(default: X)`` to every option whose help does not already mention its default
    (flags, ``--help`` and options without a default are left as they are)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "%(default)" in text or "default" in text or not shows_default(action):
            return text
        return f"{text} (default: %(default)s)"


def shows_default(action: argparse.Action) -> bool:
    """Whether ``--help`` should name this action's default (a value, not a flag or nothing)."""
    return (
        action.default not in (None, argparse.SUPPRESS, [])
        and action.nargs != 0
        and action.help != argparse.SUPPRESS
    )


class _DeprecatedAlias(argparse.Action):
    """An old spelling that still works (hidden from ``--help``) and says which flag replaces it."""

    def __init__(
        self, option_strings: Sequence[str], dest: str, replacement: str = "", **kwargs: Any
    ) -> None:
        self.replacement = replacement
        super().__init__(option_strings, dest, help=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        # said by hadar.cli: a warning line after the command, or inside its one error line
        namespace.deprecated = [
            *getattr(namespace, "deprecated", []),
            f"{option_string} is deprecated, use {self.replacement}",
        ]
        setattr(namespace, self.dest, values)


def add_alias(
    p: argparse.ArgumentParser, old: str, new: str, dest: str, convert: Any = None
) -> None:
    """Keep ``old`` working as a hidden, deprecated spelling of ``new`` (same ``dest``)."""
    p.add_argument(
        old,
        dest=dest,
        action=_DeprecatedAlias,
        replacement=new,
        type=convert,
        default=argparse.SUPPRESS,
        metavar=new.lstrip("-").upper(),
    )


class DriverRound(float):
    """``--round``'s default when not typed: the driver's round, which a policy's declared
    round replaces (:func:`resolve_round`); a typed ``--round`` is a plain float and wins."""


def add_round_arg(
    p: argparse.ArgumentParser, default: float = SIMULATED.round_s, old: str | None = None
) -> None:
    """``--round SECONDS`` (dest ``round_s``); ``old`` is a deprecated spelling kept working.
    Not typed, the round is the policies' declared round, else ``default`` (:func:`resolve_round`)."""
    round_type = (
        argtypes.seconds(0, argtypes.DAY, lo_open=True)
        if default == REAL_RUN.round_s
        else argtypes.seconds(1, 7 * argtypes.DAY)
    )
    where = (
        f"in wall-clock seconds of training; the simulator's rounds default to {SIMULATED.round_s:g}"
        if default == REAL_RUN.round_s
        else f"in simulated seconds; hadar run's rounds default to {REAL_RUN.round_s:g}"
    )
    p.add_argument(
        "--round",
        dest="round_s",
        type=round_type,
        default=DriverRound(default),
        metavar="SECONDS",
        # static text: listing the declaring policies here would import every policy (and
        # highspy) to build any command's parser
        help=f"round length {where} (default: %(default)s, or the round the policy declares for "
        "itself; with several policies one common round, the shortest declared)",
    )
    if old:
        add_alias(p, old, "--round", "round_s", round_type)


def resolve_round(
    args: argparse.Namespace, policies: Sequence[str], family: WorkloadFamily | None = None
) -> str | None:
    """Set ``args.round_s`` when ``--round`` was not typed: the round of the workload's
    ``family`` (the paper's set-up, :func:`hadar.scenario.workload_family`), else the one
    common round of ``policies`` (:func:`hadar.policy.declared_round`: the shortest any
    declares, for every policy alike), else the driver's default. Returns the line saying which
    round a declared one gave (None when ``--round`` was typed, the family gave it (its own
    note, :func:`hadar.scenario.family_note`, says so) or no policy declares one)."""
    from hadar.policy import declared_round

    if not isinstance(args.round_s, DriverRound):
        return None
    if family is not None and family.round_s is not None:
        args.round_s = family.round_s
        return None
    declared = declared_round(policies)
    args.round_s = float(args.round_s if declared is None else declared.seconds)
    if declared is None:
        return None
    who = ", ".join(declared.declared_by)
    common = (
        " (the shortest declared: one common round for every policy)" if len(policies) > 1 else ""
    )
    return f"round: {declared.seconds:g} s, {who}'s declared scheduling interval{common}; --round to change"


def add_restart_penalty_arg(
    p: argparse.ArgumentParser,
    default: float = SIMULATED.restart_penalty_s,
    what: str = "the simulated checkpoint-restart cost",
    *,
    unset: bool = False,
) -> None:
    """``--restart-penalty``; with ``unset`` the parsed value is None unless the flag is given
    (so that ``--resume`` can tell a repeated value from the default), ``default`` is shown."""
    p.add_argument(
        "--restart-penalty",
        dest="restart_penalty_s",
        type=argtypes.seconds(0, argtypes.DAY),
        default=None if unset else default,
        metavar="SECONDS",
        help=f"{what}, in seconds (default: {default})",
    )


def add_gavel_compatible_arg(p: argparse.ArgumentParser, what: str = "every policy") -> None:
    """``--gavel-compatible``: run as Gavel's own simulator does (docs/baselines.md)."""
    p.add_argument(
        "--gavel-compatible",
        action="store_true",
        help=f"run {what} as Gavel's simulator does: no restart penalty (--restart-penalty is "
        "ignored), rounds end with their longest job, consolidated throughputs, Gavel reallocates "
        "at most every 1920 s (docs/baselines.md)",
    )


def add_size_arg(p: argparse.ArgumentParser, default: str = SIMULATED.size) -> None:
    from hadar.workloads.mixes import SIZES

    other = REAL_RUN.size if default == SIMULATED.size else SIMULATED.size
    p.add_argument(
        "--size",
        default=default,
        choices=SIZES,
        help=f"model size of the mixes M-1..M-12 and elastic-N (default: %(default)s; "
        f"{'hadar run' if default == SIMULATED.size else 'the simulator'} defaults to {other})",
    )


def add_workers_arg(p: argparse.ArgumentParser, default_text: str) -> None:
    """``--workers N`` (parallel processes); the old ``--jobs`` stays as a hidden alias."""
    p.add_argument(
        "--workers",
        type=WORKERS,
        default=None,
        metavar="N",
        help=f"parallel processes (default: {default_text}; 1 = one by one)",
    )
    add_alias(p, "--jobs", "--workers", "workers", WORKERS)


def add_policy_arg(p: argparse.ArgumentParser, default: str) -> None:
    """``--policy`` with the registered policies as choices (listed in ``--help``)."""
    from hadar.policy import POLICY_REGISTRY

    p.add_argument(
        "--policy",
        default=default,
        choices=sorted(POLICY_REGISTRY),
        metavar="POLICY",
        help=f"one of {', '.join(sorted(POLICY_REGISTRY))} (default: %(default)s)",
    )


def add_out_arg(p: argparse.ArgumentParser, stem: str) -> None:
    """``--out DIR``; without it a new ``out/<stem>-<time>`` directory (see :func:`output_dir`)."""
    p.set_defaults(out_stem=stem)
    p.add_argument(
        "--out",
        default=None,
        type=argtypes.out_dir,
        metavar="DIR",
        help=f"output directory (default: a new out/{stem}-YYYYmmdd-HHMMSS; "
        "an existing --out is replaced, and the command says so)",
    )


def add_out_file_arg(
    p: argparse.ArgumentParser, help: str, required: bool = False, short: bool = False
) -> None:
    """``--out FILE`` (and ``-o`` when ``short``): a file to write (see :func:`argtypes.out_file`)."""
    names = ("--out", "-o") if short else ("--out",)
    p.add_argument(
        *names,
        required=required,
        type=argtypes.out_file,
        metavar="FILE",
        help=help,
    )


INPUT_OPTIONS = ("cluster", "workload", "throughputs", "node_stream")
"""The options naming files a command reads (``--workload`` may name a built-in instead)."""


def input_files(args: argparse.Namespace) -> dict[str, str]:
    """The input files the command was given, by option (only those that name a file); a path
    the system cannot look up is refused naming its option (:func:`is_file`)."""
    named = {k: getattr(args, k, None) for k in INPUT_OPTIONS}
    return {
        k: str(v)
        for k, v in named.items()
        if isinstance(v, str | Path) and is_file(v, "--" + k.replace("_", "-"))
    }


def is_file(path: str | Path, label: str) -> bool:
    """Whether ``path`` names a regular file (through symbolic links); a path the system cannot
    look up (a name over 255 bytes, a symbolic link loop) is an :class:`InputError` naming
    ``label``: ``--workload: xxx...xxx.csv: file name too long``."""
    found = look_up(path, label)
    return found is not None and stat.S_ISREG(found.st_mode)


def refuse_output_over_input(out: str, flag: str, inputs: dict[str, str | None]) -> None:
    """One-line :class:`InputError` when the file ``out`` (given as ``flag``) is one of
    ``inputs`` (what names it -> the file read): writing it would replace the input."""
    target = Path(out).resolve()
    for source, name in inputs.items():
        if name is not None and is_file(name, source) and Path(name).resolve() == target:
            raise InputError(
                f"{flag} {out}: is the input {name} ({source}); the result would replace it, "
                "so write it to another file"
            )


def package_folders() -> list[Path]:
    """The folders of the project's packages as installed (found without importing them)."""
    import importlib.util

    found = []
    for name in PROJECT_PACKAGES:
        spec = importlib.util.find_spec(name)
        for location in (spec.submodule_search_locations or []) if spec else []:
            found.append(Path(location).resolve())
    return found


def output_dir(
    out: str | None, stem: str, now: float | None = None, inputs: dict[str, str] | None = None
) -> tuple[Path, str | None]:
    """Where a command writes, and a note when it replaces earlier results.

    Without ``out``: ``out/<stem>-<YYYYmmdd-HHMMSS>``, suffixed ``-2``, ``-3``... if that exists,
    so a run never lands on another's files. With ``out``: that directory, and a note naming it
    when it already holds files (results are replaced file by file, never silently); refused
    (:class:`InputError`) when it holds one of ``inputs`` (option -> file), which the results
    could replace."""
    if out is not None:
        path = Path(out)
        root = path.resolve()
        package = next((p for p in package_folders() if root.is_relative_to(p)), None)
        if package is not None:
            raise InputError(
                f"--out {out}: inside hadar's own package folder {package} (its bundled data "
                "and code); results replace files in --out, so choose a directory outside it"
            )
        for option, name in (inputs or {}).items():
            if Path(name).resolve().is_relative_to(root):
                flag = "--" + option.replace("_", "-")
                raise InputError(
                    f"--out {out}: holds the input {name} ({flag}); results replace files in "
                    "--out, so choose a directory that holds no input"
                )
        held = path.is_dir() and any(path.iterdir())
        return path, f"note: replacing the results in {path}/" if held else None
    base = Path("out") / f"{stem}-{time.strftime('%Y%m%d-%H%M%S', time.localtime(now))}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path, None


def announce(note: str | None, console: Console) -> None:
    """Print ``note`` (from :func:`output_dir`) on one line, when there is one."""
    if note:
        console.print(note, style="yellow", markup=False, highlight=False, soft_wrap=True)


def add_global_args(p: argparse.ArgumentParser, top: bool) -> None:
    """``--log-level`` and ``--debug``, on ``hadar`` and on every sub-command (either place works;
    on sub-commands their default is SUPPRESS so they do not reset what ``hadar --debug`` set)."""
    g = p.add_argument_group("diagnostics")
    g.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        type=str.lower,
        default="warning" if top else argparse.SUPPRESS,
        help="how much the libraries and the runtime log to stderr (default: warning)",
    )
    g.add_argument(
        "--debug",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="show the traceback behind an error (and log at debug level)",
    )
