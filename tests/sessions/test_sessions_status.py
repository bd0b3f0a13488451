"""Status predicates per tool (research doc §1), the live window, and the scope key."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lifeline.sessions.ingest.service import ingest_sources, sources_in
from lifeline.sessions.model import SessionStatus, Status
from lifeline.sessions.scope import home_normalized, normalize_remote, scope_for, scope_matches
from lifeline.sessions.status import judge
from tests.support.sessions_support import (
    catalogue_of,
    claude_line,
    codex_line,
    open_ingester,
    write_jsonl,
)

PROMPT = claude_line("user", "u1", "Add rate limiting")
CALL = claude_line(
    "assistant",
    "a1",
    [
        {
            "type": "tool_use",
            "id": "t1",
            "name": "Read",
            "input": {"file_path": "/home/alice/app.py"},
        }
    ],
    stop_reason="tool_use",
)
RESULT = claude_line("user", "u2", [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}])
REPLY = claude_line("assistant", "a2", [{"type": "text", "text": "Done."}], stop_reason="end_turn")
LIMIT = claude_line(
    "assistant",
    "a3",
    [{"type": "text", "text": "You've hit your limit"}],
    isApiErrorMessage=True,
    error="rate_limit",
    apiErrorStatus=429,
)
STOP = claude_line("user", "u3", [{"type": "text", "text": "[Request interrupted by user]"}])


def _codex(*payloads: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    meta = codex_line(
        "session_meta",
        {
            "id": "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
            "cwd": "/home/alice/x",
            "cli_version": "0.144.1",
        },
    )
    return [meta, *(codex_line(kind, p) for kind, p in payloads)]


START = ("event_msg", {"type": "task_started", "turn_id": "t1"})
ASK = ("event_msg", {"type": "user_message", "message": "Add rate limiting"})
FCALL = (
    "response_item",
    {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"},
)
FOUT = ("response_item", {"type": "function_call_output", "call_id": "c1", "output": "ok"})
ANSWER = (
    "response_item",
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
)
DONE = ("event_msg", {"type": "task_complete", "turn_id": "t1"})
ABORT = ("event_msg", {"type": "turn_aborted", "turn_id": "t1", "reason": "interrupted"})


def _gemini(*messages: dict[str, Any]) -> list[dict[str, Any]]:
    head = {
        "sessionId": "3f1c9b2e-8a7d-4e6f-9b1a-2c3d4e5f6a7b",
        "projectHash": "p",
        "startTime": "2026-06-15T10:00:00.000Z",
        "kind": "main",
    }
    return [head, *messages]


G_USER = {
    "id": "m1",
    "type": "user",
    "content": [{"text": "Add rate limiting"}],
    "timestamp": "2026-06-15T10:00:01Z",
}
G_RUN = {
    "id": "m2",
    "type": "gemini",
    "content": "",
    "timestamp": "2026-06-15T10:00:02Z",
    "toolCalls": [{"id": "r1", "name": "read_file", "args": {}, "status": "executing"}],
}
G_OK = {**G_RUN, "toolCalls": [{**G_RUN["toolCalls"][0], "status": "success", "result": "x"}]}
G_REPLY = {"id": "m3", "type": "gemini", "content": "Done.", "timestamp": "2026-06-15T10:00:03Z"}

CASES = [
    ("claude", [PROMPT, CALL, RESULT, REPLY], "complete", "the last prompt was answered"),
    ("claude", [PROMPT, CALL], "crashed", "tool call Read (t1) never answered"),
    ("claude", [PROMPT], "crashed", "the last prompt got no reply"),
    ("claude", [PROMPT, LIMIT], "crashed", "stopped on an error (rate_limit 429"),
    ("claude", [PROMPT, CALL, STOP], "interrupted", "interrupted by the user"),
    ("codex", _codex(START, ASK, FCALL, FOUT, ANSWER, DONE), "complete", "answered"),
    ("codex", _codex(START, ASK, FCALL), "crashed", "turn t1 started and never completed"),
    ("codex", _codex(ASK, FCALL), "crashed", "tool call shell (c1) never answered"),
    ("codex", _codex(START, ASK, ABORT), "interrupted", "interrupted by the user"),
    ("gemini", _gemini(G_USER, G_RUN), "crashed", "tool call read_file (r1) never answered"),
    ("gemini", _gemini(G_USER, G_RUN, G_OK, G_REPLY), "complete", "answered"),
    ("gemini", _gemini(G_USER), "crashed", "the last prompt got no reply"),
    ("gemini", _gemini(G_USER, G_REPLY, {"$rewindTo": "m3"}), "crashed", "got no reply"),
]
NAMES = {
    "claude": "p/7f3c2a10-5b6e-4d2a-9c1e-0a1b2c3d4e5f.jsonl",
    "codex": "rollout-2026-06-15T10-00-00-0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.jsonl",
    "gemini": "chats/session-2026-06-15T10-00-3f1c9b2e.jsonl",
}


@pytest.mark.parametrize(("tool", "records", "status", "reason"), CASES)
async def test_status_predicates(
    tmp_path: Path, tool: str, records: list[dict[str, Any]], status: str, reason: str
) -> None:
    path = write_jsonl(tmp_path / "in" / NAMES[tool], records)
    async with open_ingester(tmp_path / "node") as ingester:
        await ingest_sources(ingester, sources_in([path]))
        cat = await catalogue_of(ingester)
    cat.now = datetime(2030, 1, 1, tzinfo=UTC)  # long after: never "live"
    (session,) = cat.summaries()
    assert session.status.status.value == status
    assert reason in session.status.reason


def test_a_recent_session_is_live_and_says_what_it_was_doing() -> None:
    stored = Status(status=SessionStatus.CRASHED, reason="tool call Bash (t1) never answered")
    now = datetime(2026, 6, 15, 10, 5, tzinfo=UTC)
    live = judge(stored, "2026-06-15T10:00:00.000Z", now, timedelta(minutes=10))
    assert live.status == SessionStatus.LIVE and "never answered" in live.reason
    assert judge(stored, "2026-06-15T09:00:00Z", now, timedelta(minutes=10)) == stored


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("git@github.com:Acme/Api.git", "github.com/acme/api"),
        ("https://github.com/acme/api", "github.com/acme/api"),
        ("https://bob:secret@github.com/acme/api.git/", "github.com/acme/api"),
        (
            "ssh://git@gitlab.example.com:2222/group/sub/repo.git",
            "gitlab.example.com/group/sub/repo",
        ),
        ("git://host.xz/path/to/repo.git", "host.xz/path/to/repo"),
    ],
)
def test_remotes_normalize_to_one_form(url: str, expected: str) -> None:
    assert normalize_remote(url) == expected


def test_home_is_written_tilde_whoever_the_user() -> None:
    assert home_normalized("/Users/alice/src/x", home="/home/zed") == "~/src/x"
    assert home_normalized("/home/bob/src/x", home="/home/zed") == "~/src/x"
    assert home_normalized("/home/zed/w", home="/home/zed") == "~/w"
    assert home_normalized("/srv/build", home="/home/zed") == "/srv/build"


def test_the_same_repository_in_two_places_is_one_scope(tmp_path: Path) -> None:
    scopes = []
    for laptop in ("alice", "bob"):
        repo = tmp_path / laptop / "code" / "api"
        (repo / "pkg" / "auth").mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        subprocess.run(
            ["git", "-C", str(repo), "remote", "add", "origin", "git@github.com:Acme/API.git"],
            check=True,
        )
        scopes.append(scope_for(str(repo / "pkg" / "auth")))
    assert scopes[0] == scopes[1] == "git:github.com/acme/api:pkg/auth"
    assert scope_matches(scopes[0], "git:github.com/acme/api:")
    assert not scope_matches(scopes[0], "git:github.com/acme/api-v2:")
    assert scope_for(str(tmp_path / "nowhere")).startswith("path:")
