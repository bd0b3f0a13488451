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
    assert f"does not exist under {repo / 'sub'}" in missing.stderr
    assert run(repo, "lifeline", "init").returncode == 0
    assert run(repo / "sub", "lifeline", "history", "--json").stdout.strip() == "[]"


def test_root_overrides_the_search(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    assert run(tmp_path, "lifeline", "init").returncode == 0
    other = tmp_path / "b"
    other.mkdir()
    done = run(tmp_path / "a", "lifeline", "--root", str(other), "history")
    assert done.returncode == 2 and f"under {other}" in done.stderr
