"""hadar/runtime/node_stream.py: what a stream does between two times, and the leave watcher
killing a real process the moment its node leaves."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hadar.core.node_stream import NodeEvent, parse_node_stream
from hadar.runtime.node_stream import LeaveWatcher, kill_processes_in, leaves_between, next_join
from tests.fixtures.processes import HANG_S

STREAM = "time,node,event\n0,a,join\n0,b,join\n5,a,leave\n5,b,leave\n9,a,join\n12,b,join\n"


def _sleeper(cwd) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"], cwd=cwd)


def test_leaves_between_is_open_at_the_start_and_closed_at_the_end():
    s = parse_node_stream(STREAM, "s.csv")
    assert [(e.node, e.time) for e in leaves_between(s, 0, 5)] == [("a", 5.0), ("b", 5.0)]
    assert leaves_between(s, 5, 100) == ()


def test_next_join_only_counts_the_named_nodes_after_t():
    s = parse_node_stream(STREAM, "s.csv")
    assert next_join(s, ["a", "b"], 5) == 9.0
    assert next_join(s, ["b"], 5) == 12.0
    assert next_join(s, ["a"], 9) is None


def test_kill_processes_in_kills_only_the_directory_s_processes(tmp_path):
    inside, outside = tmp_path / "node" / "sub", tmp_path / "other"
    inside.mkdir(parents=True)
    outside.mkdir()
    a, b = _sleeper(inside), _sleeper(outside)
    try:  # Popen returns once the child has changed directory and started the program
        assert kill_processes_in(tmp_path / "node") == [a.pid]
        assert a.wait(timeout=HANG_S) == -9  # SIGKILL, not asked
        assert b.poll() is None
    finally:
        b.kill()
        a.kill()


def test_the_watcher_kills_a_node_when_it_leaves_and_remembers_it(tmp_path):
    """The stream's clock is one the test moves (a loaded machine cannot make the leave come
    early), and the test waits for the leave callback itself, not for the kill alone."""
    s = parse_node_stream("time,node,event\n0,a,join\n0,b,join\n0.4,a,leave\n", "s.csv")
    proc = _sleeper(tmp_path)
    now = [0.1]
    seen: list[tuple[NodeEvent, list[int]]] = []
    called = threading.Event()

    def on_leave(event: NodeEvent, killed: list[int]) -> None:
        seen.append((event, killed))
        called.set()

    w = LeaveWatcher(s, 0.0, lambda n: kill_processes_in(tmp_path), on_leave, lambda: now[0])
    w.start()
    try:
        assert not w.left_since("a", 0.0) and not called.wait(0.6)  # 0.1 s: before the leave
        assert proc.poll() is None
        now[0] = 0.5
        assert called.wait(timeout=HANG_S)
        assert proc.wait(timeout=HANG_S) == -9
        assert [(e.node, k) for e, k in seen] == [("a", [proc.pid])]
        assert w.left_since("a", 0.0) and not w.left_since("b", 0.0)
    finally:
        w.stop()
        proc.kill()
        proc.wait()


def _config(tmp_path, cluster: str, stream_text: str):
    from hadar.runtime.config import RunConfig
    from tests.e2e.runlib import write_jobs

    stream = tmp_path / "stream.csv"
    stream.write_text(stream_text)
    return RunConfig(
        run_id="ns",
        cluster=cluster,
        workload=str(write_jobs(tmp_path / "jobs.yaml", {"MM": 10})),
        evaluate=False,
        started_at=time.time(),
        node_stream=str(stream),
    )


@pytest.mark.parametrize(
    ("cluster", "stream", "message"),
    [
        ("local", "time,node,event\n0,v100,join\n2,zz,join\n", "line 3, field node: node 'zz'"),
        ("ssh", "time,node,event\n0,a,join\n", "on local nodes only"),
    ],
)
def test_a_bad_stream_or_a_remote_cluster_is_refused_before_anything_is_written(
    tmp_path, cluster, stream, message
):
    from hadar.core.errors import InputError
    from hadar.runtime.coordinator import Coordinator
    from tests.e2e.runlib import LOCAL_3

    path = LOCAL_3
    if cluster == "ssh":
        path = str(tmp_path / "ssh.yaml")
        Path(path).write_text(
            "name: remote\nprovider: ssh\nnodes:\n  - {name: a, gpus: {t4: 1}, address: 127.0.0.1}\n"
        )
    with pytest.raises(InputError, match=message):
        Coordinator(tmp_path / "run", _config(tmp_path, path, stream))
    assert not (tmp_path / "run").exists()
