""" "Did you mean" hints for a mistyped name (command, flag, policy, workload, cluster)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def close_matches(word: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` candidates close to ``word``, best first (case-insensitive; ties in the
    candidates' sorted order, so the hint never depends on where the names came from)."""
    names = sorted(set(candidates))
    lowered = {name.lower(): name for name in names}
    found = difflib.get_close_matches(word.lower(), list(lowered), n=n, cutoff=0.6)
    return [lowered[f] for f in found]


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` (or ``'x' or 'y'``) when a candidate is close, else ``""``."""
    found = close_matches(word, candidates)
    if not found:
        return ""
    return "; did you mean " + " or ".join(repr(f) for f in found) + "?"
