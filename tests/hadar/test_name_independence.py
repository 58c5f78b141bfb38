"""No scheduler may depend on what a GPU type or a node is called, nor on the order they are
declared in (issue 27): renaming GPU types (declared under ``gpu_types:``) and nodes, and
permuting their declaration order, with the same numbers, must give the same schedule up to the
renaming. Nodes (or types) identical in every figure are interchangeable, so the schedule is
compared through what does not name them: each job's start, finish and restarts, and per round
the GPUs of each (renamed) type it held."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from estimators.throughput import GavelThroughputTable, TableKey
from hadar.api import simulate
from hadar.core.cluster import Cluster, Node
from hadar.core.gpu_catalogue import GpuSpec, forget_user_gpus, register_gpu
from hadar.core.jobs import Job

POLICIES = (
    "hadar",
    "hadare",
    "gavel",
    "tiresias",
    "yarn-cs",
    "hadar-legacy",
    "gavel-makespan",
    "gavel-fifo",
)
JOB_TYPES = ("model-a", "model-b", "model-c")
GANGS = (1, 2, 4)
NAMES = ("zz-alpha", "zz-beta", "zz-gamma")


@pytest.fixture(autouse=True)
def _fresh_catalogue() -> Iterator[None]:
    forget_user_gpus()
    yield
    forget_user_gpus()


@st.composite
def scenarios(draw: st.DrawFn) -> dict:
    """GPU types (distinct datasheet figures), rates per (job type, type, gang), nodes of one
    type each and a small workload."""
    n_types = draw(st.integers(2, 3))
    tflops = draw(st.lists(st.integers(2, 40), min_size=n_types, max_size=n_types, unique=True))
    specs = [(float(t), float(draw(st.sampled_from((8, 12, 16, 24))))) for t in tflops]
    speed = st.floats(0.2, 6.0, allow_nan=False).map(lambda x: round(x, 3))
    rates = {
        (jt, k, w): draw(speed) * w * 0.9 ** (w - 1)
        for jt in JOB_TYPES
        for k in range(n_types)
        for w in GANGS
    }
    nodes = []  # (type index, GPUs): every type has at least 4 GPUs, on 1-3 nodes
    for k in range(n_types):
        sizes = draw(st.sampled_from(((4,), (2, 2), (4, 2), (1, 4), (2, 2, 1))))
        nodes += [(k, n) for n in sizes]
    jobs = [
        Job(
            job_id=i,
            job_type=draw(st.sampled_from(JOB_TYPES)),
            num_gpus=draw(st.sampled_from(GANGS)),
            total_steps=float(draw(st.integers(200, 20_000))),
            arrival=float(draw(st.sampled_from((0, 0, 0, 400, 1500, 5000)))),
        )
        for i in range(draw(st.integers(3, 10)))
    ]
    type_perm = draw(st.permutations(range(n_types)))
    decl_perm = draw(st.permutations(range(n_types)))
    node_perm = draw(st.permutations(range(len(nodes))))
    return {
        "specs": specs,
        "rates": rates,
        "nodes": nodes,
        "jobs": jobs,
        "type_names": [NAMES[i] for i in type_perm],
        "type_decl": decl_perm,
        "node_perm": node_perm,
    }


def build(sc: dict, renamed: bool) -> tuple[Cluster, GavelThroughputTable, list[str]]:
    """The scenario's cluster and table; ``renamed``: other GPU type and node names, types
    declared and nodes listed in another order. Returns the type names by type index."""
    n_types = len(sc["specs"])
    names = sc["type_names"] if renamed else list(NAMES[:n_types])
    order = sc["type_decl"] if renamed else range(n_types)
    for k in order:  # declaration order (the cluster file's gpu_types: mapping)
        tflops, mem = sc["specs"][k]
        register_gpu(GpuSpec(names[k], names[k], tflops, 0.0, mem, 3))
    nodes = [
        Node(f"{'m' if renamed else 'n'}{(i * 7 + 3) % 11 if renamed else i}", {names[k]: n})
        for i, (k, n) in enumerate(sc["nodes"])
    ]
    if renamed:
        nodes = [nodes[i] for i in sc["node_perm"]]
    table = GavelThroughputTable(
        {
            TableKey(jt, names[k], w, cons): r * (1.0 if cons else 0.8)
            for (jt, k, w), r in sc["rates"].items()
            for cons in (True, False)
        }
    )
    return Cluster("named", tuple(nodes)), table, names


def schedule(sc: dict, policy: str, renamed: bool) -> tuple[list, dict]:
    """Per job (start, finish, restarts), and per (round, job, type index) the GPUs held."""
    forget_user_gpus()
    cluster, table, names = build(sc, renamed)
    run = simulate(cluster, sc["jobs"], policy, throughputs=table, horizon_s=30 * 86400)
    index = {name: k for k, name in enumerate(names)}
    held: dict[tuple[int, int, int], int] = defaultdict(int)
    for p in run.records.placements:
        held[(p.round_index, p.job_id, index[p.gpu_type])] += p.count
    jobs = [(j.job_id, j.start, j.finish, j.restarts) for j in run.records.jobs]
    return jobs, dict(held)


@pytest.mark.parametrize("policy", POLICIES)
@settings(
    max_examples=10,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(sc=scenarios())
def test_schedule_does_not_depend_on_names(policy: str, sc: dict) -> None:
    jobs, held = schedule(sc, policy, renamed=False)
    jobs_r, held_r = schedule(sc, policy, renamed=True)
    assert held_r == held
    assert [j[0] for j in jobs_r] == [j[0] for j in jobs]
    for a, b in zip(jobs, jobs_r, strict=True):
        assert a[1] == pytest.approx(b[1], abs=1e-6)
        assert a[2] == pytest.approx(b[2], abs=1e-6)
        assert a[3] == b[3]
