"""A session that crashed on laptop A is resumed on laptop B after a real sync (serve,
join and sync subprocesses, mutual TLS): B's bundle is byte-identical to A's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.mesh_procs import cli
from tests.sessions_support import claude_line, run_cli, write_jsonl
from tests.test_sessions_mesh import _statuses

pytestmark = pytest.mark.slow
PROMPT = "Add rate limiting to /login. Never touch db.py"


def _crashed_session(home: Path, cwd: Path) -> None:
    todos = {
        "todos": [
            {"content": "Add the limiter middleware", "status": "completed"},
            {"content": "Write the 429 test", "status": "in_progress"},
        ]
    }
    write_jsonl(
        home / ".claude" / "projects" / "-a" / "7f3c2a10-5b6e-4d2a-9c1e-0a1b2c3d4e5f.jsonl",
        [
            claude_line(
                "user", "u1", "Add rate limiting to /login. Never touch db.py", cwd=str(cwd)
            ),
            claude_line(
                "assistant",
                "a1",
                [{"type": "tool_use", "id": "t1", "name": "TodoWrite", "input": todos}],
                cwd=str(cwd),
            ),
            claude_line(
                "user",
                "u2",
                [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
                cwd=str(cwd),
            ),
            claude_line(
                "assistant",
                "a2",
                [{"type": "text", "text": "You've hit your limit"}],
                isApiErrorMessage=True,
                error="rate_limit",
                apiErrorStatus=429,
                cwd=str(cwd),
            ),
        ],
    )


def test_a_session_crashed_on_a_resumes_on_b_with_the_same_bundle(tmp_path: Path) -> None:
    a, b, home = tmp_path / "a", tmp_path / "b", tmp_path / "home"
    for root in (a, b):
        root.mkdir()
        cli("lifeline_mesh", root, "share", "sessions")
    cli("lifeline_mesh", a, "init", "--new-mesh", "team")
    _crashed_session(home, a)
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
        while _statuses(a / ".lifeline" / "sessions.db") == 0:
            assert time.monotonic() < deadline, "serve --sessions ingested nothing in 60 s"
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
        cli("lifeline_mesh", b, "sync", address, "--line", "sessions")
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0
    lost = json.loads(run_cli(b, "sessions", "unfinished", "--json").stdout)
    assert [u["state"] for u in lost] == ["crashed"]
    assert lost[0]["outstanding"]["outstanding"] == ["Write the 429 test"]
    ref = lost[0]["id"]
    for fmt in ("md", "json"):
        on_a = run_cli(a, "sessions", "resume", ref, "--format", fmt, "--budget-tokens", "900")
        on_b = run_cli(b, "sessions", "resume", ref, "--format", fmt, "--budget-tokens", "900")
        assert on_a.returncode == on_b.returncode == 0, on_a.stderr + on_b.stderr
        assert on_a.stdout == on_b.stdout
    bundle = json.loads(on_b.stdout)
    contract = next(s for s in bundle["slices"] if s["kind"] == "contract")
    assert [f["text"] for f in contract["groups"]["do_not_touch"]] == ["db.py"]
    assert "rate_limit 429" in json.dumps(bundle)
