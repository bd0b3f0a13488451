"""Per-entry costs behind the append and sync figures: prints µs per entry, not a test.

    python bench/per_entry.py [--n 20000] [--store-n 100000]

- *build*: a local entry built and checked as ``Ledger`` does (clock, canonical form, id,
  size checks), 200-byte notes in a chain.
- *store split*: ``append_tx`` (lifeline/store/sqlite_writes.py) on one thread, chained
  entries in batches of 1,000, with the time of each SQL statement kind (a wrapper around
  the connection times ``execute``/``executemany``); ``COMMIT`` includes checkpoints.
- *wire*: entries of the signed sync benchmark (~1.3 KB): ``EntrySet.fetch`` (read and
  encode, as a sending node does) and ``EntryCodec.parse`` (as a receiving node does), with
  its parts (JSON, ``Entry.from_dict``, the size checks and id).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sync_signed import build as build_wire_entries

from lifeline.entry import Entry
from lifeline.ledger import Draft, _create, utc_now
from lifeline.store.schema import apply_migrations, line_schema
from lifeline.store.sqlite import SqliteStore
from lifeline.store.sqlite_open import BUSY_TIMEOUT_MS
from lifeline.store.sqlite_writes import append_tx
from lifeline.validate import check_admissible, check_local
from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.sync.entry_set import EntrySet


def per_item(fn: Callable[[], object], n: int) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) / n * 1e6


def build_costs(n: int) -> None:
    drafts = [Draft(kind="note", summary=f"entry {k}", body="x" * 170) for k in range(n)]

    def run() -> None:
        tips: tuple[str, ...] = ()
        for d in drafts:
            entry = _create(d, utc_now(), tips, ts_normal=True)
            check_local(entry, id_computed=True)
            tips = (entry.id,)

    print(f"build: {min(per_item(run, n) for _ in range(3)):.1f} µs per local entry")


class _Timed:
    """A connection whose statements are timed by their first words."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.spent: dict[str, float] = defaultdict(float)

    def _timed(self, name: str, call: Callable[..., Any], *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return call(*args)
        finally:
            self.spent[name] += time.perf_counter() - started

    def execute(self, sql: str, *args: Any) -> Any:
        return self._timed(" ".join(sql.split()[:1]), self.conn.execute, sql, *args)

    def executemany(self, sql: str, *args: Any) -> Any:
        return self._timed(" ".join(sql.split()[:3]), self.conn.executemany, sql, *args)


def store_split(n: int) -> None:
    entries: list[Entry] = []
    for k in range(n):
        parents = (entries[-1].id,) if entries else ()
        entries.append(
            Entry.create(ts=utc_now(), kind="note", summary=f"entry {k}", body="x" * 170,
                         parents=parents)
        )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:

        async def open_and_close() -> None:  # the store's own pragmas and migrations
            await (await SqliteStore.open(Path(tmp) / "line.db")).close()

        asyncio.run(open_and_close())
        raw = sqlite3.connect(Path(tmp) / "line.db", isolation_level=None)
        for pragma in (
            "journal_mode = WAL",
            "synchronous = NORMAL",
            "cache_size = -32768",
            "wal_autocheckpoint = 10000",
            f"busy_timeout = {BUSY_TIMEOUT_MS}",
        ):
            raw.execute(f"PRAGMA {pragma}")  # fmt: skip
        apply_migrations(raw, line_schema())
        conn = _Timed(raw)
        started = time.perf_counter()
        for k in range(0, n, 1000):
            conn.execute("BEGIN IMMEDIATE")
            append_tx(conn, entries[k : k + 1000])  # type: ignore[arg-type]
            conn.execute("COMMIT")
        total = (time.perf_counter() - started) / n * 1e6
        raw.close()
    print(f"store split ({n:,} entries, batches of 1,000): {total:.1f} µs per entry")
    for name, spent in sorted(conn.spent.items(), key=lambda kv: -kv[1]):
        print(f"  {name:40s} {spent / n * 1e6:6.2f} µs")


def wire_costs(n: int) -> None:
    entries = build_wire_entries(n)
    raws = [e.to_json() for e in entries]
    codec = EntryCodec()

    async def fetch_all() -> float:
        with tempfile.TemporaryDirectory() as tmp:
            async with await SqliteStore.open(Path(tmp) / "line.db") as store:
                await store.append_many(entries)
                ids = [bytes.fromhex(e.id) for e in entries]
                started = time.perf_counter()
                for k in range(0, n, 1000):
                    await EntrySet(store).fetch(ids[k : k + 1000])
                return (time.perf_counter() - started) / n * 1e6

    def show(label: str, fn: Callable[[], object]) -> None:
        print(f"  {label:27s}{per_item(fn, n):6.2f} µs")

    print(f"wire ({n:,} entries of ~{sum(map(len, raws)) // n:,} bytes):")
    print(f"  {'fetch and encode (sender)':27s}{asyncio.run(fetch_all()):6.2f} µs")
    show("parse (receiver)", lambda: [codec.parse(r) for r in raws])
    dicts = [json.loads(r) for r in raws]
    parsed = [Entry.from_dict(d, check=False) for d in dicts]
    show("  JSON", lambda: [json.loads(r) for r in raws])
    show("  Entry.from_dict", lambda: [Entry.from_dict(d, check=False) for d in dicts])
    show("  size checks and id", lambda: [check_admissible(e) for e in parsed])
    show("encode (Entry.to_json)", lambda: [e.to_json() for e in entries])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--store-n", type=int, default=100_000)
    args = parser.parse_args()
    build_costs(args.n)
    store_split(args.store_n)
    wire_costs(args.n)


if __name__ == "__main__":
    main()
