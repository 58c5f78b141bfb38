"""The node health probe: a self-contained Python snippet every provider runs with the node's
interpreter, and the reading of what it prints (Python and torch versions, GPUs seen) as a
:class:`~hadar.providers.base.NodeHealth`.

GPUs come from ``nvidia-smi`` (index, name and memory of each, numbered as ``nvidia-smi`` numbers
them, which is the order ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` gives CUDA too); torch is only imported (to list the CUDA devices it can use) when
there is an NVIDIA GPU, so a check of a CPU-only node takes well under a second."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from hadar.core.text import printable
from hadar.core.validation import from_validation_error
from hadar.providers.base import CommandResult, NodeHealth

MARKER = "HADAR-HEALTH "
MAX_TEXT = 200
"""Characters kept of each text the probe reports (a version, a GPU name, a note)."""

# Runs on the node with only the standard library (+ torch when a GPU is present); Python 3.8+.
SNIPPET = r"""
import json, os, platform, shutil, subprocess
out = {"python": platform.python_version(), "torch": None, "cuda": [], "nvidia_smi": [], "notes": []}
from importlib.metadata import version, PackageNotFoundError
try:
    out["torch"] = version("torch").split("+")[0]
except PackageNotFoundError:
    out["notes"].append("torch is not installed")
out["gpus"], out["smi_problem"] = [], None
smi = shutil.which("nvidia-smi")
if smi:
    try:
        r = subprocess.run([smi, "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
        for l in r.stdout.decode(errors="replace").splitlines():
            f = [x.strip() for x in l.split(",")]
            if len(f) >= 3 and f[0].isdigit():
                try:
                    mem = float(f[-1])
                except ValueError:
                    mem = None
                out["gpus"].append({"index": int(f[0]), "name": ",".join(f[1:-1]), "memory_mib": mem})
        out["nvidia_smi"] = [g["name"] for g in out["gpus"]]
        if r.returncode != 0:
            out["smi_problem"] = "nvidia-smi exited %d" % r.returncode
    except Exception as exc:
        out["smi_problem"] = "nvidia-smi: %s" % type(exc).__name__
    if out["smi_problem"]:
        out["notes"].append(out["smi_problem"])
else:
    out["smi_problem"] = "nvidia-smi not found"
# Importing torch costs seconds: do it only when there is evidence of an NVIDIA GPU, to report
# whether torch can actually use it.
if out["torch"] and (out["nvidia_smi"] or os.path.exists("/dev/nvidia0")):
    try:
        import torch
        out["torch"] = torch.__version__.split("+")[0]
        if torch.cuda.is_available():
            out["cuda"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        else:
            out["notes"].append("torch cannot use the GPU (CPU-only build or driver mismatch)")
    except Exception as exc:
        out["notes"].append("torch: %s: %s" % (type(exc).__name__, (str(exc).splitlines() or [""])[0]))
print("HADAR-HEALTH " + json.dumps(out))
"""


def _shown(text: str) -> str:
    return printable(text[:MAX_TEXT])


Text = Annotated[str, AfterValidator(_shown)]
"""A text the node reports: shown on the terminal, so control characters are escaped."""


class SeenGpuReport(BaseModel):
    """One GPU of the probe's ``gpus`` list (``nvidia-smi``'s index, name and memory)."""

    model_config = ConfigDict(extra="ignore")

    index: int = Field(ge=0, le=1023)
    name: Text
    memory_mib: float | None = Field(default=None, ge=0, allow_inf_nan=False)


class ProbeReport(BaseModel):
    """What the probe prints after :data:`MARKER`; a node's answer is checked like a file (a
    wrong type stopped ``hadar nodes check`` and ``hadar run`` with a traceback)."""

    model_config = ConfigDict(extra="ignore")

    python: Text | None = None
    torch: Text | None = None
    cuda: list[Text] = Field(default_factory=list)
    nvidia_smi: list[Text] = Field(default_factory=list)
    notes: list[Text] = Field(default_factory=list)
    gpus: list[SeenGpuReport] = Field(default_factory=list)
    smi_problem: Text | None = None


class MalformedReport(ValueError):
    """The probe's report line is there but is not the report the snippet prints."""


def report(stdout: str) -> dict[str, Any] | None:
    """The probe's report from its stdout (checked, texts made printable), None if there is no
    report line; :class:`MalformedReport` (one line: field and problem) if it is not one."""
    line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith(MARKER)), None)
    if line is None:
        return None
    try:
        return ProbeReport.model_validate_json(line[len(MARKER) :]).model_dump()
    except ValidationError as exc:
        raise MalformedReport(str(from_validation_error("health probe report", exc))) from None


def parse(stdout: str) -> dict[str, Any] | None:
    """The probe's report from its stdout, or None if it is not there or malformed."""
    try:
        return report(stdout)
    except MalformedReport:
        return None


def gpus_seen(report: dict[str, Any]) -> tuple[str, ...]:
    """GPU names from nvidia-smi, else from torch.cuda (empty on CPU-only nodes)."""
    names = report.get("nvidia_smi") or report.get("cuda") or []
    return tuple(str(n) for n in names)


def failure_line(returncode: int, stdout: str, stderr: str, python: str) -> str:
    """A one-line reason the probe did not report (e.g. the interpreter is missing)."""
    if returncode == 127:
        return f"{python}: command not found on the node"
    text = (stderr or stdout).strip().splitlines()
    last = text[-1] if text else "no output"
    return f"health probe with {python} exited {returncode}: {last}"


def node_health(
    node: str, address: str, res: CommandResult, seconds: float, timeout_s: float, python: str
) -> NodeHealth:
    """The health of a reachable ``node`` from the probe run ``res`` (started with ``python``):
    its report, or an ``error`` saying why the probe did not report."""
    try:
        data = report(res.stdout)
    except MalformedReport as exc:
        return NodeHealth(node, True, address, error=str(exc), seconds=seconds)
    if data is None:
        err = (
            f"health probe timed out after {timeout_s:g}s"
            if res.timed_out
            else failure_line(res.returncode, res.stdout, res.stderr, python)
        )
        return NodeHealth(node, True, address, error=printable(err), seconds=seconds)
    return NodeHealth(
        node=node,
        reachable=True,
        address=address,
        python=data["python"],
        torch=data["torch"],
        gpus=gpus_seen(data),
        error="; ".join(data["notes"]) or None,
        seconds=seconds,
        details=data,
    )
