"""Sub-commands of the ``hadar`` CLI, one module each (see hadar/cli.py)."""
