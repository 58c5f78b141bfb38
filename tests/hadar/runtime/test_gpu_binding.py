"""Turning a round's placement counts into GPU ids (sticky across rounds) and the environment
of each worker process (pure functions; property tests with hypothesis)."""

from __future__ import annotations

from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hadar.runtime.gpu_binding import (
    BindingError,
    RankSlot,
    bind,
    binding_from_plan,
    devices_of,
    eval_env,
    rank_layout,
    worker_env,
)
from hadar.runtime.gpu_inventory import NodeGpus


def numbering(node: str, emulated_on: int | None = None, **ids: tuple[int, ...]) -> NodeGpus:
    order = [i for v in ids.values() for i in v]
    devices = {} if emulated_on is None else {g: n % emulated_on for n, g in enumerate(order)}
    return NodeGpus(
        node, MappingProxyType(dict(ids)), MappingProxyType(devices), emulated_on is not None
    )


FOUR = {"a": numbering("a", v100=(0, 1, 2, 3)), "b": numbering("b", t4=(0, 1), k80=(2, 3))}


def test_new_copies_get_the_lowest_free_ids_and_never_share() -> None:
    out = bind(
        [
            ((1, 0), {"a": {"v100": 1}}),
            ((2, 0), {"a": {"v100": 2}}),
            ((3, 0), {"b": {"k80": 1, "t4": 2}}),
        ],
        FOUR,
    )
    assert out == {
        (1, 0): {"a": {"v100": (0,)}},
        (2, 0): {"a": {"v100": (1, 2)}},
        (3, 0): {"b": {"k80": (2,), "t4": (0, 1)}},
    }


def test_a_copy_that_keeps_its_placement_keeps_its_ids() -> None:
    previous = {(2, 0): {"a": {"v100": (3, 1)}}, (9, 0): {"a": {"v100": (0,)}}}
    # job 9 finished, job 1 is new and sorts first: job 2 still keeps 1 and 3
    out = bind([((1, 0), {"a": {"v100": 2}}), ((2, 0), {"a": {"v100": 2}})], FOUR, previous)
    assert out == {(1, 0): {"a": {"v100": (0, 2)}}, (2, 0): {"a": {"v100": (1, 3)}}}
    # shrinking keeps a subset, growing keeps all of them
    assert bind([((2, 0), {"a": {"v100": 1}})], FOUR, previous)[(2, 0)] == {"a": {"v100": (3,)}}
    assert bind([((2, 0), {"a": {"v100": 3}})], FOUR, previous)[(2, 0)] == {
        "a": {"v100": (0, 1, 3)}
    }


def test_ids_the_node_no_longer_has_are_not_kept() -> None:
    smaller = {"a": numbering("a", v100=(0, 1))}
    assert bind([((2, 0), {"a": {"v100": 1}})], smaller, {(2, 0): {"a": {"v100": (3,)}}}) == {
        (2, 0): {"a": {"v100": (0,)}}
    }


def test_overbooking_a_node_is_an_error_naming_node_and_type() -> None:
    with pytest.raises(
        BindingError, match=r"^node b: the round places more t4 GPUs than the node's 2 \(0, 1\)$"
    ):
        bind([((1, 0), {"b": {"t4": 2}}), ((2, 0), {"b": {"t4": 1}})], FOUR)


PLACEMENT = st.fixed_dictionaries(
    {},
    optional={
        "a": st.fixed_dictionaries({"v100": st.integers(1, 4)}),
        "b": st.fixed_dictionaries(
            {}, optional={"t4": st.integers(1, 2), "k80": st.integers(1, 2)}
        ),
    },
)


def feasible(requests: list) -> list:
    """Drop requests (in order) that would overbook a node."""
    cap = {("a", "v100"): 4, ("b", "t4"): 2, ("b", "k80"): 2}
    out = []
    for key, placement in requests:
        need = {(n, k): c for n, per in placement.items() for k, c in per.items()}
        if need and all(cap[nk] >= c for nk, c in need.items()):
            for nk, c in need.items():
                cap[nk] -= c
            out.append((key, placement))
    return out


ROUND = st.lists(
    st.tuples(st.tuples(st.integers(0, 6), st.integers(0, 2)), PLACEMENT),
    unique_by=lambda r: r[0],
    max_size=8,
).map(feasible)


@settings(max_examples=300, deadline=None)
@given(ROUND, ROUND)
def test_binding_properties(first: list, second: list) -> None:
    for requests, prev in ((first, {}), (second, bind(first, FOUR))):
        out = bind(requests, FOUR, prev)
        used: dict[tuple[str, str], list[int]] = {}
        for key, placement in requests:
            for node, per in placement.items():
                for gtype, count in per.items():
                    ids = out[key][node][gtype]
                    # exactly the counts asked, from the node's ids of that type
                    assert len(ids) == count and set(ids) <= set(FOUR[node].ids[gtype])
                    used.setdefault((node, gtype), []).extend(ids)
                    # sticky: what the copy held on this node and type, it keeps (up to count)
                    held = prev.get(key, {}).get(node, {}).get(gtype, ())
                    assert len(set(ids) & set(held)) == min(count, len(held))
        for ids in used.values():  # no GPU given twice in a round
            assert len(ids) == len(set(ids))
        assert bind(list(reversed(requests)), FOUR, prev) == out  # independent of request order


def test_the_journalled_plan_gives_back_the_binding() -> None:
    plan = [
        {"job": 3, "copy": 0, "gpus": {"a": {"v100": [2, 3]}}},
        {"job": 4, "copy": 1},
    ]  # 2nd: older run
    assert binding_from_plan(plan) == {(3, 0): {"a": {"v100": (2, 3)}}}


def test_a_gang_rank_sees_its_nodes_devices_and_takes_its_local_rank() -> None:
    ranks = [("a", "v100"), ("a", "v100"), ("b", "k80"), ("b", "t4")]
    devices = {"a": {"v100": (3, 1)}, "b": {"k80": (2,), "t4": (0,)}}
    slots = rank_layout(ranks, devices)
    assert slots == [
        RankSlot(0, "a", 0, 2, (3, 1)),
        RankSlot(1, "a", 1, 2, (3, 1)),
        RankSlot(2, "b", 0, 2, (2, 0)),
        RankSlot(3, "b", 1, 2, (2, 0)),
    ]
    env = worker_env(slots[3], 4, ("10.0.0.5", 29501))
    assert env == {
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": "2,0",
        "RANK": "3",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "4",
        "LOCAL_WORLD_SIZE": "2",
        "MASTER_ADDR": "10.0.0.5",
        "MASTER_PORT": "29501",
    }
    single = worker_env(rank_layout([("a", "v100")], {"a": {"v100": (2,)}})[0], 1, None)
    assert single["CUDA_VISIBLE_DEVICES"] == "2" and "MASTER_ADDR" not in single


def test_an_emulated_gang_whose_ranks_would_share_a_device_trains_on_the_cpu() -> None:
    emulated = {"e": numbering("e", emulated_on=1, v100=(0, 1))}
    devices = devices_of({"e": {"v100": (0, 1)}}, emulated)
    assert devices == {"e": {"v100": (0, 0)}}
    slots = rank_layout([("e", "v100"), ("e", "v100")], devices)
    assert [s.visible for s in slots] == [(), ()]
    assert worker_env(slots[1], 2, ("127.0.0.1", 1234))["CUDA_VISIBLE_DEVICES"] == ""


def test_evaluation_runs_on_the_nodes_first_gpu() -> None:
    env = eval_env(FOUR["b"])
    assert (env["CUDA_VISIBLE_DEVICES"], env["RANK"], env["WORLD_SIZE"]) == ("0", "0", "1")
    assert eval_env(None)["CUDA_VISIBLE_DEVICES"] == ""
