"""A hostile web page and a flood of idle sockets against a real `lifeline-mesh ui` process.

- DNS rebinding: a page whose name was made to resolve to 127.0.0.1 sends the browser's
  request with its own name in ``Host``; the viewer must not show it a private line.
- A write from another origin (a form or fetch that never reads the answer) is refused.
- Another user of the machine, who can reach any loopback port, is refused a viewer
  started without a token; its own user is served.
- 2,000 connections that never finish a request, against a viewer limited to the usual
  1,024 descriptors: the viewer still answers, and closes them.
- 70 distinct bodies of 64,000 characters of brackets, as a member could sync them, opened
  at once: every other page still answers at once, and each of them costs a bounded time.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from pathlib import Path

import pytest

from lifeline.entry import Entry
from lifeline.home import Home
from lifeline.store.sqlite import SqliteStore
from tests.support.http_flood import (
    at_most_fds,
    browser_request,
    idle_flood,
    wait_until_open_at_most,
)
from tests.support.mesh_procs import cli

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

SECRET = "Private: the acquisition of Initech closes on Friday"
NOBODY = 65534
# What a member can sync to hold a viewer: bodies at the size a body written here may have,
# each distinct (the viewer keeps the last 64 rendered), every bracket a possible link.
BRACKET_SHAPES = ("[", "[\n", "[a](", "[*", "![")
HOSTILE_BODIES = 70
BODY_CHARS = 64_000


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile") / "project"
    root.mkdir()
    cli("lifeline", root, "init")
    cli("lifeline", root, "--line", "private", "init")
    cli("lifeline", root, "--line", "private", "log", "--kind", "note", "--summary", SECRET)
    return root


@contextmanager
def _viewer(root: Path, *args: str, fds: int | None = None) -> Iterator[tuple[int, int]]:
    """A running `lifeline-mesh ui` on a free loopback port; yields (port, process id)."""
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
        yield int(line.split(":")[2].split("/")[0]), proc.pid
    finally:
        proc.terminate()
        proc.communicate(timeout=60)


def test_a_rebinding_page_cannot_read_a_private_line(project: Path) -> None:
    with _viewer(project, "--allow-host", "viewer.lan") as (port, _):
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
    with _viewer(project) as (port, _):
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


def _curl_as(uid: int | None, url: str) -> tuple[str, str]:
    """``curl URL`` as user ``uid`` (util-linux's setpriv) or as this one: (status, body)."""
    drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
    done = subprocess.run(
        [*(drop if uid is not None else []), "curl", "-s", "-m", "20", "-w", "\n%{http_code}", url],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    body, _, status = done.stdout.rpartition("\n")
    return status, body


@pytest.mark.skipif(
    os.geteuid() != 0 or sys.platform != "linux" or shutil.which("curl") is None,
    reason="becoming another user needs root and util-linux's setpriv; curl asks",
)
def test_another_user_of_the_machine_is_refused_a_viewer_without_a_token(
    project: Path,
) -> None:
    with _viewer(project) as (port, _):
        page = f"http://127.0.0.1:{port}/lines/private/history"
        status, body = _curl_as(NOBODY, page)
        assert status == "403" and "another user of the machine" in body, (status, body)
        assert SECRET not in body
        status, body = _curl_as(None, page)  # the viewer's own user (root: its owner)
        assert status == "200" and SECRET in body


def test_the_viewer_answers_through_a_flood_of_idle_sockets(project: Path) -> None:
    with _viewer(project, fds=1024) as (port, _), idle_flood(port, 2000) as flood:
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


@pytest.fixture(scope="module")
def brackets(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A project whose line holds :data:`HOSTILE_BODIES` bodies of brackets: (root, ids)."""
    root = tmp_path_factory.mktemp("brackets") / "project"
    root.mkdir()
    cli("lifeline", root, "init")
    entries = []
    for k in range(HOSTILE_BODIES):
        unit = BRACKET_SHAPES[k % len(BRACKET_SHAPES)]
        body = (f"{k} " + unit * BODY_CHARS)[:BODY_CHARS]
        ts = f"2026-01-01T00:00:00.{k:06d}Z"
        entries.append(Entry.create(ts=ts, kind="note", summary=f"brackets {k}", body=body))

    async def write() -> None:
        async with await SqliteStore.open(Home(root).line_path("ledger")) as store:
            await store.append_many(entries)

    asyncio.run(write())
    return root, [e.id for e in entries]


def _open_all(port: int, ids: list[str], pool: ThreadPoolExecutor) -> list[Future[tuple[int, str]]]:
    """Every entry page of ``ids`` asked for at once, as tabs a browser restores."""
    own = {"Host": f"127.0.0.1:{port}"}
    return [
        pool.submit(browser_request, port, "GET", f"/lines/ledger/entries/{i}", own) for i in ids
    ]


def test_other_pages_answer_while_hostile_bodies_render(brackets: tuple[Path, list[str]]) -> None:
    root, ids = brackets
    with _viewer(root) as (port, _), ThreadPoolExecutor(len(ids)) as pool:
        own = {"Host": f"127.0.0.1:{port}"}
        assert browser_request(port, "GET", "/lines/ledger/history", own)[0] == 200  # read once
        pages = _open_all(port, ids, pool)
        next(as_completed(pages))  # one body is rendered: the others wait or render
        start = time.monotonic()
        status, body = browser_request(port, "GET", "/lines/ledger/history", own)
        took = time.monotonic() - start
        still_rendering = sum(not p.done() for p in pages)
        assert (status, f"brackets {HOSTILE_BODIES - 1}" in body) == (200, True)  # newest
        assert took < 2.0, f"the history page took {took:.1f} s behind the bodies"
        assert still_rendering > 0  # it answered while bodies were still being rendered
        assert all(p.result()[0] == 200 for p in pages)


def _cpu_seconds(pid: int) -> float:
    """The CPU time process ``pid`` has used (user and system, from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_page_of_a_hostile_body_costs_a_bounded_time(brackets: tuple[Path, list[str]]) -> None:
    root, ids = brackets
    with _viewer(root) as (port, pid), ThreadPoolExecutor(len(ids)) as pool:
        own = {"Host": f"127.0.0.1:{port}"}
        assert browser_request(port, "GET", "/lines/ledger/history", own)[0] == 200  # read once
        cpu, start = _cpu_seconds(pid), time.monotonic()
        pages = [p.result() for p in _open_all(port, ids, pool)]
        took, cpu = time.monotonic() - start, _cpu_seconds(pid) - cpu
    # Rendered whole, a body of 64,000 brackets took the viewer 0.5-0.9 s of CPU.
    assert cpu / len(ids) < 0.35, f"{len(ids)} pages of brackets took {cpu:.1f} s of CPU"
    assert took < 60, f"{len(ids)} pages of brackets took {took:.1f} s"
    for k, (status, html) in enumerate(pages):
        assert status == 200
        assert "Shown as plain text" in html, k
        assert BRACKET_SHAPES[k % len(BRACKET_SHAPES)] * 100 in html, k
