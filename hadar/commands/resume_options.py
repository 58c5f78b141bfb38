"""``hadar run --resume``: which run options the user typed, and refusing every one that
conflicts with the run (one line naming it). A run's inputs and settings are in ``run.json``;
repeating an option with the run's value is fine, another value is refused, and options that
only steer this session (``--no-live``, ``--force``, ``--trust-new-hosts``,
``--keep-node-dirs``, ``--stall-rounds``) may be given.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hadar.core.cluster_config import resolve_cluster_path
from hadar.core.errors import InputError
from hadar.runtime.config import RunConfig
from hadar.workloads import is_builtin

SESSION_OPTIONS = frozenset(
    {"resume", "no_live", "force", "trust_new_hosts", "keep_node_dirs", "stall_rounds"}
)
"""Destinations of options that steer one session of a run, not the run."""


class _Given(argparse.Action):
    """Records the option's destination in ``namespace.given`` when the command line names it."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        namespace.given = {*getattr(namespace, "given", ()), self.dest}
        super().__call__(parser, namespace, values, option_string)


def track_given(parser: argparse.ArgumentParser) -> None:
    """Make every option of ``parser`` record itself in ``args.given`` when typed (a default
    is not typed: it cannot conflict with anything)."""
    for action in parser._actions:
        if action.option_strings and not isinstance(action, argparse._HelpAction):
            cls = type(action)
            action.__class__ = type(f"Given{cls.__name__}", (_Given, cls), {})


def _file(kind: str) -> Callable[[str], object]:
    """How a typed cluster/workload compares with the recorded one: the same file wherever it
    was named from, or the same built-in name."""
    if kind == "cluster":
        return lambda v: resolve_cluster_path(v).resolve()
    return lambda v: v if is_builtin(v) else Path(v).resolve()


def _same(value: object) -> object:
    return value


# option destination -> (flag, the run's value, how to compare)
def _recorded(cfg: RunConfig) -> dict[str, tuple[str, object, Callable[[Any], object]]]:
    return {
        "cluster": ("--cluster", cfg.cluster, _file("cluster")),
        "workload": ("--workload", cfg.workload, _file("workload")),
        "size": ("--size", cfg.size, _same),
        "policy": ("--policy", cfg.policy, _same),
        "round_s": ("--round", cfg.round_s, float),
        "grace_s": ("--grace", cfg.grace_s, float),
        "seed": ("--seed", cfg.seed, int),
        "threads": ("--threads", cfg.threads, int),
        "no_eval": ("--no-eval", not cfg.evaluate, bool),
        "cold_workers": ("--cold-workers", not cfg.warm_workers, bool),
        "keep_checkpoints": ("--keep-checkpoints", cfg.keep_checkpoints, int),
        "node_stream": ("--node-stream", cfg.node_stream, lambda v: v and Path(v).resolve()),
    }


def check_resume_options(args: argparse.Namespace, cfg: RunConfig, rundir: Path) -> None:
    """One-line :class:`InputError` for the first typed option that conflicts with the run in
    ``rundir`` (``--out`` always does: the run's directory is ``--resume``'s)."""
    given: set[str] = set(getattr(args, "given", ()))
    if "out" in given:
        raise InputError(
            f"--out: not with --resume (the run's directory is {rundir}; start a new run "
            "without --resume to write elsewhere)"
        )
    recorded = _recorded(cfg)
    for dest in sorted(given - SESSION_OPTIONS):
        if dest not in recorded:
            continue  # the policy options have their own check (commands/run.py)
        flag, was, key = recorded[dest]
        value = getattr(args, dest)
        if key(value) == key(was):
            continue
        what = (
            "this run was started without it"
            if isinstance(value, bool)
            else f"{_show(value)} differs from this run's {_show(was)}"
        )
        raise InputError(
            f"{flag}: {what} (fixed for the run in {rundir}; start a new run with --out to "
            "change it)"
        )


def _show(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
