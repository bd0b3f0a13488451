"""`lifeline-mesh ui` and `serve --ui` as real subprocesses: they print the viewer's address,
serve pages there, and stop cleanly on SIGTERM."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ui_project import Project, build_project
from tests.support.ui_server import fetch


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return build_project(tmp_path_factory.mktemp("uicli") / "project")


def _run_until(proc: subprocess.Popen[str], prefixes: tuple[str, ...]) -> dict[str, str]:
    """Read stdout lines until one starting with each prefix was seen."""
    assert proc.stdout is not None
    seen: dict[str, str] = {}
    while len(seen) < len(prefixes):
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"exited early: {proc.communicate()[1]}")
        for prefix in prefixes:
            if line.startswith(prefix):
                seen[prefix] = line[len(prefix) :].strip()
    return seen


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.terminate()
    out, _err = proc.communicate(timeout=60)
    assert proc.returncode == 0, _err
    return out


def _start(root: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(root), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_ui_serves_until_sigterm(project: Project) -> None:
    proc = _start(project.root, "ui", "--listen", "127.0.0.1:0")
    try:
        url = _run_until(proc, ("viewer on ",))["viewer on "]
        assert url.startswith("http://127.0.0.1:")
        status, body, _h = fetch(url + "lines/ledger/history")
        assert status == 200 and "History of" in body
    finally:
        out = _stop(proc)
    assert "viewer stopped" in out


def test_ui_with_a_token_prints_it_in_the_address(project: Project) -> None:
    proc = _start(project.root, "ui", "--listen", "127.0.0.1:0", "--token", "t" * 20)
    try:
        url = _run_until(proc, ("viewer on ",))["viewer on "]
        assert url.endswith("/?token=" + "t" * 20)
        base = url.split("?")[0]
        assert fetch(base + "mesh")[0] == 401
        assert fetch(base + "mesh", {"Authorization": "Bearer " + "t" * 20})[0] == 200
    finally:
        _stop(proc)


def test_serve_with_ui_serves_both(project: Project) -> None:
    proc = _start(
        project.root,
        "serve",
        "--insecure",
        "--no-discovery",
        "--listen",
        "127.0.0.1:0",
        "--ui",
        "--ui-listen",
        "127.0.0.1:0",
    )
    try:
        seen = _run_until(proc, ("viewer on ", "listening on "))
        status, body, _h = fetch(seen["viewer on "] + "mesh")
        assert status == 200
        assert f"on {seen['listening on ']}" in body  # the Mesh page sees the node serving
    finally:
        _stop(proc)
