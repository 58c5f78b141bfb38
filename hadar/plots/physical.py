"""Figures of the paper's physical evaluation (section VI): Fig. 8 (CRU per mix), Fig. 9 (TTD),
Fig. 10 (average JCT with min-max range marks) and Fig. 11/12 (CRU vs slot time).

Each function takes ``{panel (cluster): {group (mix): {series (policy or slot): value}}}``, draws
one panel per cluster side by side ((a), (b), ... as in the paper) with grouped bars, writes a PNG
and returns its path. Built on ``matplotlib.figure.Figure`` (Agg), like :mod:`hadar.plots.figures`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
from matplotlib.artist import Artist
from matplotlib.figure import Figure

from hadar.plots.figures import _save
from hadar.plots.palette import series_colours

Panels = Mapping[str, Mapping[str, Mapping[str, float | None]]]
Ranges = Mapping[str, Mapping[str, Mapping[str, tuple[float, float] | None]]]
Marks = Mapping[str, Mapping[str, Mapping[str, float | None]]]


def _grouped_bars(
    panels: Panels,
    path: str | Path,
    ylabel: str,
    title: str,
    scale: float = 1.0,
    ranges: Ranges | None = None,
    marks: Marks | None = None,
    ymax: float | None = None,
    legend_title: str | None = None,
) -> Path:
    """Shared drawing: grouped bars per panel, optional [lo, hi] range marks per bar and
    horizontal marks per group (e.g. lower bounds, drawn as short dashes across the group)."""
    names = list(panels)
    fig = Figure(figsize=(max(6.0, 5.2 * len(names)), 3.9))
    axes = fig.subplots(1, max(1, len(names)), squeeze=False)[0]
    series = list(dict.fromkeys(s for p in panels.values() for g in p.values() for s in g))
    mark_styles = ("-", "--", ":")
    colours = series_colours(series)
    for ax, (letter, name) in zip(axes, zip("abcdefghij", names, strict=False), strict=False):
        groups = list(panels[name])
        x = np.arange(len(groups), dtype=float)
        width = 0.8 / max(1, len(series))
        for i, s in enumerate(series):
            vals = np.array(
                [(panels[name][g].get(s) or np.nan) * scale for g in groups], dtype=float
            )
            pos = x - 0.4 + width * (i + 0.5)
            ax.bar(pos, np.nan_to_num(vals), width, label=s, color=colours[s])
            if ranges is not None:
                lo_hi = [ranges.get(name, {}).get(g, {}).get(s) for g in groups]
                spans = [
                    (k, r) for k, r in enumerate(lo_hi) if r is not None and np.isfinite(vals[k])
                ]
                ok = [k for k, _ in spans]
                if ok:
                    lo = np.array([vals[k] - r[0] * scale for k, r in spans])
                    hi = np.array([r[1] * scale - vals[k] for k, r in spans])
                    ax.errorbar(
                        pos[ok],
                        vals[ok],
                        yerr=[np.maximum(lo, 0), np.maximum(hi, 0)],
                        fmt="none",
                        ecolor="black",
                        elinewidth=0.9,
                        capsize=2.5,
                    )
        if marks is not None:
            labels = list(dict.fromkeys(m for g in marks.get(name, {}).values() for m in g))
            for j, label in enumerate(labels):
                first = True
                for k, g in enumerate(groups):
                    v = marks.get(name, {}).get(g, {}).get(label)
                    if v is not None:
                        ax.hlines(
                            v * scale,
                            x[k] - 0.45,
                            x[k] + 0.45,
                            colors="black",
                            linestyles=mark_styles[j % len(mark_styles)],
                            lw=1.2,
                            label=label if first else None,
                        )
                        first = False
        ax.set_xticks(x)
        ax.set_xticklabels(groups)
        ax.set_ylabel(ylabel)
        if ymax is not None:
            ax.set_ylim(0, ymax)
        ax.set_title(f"({letter}) {name}")
        ax.grid(axis="y", alpha=0.3)
    uniq: dict[str, Artist] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            uniq.setdefault(label, handle)
    fig.legend(
        list(uniq.values()),
        list(uniq.keys()),
        loc="lower center",
        ncol=min(6, len(uniq)),
        fontsize=8,
        title=legend_title,
        title_fontsize=8,
        bbox_to_anchor=(0.5, 0.99),
    )
    fig.suptitle(title, y=1.1 if legend_title is None else 1.18)
    return _save(fig, path)


def cru_by_mix(
    cru: Panels, path: str | Path, title: str = "Cluster resource utilisation (CRU) per mix"
) -> Path:
    """Paper Fig. 8: ``cru[cluster][mix][policy]`` (fraction), bars in percent."""
    return _grouped_bars(cru, path, "CRU (%)", title, scale=100.0, ymax=105.0)


def ttd_by_mix(
    ttd_s: Panels,
    path: str | Path,
    bounds_s: Marks | None = None,
    title: str = "Total time duration (TTD) per mix",
) -> Path:
    """Paper Fig. 9: ``ttd_s[cluster][mix][policy]`` in seconds; ``bounds_s[cluster][mix][label]``
    draws lower bounds as horizontal marks across each mix's bars."""
    return _grouped_bars(ttd_s, path, "TTD (s)", title, marks=bounds_s)


def jct_by_mix(
    avg_jct_s: Panels,
    path: str | Path,
    ranges_s: Ranges | None = None,
    title: str = "Average job completion time (JCT) per mix, min-max range marked",
) -> Path:
    """Paper Fig. 10: ``avg_jct_s[cluster][mix][policy]``; ``ranges_s[...][policy] = (min, max)`` JCT."""
    return _grouped_bars(avg_jct_s, path, "average JCT (s)", title, ranges=ranges_s)


def cru_by_round(cru: Panels, path: str | Path, policy: str, title: str | None = None) -> Path:
    """Paper Fig. 11 (HadarE) / Fig. 12 (Hadar): ``cru[cluster][mix][round label]`` (fraction)."""
    return _grouped_bars(
        cru,
        path,
        "CRU (%)",
        title or f"CRU vs round length per mix: {policy}",
        scale=100.0,
        ymax=105.0,
        legend_title="round length",
    )
