"""The type of a cluster file's ``python:`` settings: a command line, split as a shell would."""

from __future__ import annotations

import shlex
from typing import Annotated

from pydantic import AfterValidator


def _command_line(value: str) -> str:
    """``value`` if it splits into at least one word (shell quoting), else ``ValueError``."""
    try:
        words = shlex.split(value)
    except ValueError as e:  # an unbalanced quote, a trailing backslash
        raise ValueError(f"not a command line ({e})") from None
    if not words:
        raise ValueError("empty command")
    return value


PythonCommand = Annotated[str, AfterValidator(_command_line)]
"""A ``python:`` setting (``local``, ``ssh``, ``aws``): the interpreter and its leading arguments,
checked when the cluster file is loaded so that a bad one is one line, not a failure later."""
