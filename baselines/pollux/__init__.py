"""Pollux (Qiao et al., OSDI 2021): co-adaptive, goodput-optimal scheduling.

Modules: ``fitness`` (PolluxSched's objective: speedups over a fair share, the generalised mean,
the re-allocation factor), ``problem`` (one round's allocation problem as arrays, interference
and split checks), ``solver`` (the production search: exact count DP, then packing and repair).
"""
