"""The input boundary's shared pieces: limits on magnitudes, reading a text file safely, and
turning pydantic and YAML/JSON parse errors into one-line InputErrors naming the file and field.

Every number a file or flag gives must be finite and within the limits below (docs/inputs.md);
they reject values no real cluster or workload has, long before they could overflow, exhaust
memory or keep a simulation running for ever.
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BeforeValidator, ValidationError

from hadar.core.errors import InputError, path_trouble, shorten

MAX_FILE_BYTES = 256 * 2**20
"""Largest input file read (cluster, job list, trace, throughputs): 256 MiB."""
MAX_YAML_BYTES = 4 * 2**20
"""Largest YAML file read (a cluster file, a YAML job list): 4 MiB, parsed in a few seconds
(PyYAML reads ~1 MB/s); a larger job list is a CSV file."""
MAX_YAML_VALUES = 5_000_000
"""Values a YAML file may expand to through aliases (a "billion laughs" file expands to 10^9)."""
MAX_SEED = 2**63 - 1
MAX_JOB_ID = 2**63 - 1
"""Job ids are stored as SQLite INTEGERs (64-bit signed)."""
MAX_JOBS = 100_000
"""Jobs in one workload (``philly-N``, a job list or a trace)."""
MAX_GPUS_PER_NODE = 1024
"""GPUs of one type on one node (the largest real servers hold 16)."""
MAX_GANG_GPUS = 65_536
"""GPUs one job may ask for."""
MAX_NODES = 100_000
"""Nodes in one cluster file (after ``count`` expansion)."""
MAX_STEPS = 1e12
"""Total steps of one job (real training runs take at most millions). Steps count training
iterations, so a file gives a whole number of at least 1."""
DAY_S = 86400.0
"""A day in seconds: the longest round, grace, restart penalty and averaging a run accepts."""
MAX_SECONDS = 10 * 365 * DAY_S
"""Largest time a file may give (an arrival): ten years, in seconds."""
MIN_WEIGHT, MAX_WEIGHT = 1e-3, 1e3
"""A job's priority weight is relative: 1e-3 to 1e3 lets one job count a million times another,
beyond any real priority scheme, while keeping the coefficients of Gavel's weighted max-min LP
(``W_j / (w_j T_j)``) within what HiGHS solves (a weight of 1e-15 made it a "Model error")."""
MIN_THROUGHPUT, MAX_THROUGHPUT = 1e-6, 1e9
"""A measured throughput is 0 (cannot run) or within these bounds, in steps/s."""
FP32_TFLOPS = (0.01, 10_000.0)
MEMORY_GB = (0.1, 10_000.0)
TENSOR_TFLOPS = (0.01, 100_000.0)
"""The figures a declared GPU type may give (``hadar/core/user_gpus.py``; docs/estimators.md,
"Your own GPUs"): FP32 and dense tensor TFLOPS, memory in GB (tensor 0: no tensor cores). Real
GPUs span about 1-100 FP32 TFLOPS, 2-300 GB and 10-2,500 tensor TFLOPS; the bounds leave two
orders of magnitude either way. Beyond them the PMI ratios of Eq. 10 overflow or underflow
(1e-300 divided by zero, 1e300 took a logarithm of 0) and the rates reach the LPs as values
HiGHS refuses ("Model error")."""
MIN_GBPS, MAX_GBPS = 0.01, 1e6
"""A cluster network's link bandwidth (``hadar/core/topology.py``), Gbit/s: from 10 Mbit/s (the
slowest Ethernet; GPU clusters have 1 Gbit/s at the very least) to 1 Pbit/s (today's fastest
NICs carry 800 Gbit/s, an NVLink domain about 14,400). A slower link made a multi-node job run
for ever (at 1e-300 Gbit/s a simulation ran round by round to its horizon)."""


def bounded(
    lo: float, hi: float, *, lo_open: bool = False, integer: bool = False, unit: str = ""
) -> Any:
    """A pydantic field type for a number read from a file: a number or numeric text, finite,
    ``lo <= v <= hi`` (``lo < v`` with ``lo_open``), whole with ``integer``. Its messages read
    ``must be an integer >= 1 (got '0')``, ``must be a whole number of GPUs (got '2.5')``,
    ``not a finite number ('inf')``, ``must be <= 1e+12 steps``."""
    kind = "an integer " if integer else ""
    suffix = f" {unit}" if unit else ""

    def check(value: Any) -> float | int:
        raw = value
        if isinstance(value, str):
            text = value.strip()
            # float() also reads "1_0" as 10 and other scripts' digits ("١٠"): a typo or a
            # look-alike would pass as another number
            if not text.isascii() or "_" in text:
                raise ValueError(
                    f"not a number written with 0-9 and no '_' (got {shown_value(raw)})"
                )
            try:
                value = float(text)
            except ValueError:
                raise ValueError(f"not a number (got {shown_value(raw)})") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"must be a number (got {shown_value(raw)})")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"not a finite number (got {shown_value(raw)})")
        if lo_open and not value > lo:
            raise ValueError(f"must be {kind}> {lo:g}{suffix} (got {shown_value(raw)})")
        if not lo_open and not value >= lo:
            raise ValueError(f"must be {kind}>= {lo:g}{suffix} (got {shown_value(raw)})")
        if value > hi:
            raise ValueError(f"must be {kind}<= {hi:g}{suffix} (got {shown_value(raw)})")
        if integer and value != int(value):
            raise ValueError(
                f"must be a whole number{' of' + suffix if unit else ''} (got {shown_value(raw)})"
            )
        return int(value) if integer else float(value)

    return Annotated[int if integer else float, BeforeValidator(check)]


Steps = bounded(1, MAX_STEPS, integer=True, unit="steps")
"""A job's total steps in a file: a whole number of training iterations (``0.5`` or ``1e-30``
steps would reach the LPs as near-zero work and the Job Tracker as a target of 0 steps)."""
Seconds = bounded(0, MAX_SECONDS, unit="s")
"""A time in a file (an arrival), in seconds."""
Weight = bounded(MIN_WEIGHT, MAX_WEIGHT)
"""A job's priority weight (:data:`MIN_WEIGHT` to :data:`MAX_WEIGHT`)."""
GangGpus = bounded(1, MAX_GANG_GPUS, integer=True, unit="GPUs")
"""The GPUs one job asks for."""
DataDirFlag = bounded(0, 1, integer=True)
"""A Gavel trace's ``needs_data_dir`` column: 0 or 1."""
SloSeconds = bounded(-1, MAX_SECONDS, unit="s")
"""A Gavel trace's ``SLO`` column: seconds, -1 for none."""
Fp32Tflops = bounded(*FP32_TFLOPS, unit="TFLOPS")
"""A declared GPU type's FP32 TFLOPS."""
MemoryGb = bounded(*MEMORY_GB, unit="GB")
"""A declared GPU type's memory, GB."""
Gbps = bounded(MIN_GBPS, MAX_GBPS, unit="Gbit/s")
"""A network link's bandwidth."""


def shown_value(value: object) -> str:
    """``value`` as an error message echoes it: its ``repr``, cut to
    :data:`~hadar.core.errors.SHOWN_CHARS` characters (text inside its quotes: ``'999...'``)."""
    return repr(shorten(value)) if isinstance(value, str) else shorten(repr(value))


def field_path(loc: tuple[Any, ...]) -> str:
    """``('nodes', 2, 'gpus', 'v200')`` -> ``nodes[2].gpus.v200``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def from_validation_error(source: str, exc: ValidationError, at: str = "") -> InputError:
    """The first pydantic error as ``source: field: message`` (a misspelt field first: it
    usually explains the "missing" error that comes with it); ``at`` prefixes the field path
    (``nodes[a]`` -> ``nodes[a].port``)."""
    errors = exc.errors()
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if err["type"] == "missing":
        msg = "missing required field"
    elif err["type"] == "extra_forbidden":
        msg = "unknown field"
    value = err.get("input")
    if (
        err["type"] not in ("missing", "extra_forbidden")
        and isinstance(value, (int, float, str))
        and "got " not in msg
        and not msg.startswith(shown_value(value))
    ):
        msg += f" (got {shown_value(value)})"
    path = field_path(tuple(err["loc"]))
    return InputError(f"{source}: {f'{at}.{path}' if at else path}: {msg}")


def read_text(path: str | Path, what: str, limit: int = MAX_FILE_BYTES) -> str:
    """A text file's contents: InputError when it is missing, not a regular file, larger than
    ``limit`` bytes (:data:`MAX_FILE_BYTES`), unreadable or not UTF-8 (``what`` names it:
    "cluster file"). A leading UTF-8 byte-order mark (spreadsheet exports) is dropped."""
    p = Path(path)
    found = look_up(p, what)
    if found is None or not stat.S_ISREG(found.st_mode):
        raise InputError(
            f"{p}: {what} not found" if found is None else f"{p}: {what} is not a regular file"
        )
    try:
        size = found.st_size
        if size > limit:
            raise InputError(f"{p}: {what} is {_mib(size)}; at most {_mib(limit)} is read")
        return p.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{p}: not a UTF-8 text file (byte {exc.start} is 0x{exc.object[exc.start]:02x})"
        ) from None
    except OSError as exc:
        raise InputError(f"{p}: cannot read {what}: {exc.strerror or exc}") from None


def stat_path(path: str | Path) -> os.stat_result | None:
    """The status of what ``path`` names (symbolic links followed); None when nothing is there
    (a dangling link included). ``OSError`` when the system cannot look the path up: a name over
    255 bytes, a path over 4,096, a symbolic link loop, a folder it may not search."""
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def look_up(path: str | Path, label: str) -> os.stat_result | None:
    """:func:`stat_path`, a path the system cannot look up refused in one line naming ``label``
    (the flag, or what the file is), the path and why: ``--workload: xxx...xxx.csv: file name
    too long``."""
    try:
        return stat_path(path)
    except OSError as exc:
        raise InputError(f"{label}: {path_trouble(path, exc)}") from None


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB" if size < 10 * 2**20 else f"{size / 2**20:.0f} MiB"


class _CountingLoader(yaml.SafeLoader):
    """PyYAML's safe loader, counting the aliases (``*name``) the document uses and refusing a
    key given twice in one mapping (PyYAML keeps the last silently); a merge key (``<<``) may
    still give keys the mapping then overrides, as YAML defines it."""

    aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # ``<<: *base``: merged by the safe loader, its keys overridable
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, (str, int, float, bool)) or key is None:
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"duplicate key {key!r}", key_node.start_mark
                        )
                    seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _expanded_size_at_most(data: Any, budget: int) -> bool:
    """Whether ``data`` has at most ``budget`` values once shared references (YAML aliases) are
    counted each time they occur; stops counting at the budget."""
    stack, seen = [data], 0
    while stack:
        item = stack.pop()
        seen += 1
        if seen > budget:
            return False
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def load_yaml(path: str | Path, what: str) -> Any:
    """Parse a YAML file, raising one-line InputErrors for missing files, syntax errors, numbers
    too long to convert and alias bombs (aliases expanding to more than MAX_YAML_VALUES values)."""
    p = Path(path)
    text = read_text(p, f"{what} file", limit=MAX_YAML_BYTES)
    loader = None
    try:
        loader = _CountingLoader(text)  # its reader refuses control characters already
        data = loader.get_single_data()
    except RecursionError:
        raise InputError(f"{p}: malformed YAML: nested too deeply") from None
    except ValueError as exc:  # int("9" * 5000): Python's limit on digits
        raise InputError(f"{p}: malformed YAML: {str(exc).split(';')[0]}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{p}: malformed YAML{at}: {problem}") from None
    finally:
        if loader is not None:
            loader.dispose()
    if loader.aliases and not _expanded_size_at_most(data, MAX_YAML_VALUES):
        raise InputError(f"{p}: YAML aliases expand to more than {MAX_YAML_VALUES:,} values")
    if not isinstance(data, dict):
        raise InputError(f"{p}: expected a mapping at the top level of the {what} file")
    return data


def load_json(path: str | Path, what: str) -> Any:
    """Parse a JSON file, raising one-line InputErrors for a missing file (``<path>: <what> not
    found``), bytes that are not UTF-8 text and syntax errors."""
    p = Path(path)
    text = read_text(p, what)
    try:
        return json.loads(text, object_pairs_hook=lambda pairs: _unique_keys(pairs, p))
    except RecursionError:
        raise InputError(f"{p}: malformed JSON: nested too deeply") from None
    except ValueError as exc:  # int("9" * 5000): Python's limit on digits
        if isinstance(exc, json.JSONDecodeError):
            raise InputError(f"{p}: malformed JSON at line {exc.lineno}: {exc.msg}") from None
        raise InputError(f"{p}: malformed JSON: {str(exc).split(';')[0]}") from None


def _unique_keys(pairs: list[tuple[str, Any]], source: Path) -> dict[str, Any]:
    """A JSON object's members as a dict, a key given twice refused (``json`` keeps the last
    silently; YAML files refuse it too)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise InputError(f"{source}: malformed JSON: duplicate key {shorten(key)!r}")
        out[key] = value
    return out
