"""What Slurm's own commands print, read as a node-state log for ``hadar node-stream
from-slurm`` (docs/node-streams.md, "From a Slurm log"): each format is turned into the rows
``Timestamp|NodeName|State`` that :func:`hadar.workloads.slurm_nodes.parse_slurm_log` reads.

* ``sinfo -i SECONDS`` (or ``sinfo -N -i SECONDS``) run for a while: blocks that each start with
  the time sinfo prints (``Sat Nov 28 11:05:05 2026``), then its table (``NODELIST ... STATE``,
  columns separated by spaces or ``|``); compressed host lists (``n[1-3]``) are expanded and a
  node listed under several partitions counts once;
* ``sacct -P`` (``--parsable2``) with the columns ``Start``, ``End`` and ``NodeList``: each job
  keeps its nodes busy from its start to its end (``Unknown``: still running when the log
  ends), job steps (``123.batch``, ``123.0``) are skipped; a node is idle whenever no job holds
  it (from the first start in the log), so give ``--cluster`` to count nodes no job used;
* anything else is the ``Timestamp|NodeName|State`` log itself.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path

from hadar.core.errors import InputError, shorten
from hadar.core.node_stream import NodeStream
from hadar.core.validation import read_text
from hadar.workloads.slurm_nodes import MAX_NODE_ROWS, expand_hostlist, parse_slurm_log

SINFO_TIME = "%a %b %d %H:%M:%S %Y"
_SINFO_STAMP = re.compile(r"^[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}$")
_NOT_A_TIME = {"", "unknown", "none"}


def load_slurm_output(
    path: str | Path, min_fragment_s: float = 0.0, nodes: Iterable[str] | None = None
) -> NodeStream:
    """The node stream of a file of ``sinfo -i``, ``sacct -P`` or ``Timestamp|NodeName|State``
    output (see the module docstring); ``nodes``: every node of the cluster (sacct)."""
    p = Path(path)
    text = read_text(p, "Slurm log")
    return parse_slurm_output(text, str(p), min_fragment_s, nodes)


def parse_slurm_output(
    text: str, source: str, min_fragment_s: float = 0.0, nodes: Iterable[str] | None = None
) -> NodeStream:
    """:func:`load_slurm_output` of ``text``."""
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if _SINFO_STAMP.match(first):
        text = sinfo_rows(text, source)
    elif {"start", "end", "nodelist"} <= {h.strip().lower() for h in first.split("|")}:
        text = sacct_rows(text, source, nodes)
    return parse_slurm_log(text, source, min_fragment_s)


def _log(rows: list[tuple[str, str, str]]) -> str:
    return "Timestamp|NodeName|State\n" + "".join(f"{t}|{n}|{s}\n" for t, n, s in rows)


def _hosts(text: str, source: str, line: int, field: str, so_far: int) -> list[str]:
    """The nodes ``text`` names; an InputError once the log would hold more than
    :data:`MAX_NODE_ROWS` rows with the ``so_far`` before them."""
    hosts = expand_hostlist(text, f"{source}: line {line}, field {field}")
    if so_far + len(hosts) > MAX_NODE_ROWS:
        raise InputError(
            f"{source}: line {line}, field {field}: the log expands to more than "
            f"{MAX_NODE_ROWS:,} node-state rows (split it, or sample it less often)"
        )
    return hosts


def sinfo_rows(text: str, source: str) -> str:
    """``sinfo -i`` output as a ``Timestamp|NodeName|State`` log."""
    rows: list[tuple[str, str, str]] = []
    stamp: str | None = None
    columns: dict[str, int] | None = None
    seen: set[str] = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if _SINFO_STAMP.match(line):
            stamp, columns, seen = _sinfo_time(line, source, number), None, set()
            continue
        fields = line.split("|") if "|" in line else line.split()
        fields = [f.strip() for f in fields]
        if columns is None:
            upper = [f.upper() for f in fields]
            if "NODELIST" not in upper or "STATE" not in upper:
                raise InputError(
                    f"{source}: line {number}: expected sinfo's header with NODELIST and STATE "
                    f"after its time line (got {shorten(line)!r})"
                )
            columns = {"node": upper.index("NODELIST"), "state": upper.index("STATE")}
            continue
        if stamp is None:
            raise InputError(f"{source}: line {number}: a row before sinfo's first time line")
        if len(fields) <= max(columns.values()):
            raise InputError(f"{source}: line {number}: fewer fields than sinfo's header")
        state = fields[columns["state"]]
        for node in _hosts(fields[columns["node"]], source, number, "NODELIST", len(rows)):
            if node not in seen:  # a node in several partitions: its first row
                seen.add(node)
                rows.append((stamp, node, state))
    if not rows:
        raise InputError(f"{source}: no sinfo rows (expected sinfo -i output)")
    return _log(rows)


def _sinfo_time(line: str, source: str, number: int) -> str:
    """The time of an sinfo time line, ISO 8601 in UTC; one line for a date that does not exist
    (``Mon Feb 30``) or a time beyond 23:59:59, which pass :data:`_SINFO_STAMP`."""
    try:
        when = datetime.strptime(line, SINFO_TIME)
    except ValueError as exc:
        why = (
            "day is out of range for month"
            if "out of range" in str(exc)
            else "not a valid date and time"
        )
        raise InputError(
            f"{source}: line {number}: sinfo's time line {line!r}: {why} "
            "(expected like 'Sat Nov 28 11:05:05 2026')"
        ) from None
    return when.replace(tzinfo=timezone.utc).isoformat()


def sacct_rows(text: str, source: str, nodes: Iterable[str] | None = None) -> str:
    """``sacct -P`` output (jobs with Start, End, NodeList) as a ``Timestamp|NodeName|State`` log:
    a node is ``allocated`` while a job holds it and ``idle`` otherwise."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="|")
    header = [h.strip().lower() for h in next(reader)]
    col = {k: header.index(k) for k in ("start", "end", "nodelist")}
    job_col = header.index("jobid") if "jobid" in header else None
    changes: list[tuple[datetime, int, str]] = []  # (time, +1 start / -1 end, node)
    last: datetime | None = None
    for row in reader:
        line = reader.line_num
        if not any(c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise InputError(
                f"{source}: line {line}: {len(row)} fields, the header has {len(header)}"
            )
        if job_col is not None and "." in row[job_col]:
            continue  # a job step: its job counts
        start_raw, end_raw = row[col["start"]].strip(), row[col["end"]].strip()
        node_field = row[col["nodelist"]].strip()
        if start_raw.lower() in _NOT_A_TIME or node_field.lower() in {"", "none assigned"}:
            continue  # never started
        start = _sacct_time(start_raw, source, line, "Start")
        last = start if last is None else max(last, start)
        hosts = _hosts(node_field, source, line, "NodeList", len(changes))
        changes += [(start, 1, n) for n in hosts]
        if end_raw.lower() in _NOT_A_TIME:
            continue  # still running when the log ends
        end = _sacct_time(end_raw, source, line, "End")
        if end < start:
            raise InputError(f"{source}: line {line}, field End: before the job's Start")
        last = max(last, end)
        changes += [(end, -1, n) for n in hosts]
    if last is None:
        raise InputError(f"{source}: no job with a Start and a NodeList in the sacct output")
    first = min(t for t, _, _ in changes)
    everyone = sorted(set(nodes or ()) | {n for _, _, n in changes})
    rows = [(first.isoformat(), n, "idle") for n in everyone]
    busy = dict.fromkeys(everyone, 0)
    for t, delta, node in sorted(changes, key=lambda c: (c[0], c[1])):  # ends before starts
        before = busy[node]
        busy[node] += delta
        if (before == 0) != (busy[node] == 0):
            rows.append((t.isoformat(), node, "allocated" if busy[node] else "idle"))
    end_of_log = last.isoformat()
    rows += [(end_of_log, n, "allocated" if busy[n] else "idle") for n in everyone]
    return _log(rows)


def _sacct_time(raw: str, source: str, line: int, field: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(raw)
    except ValueError:
        raise InputError(
            f"{source}: line {line}, field {field}: not a time ({shorten(raw)!r})"
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
