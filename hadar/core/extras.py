"""Optional dependencies: which extra provides what, and one error line when one is missing.

The base install (``pip install hadar-scheduler``) simulates and compares. Training needs
``[train]`` (torch), SSH nodes ``[ssh]`` (paramiko), AWS ``[aws]`` (boto3), figures ``[plots]``
(matplotlib), distributed sweeps ``[ray]``; ``[all]`` is everything but Ray.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from hadar.core.errors import MissingExtraError

DISTRIBUTION = "hadar-scheduler"
"""The name on the package index (``hadar`` there is an unrelated project)."""

EXTRA_OF_MODULE = {
    "torch": "train",
    "paramiko": "ssh",
    "boto3": "aws",
    "botocore": "aws",
    "matplotlib": "plots",
    "ray": "ray",
    "tenacity": "ssh",
}
"""Top-level module -> the extra that installs it."""


def install_hint(module: str) -> str:
    """``pip install 'hadar-scheduler[EXTRA]'`` for ``module``."""
    extra = EXTRA_OF_MODULE.get(module.split(".")[0], "all")
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
        if missing not in EXTRA_OF_MODULE:
            raise  # not an optional dependency: a real bug, keep its traceback
        raise MissingExtraError(
            f"{purpose} needs {missing}, which is not installed: {install_hint(missing)}"
        ) from None


def plots_missing_note(what: str) -> str | None:
    """None when matplotlib is installed; else one line saying ``what`` was not drawn and why.
    Results (CSV/JSON) never depend on it: only the PNGs are skipped."""
    if available("matplotlib"):
        return None
    return f"note: {what} not drawn: matplotlib is not installed ({install_hint('matplotlib')})"
