"""The console commands say, in one line with the fix, when lifeline-context shares their
Python environment (both ship the `lifeline` package), and when that mix broke ours."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def _site(tmp_path: Path, *, dist: bool, shadow: bool) -> Path:
    """A directory put first on the path: lifeline-context's metadata as pip writes it, and
    (shadow) a `lifeline` package of its own in front of ours, as when its files won."""
    site = tmp_path / "site"
    site.mkdir()
    if dist:
        info = site / "lifeline_context-0.6.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            "Metadata-Version: 2.1\nName: lifeline-context\nVersion: 0.6.1\n"
        )
    if shadow:
        (site / "lifeline").mkdir()
        (site / "lifeline" / "__init__.py").write_text('"""lifeline-context 0.6.1"""\n')
    return site


def _run(command: str, site: Path | None, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = str(site)
    return subprocess.run(
        [str(BIN / command), *args], capture_output=True, text=True, env=env, timeout=60
    )


@pytest.mark.parametrize("command", ["lifeline", "lifeline-mesh"])
def test_clean_environment_says_nothing(command: str) -> None:
    done = _run(command, None, "--version")
    assert done.returncode == 0 and done.stderr == ""


@pytest.mark.parametrize("command", ["lifeline", "lifeline-mesh"])
def test_mixed_environment_is_one_line_with_the_fix(tmp_path: Path, command: str) -> None:
    done = _run(command, _site(tmp_path, dist=True, shadow=False), "--version")
    assert done.returncode == 0, done.stderr  # our files won: it still works
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{command}: warning: lifeline-context 0.6.1")
    assert "pip install --force-reinstall lifeline-mesh" in lines[0]


def test_when_its_files_won_the_command_says_so_without_a_traceback(tmp_path: Path) -> None:
    done = _run("lifeline", _site(tmp_path, dist=True, shadow=True), "--help")
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert [line.split(":")[1].strip() for line in lines] == ["warning", "error"]
    assert "Traceback" not in done.stderr and "pipx install lifeline-context" in lines[1]


def test_a_package_left_incomplete_by_an_uninstall_is_named(tmp_path: Path) -> None:
    done = _run("lifeline", _site(tmp_path, dist=False, shadow=True), "--help")
    assert done.returncode == 2
    assert done.stderr.startswith("lifeline: error: the installed `lifeline` package is incomplete")
    assert len(done.stderr.splitlines()) == 1 and "--force-reinstall" in done.stderr
