"""What starting the CLI imports (docs/results.md, "CLI start-up"): the parsers and the policy
registry stay light, and ``hadar run`` imports torch only once it has checked its options. Each
case runs in a fresh interpreter, as ``python -m hadar`` would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HEAVY = (
    "scipy",
    "pandas",
    "highspy",
    "torch",
    "matplotlib",
    "paramiko",
    "boto3",
    "ray",
    "goodput.fit",
    "hadar.simulator.engine",
    "hadar.runtime.coordinator",
)
"""Solvers, the simulator's engine, the coordinator and the optional extras."""


def _loaded_after(code: str, cwd: Path) -> dict[str, object]:
    """Run ``code`` (which sets ``result``) in a fresh interpreter; ``result`` plus which of
    :data:`HEAVY` it left imported."""
    script = (
        f"import json, sys\n{code}\n"
        f"print(json.dumps({{'result': result, 'heavy': [m for m in {HEAVY!r} if m in sys.modules]}}))"
    )
    res = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=cwd, timeout=120
    )
    assert res.returncode == 0, res.stderr
    out: dict[str, object] = json.loads(res.stdout.splitlines()[-1])
    return out


def test_every_parser_and_the_policy_registry_import_no_solver_or_extra(tmp_path: Path) -> None:
    """``hadar --help`` builds every command's parser; listing the policies imports every policy
    module: neither may import a solver, the simulator's engine or an optional extra (a policy
    imports its solver where it solves: CONTRIBUTING.md, "Adding a policy")."""
    got = _loaded_after(
        "from hadar.cli import build_parser\n"
        "from hadar.policy import POLICY_REGISTRY\n"
        "build_parser()\n"
        "result = sorted(POLICY_REGISTRY)",
        tmp_path,
    )
    names = got["result"]
    assert isinstance(names, list) and {"hadar", "hadare", "gavel"} <= set(names)
    assert got["heavy"] == []


def test_a_refused_run_never_imports_torch(tmp_path: Path) -> None:
    """``hadar run`` checks that torch is installed without importing it; a run refused as bad
    input (here: nothing to resume) exits 2 before the coordinator and torch are imported."""
    got = _loaded_after(
        "from hadar.cli import main\n"
        f"result = main(['run', '--resume', {str(tmp_path / 'nowhere')!r}])",
        tmp_path,
    )
    assert got["result"] == 2
    assert got["heavy"] == []


def test_a_run_refused_for_its_job_file_imports_no_solver_torch_or_coordinator(
    tmp_path: Path,
) -> None:
    """A job file whose spec the worker would reject is refused from the run's inputs alone
    (hadar/runtime/run_inputs.py): nothing heavy is imported and nothing is written."""
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(
        "jobs:\n- {id: 0, type: MM, gpus: 1, steps: 20,\n"
        "   spec: {model: MM, size: tiny, data: synthetic, batch_size: -4, lr: 0.001}}\n"
    )
    repo = Path(__file__).resolve().parents[3]
    argv = [
        "run",
        "--cluster",
        str(repo / "cluster_configs" / "local-3node.yaml"),
        "--workload",
        str(jobs),
        "--no-live",
        "--out",
        str(tmp_path / "run"),
    ]
    got = _loaded_after(f"from hadar.cli import main\nresult = main({argv!r})", tmp_path)
    assert got["result"] == 2
    assert got["heavy"] == []
    assert not (tmp_path / "run").exists()
