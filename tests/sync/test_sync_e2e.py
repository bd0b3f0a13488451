"""End to end: real `lifeline-mesh serve` subprocesses, `lifeline` and `lifeline-mesh` CLIs."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lifeline.home import Home
from lifeline.store.sqlite import SqliteStore
from tests.support.mesh_procs import SYNC_JSON, cli, serve_insecure
from tests.support.recon_helpers import chain


def init(root: Path, *summaries: str) -> None:
    root.mkdir(parents=True, exist_ok=True)
    cli("lifeline", root, "init")
    cli("lifeline_mesh", root, "share", "ledger")
    for s in summaries:
        cli("lifeline", root, "log", "--kind", "decision", "--summary", s, "--author", "t")


def history(root: Path) -> str:
    return cli("lifeline", root, "history", "--json").stdout


@pytest.mark.slow
def test_two_processes_sync_and_render_identical_history(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    init(a, "Database: PostgreSQL", "Queue: none")
    init(b, "Cache: redis")
    with serve_insecure(b) as (proc, address):
        # written by another process while the server runs: must be seen by the next session
        cli("lifeline", b, "log", "--kind", "fix", "--summary", "late write", "--author", "t")
        out = json.loads(cli("lifeline_mesh", a, *SYNC_JSON, address).stdout)
        assert out[0]["entries_sent"] == 2 and out[0]["entries_received"] == 2
        assert history(a) == history(b) and "late write" in history(a)
        again = json.loads(cli("lifeline_mesh", a, *SYNC_JSON, address).stdout)[0]
        # One round trip and < 200 bytes each way (DESIGN §10) with three sets
        # (attestations, statements, entries): the opening travels in the hello.
        assert again["round_trips"] == 1
        assert again["bytes_sent"] < 200 and again["bytes_received"] < 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert proc.stdout is not None
        assert "stopped after 2 sessions in (0 failed) and 0 syncs out" in proc.stdout.read()
    lines = json.loads(cli("lifeline_mesh", a, "lines", "--json").stdout)
    assert lines == [{"line": "ledger", "shared": True}]


@pytest.mark.slow
def test_unshared_line_is_refused_end_to_end(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    init(a, "written-on-a")
    init(b, "written-on-b")
    cli("lifeline_mesh", b, "unshare", "ledger")
    with serve_insecure(b) as (_, address):
        proc = cli("lifeline_mesh", a, "sync", address, "--insecure", check=False)
    assert proc.returncode == 2
    assert "not shared by the node serving there" in proc.stderr and "Traceback" not in proc.stderr
    assert [e["summary"] for e in json.loads(history(b))] == ["written-on-b"]


def _count(path: Path) -> int:
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as conn:
            return int(conn.execute("SELECT count(*) FROM entries").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


async def _fill(root: Path, n: int) -> None:
    store = await SqliteStore.open(Home(root).line_path("ledger"))
    try:
        entries = chain(n, "bulk", body="k" * 900)
        for k in range(0, n, 5000):
            await store.append_many(entries[k : k + 5000])
    finally:
        await store.close()


@pytest.mark.slow
async def test_sigkill_mid_sync_leaves_an_intact_store_that_converges(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    init(a)
    init(b)
    total = 20_000
    await _fill(a, total)
    db = Home(b).line_path("ledger")
    with serve_insecure(b) as (proc, address):
        client = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "lifeline_mesh",
                "sync",
                address,
                "--insecure",
                "--root",
                str(a),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while _count(db) == 0 and time.monotonic() < deadline:
            time.sleep(0.01)  # polling a condition, not a timed wait
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        client.wait(timeout=60)
    stored = _count(db)
    assert 0 < stored < total, stored
    assert client.returncode == 2
    verify = cli("lifeline", b, "verify", check=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    with serve_insecure(b) as (_, address):
        report = json.loads(
            cli("lifeline_mesh", a, "sync", address, "--insecure", "--json").stdout
        )[0]
    assert report["entries_added"] == 0 and report["entries_sent"] == total - stored
    assert history(a) == history(b)
