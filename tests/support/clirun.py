"""Running the `lifeline` CLI as a real subprocess, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["lifeline", "one_line_error"]


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


def one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    """``result`` failed as the CLIs fail on bad input: exit status 2 and one line on stderr,
    no traceback, holding each of ``needles``."""
    err = result.stderr
    assert result.returncode == 2, (result.returncode, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err
