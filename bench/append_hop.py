"""Where a single append's time goes: the transaction alone vs through the store's thread.

    python bench/append_hop.py [--n 2000]

Runs the same one-entry write transaction (`BEGIN IMMEDIATE`, read the tips, build and
validate the entry, insert, `COMMIT`) n times directly on one thread, then n times through
`Ledger.append` (the store's worker thread and back to the event loop). Prints µs per
append for both; the difference is the hand-off. Prints figures; not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import tempfile
import time
from pathlib import Path

from lifeline.entry import Entry
from lifeline.ledger import Draft, Ledger
from lifeline.store.schema import apply_migrations
from lifeline.store.sqlite import SqliteStore
from lifeline.store.sqlite_writes import append_tx

BODY = "x" * 150


def direct(path: Path, n: int) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    apply_migrations(conn)

    def one(k: int) -> None:
        conn.execute("BEGIN IMMEDIATE")
        tips = tuple(r[0] for r in conn.execute("SELECT id FROM tips ORDER BY id"))
        entry = Entry.create(
            ts="2026-01-01T00:00:00Z", kind="note", summary=f"e{k}", body=BODY, parents=tips
        )
        append_tx(conn, [entry])
        conn.execute("COMMIT")

    for k in range(n):  # warm-up, so both runs write into a line of the same size
        one(k)
    started = time.perf_counter()
    for k in range(n, 2 * n):
        one(k)
    conn.close()
    return (time.perf_counter() - started) / n * 1e6


async def through_store(path: Path, n: int) -> float:
    async with await SqliteStore.open(path) as store:
        ledger = Ledger(store)
        drafts = [Draft(kind="note", summary=f"e{k}", body=BODY) for k in range(2 * n)]
        for k in range(n):
            await ledger.append(drafts[k])
        started = time.perf_counter()
        for k in range(n, 2 * n):
            await ledger.append(drafts[k])
        return (time.perf_counter() - started) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    n = parser.parse_args().n
    with tempfile.TemporaryDirectory() as tmp:
        alone = direct(Path(tmp) / "direct.db", n)
        hopped = asyncio.run(through_store(Path(tmp) / "store.db", n))
    print(f"transaction on one thread: {alone:,.0f} µs per append ({1e6 / alone:,.0f}/s)")
    print(f"through Ledger.append:     {hopped:,.0f} µs per append ({1e6 / hopped:,.0f}/s)")
    print(f"hand-off cost:             {hopped - alone:,.0f} µs")


if __name__ == "__main__":
    main()
