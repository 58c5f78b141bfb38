"""Experiment grids that reproduce the paper's evaluations in the simulator.

``physical``: section VI (the AWS and lab 5-node clusters, mixes M-1 ... M-12, Gavel / Hadar /
HadarE, slot times 90/180/360 s). Modules: :mod:`grid` runs the cells (serially or in processes,
same numbers either way), :mod:`bounds` gives lower bounds on TTD, :mod:`tables` derives the
comparisons and targets from the cell rows (pure), :mod:`paper` holds the paper's reported figures,
:mod:`report` prints and writes them, :mod:`figures` draws Fig. 8-12.
"""
