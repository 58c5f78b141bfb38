"""Older spellings of renamed concepts, kept readable (docs/glossary.md): the one place that
spells them. Code uses the new names only; what a user could still hand over in an old spelling
(a keyword of the Python API, an attribute a policy plug-in reads, a key of a saved run file) is
mapped here. ``tests/packaging/test_one_name.py`` fails if an old spelling appears elsewhere."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, TypeVar

from hadar.core.errors import InputError

RENAMED: Mapping[str, str] = {
    "round_length": "round_s",  # SimConfig, RoundContext, hadar.simulate / compare
    "slot_s": "round_s",  # run.json, a run's summary.json, the physical experiment's results.csv
    "restart_penalty": "restart_penalty_s",  # RoundContext, hadar.simulate, the experiment cells
}
"""Old name -> the concept's one name."""

P = ParamSpec("P")
R = TypeVar("R")


def current_keys(given: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``given`` with every old key replaced by its new name; InputError when both are given."""
    out = dict(given)
    for old, new in RENAMED.items():
        if old in out:
            if new in out:
                raise InputError(f"{where}: {old!r} and {new!r} are one setting; give {new!r} only")
            out[new] = out.pop(old)
    return out


def renamed_attribute(owner: object, name: str) -> Any:
    """``owner.<new name>`` for an old attribute ``name`` (a DeprecationWarning says the new one);
    AttributeError for any other missing attribute. For a class's ``__getattr__``."""
    new = RENAMED.get(name)
    if new is None:
        raise AttributeError(f"{type(owner).__name__!r} object has no attribute {name!r}")
    warnings.warn(
        f"{type(owner).__name__}.{name} is deprecated, use {new}", DeprecationWarning, stacklevel=3
    )
    return getattr(owner, new)


def accepts_old_keywords(func: Callable[P, R]) -> Callable[P, R]:
    """Let ``func`` take its renamed keyword arguments in their old spelling (with a
    DeprecationWarning naming the new one)."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        old = sorted(set(kwargs) & set(RENAMED))
        if old:
            warnings.warn(
                f"{func.__name__}(): "
                + ", ".join(f"{k}= is deprecated, use {RENAMED[k]}=" for k in old),
                DeprecationWarning,
                stacklevel=2,
            )
            kwargs = current_keys(kwargs, f"{func.__name__}()")  # type: ignore[assignment]
        return func(*args, **kwargs)

    return wrapper
