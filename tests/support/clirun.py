"""Running the `lifeline` CLI as a real subprocess, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["lifeline"]


def lifeline(
    root: Path,
    *args: str,
    stdin: str | None = None,
    timeout: float = 60,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m lifeline --root ROOT ARGS...``; captures text output. ``env`` is added
    to this process's environment."""
    return subprocess.run(
        [sys.executable, "-m", "lifeline", "--root", str(root), *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=timeout,
        check=False,
        env=None if env is None else os.environ | env,
    )
