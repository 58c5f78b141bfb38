"""Hypothesis strategies for every input the CLI reads: cluster YAML files, job lists (CSV and
YAML), Gavel traces, throughput tables (JSON) and command-line values, valid and broken.

Valid values stay small (a few nodes, jobs that finish in a few simulated rounds) so a case runs
in well under a second; broken ones cover what a hostile user would try: bytes that are not
UTF-8, non-finite numbers, absurd magnitudes, wrong types, misspelt keys and truncated text.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml
from hypothesis import strategies as st

GPU_TYPES = ("v100", "p100", "k80")
"""GPU types Gavel's bundled table measured (so valid workloads need no estimate)."""
JOB_TYPES = (
    "ResNet-18 (batch size 64)",
    "LM (batch size 20)",
    "Transformer (batch size 32)",
    "Recommendation (batch size 512)",
    "A3C",
    "CycleGAN",
)

NON_FINITE = ("nan", "inf", "-inf", "NaN", "Infinity", "1e309", "-1e999")
ABSURD_NUMBERS = (
    "1e30",
    "1e22",
    "10000000000000000000000",
    "-1",
    "-0.0",
    "0",
    "1e-300",
    "5e-324",
    str(2**64),
    str(10**400),
    "9" * 5000,
)
GARBAGE_TEXT = (
    "",
    " ",
    "x",
    "1,5",
    "0x10",
    "1_000",
    "--",
    "٣",
    "\x00",
    "1e",
    "e5",
    "12abc",
    "None",
    "null",
    "[]",
    "{}",
    "'",
    '"',
    "\\",
    "\t",
    "a\nb",
)


def number_text(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[str]:
    """A number as text: mostly ``valid`` values, else non-finite, absurd or garbage."""
    return st.one_of(
        valid.map(str),
        st.sampled_from(NON_FINITE + ABSURD_NUMBERS + GARBAGE_TEXT),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.integers(min_value=-(10**30), max_value=10**30).map(str),
    )


def scalar(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A YAML/JSON value: mostly ``valid``, else a non-finite float, a huge int, a string, a list..."""
    return st.one_of(
        valid,
        valid,
        st.sampled_from(
            [
                float("nan"),
                float("inf"),
                -float("inf"),
                10**22,
                2**70,
                -1,
                0,
                1e-300,
                1e30,
                True,
                None,
                "x",
                "",
                [],
                {},
                [1, 2],
                {"a": 1},
            ]
        ),
        st.text(max_size=8),
    )


# -- cluster files ---------------------------------------------------------------------------
def node_spec(broken: bool) -> st.SearchStrategy[dict[str, Any]]:
    name = st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True)
    gpus = st.dictionaries(st.sampled_from(GPU_TYPES), st.integers(1, 4), min_size=1, max_size=2)
    base = st.fixed_dictionaries(
        {"name": name, "gpus": gpus},
        optional={"count": st.integers(1, 3), "pcie_gen": st.integers(1, 6)},
    )
    if not broken:
        return base
    return st.fixed_dictionaries(
        {
            "name": scalar(name),
            "gpus": scalar(
                st.dictionaries(
                    st.one_of(
                        st.sampled_from(GPU_TYPES + ("v200", "", "V100", "a100")),
                        st.text(max_size=6),
                    ),
                    scalar(st.integers(1, 4)),
                    max_size=3,
                )
            ),
        },
        optional={
            "count": scalar(st.integers(1, 3)),
            "pcie_gen": scalar(st.integers(1, 6)),
            "speed_factor": scalar(st.floats(0.01, 1.0)),
            "port": scalar(st.integers(1, 65535)),
            "gpu": st.just({"v100": 1}),
        },
    )


@st.composite
def cluster_file(draw, broken: bool | None = None) -> bytes:
    """A cluster YAML file's bytes (``broken=None``: either)."""
    if broken is None:
        broken = draw(st.booleans())
    data: Any = {
        "name": draw(st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True)),
        "nodes": draw(st.lists(node_spec(broken), min_size=1, max_size=4)),
    }
    if broken:
        data = draw(st.one_of(st.just(data), mutate_mapping(data)))
    return draw(serialized(data, "yaml", broken))


# -- job lists and traces --------------------------------------------------------------------
def job_record(broken: bool) -> st.SearchStrategy[dict[str, Any]]:
    valid = {
        "id": st.integers(0, 50),
        "type": st.sampled_from(JOB_TYPES),
        "gpus": st.sampled_from([1, 1, 1, 2, 4]),
        "steps": st.integers(1, 20_000),
    }
    optional = {"arrival": st.integers(0, 2000), "weight": st.sampled_from([0.5, 1, 2])}
    if broken:
        valid = {k: scalar(v) for k, v in valid.items()}
        optional = {k: scalar(v) for k, v in optional.items()} | {"arrval": st.just(3)}
    return st.fixed_dictionaries(valid, optional=optional)


@st.composite
def job_records(draw, broken: bool) -> list[dict[str, Any]]:
    jobs = draw(st.lists(job_record(broken), min_size=0 if broken else 1, max_size=6))
    if not broken:
        for i, j in enumerate(jobs):
            j["id"] = i  # unique ids
    return jobs


@st.composite
def job_list_file(draw, broken: bool | None = None) -> tuple[str, bytes]:
    """``(suffix, bytes)`` of a CSV or YAML job list."""
    if broken is None:
        broken = draw(st.booleans())
    jobs = draw(job_records(broken))
    if draw(st.booleans()):
        cols = ["id", "type", "gpus", "steps", "arrival", "weight"]
        if broken and draw(st.booleans()):
            cols = draw(st.lists(st.sampled_from(cols + ["gpu", "", "id"]), max_size=7))
        lines = [",".join(cols)] + [",".join(_csv_cell(j.get(c, "")) for c in cols) for j in jobs]
        text = "\n".join(lines) + "\n"
        return ".csv", draw(corrupted(text.encode(), broken))
    return ".yaml", draw(serialized({"jobs": jobs}, "yaml", broken))


def _csv_cell(v: Any) -> str:
    s = str(v)
    return f'"{s}"' if ("," in s or "\n" in s) else s


@st.composite
def gavel_trace_file(draw, broken: bool | None = None) -> bytes:
    """A 10- or 7-column Gavel trace."""
    if broken is None:
        broken = draw(st.booleans())
    n = draw(st.integers(0 if broken else 1, 5))
    arrival = 0
    lines = []
    for _ in range(n):
        arrival += draw(st.integers(0, 500))
        job_type = draw(st.sampled_from(JOB_TYPES[:4]))
        steps = draw(st.integers(1, 20_000))
        scale = 1
        cols10 = [
            job_type,
            "python3 train.py",
            ".",
            "--num_steps",
            "0",
            str(steps),
            str(scale),
            "1",
            "-1",
            str(arrival),
        ]
        cols = cols10
        if draw(st.booleans()):
            cols = [
                job_type,
                "python3 train.py",
                "--num_steps",
                "0",
                str(steps),
                str(arrival),
                str(scale),
            ]
        if broken:
            i = draw(st.integers(0, len(cols) - 1))
            cols[i] = draw(number_text(st.integers(0, 10)))
            if draw(st.booleans()):
                cols = cols[: draw(st.integers(0, len(cols)))]
        lines.append("\t".join(cols))
    return draw(corrupted(("\n".join(lines) + "\n").encode(), broken))


# -- throughput tables -----------------------------------------------------------------------
@st.composite
def throughput_file(draw, broken: bool | None = None) -> bytes:
    """A throughputs JSON in Gavel's schema covering the fuzz job types at W = 1, 2, 4."""
    if broken is None:
        broken = draw(st.booleans())
    table: dict[str, Any] = {}
    for gpu in GPU_TYPES:
        entries = {}
        for jt in JOB_TYPES:
            for w in (1, 2, 4):
                rate = (
                    draw(st.floats(0.5, 50.0)) / w
                    if not broken
                    else draw(scalar(st.floats(0.5, 50.0)))
                )
                entries[f"('{jt}', {w})"] = {"null": rate}
        table[gpu] = entries
    if broken:
        table = draw(st.one_of(st.just(table), mutate_mapping(table)))
    return draw(serialized(table, "json", broken))


# -- generic corruption ----------------------------------------------------------------------
@st.composite
def mutate_mapping(draw, data: dict[str, Any]) -> Any:
    """``data`` with a key dropped, misspelt or replaced by a junk value, or not a mapping at all."""
    keys = list(data)
    choice = draw(st.integers(0, 4))
    out = dict(data)
    if choice == 0 and keys:
        out.pop(draw(st.sampled_from(keys)))
    elif choice == 1 and keys:
        k = draw(st.sampled_from(keys))
        out[k + "x"] = out.pop(k)
    elif choice == 2 and keys:
        out[draw(st.sampled_from(keys))] = draw(scalar(st.none()))
    elif choice == 3:
        return draw(st.sampled_from([[], "text", 12, None, [data]]))
    else:
        out[draw(st.text(min_size=1, max_size=5))] = 1
    return out


@st.composite
def serialized(draw, data: Any, fmt: str, broken: bool) -> bytes:
    if fmt == "yaml":
        text = yaml.safe_dump(data, allow_unicode=True, sort_keys=False)
    else:
        text = json.dumps(data)  # NaN and Infinity as JSON's common extension
    return draw(corrupted(text.encode(), broken))


@st.composite
def corrupted(draw, raw: bytes, broken: bool) -> bytes:
    """``raw`` as is, or (when broken) truncated, spliced with bytes that are not UTF-8, deeply
    nested, a number too long to convert, an alias bomb, replaced by random bytes, or empty."""
    if not broken or draw(st.integers(0, 2)) > 0:
        return raw
    how = draw(st.integers(0, 7))
    if how == 0:
        return raw[: draw(st.integers(0, len(raw)))]
    if how == 1:
        at = draw(st.integers(0, len(raw)))
        return (
            raw[:at]
            + draw(st.sampled_from([b"\xff\xfe", b"\x96", b"\xc3", b"\x00", b"\xed\xa0\x80"]))
            + raw[at:]
        )
    if how == 2:
        return draw(st.binary(max_size=200))
    if how == 3:
        depth = draw(st.sampled_from([50, 5000, 100_000]))
        return b"[" * depth + b"]" * depth
    if how == 4:
        return b""
    if how == 5:
        return re.sub(rb"\d+", b"9" * 5000, raw, count=1)
    if how == 6:
        return ALIAS_BOMB + raw
    return raw.replace(b":", b"", 1)


ALIAS_BOMB = b"".join(
    [b"x0: &x0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"]
    + [f"x{i}: &x{i} [{', '.join([f'*x{i - 1}'] * 9)}]\n".encode() for i in range(1, 9)]
)
"""A "billion laughs" YAML prefix: eight levels of nine aliases (9^9 values once expanded)."""


# -- command-line values ---------------------------------------------------------------------
SECONDS_FLAGS = ("--round", "--restart-penalty", "--horizon")


def seconds_value() -> st.SearchStrategy[str]:
    return number_text(st.sampled_from([1, 30, 360, 3600, 36000])) | st.sampled_from(
        ["36h", "30d", "90m", "1x", "h", "1e400d", "-5d"]
    )
