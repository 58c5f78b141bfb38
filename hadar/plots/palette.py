"""One colour (and line style) per policy, used by every figure: Gavel is the same orange in
``hadar compare``, the physical-evaluation figures and the load sweep.

Keyed by policy name so that the policy registry can feed it later; series it does not know (a
new policy, slot lengths) take :data:`OTHER_COLOURS`, which no policy uses, in the figure's
order (:func:`series_colours`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Style:
    """How one policy is drawn: colour, line style, marker and line width."""

    colour: str
    line: str = "-"
    marker: str = "o"
    width: float = 1.6


POLICY_STYLES: dict[str, Style] = {
    # hadar is drawn wide and solid, hadare narrow and dashed on top of it: where the two
    # curves coincide (small workloads) both stay visible
    "hadar": Style("#1f77b4", "-", "o", 3.0),
    "hadare": Style("#9467bd", "--", "s", 1.5),
    "gavel": Style("#ff7f0e", "-", "^", 1.6),
    "tiresias": Style("#2ca02c", "-.", "D", 1.6),
    "yarn-cs": Style("#d62728", ":", "v", 1.8),
}
"""The policies every figure shows (colours from matplotlib's tab10, each used once)."""

OTHER_COLOURS = ("#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939")
"""Colours for series the table does not name (none of them is a policy's)."""


def style(name: str, fallback: str = OTHER_COLOURS[2]) -> Style:
    """The style of policy ``name`` (solid, ``fallback``-coloured for a name it does not know)."""
    return POLICY_STYLES.get(name, Style(fallback))


def series_styles(names: list[str]) -> dict[str, Style]:
    """Styles for the series of one figure: policies keep theirs; other series (slot lengths,
    new policies) take :data:`OTHER_COLOURS` in the given order, so they never clash there."""
    colours = series_colours(names)
    return {n: style(n, colours[n]) for n in names}


def series_colours(names: list[str]) -> dict[str, str]:
    """Colours for the series of one figure: policies keep theirs; other series (slot lengths,
    job classes) take :data:`OTHER_COLOURS` in the given order, so they never clash there."""
    others = iter(OTHER_COLOURS * (1 + len(names) // len(OTHER_COLOURS)))
    return {n: POLICY_STYLES[n].colour if n in POLICY_STYLES else next(others) for n in names}
