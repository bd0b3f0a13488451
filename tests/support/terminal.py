"""A CLI run with its stderr (or stdout) on a pseudo-terminal, as a person sees it (progress
counters, hints for people)."""

from __future__ import annotations

import os
import pty
import subprocess


def on_a_terminal(argv: list[str], *, stdout: bool = False) -> tuple[int, str]:
    """Run ``argv`` with stderr (``stdout``: stdout instead) on a pseudo-terminal; (exit
    status, what it drew there)."""
    main, sub = pty.openpty()
    if stdout:
        proc = subprocess.Popen(argv, stdout=sub, stderr=subprocess.DEVNULL)
    else:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=sub)
    os.close(sub)
    drawn = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        drawn += chunk
    os.close(main)
    return proc.wait(timeout=60), drawn.decode("utf-8", "replace")
