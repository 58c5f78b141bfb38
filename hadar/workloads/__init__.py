"""Workload sources: the paper's Philly generator, hand-written job lists, the physical mixes."""
