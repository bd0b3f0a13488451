"""Forge (forgecode) conversations: the ``conversations`` table of ``.forge.db`` (SQLite).

Where: ``$FORGE_CONFIG/.forge.db``, else ``~/forge/.forge.db`` (the legacy folder, which
forge still prefers when it exists) and ``~/.forge/.forge.db``. One row per conversation
(forgecode's migrations, ``crates/forge_repo/src/database/migrations``): ``conversation_id``,
``title``, ``workspace_id`` (a hash of the folder, not the folder), ``context`` (the
``ContextRecord`` JSON), ``created_at``, ``updated_at`` (rewritten on every save),
``metrics``; later builds add ``cwd``, ``parent_id``, ``source``, ``message_count`` and
keep the context zstd-compressed in ``context_zstd`` with ``is_compressed = 1`` (and
``context`` NULL), with an FTS5 copy in ``conversations_fts`` that we never read.

A conversation is a source of its own (``SourceFile.key`` = its id), stamped with the
length of its stored context and its ``updated_at``: a pass reads only the conversations
whose stamp moved, each replayed whole. Its records: the row (title, times, cwd, metrics)
as line 1, then one line per ``messages[]`` entry — ``{"message": {"text"|"tool"|"image":
…}, "usage": …}`` (or the entry bare, as older rows hold it).

Roles: a ``User`` text with ``raw_content`` (what the user typed: ``{"Text": …}``) is a
prompt, the typed text being the prompt (``content`` wraps it in ``<task>…</task>``);
any other ``User`` text is context forge added (attached files, summaries); ``System`` is
context and names the working folder (``<current_working_directory>``). There is no end
marker, no interruption record, no error record: a conversation whose last prompt has no
reply, or whose last call has no result, is unfinished. Token counts are each entry's
``usage`` (``prompt_tokens``, ``completion_tokens``, ``cached_tokens``, the ``actual``
counts only).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import sqlite3
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from lifeline.sessions.adapters.fields import as_list, parse_json, to_str
from lifeline.sessions.adapters.port import ParseState, RawLine, SourceFile
from lifeline.sessions.adapters.rows import iso_of, open_readonly, record_lines, tables_of
from lifeline.sessions.model import (
    Context,
    FileEdit,
    Image,
    Item,
    Opaque,
    Prompt,
    Reply,
    Thinking,
    Tool,
    ToolCall,
    ToolResult,
    Usage,
)
from lifeline.sessions.scope import home_normalized

__all__ = ["FORGE_DB", "ForgeAdapter"]

FORGE_DB = ".forge.db"
_MAX_CONTEXT = 512 * 1024 * 1024  # a decompressed context larger than this is not read
# forge's tools that change files (and the older names of the same tools)
_EDIT_TOOLS = frozenset(
    {
        "write",
        "patch",
        "multi_patch",
        "remove",
        "undo",
        "fs_write",
        "fs_patch",
        "fs_multi_patch",
        "fs_remove",
        "fs_undo",
        "forge_tool_fs_create",
        "forge_tool_fs_patch",
        "forge_tool_fs_remove",
        "forge_tool_fs_undo",
    }
)
_CWD = re.compile(r"<current_working_directory>\s*([^<]+?)\s*</current_working_directory>")
_CWD_JSON = re.compile(
    r"<current_working_directory>((?:[^<\"\\]|\\.)+)</current_working_directory>"
)
_PEEK = 256 * 1024  # how far into a context its working folder is looked for


class ForgeAdapter:
    tool = Tool.FORGE
    append_only = False

    def default_roots(self, env: dict[str, str], home: Path) -> list[Path]:
        if env.get("FORGE_CONFIG"):
            return [Path(env["FORGE_CONFIG"])]
        return [home / "forge", home / ".forge"]

    def discover(self, root: Path) -> Iterator[SourceFile]:
        """Every conversation with a context in ``root/.forge.db`` (or ``root`` itself,
        a database file)."""
        db = root if root.is_file() else root / FORGE_DB
        if not db.is_file():
            return
        try:
            yield from self._rows(db)
        except sqlite3.DatabaseError:
            return  # not a forge database (or unreadable): nothing of ours in it

    def _rows(self, db: Path) -> Iterator[SourceFile]:
        with open_readonly(db) as conn:
            columns = tables_of(conn).get("conversations")
            if not columns or "context" not in columns:
                return
            zstd = "context_zstd" in columns
            size = "length(context)" + (" + ifnull(length(context_zstd), 0)" if zstd else "")
            cwd = "cwd" if "cwd" in columns else "NULL"
            stored = "(context IS NOT NULL" + (" OR context_zstd IS NOT NULL)" if zstd else ")")
            rows = conn.execute(
                f"SELECT conversation_id, ifnull({size}, 0), COALESCE(updated_at, created_at),"
                f" {cwd} FROM conversations WHERE {stored} ORDER BY created_at, conversation_id"
            ).fetchall()
        for conv_id, length, updated, folder in rows:
            if not isinstance(conv_id, str) or not conv_id:
                continue
            yield SourceFile(
                self.tool,
                db,
                f"{FORGE_DB}#{conv_id}",
                key=conv_id,
                stamp=(max(int(length or 0), 1), _stamp_ns(updated)),
                folder=folder if isinstance(folder, str) and folder else None,
            )

    def identify(self, path: Path) -> SourceFile | None:
        return None  # a database holds many sessions: see discover

    def native_id(self, source: SourceFile, first: RawLine | None) -> str:
        return source.key

    def parser(self, source: SourceFile, state: ParseState | None) -> Any:
        raise NotImplementedError("Forge conversations are replayed whole")

    def project_folder(self, source: SourceFile) -> str | None:
        """The ``cwd`` column, else the System prompt's ``<current_working_directory>``,
        found in the first ``_PEEK`` bytes of the context (the project filter looks at
        every conversation of other projects on every pass: it never reads one whole)."""
        if source.folder:
            return source.folder
        head = _context_head(source.path, source.key)
        found = _CWD_JSON.search(head) if head else None
        if found is None:
            return None
        try:
            value = json.loads(f'"{found.group(1)}"')  # the path as a JSON string holds it
        except ValueError:
            return None
        return value.strip() if isinstance(value, str) and value.strip() else None

    def records(self, source: SourceFile) -> Iterator[RawLine]:
        row, context = _load(source.path, source.key)
        if row is None:
            return
        messages = context.get("messages") if isinstance(context, dict) else None
        yield from record_lines([row, *(messages if isinstance(messages, list) else [])])

    def whole(
        self, source: SourceFile, state: ParseState, lines: Iterator[RawLine]
    ) -> Iterator[tuple[RawLine, list[Item]]]:
        for line in lines:
            rec = line.json_object
            if rec is None:
                state.skipped["not-json"] += 1
                continue
            if line.number == 1 and "conversation" in rec:
                _row_facts(rec["conversation"], state)
                continue
            yield line, _entry_items(rec, state)


def _context_head(db: Path, conv_id: str) -> str:
    """The first ``_PEEK`` characters of a conversation's context JSON."""
    with open_readonly(db) as conn:
        columns = tables_of(conn).get("conversations", set())
        packed = "context_zstd" in columns
        found = conn.execute(
            "SELECT substr(context, 1, ?)"
            + (", is_compressed, context_zstd" if packed else ", 0, NULL")
            + " FROM conversations WHERE conversation_id = ?",
            (_PEEK, conv_id),
        ).fetchone()
    if found is None:
        return ""
    text, compressed, blob = found
    if compressed and isinstance(blob, bytes):
        import zstandard

        try:
            reader = zstandard.ZstdDecompressor().stream_reader(blob)
            return reader.read(_PEEK).decode("utf-8", "replace")
        except zstandard.ZstdError:
            return ""
    return text if isinstance(text, str) else ""


def _stamp_ns(value: Any) -> int:
    iso = iso_of(value) if isinstance(value, str) else None
    if iso is None:
        return 0
    moment = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000


def _load(db: Path, conv_id: str) -> tuple[dict[str, Any] | None, Any]:
    """The row as a record (without its context) and its decoded context (or None)."""
    with open_readonly(db) as conn:
        columns = tables_of(conn).get("conversations", set())
        wanted = [
            c
            for c in (
                "title",
                "created_at",
                "updated_at",
                "metrics",
                "cwd",
                "parent_id",
                "source",
                "context",
                "context_zstd",
                "is_compressed",
            )
            if c in columns
        ]
        found = conn.execute(
            f"SELECT {', '.join(wanted)} FROM conversations WHERE conversation_id = ?",
            (conv_id,),
        ).fetchone()
    if found is None:
        return None, None
    values = dict(zip(wanted, found, strict=True))
    context, error = _decode(values)
    conversation: dict[str, Any] = {"conversation_id": conv_id}
    for name in ("title", "created_at", "updated_at", "cwd", "parent_id", "source"):
        if values.get(name) is not None:
            conversation[name] = values[name]
    metrics = values.get("metrics")
    if isinstance(metrics, str):
        with contextlib.suppress(ValueError):
            conversation["metrics"] = parse_json(metrics)
    if error:
        conversation["context_error"] = error
    return {"conversation": conversation}, context


def _decode(values: dict[str, Any]) -> tuple[Any, str | None]:
    """The context JSON: ``context_zstd`` decompressed when ``is_compressed``, else the
    ``context`` text."""
    blob = values.get("context_zstd")
    if values.get("is_compressed") and isinstance(blob, bytes):
        try:
            text = _unzstd(blob)
        except Exception as exc:  # zstandard raises its own ZstdError (and MemoryError)
            return None, f"context_zstd cannot be decompressed ({type(exc).__name__})"
    else:
        raw = values.get("context")
        if isinstance(raw, bytes):
            raw = raw.decode("utf-8", "replace")
        if not isinstance(raw, str):
            return None, None
        text = raw
    try:
        return parse_json(text), None
    except ValueError:
        return None, "context is not JSON (or nested too deeply)"


def _unzstd(blob: bytes) -> str:
    """Decompress one zstd stream (forge writes it with ``zstd::encode_all``, which records
    no content size), bounded by ``_MAX_CONTEXT``."""
    import zstandard

    reader = zstandard.ZstdDecompressor().stream_reader(blob)
    chunks, total = [], 0
    while chunk := reader.read(1 << 20):
        total += len(chunk)
        if total > _MAX_CONTEXT:
            raise MemoryError("context larger than the cap")
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def _row_facts(row: Any, state: ParseState) -> None:
    if not isinstance(row, dict):
        return
    state.fact("title", to_str(row.get("title")))
    state.fact("started", iso_of(row.get("created_at")))
    state.fact("last_activity", iso_of(row.get("updated_at")) or iso_of(row.get("created_at")))
    state.fact("parent_session", to_str(row.get("parent_id")))
    cwd = to_str(row.get("cwd"))
    if cwd:
        state.extra["cwd_raw"] = cwd
        state.fact("cwd", home_normalized(cwd))
    if row.get("context_error"):
        state.skipped[str(row["context_error"])] += 1


def _actual(count: Any) -> int:
    value = count.get("actual", count.get("Actual")) if isinstance(count, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _entry_items(rec: dict[str, Any], state: ParseState) -> list[Item]:
    found_entry = rec.get("message")
    entry: dict[str, Any] = found_entry if isinstance(found_entry, dict) else rec
    items: list[Item]
    if isinstance(entry.get("text"), dict):
        items = _text_items(entry["text"], state)
    elif isinstance(entry.get("tool"), dict):
        items = [_tool_result(entry["tool"])]
    elif isinstance(entry.get("image"), dict):
        image = entry["image"]
        url = image.get("url") if isinstance(image.get("url"), str) else ""
        items = [
            Image(
                media_type=to_str(image.get("mime_type")),
                bytes=len(url),
                sha256=hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest(),
            )
        ]
    else:
        state.opaque["entry"] += 1
        items = [Opaque(record_type="entry", raw=rec)]
    usage = rec.get("usage")
    if isinstance(usage, dict):
        found = Usage(
            model=state.facts.get("model"),
            input=_actual(usage.get("prompt_tokens")),
            output=_actual(usage.get("completion_tokens")),
            cache_read=_actual(usage.get("cached_tokens")),
        )
        if found.input or found.output or found.cache_read:
            items.append(found)
    return items


def _text_items(msg: dict[str, Any], state: ParseState) -> list[Item]:
    role = msg.get("role")
    ts = to_str(msg.get("timestamp"))
    if ts and ts > (state.facts.get("last_activity") or ""):
        state.facts["last_activity"] = ts
    raw_content = msg.get("content")
    content = raw_content if isinstance(raw_content, str) else ""
    model = to_str(msg.get("model"))
    if role == "System":
        found = _CWD.search(content)
        if found and "cwd_raw" not in state.extra:
            state.extra["cwd_raw"] = found.group(1)
            state.fact("cwd", home_normalized(found.group(1)))
        return [Context(subtype="system", text=content, ts=ts)]
    if role == "User":
        raw = msg.get("raw_content")
        typed = raw.get("Text") if isinstance(raw, dict) else None
        if isinstance(typed, str) and typed.strip():
            state.fact("first_prompt", typed[:200], first=True)
            return [Prompt(text=typed, ts=ts)]
        subtype = "command" if isinstance(raw, dict) and raw else "user-context"
        return [Context(subtype=subtype, text=content, ts=ts)]
    if role != "Assistant":
        state.opaque[f"role/{role}"] += 1
        return [Opaque(record_type=f"role/{role}", raw=msg, ts=ts)]
    state.fact("model", model)
    items: list[Item] = []
    for detail in as_list(msg.get("reasoning_details")):
        if isinstance(detail, dict) and isinstance(detail.get("text"), str) and detail["text"]:
            items.append(Thinking(text=detail["text"], ts=ts))
    if content.strip():
        items.append(Reply(text=content, model=model, ts=ts))
    for call in as_list(msg.get("tool_calls")):
        if not isinstance(call, dict):
            continue
        name = str(call.get("name", ""))
        call_id = str(call.get("call_id") or "")
        args = call.get("arguments")
        items.append(ToolCall(call_id=call_id, name=name, input=args, ts=ts))
        path = (args.get("path") or args.get("file_path")) if isinstance(args, dict) else None
        if name in _EDIT_TOOLS and isinstance(path, str) and path:
            items.append(
                FileEdit(path=home_normalized(path), tool_name=name, call_id=call_id, ts=ts)
            )
    return items


def _tool_result(tool: dict[str, Any]) -> ToolResult:
    found = tool.get("output")
    output: dict[str, Any] = found if isinstance(found, dict) else {}
    parts: list[str] = []
    for value in as_list(output.get("values")):
        if isinstance(value, dict):
            for kind in ("text", "markdown"):
                if isinstance(value.get(kind), str):
                    parts.append(value[kind])
            if isinstance(value.get("ai"), dict):
                parts.append(str(value["ai"].get("value", "")))
            if isinstance(value.get("image"), dict):
                parts.append(f"[image {value['image'].get('mime_type', '')}]")
    return ToolResult(
        call_id=str(tool.get("call_id") or ""),
        output="\n".join(parts),
        is_error=bool(output.get("is_error")),
    )
