"""A hub line's sessions index (lifeline/sessions/hub_index.py) is a file in the user's
cache, caught up by row number as a line file's is: what it holds equals an index built
from the whole line, a later read indexes only the rows written since, a replaced line is
indexed again from nothing, and the CLI on a hub root keeps the file the owner's only.
Real PostgreSQL, real CLIs on a hub root, real transcripts."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
from pathlib import Path

import pytest

from lifeline.sessions.hub_index import PgRows, hub_index, hub_index_path
from lifeline.sessions.index import SessionIndex
from lifeline.store.postgres import PgDatabase, PgStore
from tests.support.hub_roots import TRANSCRIPT, hub_root, life
from tests.support.pg_server import fresh_database

SECOND = TRANSCRIPT.parent / "marot__spotter__short.jsonl"
TABLES = ("sessions", "parts", "msgs", "usage", "usage_sums")


def _ingest(root: Path, transcript: Path) -> None:
    life(root, "sessions", "ingest", "--tool", "claude", str(transcript))


def _content(index: SessionIndex) -> dict[str, list[tuple[object, ...]]]:
    return {t: sorted(index.db.execute(f"SELECT * FROM {t}").fetchall()) for t in TABLES}


async def _rebuilt(store: PgStore) -> SessionIndex:
    whole = SessionIndex(None)
    whole.rebuild([(e.id, e.ts, e.kind, e.body, e.parents) async for e in store.stream()])
    return whole


def test_a_hub_line_index_follows_its_rows(pg_server: str, tmp_path: Path) -> None:
    url = asyncio.run(fresh_database(pg_server))
    root = tmp_path / "hub"
    hub_root(root, url)
    _ingest(root, TRANSCRIPT)
    used = life(root, "sessions", "usage", "--json").stdout  # reads through the index
    assert '"tokens"' in used or '"input"' in used, used
    asyncio.run(_follow(url, root, tmp_path / "index.db"))


async def _follow(url: str, root: Path, path: Path) -> None:
    db = await PgDatabase.connect(url)
    try:
        store = await db.line("sessions", create=False)
        # the CLI's file: in the cache, the owner's only, as far as the line goes
        kept = hub_index_path(store)
        assert kept.is_file() and stat.S_IMODE(os.stat(kept).st_mode) == 0o600
        rows = PgRows(store, asyncio.get_running_loop())
        top = await asyncio.to_thread(rows.top)
        assert sqlite3.connect(kept).execute(
            "SELECT value FROM meta WHERE key = 'mark'"
        ).fetchone() == (str(top),)

        index = SessionIndex(path)
        assert await asyncio.to_thread(index.catch_up, rows) == top
        assert _content(index) == _content(await _rebuilt(store))

        await asyncio.to_thread(_ingest, root, SECOND)  # rows written since: only they
        later = await asyncio.to_thread(rows.top)
        assert await asyncio.to_thread(index.behind, rows)
        assert await asyncio.to_thread(index.catch_up, rows) == later - top
        assert _content(index) == _content(await _rebuilt(store))
        assert len(_content(index)["sessions"]) == 2

        # another line under the same file (the row at the mark is another entry): anew
        other = await db.line("other")
        assert await asyncio.to_thread(index.behind, PgRows(other, asyncio.get_running_loop()))
        index.close()
    finally:
        await db.close()


def test_a_cache_folder_others_can_write_is_not_used(
    pg_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An index file in a folder other users may write (XDG_CACHE_HOME on a shared folder)
    could be theirs: the index is made in memory instead, and nothing is written there."""
    url = asyncio.run(fresh_database(pg_server))
    root = tmp_path / "hub"
    hub_root(root, url)
    _ingest(root, TRANSCRIPT)
    shared = tmp_path / "shared"
    (shared / "lifeline" / "hub-sessions").mkdir(parents=True)
    for folder in (shared / "lifeline", shared / "lifeline" / "hub-sessions"):
        folder.chmod(0o777)
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared))
    asyncio.run(_in_memory(url))
    assert list((shared / "lifeline" / "hub-sessions").iterdir()) == []
    used = life(root, "sessions", "usage", "--json").stdout  # the CLI too: answers, no file
    assert used and list((shared / "lifeline" / "hub-sessions").iterdir()) == []


async def _in_memory(url: str) -> None:
    db = await PgDatabase.connect(url)
    try:
        store = await db.line("sessions", create=False)
        index = await hub_index(store)
        try:
            assert index.db.execute("PRAGMA database_list").fetchone()[2] == ""  # in memory
            assert index.db.execute("SELECT count(*) FROM sessions").fetchone()[0] == 1
        finally:
            index.close()
    finally:
        await db.close()
