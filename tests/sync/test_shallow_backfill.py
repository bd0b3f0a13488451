"""A new laptop joins shallow and `serve` deepens its line in the background (decision 0082),
through the real CLIs over mutual TLS: B joins A's mesh and takes the line shallow in one
command (`join --shallow`) and reads its context at once; then B serves (no static peer,
no discovery) while A is down — the deepening fails, B keeps serving and tries again — and
once A is back on its address B's line becomes whole: `history` shows the oldest entry,
both `verify`s are clean."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from lifeline.home import Home
from tests.support.history_lines import fill_history_line
from tests.support.mesh_procs import cli, first_line, free_ports, terminate

pytestmark = pytest.mark.slow

OLD_NOTES = 300  # the Recent section keeps the newest few: the rest is history


async def _fill(root: Path) -> None:
    await fill_history_line(root, OLD_NOTES, checkpoint=False)


def _scalar(root: Path, sql: str) -> int:
    conn = sqlite3.connect(f"file:{Home(root).line_path('ledger')}?mode=ro", uri=True)
    try:
        return int(conn.execute(sql).fetchone()[0])
    finally:
        conn.close()


def _serve(root: Path, *args: str, log: Path | None = None) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(root), "--log-format", "json",
         "serve", "--no-discovery", *args],
        stdout=subprocess.PIPE, stderr=log.open("a") if log else subprocess.DEVNULL, text=True,
    )  # fmt: skip
    first = first_line(proc, 60, "serve")
    assert first.startswith("listening on "), first
    return proc, first.split()[-1]


def _wait(what: str, check: Callable[[], bool], seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting: {what}"
        time.sleep(0.2)


def _events(log: Path) -> list[str]:
    out = []
    for line in log.read_text().splitlines():
        if line.startswith("{"):
            out.append(str(json.loads(line).get("message", "")))
    return out


@pytest.mark.timeout(600)
def test_serve_deepens_a_shallow_line_in_the_background(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()  # a new laptop: nothing but `join --shallow`
    cli("lifeline", a, "init")
    cli("lifeline_mesh", a, "share", "ledger")
    cli("lifeline_mesh", a, "init", "--new-mesh", "team")
    asyncio.run(_fill(a))
    total = _scalar(a, "SELECT count(*) FROM entries")
    sync_port, join_port = free_ports(2)
    listen = ("--listen", f"127.0.0.1:{sync_port}", "--join-listen", f"127.0.0.1:{join_port}")
    proc_a, address = _serve(a, *listen)
    try:
        token = cli("lifeline_mesh", a, "invite", "--address", f"127.0.0.1:{join_port}").stdout
        joined = cli("lifeline_mesh", b, "join", token.strip(), "--shallow", address).stdout
        assert f"line 'ledger' from {address}: shallow" in joined, joined
        assert _scalar(b, "SELECT count(*) FROM entries") < total
        assert _scalar(b, "SELECT count(*) FROM shallow_boundary") == 1
        context = cli("lifeline", b, "context").stdout  # at once, before any history
        assert "Database: PostgreSQL" in context and "Which queue for refunds?" in context
        history = cli("lifeline", b, "history")
        assert "old note 0" not in history.stdout and "is shallow" in history.stderr
        assert "`lifeline-mesh serve` deepens it in the background" in history.stderr
    finally:
        terminate(proc_a)

    log = tmp_path / "serve-b.log"
    proc_b, _ = _serve(b, "--listen", "127.0.0.1:0", log=log)
    try:  # A is down: B keeps serving, says so, and tries again
        _wait("a failed deepening", lambda: any("stopped" in m for m in _events(log)))
        assert proc_b.poll() is None
        assert _scalar(b, "SELECT count(*) FROM shallow_boundary") == 1
        proc_a, _ = _serve(a, *listen)
        try:
            _wait("B's line whole", lambda: _scalar(b, "SELECT count(*) FROM entries") == total)
            boundary = "SELECT count(*) FROM shallow_boundary"
            _wait("the boundary gone", lambda: _scalar(b, boundary) == 0)
            _wait("the log", lambda: any("whole history is here" in m for m in _events(log)))
            assert any(f"deepening it from {address}" in m for m in _events(log))
            history = cli("lifeline", b, "history")
            assert "old note 0" in history.stdout and "shallow" not in history.stderr
            verified = cli("lifeline", b, "verify")
            assert "shallow" not in verified.stdout
            signed = cli("lifeline_mesh", b, "verify", "--require-signed")
            assert "is shallow" not in signed.stdout, signed.stdout
            assert proc_b.poll() is None
        finally:
            terminate(proc_a)
    finally:
        terminate(proc_b)
