"""Session identity and numbers on the real transcripts, through the CLI: ids depend on the
transcript's content and the tool's own ids only, and stored token totals equal the
transcript's own final totals."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

from lifeline.ledger import Draft, Ledger
from lifeline.sessions.pack import FORMAT
from lifeline.store.sqlite import SqliteStore
from tests.support.sessions_support import FIXTURES, lay_out_home, run_cli

SPOTTER = "258c7280-ae70-4798-800f-63464d01a85d"
MODIFIED = FIXTURES.parent / "modified-transcripts"
BIG = FIXTURES / "claude-code" / f"marot__spotter__{SPOTTER}.jsonl"


def _entries(root: Path, kind: str | None = None) -> dict[str, str]:
    conn = sqlite3.connect(root / ".lifeline" / "sessions.db")
    try:
        rows = conn.execute(
            "SELECT id, body FROM entries" + (" WHERE kind = ?" if kind else ""),
            (kind,) if kind else (),
        ).fetchall()
    finally:
        conn.close()
    return dict(rows)


def _ingest(root: Path, *args: str, home: Path | None = None) -> dict[str, Any]:
    root.mkdir(parents=True, exist_ok=True)
    done = run_cli(root, "sessions", "ingest", *args, "--json", home=home)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _listed(root: Path) -> list[dict[str, Any]]:
    done = run_cli(root, "sessions", "list", "--json")
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    return rows


def test_a_claude_session_has_one_id_whatever_its_project_folder(tmp_path: Path) -> None:
    """Claude Code names the project folder after the absolute working folder, so the
    same session copied to another machine (another user) sits in another folder."""
    ids = []
    for user, folder in (("alice", "-home-alice-src-spotter"), ("bob", "-Users-bob-work-spotter")):
        home = tmp_path / user
        target = home / ".claude" / "projects" / folder / f"{SPOTTER}.jsonl"
        target.parent.mkdir(parents=True)
        shutil.copyfile(BIG, target)
        root = tmp_path / f"{user}-project"
        _ingest(root, "--all", home=home)
        headers = _entries(root, "session")
        assert len(headers) == 1
        assert not any(user in body or folder in body for body in headers.values())
        rows = _listed(root)
        assert [r["source"] for r in rows] == [f"{SPOTTER}.jsonl"]
        ids.append(sorted(_entries(root)))
    assert ids[0] == ids[1]  # header, parts and status: the same entries on both machines


def test_incremental_and_one_shot_ingests_write_the_same_parts(tmp_path: Path) -> None:
    lines = BIG.read_bytes().splitlines(keepends=True)
    live = tmp_path / "live" / f"{SPOTTER}.jsonl"
    live.parent.mkdir()
    grown = tmp_path / "grown"
    for count in (300, 700, 1200, len(lines)):  # a live session read as it grows
        live.write_bytes(b"".join(lines[:count]))
        _ingest(grown, str(live))
    once = tmp_path / "once"
    _ingest(once, str(live))
    closed = set(_entries(once, "session-part")) | set(_entries(once, "session"))
    assert closed <= set(_entries(grown))  # the one-shot parts are among the grown ones

    for extra in ("", "-wal", "-shm"):  # the bookkeeping lost: reading again adds nothing
        (grown / ".lifeline" / f"sessions-sources.sqlite{extra}").unlink(missing_ok=True)
    before = set(_entries(grown))
    again = _ingest(grown, str(live))
    assert again["entries"] == 0 and set(_entries(grown)) == before


def test_bookkeeping_of_an_older_format_reads_every_file_again(tmp_path: Path) -> None:
    root = tmp_path / "p"
    _ingest(root, str(FIXTURES / "codex"))
    assert _ingest(root, str(FIXTURES / "codex"))["unchanged"] == 2
    conn = sqlite3.connect(root / ".lifeline" / "sessions-sources.sqlite")
    with conn:
        conn.execute("UPDATE formats SET format = ?", (FORMAT - 1,))
    conn.close()
    again = _ingest(root, str(FIXTURES / "codex"))
    assert again["unchanged"] == 0 and again["sessions"] == 2


def _claude_totals(path: Path) -> dict[str, int]:
    last: dict[str, dict[str, Any]] = {}
    for raw in path.read_bytes().splitlines():
        try:
            rec = json.loads(raw)
        except ValueError:
            continue
        message = rec.get("message") if isinstance(rec, dict) else None
        usage = message.get("usage") if isinstance(message, dict) else None
        if rec.get("type") == "assistant" and isinstance(message, dict) and isinstance(usage, dict):
            last[f"{message.get('id')}:{rec.get('requestId')}"] = usage
    names = {
        "input": "input_tokens",
        "output": "output_tokens",
        "cache_read": "cache_read_input_tokens",
        "cache_write": "cache_creation_input_tokens",
    }
    totals = {k: sum(int(u.get(v) or 0) for u in last.values()) for k, v in names.items()}
    return {k: v for k, v in totals.items() if v}


def _codex_totals(path: Path) -> dict[str, int]:
    total: dict[str, int] = {}
    for raw in path.read_bytes().splitlines():
        rec = json.loads(raw)
        info = (rec.get("payload") or {}).get("info") if rec.get("type") == "event_msg" else None
        if isinstance(info, dict) and isinstance(info.get("total_token_usage"), dict):
            total = info["total_token_usage"]
    names = {
        "input": "input_tokens",
        "output": "output_tokens",
        "cache_read": "cached_input_tokens",
        "reasoning": "reasoning_output_tokens",
    }
    return {k: int(total[v]) for k, v in names.items() if total.get(v)}


def _gemini_totals(path: Path) -> dict[str, int]:
    messages: dict[str, dict[str, Any]] = {}
    for raw in path.read_bytes().splitlines():
        rec = json.loads(raw)
        if isinstance(rec.get("id"), str) and "type" in rec:
            messages[rec["id"]] = rec
    names = {"input": "input", "output": "output", "cache_read": "cached", "reasoning": "thoughts"}
    tokens = [m["tokens"] for m in messages.values() if isinstance(m.get("tokens"), dict)]
    totals = {k: sum(int(t.get(v) or 0) for t in tokens) for k, v in names.items()}
    return {k: v for k, v in totals.items() if v}


def test_stored_token_totals_are_the_transcripts_own(tmp_path: Path) -> None:
    root = tmp_path / "p"
    tools = [FIXTURES / tool for tool in ("claude-code", "codex", "gemini")]
    _ingest(root, *map(str, tools))
    rows = {r["source"]: r for r in _listed(root)}
    checked = 0
    for path in sorted(p for tool in tools for p in tool.glob("*.jsonl")):
        row = rows.get(path.name)
        if row is None:
            continue
        tool = path.parent.name
        expected = (
            _claude_totals(path)
            if tool == "claude-code"
            else _codex_totals(path)
            if tool == "codex"
            else _gemini_totals(path)
        )
        got = {k: v for k, v in row["usage"].items() if v}
        assert got == expected, path.name
        checked += bool(expected)
    assert checked >= 15
    # the figures of the finding: Codex input once, not twice; Claude's last chunk
    codex = rows[next(n for n in rows if n.startswith("AcidicSoil"))]
    assert codex["usage"]["input"] == 1_099_261
    assert rows[BIG.name]["usage"]["output"] == 38_899
    shown = run_cli(root, "sessions", "show", codex["id"])
    assert "input 1,099,261" in shown.stdout


def _git_checkout(root: Path, remote: str) -> Path:
    root.mkdir(parents=True)
    for args in (["init", "-q"], ["remote", "add", "origin", remote]):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)
    return root


def test_default_ingest_takes_this_repositorys_codex_sessions_from_another_checkout(
    tmp_path: Path,
) -> None:
    """The real rollout ran in /home/user/projects/temp/chatbot-ui, a checkout of
    AcidicSoil/chatbot-ui; this project is another checkout of that repository."""
    home = lay_out_home(tmp_path / "home")
    root = _git_checkout(tmp_path / "elsewhere" / "ui", "https://github.com/AcidicSoil/chatbot-ui")
    done = _ingest(root, home=home)
    assert done["sessions"] == 1 and done["out_of_scope"] == 21
    rows = json.loads(run_cli(root, "sessions", "list", "--scope", ".", "--json").stdout)
    assert [(r["tool"], r["scope"]) for r in rows] == [
        ("codex", "git:github.com/acidicsoil/chatbot-ui:")
    ]


def _gemini_legacy(home: Path, folder: str, project_hash: str | None = None) -> Path:
    """The legacy chat where Gemini CLI keeps it; ``project_hash``: the sha256 of the
    project folder it ran in, which the tool writes in the file and names the folder by."""
    chats = home / ".gemini" / "tmp" / folder / "chats"
    chats.mkdir(parents=True)
    target = chats / "session-2026-04-23T12-52-0ab84937.json"
    doc = json.loads((MODIFIED / "gemini-legacy-session.json").read_text())
    if project_hash is not None:
        doc["projectHash"] = project_hash
    target.write_text(json.dumps(doc, ensure_ascii=False, indent=2))
    return target


def test_gemini_legacy_sessions_are_linked_to_their_project(tmp_path: Path) -> None:
    """Gemini CLI keeps a legacy chat under tmp/<sha256 of the project folder>/, or under a
    short name that ~/.gemini/projects.json maps to the folder; neither file names the
    folder itself."""
    by_registry = tmp_path / "one" / "project"
    by_registry.mkdir(parents=True)
    home = tmp_path / "one" / "home"
    _gemini_legacy(home, "project")
    (home / ".gemini" / "projects.json").write_text(
        json.dumps({"projects": {str(by_registry): "project"}})
    )
    by_hash = tmp_path / "two" / "project"
    by_hash.mkdir(parents=True)
    home_two = tmp_path / "two" / "home"
    digest = hashlib.sha256(str(by_hash).encode()).hexdigest()
    _gemini_legacy(home_two, digest, digest)
    for root, its_home in ((by_registry, home), (by_hash, home_two)):
        done = _ingest(root, home=its_home)
        assert done["sessions"] == 1 and done["out_of_scope"] == 0, root
        rows = json.loads(run_cli(root, "sessions", "list", "--scope", ".", "--json").stdout)
        assert len(rows) == 1 and rows[0]["tool"] == "gemini"
        assert rows[0]["scope"] == "path:" + str(root)


async def test_readers_show_a_session_by_its_newest_format(tmp_path: Path) -> None:
    """Entries an older format wrote for a session stay in the line; once the file is
    ingested again in this format, only the new ones are shown (decision 0053)."""
    root = tmp_path / "p"
    rollout = FIXTURES / "codex" / "kvsankar__agent-history__real_sessions__codex__session-01.jsonl"
    _ingest(root, str(rollout))
    (row,) = _listed(root)
    old = {  # what format 1 wrote: the header named the file, and its status pointed at it
        "v": 1,
        "tool": "codex",
        "session": row["native_id"],
        "source": rollout.name,
        "first": None,
    }
    store = await SqliteStore.open(root / ".lifeline" / "sessions.db")
    try:
        ledger = Ledger(store)
        header, _ = await ledger.append(
            Draft(
                kind="session",
                summary=f"codex session {row['native_id']}",
                body=json.dumps(old, sort_keys=True, separators=(",", ":")),
                author="lifeline-sessions",
                agent="codex",
                provider="none",
                model="none",
            )
        )
    finally:
        await store.close()
    rows = _listed(root)
    assert [r["id"] for r in rows] == [row["id"]]  # the format-1 header is superseded
    assert header.id != row["id"] and header.id in _entries(root, "session")
    shown = run_cli(root, "sessions", "show", header.id[:12])
    assert shown.returncode == 2 and "no session" in shown.stderr


def _rollout_with_remote(path: Path, remote: str) -> Path:
    """A Codex rollout whose first line (session_meta) records ``remote``, credentials and
    all, as Codex copies it from the checkout's ``origin``."""
    meta = {
        "id": "019a93b9-f380-7600-98ff-940e6b99603e",
        "timestamp": "2025-11-17T21:30:28.608Z",
        "cwd": "/srv/api",
        "originator": "codex_cli_rs",
        "cli_version": "0.58.0",
        "git": {"commit_hash": "0f022a04", "branch": "main", "repository_url": remote},
    }
    lines = [
        {"timestamp": "2025-11-17T21:30:28.664Z", "type": "session_meta", "payload": meta},
        {
            "timestamp": "2025-11-17T21:30:29.000Z",
            "type": "event_msg",
            "payload": {"type": "user_message", "message": "please fix the failing build in ci"},
        },
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in lines))
    return path


def test_the_header_holds_no_function_of_a_secret_in_the_first_line(tmp_path: Path) -> None:
    """Decision 0113: the header's ``first`` was the sha256 of the raw first line, which a
    Codex rollout fills with ``https://user:password@host/…``; with the facts every node
    holds, a guess of the password could be tested offline. It is the hash of the line as
    redacted: two rollouts that differ only in that password have one header."""
    headers = []
    for n, password in enumerate(("tulip42", "correct-horse-battery")):
        name = "rollout-2025-11-17T21-30-28-019a93b9-f380-7600-98ff-940e6b99603e.jsonl"
        path = _rollout_with_remote(
            tmp_path / f"in{n}" / name, f"https://deploy:{password}@git.example.com/acme/api.git"
        )
        root = tmp_path / f"p{n}"
        _ingest(root, "--tool", "codex", str(path))
        ((header_id, body),) = _entries(root, "session").items()
        raw_first = path.read_bytes().splitlines(keepends=True)[0]
        assert json.loads(body)["first"] != hashlib.sha256(raw_first).hexdigest()
        assert password.encode() not in b"".join(
            p.read_bytes() for p in (root / ".lifeline").iterdir() if p.is_file()
        )
        headers.append((header_id, body))
    assert headers[0] == headers[1]
