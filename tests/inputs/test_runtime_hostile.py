"""Hostile run directories and state given to ``hadar report``, ``status``, ``logs``, ``stop``,
``run --resume`` (and ``--detach``), and outputs over inputs for ``node-stream`` and
``fit-report``: one line (exit 2) or a row shown as best it can be, never a traceback, a hang, a
signal to a process that is not the run, or a read, lock or write through a planted link.
Commands run as users run them (subprocesses) on a real run directory (one short local run:
real workers, a real ``state.sqlite``)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from hadar.commands.background import running_pid
from tests.fixtures.cli import hadar_cli, one_error_line
from tests.fixtures.processes import HANG_S

REPO = Path(__file__).resolve().parents[2]
LOCAL_3 = str(REPO / "cluster_configs" / "local-3node.yaml")
JOB = {
    "id": 0,
    "type": "MM",
    "gpus": 1,
    "steps": 40,
    "spec": {"model": "MM", "size": "tiny", "data": "synthetic", "batch_size": 16, "lr": 0.001},
}


def hadar(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``hadar ARGS`` in ``cwd`` on a terminal wide enough for a table row with a run directory
    below ``cwd`` in it unwrapped, however long the temporary folder's path is."""
    return hadar_cli(*args, cwd=cwd, env={"COLUMNS": str(1000 + len(str(cwd)))})


def refused(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 2, res.stdout + res.stderr
    return one_error_line(res)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One completed real run (one tiny MM job on local-3node); tests use copies of it."""
    root = tmp_path_factory.mktemp("hostile-run")
    jobs = root / "jobs.yaml"
    jobs.write_text(yaml.safe_dump({"jobs": [JOB]}))
    res = hadar_cli(
        "run", "--cluster", LOCAL_3, "--workload", str(jobs), "--round", "5", "--no-live",
        "--no-eval", "--out", "run", cwd=root,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    return root / "run"


@pytest.fixture
def rundir(finished_run: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "run"
    shutil.copytree(finished_run, dst, symlinks=True)
    (dst / "state.sqlite.lock").unlink(missing_ok=True)
    return dst


def closed_rounds(rundir: Path) -> list[int]:
    """The rounds the run's tracker closed, as its state file records them: how many rounds the
    fixture's run took depends on how fast this machine trains, so tests read it."""
    con = sqlite3.connect(rundir / "state.sqlite")
    try:
        rows = con.execute("SELECT round FROM rounds WHERE state = 'closed' ORDER BY round")
        return [int(r) for (r,) in rows]
    finally:
        con.close()


def edit_state(rundir: Path, sql: str) -> None:
    con = sqlite3.connect(rundir / "state.sqlite")
    con.execute(sql)
    con.commit()
    con.close()


# -- hadar status / stop: the pid file -------------------------------------------------------
@pytest.mark.parametrize("pid", ["-1", "0", "true", "99999999999999999999"])
def test_a_pid_file_naming_no_possible_run_is_not_running(rundir: Path, pid: str) -> None:
    """-1 and 0 address process groups (``hadar stop`` sent SIGINT to every process it could
    signal), true is pid 1 and a huge number overflowed into a traceback."""
    (rundir / "detached.json").write_text(f'{{"pid": {pid}}}')
    assert running_pid(rundir) is None
    res = hadar("status", str(rundir), cwd=rundir.parent)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stdout + res.stderr
    assert "running" not in res.stdout and "finished (1/1 jobs)" in res.stdout


def test_stop_signals_only_a_hadar_run_of_the_directory(rundir: Path) -> None:
    """A live process whose command line names the run directory but is no ``hadar run``
    (here a stand-in; a ``hadar logs RUNDIR -f`` would do) is not signalled."""
    code = "import sys, time; time.sleep(3600)"  # outlives the command on any machine
    other = subprocess.Popen([sys.executable, "-c", code, str(rundir)])
    try:
        (rundir / "detached.json").write_text(json.dumps({"pid": other.pid}))
        line = refused(hadar("stop", str(rundir), "--timeout", "0", cwd=rundir.parent))
        assert "no background run is running there" in line
        assert other.poll() is None  # not interrupted
    finally:
        other.kill()
        other.wait()


def test_stop_does_not_take_another_program_with_the_word_run_for_the_run(rundir: Path) -> None:
    code = "import sys, time; time.sleep(3600)"
    other = subprocess.Popen([sys.executable, "-c", code, "run", str(rundir)])
    try:
        (rundir / "detached.json").write_text(json.dumps({"pid": other.pid}))
        assert running_pid(rundir) is None
        line = refused(hadar("stop", str(rundir), "--timeout", "0", cwd=rundir.parent))
        assert "no background run is running there" in line
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


# -- hadar status / logs: what a run directory holds ------------------------------------------
@pytest.mark.parametrize(
    "name", ["run.log", "events.jsonl", "run.json", "summary.json", "detached.json"]
)
def test_status_logs_and_stop_take_a_folder_for_a_run_file_without_a_traceback(
    rundir: Path, name: str
) -> None:
    (rundir / name).unlink(missing_ok=True)
    (rundir / name).mkdir()
    for command in ("status", "logs", "stop"):
        res = hadar(command, str(rundir), cwd=rundir.parent)
        assert "Traceback" not in res.stderr and res.returncode in (0, 2), (command, res.stderr)


@pytest.mark.parametrize(
    "planted",
    [
        "CREATE VIEW rounds_view AS SELECT 1",
        "CREATE TRIGGER t AFTER INSERT ON rounds BEGIN DELETE FROM jobs; END",
    ],
)
def test_report_refuses_a_state_file_with_a_view_or_trigger(rundir: Path, planted: str) -> None:
    edit_state(rundir, planted)
    before = (rundir / "state.sqlite").read_bytes()
    line = refused(hadar("report", str(rundir), cwd=rundir.parent))
    assert "damaged state file" in line and "which hadar never makes" in line
    assert (rundir / "state.sqlite").read_bytes() == before


def test_status_counts_no_rounds_from_a_state_file_whose_rounds_are_a_view(rundir: Path) -> None:
    """A recursive view kept SQLite busy without end, and SQLite does not return to Python for
    SIGTERM or SIGINT: ``hadar status`` spun until SIGKILL."""
    edit_state(rundir, "ALTER TABLE rounds RENAME TO rounds_kept")
    edit_state(
        rundir,
        "CREATE VIEW rounds(state) AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL "
        "SELECT n + 1 FROM r) SELECT 'closed' FROM r",
    )
    res = hadar("status", str(rundir), cwd=rundir.parent)  # within the helper's timeout
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stdout + res.stderr
    assert "finished (1/1 jobs)" in res.stdout


@pytest.mark.parametrize("name", ["run.log", "events.jsonl", "run.json", "summary.json"])
def test_status_does_not_wait_on_a_fifo_in_the_run_directory(rundir: Path, name: str) -> None:
    (rundir / name).unlink(missing_ok=True)
    os.mkfifo(rundir / name)
    res = hadar("status", str(rundir), cwd=rundir.parent)  # hung before
    assert res.returncode == 0, res.stdout + res.stderr
    assert str(rundir) in res.stdout


@pytest.mark.parametrize("suffix", ["-journal", "-wal", "-shm"])
def test_status_report_and_resume_do_not_wait_on_a_fifo_beside_the_state_file(
    rundir: Path, suffix: str
) -> None:
    """SQLite opens ``state.sqlite-journal`` with a plain open(): a FIFO there hung all three,
    deaf to SIGTERM."""
    side = rundir / f"state.sqlite{suffix}"
    side.unlink(missing_ok=True)
    os.mkfifo(side)
    res = hadar("status", str(rundir), cwd=rundir.parent)
    assert res.returncode == 0 and "finished (1/1 jobs)" in res.stdout, res.stdout + res.stderr
    want = f"{side}: is a FIFO, not a regular file; SQLite keeps its journal of state.sqlite there"
    assert want in refused(hadar("report", str(rundir), cwd=rundir.parent))
    assert want in refused(hadar("run", "--resume", str(rundir), cwd=rundir.parent))


def test_status_shows_json_that_is_no_object_as_unknown(rundir: Path) -> None:
    (rundir / "run.json").write_text("[1]")
    (rundir / "summary.json").write_text("[]")
    (rundir / "detached.json").write_text("[" * 100_000 + "]" * 100_000)
    with (rundir / "events.jsonl").open("ab") as f:
        f.write(b"\xff\xfe" + b"x" * (3 << 20) + b"\n")  # not UTF-8, longer than a line is read
    res = hadar("status", str(rundir), cwd=rundir.parent)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stdout + res.stderr
    assert "finished" in res.stdout


def test_status_reads_a_folder_whose_name_looks_like_uri_parameters(rundir: Path) -> None:
    """``file:{path}?mode=ro`` made ``q?mode=rwc&x=/state.sqlite`` open (and create) ``q``."""
    rounds = len(closed_rounds(rundir))
    assert rounds >= 1
    odd = rundir.with_name("q?mode=rwc&x=")
    rundir.rename(odd)
    res = hadar("status", odd.name, cwd=odd.parent)
    assert res.returncode == 0, res.stdout + res.stderr
    assert not (odd.parent / "q").exists()
    cells = _row_cells(res.stdout, odd.name)  # rounds read from the state file
    assert "finished (1/1 jobs)" in cells and str(rounds) in cells, res.stdout


def _row_cells(table: str, first: str) -> list[str]:
    """The cells of the row of ``hadar status``'s table that starts with ``first`` (a table
    as wide as the terminal: cells split on the box-drawing bar, blanks stripped)."""
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("│┃").split("│")]
        if cells and cells[0] == first:
            return cells
    raise AssertionError(f"no row {first!r} in:\n{table}")


def test_logs_does_not_print_a_file_a_link_leads_to(rundir: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("not yours\n")
    (rundir / "run.log").symlink_to(secret)
    res = hadar("logs", str(rundir), cwd=rundir.parent)
    line = refused(res)
    assert line.startswith(f"hadar: error: {rundir}/run.log: not a regular file")
    assert "not yours" not in res.stdout


def test_logs_refuses_a_fifo_instead_of_waiting(rundir: Path) -> None:
    os.mkfifo(rundir / "run.log")
    line = refused(hadar("logs", str(rundir), cwd=rundir.parent))
    assert "run.log: not a regular file" in line


def test_detach_does_not_append_through_a_run_log_link(rundir: Path, tmp_path: Path) -> None:
    """The parent opened ``run.log`` (following the link) before the child refused the link,
    so the child's output was appended to the link's target."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (rundir / "run.log").symlink_to(victim)
    res = hadar("run", "--resume", str(rundir), "--detach", cwd=rundir.parent)
    line = refused(res)
    assert line.startswith(f"hadar: error: {rundir}/run.log: a symbolic link in the run directory")
    assert victim.read_text() == "precious\n"


# -- hadar report / run --resume: the state file ----------------------------------------------
def test_report_does_not_lock_or_read_a_state_file_through_a_link(
    rundir: Path, tmp_path: Path
) -> None:
    """The lock file was created beside the link's target, outside the run directory."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (rundir / "state.sqlite").rename(elsewhere / "state.sqlite")
    (rundir / "state.sqlite").symlink_to(elsewhere / "state.sqlite")
    before = (elsewhere / "state.sqlite").read_bytes()
    line = refused(hadar("report", str(rundir), cwd=rundir.parent))
    assert line.startswith(f"hadar: error: {rundir}/state.sqlite: a symbolic link in the run")
    assert sorted(p.name for p in elsewhere.iterdir()) == ["state.sqlite"]
    assert (elsewhere / "state.sqlite").read_bytes() == before


def test_report_refuses_a_state_file_that_lost_its_journal(rundir: Path) -> None:
    """It reported zero rounds (and exit 0) where ``--resume`` refuses the file."""
    last = closed_rounds(rundir)[-1]  # one round or more, as fast as this machine trained
    edit_state(rundir, "DROP TABLE run_rounds")
    line = refused(hadar("report", str(rundir), cwd=rundir.parent))
    assert line == (
        f"hadar: error: {rundir}/state.sqlite: has no record of round {last}, which its tracker "
        "tables closed (the file was truncated or replaced)"
    )


EDITS = {
    "table-dropped": ("DROP TABLE jobs", "no such table: jobs"),
    "plan-not-json": ("UPDATE run_rounds SET plan = 'not json'", "Expecting value"),
    "timings-a-list": ("UPDATE run_rounds SET timings = '[]'", "a value hadar never writes"),
    "steps-text": ("UPDATE jobs SET target_steps = 'abc'", "a value hadar never writes"),
    "event-a-list": ("UPDATE events SET body = '[]'", "a value hadar never writes"),
    "not-utf8": ("UPDATE events SET body = CAST(x'ff00' AS TEXT)", "Could not decode to UTF-8"),
    "decision-text": ("UPDATE run_rounds SET decision_s = 'abc'", "a type hadar never writes"),
}


@pytest.mark.parametrize("edit", list(EDITS), ids=list(EDITS))
def test_report_names_a_state_file_whose_rows_were_edited(rundir: Path, edit: str) -> None:
    sql, reason = EDITS[edit]
    edit_state(rundir, sql)
    line = refused(hadar("report", str(rundir), cwd=rundir.parent))
    assert line.startswith(f"hadar: error: {rundir}/state.sqlite: damaged state file (")
    assert reason in line and line.endswith("restore it from a backup or start a new run")


@pytest.mark.parametrize("edit", ["table-dropped", "plan-not-json", "steps-text"])
def test_resume_names_a_state_file_whose_rows_were_edited(rundir: Path, edit: str) -> None:
    sql, reason = EDITS[edit]
    edit_state(rundir, sql)
    res = hadar("run", "--resume", str(rundir), "--no-live", cwd=rundir.parent)
    line = refused(res)
    assert line.startswith(f"hadar: error: {rundir}/state.sqlite: damaged state file (")
    assert reason in line


# -- outputs over inputs ----------------------------------------------------------------------
def test_from_slurm_does_not_write_its_stream_over_the_log(tmp_path: Path) -> None:
    log = tmp_path / "slurm.log"
    text = "Timestamp|NodeName|State\n2020-01-01T00:00:00|n1|idle\n2020-01-01T00:10:00|n1|alloc\n"
    log.write_text(text)
    line = refused(
        hadar("node-stream", "from-slurm", "slurm.log", "-o", "./slurm.log", cwd=tmp_path)
    )
    assert line.startswith("hadar: error: --out ./slurm.log: is the input slurm.log (log)")
    assert log.read_text() == text


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        ("0|" + "n" * 200_000 + "|idle", "slurm.log: line 3: malformed CSV: field larger than"),
        ("1e300|n1|down", "slurm.log: line 3, field Timestamp: epoch seconds must be in"),
        ("0|n\x00x|idle", "slurm.log: line 3, field NodeName: node 'n\\x00x' is not a safe"),
        ("0|../../etc|idle", "slurm.log: line 3, field NodeName: node '../../etc' is not a safe"),
    ],
    ids=["huge-field", "time-1e300", "nul-name", "path-name"],
)
def test_from_slurm_refuses_hostile_rows_in_one_line_and_writes_nothing(
    tmp_path: Path, row: str, problem: str
) -> None:
    """Without ``--cluster`` too: names become folder names in a run, and the stream loader
    refuses times the converter would write."""
    (tmp_path / "slurm.log").write_text(f"Timestamp|NodeName|State\n0|n1|idle\n{row}\n")
    line = refused(hadar("node-stream", "from-slurm", "slurm.log", "-o", "s.csv", cwd=tmp_path))
    assert line.startswith(f"hadar: error: {problem}"), line
    assert not (tmp_path / "s.csv").exists()


def test_from_slurm_expands_a_compressed_host_list(tmp_path: Path) -> None:
    (tmp_path / "slurm.log").write_text(
        "Timestamp|NodeList|State\n0|gpu[01-02]|idle\n30|gpu01|allocated\n60|gpu02|down\n"
    )
    res = hadar("node-stream", "from-slurm", "slurm.log", "-o", "s.csv", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "s.csv").read_text().splitlines() == [
        "time,node,event",
        "0.0,gpu01,join",
        "0.0,gpu02,join",
        "30.0,gpu01,leave",
        "60.0,gpu02,leave",
    ]
    stats = hadar("node-stream", "stats", "s.csv", cwd=tmp_path)  # the loader takes it
    assert stats.returncode == 0, stats.stderr


def test_generate_does_not_write_its_stream_over_the_cluster_file(tmp_path: Path) -> None:
    cluster = tmp_path / "c.yaml"
    shutil.copy(LOCAL_3, cluster)
    before = cluster.read_text()
    res = hadar("node-stream", "generate", "--cluster", "c.yaml", "-o", str(cluster), cwd=tmp_path)
    assert "is the input c.yaml (--cluster)" in refused(res)
    assert cluster.read_text() == before


def test_fit_report_checks_csv_before_fitting(tmp_path: Path) -> None:
    """``--csv /proc/x.csv`` was a traceback after every fit had run."""
    line = refused(hadar("fit-report", "--csv", "/proc/x.csv", cwd=tmp_path))
    assert line.startswith("hadar: error: fit-report: argument --csv: cannot create /proc/x.csv")


def test_fit_report_does_not_write_its_table_over_a_trace(tmp_path: Path) -> None:
    app = tmp_path / "traces" / "bert"
    app.mkdir(parents=True)
    (app / "placements.csv").write_text("kept\n")
    line = refused(
        hadar(
            "fit-report", "--traces", "traces", "--csv", "traces/bert/placements.csv", cwd=tmp_path
        )
    )
    assert "is inside the --traces folder traces" in line
    assert (app / "placements.csv").read_text() == "kept\n"


# -- run --resume: a state file or run.json that leads elsewhere ------------------------------
def _checkpoints(rundir: Path) -> dict[str, bytes]:
    root = rundir / "checkpoints"
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize("where", ["absolute", "climbing"])
def test_resume_refuses_a_checkpoint_path_outside_the_run(
    rundir: Path, tmp_path: Path, where: str
) -> None:
    """The quarantine moved the named file into the run, and the orphan clean-up deleted the
    live checkpoint the edited row no longer named, before anything was checked."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    path = str(victim) if where == "absolute" else "../../victim.txt"
    before = _checkpoints(rundir)
    edit_state(rundir, f"UPDATE jobs SET ckpt_path = '{path}'")
    line = refused(hadar("run", "--resume", str(rundir), "--no-live", cwd=rundir.parent))
    assert line.startswith(f"hadar: error: {rundir}/state.sqlite: damaged state file (")
    assert "is not one the tracker writes" in line
    assert victim.read_text() == "precious\n"
    assert _checkpoints(rundir) == before


def test_resume_refuses_a_state_file_older_than_its_checkpoints(rundir: Path) -> None:
    """A backup of the state file restored over a later one: the later rounds' checkpoints were
    deleted as orphans and the jobs rolled back without a word."""
    job_dir = rundir / "checkpoints" / "job-0"
    latest = sorted(p for p in job_dir.iterdir() if p.name.startswith("round-"))[-1]
    later = job_dir / f"round-000099-{latest.name.split('-')[2]}"
    shutil.copyfile(latest, later)
    before = _checkpoints(rundir)
    line = refused(hadar("run", "--resume", str(rundir), "--no-live", cwd=rundir.parent))
    assert line == (
        f"hadar: error: {rundir}/state.sqlite: has no record of round 99, which "
        f"{rundir}/checkpoints holds a checkpoint of (the file was truncated or replaced)"
    )
    assert _checkpoints(rundir) == before


@pytest.mark.parametrize(
    "key, value, needle",
    [
        ("started_at", 9e9, "started_at: the run's start is in the future"),
        ("round_s", 1e300, "round_s: Input should be less than or equal to 86400"),
        ("grace_s", 1e300, "grace_s: Input should be less than or equal to 86400"),
    ],
)
def test_resume_refuses_a_run_json_it_could_not_run_by(
    rundir: Path, key: str, value: float, needle: str
) -> None:
    """A start in the future waited for the first arrival forever; a round of 1e300 s was an
    OverflowError traceback from the first worker's timeout."""
    cfg = json.loads((rundir / "run.json").read_text())
    cfg[key] = value
    (rundir / "run.json").write_text(json.dumps(cfg))
    line = refused(hadar("run", "--resume", str(rundir), "--no-live", cwd=rundir.parent))
    assert "run.json" in line and needle in line, line


@pytest.mark.parametrize("key", ["policy", "run_id", "size"])
def test_report_refuses_control_characters_in_run_json_names(rundir: Path, key: str) -> None:
    """An escape sequence in run.json's policy reached the terminal raw, through matplotlib's
    "Glyph missing" warning about a figure title."""
    cfg = json.loads((rundir / "run.json").read_text())
    cfg[key] = "hadare\x1b]0;owned\x07\x1b[2J"
    (rundir / "run.json").write_text(json.dumps(cfg))
    res = hadar("report", str(rundir), cwd=rundir.parent)
    line = refused(res)
    assert "run.json" in line and f"{key}: holds control characters (got " in line, line
    assert "\x1b" not in res.stdout + res.stderr and "\x07" not in res.stdout + res.stderr


def test_resume_names_a_policy_state_of_another_shape(rundir: Path) -> None:
    """An AttributeError traceback from the policy's restore."""
    edit_state(rundir, """UPDATE run_rounds SET policy_state = '{"x": 5}'""")
    edit_state(rundir, "UPDATE jobs SET completed = 0, steps_done = 0")  # something to resume
    line = refused(hadar("run", "--resume", str(rundir), "--no-live", cwd=rundir.parent))
    assert line.startswith(f"hadar: error: {rundir}/state.sqlite: damaged state file (")


@pytest.mark.parametrize("typed", ["run/", "./run", "--out=run"])
def test_a_background_run_is_found_however_its_directory_was_typed(
    rundir: Path, typed: str
) -> None:
    """``hadar run --resume run/ --detach`` showed as stopped, and ``hadar stop run`` refused."""
    script = rundir.parent / "bin" / "hadar"  # its command line reads `PYTHON .../hadar run`
    script.parent.mkdir(exist_ok=True)
    script.write_text("import time; time.sleep(3600)")
    flag = [] if typed.startswith("--") else ["--resume"]
    stand_in = subprocess.Popen(
        [sys.executable, str(script), "run", *flag, typed], cwd=rundir.parent
    )
    try:
        deadline = time.monotonic() + HANG_S
        while b"bin/hadar" not in Path(f"/proc/{stand_in.pid}/cmdline").read_bytes():
            assert time.monotonic() < deadline, "the stand-in never started"
            time.sleep(0.01)  # between fork and exec its command line is empty
        (rundir / "detached.json").write_text(json.dumps({"pid": stand_in.pid}))
        assert running_pid(rundir) == stand_in.pid
        other = rundir.parent / "other"
        other.mkdir()
        (other / "detached.json").write_text(json.dumps({"pid": stand_in.pid}))
        assert running_pid(other) is None
    finally:
        stand_in.kill()
        stand_in.wait()


def test_report_leaves_an_emptied_state_file_empty(rundir: Path) -> None:
    """Opened as its writer, the empty file got a SQLite header before it was refused."""
    (rundir / "state.sqlite").write_bytes(b"")
    for suffix in ("-wal", "-shm"):
        (rundir / f"state.sqlite{suffix}").unlink(missing_ok=True)
    line = refused(hadar("report", str(rundir), cwd=rundir.parent))
    assert line == (
        f"hadar: error: {rundir}/state.sqlite: an empty file, not a run's state; restore it "
        "from a backup or start a new run"
    )
    assert (rundir / "state.sqlite").read_bytes() == b""
