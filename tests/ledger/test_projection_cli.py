"""`lifeline render` then `ingest` through real files keeps awkward entries byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

from lifeline.entry import Entry
from lifeline.store.sqlite import SqliteStore
from tests.support.clirun import lifeline

AWKWARD = [
    {"summary": "   ", "author": "", "agent": "", "provider": "", "model": ""},
    {"summary": "line one\r\nline two", "body": "crlf\r\ninside\r\n\r\nand a lone \r"},
    {"summary": "\u200fעברית\u200f and \u200b zero width", "body": "tab\there ```` fence"},
    {"summary": "### entry looks like a heading", "body": "<!-- end of entry x -->\n```"},
    {"summary": '"quoted" \\ back', "body": "🎉 日本語\u2028separator"},
]


def _entries() -> list[Entry]:
    out: list[Entry] = []
    for n, fields in enumerate(AWKWARD):
        base = {"kind": "note", "author": "a", "summary": "s", "body": ""} | fields
        out.append(
            Entry.create(
                ts=f"2026-01-0{n + 1}T00:00:00Z",
                parents=[out[-1].id] if out else [],
                dedup_key=f"key {n}\t" if n % 2 else None,
                **base,
            )
        )
    return out


async def test_render_ingest_through_files_is_lossless(tmp_path: Path) -> None:
    (tmp_path / ".lifeline").mkdir()
    entries = _entries()
    async with await SqliteStore.open(tmp_path / ".lifeline" / "ledger.db") as store:
        await store.append_many(entries)
    path = Path(lifeline(tmp_path, "render").stdout.strip())
    first = path.read_bytes()
    done = lifeline(tmp_path, "--line", "copy", "ingest", str(path))
    assert done.returncode == 0, done.stderr
    history = json.loads(lifeline(tmp_path, "--line", "copy", "history", "--json").stdout)
    assert [Entry.from_dict(e) for e in history] == entries  # ids, ts, dedup keys, text
    copy = tmp_path / "LIFELINE.copy.md"
    assert lifeline(tmp_path, "--line", "copy", "render").returncode == 0
    assert copy.read_bytes() == first.replace(b"line ledger", b"line copy").replace(
        b"`ledger`", b"`copy`"
    )
    assert lifeline(tmp_path, "--line", "copy", "verify").returncode == 0
