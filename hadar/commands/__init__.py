"""Sub-commands of the ``hadar`` CLI, one module each (see hadar/cli.py)."""

import argparse
from typing import TypeAlias

#: What ``ArgumentParser.add_subparsers()`` returns, passed to each sub-command's ``register``.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
