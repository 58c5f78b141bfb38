"""Node-availability streams: parsing and its bad-input lines, availability, the generator's
calibration against the published statistics, the Slurm converter."""

from __future__ import annotations

import pytest

from hadar.core.errors import InputError
from hadar.core.io import csv_text
from hadar.core.node_stream import (
    COLUMNS,
    build_stream,
    idle_counts,
    load_node_stream,
    parse_node_stream,
    stream_rows,
    stream_stats,
)
from hadar.workloads.node_streams import PRESETS, generate_stream, lognormal_for, rates_for
from hadar.workloads.slurm_nodes import parse_slurm_log

NODES = ("a", "b", "c")
GOOD = "time,node,event\n0,a,join\n0,b,join\n30,a,leave\n45.5,a,join\n60,b,leave\n"


def test_parse_and_availability() -> None:
    s = parse_node_stream(GOOD, "s.csv", NODES)
    assert s.times == (0.0, 30.0, 45.5, 60.0)
    assert s.available(("a", "b", "c"), 0.0) == ("a", "b")  # c is never named: never up
    assert s.available(("a", "b", "c"), 30.0) == ("b",)  # a leave at t counts at t
    assert s.available(("a", "b", "c"), 50.0) == ("a", "b")
    assert s.available(("a", "b", "c"), 1e6) == ("a",)  # a stays after the stream ends
    assert s.next_time(30.0) == 45.5 and s.next_time(60.0) is None
    assert [(f.node, f.start, f.end) for f in s.fragments] == [
        ("a", 0.0, 30.0),
        ("b", 0.0, 60.0),
        ("a", 45.5, 60.0),
    ]
    assert idle_counts(s) == ((0.0, 2), (30.0, 1), (45.5, 2), (60.0, 1))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("time,node\n0,a\n", "s.csv: line 1 (header): missing column(s) event"),
        (
            "time,node,event\n10,a,join\n5,b,join\n",
            "s.csv: line 3, field time: times must be sorted: 5 comes after 10",
        ),
        (
            "time,node,event\n0,zz,join\n",
            "s.csv: line 2, field node: node 'zz' is not declared in c.yaml",
        ),
        (
            "time,node,event\n0,a,leave\n",
            "s.csv: line 2, field event: node 'a' leaves at 0 s before its first join (a leave before a join)",
        ),
        (
            "time,node,event\n0,a,join\n5,a,join\n",
            "s.csv: line 3, field event: node 'a' joins at 5 s while already in the pool (overlapping fragments)",
        ),
        (
            "time,node,event\n0,a,arrive\n",
            "s.csv: line 2, field event: must be join or leave (got 'arrive')",
        ),
        ("time,node,event\nsoon,a,join\n", "s.csv: line 2, field time: not a number (got 'soon')"),
        ("time,node,event\n-1,a,join\n", "s.csv: line 2, field time: must be a finite number"),
        ("time,node,event\nnan,a,join\n", "s.csv: line 2, field time: not a number (got 'nan')"),
        ("time,node,event\n1_0,a,join\n", "s.csv: line 2, field time: not a number (got '1_0')"),
        ("time,node,event\n0x1p3,a,join\n", "s.csv: line 2, field time: not a number"),
        ("time,node,event\n\u0661\u0662,a,join\n", "s.csv: line 2, field time: not a number"),
        ("time,node,event\n1e400,a,join\n", "s.csv: line 2, field time: must be a finite number"),
        ("time,node,event\n", "s.csv: no events"),
        (
            "time,node,event,gpus\n0,a,join,4\n",
            "s.csv: line 1 (header): unknown column(s) 'gpus' (a node stream has time,node,event)",
        ),
        (
            "time,node,event,node\n0,a,join,b\n",
            "s.csv: line 1 (header): column 'node' is named twice",
        ),
    ],
)
def test_bad_streams_name_file_line_and_field(text: str, expected: str) -> None:
    with pytest.raises(InputError) as exc:
        parse_node_stream(text, "s.csv", NODES, cluster_source="c.yaml")
    assert str(exc.value).startswith(expected)
    assert "\n" not in str(exc.value)


def test_load_missing_file(tmp_path) -> None:
    with pytest.raises(InputError, match="node stream not found"):
        load_node_stream(tmp_path / "none.csv", NODES)


def test_lognormal_solves_both_published_points() -> None:
    from statistics import NormalDist

    mu, sigma = lognormal_for(0.58, 0.10, 600.0)
    import math

    z = (math.log(600.0) - mu) / sigma
    assert NormalDist().cdf(z) == pytest.approx(0.58)
    assert NormalDist().cdf(z - sigma) == pytest.approx(0.10)


def test_summit_generator_matches_published_statistics() -> None:
    nodes = [f"n{i:04d}" for i in range(512)]
    s = generate_stream(nodes, 48, seed=3, machine=PRESETS["summit"])
    st = stream_stats(s)
    # BFTrainer Table 1 / Fig. 1: 41.7 joins/h, 28.6 leaves/h on all of Summit's 4,608 nodes,
    # thinned to the events that touch 512 of them (33.6/h, 24.5/h); 58 % < 10 min holding ~10 %
    joins, leaves = rates_for(PRESETS["summit"], 512)
    assert (round(joins, 1), round(leaves, 1)) == (33.6, 24.5)
    assert st.join_events_per_hour == pytest.approx(joins, rel=0.08)
    assert st.leave_events_per_hour == pytest.approx(leaves, rel=0.10)
    assert st.short_fragment_share == pytest.approx(0.58, abs=0.04)
    assert st.short_node_time_share == pytest.approx(0.10, abs=0.03)
    assert st.mean_idle_nodes == pytest.approx(0.111 * 512, rel=0.12)
    # the stream is valid: it survives its own CSV and the strict parser
    again = parse_node_stream(csv_text(stream_rows(s), COLUMNS), "g.csv", nodes)
    assert again.events == s.events


def test_event_rates_scale_to_the_node_count() -> None:
    """The presets' rates are the whole machine's: a subset of its nodes sees only the events
    that touch it. The thinning formula agrees with a subset of a whole-machine stream."""
    summit = PRESETS["summit"]
    rates = [rates_for(summit, n)[0] for n in (16, 256, 1024, 4608, 9000)]
    assert rates == sorted(rates) and rates[-2] == rates[-1] == 41.7
    nodes = [f"n{i:04d}" for i in range(summit.machine_nodes)]
    whole = generate_stream(nodes, 24, seed=1, machine=summit)
    subset = set(nodes[:1024])
    seen = {e.time for e in whole.events if e.event == "join" and e.node in subset and e.time > 0}
    assert len(seen) / 24 == pytest.approx(rates_for(summit, 1024)[0], rel=0.08)
    alone = stream_stats(generate_stream(nodes[:1024], 24, seed=1, machine=summit))
    assert alone.join_events_per_hour == pytest.approx(len(seen) / 24, rel=0.1)


def test_generator_is_seeded() -> None:
    nodes = [f"n{i}" for i in range(64)]
    a = generate_stream(nodes, 6, seed=1)
    assert a.events == generate_stream(nodes, 6, seed=1).events
    assert a.events != generate_stream(nodes, 6, seed=2).events


def test_theta_changes_less_often_than_summit() -> None:
    nodes = [f"n{i}" for i in range(512)]
    theta = stream_stats(generate_stream(nodes, 72, seed=0, machine=PRESETS["theta"]))
    assert theta.join_events_per_hour == pytest.approx(6.3, rel=0.2)
    assert theta.leave_events_per_hour == pytest.approx(6.2, rel=0.2)


SLURM = """Timestamp|NodeName|State
2024-03-01T00:00:00|gpu1|allocated
2024-03-01T00:00:00|gpu2|idle
2024-03-01T00:00:00|gpu3|idle*
2024-03-01T00:05:00|gpu1|IDLE
2024-03-01T00:05:00|gpu2|idle
2024-03-01T00:05:10|gpu3|down
2024-03-01T00:10:00|gpu2|mixed
2024-03-01T00:10:05|gpu1|allocated
2024-03-01T00:10:05|gpu2|idle
2024-03-01T00:10:15|gpu2|allocated
2024-03-01T00:20:00|gpu1|idle
"""


def test_slurm_log_to_stream() -> None:
    s = parse_slurm_log(SLURM, "log.txt")
    assert [(e.time, e.node, e.event) for e in s.events] == [
        (0.0, "gpu2", "join"),  # idle* (not responding) never joins
        (300.0, "gpu1", "join"),  # IDLE in any case; a repeated idle snapshot changes nothing
        (600.0, "gpu2", "leave"),
        (605.0, "gpu1", "leave"),
        (605.0, "gpu2", "join"),
        (615.0, "gpu2", "leave"),
        (1200.0, "gpu1", "join"),  # still idle when the log ends
    ]
    short = parse_slurm_log(SLURM, "log.txt", min_fragment_s=60)
    assert ("gpu2", 605.0) not in {(e.node, e.time) for e in short.events}
    # a spell still open when the log ends is cut off, not short: it stays, and so does the end
    assert (1200.0, "gpu1", "join") in {(e.time, e.node, e.event) for e in short.events}
    assert short.end == s.end == 1200.0
    # the converter's output passes the strict parser
    parse_node_stream(csv_text(stream_rows(s), COLUMNS), "x.csv", ("gpu1", "gpu2", "gpu3"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Time,Node,State\n", "log.txt: line 1 (header): no time column"),
        (
            "Timestamp|NodeName|State\n100|a|idle\n50|a|allocated\n",
            "log.txt: line 3, field Timestamp: times must be sorted",
        ),
        (
            "Timestamp|NodeName|State\nyesterday|a|idle\n",
            "log.txt: line 2, field Timestamp: not ISO 8601",
        ),
        ("Timestamp|NodeName|State\n1|a|allocated\n", "log.txt: no node was idle"),
        (
            "Timestamp|NodeName|State\n0|a|idle\n1e300|a|down\n",
            "log.txt: line 3, field Timestamp: epoch seconds must be in [0, 253402300799]",
        ),
        (
            "Timestamp|NodeName|State\n0|a|idle\n400000000|a|down\n",
            "log.txt: line 3, field Timestamp: 4e+08 s after the first row, beyond a node "
            "stream's 3.1536e+08 s",
        ),
        ("Timestamp|NodeName|State\n0|a\x00b|idle\n", "log.txt: line 2, field NodeName: node "),
        (
            "Timestamp|NodeName|State\n0|../etc|idle\n",
            "log.txt: line 2, field NodeName: node '../etc' is not a safe name",
        ),
        (
            "Timestamp|NodeName|State\n0|gpu[01-02|idle\n",
            "log.txt: line 2, field NodeName: unbalanced",
        ),
        (
            "Timestamp|NodeName|State\n0|gpu[3-1]|idle\n",
            "log.txt: line 2, field NodeName: range '3-1'",
        ),
        (
            "Timestamp|NodeName|State\n0|gpu[a-b]|idle\n",
            "log.txt: line 2, field NodeName: 'a-b' in",
        ),
        (
            "Timestamp|NodeName|State\n0|n[0-999999999]|idle\n",
            "log.txt: line 2, field NodeName: host list 'n[0-999999999]' names more than 100,000",
        ),
        (
            "Timestamp|NodeName|State\n0|" + "x" * 200_000 + "|idle\n",
            "log.txt: line 2: malformed CSV: field larger than field limit",
        ),
    ],
)
def test_bad_slurm_logs(text: str, expected: str) -> None:
    with pytest.raises(InputError) as exc:
        parse_slurm_log(text, "log.txt")
    assert str(exc.value).startswith(expected)


def test_slurm_host_lists_are_expanded_as_sinfo_compresses_them() -> None:
    """``gpu[01-02],cpu1`` is three nodes (zero padding kept), ``r[1-2]n[1-2]`` four; each
    takes the row's state."""
    text = (
        "Timestamp|NodeList|State\n"
        "0|gpu[01-02],cpu1|idle\n"
        "60|gpu01|allocated\n"
        "90|r[1-2]n[1-2]|idle\n"
        "120|gpu[02,01]|allocated\n"
    )
    s = parse_slurm_log(text, "log.txt")
    assert set(s.nodes) == {"gpu01", "gpu02", "cpu1", "r1n1", "r1n2", "r2n1", "r2n2"}
    assert [(e.time, e.node, e.event) for e in s.events if e.node.startswith("gpu")] == [
        (0.0, "gpu01", "join"),
        (0.0, "gpu02", "join"),
        (60.0, "gpu01", "leave"),
        (120.0, "gpu02", "leave"),
    ]
    parse_node_stream(csv_text(stream_rows(s), COLUMNS), "x.csv", s.nodes)


def test_build_stream_orders_leave_before_join() -> None:
    from hadar.core.node_stream import NodeEvent

    s = build_stream(
        [NodeEvent(5, "a", "join"), NodeEvent(5, "a", "leave"), NodeEvent(0, "a", "join")]
    )
    assert [e.event for e in s.events] == ["join", "leave", "join"]
    parse_node_stream(csv_text(stream_rows(s), COLUMNS), "x.csv", ("a",))
