"""The databases Forge and Cursor keep their sessions in, laid out as the tools lay them out
(see tests/fixtures/PROVENANCE.md for where every schema and sample comes from)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import zstandard

from tests.support import paths

__all__ = [
    "CURSOR_ROWS",
    "FORGE",
    "cursor_user_folder",
    "forge_db",
    "forge_rows",
    "set_forge_context",
]

FORGE = paths.FIXTURES / "forge"
CURSOR_ROWS = paths.FIXTURES / "cursor" / "state-rows.json"
# the table both Cursor databases have (chatrxiv docs/cursor/storage-reference.md)
_CURSOR_DDL = (
    "CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);"
    "CREATE TABLE cursorDiskKV (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);"
)


def _naive(iso: str) -> str:
    """chrono's NaiveDateTime as diesel writes it to a SQLite TIMESTAMP (UTC)."""
    return iso.rstrip("Z").replace("T", " ")


def forge_rows() -> list[dict[str, Any]]:
    """The conversations: forgecode's own two dumps, and agentsview's forge test row."""
    rows = []
    for name in ("conversation-hello.json", "conversation-summary-tests.json"):
        dump = json.loads((FORGE / name).read_bytes())
        rows.append(
            {
                "conversation_id": dump["id"],
                "title": dump["title"],
                "workspace_id": 7,
                "context": dump["context"],
                "created_at": _naive(dump["metadata"]["created_at"]),
                "updated_at": _naive(dump["metadata"]["updated_at"]),
                "metrics": json.dumps(dump["metrics"]),
            }
        )
    rows.append(
        {
            "conversation_id": "conv-001",
            "title": "Add Forge Support",
            "workspace_id": 123,
            "context": json.loads((FORGE / "agentsview-context.json").read_bytes()),
            "created_at": "2026-05-02 09:58:15.741021507",
            "updated_at": "2026-05-02 10:00:16.848497543",
            "metrics": '{"input_tokens":360,"output_tokens":55,"cached_input_tokens":85}',
        }
    )
    return rows


def _context_text(context: Any) -> str:
    return json.dumps(context, ensure_ascii=False, separators=(",", ":"))


def forge_db(base: Path, rows: list[dict[str, Any]], *, compressed: bool = False) -> Path:
    """``base/.forge.db`` made by forgecode's migrations (the upstream ones; ``compressed``:
    and those of the zstd build), its rows written as each build writes them."""
    base.mkdir(parents=True, exist_ok=True)
    path = base / ".forge.db"
    conn = sqlite3.connect(path)
    try:
        folders = ["migrations-upstream"] + (["migrations-zstd"] if compressed else [])
        for folder in folders:
            for sql in sorted((FORGE / folder).glob("*.sql")):
                conn.executescript(sql.read_text())
        for row in rows:
            _insert(conn, row, compressed)
        # a conversation forge created and never filled (its context NULL): not a session
        conn.execute(
            "INSERT INTO conversations (conversation_id, workspace_id, created_at)"
            " VALUES ('tombstone', 7, '2026-05-01 00:00:00')"
        )
        conn.commit()
    finally:
        conn.close()
    return path


def _insert(conn: sqlite3.Connection, row: dict[str, Any], compressed: bool) -> None:
    text = _context_text(row["context"])
    values = {k: v for k, v in row.items() if k != "context"}
    if compressed:  # persist_context: zstd level 3, context NULL, is_compressed 1
        values["context_zstd"] = zstandard.ZstdCompressor(level=3).compress(text.encode())
        values["is_compressed"] = 1
        values["message_count"] = len(row["context"].get("messages", []))
        values["cwd"] = row.get("cwd")
    else:
        values["context"] = text
    names = ", ".join(values)
    marks = ", ".join("?" for _ in values)
    conn.execute(f"INSERT INTO conversations ({names}) VALUES ({marks})", list(values.values()))


def set_forge_context(db: Path, conv_id: str, context: Any, updated_at: str) -> None:
    """Forge saving a conversation again (``upsert_conversation``): new context and time."""
    conn = sqlite3.connect(db)
    try:
        columns = {r[1] for r in conn.execute("PRAGMA table_info(conversations)")}
        text = _context_text(context)
        if "context_zstd" in columns:
            blob = zstandard.ZstdCompressor(level=3).compress(text.encode())
            conn.execute(
                "UPDATE conversations SET context_zstd = ?, updated_at = ? WHERE"
                " conversation_id = ?",
                (blob, updated_at, conv_id),
            )
        else:
            conn.execute(
                "UPDATE conversations SET context = ?, updated_at = ? WHERE conversation_id = ?",
                (text, updated_at, conv_id),
            )
        conn.commit()
    finally:
        conn.close()


def _cursor_db(path: Path, tables: dict[str, dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    try:
        conn.executescript(_CURSOR_DDL)
        for table, rows in tables.items():
            for key, value in rows.items():
                blob = json.dumps(value, ensure_ascii=False).encode()  # values are BLOBs
                conn.execute(f"INSERT INTO {table} (key, value) VALUES (?, ?)", (key, blob))
        conn.commit()
    finally:
        conn.close()


def cursor_user_folder(user: Path, folders: dict[str, Path]) -> Path:
    """Cursor's ``User`` folder: ``globalStorage/state.vscdb`` and, per workspace of the
    fixture, ``workspaceStorage/<hash>/state.vscdb`` beside its ``workspace.json`` (its
    folder: ``folders[hash]``)."""
    spec = json.loads(CURSOR_ROWS.read_bytes())
    _cursor_db(user / "globalStorage" / "state.vscdb", spec["global"])
    for digest, space in spec["workspaces"].items():
        target = user / "workspaceStorage" / digest
        _cursor_db(target / "state.vscdb", space["tables"])
        folder = folders[digest].absolute().as_uri()
        (target / "workspace.json").write_text(json.dumps({"folder": folder}))
    return user
