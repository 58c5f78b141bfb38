"""One colour (and line style) per policy, used by every figure: Gavel is the same orange in
``hadar compare``, the physical-evaluation figures and the load sweep.

The colour, line style, marker and width are the ones the policy declares in the registry
(``PolicyInfo.colour`` and ``PolicyInfo.line``, :mod:`hadar.policy`). Series
that are not registered policies (slot lengths, a policy that declares no colour) take
:data:`OTHER_COLOURS`, which no policy uses, in the figure's order (:func:`series_colours`).
"""

from __future__ import annotations

from dataclasses import dataclass

from matplotlib import colormaps
from matplotlib.colors import to_hex

from hadar.policy import POLICY_REGISTRY, LineStyle, find_policy_info


@dataclass(frozen=True)
class Style:
    """How one series is drawn: colour, line style, marker and line width."""

    colour: str
    line: str = "-"
    marker: str = "o"
    width: float = 1.6


OTHER_COLOURS = ("#7f7f7f", "#bcbd22", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173")
"""Colours for series without a declared colour: grey, olive and tab20b's darks, none of which
a registered policy declares (``tests/hadar/plots/test_palette.py``)."""


def policy_colour(name: str) -> str | None:
    """The colour policy ``name`` declares, as ``#rrggbb`` (None: not registered, or none)."""
    info = find_policy_info(name)
    return to_hex(info.colour) if info is not None and info.colour else None


def series_colours(names: list[str]) -> dict[str, str]:
    """Colours for the series of one figure: policies keep their declared colour; the other
    series take :data:`OTHER_COLOURS` in the given order, so they never clash there."""
    others = iter(OTHER_COLOURS * (1 + len(names) // len(OTHER_COLOURS)))
    return {n: policy_colour(n) or next(others) for n in names}


CLASS_COLOURMAPS = ("Set2", "Pastel1", "Set3", "Pastel2", "Accent")
"""Qualitative colour maps job classes (the models in an occupancy chart) are drawn from: light
and mid tones, apart from the policies' saturated ones."""


def class_colours(n: int) -> list[str]:
    """``n`` colours for job classes, none a policy's or :data:`OTHER_COLOURS` (a figure that
    shows policies and job classes never makes a job class look like a policy); repeats only
    beyond the distinct ones :data:`CLASS_COLOURMAPS` hold."""
    taken = {c for name in POLICY_REGISTRY if (c := policy_colour(name))} | set(OTHER_COLOURS)
    free: list[str] = []
    for name in CLASS_COLOURMAPS:
        cmap = colormaps[name]
        for i in range(cmap.N):
            c = to_hex(cmap(i))
            if c not in taken and c not in free:
                free.append(c)
    return [free[i % len(free)] for i in range(n)]


def policy_line(name: str) -> LineStyle:
    """The line style policy ``name`` declares (``PolicyInfo.line``; the default for a series
    that is not a registered policy)."""
    info = find_policy_info(name)
    return info.line if info is not None else LineStyle()


def series_styles(names: list[str]) -> dict[str, Style]:
    """Colour, line style, marker and width of each series of one figure."""
    out = {}
    for n, c in series_colours(names).items():
        line = policy_line(n)
        out[n] = Style(c, line.line, line.marker, line.width)
    return out
