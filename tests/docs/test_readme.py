"""Every shell block of README.md works as written, run as a new user would run it.

Each fenced ```sh block runs with `sh -eu` in its own fresh project directory, with the
installed `lifeline` and `lifeline-mesh` first on PATH (the venv this suite runs in, as
`make` sets it up). The README is written so its blocks need no placeholders: the mesh
example serves on loopback in the background and reads the addresses from serve's output.
The only commands not run are listed in SKIPPED, each with the reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.readme_blocks import (
    BLOCKS,
    README,
    SKIPPED,
    check_tour_output,
    commands,
    run_block,
    runnable,
    sh_blocks,
)


def test_skipped_commands_are_still_in_the_readme() -> None:
    # A stale skip list would silently skip nothing; keep it honest.
    assert set(SKIPPED) <= commands(README.read_text(encoding="utf-8"))


def test_readme_has_the_tour() -> None:
    blocks = sh_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) >= 3
    assert any("lifeline-mesh serve" in b and "lifeline-mesh join" in b for b in blocks)


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
