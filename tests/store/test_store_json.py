"""A sender's entries as JSON written by SQLite (lifeline/store/sqlite_json.py).

The JSON must read back as the same entry ``Entry.to_json`` describes (the receiver
recomputes the id from it), for any text; damaged rows must be skipped exactly as
``get_many`` skips them, never sent.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from lifeline.entry import Entry
from lifeline.store.sqlite import SqliteStore
from lifeline.validate import check_admissible
from lifeline_mesh.recon.entry_codec import EntryCodec
from tests.support.sync_helpers import history, make_node, serving, write

_TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=40)
_AWKWARD = 'quote " backslash \\ slash / nul \x00 bell \x07 tab \t nl \n ls \u2028 é 🜂 \x7f'


def _entries(texts: list[str]) -> list[Entry]:
    out: list[Entry] = []
    for k, text in enumerate(texts):
        out.append(
            Entry.create(
                ts=f"2026-05-01T10:00:{k % 60:02d}.{k:06d}Z",
                kind="note",
                summary=f"{text} {k}",
                body=f"{_AWKWARD} {text}",
                author=text[:20],
                parents=tuple(e.id for e in out[-2:][: k % 3]),
                dedup_key=text if k % 2 else None,
            )
        )
    return out


@settings(max_examples=25, deadline=None)
@given(texts=st.lists(_TEXT, min_size=1, max_size=8))
async def test_sqlite_json_reads_back_as_the_entry(texts: list[str]) -> None:
    import tempfile

    entries = _entries(texts)
    with tempfile.TemporaryDirectory() as tmp:
        async with await SqliteStore.open(Path(tmp) / "l.db") as store:
            await store.append_many(entries)
            ids = [e.id for e in reversed(entries)] + ["0" * 64]
            raws = await store.get_many_json(ids)
            stored = await store.get_many(ids)
    assert [json.loads(r) for r in raws] == [json.loads(e.to_json()) for e in stored]
    codec = EntryCodec()
    for raw, entry in zip(raws, stored, strict=True):
        assert codec.parse(raw).value == entry
        check_admissible(Entry.from_json(raw, check=False))


async def test_damaged_rows_are_skipped_as_get_many_skips_them(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    entries = _entries([f"row {k}" for k in range(12)])
    async with await SqliteStore.open(path) as store:
        await store.append_many(entries)
    conn = sqlite3.connect(path)
    damage = [
        "UPDATE entries SET parents = 'not json' WHERE id = ?",
        "UPDATE entries SET summary = x'00ff10' WHERE id = ?",
        "UPDATE entries SET parents = 42 WHERE id = ?",
        "UPDATE entries SET parents = '[1, 2]' WHERE id = ?",
        "UPDATE entries SET parents = '{}' WHERE id = ?",
        "UPDATE entries SET dedup_key = x'07' WHERE id = ?",
        "UPDATE entries SET body = CAST(x'c328ff' AS TEXT) WHERE id = ?",  # not UTF-8
    ]
    for k, sql in enumerate(damage):
        conn.execute(sql, (entries[k + 2].id,))
    conn.commit()
    conn.close()
    ids = [e.id for e in entries]
    async with await SqliteStore.open(path) as store:
        raws = await store.get_many_json(ids)
        expected = [e.to_json() for e in await store.get_many(ids)]
    assert [json.loads(r) for r in raws] == [json.loads(r) for r in expected]
    # the undecodable ones are gone, and the rows around them are all there
    got_ids = [json.loads(r)["id"] for r in raws]
    assert entries[0].id in got_ids and entries[-1].id in got_ids
    assert entries[3].id not in got_ids  # the blob summary
    assert entries[8].id not in got_ids  # the body that is not UTF-8
    assert len(got_ids) == len(entries) - len(damage)


async def test_a_sync_sends_everything_but_the_damaged_rows(tmp_path: Path) -> None:
    a, b = make_node(tmp_path / "a"), make_node(tmp_path / "b")
    entries = [
        Entry.create(ts=f"2026-05-02T08:00:{k:02d}Z", kind="note", summary=f"loose {k}")
        for k in range(40)
    ]
    await write(a, entries)
    conn = sqlite3.connect(tmp_path / "a" / ".lifeline" / "ledger.db")
    for sql, victim in [
        ("UPDATE entries SET parents = 'not json' WHERE id = ?", entries[5]),
        ("UPDATE entries SET summary = x'00ff10' WHERE id = ?", entries[17]),
        ("UPDATE entries SET body = CAST(x'c328ff' AS TEXT) WHERE id = ?", entries[30]),
    ]:
        conn.execute(sql, (victim.id,))
    conn.commit()
    conn.close()
    async with serving(b) as (_, address):
        [report] = await a.sync(address, ["ledger"])
    assert report.entries_sent == 37
    received = {e["id"] for e in await history(b)}
    assert received == {e.id for e in entries} - {entries[k].id for k in (5, 17, 30)}
