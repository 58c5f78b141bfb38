"""Dividing a job's remaining steps among its copies for one round (pure functions).

Budgets make a job's copies finish together: proportional to their throughputs when they have
the same usable seconds, else each stops at the same moment. When the job can finish this round,
only the fastest copies that suffice are kept
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
    """Step budget per node; the budgets sum to ``remaining``. Copies with the same usable
    seconds get budgets proportional to rate (they finish together). When their seconds differ
    (a restart, a refill starting mid-round), a job that can finish this round has budgets that
    make every copy stop at the same moment (the latest copy may get none), and one that cannot
    gives each copy all it can do plus a share of the rest by rate, so no copy stops early."""
    total = sum(c.rate for c in copies)
    if total <= 0:
        return {c.node: 0.0 for c in copies}
    if len(copies) == 1:  # exactly what is left (remaining x rate / rate may be an ulp short)
        return {copies[0].node: remaining}
    if len({c.seconds for c in copies}) <= 1:
        return {c.node: remaining * c.rate / total for c in copies}
    capacity = sum(c.capacity for c in copies)
    if capacity <= remaining:
        extra = remaining - capacity
        return {c.node: c.capacity + extra * c.rate / total for c in copies}
    # every copy stops ``spare`` seconds before its usable time ends:
    # sum over copies of rate x max(0, seconds - spare) = remaining, piecewise linear in spare
    ordered = sorted(copies, key=lambda c: -c.seconds)
    rate_sum = weighted = 0.0
    spare = 0.0
    for k, c in enumerate(ordered):
        rate_sum += c.rate
        weighted += c.rate * c.seconds
        if rate_sum <= 0:
            continue
        spare = (weighted - remaining) / rate_sum
        following = ordered[k + 1].seconds if k + 1 < len(ordered) else float("-inf")
        if spare >= following:
            break
    return {c.node: c.rate * max(0.0, c.seconds - spare) for c in copies}
