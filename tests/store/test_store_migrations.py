"""A line written before a schema change opens, migrates, and reads the same afterwards."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from lifeline.store.schema import LEDGER, _statements
from lifeline.store.sqlite import SqliteStore
from tests.support.entries import make_entry


def _line_at_ledger_v1(path: Path) -> sqlite3.Connection:
    """A line file as the first ledger schema made it (parent links keyed by ids)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(
        "CREATE TABLE schema_migrations (component TEXT NOT NULL, version INTEGER NOT NULL,"
        " applied_at REAL NOT NULL, PRIMARY KEY (component, version))"
    )
    version, script = LEDGER["ledger"][0]
    assert version == 1
    for statement in _statements(script):
        conn.execute(statement)
    conn.execute("INSERT INTO schema_migrations VALUES ('ledger', 1, ?)", (time.time(),))
    return conn


async def test_id_keyed_links_become_row_keyed_links(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = _line_at_ledger_v1(path)
    other = "b" * 64  # a parent in another line
    root = make_entry("root")
    a = make_entry("a", (root.id, other))
    b = make_entry("b", (a.id,))
    c = make_entry("c", (root.id,))
    for height, entry in ((1, root), (2, a), (3, b), (2, c)):
        conn.execute(
            "INSERT INTO entries (id, ts, kind, author, agent, provider, model, summary, body,"
            " parents, dedup_key, height) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                entry.id,
                entry.ts,
                entry.kind,
                entry.author,
                entry.agent,
                entry.provider,
                entry.model,
                entry.summary,
                entry.body,
                str(list(entry.parents)).replace("'", '"'),
                None,
                height,
            ),
        )
        for parent in entry.parents:
            conn.execute("INSERT INTO edges VALUES (?, ?)", (parent, entry.id))
    conn.execute("INSERT INTO externals VALUES (?, 'research')", (other,))
    conn.executemany("INSERT INTO tips VALUES (?)", [(b.id,), (c.id,)])
    conn.close()

    async with await SqliteStore.open(path) as store:
        assert await store.children(root.id) == sorted([a.id, c.id])
        assert await store.children(a.id) == [b.id]
        assert await store.children(other) == [a.id]
        assert await store.tips() == sorted([b.id, c.id])
        d = make_entry("d", (b.id, c.id))
        assert await store.append(d)
        assert await store.children(b.id) == [d.id] and await store.children(c.id) == [d.id]
        assert await store.tips() == [d.id]
        assert [e.id async for e in store.stream()][-1] == d.id

    check = sqlite3.connect(path)
    tables = {r[0] for r in check.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "edges" not in tables and {"links", "foreign_links"} <= tables
    assert check.execute("SELECT count(*) FROM links").fetchone()[0] == 5
    check.close()


async def test_row_numbers_are_never_reused_after_a_deleted_last_row(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    first, second, third = make_entry("1"), make_entry("2"), make_entry("3")
    async with await SqliteStore.open(path) as store:
        await store.append_many([first, second])
    conn = sqlite3.connect(path, isolation_level=None)
    top = conn.execute("SELECT max(seq) FROM entries").fetchone()[0]
    conn.execute("DELETE FROM entries WHERE seq = ?", (top,))  # a damaged or edited file
    conn.close()
    async with await SqliteStore.open(path) as store:
        await store.append(third)
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT seq FROM entries WHERE id = ?", (third.id,)).fetchone()[0] > top
    conn.close()
