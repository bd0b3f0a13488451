"""Driver run by lifeline-context 0.6.1's own interpreter (/tmp/lcvenv) for bench/append.py.

Usage: lc_append.py MODE SIZE BATCH CAP -> prints "<seconds> <timed count>". Same workload
as our side: notes with a ~170-byte body, each chained onto the previous entry.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

from lifeline.entry import Entry  # lifeline-context's package, not ours
from lifeline.store import SQLiteEventStore


def _entry(n: int, parent: str | None) -> Entry:
    return Entry(
        kind="note",
        author="bench",
        summary=f"entry {n}",
        body=f"why number {n} " + "x" * 150,
        parents=[parent] if parent else [],
    )


async def _fill(
    store: SQLiteEventStore, start: int, stop: int, batch: int, parent: str | None
) -> str | None:
    for base in range(start, stop, batch):
        chunk = []
        for n in range(base, min(base + batch, stop)):
            entry = _entry(n, parent)
            chunk.append(entry)
            parent = entry.id
        await store.append_many(chunk)
    return parent


async def main(mode: str, size: int, batch: int, cap: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteEventStore(str(Path(tmp) / "bench.db"))
        await store.initialize()
        if mode == "batched":
            begin = time.perf_counter()
            await _fill(store, 0, size, batch, None)
            print(time.perf_counter() - begin, size)
            return
        timed = min(size, cap)
        parent = await _fill(store, 0, size - timed, batch, None)
        begin = time.perf_counter()
        for n in range(size - timed, size):
            entry = _entry(n, parent)
            await store.append(entry)
            parent = entry.id
        print(time.perf_counter() - begin, timed)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])))
