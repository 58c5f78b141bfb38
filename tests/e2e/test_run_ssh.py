"""``hadar run`` end to end on three real OpenSSH servers on loopback (one node each)."""

from __future__ import annotations

import pytest

from tests.e2e.runlib import events, hadar, summary, tracker_progress

pytestmark = [pytest.mark.slow, pytest.mark.ssh]


def test_m3_with_hadare_on_three_sshd_nodes(sshd_farm, tmp_path):
    cluster = sshd_farm.write_cluster(tmp_path / "sshd-cluster.yaml")
    out = tmp_path / "run"
    proc = hadar(
        "run",
        "--cluster",
        str(cluster),
        "--workload",
        "M-3",
        "--size",
        "tiny",
        "--policy",
        "hadare",
        "--round",
        "20",
        "--no-live",
        "--keep-node-dirs",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    s = summary(out)
    assert s["completed"] == 3 and 0 < s["cru"] <= 1.0
    assert tracker_progress(out) == {0: 300, 1: 250, 2: 250}
    ev = events(out)
    used = {e["node"] for e in ev if e["event"] == "result"}
    assert used == {srv.name for srv in sshd_farm.servers}  # every sshd node trained something
    assert not [e for e in ev if e["event"] == "failure"]
    # the work really happened on the nodes: each node's run directory (kept: --keep-node-dirs)
    # holds its round files, less the checkpoints (deleted there once fetched)
    for srv in sshd_farm.servers:
        assert list(srv.home.rglob("result-0.json")), f"no round files on {srv.name}"
        assert not list(srv.home.rglob("*.pt")), f"checkpoints left on {srv.name}"
