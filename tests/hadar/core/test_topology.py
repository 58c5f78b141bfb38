"""The cluster file's network: section: the interconnect graph, its queries and its validation."""

from __future__ import annotations

import itertools
import math
import random
import sys
from pathlib import Path
from typing import Any

import networkx as nx
import pytest
import yaml

from hadar.clusters import cluster_from_dict, load_cluster
from hadar.core.errors import InputError
from hadar.core.topology import NetworkSpec, build_topology
from tests.fixtures.processes import run_group


def cluster_dict(network: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "lab",
        "nodes": [
            {"name": "a", "count": 2, "gpus": {"t4": 4}},
            {"name": "b", "gpus": {"t4": 4}},
            {"name": "c", "gpus": {"v100": 4}},
        ],
        "network": network,
    }


TRIANGLE = {
    "nic_gbps": 100,
    "racks": [
        {"name": "r1", "nodes": ["a"]},
        {"name": "r2", "nodes": ["b"], "nic_gbps": 25},
        {"name": "r3", "nodes": ["c"]},
    ],
    "links": [
        {"between": ["r1", "r2"], "gbps": 10},
        {"between": ["r2", "r3"], "gbps": 40},
        {"between": ["r1", "r3"], "gbps": 5},
    ],
}


def test_bottleneck_is_the_widest_path_computed_by_hand() -> None:
    net = cluster_from_dict(cluster_dict(TRIANGLE)).network
    assert net is not None
    # Within rack r1: both NICs are 100 Gbit/s and the rack switch is non-blocking.
    assert net.bottleneck_gbps(["a-0", "a-1"]) == 100
    # r1 -> r3: the direct 5 Gbit/s link loses to r1-r2-r3 (min(10, 40) = 10).
    assert net.bottleneck_gbps(["a-0", "c"]) == 10
    # r2 -> r3 directly at 40, but b's NIC is 25 Gbit/s.
    assert net.bottleneck_gbps(["b", "c"]) == 25
    assert net.bottleneck_gbps(["a-0", "a-1", "b", "c"]) == 10
    assert net.bottleneck_gbps(["c"]) == math.inf
    assert net.racks_spanned(["a-0", "a-1"]) == 1
    assert net.racks_spanned(["a-0", "b", "c"]) == 3
    assert net.nics(["b", "c"]) == (25, 100)


def _brute_force(g: nx.Graph, nodes: list[str]) -> float:
    """min over pairs of the max over simple paths of the path's narrowest edge."""
    best = math.inf
    for u, v in itertools.combinations(nodes, 2):
        widest = max(
            min(g.edges[p, q]["gbps"] for p, q in itertools.pairwise(path))
            for path in nx.all_simple_paths(g, ("node", u), ("node", v))
        )
        best = min(best, widest)
    return best


def _random_spec(rng: random.Random, names: list[str]) -> dict[str, Any]:
    racks = ["r0", "r1", "r2"]
    return {
        "nic_gbps": rng.choice([10, 25, 100]),
        "racks": [
            {
                "name": r,
                "nodes": names[i * 2 : i * 2 + 2],
                "nic_gbps": rng.choice([10, 25, 100]),
                **({"uplink_gbps": rng.choice([1, 10, 40])} if rng.random() < 0.5 else {}),
            }
            for i, r in enumerate(racks)
        ],
        "links": [
            {"between": [p, q], "gbps": rng.choice([5, 10, 40, 100])}
            for p, q in itertools.combinations(racks, 2)
            if rng.random() < 0.6
        ],
    }


@pytest.mark.parametrize("seed", range(12))
def test_bottleneck_matches_brute_force_on_random_meshes(seed: int) -> None:
    rng = random.Random(seed)
    names = [f"n{i}" for i in range(6)]
    for _ in range(100):  # draw until the mesh connects every rack
        spec = _random_spec(rng, names)
        try:
            topo = build_topology(NetworkSpec.model_validate(spec), names)
            break
        except InputError as exc:
            assert "is not connected" in str(exc)
    else:
        pytest.fail("no connected mesh drawn")
    for size in (2, 3, 4):
        for subset in itertools.combinations(names, size):
            assert topo.bottleneck_gbps(subset) == _brute_force(topo.graph, list(subset))


def test_as_spec_rebuilds_the_same_graph() -> None:
    net = cluster_from_dict(cluster_dict(TRIANGLE)).network
    assert net is not None
    again = build_topology(NetworkSpec.model_validate(net.as_spec()), ["a-0", "a-1", "b", "c"])
    assert again == net
    assert nx.utils.edges_equal(again.graph.edges(data=True), net.graph.edges(data=True))


def test_the_bundled_two_rack_cluster() -> None:
    c = load_cluster("sim-60gpu-2rack")
    plain = load_cluster("sim-60gpu")
    assert c.nodes == plain.nodes and plain.network is None
    assert c.network is not None
    assert c.network.bottleneck_gbps(["v100-0", "p100-2"]) == 25
    assert c.network.bottleneck_gbps(["v100-0", "k80-4"]) == 10
    assert c.network.racks_spanned(c.node_names) == 2
    assert c.subset(["v100-0", "k80-0"]).network is c.network


BAD = [
    ({"nic_gbps": 0, "racks": TRIANGLE["racks"]}, "network.nic_gbps", "must be >= 0.01 Gbit/s"),
    ({"nic_gbps": -5, "racks": TRIANGLE["racks"]}, "network.nic_gbps", "must be >= 0.01 Gbit/s"),
    ({"nic_gbps": float("inf"), "racks": TRIANGLE["racks"]}, "network.nic_gbps", "finite"),
    ({"nic_gbps": float("nan"), "racks": TRIANGLE["racks"]}, "network.nic_gbps", "finite"),
    ({"nic_gbps": "fast", "racks": TRIANGLE["racks"]}, "network.nic_gbps", "number"),
    (
        {"nic_gbps": 10, "racks": [{"name": "r", "nodes": ["a", "b", "c"], "uplink_gbps": -1}]},
        "network.racks[0].uplink_gbps",
        "must be >= 0.01 Gbit/s",
    ),
    (
        {"nic_gbps": 10, "racks": [{"name": "r", "nodes": ["a", "b", "c", "zz"]}]},
        "network.racks[0].nodes",
        "unknown node 'zz'",
    ),
    (
        {"nic_gbps": 10, "racks": [{"name": "r", "nodes": ["a", "b"]}]},
        "network.racks",
        "node 'c' is in no rack",
    ),
    (
        {
            "nic_gbps": 10,
            "racks": [{"name": "r", "nodes": ["a", "b", "c"]}, {"name": "s", "nodes": ["b"]}],
        },
        "network.racks[1].nodes",
        "node 'b' is already in rack 'r'",
    ),
    (
        {
            "nic_gbps": 10,
            "racks": [{"name": "r", "nodes": ["a"]}, {"name": "r", "nodes": ["b", "c"]}],
        },
        "network.racks[1].name",
        "declared twice",
    ),
    (
        {"nic_gbps": 10, "racks": [{"name": "core", "nodes": ["a", "b", "c"]}]},
        "network.racks[0].name",
        "core switch",
    ),
    (
        {
            "nic_gbps": 10,
            "racks": [
                {"name": "r1", "nodes": ["a"], "uplink_gbps": 10},
                {"name": "r2", "nodes": ["b", "c"]},
            ],
        },
        "network",
        "rack 'r2' is not connected to rack 'r1'",
    ),
    (
        {**TRIANGLE, "links": [{"between": ["r1", "r9"], "gbps": 10}]},
        "network.links[0].between",
        "unknown switch 'r9'",
    ),
    (
        {**TRIANGLE, "links": [{"between": ["r1", "r2"], "gbps": 0}]},
        "network.links[0].gbps",
        "must be >= 0.01 Gbit/s",
    ),
    ({**TRIANGLE, "spine": 4}, "network.spine", "unknown field"),
]


@pytest.mark.parametrize("network, field, message", BAD)
def test_bad_network_is_one_line_naming_file_and_field(
    network: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(InputError) as info:
        cluster_from_dict(cluster_dict(network), source="lab.yaml")
    text = str(info.value)
    assert text.startswith(f"lab.yaml: {field}: "), text
    assert message in text and "\n" not in text


def test_bad_network_through_the_cli_exits_2(tmp_path: Path) -> None:
    f = tmp_path / "lab.yaml"
    bad = cluster_dict({"nic_gbps": 10, "racks": [{"name": "r", "nodes": ["a", "b", "c", "q"]}]})
    f.write_text(yaml.safe_dump(bad))
    proc = run_group(
        [sys.executable, "-m", "hadar", "simulate", "--cluster", str(f), "--workload", "philly-8"]
        + ["--out", str(tmp_path / "out")],
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "lab.yaml: network.racks[0].nodes: unknown node 'q'" in lines[0]
