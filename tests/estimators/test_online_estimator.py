"""OnlineThroughput: first measurement replaces the prior, later ones are smoothed; persistence;
bad input; concurrent observers."""

from __future__ import annotations

import json
import logging
import threading

import numpy as np
import pytest

from estimators.composite import CompositeThroughput
from estimators.online import DEFAULT_ALPHA, OnlineThroughput
from estimators.throughput import GavelThroughputTable, TableKey
from hadar.core.cluster import Cluster, Node
from hadar.core.errors import InputError
from hadar.core.jobs import Job

R18 = "ResNet-18 (batch size 64)"


@pytest.fixture(scope="module")
def prior() -> CompositeThroughput:
    return CompositeThroughput(GavelThroughputTable.bundled())


@pytest.fixture(scope="module")
def lab() -> Cluster:
    return Cluster(
        "lab",
        (
            Node("titan", {"titan-rtx": 1}),
            Node("t4", {"t4": 1}),
            Node("mixed", {"t4": 1, "rtx3090": 1}, pcie_gen=4),
        ),
    )


def job(job_type: str = R18, w: int = 1) -> Job:
    return Job(job_id=3, job_type=job_type, num_gpus=w, total_steps=10.0)


def cell(
    model, cluster: Cluster, node: str, gpu: str, j: Job | None = None, consolidated: bool = True
) -> float:
    cons, unc = model.cell_rates(j or job(), cluster)
    return float((cons if consolidated else unc)[cluster.node_index[node], cluster.type_index[gpu]])


def test_first_measurement_replaces_then_ewma_smooths(prior, lab) -> None:
    online = OnlineThroughput(prior, alpha=0.5)
    before = cell(prior, lab, "titan", "titan-rtx")
    assert cell(online, lab, "titan", "titan-rtx") == before
    assert online.observe(job(), "titan", 1, 10.0) is True
    assert cell(online, lab, "titan", "titan-rtx") == 10.0
    online.observe(job(), "titan", 1, 20.0)
    assert cell(online, lab, "titan", "titan-rtx") == pytest.approx(15.0)
    online.observe(R18, "titan", 1, 30.0)  # a job type works as well as a Job
    assert cell(online, lab, "titan", "titan-rtx") == pytest.approx(22.5)
    assert online.measured(R18, "titan", 1) == pytest.approx(22.5)
    # Unmeasured cells of the same (job type, W) keep the prior's speed relative to the measured
    # cell; other gang sizes and job types keep the prior.
    assert cell(online, lab, "t4", "t4") == pytest.approx(
        cell(prior, lab, "t4", "t4") * 22.5 / before
    )
    assert cell(online, lab, "titan", "titan-rtx", job(R18, 2)) == cell(
        prior, lab, "titan", "titan-rtx", job(R18, 2)
    )
    other = job("LM (batch size 20)")
    assert cell(online, lab, "titan", "titan-rtx", other) == cell(
        prior, lab, "titan", "titan-rtx", other
    )


def test_default_alpha_and_custom_alpha(prior) -> None:
    assert OnlineThroughput(prior).alpha == DEFAULT_ALPHA == 0.5
    online = OnlineThroughput(prior, alpha=0.25)
    online.observe(R18, "n", 1, 8.0)
    online.observe(R18, "n", 1, 16.0)
    assert online.measured(R18, "n", 1) == pytest.approx(0.25 * 16 + 0.75 * 8)


def test_observation_applies_to_the_nodes_gpus_or_one_named_type(prior, lab) -> None:
    online = OnlineThroughput(prior)
    online.observe(R18, "mixed", 1, 5.0, gpu_type="RTX 3090")
    assert cell(online, lab, "mixed", "rtx3090") == 5.0
    scale = 5.0 / cell(prior, lab, "mixed", "rtx3090")
    assert cell(online, lab, "mixed", "t4") == pytest.approx(
        cell(prior, lab, "mixed", "t4") * scale
    )
    online.observe(R18, "t4", 1, 7.0)
    cons, _ = online.cell_rates(job(), lab)
    h = lab.node_index["t4"]
    assert cons[h, lab.type_index["t4"]] == 7.0
    # Types the node does not have do not take its measurement: they are the prior, calibrated by
    # the geometric mean of the two measured cells' ratios.
    prior_cons, _ = prior.cell_rates(job(), lab)
    both = (scale * 7.0 / cell(prior, lab, "t4", "t4")) ** 0.5
    assert cons[h, lab.type_index["rtx3090"]] == pytest.approx(
        prior_cons[h, lab.type_index["rtx3090"]] * both
    )
    assert "measured online on mixed, t4" in online.describe(job(), lab)


def test_unmeasured_cells_are_calibrated_by_the_measured_ones() -> None:
    # A prior in other units (paper-size models) against measurements of a tiny model: 10x faster
    # on the measured V100 node; the K80 node, never measured, is scaled alike, so a node the
    # job has not run on yet still compares fairly with one it has.
    t = GavelThroughputTable(
        {
            TableKey(R18, "v100", 1, True): 10.0,
            TableKey(R18, "k80", 1, True): 4.0,
            TableKey(R18, "p100", 1, True): 5.0,
        },
        "t",
    )
    cluster = Cluster(
        "c",
        (
            Node("a", {"v100": 1}),
            Node("b", {"k80": 1}),
            Node("c", {"p100": 1}),
            Node("d", {"t4": 1}),
        ),
    )
    online = OnlineThroughput(t)
    online.observe(R18, "a", 1, 100.0)
    assert cell(online, cluster, "b", "k80") == pytest.approx(40.0)
    # two measured cells: the geometric mean of their ratios (10x and 4x) scales the third
    online.observe(R18, "c", 1, 20.0)
    assert cell(online, cluster, "b", "k80") == pytest.approx(4.0 * (10.0 * 4.0) ** 0.5)
    assert (
        cell(online, cluster, "a", "v100") == 100.0 and cell(online, cluster, "c", "p100") == 20.0
    )
    # a cell the prior has no figure for stays at zero (the job cannot run there)
    assert cell(online, cluster, "d", "t4") == 0.0


def test_multi_node_figure_keeps_the_priors_ratio() -> None:
    t = GavelThroughputTable(
        {TableKey(R18, "v100", 2, True): 100.0, TableKey(R18, "v100", 2, False): 40.0}, "t"
    )
    cluster = Cluster("c", (Node("a", {"v100": 2}), Node("b", {"v100": 2})))
    online = OnlineThroughput(t)
    online.observe(R18, "a", 2, 50.0)
    assert cell(online, cluster, "a", "v100", job(R18, 2)) == 50.0
    assert cell(online, cluster, "a", "v100", job(R18, 2), consolidated=False) == pytest.approx(
        20.0
    )
    assert cell(online, cluster, "b", "v100", job(R18, 2)) == pytest.approx(
        50.0
    )  # calibrated by node a


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 0.0, -3.0, 0])
def test_non_positive_or_non_finite_measurements_are_skipped(prior, lab, bad, caplog) -> None:
    online = OnlineThroughput(prior)
    online.observe(R18, "titan", 1, 10.0)
    with caplog.at_level(logging.WARNING, logger="estimators.online"):
        assert online.observe(R18, "titan", 1, bad) is False
    assert online.measured(R18, "titan", 1) == 10.0
    assert online.skipped == 1
    assert "skipped throughput" in caplog.text
    assert online.observe(R18, "t4", 1, bad) is False
    assert online.measured(R18, "t4", 1) is None


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((R18, "titan", 1, "fast"), "must be a number"),
        ((R18, "titan", 1, None), "must be a number"),
        ((R18, "titan", 1, True), "must be a number"),
        ((R18, "titan", 0, 5.0), "num_gpus"),
        ((R18, "titan", 1.5, 5.0), "num_gpus"),
        ((R18, "", 1, 5.0), "node"),
        (("", "titan", 1, 5.0), "job type"),
    ],
)
def test_malformed_arguments_raise_input_error(prior, args, match) -> None:
    online = OnlineThroughput(prior)
    with pytest.raises(InputError, match=match):
        online.observe(*args)
    assert online.observed_pairs() == []


def test_unknown_gpu_type_and_bad_alpha(prior) -> None:
    with pytest.raises(InputError, match="gpu_type"):
        OnlineThroughput(prior).observe(R18, "n", 1, 5.0, gpu_type="v200")
    for alpha in (0, 1.5, -0.1):
        with pytest.raises(InputError, match="alpha"):
            OnlineThroughput(prior, alpha=alpha)


def test_persist_and_restore_round_trip(prior, lab, tmp_path) -> None:
    online = OnlineThroughput(prior, alpha=0.3)
    online.observe(R18, "titan", 1, 10.0)
    online.observe(R18, "titan", 1, 20.0)
    online.observe("MM", "mixed", 1, 4.0, gpu_type="rtx3090")
    online.observe(R18, "t4", 1, -1.0)
    state = online.to_dict()
    assert json.loads(json.dumps(state)) == state
    restored = OnlineThroughput.from_dict(json.loads(json.dumps(state)), prior)
    assert restored.alpha == 0.3 and restored.skipped == 1
    assert restored.observed_pairs() == online.observed_pairs()
    for j in (job(), job("MM")):
        assert np.array_equal(restored.cell_rates(j, lab)[0], online.cell_rates(j, lab)[0])
    # Smoothing continues from the restored figure.
    restored.observe(R18, "titan", 1, 30.0)
    assert restored.measured(R18, "titan", 1) == pytest.approx(0.3 * 30 + 0.7 * 13.0)
    entry = next(e for e in restored.to_dict()["entries"] if e["node"] == "titan")
    assert entry["observations"] == 3
    # File round trip (atomic save).
    path = tmp_path / "online.json"
    online.save(path)
    again = OnlineThroughput.load(path, prior)
    assert again.to_dict() == online.to_dict()
    assert [p.name for p in tmp_path.iterdir()] == ["online.json"]


@pytest.mark.parametrize(
    ("state", "match"),
    [
        ([], "not a hadar-online-throughput state"),
        ({"format": "other"}, "not a hadar-online-throughput state"),
        ({"format": "hadar-online-throughput", "version": 9}, "version"),
        ({"format": "hadar-online-throughput", "version": 1, "alpha": 2}, "alpha"),
        ({"format": "hadar-online-throughput", "version": 1, "entries": {}}, "entries"),
        ({"format": "hadar-online-throughput", "version": 1, "entries": [5]}, r"entries\[0\]"),
        (
            {
                "format": "hadar-online-throughput",
                "version": 1,
                "entries": [{"job_type": R18, "num_gpus": 1, "node": "a", "steps_per_second": -1}],
            },
            r"entries\[0\]: steps_per_second",
        ),
        (
            {
                "format": "hadar-online-throughput",
                "version": 1,
                "entries": [{"job_type": R18, "num_gpus": 0, "node": "a", "steps_per_second": 1}],
            },
            r"entries\[0\]: .*num_gpus",
        ),
        (
            {
                "format": "hadar-online-throughput",
                "version": 1,
                "entries": [{"job_type": R18, "num_gpus": 1, "node": "a", "steps_per_second": 1}]
                * 2,
            },
            r"entries\[1\]: duplicate",
        ),
    ],
)
def test_malformed_state_raises_one_line_input_error(prior, state, match) -> None:
    with pytest.raises(InputError, match=match) as info:
        OnlineThroughput.from_dict(state, prior, source="state.json")
    assert "\n" not in str(info.value) and str(info.value).startswith("state.json")


def test_bad_state_files(prior, tmp_path) -> None:
    with pytest.raises(InputError, match="not found"):
        OnlineThroughput.load(tmp_path / "missing.json", prior)
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    with pytest.raises(InputError, match="malformed JSON at line 1"):
        OnlineThroughput.load(bad, prior)


def test_concurrent_observers_lose_no_update(prior, lab) -> None:
    online = OnlineThroughput(prior, alpha=0.5)
    threads, per_thread = 8, 400
    barrier = threading.Barrier(threads + 1)
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        barrier.wait()
        try:
            for _ in range(per_thread):
                online.observe(R18, "titan", 1, 12.0)
                online.observe(R18, f"node-{i}", 1, float(i + 1))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader() -> None:
        barrier.wait()
        for _ in range(200):
            online.cell_rates(job(), lab)
            online.to_dict()

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    rt = threading.Thread(target=reader)
    for t in [*ts, rt]:
        t.start()
    for t in [*ts, rt]:
        t.join()
    assert not errors
    entries = {e["node"]: e for e in online.to_dict()["entries"]}
    assert entries["titan"]["observations"] == threads * per_thread
    assert entries["titan"]["steps_per_second"] == pytest.approx(12.0)
    for i in range(threads):
        assert entries[f"node-{i}"]["observations"] == per_thread
        assert entries[f"node-{i}"]["steps_per_second"] == pytest.approx(i + 1)
