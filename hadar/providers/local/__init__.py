"""The ``local`` provider: nodes are processes on this machine."""
