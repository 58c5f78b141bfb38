"""Training runtime: the paper's workload models, their datasets, the checkpoint format and the
node worker (``python -m nodes.worker``), plus the node providers that run it."""
