"""The cluster's interconnect: racks, switches and link bandwidths as a ``networkx`` graph.

A cluster file may declare an optional ``network:`` section (schema: :class:`NetworkSpec`,
documented in ``docs/estimators.md``, "The network"). Its graph has one vertex per node, one per
rack switch and, when any rack has an uplink, one for the core switch; each edge carries its
bandwidth in Gbit/s (``gbps``):

* node -- its rack's switch: the node's NIC (``nic_gbps``);
* rack switch -- core switch: the rack's ``uplink_gbps``;
* switch -- switch: an extra ``links`` entry (e.g. two racks cabled directly).

Switches are taken as non-blocking. The bandwidth a set of nodes can exchange data at is the
*widest path* (max-min) bandwidth between its two worst-connected members: in a maximum spanning
tree the path between any two vertices is a widest path, so the figure is the narrowest edge of
the tree's subtree that joins the set. Contention between gangs sharing a link is not modelled.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from hadar.core.errors import InputError
from hadar.core.validation import Gbps

if TYPE_CHECKING:  # networkx is imported when a cluster declares a network (0.14 s otherwise)
    import networkx as nx

CORE = "core"
"""The core switch's name: what racks' ``uplink_gbps`` connect to; a ``links`` end may name it."""

_Vertex = tuple[str, str]
"""A graph vertex: ``("node", name)``, ``("rack", name)`` or ``("core", "core")``."""


def _listed(value: object) -> object:
    """A YAML list as the tuple it stands for (files are validated strictly)."""
    return tuple(value) if isinstance(value, list) else value


class RackSpec(BaseModel):
    """One rack: its switch, the nodes cabled to it and its uplink to the core switch."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str = Field(min_length=1)
    nodes: list[str] = Field(min_length=1)
    uplink_gbps: Gbps | None = None
    nic_gbps: Gbps | None = None


class LinkSpec(BaseModel):
    """An extra switch-to-switch link (rack names or ``core``)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    between: Annotated[tuple[str, str], BeforeValidator(_listed)]
    gbps: Gbps


class NetworkSpec(BaseModel):
    """The ``network:`` section of a cluster file."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    nic_gbps: Gbps
    racks: list[RackSpec] = Field(min_length=1)
    links: list[LinkSpec] = Field(default_factory=list)


@dataclass(frozen=True)
class Topology:
    """A cluster's interconnect graph with the queries the estimators need (see the module doc)."""

    rack_of: Mapping[str, str]
    """Each node's rack."""
    nic: Mapping[str, float]
    """Each node's NIC bandwidth (its link to its rack switch), Gbit/s."""
    graph: nx.Graph = field(compare=False, repr=False)
    _tree: nx.Graph = field(compare=False, repr=False)
    _cache: dict[frozenset[str], float] = field(
        default_factory=dict, compare=False, repr=False, hash=False
    )

    def nics(self, nodes: Iterable[str]) -> tuple[float, ...]:
        """The NIC bandwidths of ``nodes``, in their order."""
        return tuple(self.nic[n] for n in nodes)

    def bottleneck_gbps(self, nodes: Iterable[str]) -> float:
        """Widest-path bandwidth of the set: the max-min bandwidth between its worst-connected
        pair (inf for a single node: nothing crosses the network)."""
        key = frozenset(nodes)
        hit = self._cache.get(key)
        if hit is None:
            hit = _steiner_bottleneck(self._tree, [("node", n) for n in sorted(key)])
            self._cache[key] = hit
        return hit

    def racks_spanned(self, nodes: Iterable[str]) -> int:
        """How many racks the nodes sit in."""
        return len({self.rack_of[n] for n in nodes})

    def as_spec(self) -> dict[str, Any]:
        """The ``network:`` section that rebuilds this topology, node names spelled out."""
        g = self.graph
        racks: dict[str, dict[str, Any]] = {}
        for node, rack in self.rack_of.items():
            racks.setdefault(rack, {"name": rack, "nodes": []})["nodes"].append(node)
        for entry in racks.values():
            entry["nic_gbps"] = self.nic[entry["nodes"][0]]
            up = g.get_edge_data(("rack", entry["name"]), (CORE, CORE))
            if up is not None:
                entry["uplink_gbps"] = float(up["gbps"])
        links = [
            {"between": [a[1], b[1]], "gbps": float(d["gbps"])}
            for a, b, d in g.edges(data=True)
            if a[0] != "node" and b[0] != "node" and CORE not in (a[0], b[0])
        ]
        nics = {e["nic_gbps"] for e in racks.values()}
        default = max(nics, key=lambda v: sum(e["nic_gbps"] == v for e in racks.values()))
        for entry in racks.values():
            if entry["nic_gbps"] == default:
                del entry["nic_gbps"]
        return {
            "nic_gbps": default,
            "racks": list(racks.values()),
            **({"links": links} if links else {}),
        }


def _steiner_bottleneck(tree: nx.Graph, members: Sequence[_Vertex]) -> float:
    """The narrowest edge of the subtree of ``tree`` joining ``members``: the union of the tree
    paths from the first member to the others (one traversal from it)."""
    if len(members) < 2:
        return math.inf
    root, rest = members[0], set(members[1:])
    import networkx as nx

    parent = dict(nx.bfs_predecessors(tree, root))
    narrowest = math.inf
    seen: set[_Vertex] = {root}
    for v in rest:
        while v not in seen:
            seen.add(v)
            u = parent[v]
            narrowest = min(narrowest, float(tree.edges[u, v]["gbps"]))
            v = u
    return narrowest


def build_topology(
    spec: NetworkSpec, node_names: Sequence[str], groups: Mapping[str, Sequence[str]] | None = None
) -> Topology:
    """The graph of ``spec`` over the cluster's nodes. A rack's ``nodes`` entry is a node name,
    or the name of a cluster-file ``nodes`` entry with ``count > 1`` (``groups``: that name ->
    its nodes) standing for all of them. Raises :class:`InputError` naming the field (without
    the file: the caller adds it): unknown or repeated node or rack, a node in no rack, a link
    to an unknown switch, a graph that does not connect every node."""
    import networkx as nx

    groups = groups or {}
    known = set(node_names)
    g = nx.Graph()
    rack_of: dict[str, str] = {}
    nic_of: dict[str, float] = {}
    racks: list[str] = []
    for i, rack in enumerate(spec.racks):
        where = f"network.racks[{i}]"
        if rack.name == CORE or rack.name in racks:
            what = "is the core switch's name" if rack.name == CORE else "is declared twice"
            raise InputError(f"{where}.name: rack {rack.name!r} {what}")
        racks.append(rack.name)
        nic = rack.nic_gbps if rack.nic_gbps is not None else spec.nic_gbps
        for entry in rack.nodes:
            members = [entry] if entry in known else list(groups.get(entry, ()))
            if not members:
                raise InputError(f"{where}.nodes: unknown node {entry!r}")
            for node in members:
                if node in rack_of:
                    raise InputError(
                        f"{where}.nodes: node {node!r} is already in rack {rack_of[node]!r}"
                    )
                rack_of[node] = rack.name
                nic_of[node] = nic
                g.add_edge(("node", node), ("rack", rack.name), gbps=nic)
        if rack.uplink_gbps is not None:
            g.add_edge(("rack", rack.name), (CORE, CORE), gbps=rack.uplink_gbps)
    missing = [n for n in node_names if n not in rack_of]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise InputError(f"network.racks: node {missing[0]!r}{more} is in no rack")
    for i, link in enumerate(spec.links):
        ends = []
        for name in link.between:
            if name == CORE:
                ends.append((CORE, CORE))
            elif name in racks:
                ends.append(("rack", name))
            else:
                raise InputError(
                    f"network.links[{i}].between: unknown switch {name!r} (a rack name or {CORE!r})"
                )
        if ends[0] == ends[1]:
            raise InputError(f"network.links[{i}].between: a link needs two different switches")
        if g.has_edge(*ends):
            raise InputError(
                f"network.links[{i}].between: {link.between[0]!r} and {link.between[1]!r} are "
                f"already linked"
            )
        g.add_edge(*ends, gbps=link.gbps)
    if not nx.is_connected(g):
        first = ("node", node_names[0])
        cut = next(v for v in g if not nx.has_path(g, first, v))
        where = {"node": f"rack {rack_of[cut[1]]!r}", "rack": f"rack {cut[1]!r}"}.get(
            cut[0], "the core switch"
        )
        raise InputError(
            f"network: {where} is not connected to rack {rack_of[node_names[0]]!r} (give each "
            f"rack an uplink_gbps, or links between racks)"
        )
    tree = nx.maximum_spanning_tree(g, weight="gbps")
    return Topology(rack_of=rack_of, nic=nic_of, graph=g, _tree=tree)
