"""The live Slurm stream's rule (hadar/runtime/slurm_stream.py): which nodes are up given what
sinfo and squeue say, and a node that left rejoins only after staying up ``rejoin_s``."""

from __future__ import annotations

from collections.abc import Mapping

from hadar.core.node_stream import NodeEvent
from hadar.providers.slurm.commands import Slurm, SlurmJob
from hadar.providers.slurm.provider import Allocation, job_name
from hadar.runtime.slurm_stream import SlurmStreamSpec, SlurmWatcher

SPEC = SlurmStreamSpec("idle", {"a": "n1", "b": "n2", "c": "n3"})


class FakeSlurm(Slurm):
    """Answers sinfo and squeue from fields the test sets (the rule, not Slurm, is tested here;
    tests/e2e/test_run_slurm.py runs it against the real local Slurm)."""

    def __init__(self) -> None:
        super().__init__(None, "test")
        self.states: dict[str, str] = {}
        self.job_list: list[SlurmJob] = []

    def node_states(self, partition: str | None = None) -> dict[str, str]:
        return dict(self.states)

    def jobs(self) -> list[SlurmJob]:
        return list(self.job_list)


def _watcher(
    slurm: FakeSlurm, allocations: Mapping[str, Allocation], log: list[tuple[str, str]]
) -> SlurmWatcher:
    def vanish(node: str) -> list[int]:
        log.append(("vanish", node))
        return []

    def on_leave(e: NodeEvent, killed: list[int]) -> None:
        log.append(("leave", e.node))

    def on_join(e: NodeEvent) -> None:
        log.append(("join", e.node))

    return SlurmWatcher(
        SPEC, slurm, "r1", 0.0, lambda: allocations, vanish, on_leave, on_join, rejoin_s=3600
    )


def _job(job_id: str, node: str, name: str, state: str = "RUNNING") -> SlurmJob:
    return SlurmJob(job_id, "idle", state, "u", (node,), name)


def test_up_is_idle_or_busy_with_the_runs_own_allocations_only() -> None:
    slurm, log = FakeSlurm(), []
    allocations = {"a": Allocation("1", "n1", "localhost"), "b": Allocation("2", "n2", "x")}
    w = _watcher(slurm, allocations, log)
    slurm.states = {"n1": "mixed", "n2": "mixed", "n3": "idle*"}
    ours = [_job("1", "n1", job_name("r1", "a")), _job("2", "n2", job_name("r1", "b"))]
    assert w.usable(slurm.states, ours) == {"a", "b"}  # n3 not responding
    # another job on n2 (sharing it, or after preempting ours): b is out
    assert w.usable(slurm.states, [*ours, _job("9", "n2", "other")]) == {"a"}
    # a pending job does not count; the run's allocation on n1 no longer running does
    pending = [
        _job("9", "n2", "other", "PENDING"),
        _job("1", "n1", job_name("r1", "a"), "COMPLETING"),
    ]
    assert w.usable(slurm.states, [*pending, ours[1]]) == {"b"}
    # another run's job is another job
    assert w.usable({"n1": "mixed"}, [_job("5", "n1", job_name("r2", "a"))]) == set()


def test_a_leave_cancels_the_allocation_and_a_quick_return_does_not_rejoin() -> None:
    slurm, log = FakeSlurm(), []
    w = _watcher(slurm, {}, log)
    slurm.states = {"n1": "idle", "n2": "idle", "n3": "idle"}
    assert w.up_nodes(["a", "b", "c"]) == {"a", "b", "c"}
    assert log == [("join", "a"), ("join", "b"), ("join", "c")]
    log.clear()
    slurm.job_list = [_job("9", "n2", "other")]
    assert not w.left_since("a", 0.0) and w.left_since("b", 0.0)
    assert log == [("vanish", "b"), ("leave", "b")]  # cancelled, then reported
    slurm.job_list = []  # idle again, but not for rejoin_s yet
    assert w.up_nodes(["a", "b", "c"]) == {"a", "c"}
