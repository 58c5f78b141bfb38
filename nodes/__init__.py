"""What runs on a node: the paper's workload models, their datasets, the checkpoint format and
the node worker (``python -m nodes.worker``). The coordinator side that reaches the nodes and
runs the worker there is :mod:`hadar.providers`."""
