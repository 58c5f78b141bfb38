"""Numbering a node's GPUs and checking them against what nvidia-smi shows (pure functions)."""

from __future__ import annotations

import pytest

from hadar.clusters import cluster_from_dict
from hadar.core.cluster import Node
from hadar.core.errors import InputError
from hadar.core.gpu_catalogue import gpu_for_smi_name
from hadar.runtime.gpu_inventory import (
    GpuMismatchError,
    GpuReport,
    SeenGpu,
    declared_numbering,
    gpu_report,
    number_emulated,
    number_nodes,
    number_real,
)

V100 = ("Tesla V100-SXM2-16GB", 16160.0)
T4 = ("Tesla T4", 15360.0)
RTX3090 = ("NVIDIA GeForce RTX 3090", 24576.0)


def seen(*gpus: tuple[str, float]) -> GpuReport:
    return GpuReport(tuple(SeenGpu(i, n, m) for i, (n, m) in enumerate(gpus)))


def node(name: str = "n", emulate: bool = False, gpu_indices=None, **gpus: int) -> Node:
    return Node(
        name,
        {k.replace("_", "-"): c for k, c in gpus.items()},
        emulate=emulate,
        gpu_indices=gpu_indices,
    )


@pytest.mark.parametrize(
    "name, gid",
    [
        ("Tesla V100-SXM2-16GB", "v100"),
        ("Tesla V100-PCIE-32GB", "v100"),
        ("Tesla K80", "k80"),
        ("Tesla P100-PCIE-16GB", "p100"),
        ("Tesla T4", "t4"),
        ("NVIDIA T400 4GB", "t400"),
        ("NVIDIA TITAN RTX", "titan-rtx"),
        ("NVIDIA GeForce RTX 3090", "rtx3090"),
        ("NVIDIA RTX A2000 12GB", "rtx-a2000"),
        ("NVIDIA A10G", "a10g"),
        ("NVIDIA A100-SXM4-40GB", "a100"),
        ("NVIDIA A100 80GB PCIe", "a100"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA GeForce RTX 3090 Ti", None),
        ("NVIDIA L4", None),
        ("Tesla T40", None),
    ],
)
def test_nvidia_smi_names_map_to_catalogue_types(name: str, gid: str | None) -> None:
    assert gpu_for_smi_name(name) == gid


def test_a_real_node_takes_the_lowest_matching_indices_per_type() -> None:
    # a mixed box whose nvidia-smi order differs from the declared order
    g = number_real(node(rtx3090=1, t4=2), seen(T4, RTX3090, T4, T4))
    assert dict(g.ids) == {"rtx3090": (1,), "t4": (0, 2)}
    assert [g.device(i) for i in (0, 1, 2)] == [0, 1, 2] and not g.emulated


def test_gpu_indices_pin_the_devices_and_are_checked() -> None:
    g = number_real(node(t4=2, gpu_indices={"t4": (3, 2)}), seen(T4, T4, T4, T4))
    assert dict(g.ids) == {"t4": (3, 2)}
    with pytest.raises(GpuMismatchError) as e:
        number_real(node(t4=1, gpu_indices={"t4": (5,)}), seen(T4, T4))
    assert (
        str(e.value)
        == "node n: gpu_indices: t4 GPU 5 does not exist (nvidia-smi shows 0: Tesla T4 15 GiB, 1: Tesla T4 15 GiB)"
    )
    with pytest.raises(GpuMismatchError) as e:
        number_real(node(t4=1, gpu_indices={"t4": (1,)}), seen(T4, RTX3090))
    assert (
        str(e.value)
        == "node n: gpu_indices: GPU 1 is a NVIDIA GeForce RTX 3090, not a t4 (Tesla T4)"
    )


def test_more_gpus_than_the_node_has_is_one_line_naming_node_and_gpu() -> None:
    with pytest.raises(GpuMismatchError) as e:
        number_real(node("gpu1", v100=2), seen(V100, T4))
    assert str(e.value) == (
        "node gpu1: declares 2x v100 but nvidia-smi shows 1 usable "
        "(0: Tesla V100-SXM2-16GB 16 GiB, 1: Tesla T4 15 GiB)"
    )
    assert isinstance(e.value, InputError) and e.value.exit_code == 2 and "\n" not in str(e.value)


def test_a_type_the_node_lacks() -> None:
    with pytest.raises(
        GpuMismatchError,
        match=r"^node gpu1: declares 1x a100 but nvidia-smi shows none usable "
        r"\(0: Tesla T4 15 GiB\)$",
    ):
        number_real(node("gpu1", a100=1), seen(T4))


def test_less_memory_than_the_catalogue_type_is_a_mismatch() -> None:
    small = GpuReport((SeenGpu(0, "NVIDIA T400 2GB", 2048.0),))
    with pytest.raises(GpuMismatchError) as e:
        number_real(node(t400=1), small)
    assert str(e.value).endswith("GPU 0 (NVIDIA T400 2GB) has 2.0 GiB, the catalogue's t400 4 GB")
    # 4 GB nominal shows as 3.8-4 GiB: that is the catalogue's T400
    assert number_real(node(t400=1), GpuReport((SeenGpu(0, "NVIDIA T400 4GB", 3906.0),))).ids == {
        "t400": (0,)
    }


def test_a_real_node_that_shows_no_gpu_says_why_and_how_to_emulate() -> None:
    with pytest.raises(GpuMismatchError) as e:
        number_real(node("cpu1", t4=1), GpuReport(problem="nvidia-smi not found"))
    assert str(e.value) == (
        "node cpu1: declares 1x t4 but shows no NVIDIA GPU (nvidia-smi not found); "
        "set emulate: true on the node to train on its CPU"
    )


def test_emulated_nodes_use_the_real_devices_in_turn_or_none() -> None:
    n = node(emulate=True, v100=3)
    assert number_emulated(n, GpuReport(problem="nvidia-smi not found")) == declared_numbering(n)
    g = number_emulated(n, seen(("NVIDIA H100 80GB HBM3", 81559.0)))
    assert dict(g.ids) == {"v100": (0, 1, 2)} and [g.device(i) for i in range(3)] == [0, 0, 0]
    g = number_emulated(n, seen(T4, T4), offset=1)
    assert [g.device(i) for i in range(3)] == [1, 0, 1] and g.emulated


def test_local_nodes_share_one_machine_without_sharing_a_gpu() -> None:
    a, b, c = node("a", v100=2), node("b", v100=1), node("c", v100=2)
    four = seen(V100, V100, V100, V100)
    reports = {"a": four, "b": four, "c": four}
    numbered, problems = number_nodes([a, b, c], reports, shared_machine=True)
    assert {k: dict(g.ids) for k, g in numbered.items()} == {
        "a": {"v100": (0, 1)},
        "b": {"v100": (2,)},
    }
    assert problems == {
        "c": "node c: declares 2x v100 but nvidia-smi shows 1 usable (0: Tesla V100-SXM2-16GB "
        "16 GiB, 1: Tesla V100-SXM2-16GB 16 GiB, 2: Tesla V100-SXM2-16GB 16 GiB, 3: Tesla "
        "V100-SXM2-16GB 16 GiB); GPU 0, 1 held by local node a; GPU 2 held by local node b"
    }
    # separate machines (ssh): each numbers its own GPUs from 0
    numbered, problems = number_nodes([a, b, c], reports, shared_machine=False)
    assert not problems and numbered["c"].ids == {"v100": (0, 1)}
    # nodes numbered in an earlier round keep their devices: a newcomer takes the others
    later, _ = number_nodes([c], {"c": four}, shared_machine=True, numbered={"a": numbered["a"]})
    assert later["c"].ids == {"v100": (2, 3)}
    pinned = node("d", v100=1, gpu_indices={"v100": (1,)})
    _, problems = number_nodes([a, pinned], {"a": four, "d": four}, shared_machine=True)
    assert (
        problems["d"]
        == "node d: gpu_indices: GPU 1 is already local node a's (local nodes share this machine's GPUs)"
    )


def test_emulated_local_nodes_spread_over_the_machine() -> None:
    nodes = [node(x, emulate=True, t4=1) for x in "abc"]
    two = seen(T4, T4)
    numbered, problems = number_nodes(nodes, dict.fromkeys("abc", two), shared_machine=True)
    assert not problems and [numbered[x].device(0) for x in "abc"] == [0, 1, 0]


def test_the_health_report_becomes_a_gpu_report() -> None:
    details = {
        "gpus": [{"index": 0, "name": "Tesla T4", "memory_mib": 15360.0}],
        "smi_problem": None,
    }
    assert gpu_report(details) == seen(T4)
    assert gpu_report({"nvidia_smi": ["Tesla T4"]}) == GpuReport(
        (SeenGpu(0, "Tesla T4"),)
    )  # older probe
    assert gpu_report({}).problem == "the node's health probe did not report"


def test_cluster_file_emulate_default_and_gpu_indices_validation() -> None:
    def load(provider: str, **extra):
        return cluster_from_dict(
            {
                "name": "c",
                "provider": provider,
                "nodes": [{"name": "a", "gpus": {"Tesla T4": 2}, **extra}],
            },
            source="c.yaml",
        )

    assert load("local").node("a").emulate is True
    assert load("ssh").node("a").emulate is False
    assert load("ssh", emulate=True).node("a").emulate is True
    assert load("ssh", gpu_indices={"t4": [3, 1]}).node("a").gpu_indices == {"t4": (3, 1)}
    for bad, msg in [
        ({"t4": [1]}, "c.yaml: nodes[0]: gpu_indices: t4 lists 1 indices for 2 GPUs"),
        ({"t4": [1, 1]}, "c.yaml: nodes[0].gpu_indices: device index 1 is listed twice"),
        (
            {"t4": [0, -1]},
            "c.yaml: nodes[0].gpu_indices: t4: a list of device indices >= 0 (got [0, -1])",
        ),
        (
            {"t4": [0, 1], "v100": [2]},
            "c.yaml: nodes[0]: gpu_indices: v100 is not among the node's gpus",
        ),
        ({"v200": [0]}, "c.yaml: nodes[0].gpu_indices: v200: unknown GPU type 'v200'"),
    ]:
        with pytest.raises(InputError) as e:
            load("ssh", gpu_indices=bad)
        assert str(e.value).split(" (known")[0] == msg
