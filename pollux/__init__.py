"""Pollux (Qiao et al., OSDI 2021): co-adaptive, goodput-optimal scheduling.

Modules: ``fitness`` (PolluxSched's objective: speedups over a fair share, the generalised mean,
the re-allocation factor), ``speedup`` (SPEEDUP tables from a goodput function), ``problem``
(one round's allocation problem as arrays, interference and split checks), ``solver`` (the
production search: exact count DP, then packing and fill), ``agent`` (PolluxAgent: online fit,
batch size and learning-rate choice, gradient-noise estimates), ``observe`` (what an agent
measures, from the traces in simulation) and ``policy`` (the ``pollux`` policy).

Importing the package registers the policy; the agent and the traces (scipy, pandas) are
imported only when the policy decides.
"""

from pollux.policy import PolluxPolicy

__all__ = ["PolluxPolicy"]
