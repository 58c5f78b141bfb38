"""Slurm's client commands (``sinfo``, ``squeue``, ``salloc``, ``sbatch --test-only``,
``scancel``, ``scontrol``) run for the provider and the live node stream, each answer read into
plain values; Slurm not reachable is one line (:class:`SlurmUnreachable`, exit 2)."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hadar.core.errors import InputError
from hadar.core.slurm_hostlist import expand_hostlist

COMMAND_TIMEOUT_S = 30.0
"""How long one query of the controller may take before Slurm counts as not reachable."""


class SlurmUnreachable(InputError):
    """Slurm's commands are missing, its configuration unreadable or its controller silent."""


@dataclass(frozen=True)
class SlurmJob:
    """One line of ``squeue``."""

    job_id: str
    partition: str
    state: str
    user: str
    nodes: tuple[str, ...]
    name: str


class Slurm:
    """The client commands of one Slurm cluster (``conf``: its ``slurm.conf``, else the
    environment's ``SLURM_CONF`` or Slurm's default); ``where`` prefixes messages."""

    def __init__(self, conf: str | None, where: str) -> None:
        self.where = where
        self.env = dict(os.environ)
        if conf is not None:
            path = Path(os.path.expanduser(conf))
            if not path.is_file():  # Slurm itself retries a missing file for a minute
                raise SlurmUnreachable(f"{where}: slurm.slurm_conf: no file {path}")
            self.env["SLURM_CONF"] = str(path)
        elif "SLURM_CONF" in self.env and not Path(self.env["SLURM_CONF"]).is_file():
            raise SlurmUnreachable(f"{where}: SLURM_CONF: no file {self.env['SLURM_CONF']}")

    def call(
        self, argv: Sequence[str], timeout_s: float = COMMAND_TIMEOUT_S
    ) -> subprocess.CompletedProcess[str]:
        """Run a Slurm command; a missing command or a timeout is :class:`SlurmUnreachable`."""
        try:
            return subprocess.run(
                list(argv),
                env=self.env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
        except FileNotFoundError:
            raise SlurmUnreachable(
                f"{self.where}: Slurm not reachable: {argv[0]} not found (install Slurm's client "
                "commands, e.g. apt-get install slurm-client)"
            ) from None
        except subprocess.TimeoutExpired:
            raise SlurmUnreachable(
                f"{self.where}: Slurm not reachable: {argv[0]} did not answer in {timeout_s:g} s"
            ) from None

    def query(self, argv: Sequence[str]) -> str:
        """The output of a query; a failure is :class:`SlurmUnreachable` with Slurm's reason."""
        res = self.call(argv)
        if res.returncode != 0:
            raise SlurmUnreachable(
                f"{self.where}: Slurm not reachable: {argv[0]}: {last_line(res.stderr)}"
            )
        return res.stdout

    def partitions(self) -> list[str]:
        """The cluster's partitions (the default one marked ``*`` by sinfo, unmarked here)."""
        out = self.query(["sinfo", "-h", "-o", "%P"])
        return [p.strip().rstrip("*") for p in out.split() if p.strip()]

    def node_states(self, partition: str | None = None) -> dict[str, str]:
        """Each node's state (``sinfo -N``; ``idle``, ``mixed``, ``down*``...), of one partition."""
        argv = ["sinfo", "-h", "-N", "-o", "%N|%T"] + (["-p", partition] if partition else [])
        states: dict[str, str] = {}
        for line in self.query(argv).splitlines():
            node, _, state = line.strip().partition("|")
            if node:
                states[node] = state.strip()
        return states

    def jobs(self) -> list[SlurmJob]:
        """Every job the controller knows (``squeue``), with its nodes expanded."""
        out = self.query(["squeue", "-h", "-a", "-o", "%i|%P|%T|%u|%N|%j"])
        jobs = []
        for line in out.splitlines():
            fields = line.split("|", 5)
            if len(fields) < 6:
                continue
            nodes = expand_hostlist(fields[4]) if fields[4].strip() else []
            jobs.append(
                SlurmJob(
                    fields[0].strip(), fields[1], fields[2], fields[3], tuple(nodes), fields[5]
                )
            )
        return jobs

    def job(self, job_id: str) -> SlurmJob | None:
        """Job ``job_id`` if the controller still lists it."""
        res = self.call(["squeue", "-h", "-j", job_id, "-o", "%i|%P|%T|%u|%N|%j"])
        for line in res.stdout.splitlines():
            fields = line.split("|", 5)
            if len(fields) == 6 and fields[0].strip() == job_id:
                nodes = expand_hostlist(fields[4]) if fields[4].strip() else []
                return SlurmJob(job_id, fields[1], fields[2], fields[3], tuple(nodes), fields[5])
        return None

    def node_address(self, node: str) -> str:
        """The node's ``NodeAddr`` (where its processes listen)."""
        out = self.call(["scontrol", "-o", "show", "node", node]).stdout
        m = re.search(r"\bNodeAddr=(\S+)", out)
        return m.group(1) if m else node

    def job_gres(self, job_id: str) -> dict[str, int]:
        """The GPUs Slurm granted job ``job_id`` (``{gres type: count}``, ``scontrol -d``)."""
        out = self.call(["scontrol", "-d", "-o", "show", "job", job_id]).stdout
        granted: dict[str, int] = {}
        for m in re.finditer(r"\bGRES=(\S+)", out):
            for item in re.sub(r"\([^)]*\)", "", m.group(1)).split(","):
                parts = item.split(":")
                if parts[0] == "gpu" and len(parts) == 3 and parts[2].isdigit():
                    granted[parts[1]] = granted.get(parts[1], 0) + int(parts[2])
                elif parts[0] == "gpu" and len(parts) == 2 and parts[1].isdigit():
                    granted[""] = granted.get("", 0) + int(parts[1])
        return granted

    def cancel(self, job_ids: Sequence[str]) -> None:
        """``scancel`` the jobs (best effort: one already gone is not an error)."""
        if job_ids:
            self.call(["scancel", *job_ids])


def last_line(text: str) -> str:
    """The last non-empty line of a command's output (Slurm's reason), or ``no output``."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "no output"


GRANTED = re.compile(r"Granted job allocation (\d+)")
