"""The paper's comparison figures as PNG files (matplotlib, Agg canvas, no pyplot state)."""

from hadar.plots.figures import (
    completion_cdf,
    decision_time_curve,
    gru_bars,
    load_sweep_chart,
    occupancy_chart,
    utilisation_chart,
)

__all__ = [
    "completion_cdf",
    "decision_time_curve",
    "gru_bars",
    "load_sweep_chart",
    "occupancy_chart",
    "utilisation_chart",
]
