"""A session that crashed on laptop A is resumed on laptop B after a real sync (serve,
join and sync subprocesses, mutual TLS): B's bundle is byte-identical to A's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.sessions_support import (
    claude_line,
    rate_limited_session,
    run_cli,
    serve_ingest_and_sync,
    two_nodes,
)

pytestmark = pytest.mark.slow
TODOS = {
    "todos": [
        {"content": "Add the limiter middleware", "status": "completed"},
        {"content": "Write the 429 test", "status": "in_progress"},
    ]
}


def test_a_session_crashed_on_a_resumes_on_b_with_the_same_bundle(tmp_path: Path) -> None:
    a, b, home = two_nodes(tmp_path)
    call = {"type": "tool_use", "id": "t1", "name": "TodoWrite", "input": TODOS}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}
    rate_limited_session(
        home / ".claude" / "projects" / "-a" / "7f3c2a10-5b6e-4d2a-9c1e-0a1b2c3d4e5f.jsonl",
        a,
        claude_line("user", "u2", "Never touch db.py.", cwd=str(a)),
        claude_line("assistant", "a1", [call], cwd=str(a)),
        claude_line("user", "u3", [result], cwd=str(a)),
    )
    serve_ingest_and_sync(a, b, home)
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
