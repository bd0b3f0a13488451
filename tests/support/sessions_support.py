"""Helpers for the sessions tests: the real transcript fixtures laid out as the tools keep
them, an in-process ingester on a real SQLite line, and the CLI as a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, closing, contextmanager
from pathlib import Path
from typing import Any

from lifeline.ledger import Ledger
from lifeline.sessions.catalogue import Catalogue
from lifeline.sessions.ingest.ingester import Ingester
from lifeline.sessions.ingest.sources import SourceLedger
from lifeline.sessions.pack import Caps
from lifeline.store.sqlite import SqliteStore
from lifeline.store.sqlite_open import file_uri
from tests.support import paths
from tests.support.mesh_procs import cli

__all__ = [
    "FIXTURES",
    "claude_line",
    "codex_line",
    "lay_out_home",
    "open_ingester",
    "rate_limited_session",
    "run_cli",
    "serve_ingest_and_sync",
    "stored",
    "two_nodes",
    "watching",
    "write_jsonl",
]

FIXTURES = paths.FIXTURES / "transcripts"


def _claude_target(projects: Path, name: str) -> Path:
    """``owner__repo__[project__]X[__subagents__agent-y].jsonl`` → its place in the layout."""
    parts = name.split("__")[2:]
    if "subagents" in parts:
        i = parts.index("subagents")
        return projects / "-home-fixture" / parts[i - 1] / "subagents" / parts[i + 1]
    folder = parts[0] if len(parts) > 1 else "-home-fixture"
    return projects / folder / parts[-1]


def lay_out_home(home: Path) -> Path:
    """Copy every fixture where its tool keeps it under ``home``; returns ``home``."""
    projects = home / ".claude" / "projects"
    for path in sorted((FIXTURES / "claude-code").glob("*.jsonl")):
        target = _claude_target(projects, path.name)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    for path in sorted((FIXTURES / "codex").glob("*.jsonl")):
        name = path.name.split("__")[-1]
        if not name.startswith("rollout-"):
            name = "rollout-2026-06-05T04-58-20-0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.jsonl"
        target = home / ".codex" / "sessions" / "2026" / "06" / "05" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    for path in sorted((FIXTURES / "gemini").glob("*.jsonl")):
        target = (
            home / ".gemini" / "tmp" / "proj" / "chats" / "session-2026-04-23T12-52-0ab84937.jsonl"
        )
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return home


@asynccontextmanager
async def open_ingester(
    root: Path, *, caps: Caps | None = None, patterns: tuple[tuple[str, str], ...] = ()
) -> AsyncIterator[Ingester]:
    root.mkdir(parents=True, exist_ok=True)
    store = await SqliteStore.open(root / "sessions.db")
    sources = SourceLedger(root / "sources.db", "sessions")
    try:
        yield Ingester(Ledger(store), sources, caps=caps, patterns=patterns)
    finally:
        sources.close()
        await store.close()


async def catalogue_of(ingester: Ingester) -> Catalogue:
    return await Catalogue(ingester.store).load()


def write_jsonl(path: Path, records: list[Any], *, tail: bytes = b"") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b"".join(json.dumps(r).encode() + b"\n" for r in records) + tail
    path.write_bytes(data)
    return path


def claude_line(kind: str, uuid: str, content: Any, **extra: Any) -> dict[str, Any]:
    """One Claude Code record (user/assistant), the envelope as Claude Code writes it."""
    rec: dict[str, Any] = {
        "parentUuid": None,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/alice/src/acme-api",
        "sessionId": "7f3c2a10-5b6e-4d2a-9c1e-0a1b2c3d4e5f",
        "version": "2.1.173",
        "gitBranch": "main",
        "type": kind,
        "uuid": uuid,
        "timestamp": "2026-06-15T10:00:01.000Z",
    }
    if kind == "user":
        rec["message"] = {"role": "user", "content": content}
    else:
        rec["message"] = {
            "id": f"msg_{uuid}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": content,
            "stop_reason": extra.pop("stop_reason", None),
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
        rec["requestId"] = f"req_{uuid}"
    rec.update(extra)
    return rec


def rate_limited_session(path: Path, cwd: Path, *before: dict[str, Any]) -> Path:
    """A Claude Code session in ``cwd`` that asks, (``before``…), then hits a usage limit:
    crashed, with ``rate_limit 429`` as its reason."""
    return write_jsonl(
        path,
        [
            claude_line("user", "u1", "Add rate limiting to /login", cwd=str(cwd)),
            *before,
            claude_line(
                "assistant",
                "a9",
                [{"type": "text", "text": "You've hit your limit"}],
                isApiErrorMessage=True,
                error="rate_limit",
                apiErrorStatus=429,
                cwd=str(cwd),
            ),
        ],
    )


def codex_line(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": "2026-06-15T10:00:00.000Z", "type": kind, "payload": payload}


def run_cli(
    root: Path, *args: str, home: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if home is not None:
        env["HOME"] = str(home)
        env.pop("CODEX_HOME", None)
        env.pop("CLAUDE_CONFIG_DIR", None)
    return subprocess.run(
        [sys.executable, "-m", "lifeline", "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )


def stored(root: Path) -> bytes:
    """Every byte of the files under ``root/.lifeline``, then every row of their SQLite
    tables as SQLite gives it back: a string longer than a page's room is cut where its
    overflow page begins, so the files alone may hold neither a kept text nor a leaked
    secret whole."""
    found = [p for p in sorted((root / ".lifeline").rglob("*")) if p.is_file()]
    out = [p.read_bytes() for p in found]
    for path in found:
        if path.suffix not in (".db", ".sqlite"):
            continue
        with closing(sqlite3.connect(path)) as conn:
            names = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
            for (table,) in names:
                for row in conn.execute(f'SELECT * FROM "{table}"'):
                    out += [c if isinstance(c, bytes) else str(c).encode() for c in row]
    return b"\n".join(out)


def _statuses(line_file: Path) -> int:
    if not line_file.exists():
        return 0
    conn = sqlite3.connect(file_uri(line_file, "ro"), uri=True, timeout=5)
    try:
        row = conn.execute("SELECT count(*) FROM entries WHERE kind = 'session-status'")
        return int(row.fetchone()[0])
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()


def two_nodes(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Laptops A and B sharing the sessions line (A starts the mesh), and A's HOME."""
    a, b, home = tmp_path / "a", tmp_path / "b", tmp_path / "home"
    for root in (a, b):
        root.mkdir()
        cli("lifeline_mesh", root, "share", "sessions")
    cli("lifeline_mesh", a, "init", "--new-mesh", "team")
    return a, b, home


def serve_ingest_and_sync(a: Path, b: Path, home: Path) -> None:
    """`serve --sessions` on A until its watcher has ingested; B joins and syncs from A."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(a), "serve", "--sessions"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HOME": str(home)},
    )
    try:
        assert proc.stdout is not None
        address = proc.stdout.readline().split()[-1]
        join_address = proc.stdout.readline().split()[-1]
        invite = cli("lifeline_mesh", a, "invite", "--address", join_address).stdout.strip()
        cli("lifeline_mesh", b, "join", invite)
        deadline = time.monotonic() + 60
        while _statuses(a / ".lifeline" / "sessions.db") == 0:  # the watcher's first pass
            assert time.monotonic() < deadline, "serve --sessions ingested nothing in 60 s"
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
        cli("lifeline_mesh", b, "sync", address, "--line", "sessions")
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0


@contextmanager
def watching(root: Path, home: Path, *, seconds: float = 90) -> Iterator[subprocess.Popen[str]]:
    """`lifeline sessions watch --all --interval 0.2` on ``root`` with ``HOME`` at ``home``,
    its output piped; killed after ``seconds`` (a hung watcher fails the test, never the
    suite) or when the block ends."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "lifeline", "--root", str(root), "sessions", "watch", "--all",
         "--interval", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "HOME": str(home)},
    )  # fmt: skip
    timer = threading.Timer(seconds, proc.kill)
    timer.start()
    try:
        yield proc
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
