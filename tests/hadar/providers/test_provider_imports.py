"""The providers, the health probe and the checkpoint-integrity helpers never import torch: the
coordinator imports them for every `hadar nodes check`, which must start fast."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
LIGHT_MODULES = (
    "hadar.core.integrity",
    "hadar.providers.base",
    "hadar.providers.health",
    "hadar.providers.local.provider",
    "hadar.providers.ssh.provider",
    "hadar.providers.aws.provider",
)


def test_provider_modules_do_not_import_torch() -> None:
    code = (
        "import importlib, sys\n"
        f"for name in {LIGHT_MODULES!r}:\n"
        "    importlib.import_module(name)\n"
        "    if 'torch' in sys.modules:\n"
        "        print('torch imported by', name)\n"
        "        break\n"
        "else:\n"
        "    print('torch-free')\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "torch-free"
