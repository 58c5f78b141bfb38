"""Optional dependencies: which extra provides what, and one error line when one is missing.

The base install (``pip install hadar-scheduler``) simulates and compares. Training needs
``[train]`` (torch), SSH nodes ``[ssh]`` (paramiko), AWS ``[aws]`` (boto3), figures ``[plots]``
(matplotlib), distributed sweeps ``[ray]``; ``[all]`` is everything but Ray.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from functools import lru_cache
from importlib import metadata
from types import ModuleType

from hadar.core.errors import MissingExtraError

DISTRIBUTION = "hadar-scheduler"
"""The name on the package index (``hadar`` there is an unrelated project)."""

DEVELOPMENT_EXTRAS = frozenset({"test"})
"""Extras for working on the project, not for using it."""


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


@lru_cache(maxsize=1)
def extras_of_modules() -> dict[str, str]:
    """Top-level module -> the first extra that installs it, read from the installed
    distribution's metadata: the extras in ``pyproject.toml`` are the one list (a provider's new
    extra needs no edit here). A distribution's name stands for its module (``paramiko``);
    empty when the package is not installed (run from a bare source tree)."""
    try:
        requirements = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        return {}
    out: dict[str, str] = {}
    for requirement in requirements:
        name = re.match(r"[A-Za-z0-9._-]+", requirement)
        extra = re.search(r"""extra\s*==\s*["']([^"']+)["']""", requirement)
        if name is None or extra is None or extra.group(1) in DEVELOPMENT_EXTRAS:
            continue
        if _normal(name.group()) != _normal(DISTRIBUTION):  # `all` names the others
            out.setdefault(_normal(name.group()), extra.group(1))
    return out


def install_hint(module: str) -> str:
    """``pip install 'hadar-scheduler[EXTRA]'`` for ``module``."""
    extra = extras_of_modules().get(_normal(module.split(".")[0]), "all")
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def available(module: str) -> bool:
    """True when ``module`` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def require(module: str, purpose: str) -> ModuleType:
    """Import ``module`` or raise one line naming the purpose and the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing = (exc.name or "").split(".")[0]
        known = extras_of_modules()
        if known and _normal(missing) not in known:
            raise  # not an optional dependency: a real bug, keep its traceback
        raise _missing(missing, purpose) from None


def require_installed(module: str, purpose: str) -> None:
    """:func:`require`'s error line when ``module`` is not installed, without importing it: a
    command that may still refuse its input (``hadar run``) does not pay for the import first."""
    if not available(module):
        raise _missing(module.split(".")[0], purpose)


def _missing(module: str, purpose: str) -> MissingExtraError:
    return MissingExtraError(
        f"{purpose} needs {module}, which is not installed: {install_hint(module)}"
    )


def plots_missing_note(what: str) -> str | None:
    """None when matplotlib is installed; else one line saying ``what`` was not drawn and why.
    Results (CSV/JSON) never depend on it: only the PNGs are skipped."""
    if available("matplotlib"):
        return None
    return f"note: {what} not drawn: matplotlib is not installed ({install_hint('matplotlib')})"
