"""Where matplotlib keeps its settings and font cache while a command draws: inside the output
folder, never the user's home (``hadar.core`` may import no optional extra, so this is its own
module)."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path


def load_matplotlib(scratch: Path) -> None:
    """Import matplotlib (Agg canvas) with its settings and font cache in a new folder inside
    ``scratch`` (an output or staging folder), removed before this returns: drawing writes
    nothing in ``~/.config`` or ``~/.cache``. The font list is built in memory at import, so the
    process needs the folder no longer. Nothing to do once matplotlib is imported, or when the
    user set ``MPLCONFIGDIR`` (then matplotlib uses that folder, as its documentation says)."""
    if "matplotlib" in sys.modules or os.environ.get("MPLCONFIGDIR"):
        return
    home = tempfile.mkdtemp(prefix=".matplotlib-", dir=scratch)
    os.environ["MPLCONFIGDIR"] = home
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.font_manager  # noqa: F401  (the font list: built now, into home)
    finally:
        os.environ.pop("MPLCONFIGDIR", None)
        shutil.rmtree(home, ignore_errors=True)
