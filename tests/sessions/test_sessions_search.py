"""`lifeline sessions search` on real transcripts of Claude Code, Codex and Gemini: hits are
messages and tool calls that `sessions show --offset` opens; only redacted text is found;
the index follows a growing transcript without stale or doubled rows, and equals one built
from nothing."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.support.sessions_support import FIXTURES, claude_line, run_cli, write_jsonl

TOOLS = [FIXTURES / tool for tool in ("claude-code", "codex", "gemini")]
BIG = FIXTURES / "claude-code" / "marot__spotter__258c7280-ae70-4798-800f-63464d01a85d.jsonl"


def _json(root: Path, *args: str) -> Any:
    done = run_cli(root, "sessions", *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _replies(lines: list[bytes]) -> list[str]:
    texts = []
    for raw in lines:
        rec = json.loads(raw)
        content = (
            (rec.get("message") or {}).get("content") if rec.get("type") == "assistant" else []
        )
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "text":
                texts.append(str(block.get("text", "")))
    return texts


def _item_text(item: dict[str, Any]) -> str:
    return json.dumps(item, ensure_ascii=False).casefold()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("search") / "p"
    root.mkdir()
    _json(root, "ingest", *map(str, TOOLS))
    return root


def test_a_prompt_of_each_tool_is_found_and_opened_by_its_offset(project: Path) -> None:
    sessions = _json(project, "list")
    for tool in ("claude", "codex", "gemini"):
        prompt = next(
            s["facts"]["first_prompt"]
            for s in sessions
            if s["tool"] == tool and len(s["facts"].get("first_prompt") or "") > 20
        )
        words = sorted(re.findall(r"[A-Za-z]{5,}", prompt), key=len, reverse=True)[:3]
        hits = _json(project, "search", " ".join(words), "--tool", tool, "--role", "user")
        assert hits, (tool, words)
        best = hits[0]
        assert best["tool"] == tool and best["role"] == "user" and best["score"] == 1.0
        assert all(w.casefold() in best["excerpt"].casefold() for w in words[:1])
        offset = str(best["offset"])
        page = _json(project, "show", best["session"][:12], "--offset", offset, "--limit", "1")
        (item,) = page["items"]
        assert item["kind"] == "prompt" and all(w.casefold() in _item_text(item) for w in words)


def test_tool_calls_are_hits_with_their_name(project: Path) -> None:
    hits = _json(project, "search", "apply_patch", "--tool", "codex", "--limit", "5")
    assert hits and all(h["tool"] == "codex" for h in hits)
    call = next(h for h in hits if h["role"] == "tool_call")
    page = _json(project, "show", call["session"], "--offset", str(call["offset"]), "--limit", "1")
    assert page["items"][0]["kind"] == "tool_call"
    assert "apply_patch" in _item_text(page["items"][0])
    text = run_cli(project, "sessions", "search", "apply_patch", "--limit", "2").stdout
    assert "tool_call:" in text and "--offset" in text
    nothing = run_cli(project, "sessions", "search", "zzqqxxnotaword")
    assert nothing.returncode == 0 and "no message matches" in nothing.stdout
    since = _json(project, "search", "apply_patch", "--since", "2099-01-01")
    assert since == []


def test_only_the_redacted_text_is_searched(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    secret = "Zq8vR2mK9xLp4Tw7"
    session = write_jsonl(
        tmp_path / "s" / "7f3c2a10-5b6e-4d2a-9c1e-0a1b2c3d4e5f.jsonl",
        [
            claude_line("user", "u1", f"deploy the gizmo with password={secret} please"),
            claude_line("assistant", "a1", [{"type": "text", "text": "Deploying the gizmo."}]),
        ],
    )
    _json(root, "ingest", "--tool", "claude", str(session))
    assert _json(root, "search", secret) == []
    (hit,) = _json(root, "search", "gizmo password", "--role", "user")
    assert "[REDACTED:" in hit["excerpt"] and secret not in json.dumps(hit)
    index = root / ".lifeline" / "sessions.sessions-index.sqlite"
    assert index.exists() and secret.encode() not in index.read_bytes()
    assert index.stat().st_mode & 0o077 == 0  # the owner's only


def test_the_index_follows_a_growing_transcript(tmp_path: Path) -> None:
    raw = BIG.read_bytes().splitlines(keepends=True)
    cut = len(raw) // 3
    said = " ".join(_replies(raw[cut:]))
    early = b"".join(raw[:cut]).decode().casefold()
    later = next(  # a word a later reply says and the first third does not
        w for w in sorted(set(re.findall(r"\b[a-z]{9,}\b", said))) if w not in early
    )
    growing = tmp_path / "grow" / BIG.name
    growing.parent.mkdir()
    growing.write_bytes(b"".join(raw[:cut]))
    root = tmp_path / "p"
    root.mkdir()
    _json(root, "ingest", "--tool", "claude", str(growing))
    assert _json(root, "search", later) == []
    before = _json(root, "usage", "--by", "session")["total"]["tokens"]["total"]
    with growing.open("ab") as handle:
        handle.writelines(raw[cut:])
    _json(root, "ingest", "--tool", "claude", str(growing))
    grown = _json(root, "search", later, "--limit", "50")
    assert grown and all(later in h["excerpt"].casefold() for h in grown[:1])
    usage = _json(root, "usage", "--by", "session")["total"]["tokens"]["total"]
    assert usage > before

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    shutil.copy(BIG, tmp_path / BIG.name)
    _json(fresh, "ingest", "--tool", "claude", str(tmp_path / BIG.name))
    assert _json(fresh, "search", later, "--limit", "50") == grown  # no stale or doubled rows
    assert _json(fresh, "usage", "--by", "session")["total"]["tokens"]["total"] == usage
    common = _json(root, "search", "the test", "--limit", "200")
    assert common == _json(fresh, "search", "the test", "--limit", "200")

    for name in ("sessions.sessions-index.sqlite", "sessions.sessions-index.sqlite-wal"):
        (root / ".lifeline" / name).unlink(missing_ok=True)  # a cache: rebuilt when read
    (root / ".lifeline" / "sessions.sessions-index.sqlite-shm").unlink(missing_ok=True)
    assert _json(root, "search", "the test", "--limit", "200") == common


def test_a_replaced_line_is_indexed_again(tmp_path: Path) -> None:
    """The line deleted and filled again from another transcript, up to the same row
    count: the index of the first must not answer for the second."""
    root = tmp_path / "p"
    root.mkdir()
    line = root / ".lifeline" / "sessions.db"

    def session(native: str, word: str, tokens: int) -> Path:
        first = claude_line("user", "u1", f"please handle the {word} case", sessionId=native)
        reply = claude_line("assistant", "a1", [{"type": "text", "text": f"{word} handled"}])
        reply["sessionId"] = native
        reply["message"]["usage"] = {"input_tokens": tokens, "output_tokens": 7}
        return write_jsonl(tmp_path / native / f"{native}.jsonl", [first, reply])

    one = session("11111111-1111-1111-1111-111111111111", "walrus", 1000)
    two = session("22222222-2222-2222-2222-222222222222", "pelican", 2000)
    _json(root, "ingest", "--tool", "claude", str(one))
    assert _json(root, "search", "walrus")
    rows = sqlite3.connect(line).execute("SELECT count(*) FROM entries").fetchone()[0]
    for name in ("sessions.db", "sessions.db-wal", "sessions.db-shm"):
        (root / ".lifeline" / name).unlink(missing_ok=True)
    _json(root, "ingest", "--tool", "claude", str(two))
    assert sqlite3.connect(line).execute("SELECT count(*) FROM entries").fetchone()[0] == rows
    assert _json(root, "search", "walrus") == []
    (hit,) = _json(root, "search", "pelican", "--role", "user")
    assert hit["native_id"] == "22222222-2222-2222-2222-222222222222"
    total = _json(root, "usage", "--by", "tool")["total"]["tokens"]
    assert (total["input"], total["output"]) == (2000, 7)
