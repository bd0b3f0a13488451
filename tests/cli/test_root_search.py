"""Commands run in a subfolder find the project's `.lifeline/` upward, as git finds `.git`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run(cwd: Path, module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI without --root, from ``cwd``, as a user types it."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_subfolder_uses_the_project_ledger_and_v_names_it(tmp_path: Path) -> None:
    project = tmp_path / "project"
    deep = project / "src" / "pkg"
    deep.mkdir(parents=True)
    assert run(project, "lifeline", "init").returncode == 0
    logged = run(deep, "lifeline", "log", "--kind", "note", "--summary", "from deep", "-v")
    assert logged.returncode == 0, logged.stderr
    assert f"using project root {project.resolve()}" in logged.stderr
    assert not (deep / ".lifeline").exists() and not (project / "src" / ".lifeline").exists()
    history = run(project, "lifeline", "history")
    assert "from deep" in history.stdout
    status = run(deep, "lifeline_mesh", "status", "--json")
    assert f'"root": "{project.resolve()}"' in status.stdout


def test_the_search_stops_at_a_repository_root(tmp_path: Path) -> None:
    (tmp_path / ".lifeline").mkdir()  # an outer project the inner repository must not use
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "sub").mkdir()
    missing = run(repo / "sub", "lifeline", "history")
    assert missing.returncode == 2
    assert f"no lifeline project found in {repo / 'sub'} or above" in missing.stderr
    assert run(repo, "lifeline", "init").returncode == 0
    assert run(repo / "sub", "lifeline", "history", "--json").stdout.strip() == "[]"


def test_root_overrides_the_search(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    assert run(tmp_path, "lifeline", "init").returncode == 0
    other = tmp_path / "b"
    other.mkdir()
    done = run(tmp_path / "a", "lifeline", "--root", str(other), "history")
    assert done.returncode == 2
    assert f"no lifeline project under {other}" in done.stderr
    assert "`lifeline init`" in done.stderr and "--line" not in done.stderr


NO_PROJECT = "no lifeline project found in {} or above; run `lifeline init` in the project's folder"


def _outside(tmp_path: Path) -> Path:
    """A folder in no project: no `.lifeline/` in it nor above it, no repository."""
    here = tmp_path / "nowhere"
    here.mkdir(parents=True)
    assert not any((f / ".lifeline").exists() for f in (here, *here.parents))
    return here


def test_outside_a_project_reads_say_so_and_create_nothing(tmp_path: Path) -> None:
    here = _outside(tmp_path)
    for module, *args in (
        ("lifeline", "history"),
        ("lifeline", "context"),
        ("lifeline", "log", "--kind", "note", "--summary", "lost"),
        ("lifeline_mesh", "status"),
        ("lifeline_mesh", "serve", "--listen", "127.0.0.1:0"),
    ):
        done = run(here, module, *args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert NO_PROJECT.format(here) in done.stderr, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "--line ledger init" not in done.stderr
    assert list(here.iterdir()) == []  # `serve` made no .lifeline/ here


def test_outside_a_project_mcp_refuses_on_stderr_instead_of_serving(tmp_path: Path) -> None:
    here = _outside(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "lifeline_mesh", "mcp"],
        cwd=here,
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert NO_PROJECT.format(here) in done.stderr
    assert done.stdout == ""  # the stdio channel carries no MCP frames
    assert list(here.iterdir()) == []


def test_commands_that_create_still_create_in_the_current_folder(tmp_path: Path) -> None:
    here = _outside(tmp_path)
    assert run(here, "lifeline", "init").returncode == 0
    assert (here / ".lifeline" / "ledger.db").is_file()
    other = _outside(tmp_path / "b")
    done = run(other, "lifeline_mesh", "init")
    assert done.returncode == 0, done.stderr
    assert (other / ".lifeline").is_dir()
