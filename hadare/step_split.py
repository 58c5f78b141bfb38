"""Dividing a job's remaining steps among its copies for one round (pure functions).

Budgets are proportional to the copies' throughputs, so copies that run the whole round finish
together. When the job can finish this round, only the fastest copies that suffice are kept
(the paper's "the fastest nodes finish the remainder"), freeing the other nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class CopySlot:
    """A scheduled copy: its node, throughput (steps/s) and usable seconds this round."""

    node: str
    rate: float
    seconds: float

    @property
    def capacity(self) -> float:
        return max(0.0, self.rate * self.seconds)


def finishing_subset(copies: Sequence[CopySlot], remaining: float) -> list[CopySlot]:
    """The copies to keep: all of them if the job cannot finish this round, else the fewest
    fastest copies (by steps they can do this round) that finish it within the round; copies
    that can do as many steps are taken in the order given (never by node name)."""
    if sum(c.capacity for c in copies) < remaining:
        return list(copies)
    kept: list[CopySlot] = []
    for c in sorted(copies, key=lambda c: -c.capacity):  # ties: the order given (node order)
        kept.append(c)
        # with budgets proportional to rates, the kept copies all stop at remaining / sum(rate)
        finish = remaining / sum(k.rate for k in kept)
        if all(finish <= k.seconds for k in kept):
            break
    return kept


def split_steps(copies: Sequence[CopySlot], remaining: float) -> dict[str, float]:
    """Step budget per node, proportional to rate; the budgets sum to ``remaining``."""
    total = sum(c.rate for c in copies)
    if total <= 0:
        return {c.node: 0.0 for c in copies}
    return {c.node: remaining * c.rate / total for c in copies}
