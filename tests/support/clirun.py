"""Running the `lifeline` CLI as a real subprocess, as a user would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

__all__ = ["lifeline"]


def lifeline(
    root: Path, *args: str, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``python -m lifeline --root ROOT ARGS...``; captures text output."""
    return subprocess.run(
        [sys.executable, "-m", "lifeline", "--root", str(root), *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=timeout,
        check=False,
    )
