"""One colour per policy in every figure (hadar/plots/palette.py), whatever the figure's order
or company, and series that are not policies never take a policy's colour."""

from __future__ import annotations

from matplotlib.colors import to_hex

from hadar.plots.figures import completion_figure
from hadar.plots.palette import OTHER_COLOURS, POLICY_STYLES, series_colours, series_styles


def _line_colours(names: list[str]) -> dict[str, str]:
    finish = {n: [600.0 * (i + 1), 1200.0 * (i + 1)] for i, n in enumerate(names)}
    fig = completion_figure(finish, {n: 2 for n in names})
    ax = fig.axes[0]
    out = {}
    for line in ax.lines:
        label = str(line.get_label())
        if ":" in label:  # the curve's legend entry: "<policy>: median ..."
            out[label.split(":")[0]] = to_hex(line.get_color())
    return out


def test_a_policy_keeps_its_colour_across_figures() -> None:
    two = _line_colours(["gavel", "hadar"])
    four = _line_colours(["tiresias", "hadar", "yarn-cs", "gavel"])
    assert two["gavel"] == four["gavel"] == POLICY_STYLES["gavel"].colour
    assert two["hadar"] == four["hadar"] == POLICY_STYLES["hadar"].colour


def test_hadare_is_drawn_apart_from_hadar() -> None:
    hadar, hadare = POLICY_STYLES["hadar"], POLICY_STYLES["hadare"]
    assert hadar.colour != hadare.colour and hadar.line != hadare.line
    assert hadar.width > hadare.width  # the wide solid line stays visible under the dashed one


def test_other_series_never_take_a_policy_colour() -> None:
    policy_colours = {s.colour for s in POLICY_STYLES.values()}
    assert len(policy_colours) == len(POLICY_STYLES)
    assert not policy_colours & set(OTHER_COLOURS)
    slots = series_colours(["90 s", "180 s", "360 s", "hadar"])
    assert slots["hadar"] == POLICY_STYLES["hadar"].colour
    assert [slots[s] for s in ("90 s", "180 s", "360 s")] == list(OTHER_COLOURS[:3])
    assert series_styles(["new-policy"])["new-policy"].colour == OTHER_COLOURS[0]
