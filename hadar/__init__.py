"""Hadar: a task-level heterogeneity-aware primal-dual scheduler for deep-learning clusters."""

__version__ = "0.1.0"
