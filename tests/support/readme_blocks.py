"""The shell blocks of our docs, run as a reader runs them: the README's by
tests/docs/test_readme.py with this suite's commands and by tests/deploy/test_wheel.py with a
freshly installed wheel's; docs/hub.md's by tests/docs/test_hub_doc.py and docs/user-guide.md's
by tests/docs/test_user_guide.py, with the same ``sh_blocks``, ``commands`` and ``run_block``."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support.paths import REPO

__all__ = [
    "BLOCKS",
    "README",
    "SKIPPED",
    "check_tour_output",
    "commands",
    "run_block",
    "runnable",
    "sh_blocks",
]

README = REPO / "README.md"

SKIPPED = {
    # Running the whole suite from inside the suite would recurse.
    "make test": "recursion",
    # Installs into .venv when pyproject.toml changed (network); the tour it runs,
    # `python -m lifeline_mesh.demo`, is run by tests/docs/test_demo.py.
    "make demo": "covered by tests/docs/test_demo.py",
}


def sh_blocks(text: str) -> list[str]:
    """Every fenced ```sh block of ``text``, a block indented in a list item dedented."""
    found = re.findall(r"^( *)```sh\n(.*?)^\1```$", text, flags=re.M | re.S)
    return [textwrap.dedent(body) for _, body in found]


def commands(text: str) -> set[str]:
    """The command lines of ``text``'s shell blocks, without trailing comments."""
    return {
        line.split("#", 1)[0].strip() for block in sh_blocks(text) for line in block.splitlines()
    }


def runnable(block: str) -> str:
    """The block without the skipped commands (compared without trailing comments)."""
    kept = []
    for line in block.splitlines():
        command = line.split("#", 1)[0].strip()
        if command not in SKIPPED:
            kept.append(line)
    return "\n".join(kept) + "\n"


def run_block(
    block: str,
    cwd: Path,
    bin_dir: Path = Path(sys.executable).parent,
    *,
    env: dict[str, str] | None = None,
    timeout: float = 90,
) -> subprocess.CompletedProcess[str]:
    """``block`` run by ``sh -eu`` in ``cwd``, ``bin_dir`` (the commands' venv) first on PATH,
    with ``env`` added to the environment (what the doc tells its reader to set)."""
    full_env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "LIFELINE_AUTHOR": "readme",
        **(env or {}),
    }
    # Its own process group, so a server the block left behind (a failed step) is stopped
    # with the group we created, and nothing else.
    proc = subprocess.Popen(
        ["sh", "-eu", "-c", block],
        cwd=cwd,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
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
        assert re.search(r"sent \d+ entr(?:y|ies), received [1-9]", result.stdout)
        assert "OK:" in result.stdout
        # The node was made before the first entry: a newcomer's first audit is all signed.
        assert re.search(r"\(\d+ signed, 0 imported, 0 unsigned\)", result.stdout), result.stdout
        # The token went through standard input, never onto a command line.
        assert "| lifeline-mesh join -" in block
    elif "lifeline context" in block:
        assert "Database: PostgreSQL" in result.stdout
        assert "run it on staging" in result.stdout
