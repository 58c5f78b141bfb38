"""``hadar run`` refuses, before any round, what would escape the run directory, train a spec the
workers reject, mix two runs' state, or read damaged state (issue 17). Real coordinator
processes, real workers, real SQLite files."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest
import yaml

from hadar.runtime.identity import cluster_digest, workload_digest
from hadar.scheduler import HadarConfig
from tests.e2e.runlib import (
    LOCAL_3,
    REPO,
    closed_rounds,
    events,
    hadar,
    run_to_end,
    start_run,
    wait_for,
    write_jobs,
)
from tests.fixtures.processes import HANG_S, run_group

SLOT = "5"
pytestmark = pytest.mark.slow


def one_line(proc) -> str:
    """The single stderr line of a refused command (no traceback)."""
    err = proc.stderr.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, proc.stdout + proc.stderr
    return err


def refused(proc) -> str:
    """The one line of a command refused as bad input (exit 2)."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    return one_line(proc)


def run_json(rundir: Path) -> dict:
    return json.loads((rundir / "run.json").read_text())


def edit_run_json(rundir: Path, **changes: object) -> None:
    data = run_json(rundir)
    data.update(changes)
    (rundir / "run.json").write_text(json.dumps(data, indent=2))


def repoint_run_json(rundir: Path, field: str, path: Path) -> None:
    """Point ``run.json``'s workload or cluster at ``path`` and forge the matching digest."""
    data = run_json(rundir)
    data[field] = str(path)
    digest = (
        workload_digest(str(path), data["seed"])
        if field == "workload"
        else cluster_digest(str(path))
    )
    data["identity"][f"{field}_sha256"] = digest
    (rundir / "run.json").write_text(json.dumps(data))


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short real run (one MM job on local-3node) that completed; tests resume copies of it."""
    root = tmp_path_factory.mktemp("finished")
    jobs = write_jobs(root / "jobs.yaml", {"MM": 40})
    out = root / "run"
    proc = run_to_end(out, jobs, "--round", SLOT, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.fixture
def copied_run(finished_run: Path, tmp_path: Path) -> Path:
    """A private copy of the finished run (same absolute workload and cluster paths)."""
    dst = tmp_path / "run"
    shutil.copytree(finished_run, dst, symlinks=True)
    return dst


def resume(rundir: Path, *extra: str, timeout: float = 120):
    return hadar("run", "--resume", str(rundir), "--no-live", *extra, timeout=timeout)


# -- paths ------------------------------------------------------------------------------------
@pytest.mark.parametrize("node", ["../../../escaped", "/tmp/hadar-escaped-node"])
def test_a_node_name_that_escapes_is_exit_2_before_anything_is_written(
    tmp_path: Path, node: str
) -> None:
    cluster = yaml.safe_load(Path(LOCAL_3).read_text())
    cluster["nodes"][1]["name"] = node
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cluster))
    jobs = write_jobs(tmp_path / "jobs.yaml", {"MM": 20})
    out = tmp_path / "deep" / "er" / "run"
    proc = run_to_end(out, jobs, "--round", SLOT, timeout=HANG_S, cluster=str(path))
    assert refused(proc) == (
        f"hadar: error: {path}: nodes[1].name: {node!r} is not a safe name (use 1-63 "
        f"letters, digits, '.', '_' or '-', starting with a letter or digit)"
    )
    assert not out.exists() and not Path("/tmp/hadar-escaped-node").exists()
    assert [p for p in tmp_path.rglob("*escaped*")] == []


# -- specs ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("change", "expected"),
    [
        # refused as the file is read (the simulator reads it too), else as a run accepts it
        ({"batch_size": -4}, "jobs[1].spec.batch_size: Input should be greater than 0"),
        ({"model": "XX"}, "job 1: spec: model: unknown model 'XX'"),
        ({"lr": "fast"}, "job 1: spec: lr: Input should be a valid number"),
    ],
)
def test_a_spec_the_worker_would_reject_is_exit_2_before_any_round(
    tmp_path: Path, change: dict, expected: str
) -> None:
    jobs = write_jobs(tmp_path / "jobs.yaml", {"LT": 20, "MM": 20})
    data = yaml.safe_load(jobs.read_text())
    data["jobs"][1]["spec"].update(change)
    jobs.write_text(yaml.safe_dump(data))
    out = tmp_path / "run"
    proc = run_to_end(out, jobs, "--round", SLOT, timeout=HANG_S)
    assert refused(proc).startswith(f"hadar: error: {jobs}: {expected}")
    assert not [e for e in events(out) if e["event"] == "dispatch"]
    assert not (out / "run.json").exists()


# -- what a run is ----------------------------------------------------------------------------
def test_run_json_records_digests_of_the_run_inputs(finished_run: Path) -> None:
    identity = run_json(finished_run)["identity"]
    assert set(identity) == {
        "cluster_sha256",
        "workload_sha256",
        "size",
        "policy",
        "policy_options",
    }
    assert identity["size"] == "tiny" and identity["policy"] == "hadare"
    options = identity["policy_options"]
    assert options["restart_penalty_s"] == "3" and options["aggregation_overhead_s"] == "2"
    # every knob of the policy's config, defaults included (the deferral bounds among them)
    assert options["hadar.max_rho"] == "1" and options["hadar.max_wait_s"] == "None"
    assert options["hadar.utility"] == "inverse-remaining"
    assert all(len(identity[k]) == 64 for k in ("cluster_sha256", "workload_sha256"))


def test_an_unchanged_resume_is_accepted(copied_run: Path) -> None:
    proc = resume(copied_run, "--no-eval")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_resume_of_a_finished_run_says_so_and_starts_nothing(copied_run: Path) -> None:
    before = (copied_run / "events.jsonl").read_bytes()
    proc = resume(copied_run)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        f"nothing to resume: {copied_run} has finished (1/1 jobs complete); its results are in "
        f"{copied_run}/ (summary.json, jobs.csv, rounds.csv; hadar report {copied_run} prints them)"
    ) in proc.stdout
    assert (copied_run / "events.jsonl").read_bytes() == before  # no session started
    assert "total time duration" not in proc.stdout  # one line, not the table again


def test_resume_refuses_run_json_edited_to_another_workload_even_with_force(
    copied_run: Path,
) -> None:
    edit_run_json(copied_run, workload="M-5")
    for extra in ((), ("--force",)):
        proc = resume(copied_run, *extra)
        assert proc.returncode == 2
        err = one_line(proc)
        assert (
            err.startswith(
                f"hadar: error: {copied_run / 'run.json'}: workload differs from the one this run "
                f"started with (digest "
            )
            and "for M-5" in err
            and err.endswith("--out instead")
        )


def test_resume_refuses_a_job_file_changed_in_place(copied_run: Path) -> None:
    jobs = Path(run_json(copied_run)["workload"])
    backup = jobs.read_text()
    try:
        write_jobs(jobs, {"MM": 400})
        proc = resume(copied_run)
        assert proc.returncode == 2 and "workload differs" in one_line(proc)
    finally:
        jobs.write_text(backup)


@pytest.mark.parametrize(("field", "value"), [("size", "small"), ("policy", "gavel")])
def test_resume_refuses_another_size_or_policy(copied_run: Path, field: str, value: str) -> None:
    was = run_json(copied_run)[field]
    edit_run_json(copied_run, **{field: value})
    proc = resume(copied_run)
    assert proc.returncode == 2
    assert (
        f"run.json: {field} differs from the run's ({was} at the start, now {value})"
        in one_line(proc)
    )


def test_resume_refuses_other_policy_options(copied_run: Path) -> None:
    proc = resume(copied_run, "--restart-penalty", "9")
    assert refused(proc) == (
        "hadar: error: --restart-penalty: 9 differs from this run's 3 (policy options are "
        "fixed for a run; start a new run with --out to change them)"
    )
    proc = resume(copied_run, "--policy-opt", "window=8")
    assert refused(proc).startswith(
        "hadar: error: --policy-opt: window=8 differs from this run's none ("
    )
    assert (
        resume(copied_run, "--restart-penalty", "3", "--no-eval").returncode == 0
    )  # repeating them is fine


def test_resume_refuses_run_json_edited_to_other_policy_options(copied_run: Path) -> None:
    """A knob the run never named (the deferral bound, at its default) is part of its identity too."""
    _assert_refused_for_options(copied_run, {"max_rho": "2"}, "hadar.max_rho", "1", "2")


def _assert_refused_for_options(
    rundir: Path, typed: dict[str, str], knob: str, at_start: str, now: str
) -> None:
    """``run.json``'s typed options edited to ``typed``: the resume is refused, naming ``knob``."""
    edit_run_json(rundir, policy_options=typed)
    assert refused(resume(rundir)) == (
        f"hadar: error: {rundir / 'run.json'}: policy options differ from the run's "
        f"({knob}={at_start} at the start, now {knob}={now}); start a new run with --out instead"
    )


def _without_knob(rundir: Path, knob: str) -> None:
    """``run.json`` as a run started before the policy had ``knob`` recorded it."""
    data = run_json(rundir)
    assert knob in data["identity"]["policy_options"]
    del data["identity"]["policy_options"][knob]
    (rundir / "run.json").write_text(json.dumps(data, indent=2))


def test_a_run_started_before_a_knob_existed_resumes_at_the_knob_s_default(
    copied_run: Path,
) -> None:
    _without_knob(copied_run, "hadar.elastic_utility")
    proc = resume(copied_run, "--no-eval")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_knob_the_run_never_recorded_is_still_checked_against_its_default(
    copied_run: Path,
) -> None:
    _without_knob(copied_run, "hadar.elastic_utility")
    _assert_refused_for_options(
        copied_run,
        {"elastic_utility": "inverse-slowdown"},
        "hadar.elastic_utility",
        str(
            HadarConfig().elastic_utility
        ),  # the knob's default, which the run is taken to have had
        "inverse-slowdown",
    )


def _recorded_knob(rundir: Path, knob: str, value: str) -> None:
    """``run.json`` as a run that started when ``knob``'s default was ``value``."""
    data = run_json(rundir)
    data["identity"]["policy_options"][knob] = value
    (rundir / "run.json").write_text(json.dumps(data, indent=2))


def test_a_run_started_under_an_older_default_resumes_with_that_default(
    copied_run: Path,
) -> None:
    """The default of ``elastic_utility`` changed (None -> ranked-speedup): a run that started
    before goes on with the value it started with, and says so; run.json is left as it was."""
    assert HadarConfig().elastic_utility != "None"
    _recorded_knob(copied_run, "hadar.elastic_utility", "None")
    before = (copied_run / "run.json").read_bytes()
    proc = resume(copied_run, "--no-eval")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        "resuming with the policy options this run started with: elastic_utility=None "
        "(their defaults changed since)"
    ) in proc.stdout
    assert (copied_run / "run.json").read_bytes() == before


def test_a_recorded_value_the_policy_no_longer_takes_is_refused(copied_run: Path) -> None:
    _recorded_knob(copied_run, "hadar.elastic_utility", "retired-utility")
    assert refused(resume(copied_run)) == (
        f"hadar: error: {copied_run / 'run.json'}: policy options differ from the run's "
        f"(hadar.elastic_utility=retired-utility at the start, now "
        f"hadar.elastic_utility={HadarConfig().elastic_utility}); start a new run with --out instead"
    )


def test_resume_with_forged_digests_is_caught_by_the_tracker_jobs(
    copied_run: Path, tmp_path: Path
) -> None:
    """A hostile edit that also rewrites the digest: the tracker's jobs are not the workload's."""
    other = write_jobs(tmp_path / "other.yaml", {"LT": 40})
    repoint_run_json(copied_run, "workload", other)
    proc = resume(copied_run)
    assert refused(proc) == (
        f"hadar: error: {copied_run / 'state.sqlite'}: job 0 is MM/tiny with 40 steps in "
        f"the tracker but LT/tiny with 40 steps in workload {other}: not the workload this "
        f"run started with"
    )


def test_a_cluster_file_changed_while_stopped_needs_force(copied_run: Path, tmp_path: Path) -> None:
    cluster = tmp_path / "c.yaml"
    shutil.copy(LOCAL_3, cluster)
    repoint_run_json(copied_run, "cluster", cluster)
    assert (
        resume(copied_run, "--no-eval").returncode == 0
    )  # same contents, another path: the same run
    cluster.write_text(cluster.read_text().replace("speed_factor: 0.25", "speed_factor: 0.2"))
    proc = resume(copied_run, "--no-eval")
    assert refused(proc).startswith(
        f"hadar: error: {copied_run / 'run.json'}: cluster file {cluster} changed "
        f"since the run last used it (digest "
    )
    assert "pass --force" in proc.stderr
    forced = resume(copied_run, "--no-eval", "--force")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert run_json(copied_run)["identity"]["cluster_sha256"] == cluster_digest(str(cluster))
    assert resume(copied_run, "--no-eval").returncode == 0  # recorded: no --force needed any more


# -- damaged state ------------------------------------------------------------------------------
def _last_round(rundir: Path) -> int:
    return max(e["round"] for e in events(rundir) if e["event"] == "aggregation")


def test_a_truncated_journal_is_exit_2_naming_it(copied_run: Path) -> None:
    db = copied_run / "state.sqlite"
    size = db.stat().st_size
    assert size > 4096 and not (copied_run / "state.sqlite-wal").exists()
    with db.open("r+b") as fh:
        fh.truncate(size // 2)
    before = db.read_bytes()
    proc = resume(copied_run)
    assert refused(proc).startswith(f"hadar: error: {db}: damaged state file (")
    assert db.read_bytes() == before  # refused, not repaired or rewritten


def test_a_state_file_truncated_to_nothing_is_exit_2_not_lost_history(copied_run: Path) -> None:
    db = copied_run / "state.sqlite"
    db.write_bytes(b"")
    proc = resume(copied_run)
    assert refused(proc) == (
        f"hadar: error: {db}: has no record of round {_last_round(copied_run)}, which "
        f"{copied_run / 'checkpoints'} holds a checkpoint of (the file was truncated or replaced)"
    )


def test_a_run_directory_of_the_older_layout_is_exit_2_not_migrated(copied_run: Path) -> None:
    """A run made before the one state file (journal.sqlite + tracker.sqlite): refused by
    --resume and hadar report with one line; nothing is read as empty history or rewritten."""
    (copied_run / "state.sqlite").rename(copied_run / "tracker.sqlite")
    shutil.copy(copied_run / "tracker.sqlite", copied_run / "journal.sqlite")
    before = {n: (copied_run / n).read_bytes() for n in ("journal.sqlite", "tracker.sqlite")}
    line = (
        f"hadar: error: {copied_run}: made by an older version of hadar (its state is in "
        "journal.sqlite and tracker.sqlite, not state.sqlite); this version cannot resume or "
        "report it: finish it with the version that started it, or start a new run with --out"
    )
    assert refused(resume(copied_run)) == line
    assert refused(hadar("report", str(copied_run), timeout=HANG_S)) == line
    assert not (copied_run / "state.sqlite").exists()
    assert {n: (copied_run / n).read_bytes() for n in before} == before


def test_a_damaged_tracker_is_exit_2_naming_it(copied_run: Path) -> None:
    db = copied_run / "state.sqlite"
    conn = sqlite3.connect(db)
    page = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    with db.open("r+b") as fh:  # overwrite the header of the second page (a b-tree page)
        fh.seek(page)
        fh.write(b"\xa5" * 16)
    proc = resume(copied_run)
    assert refused(proc).startswith(f"hadar: error: {db.resolve()}: damaged state file (")


# -- planted links (issue 28) -----------------------------------------------------------------
def test_resume_refuses_a_planted_checkpoint_link_and_deletes_nothing(
    copied_run: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    files = {".tmp-1.pt": b"t", f"round-0-{'a' * 64}.pt": b"r", "notes.txt": b"n"}
    for name, data in files.items():
        (outside / name).write_bytes(data)
    link = copied_run / "checkpoints" / "job-77"
    link.symlink_to(outside)
    proc = resume(copied_run, "--no-eval")
    assert refused(proc) == (
        f"hadar: error: {link}: a symbolic link in the run directory {copied_run}, which hadar "
        "never creates; remove it (hadar does not write or delete through links)"
    )
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == files


def _tree(root: Path, skip: Path) -> dict[str, tuple[str, bytes, int]]:
    """Every entry under ``root`` except ``skip``: kind, content (files) or target (links),
    modification time."""
    out: dict[str, tuple[str, bytes, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if Path(dirpath, d) != skip]
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            st = p.lstat()
            if p.is_symlink():
                out[str(p)] = ("link", os.readlink(p).encode(), st.st_mtime_ns)
            elif p.is_dir():
                out[str(p)] = ("dir", b"", st.st_mtime_ns)
            else:
                out[str(p)] = ("file", p.read_bytes(), st.st_mtime_ns)
    return out


@pytest.mark.parametrize("swapped", ["checkpoints", "checkpoints/job-0"])
def test_a_folder_swapped_for_a_link_between_rounds_is_refused_and_nothing_outside_changes(
    tmp_path: Path, swapped: str
) -> None:
    """A real run keeps two checkpoints per job and prunes older ones each round: after round 0
    closed, ``swapped`` is moved out of the run directory and a link to it put in its place.
    The run stops on the next write or prune there with one line naming the link, and nothing
    outside the run directory (the moved folder's checkpoints included) is written or deleted."""
    jobs = write_jobs(tmp_path / "jobs.yaml", {"MM": 1_000_000})  # outlasts the test anywhere
    out = tmp_path / "run"
    proc = start_run(out, jobs, round_s="2", policy="hadar")
    try:
        wait_for(lambda: 0 in closed_rounds(out), 300, "round 0 closed", proc)
        wait_for(
            lambda: any((out / "checkpoints" / "job-0").glob("round-*.pt")),
            HANG_S,
            "a checkpoint",
            proc,
        )
        outside = tmp_path / "elsewhere"
        outside.mkdir()
        moved = outside / Path(swapped).name
        os.rename(out / swapped, moved)
        (out / swapped).symlink_to(moved, target_is_directory=True)
        before = _tree(tmp_path, skip=out)
        assert any(k.endswith(".pt") for k in before)  # the moved checkpoints are watched
        rc = proc.wait(timeout=300)
        output = proc.stdout.read() if proc.stdout else ""
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
    assert rc == 2, output
    assert f"{out / swapped}: a symbolic link (or no folder) where the run keeps a folder" in (
        output
    )
    assert "Traceback" not in output
    assert _tree(tmp_path, skip=out) == before


def test_resume_does_not_append_events_through_a_link(copied_run: Path, tmp_path: Path) -> None:
    outside = tmp_path / "diary.txt"
    outside.write_text("private\n")
    (copied_run / "events.jsonl").unlink()
    (copied_run / "events.jsonl").symlink_to(outside)
    proc = resume(copied_run, "--no-eval")
    assert "events.jsonl: a symbolic link in the run directory" in refused(proc)
    assert outside.read_text() == "private\n"


# -- options typed on --resume (issue 28) -----------------------------------------------------
@pytest.mark.parametrize(
    ("typed", "problem"),
    [
        (("--workload", "M-5"), "--workload: M-5 differs from this run's {workload}"),
        (("--policy", "gavel"), "--policy: gavel differs from this run's hadare"),
        (("--size", "small"), "--size: small differs from this run's tiny"),
        (("--round", "9"), "--round: 9 differs from this run's 5"),
        (("--seed", "3"), "--seed: 3 differs from this run's 0"),
        (("--cold-workers",), "--cold-workers: this run was started without it"),
        (("--cluster", "sim-60gpu"), "--cluster: sim-60gpu differs from this run's {cluster}"),
    ],
)
def test_resume_refuses_a_typed_option_that_conflicts_with_the_run(
    copied_run: Path, typed: tuple[str, ...], problem: str
) -> None:
    before = (copied_run / "run.json").read_bytes()
    cfg = run_json(copied_run)
    proc = resume(copied_run, *typed)
    assert refused(proc) == (
        f"hadar: error: {problem.format(**cfg)} (fixed for the run in {copied_run}; start a new "
        "run with --out to change it)"
    )
    assert (copied_run / "run.json").read_bytes() == before


def test_resume_accepts_the_runs_own_values_and_refuses_out(copied_run: Path) -> None:
    cfg = run_json(copied_run)
    assert refused(resume(copied_run, "--out", str(copied_run.parent / "x"))).startswith(
        f"hadar: error: --out: not with --resume (the run's directory is {copied_run};"
    )
    same = resume(
        copied_run,
        "--workload",
        os.path.relpath(cfg["workload"], REPO),  # another spelling of the same file
        "--cluster",
        cfg["cluster"],
        "--policy",
        "hadare",
        "--size",
        "tiny",
        "--round",
        "5.0",
        "--no-eval",
        "--stall-rounds",
        "9",
    )
    assert same.returncode == 0, same.stdout + same.stderr


def test_run_json_stores_absolute_paths_so_resume_works_from_anywhere(tmp_path: Path) -> None:
    shutil.copy(LOCAL_3, tmp_path / "c.yaml")
    write_jobs(tmp_path / "jobs.yaml", {"LT": 20})
    args = ["--cluster", "c.yaml", "--workload", "jobs.yaml", "--round", SLOT, "--no-live"]
    first = run_group(
        [sys.executable, "-m", "hadar", "run", *args, "--no-eval", "--out", "run"],
        cwd=tmp_path,
        timeout=300,
    )
    assert first.returncode == 0, first.stdout + first.stderr
    cfg = run_json(tmp_path / "run")
    assert (cfg["cluster"], cfg["workload"]) == (
        str(tmp_path / "c.yaml"),
        str(tmp_path / "jobs.yaml"),
    )
    again = resume(tmp_path / "run", "--no-eval")  # from the repository, not tmp_path
    assert again.returncode == 0, again.stdout + again.stderr
