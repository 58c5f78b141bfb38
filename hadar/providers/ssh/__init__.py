"""The ``ssh`` provider: nodes are machines reached over SSH (paramiko)."""
