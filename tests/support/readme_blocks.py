"""The README's shell blocks, run as a new user runs them: by tests/docs/test_readme.py with
this suite's commands and by tests/deploy/test_wheel.py with a freshly installed wheel's."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO

__all__ = ["BLOCKS", "README", "SKIPPED", "check_tour_output", "run_block", "runnable", "sh_blocks"]

README = REPO / "README.md"

SKIPPED = {
    # Running the whole suite from inside the suite would recurse.
    "make test": "recursion",
    # Installs into .venv when pyproject.toml changed (network); the tour it runs,
    # `python -m lifeline_mesh.demo`, is run by tests/docs/test_demo.py.
    "make demo": "covered by tests/docs/test_demo.py",
}


def sh_blocks(text: str) -> list[str]:
    return re.findall(r"^```sh\n(.*?)^```$", text, flags=re.M | re.S)


def runnable(block: str) -> str:
    """The block without the skipped commands (compared without trailing comments)."""
    kept = []
    for line in block.splitlines():
        command = line.split("#", 1)[0].strip()
        if command not in SKIPPED:
            kept.append(line)
    return "\n".join(kept) + "\n"


def run_block(
    block: str, cwd: Path, bin_dir: Path = Path(sys.executable).parent
) -> subprocess.CompletedProcess[str]:
    """``block`` run by ``sh -eu`` in ``cwd``, ``bin_dir`` (the commands' venv) first on PATH."""
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "LIFELINE_AUTHOR": "readme",
    }
    # Its own process group, so a server the block left behind (a failed step) is stopped
    # with the group we created, and nothing else.
    proc = subprocess.Popen(
        ["sh", "-eu", "-c", block],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=90)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


BLOCKS = sh_blocks(README.read_text(encoding="utf-8"))


def check_tour_output(block: str, result: subprocess.CompletedProcess[str]) -> None:
    """What a tour block must show besides exiting 0."""
    if "lifeline-mesh sync" in block:
        # The second laptop got the first laptop's decision, and verify found no problem.
        assert "Database: PostgreSQL" in result.stdout
        assert re.search(r"sent \d+ entries, received [1-9]", result.stdout)
        assert "OK:" in result.stdout
        # The node was made before the first entry: a newcomer's first audit is all signed.
        assert re.search(r"\(\d+ signed, 0 imported, 0 unsigned\)", result.stdout), result.stdout
        # The token went through standard input, never onto a command line.
        assert "| lifeline-mesh join -" in block
    elif "lifeline context" in block:
        assert "Database: PostgreSQL" in result.stdout
        assert "run it on staging" in result.stdout
