"""Baseline schedulers behind the shared policy interface: Gavel (max-min fairness, FIFO,
min-makespan), Tiresias (2D-LAS) and YARN's capacity scheduler. See docs/baselines.md."""
