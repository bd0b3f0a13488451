"""Every shell block of README.md works as written, run as a new user would run it.

Each fenced ```sh block runs with `sh -eu` in its own fresh project directory, with the
installed `lifeline` and `lifeline-mesh` first on PATH (the venv this suite runs in, as
`make` sets it up). The README is written so its blocks need no placeholders: the mesh
example serves on loopback in the background and reads the addresses from serve's output.
The only commands not run are listed in SKIPPED, each with the reason.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

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


def test_skipped_commands_are_still_in_the_readme() -> None:
    # A stale skip list would silently skip nothing; keep it honest.
    commands = {
        line.split("#", 1)[0].strip()
        for block in sh_blocks(README.read_text(encoding="utf-8"))
        for line in block.splitlines()
    }
    assert set(SKIPPED) <= commands


def test_readme_has_the_tour() -> None:
    blocks = sh_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) >= 3
    assert any("lifeline-mesh serve" in b and "lifeline-mesh join" in b for b in blocks)


def run_block(
    block: str, cwd: Path, bin_dir: Path = Path(sys.executable).parent
) -> subprocess.CompletedProcess[str]:
    """``block`` run by ``sh -eu`` in ``cwd`` with ``bin_dir`` (the commands' venv) first on PATH."""
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


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block_runs_as_written(index: int, tmp_path: Path) -> None:
    block = runnable(BLOCKS[index])
    if not block.strip():
        pytest.skip(f"block {index}: only skipped commands ({', '.join(SKIPPED)})")
    project = tmp_path / "project"
    project.mkdir()
    result = run_block(block, project)
    assert result.returncode == 0, (
        f"README block {index} failed (exit {result.returncode})\n{block}\n"
        f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    )
    check_tour_output(block, result)


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
