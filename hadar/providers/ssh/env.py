"""A node's environment for a run: the ``setup:`` commands (run once per run, e.g. ``conda
activate``, ``pip install``) and, when asked, the user's login shell, captured as variables.

Setup runs in one shell; afterwards ``env -0`` prints its environment, and every variable the
setup (or the login shell's profile) added or changed is applied to each later command of the
run. So ``conda activate hadar`` in ``setup:`` puts the environment's ``python`` first on
``PATH`` (and sets ``CONDA_PREFIX``, ``LD_LIBRARY_PATH`` ...) for the worker, without running
the setup again for every command.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MARKER = "HADAR-SETUP-ENV"
# Shell bookkeeping that says nothing about the environment a command should run in.
IGNORED = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "PS1", "PS2", "PS4"})


def capture_command(setup: Sequence[str], login_shell: bool) -> str:
    """A shell command printing the environment before (NUL-separated), a marker, and after the
    ``setup`` lines (run with ``set -e`` in one shell; their stdout goes to stderr)."""
    body = "\n".join(["set -e", "exec 3>&1 1>&2 </dev/null", *setup, "exec 1>&3 3>&-", "env -0"])
    shell = '"${SHELL:-/bin/sh}" -l -c' if login_shell else "sh -c"
    return f"env -0; printf '\\0%s\\0' {MARKER}; exec {shell} {shlex.quote(body)}"


def _parse_env0(blob: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in blob.split("\0"):
        key, sep, value = item.partition("=")
        if sep and ENV_NAME_RE.match(key):
            out[key] = value
    return out


def captured_changes(stdout: str) -> dict[str, str] | None:
    """Variables that differ after the setup (None if the output is not the capture's)."""
    before, sep, after = stdout.partition(f"\0{MARKER}\0")
    if not sep:
        return None
    old, new = _parse_env0(before), _parse_env0(after)
    return {k: v for k, v in new.items() if k not in IGNORED and old.get(k) != v}


def env_prefix(env: Mapping[str, str]) -> str:
    """``env K=V ...`` (shell-quoted) or an empty string when there is nothing to set."""
    if not env:
        return ""
    return "env " + " ".join(f"{k}={shlex.quote(str(v))}" for k, v in env.items()) + " "
