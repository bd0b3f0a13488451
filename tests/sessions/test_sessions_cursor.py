"""Cursor IDE chats from ``state.vscdb``: composer chats (bubbles in rows, or inline), the
chat panel's tabs, each chat's project folder, statuses, incremental passes, a locked
database, redaction."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from lifeline.sessions.ingest.ingester import Ingester
from lifeline.sessions.ingest.service import default_sources, ingest_sources, sources_in
from lifeline.sessions.model import (
    Context,
    FileEdit,
    Prompt,
    Session,
    SessionStatus,
    Thinking,
    Tool,
    ToolResult,
)
from lifeline.sessions.scope import scope_for
from tests.support.agent_dbs import cursor_user_folder
from tests.support.paths import FIXTURES
from tests.support.sessions_support import catalogue_of, open_ingester

WORKSPACE = "8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e"
ACTIVE = "98251e54-8aed-4515-b2b4-08895453eedd"
EMPTY = "fbd30712-94fd-48d3-b674-ed162dbf56ab"
INLINE = "5c0b3f0e-2f71-4c55-9a53-6d1f0d8e7b21"
ERRORED = "e1a7d2c4-8b36-4f0a-9d5e-2c7b9a1f4e60"
TAB = "2c9e4b7a-5d3f-4e1a-8b6c-0f2d4a6e8c1b"
SECRET = "ghp_" + "R8mZk2Lq7VwXy4Tn9Pb3Hc6Jd1Fs5Ga0Ue2Q"


def _layout(tmp_path: Path) -> tuple[Path, Path]:
    home, project = tmp_path / "home", tmp_path / "acme-api"
    project.mkdir()
    cursor_user_folder(home / ".config" / "Cursor" / "User", {WORKSPACE: project})
    return home, project


async def _sessions(ingester: Ingester) -> dict[str, Session]:
    cat = await catalogue_of(ingester)
    return {s.native_id: await cat.session(s.id) for s in cat.summaries()}


async def test_chats_with_folder_status_calls_and_tokens(tmp_path: Path) -> None:
    home, project = _layout(tmp_path)
    found = default_sources(tools=[Tool.CURSOR], env={}, home=home)
    assert sorted(s.key for _, s in found) == sorted(
        [f"composerData:{c}" for c in (ACTIVE, INLINE, ERRORED)] + [f"chatdata:{TAB}"]
    )  # the composer opened and never used is no session
    async with open_ingester(tmp_path / "node") as ingester:
        report = await ingest_sources(ingester, found)
        sessions = await _sessions(ingester)
        bodies = [e.body async for e in ingester.store.stream()]
    assert report.failures == [] and report.sessions == 4
    active = sessions[ACTIVE]
    # the workspace that lists the composer names its folder (workspace.json)
    assert active.scope == scope_for(str(project), None)
    assert active.facts.title == "Login rate limit" and active.facts.git_branch == "main"
    assert active.facts.started == "2025-12-25T19:35:08.486Z"
    assert active.status.status == SessionStatus.COMPLETE
    assert any(isinstance(i, Thinking) for i in active.items)
    (pair,) = active.tool_calls()
    assert pair.call.name == "edit_file_v2" and pair.call.input == {
        "relativeWorkspacePath": "app/auth.py"
    }
    assert isinstance(pair.result, ToolResult) and not pair.result.is_error
    assert [e.path for e in active.items if isinstance(e, FileEdit)] == ["app/auth.py"]
    assert active.usage == {"input": 16800, "output": 240}  # the bubbles' tokenCount
    # redacted before it was stored
    prompt = next(i for i in active.items if isinstance(i, Prompt))
    assert "[REDACTED:github-token]" in prompt.text
    assert not any(SECRET in body for body in bodies)

    inline = sessions[INLINE]  # an older composer: bubbles inline, stopped by the user
    assert inline.status.status == SessionStatus.INTERRUPTED and inline.turns == 2
    errored = sessions[ERRORED]  # not listed by a workspace: its own workspaceIdentifier
    assert errored.facts.cwd == "~/other-project"
    assert errored.status.status == SessionStatus.CRASHED
    assert errored.skipped == {"bubble not found": 1}
    # a prompt with no plain text: the text of its rich-text editor state
    assert [i.text for i in errored.items if isinstance(i, Prompt)] == [
        "why does test_login flake on CI?"
    ]
    tab = sessions[TAB]  # the old chat panel of the workspace
    assert tab.turns == 1 and tab.status.status == SessionStatus.COMPLETE
    assert tab.facts.title == "Where is the session cookie set?"
    assert tab.scope == scope_for(str(project), None)


async def test_only_the_project_chats_and_only_what_changed(tmp_path: Path) -> None:
    home, project = _layout(tmp_path)
    user = home / ".config" / "Cursor" / "User"
    async with open_ingester(tmp_path / "node") as ingester:
        ingester.project_root = project
        mine = scope_for(str(project), None)
        first = await ingest_sources(ingester, sources_in([user]), scope=mine)
        assert first.sessions == 3 and first.out_of_scope == 1  # the other project's chat
        again = await ingest_sources(ingester, sources_in([user]), scope=mine)
        assert again.unchanged == 3 and again.sessions == 0
        # Cursor adds a turn to one chat: a new bubble row, its header, a new time
        glob = user / "globalStorage" / "state.vscdb"
        with sqlite3.connect(glob) as conn:
            key = f"composerData:{ACTIVE}"
            data = json.loads(
                conn.execute(f"SELECT value FROM cursorDiskKV WHERE key = '{key}'").fetchone()[0]
            )
            data["fullConversationHeadersOnly"].append({"bubbleId": "new-1", "type": 1})
            data["lastUpdatedAt"] += 60_000
            conn.execute(
                "UPDATE cursorDiskKV SET value = ? WHERE key = ?", (json.dumps(data).encode(), key)
            )
            bubble = {"_v": 3, "type": 1, "bubbleId": "new-1", "text": "and for /signup?"}
            conn.execute(
                "INSERT INTO cursorDiskKV VALUES (?, ?)",
                (f"bubbleId:{ACTIVE}:new-1", json.dumps(bubble).encode()),
            )
        third = await ingest_sources(ingester, sources_in([user]), scope=mine)
        assert third.sessions == 1 and third.unchanged == 2
        active = (await _sessions(ingester))[ACTIVE]
    assert active.turns == 2 and active.status.status == SessionStatus.CRASHED
    assert active.status.reason == "the last prompt got no reply"


async def test_a_database_cursor_holds_locked_is_still_read(tmp_path: Path) -> None:
    home, _ = _layout(tmp_path)
    glob = home / ".config" / "Cursor" / "User" / "globalStorage" / "state.vscdb"
    holder = sqlite3.connect(glob, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")  # Cursor writing: every reader is refused
        holder.execute("UPDATE cursorDiskKV SET value = value WHERE key LIKE 'composerData:%'")
        found = default_sources(tools=[Tool.CURSOR], env={}, home=home)
        async with open_ingester(tmp_path / "node") as ingester:
            report = await ingest_sources(ingester, found)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert len(found) == 4 and report.sessions == 4 and report.failures == []


CHAT_A = "0f6f1c2a-7d3e-4b9a-a1c5-2e8d4f6b9a10"
CHAT_B = "b7e2a9d4-3c1f-4e8b-9a6d-5f0c2b7e1d34"
AGENT = "a3d9e1f7"


def _cli_layout(tmp_path: Path) -> tuple[Path, Path]:
    """``~/.cursor/projects/<slug>/agent-transcripts/``: nested, flat and a subagent."""
    home, project = tmp_path / "home", tmp_path / "acme-api"
    project.mkdir()
    slug = "".join(c if c.isalnum() else "-" for c in str(project)).strip("-")
    base = home / ".cursor" / "projects" / slug / "agent-transcripts"
    source = FIXTURES / "cursor" / "agent-transcripts"
    targets = {
        base / CHAT_A / f"{CHAT_A}.jsonl": "research-sample.jsonl",
        base / f"{CHAT_B}.jsonl": "agentsview-exchange.jsonl",
        base / CHAT_A / "subagents" / f"{AGENT}.jsonl": "agentsview-subagent.jsonl",
    }
    for target, name in targets.items():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / name, target)
    return home, project


async def test_cli_transcripts_nested_flat_and_subagent(tmp_path: Path) -> None:
    home, project = _cli_layout(tmp_path)
    found = default_sources(tools=[Tool.CURSOR], env={}, home=home)
    assert sorted(s.path.stem for _, s in found) == sorted([CHAT_A, CHAT_B, AGENT])
    assert {s.folder for _, s in found} == {str(project)}  # the slug, resolved on disk
    async with open_ingester(tmp_path / "node") as ingester:
        ingester.project_root = project
        report = await ingest_sources(ingester, found, scope=scope_for(str(project), None))
        sessions = await _sessions(ingester)
    assert report.sessions == 3 and report.out_of_scope == 0 and report.failures == []
    nested = sessions[CHAT_A]
    # the user's words are inside <user_query>; what Cursor put around them is context
    assert [i.text for i in nested.items if isinstance(i, Prompt)] == [
        "Add rate limiting to the /login endpoint"
    ]
    assert any(isinstance(i, Context) and "<user_info>" in i.text for i in nested.items)
    (pair,) = nested.tool_calls()  # no ids in the file: the result answers the open call
    assert pair.call.name == "Read" and pair.result is not None
    assert nested.status.status == SessionStatus.COMPLETE
    assert nested.scope == scope_for(str(project), None)
    flat = sessions[CHAT_B]
    assert flat.turns == 2 and any(isinstance(i, Thinking) for i in flat.items)
    child = sessions[AGENT]
    assert child.facts.parent_session == CHAT_A and child.facts.agent_id == AGENT
    assert child.status.status == SessionStatus.CRASHED  # its Bash call was never answered


def test_stamps_read_in_sqlite_and_in_python_agree(tmp_path: Path) -> None:
    """Discovery picks a composer's fields with SQLite's JSON functions, or, on a SQLite
    without them, by parsing each value: both give the same stamps."""
    from lifeline.sessions.adapters import cursor

    home, _ = _layout(tmp_path)
    glob = home / ".config" / "Cursor" / "User" / "globalStorage" / "state.vscdb"
    with sqlite3.connect(glob) as conn:
        in_sql = conn.execute(cursor._COMPOSER_FIELDS).fetchall()
        in_python = [cursor._fields_of(c, v) for c, v in conn.execute(cursor._COMPOSER_VALUES)]
    assert len(in_sql) == 4 and in_sql == in_python
