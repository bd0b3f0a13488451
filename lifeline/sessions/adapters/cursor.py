"""Cursor (the IDE) chats: ``state.vscdb`` SQLite files in Cursor's user folder.

Where: ``~/.config/Cursor/User`` (Linux), ``~/Library/Application Support/Cursor/User``
(macOS), ``%APPDATA%/Cursor/User`` (Windows); in it ``globalStorage/state.vscdb`` and
``workspaceStorage/<hash>/state.vscdb`` beside a ``workspace.json`` naming the folder
(``{"folder": "file:///…"}``). Both databases have two key/value tables, ``ItemTable`` and
``cursorDiskKV`` (``key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB``), values JSON.

- Composer chats (Cursor 0.4x and later), global ``cursorDiskKV``: ``composerData:<id>``
  (name, ``createdAt``/``lastUpdatedAt`` in ms, ``status``, ``modelConfig``,
  ``createdOnBranch``, and the conversation: ``fullConversationHeadersOnly`` — the bubble
  ids in order, each bubble in its own ``bubbleId:<composer>:<bubble>`` row — or, in older
  builds, the bubbles inline in ``conversation``). A workspace's ``ItemTable`` lists its
  composers (``composer.composerData`` → ``allComposers``): that is how a chat finds its
  project folder (else the composer's own ``workspaceIdentifier``).
- The older chat panel, a workspace's ``ItemTable``
  ``workbench.panel.aichat.view.aichat.chatdata``: ``{"tabs": [{tabId, chatTitle,
  bubbles: [{type: "user"|"ai", text}]}]}``.

Each chat is a source of its own (``SourceFile.key``): ``composerData:<id>`` or
``chatdata:<tabId>``, stamped with the bytes of its rows and its last update; a pass
reads only the chats whose stamp moved, each replayed whole. Records: the chat's header
(the composer's fields we use, or the tab's), then its bubbles in order. A chat with no
bubble (opened, never used) is not a session. Bubble types: 1 user (a prompt), 2
assistant (``thinking``, ``text``, ``toolFormerData`` — one tool call and its result —
and ``tokenCount``). The composer's ``status`` says how it ended: ``error`` (stopped on
an error), ``aborted`` (stopped by the user), ``generating`` (a turn never completed).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lifeline.sessions.adapters.cursor_cli import (
    cli_transcript_items,
    parent_of,
    resolve_slug,
    transcripts_in,
)
from lifeline.sessions.adapters.cursor_items import (
    chat_end_items,
    chatdata_items,
    composer_bubble_items,
)
from lifeline.sessions.adapters.fields import as_list, parse_json, to_str
from lifeline.sessions.adapters.port import ParseState, RawLine, SourceFile
from lifeline.sessions.adapters.rows import file_uri_path, ms_to_iso, open_readonly, record_lines
from lifeline.sessions.model import Item, Tool
from lifeline.sessions.scope import home_normalized

__all__ = ["CURSOR_DB", "CursorAdapter"]

CURSOR_DB = "state.vscdb"
_CHATDATA = "workbench.panel.aichat.view.aichat.chatdata"
_COMPOSER = "composerData:"
_TAB = "chatdata:"
# the composer's fields a session needs (the rest — file snapshots, UI state — is not read)
_HEADER_FIELDS = (
    "_v",
    "composerId",
    "name",
    "subtitle",
    "createdAt",
    "lastUpdatedAt",
    "status",
    "unifiedMode",
    "forceMode",
    "isAgentic",
    "modelConfig",
    "createdOnBranch",
    "workspaceIdentifier",
)


class CursorAdapter:
    tool = Tool.CURSOR
    append_only = False

    def default_roots(self, env: dict[str, str], home: Path) -> list[Path]:
        roots = [
            home / ".config" / "Cursor" / "User",
            home / "Library" / "Application Support" / "Cursor" / "User",
        ]
        if env.get("APPDATA"):
            roots.append(Path(env["APPDATA"]) / "Cursor" / "User")
        return [*roots, home / ".cursor" / "projects"]  # the CLI's transcripts

    def discover(self, root: Path) -> Iterator[SourceFile]:
        """Every chat of Cursor's user folder ``root`` (or of ``root``, one state.vscdb), or
        every CLI transcript of ``root`` (``~/.cursor/projects``)."""
        if root.is_dir() and any(root.glob("*/agent-transcripts")):
            yield from self._transcripts(root)
            return
        if root.is_file():
            workspace = root.parent.parent.name == "workspaceStorage"
            dbs = [(root, _folder_of(root.parent) if workspace else None)]
            folders = _composer_folders(root.parent.parent) if not workspace else {}
        elif root.is_dir():
            spaces = sorted((root / "workspaceStorage").glob(f"*/{CURSOR_DB}"))
            dbs = [(db, _folder_of(db.parent)) for db in spaces]
            glob = root / "globalStorage" / CURSOR_DB
            if glob.is_file():
                dbs.insert(0, (glob, None))
            folders = _composer_folders(root)
        else:
            return
        for db, folder in dbs:
            try:
                yield from self._chats(db, folder, folders)
            except sqlite3.DatabaseError:
                continue  # not readable as a Cursor database: nothing of ours in it

    def _chats(self, db: Path, folder: str | None, folders: dict[str, str]) -> Iterator[SourceFile]:
        name = _layout_name(db)
        with open_readonly(db) as conn:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            composers = _composer_stamps(conn) if "cursorDiskKV" in tables else []
            tabs = _item(conn, _CHATDATA) if "ItemTable" in tables else None
        for cid, stamp, own in composers:
            yield SourceFile(
                self.tool,
                db,
                f"{name}#{_COMPOSER}{cid}",
                key=f"{_COMPOSER}{cid}",
                stamp=stamp,
                folder=folders.get(cid) or folder or own,
            )
        for tab in as_list((tabs or {}).get("tabs")):
            if not isinstance(tab, dict) or not tab.get("bubbles") or not tab.get("tabId"):
                continue
            raw = json.dumps(tab, sort_keys=True).encode()
            last = tab.get("lastSendTime")
            yield SourceFile(
                self.tool,
                db,
                f"{name}#{_TAB}{tab['tabId']}",
                key=f"{_TAB}{tab['tabId']}",
                stamp=(len(raw), int(last) * 1_000_000 if isinstance(last, int) else 0),
                folder=folder,
            )

    def _transcripts(self, projects: Path) -> Iterator[SourceFile]:
        folders: dict[str, str | None] = {}
        for path, name, slug in transcripts_in(projects):
            if slug not in folders:
                folders[slug] = resolve_slug(slug)
            yield SourceFile(self.tool, path, name, folder=folders[slug])

    def identify(self, path: Path) -> SourceFile | None:
        """A CLI transcript (a database holds many chats: see discover)."""
        parts = path.parts
        if path.suffix != ".jsonl" or "agent-transcripts" not in parts:
            return None
        at = len(parts) - 1 - parts[::-1].index("agent-transcripts")
        slug = parts[at - 1] if at > 0 else ""
        name = "/".join(parts[at - 1 :])
        return SourceFile(self.tool, path, name, folder=resolve_slug(slug) if slug else None)

    def native_id(self, source: SourceFile, first: RawLine | None) -> str:
        return source.key.partition(":")[2] if source.key else source.path.stem

    def parser(self, source: SourceFile, state: ParseState | None) -> Any:
        raise NotImplementedError("Cursor chats are replayed whole")

    def project_folder(self, source: SourceFile) -> str | None:
        return source.folder

    def records(self, source: SourceFile) -> Iterator[RawLine]:
        with open_readonly(source.path) as conn:
            if source.key.startswith(_COMPOSER):
                found = _composer_records(conn, source.key[len(_COMPOSER) :])
            else:
                found = _tab_records(conn, source.key[len(_TAB) :])
        yield from record_lines(found)

    def whole(
        self, source: SourceFile, state: ParseState, lines: Iterator[RawLine]
    ) -> Iterator[tuple[RawLine, list[Item]]]:
        if source.folder:
            state.extra["cwd_raw"] = source.folder
            state.fact("cwd", home_normalized(source.folder))
        if not source.key:  # a CLI transcript
            subagent = parent_of(source.path)
            if subagent is not None:
                state.fact("parent_session", subagent[0])
                state.fact("agent_id", subagent[1])
            open_calls: list[str] = []
            for line in lines:
                yield line, cli_transcript_items(line, state, open_calls)
            return
        header: tuple[RawLine, dict[str, Any]] | None = None
        for line in lines:
            rec = line.json_object
            if rec is None:
                state.skipped["not-json"] += 1
            elif isinstance(rec.get("composer"), dict):
                header = (line, rec["composer"])
                _composer_facts(rec["composer"], state)
            elif isinstance(rec.get("tab"), dict):
                header = (line, rec["tab"])
                state.fact("title", to_str(rec["tab"].get("chatTitle")))
                state.fact("last_activity", ms_to_iso(rec["tab"].get("lastSendTime")))
            elif isinstance(rec.get("bubble"), dict):
                yield line, composer_bubble_items(rec["bubble"], state)
            elif isinstance(rec.get("tab_bubble"), dict):
                yield line, chatdata_items(rec["tab_bubble"], state)
            elif "missing_bubble" in rec:
                state.skipped["bubble not found"] += 1
        if header is not None:
            ending = chat_end_items(header[1], state)
            if ending:
                yield header[0], ending


def _composer_facts(composer: dict[str, Any], state: ParseState) -> None:
    state.fact("title", to_str(composer.get("name")))
    state.fact("started", ms_to_iso(composer.get("createdAt")))
    state.fact("last_activity", ms_to_iso(composer.get("lastUpdatedAt")))
    state.fact("git_branch", to_str(composer.get("createdOnBranch")))
    config = composer.get("modelConfig")
    if isinstance(config, dict):
        state.fact("model", to_str(config.get("modelName")))


def _composer_stamps(conn: sqlite3.Connection) -> list[tuple[str, tuple[int, int], str | None]]:
    """(composer id, stamp, its own folder) of every composer with at least one bubble.

    SQLite's JSON functions pick the few fields out of each composer (a value can hold
    megabytes of file snapshots) without handing it to Python; without them, each value
    is parsed here."""
    bubbles = dict(
        conn.execute(
            "SELECT substr(key, 10, instr(substr(key, 10), ':') - 1), sum(length(value))"
            " FROM cursorDiskKV WHERE key >= 'bubbleId:' AND key < 'bubbleId;' GROUP BY 1"
        ).fetchall()
    )
    try:
        rows = conn.execute(_COMPOSER_FIELDS).fetchall()
    except sqlite3.OperationalError:  # no JSON functions in this SQLite
        rows = [_fields_of(cid, value) for cid, value in conn.execute(_COMPOSER_VALUES)]
    found = []
    for cid, length, updated, created, bubble_count, own in rows:
        if not cid or not bubble_count:
            continue  # opened, never used
        moment = updated or created
        size = int(length or 0) + int(bubbles.get(cid) or 0)
        mtime = int(moment) * 1_000_000 if isinstance(moment, (int, float)) else 0
        found.append((str(cid), (size, mtime), own if isinstance(own, str) and own else None))
    return found


_COMPOSER_VALUES = (
    "SELECT substr(key, 14), value FROM cursorDiskKV"
    " WHERE key >= 'composerData:' AND key < 'composerData;' ORDER BY key"
)
_COMPOSER_FIELDS = (
    "SELECT substr(key, 14), length(value), json_extract(v, '$.lastUpdatedAt'),"
    " json_extract(v, '$.createdAt'),"
    " ifnull(json_array_length(v, '$.fullConversationHeadersOnly'), 0)"
    " + ifnull(json_array_length(v, '$.conversation'), 0),"
    " json_extract(v, '$.workspaceIdentifier.uri.fsPath')"
    " FROM (SELECT key, value, CAST(value AS TEXT) AS v FROM cursorDiskKV"
    " WHERE key >= 'composerData:' AND key < 'composerData;') WHERE json_valid(v) ORDER BY key"
)


def _fields_of(cid: str, value: Any) -> tuple[str, int, Any, Any, int, str | None]:
    data = _json(value)
    if not isinstance(data, dict):
        return cid, 0, None, None, 0, None
    count = sum(
        len(data[k])
        for k in ("fullConversationHeadersOnly", "conversation")
        if isinstance(data.get(k), list)
    )
    updated, created = data.get("lastUpdatedAt"), data.get("createdAt")
    return cid, len(value or b""), updated, created, count, _own_folder(data)


def _composer_records(conn: sqlite3.Connection, cid: str) -> list[Any]:
    data = _json(_kv(conn, "cursorDiskKV", f"{_COMPOSER}{cid}"))
    if not isinstance(data, dict):
        return []
    records: list[Any] = [{"composer": {k: data[k] for k in _HEADER_FIELDS if k in data}}]
    heads = data.get("fullConversationHeadersOnly")
    if isinstance(heads, list) and heads:
        for head in heads:
            bid = head.get("bubbleId") if isinstance(head, dict) else None
            bubble = _json(_kv(conn, "cursorDiskKV", f"bubbleId:{cid}:{bid}")) if bid else None
            if isinstance(bubble, dict):
                records.append({"bubble": bubble})
            else:
                records.append({"missing_bubble": bid})
    else:  # older builds: inline, though some keep only ids there and the text in rows
        for bubble in as_list(data.get("conversation")):
            if not isinstance(bubble, dict):
                continue
            bid = bubble.get("bubbleId")
            row = _json(_kv(conn, "cursorDiskKV", f"bubbleId:{cid}:{bid}")) if bid else None
            records.append({"bubble": row if isinstance(row, dict) else bubble})
    return records


def _tab_records(conn: sqlite3.Connection, tab_id: str) -> list[Any]:
    chat = _item(conn, _CHATDATA)
    for tab in as_list((chat or {}).get("tabs")):
        if isinstance(tab, dict) and tab.get("tabId") == tab_id:
            head = {k: v for k, v in tab.items() if k != "bubbles"}
            bubbles = as_list(tab.get("bubbles"))
            return [{"tab": head}, *({"tab_bubble": b} for b in bubbles if isinstance(b, dict))]
    return []


def _kv(conn: sqlite3.Connection, table: str, key: str) -> Any:
    row = conn.execute(f"SELECT value FROM {table} WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def _item(conn: sqlite3.Connection, key: str) -> Any:
    data = _json(_kv(conn, "ItemTable", key))
    return data if isinstance(data, dict) else None


def _json(value: Any) -> Any:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if not isinstance(value, str):
        return None
    try:
        return parse_json(value)
    except ValueError:
        return None


def _own_folder(composer: dict[str, Any]) -> str | None:
    ident = composer.get("workspaceIdentifier")
    uri = ident.get("uri") if isinstance(ident, dict) else None
    if isinstance(uri, dict):
        return to_str(uri.get("fsPath")) or file_uri_path(uri.get("external"))
    return None


def _folder_of(space: Path) -> str | None:
    """The folder a ``workspaceStorage/<hash>/`` stands for (its ``workspace.json``)."""
    try:
        data = json.loads((space / "workspace.json").read_bytes())
    except (OSError, ValueError):
        return None
    return file_uri_path(data.get("folder")) if isinstance(data, dict) else None


def _composer_folders(user: Path) -> dict[str, str]:
    """Composer id -> project folder, from every workspace's list of its composers."""
    found: dict[str, str] = {}
    for db in sorted((user / "workspaceStorage").glob(f"*/{CURSOR_DB}")):
        folder = _folder_of(db.parent)
        if folder is None:
            continue
        try:
            with open_readonly(db) as conn:
                listed = _item(conn, "composer.composerData")
        except sqlite3.DatabaseError:
            continue
        for composer in as_list((listed or {}).get("allComposers")):
            if isinstance(composer, dict) and isinstance(composer.get("composerId"), str):
                found.setdefault(composer["composerId"], folder)
    return found


def _layout_name(db: Path) -> str:
    """``globalStorage/state.vscdb`` or ``workspaceStorage/<hash>/state.vscdb``."""
    if db.parent.parent.name == "workspaceStorage":
        return f"workspaceStorage/{db.parent.name}/{db.name}"
    return f"{db.parent.name}/{db.name}"
