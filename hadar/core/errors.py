"""Error types whose message is one line fit for a user; the CLI prints it and exits non-zero."""

from __future__ import annotations

import errno


class HadarError(Exception):
    """Base error. ``exit_code`` is what the CLI returns when this reaches it."""

    exit_code = 1


class InputError(HadarError):
    """Bad user input: a config, workload or throughput file, or a command-line value."""

    exit_code = 2


class UnreachableNodeError(HadarError):
    """A node (host) could not be contacted or refused us."""

    exit_code = 3


def where(source: str | None, field: str | None) -> str:
    """Format ``file: field`` prefixes for error messages, skipping the missing parts."""
    parts = [p for p in (source, field) if p]
    return ": ".join(parts)


SHOWN_CHARS = 60
"""How many characters of a user's value an error message echoes (:func:`shorten`)."""


def shorten(value: str, limit: int = SHOWN_CHARS) -> str:
    """``value`` cut to its first ``limit`` characters plus ``...`` when longer, so a message
    that echoes a hostile value (a 100,000-character field) stays one readable line."""
    return value if len(value) <= limit else value[:limit] + "..."


def shorten_middle(value: str, limit: int) -> str:
    """``value`` cut to ``limit`` characters when longer: its start and its end with ``...``
    between, so an error that ends in what it is about (a long path's last folder and file
    name, the file that does not exist) keeps that end."""
    if len(value) <= limit:
        return value
    head = (limit - 3) // 2
    return value[:head] + "..." + value[len(value) - (limit - 3 - head) :]


def path_trouble(path: object, exc: OSError) -> str:
    """``path`` (cut to :data:`SHOWN_CHARS`, its end kept) and why the system could not look it
    up, for an error line: ``/tmp/xxx...xxx.csv: file name too long`` (a name over 255 bytes or a
    path over 4,096), ``loop.csv: a symbolic link loop (too many levels of symbolic links)``."""
    if exc.errno == errno.ELOOP:
        reason = "a symbolic link loop (too many levels of symbolic links)"
    else:
        text = exc.strerror or str(exc)
        reason = text[:1].lower() + text[1:]
    return f"{shorten_middle(str(path), SHOWN_CHARS)}: {reason}"


class MissingExtraError(InputError):
    """A command needs an optional dependency that is not installed (``pip install
    'hadar-scheduler[EXTRA]'``). Exit 2: the request cannot be served by this installation."""


PARTIAL_RESULT_EXIT_CODE = 7
"""What a command that reports several independent results returns when some of them failed
with a one-line error and the others are reported (``hadar compare``: a policy whose simulation
stopped). 4 and 5 are a real run's (stalled, resources), 6 the Job Tracker's (database busy)."""
