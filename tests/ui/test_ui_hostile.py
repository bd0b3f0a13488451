"""A hostile web page and a flood of idle sockets against a real `lifeline-mesh ui` process.

- DNS rebinding: a page whose name was made to resolve to 127.0.0.1 sends the browser's
  request with its own name in ``Host``; the viewer must not show it a private line.
- A write from another origin (a form or fetch that never reads the answer) is refused.
- 2,000 connections that never finish a request, against a viewer limited to the usual
  1,024 descriptors: the viewer still answers, and closes them.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.http_flood import (
    at_most_fds,
    browser_request,
    idle_flood,
    wait_until_open_at_most,
)
from tests.support.mesh_procs import cli

pytestmark = pytest.mark.timeout(180)

SECRET = "Private: the acquisition of Initech closes on Friday"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile") / "project"
    root.mkdir()
    cli("lifeline", root, "init")
    cli("lifeline", root, "--line", "private", "init")
    cli("lifeline", root, "--line", "private", "log", "--kind", "note", "--summary", SECRET)
    return root


@contextmanager
def _viewer(root: Path, *args: str, fds: int | None = None) -> Iterator[int]:
    """A running `lifeline-mesh ui` on a free loopback port; yields the port."""
    command = [sys.executable, "-m", "lifeline_mesh", "--root", str(root), "ui"]
    proc = subprocess.Popen(
        at_most_fds([*command, "--listen", "127.0.0.1:0", *args], fds),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("viewer on http://127.0.0.1:"):
            proc.kill()
            raise AssertionError(f"it printed {line!r}; stderr: {proc.stderr.read()[-2000:]}")
        yield int(line.split(":")[2].split("/")[0])
    finally:
        proc.terminate()
        proc.communicate(timeout=60)


def test_a_rebinding_page_cannot_read_a_private_line(project: Path) -> None:
    with _viewer(project, "--allow-host", "viewer.lan") as port:
        page = "/lines/private/history"
        # The browser believes the viewer is the page's own site: same-origin headers.
        for name in ("attacker.example", "attacker.example.", "127.0.0.1.nip.io"):
            status, body = browser_request(
                port, "GET", page, {"Host": f"{name}:{port}", "Sec-Fetch-Site": "same-origin"}
            )
            assert status == 421, (name, status)
            assert SECRET not in body
            assert "--allow-host" in body  # the one line says how to serve a real name
        for name in ("127.0.0.1", "localhost", "[::1]", "viewer.lan", "VIEWER.lan"):
            status, body = browser_request(port, "GET", page, {"Host": f"{name}:{port}"})
            assert (status, SECRET in body) == (200, True), name


def test_a_write_from_another_origin_is_refused(project: Path) -> None:
    with _viewer(project) as port:
        own = {"Host": f"127.0.0.1:{port}"}
        others = ("http://attacker.example", "null", f"http://localhost:{port + 1}")
        # another port of the listen host: another program's page, another origin
        for origin in (*others, f"http://127.0.0.1:{port + 1}"):
            status, body = browser_request(
                port, "POST", "/lines/private/history", {**own, "Origin": origin}, b"x=1"
            )
            assert status == 403, (origin, status)
            assert SECRET not in body
        # The viewer's own origin reaches the application (which writes nothing: 405).
        status, _ = browser_request(
            port, "POST", "/", {**own, "Origin": f"http://127.0.0.1:{port}"}, b"x=1"
        )
        assert status == 405
        # A GET from another origin is a link: the browser never lets that page read it.
        page = "/lines/private/history"
        status, _ = browser_request(port, "GET", page, {**own, "Origin": "http://attacker.example"})
        assert status == 200


def test_the_viewer_answers_through_a_flood_of_idle_sockets(project: Path) -> None:
    with _viewer(project, fds=1024) as port, idle_flood(port, 2000) as flood:
        assert len(flood) == 2000  # every connection was taken
        status, body = browser_request(
            port, "GET", "/lines/private/history", {"Host": f"127.0.0.1:{port}"}
        )
        assert (status, SECRET in body) == (200, True)
        # At most the cap (a quarter of 1,024 descriptors) stay open, and none past the
        # header deadline (10 s).
        assert wait_until_open_at_most(flood, 256, within=10) <= 256
        assert wait_until_open_at_most(flood, 0, within=20) == 0
        status, _ = browser_request(port, "GET", "/mesh", {"Host": f"localhost:{port}"})
        assert status == 200
