"""Entries a line file takes, a hub takes alike, whatever the length of their keys: a dedup
key or a thread name longer than a PostgreSQL index key holds (~2.7 kB, text that does not
compress). Each used to make the hub refuse the entry, and with it every sync that carried
it (a poison entry any member could write). Real PostgreSQL, a real line file."""

from __future__ import annotations

import random
import string
from pathlib import Path

from lifeline.entry import Entry
from lifeline.store.pg_lines import pg_append_hooks, pg_components
from lifeline.store.postgres import PgDatabase
from lifeline.store.sqlite import SqliteStore
from lifeline.truth.service import read_shown
from tests.support.pg_server import fresh_database

LONG = "".join(random.Random(5).choices(string.ascii_letters + string.digits, k=8000))


def _entries() -> list[Entry]:
    def note(k: int, **kw: str) -> Entry:
        return Entry.create(ts=f"2026-06-01T00:00:0{k}Z", kind="note", summary=f"n{k}", **kw)

    return [
        note(0, body="a", dedup_key=LONG),
        note(1, body="b", dedup_key=LONG),  # the same key again: dropped from the newcomer
        note(2, body="c", dedup_key="é" * 200),  # 400 bytes of UTF-8: kept as its hash
        note(3, body=f"thread: {LONG}\nseen"),
        Entry.create(
            ts="2026-06-01T00:00:04Z", kind="checkpoint", summary="cp", body=f"thread: {LONG}"
        ),
    ]


async def test_long_and_odd_keys_are_taken_as_a_line_file_takes_them(
    pg_server: str, tmp_path: Path
) -> None:
    entries = _entries()
    laptop = await SqliteStore.open(tmp_path / "l.db")
    db = await PgDatabase.connect(
        await fresh_database(pg_server), migrations=pg_components(), after_append=pg_append_hooks()
    )
    try:
        hub = await db.line("l")
        await read_shown(hub)  # the tables current: each append folds in its transaction
        for entry in entries:  # one write each, as syncs and CLIs bring them
            assert await hub.append_many([entry]) == await laptop.append_many([entry])
        for store in (hub, laptop):
            first = await store.by_dedup_key(LONG)
            assert first is not None and first.id == entries[0].id
            found = await store.by_dedup_key("é" * 200)
            assert found is not None and found.id == entries[2].id
        assert [e.dedup_key for e in await hub.get_many([e.id for e in entries])] == [
            e.dedup_key for e in await laptop.get_many([e.id for e in entries])
        ]
        assert (await read_shown(hub)).truth == (await read_shown(laptop)).truth
    finally:
        await db.close()
        await laptop.close()


async def test_a_long_key_kept_as_it_was_before_is_still_found(pg_server: str) -> None:
    """A hub kept every dedup key as its UTF-8 while it could (up to ~2.7 kB): such a row
    still holds its key for the lookups and for later entries with the same key."""
    key = "k" * 1000
    first, second = (
        Entry.create(ts=f"2026-06-02T00:00:0{k}Z", kind="note", summary=f"d{k}", body="x",
                     dedup_key=key)
        for k in (0, 1)
    )  # fmt: skip
    db = await PgDatabase.connect(await fresh_database(pg_server), migrations=pg_components())
    try:
        hub = await db.line("l")
        await hub.append_many([first])
        async with hub.transaction() as conn:  # as an earlier version kept it
            await conn.execute(
                "UPDATE entries SET dedup = $2 WHERE line_id = $1", hub.line_id, key.encode()
            )
        found = await hub.by_dedup_key(key)
        assert found is not None and found.id == first.id
        await hub.append_many([second])
        [stored] = await hub.get_many([second.id])
        assert stored.dedup_key is None  # the key was taken: dropped from the newcomer
    finally:
        await db.close()
