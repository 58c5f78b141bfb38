"""Turn pydantic and YAML/JSON parse errors into one-line InputErrors naming the file and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from hadar.errors import InputError


def field_path(loc: tuple[Any, ...]) -> str:
    """``('nodes', 2, 'gpus', 'v200')`` -> ``nodes[2].gpus.v200``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def from_validation_error(source: str, exc: ValidationError) -> InputError:
    """The first pydantic error as ``source: field: message`` (a misspelt field first: it
    usually explains the "missing" error that comes with it)."""
    errors = exc.errors()
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if err["type"] == "missing":
        msg = "missing required field"
    elif err["type"] == "extra_forbidden":
        msg = "unknown field"
    return InputError(f"{source}: {field_path(tuple(err['loc']))}: {msg}")


def load_yaml(path: str | Path, what: str) -> Any:
    """Parse a YAML file, raising one-line InputErrors for missing files and syntax errors."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: {what} file not found")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise InputError(f"{p}: malformed YAML{at}: {problem}") from None
    if not isinstance(data, dict):
        raise InputError(f"{p}: expected a mapping at the top level of the {what} file")
    return data


def load_json(path: str | Path, what: str) -> Any:
    """Parse a JSON file, raising one-line InputErrors for a missing file (``<path>: <what> not
    found``) and syntax errors. Bytes that are not text raise UnicodeDecodeError, which callers
    name in their own words."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: {what} not found")
    try:
        return json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise InputError(f"{p}: malformed JSON at line {exc.lineno}: {exc.msg}") from None
