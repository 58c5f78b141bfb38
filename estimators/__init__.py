"""Throughput sources: Gavel's measured table, the GPU catalogue, cold-start and online estimates."""
