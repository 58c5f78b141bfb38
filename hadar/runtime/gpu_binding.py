"""Which GPUs each copy of a round holds, and the environment that pins its worker processes to
them. Value objects and pure functions only; the coordinator keeps the binding across rounds.

A placement says how many GPUs of each type a copy gets on each node; :func:`bind` turns those
counts into GPU ids of the nodes' numberings (:mod:`hadar.runtime.gpu_inventory`), sticky: a
copy keeps the ids it held last round on the same node and type (as many as it still needs)
before any newcomer is served, and new ids are the lowest free ones. :func:`rank_layout` gives
each worker process of a copy (one per GPU, in ``CopyTask.ranks`` order) its local rank and the
devices its node's processes see; :func:`worker_env` is that process's environment in
torchrun's conventions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hadar.runtime.gpu_inventory import NodeGpus

Key = tuple[int, int]
"""A copy: ``(job id, policy copy number)``."""
GpuIds = Mapping[str, Mapping[str, tuple[int, ...]]]
"""``{node: {gpu type: GPU ids}}``, the shape of a placement with ids instead of counts."""


class BindingError(ValueError):
    """A placement asks a node for more GPUs of a type than the node has."""


def bind(
    requests: Sequence[tuple[Key, Mapping[str, Mapping[str, int]]]],
    numbering: Mapping[str, NodeGpus],
    previous: Mapping[Key, GpuIds] | None = None,
) -> dict[Key, dict[str, dict[str, tuple[int, ...]]]]:
    """GPU ids for every ``(key, placement)`` of a round. Copies keep the ids they held in
    ``previous`` (same node and type) first; the rest get the lowest free ids. No id is given
    twice on a node. Raises BindingError when a node's type runs out."""
    previous = previous or {}
    order = sorted(range(len(requests)), key=lambda n: requests[n][0])
    used: dict[tuple[str, str], set[int]] = {}
    out: dict[Key, dict[str, dict[str, tuple[int, ...]]]] = {}
    for n in order:  # pass 1: sticky ids
        key, placement = requests[n]
        for node, per_type in placement.items():
            for gtype, count in per_type.items():
                have = set(numbering[node].ids.get(gtype, ())) if node in numbering else set()
                taken = used.setdefault((node, gtype), set())
                kept = [
                    i
                    for i in previous.get(key, {}).get(node, {}).get(gtype, ())
                    if i in have and i not in taken
                ][:count]
                taken.update(kept)
                out.setdefault(key, {}).setdefault(node, {})[gtype] = tuple(kept)
    for n in order:  # pass 2: the lowest free ids for what is still missing
        key, placement = requests[n]
        for node, per_type in placement.items():
            for gtype, count in per_type.items():
                ids = numbering[node].ids.get(gtype, ()) if node in numbering else ()
                taken = used[(node, gtype)]
                held = out[key][node][gtype]
                free = [i for i in sorted(ids) if i not in taken][: count - len(held)]
                if len(held) + len(free) < count:
                    raise BindingError(
                        f"node {node}: the round places more {gtype} GPUs than the node's "
                        f"{len(ids)} ({', '.join(map(str, ids)) or 'none'})"
                    )
                taken.update(free)
                out[key][node][gtype] = tuple(sorted((*held, *free)))
    return out


def binding_from_plan(plan: Iterable[Mapping[str, Any]]) -> dict[Key, GpuIds]:
    """The binding a journalled plan recorded (its rows' ``gpus``; rows of older runs have none)."""
    out: dict[Key, GpuIds] = {}
    for row in plan:
        gpus = row.get("gpus")
        if isinstance(gpus, Mapping):
            out[(int(row["job"]), int(row["copy"]))] = {
                node: {k: tuple(int(i) for i in ids) for k, ids in per.items()}
                for node, per in gpus.items()
            }
    return out


def devices_of(
    gpus: GpuIds, numbering: Mapping[str, NodeGpus]
) -> dict[str, dict[str, tuple[int, ...]]]:
    """The real device indices behind a copy's GPU ids (the same shape)."""
    return {
        node: {
            k: tuple(numbering[node].device(i) if node in numbering else i for i in ids)
            for k, ids in per.items()
        }
        for node, per in gpus.items()
    }


@dataclass(frozen=True)
class RankSlot:
    """One worker process of a copy: where it runs and what it sees."""

    rank: int
    node: str
    local_rank: int
    local_world_size: int
    visible: tuple[int, ...]
    """The devices of this copy on the node, in local-rank order (``CUDA_VISIBLE_DEVICES``);
    empty when the node's ranks would share a device (an emulated gang: it trains on the CPU)."""


def rank_layout(ranks: Sequence[tuple[str, str]], devices: GpuIds) -> list[RankSlot]:
    """Each rank's slot. ``ranks`` is one ``(node, gpu type)`` per process (``CopyTask.ranks``);
    the j-th rank of a (node, type) takes the j-th device of that type on that node."""
    seen: dict[tuple[str, str], int] = {}
    per_node: dict[str, list[int]] = {}
    for node, gtype in ranks:
        j = seen.get((node, gtype), 0)
        seen[(node, gtype)] = j + 1
        per_node.setdefault(node, []).append(devices[node][gtype][j])
    slots, local = [], {n: 0 for n in per_node}
    for rank, (node, _) in enumerate(ranks):
        visible = tuple(per_node[node])
        if len(set(visible)) < len(visible):
            visible = ()
        slots.append(RankSlot(rank, node, local[node], len(per_node[node]), visible))
        local[node] += 1
    return slots


def worker_env(slot: RankSlot, world_size: int, master: tuple[str, int] | None) -> dict[str, str]:
    """The environment of one worker process: its devices (numbered as ``nvidia-smi`` does) and
    its place in the gang, as torchrun sets them."""
    env = {
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": ",".join(map(str, slot.visible)),
        "RANK": str(slot.rank),
        "LOCAL_RANK": str(slot.local_rank),
        "WORLD_SIZE": str(world_size),
        "LOCAL_WORLD_SIZE": str(slot.local_world_size),
    }
    if master is not None:
        env["MASTER_ADDR"], env["MASTER_PORT"] = master[0], str(master[1])
    return env


def eval_env(numbering: NodeGpus | None) -> dict[str, str]:
    """The environment of a single process that may use the node's first GPU (evaluation)."""
    first = next((i for ids in (numbering.ids.values() if numbering else ()) for i in ids), None)
    visible = () if numbering is None or first is None else (numbering.device(first),)
    return worker_env(RankSlot(0, numbering.node if numbering else "", 0, 1, visible), 1, None)
