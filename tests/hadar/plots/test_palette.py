"""One colour per policy in every figure (the colour its registry entry declares, the line
style from hadar/plots/palette.py), whatever the figure's order or company; series that are not
policies never take a policy's colour."""

from __future__ import annotations

from matplotlib.colors import to_hex

from hadar.plots.figures import completion_figure
from hadar.plots.palette import OTHER_COLOURS, policy_colour, series_colours, series_styles
from hadar.policy import POLICY_REGISTRY, find_policy_info


def _line_colours(names: list[str]) -> dict[str, str]:
    finish = {n: [600.0 * (i + 1), 1200.0 * (i + 1)] for i, n in enumerate(names)}
    fig = completion_figure(finish, {n: 2 for n in names})
    out = {}
    for line in fig.axes[0].lines:
        label = str(line.get_label())
        if ":" in label:  # the curve's legend entry: "<policy>: median ..."
            out[label.split(":")[0]] = to_hex(line.get_color())
    return out


def test_a_policy_keeps_its_declared_colour_across_figures() -> None:
    two = _line_colours(["gavel", "hadar"])
    four = _line_colours(["tiresias", "hadar", "yarn-cs", "gavel"])
    for name in ("gavel", "hadar"):
        info = find_policy_info(name)
        assert info is not None and info.colour
        assert two[name] == four[name] == to_hex(info.colour)


def test_hadare_is_drawn_apart_from_hadar() -> None:
    assert policy_colour("hadar") != policy_colour("hadare")
    styles = series_styles(["hadar", "hadare"])
    hadar, hadare = styles["hadar"], styles["hadare"]
    assert (
        hadar.line != hadare.line and hadar.width > hadare.width
    )  # the wide solid line stays visible under the dashed one


def test_other_series_never_take_a_policy_colour() -> None:
    declared = [c for name in POLICY_REGISTRY if (c := policy_colour(name))]
    assert len(set(declared)) == len(declared), "two policies declare the same colour"
    assert not set(declared) & set(OTHER_COLOURS)
    slots = series_colours(["90 s", "180 s", "360 s", "hadar"])
    assert slots["hadar"] == policy_colour("hadar")
    assert [slots[s] for s in ("90 s", "180 s", "360 s")] == list(OTHER_COLOURS[:3])
    assert series_styles(["not-a-policy"])["not-a-policy"].colour == OTHER_COLOURS[0]


def test_job_classes_in_the_occupancy_chart_never_take_a_policy_colour(
    tmp_path, monkeypatch
) -> None:
    """The occupancy chart colours job classes (models); a class drawn in Gavel's orange or
    Hadar's blue would read as that policy in the figures next to it."""
    import hadar.plots.figures as figures
    from hadar.plots.palette import class_colours

    declared = {c for name in POLICY_REGISTRY if (c := policy_colour(name))}
    colours = class_colours(12)
    assert len(set(colours)) == 12 and not set(colours) & (declared | set(OTHER_COLOURS))
    drawn: list[str] = []
    save = figures._save

    def keep(fig, path):  # the legend's patches, as drawn
        drawn.extend(to_hex(h.get_facecolor()) for h in fig.axes[0].get_legend().legend_handles)
        return save(fig, path)

    monkeypatch.setattr(figures, "_save", keep)
    classes = {j: f"model-{j}" for j in range(6)}
    placements = [(0, j, "n", "v100", 1) for j in range(6)]
    path = figures.occupancy_chart(
        [("n", {"v100": 6})], placements, [(0, 0.0, 60.0)], classes, tmp_path / "o.png"
    )
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert drawn == colours[:6]
