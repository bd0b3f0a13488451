"""A sessions line is shared: its headers and statuses come from every member, and from
newer versions. One entry with values this version cannot take (a tool it does not know, a
count that is text, a status it has no name for, facts of the wrong types, 10**23 tokens)
used to stop `sessions list`, `show`, `usage`, `search` and `unfinished` for every session,
on every node, for good (the ledger keeps the entry). Now each value is read as what it
must be, the header of an unknown tool is left out with a note, and the rest reads as
before. Real transcripts, the real CLI, entries written to the line as a sync delivers
them."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

from lifeline.entry import Entry
from lifeline.home import Home
from lifeline.sessions.pack import KIND_HEADER, KIND_STATUS
from lifeline.store.sqlite import SqliteStore
from tests.support.sessions_support import FIXTURES, run_cli

SHORT = FIXTURES / "claude-code" / "marot__spotter__short.jsonl"
SHORT_ID = "55604662-cf2a-4331-851a-ec234028f8ca"  # its sessionId
NOW = "2026-12-01T10:00:00Z"


def _sessions(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = run_cli(root, "sessions", *args)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done


def _entry(kind: str, body: dict[str, Any], parents: tuple[str, ...] = ()) -> Entry:
    return Entry.create(
        ts=NOW, kind=kind, summary=kind, body=json.dumps(body), author="peer", parents=parents
    )


async def _deliver(line: Path, entries: list[Entry]) -> None:
    """``entries`` into the line file, as a sync from a member stores them."""
    store = await SqliteStore.open(line, create=False)
    try:
        await store.append_many(entries)
    finally:
        await store.close()


def test_hostile_session_entries_do_not_stop_the_sessions_commands(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    # a transcript whose usage says 10**23 input tokens (SQLite's integers stop at 2**63)
    huge = tmp_path / "huge.jsonl"
    text = SHORT.read_text()
    assert '"input_tokens":' in text
    text = text.replace(SHORT_ID, "11111111-2222-4333-8444-555555555555")  # another session
    huge.write_text(text.replace('"input_tokens":', '"input_tokens":10' + "0" * 22 + ',"x":', 1))
    _sessions(root, "ingest", str(SHORT), str(huge))
    before = json.loads(_sessions(root, "list", "--json").stdout)
    assert len(before) == 2

    unknown_tool = _entry(
        KIND_HEADER, {"first": "0" * 64, "session": "x-1", "tool": "evil", "v": 4}
    )
    header = _entry(KIND_HEADER, {"first": "0" * 64, "session": "y-1", "tool": "claude", "v": 4})
    status = _entry(
        KIND_STATUS,
        {
            "session": header.id,
            "status": "exploded",
            "reason": "a newer version's verdict",
            "turns": "many",
            "items": -5,
            "truncated": 10**30,
            "skipped": "none",
            "opaque": {"a": "b"},
            "redactions": [1, 2],
            "usage": [1, 2],
            "facts": {"cwd": 5, "title": "still shown", "started": NOW, "title_user_set": "no"},
            "bytes": 1,
            "tail": 7,
            "v": 4,
        },
        (header.id,),
    )
    asyncio.run(_deliver(Home(root).line_path("sessions"), [unknown_tool, header, status]))

    listed = _sessions(root, "list", "--json")
    assert "1 session header left out" in listed.stderr
    found = {s["native_id"]: s for s in json.loads(listed.stdout)}
    assert len(found) == 3 and "x-1" not in found  # the two ingested, and y-1
    odd = found["y-1"]
    assert odd["turns"] == 0 and odd["item_count"] == 0 and odd["truncated"] == 0
    assert odd["status"]["status"] == "crashed"
    assert odd["status"]["reason"] == "a newer version's verdict"
    assert odd["facts"]["title"] == "still shown" and odd["facts"]["cwd"] is None
    assert odd["usage"] == {} and odd["skipped"] == {} and odd["redactions"] == {}
    assert odd["opaque"] == {"a": 0}

    _sessions(root, "list")
    _sessions(root, "show", header.id[:12])
    _sessions(root, "unfinished")
    usage = json.loads(_sessions(root, "usage", "--by", "session", "--json").stdout)
    # the huge count reads as 0: the other transcript's tokens are still counted
    assert usage["rows"] and all(r["tokens"]["input"] < 1 << 40 for r in usage["rows"])
    _sessions(root, "search", "the", "--json")
