"""Trace-driven, round-based simulator: replays a workload on a cluster under a policy."""

from hadar.simulator.engine import SimConfig, simulate
from hadar.simulator.records import JobRecord, RoundRecord, SimulationResult

__all__ = ["JobRecord", "RoundRecord", "SimConfig", "SimulationResult", "simulate"]
