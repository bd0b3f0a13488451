"""Read views: history since an id or a time, limits, and the errors that say what to pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from lifeline.errors import ConfigError, NotFound
from lifeline.home import Home
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.mcp.reads import entry_view, history_view
from lifeline_mesh.mcp.workspace import Workspace
from tests.conftest import make_entry


async def _workspace(root: Path, count: int) -> tuple[Workspace, list[str]]:
    path = Home(root).line_path("ledger")
    path.parent.mkdir(parents=True)
    ids: list[str] = []
    async with await SqliteStore.open(path) as store:
        parents: tuple[str, ...] = ()
        for n in range(count):
            entry = make_entry(
                f"e{n}", parents, ts=f"2026-01-01T00:00:{n:02d}Z", kind="fix" if n % 2 else "note"
            )
            await store.append(entry)
            parents = (entry.id,)
            ids.append(entry.id)
    return Workspace.open(NodeHome(root), agent="a", author="b"), ids


async def test_history_since_id_time_and_latest(tmp_path: Path) -> None:
    ws, ids = await _workspace(tmp_path, 6)
    after = await history_view(ws, None, ids[1][:8], 3, None)
    assert [e.id for e in after.entries] == ids[2:5] and after.more is True
    by_time = await history_view(ws, None, "2026-01-01T00:00:03+00:00", 10, None)
    assert [e.id for e in by_time.entries] == ids[4:] and by_time.more is False
    for empty in (None, "", "  "):
        latest = await history_view(ws, None, empty, 2, None)
        assert [e.id for e in latest.entries] == ids[4:] and latest.more is True
    fixes = await history_view(ws, None, None, 50, "fix")
    assert [e.summary for e in fixes.entries] == ["e1", "e3", "e5"]


async def test_history_and_entry_errors(tmp_path: Path) -> None:
    ws, ids = await _workspace(tmp_path, 2)
    with pytest.raises(ConfigError, match="neither an entry id"):
        await history_view(ws, None, "last week", 5, None)
    with pytest.raises(ConfigError, match="limit=0 is out of range"):
        await history_view(ws, None, None, 0, None)
    with pytest.raises(NotFound, match="no entry id starts with 'ffff'"):
        await history_view(ws, None, "ffff", 5, None)
    with pytest.raises(NotFound, match="line 'other' does not exist"):
        await history_view(ws, "other", None, 5, None)
    view = await entry_view(ws, ids[0][:6], None)
    assert view.children == [ids[1]] and view.intact is True
