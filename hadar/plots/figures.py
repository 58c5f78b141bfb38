"""One function per figure; each writes a PNG and returns its path.

Figures are built on ``matplotlib.figure.Figure`` (Agg canvas) rather than pyplot, so they work
without a display and from worker processes, and leave no global state behind.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from hadar.core.io import write_figure
from hadar.plots.palette import OTHER_COLOURS, class_colours, series_colours, series_styles

DPI = 120


def _save(fig: Figure, path: str | Path) -> Path:
    return write_figure(path, fig, dpi=DPI, bbox_inches="tight")


def gru_bars(
    gru: Mapping[str, float], path: str | Path, title: str = "GPU resource utilisation (GRU)"
) -> Path:
    """Paper Fig. 3: one bar per policy."""
    fig = Figure(figsize=(6, 3.6))
    ax = fig.add_subplot()
    names = list(gru)
    values = [100.0 * gru[n] for n in names]
    colours = series_colours(names)
    bars = ax.bar(names, values, color=[colours[n] for n in names])
    for bar, v in zip(bars, values, strict=True):
        ax.annotate(
            f"{v:.1f}%",
            (bar.get_x() + bar.get_width() / 2, v),
            ha="center",
            va="bottom",
            fontsize=9,
        )
    ax.set_ylabel("GRU (%)")
    ax.set_ylim(0, max([100.0, *values]) * 1.08)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def completion_cdf(
    finish_s: Mapping[str, Sequence[float]],
    totals: Mapping[str, int],
    path: str | Path,
    title: str = "Cumulative fraction of jobs completed",
) -> Path:
    """Paper Fig. 4 as a PNG (see :func:`completion_figure`)."""
    return _save(completion_figure(finish_s, totals, title), path)


def completion_figure(
    finish_s: Mapping[str, Sequence[float]],
    totals: Mapping[str, int],
    title: str = "Cumulative fraction of jobs completed",
) -> Figure:
    """Paper Fig. 4: fraction of jobs completed over time, on a log time axis (hours) so that
    the many short jobs and the long tail are both readable. Each policy's median (50 % of its
    jobs done) is a dotted drop line, a marker, and the time in its legend entry.

    ``finish_s[policy]``: completion times in seconds from the first arrival (finished jobs);
    ``totals[policy]``: number of jobs in the workload.
    """
    fig = Figure(figsize=(7, 4.4))
    ax = fig.add_subplot()
    firsts = [min(t) for t in finish_s.values() if len(t)]
    left = max(min(firsts) / 3600.0 / 1.5, 1e-3) if firsts else 1e-3
    styles = series_styles(list(finish_s))
    for name, times in finish_s.items():
        t = np.maximum(np.sort(np.asarray(times, dtype=float)) / 3600.0, left)
        frac = np.arange(1, len(t) + 1) / max(1, totals[name])
        st = styles[name]
        color = st.colour
        median = median_hours(t, totals[name])
        label = (
            f"{name}: median {_hours_text(median)}"
            if median is not None
            else f"{name}: median not reached"
        )
        ax.step(
            np.concatenate([[left], t]),
            np.concatenate([[0.0], frac]),
            where="post",
            color=color,
            lw=st.width,
            ls=st.line,
            label=label,
        )
        if median is not None:
            ax.plot([median, median], [0.0, 0.5], color=color, lw=1, ls=":")
            ax.plot([median], [0.5], marker=st.marker, color=color, ms=7, markeredgecolor="white")
    ax.axhline(0.5, color="gray", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set_xlim(left=left)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("time since the first arrival (hours, log scale)")
    ax.set_ylabel("fraction of jobs completed")
    ax.set_ylim(0, 1.02)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(
        loc="upper left",
        fontsize=8,
        title="dotted drop line = median (50 % of jobs done)",
        title_fontsize=7,
    )
    return fig


def median_hours(sorted_hours: Sequence[float] | np.ndarray, total: int) -> float | None:
    """When half of ``total`` jobs had finished (the first completion time reaching 50 %), or
    None when fewer than half finished."""
    need = int(np.ceil(0.5 * total)) if total else 1
    return float(sorted_hours[need - 1]) if 0 < need <= len(sorted_hours) else None


def _hours_text(hours: float) -> str:
    return f"{hours * 60:.0f} min" if hours < 1 else f"{hours:.1f} h"


def utilisation_chart(
    rounds: Sequence[Mapping[str, float | str]],
    total_gpus: int,
    path: str | Path,
    title: str = "GPU use and job counts over time",
) -> Path:
    """Busy GPUs (share of the cluster, filled) and running/queued jobs (lines, right axis) per
    round, against time in hours. ``rounds``: rows with ``time``, ``duration``, ``busy_gpus``,
    ``running_jobs``, ``queued_jobs`` (rounds.csv)."""
    fig = Figure(figsize=(8, 3.8))
    ax = fig.add_subplot()
    start = np.array([float(r["time"]) for r in rounds]) / 3600.0
    end = start + np.array([float(r["duration"]) for r in rounds]) / 3600.0
    edges = np.concatenate([start, end[-1:]]) if len(rounds) else np.array([0.0, 1.0])
    busy = np.array([100.0 * float(r["busy_gpus"]) / max(1, total_gpus) for r in rounds])
    ax.stairs(
        busy,
        edges,
        fill=True,
        color=OTHER_COLOURS[0],
        alpha=0.35,
        label="busy GPUs (% of cluster)",
    )
    ax.set_ylim(0, 105)
    ax.set_xlim(edges[0], edges[-1])
    ax.set_xlabel("time since the first arrival (hours)")
    ax.set_ylabel("busy GPUs (% of the cluster)")
    jobs = ax.twinx()
    for key, label, color in (
        ("running_jobs", "running jobs", "tab:green"),
        ("queued_jobs", "queued jobs", "tab:red"),
    ):
        jobs.stairs([float(r[key]) for r in rounds], edges, color=color, lw=1.4, label=label)
    jobs.set_ylabel("jobs")
    jobs.set_ylim(bottom=0)
    handles = ax.get_legend_handles_labels()[0] + jobs.get_legend_handles_labels()[0]
    ax.legend(handles, [str(h.get_label()) for h in handles], loc="upper right", fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    return _save(fig, path)


def decision_time_curve(
    rows: Iterable[tuple[str, int, float, float, float]],
    path: str | Path,
    title: str = "Decision time of one round vs number of jobs",
) -> Path:
    """Paper Fig. 5: ``(policy, queued jobs, median s, min s, max s)`` rows, one line per policy
    through the medians with min-max error bars (log-log)."""
    by_policy: dict[str, list[tuple[int, float, float, float]]] = {}
    for name, n, sec, lo, hi in rows:
        by_policy.setdefault(name, []).append((n, sec, lo, hi))
    fig = Figure(figsize=(6, 3.8))
    ax = fig.add_subplot()
    styles = series_styles(list(by_policy))
    for name, pts in by_policy.items():
        pts.sort()
        med = np.array([p[1] for p in pts])
        st = styles[name]
        ax.errorbar(
            [p[0] for p in pts],
            med,
            yerr=[med - np.array([p[2] for p in pts]), np.array([p[3] for p in pts]) - med],
            marker=st.marker,
            ls=st.line,
            lw=min(st.width, 2.0),
            capsize=3,
            label=name,
            color=st.colour,
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("number of jobs")
    ax.set_ylabel("decision time (s)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3, which="both")
    if by_policy:  # none when --decision-sizes is empty
        ax.legend(fontsize=8)
    return _save(fig, path)


def occupancy_chart(
    nodes: Sequence[tuple[str, Mapping[str, int]]],
    placements: Iterable[tuple[int, int, str, str, int]],
    rounds: Sequence[tuple[int, float, float]],
    job_class: Mapping[int, str],
    path: str | Path,
    title: str = "GPU occupancy",
) -> Path:
    """Which kind of job holds each GPU over time (white = idle), x in hours.

    ``nodes``: ``(name, {gpu type: count})`` in cluster order (one row per GPU);
    ``placements``: ``(round, job, node, gpu type, count)`` records (placements.csv);
    ``rounds``: ``(round, start s, duration s)`` (rounds.csv); ``job_class``: each job's class
    (its model, e.g. ``ResNet-50``), one colour per class, named in the legend.
    """
    slots: dict[tuple[str, str], int] = {}
    labels: list[str] = []
    row = 0
    for name, gpus in nodes:
        for gtype, count in gpus.items():
            slots[(name, gtype)] = row
            labels.append(f"{name} ({gtype})")
            row += count
    order = sorted(rounds)
    column = {r: i for i, (r, _, _) in enumerate(order)}
    classes = sorted(set(job_class.values()))
    index = {c: i for i, c in enumerate(classes)}
    grid = np.full((row, max(1, len(order))), -1, dtype=np.int64)
    used: dict[tuple[int, str, str], int] = {}
    for rnd, job, node, gtype, count in placements:
        if rnd not in column:
            continue
        key = (rnd, node, gtype)
        start = slots[(node, gtype)] + used.get(key, 0)
        grid[start : start + count, column[rnd]] = index.get(job_class.get(job, ""), -1)
        used[key] = used.get(key, 0) + count
    cmap = ListedColormap(class_colours(max(1, len(classes))))
    edges = np.array([t for _, t, _ in order] + ([order[-1][1] + order[-1][2]] if order else [1.0]))
    fig = Figure(figsize=(10, max(3.5, 0.08 * row + 2.0)))
    ax = fig.add_subplot()
    ax.pcolormesh(
        edges / 3600.0,
        np.arange(row + 1) - 0.5,
        np.ma.masked_less(grid, 0),
        cmap=cmap,
        vmin=-0.5,
        vmax=max(1, len(classes)) - 0.5,
    )
    ax.set_ylim(row - 0.5, -0.5)
    starts = list(slots.values())
    ax.set_yticks(starts)
    ax.set_yticklabels(labels, fontsize=8)
    for s in starts[1:]:
        ax.axhline(s - 0.5, color="black", lw=0.4)
    ax.set_xlabel("time since the first arrival (hours)")
    ax.set_ylabel("GPU (by node)")
    ax.set_title(title + " (colour = job class, white = idle)", fontsize=10)
    from matplotlib.patches import Patch

    ax.legend(
        [Patch(color=cmap(i)) for i in range(len(classes))],
        classes,
        fontsize=8,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        title="job class",
    )
    return _save(fig, path)


def load_sweep_chart(
    rows: Sequence[Mapping[str, Any]],
    path: str | Path,
    title: str,
    saturation: Mapping[str, float | None],
) -> Path:
    """Average JCT (hours, log scale) against the input job rate, one line per policy.

    ``rows``: ``policy, rate, avg_jct_s, saturated`` per cell (one seed: the mean over seeds is
    drawn when there are several); hollow markers = saturated (the backlog grows), and each
    legend entry names the rate at which the policy saturates."""
    by_policy: dict[str, dict[float, list[float]]] = {}
    sat: dict[tuple[str, float], bool] = {}
    for r in rows:
        if r.get("avg_jct_s") is None:
            continue
        p, rate = str(r["policy"]), float(r["rate"])
        by_policy.setdefault(p, {}).setdefault(rate, []).append(float(r["avg_jct_s"]) / 3600.0)
        sat[(p, rate)] = sat.get((p, rate), False) or bool(r["saturated"])
    fig = Figure(figsize=(7, 4.4))
    ax = fig.add_subplot()
    styles = series_styles(list(by_policy))
    for p, pts in by_policy.items():
        rates = sorted(pts)
        jct = [float(np.mean(pts[x])) for x in rates]
        st = styles[p]
        color = st.colour
        s = saturation.get(p)
        label = (
            f"{p} (saturates at {s:g} jobs/h)" if s is not None else f"{p} (sustains every rate)"
        )
        ax.plot(rates, jct, color=color, label=label, lw=min(st.width, 2.0), ls=st.line)
        for x, y in zip(rates, jct, strict=True):
            hollow = sat[(p, x)]
            ax.plot(
                [x],
                [y],
                marker=st.marker,
                color=color,
                ms=6,
                markerfacecolor="white" if hollow else color,
            )
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(
        FuncFormatter(lambda v, _: f"{v:g}" if f"{v:.0e}"[0] in "235" else "")
    )
    ax.set_xlabel("input job rate (jobs/hour)")
    ax.set_ylabel("average JCT over the window (hours, log)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, title="hollow marker = saturated (backlog grows)", title_fontsize=7)
    return _save(fig, path)
