"""Local writes on a line with many unjoined tips (an imported lifeline-context ledger).

Prints figures; not a test. Usage::

    .venv/bin/python bench/leafy_writes.py [--threads 150] [--leaves 900] [--writes 50]

Builds a line whose threads and leaves are never joined (as lifeline-context leaves them),
then times ``Ledger.append`` one write at a time: each joins at most 8 tips (decision 0018),
so the count falls by 7 per write until the line is joined.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from lifeline.entry import Entry
from lifeline.ledger import Draft, Ledger
from lifeline.store.sqlite import SqliteStore


def leafy(threads: int, leaves: int) -> list[Entry]:
    root = Entry.create(ts="2025-01-01T00:00:00Z", kind="bootstrap", summary="Project: leafy")
    out = [root]
    for t in range(threads):
        opened = Entry.create(
            ts="2025-01-02T00:00:00Z",
            kind="open",
            summary=f"Q{t}",
            body=f"thread: t{t}",
            parents=(root.id,),
        )
        out += [
            opened,
            Entry.create(
                ts="2025-01-03T00:00:00Z",
                kind="checkpoint",
                summary=f"cp {t}",
                body=f"thread: t{t}\nnext:\n  - step",
                parents=(opened.id,),
            ),
        ]
    out += [
        Entry.create(
            ts="2025-01-04T00:00:00Z", kind="note", summary=f"leaf {n}", parents=(root.id,)
        )
        for n in range(leaves)
    ]
    return out


async def run(threads: int, leaves: int, writes: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        async with await SqliteStore.open(Path(folder) / "l.db") as store:
            await store.append_many(leafy(threads, leaves))
            start_tips = len(await store.tips())
            ledger = Ledger(store)
            times = []
            for i in range(writes):
                t0 = time.perf_counter()
                await ledger.append(Draft(kind="note", summary=f"write {i}"))
                times.append(time.perf_counter() - t0)
            left = len(await store.tips())
    print(f"tips before: {start_tips}, after {writes} writes: {left}")
    print(f"first write {times[0] * 1e3:.2f} ms, median {statistics.median(times) * 1e3:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=150)
    parser.add_argument("--leaves", type=int, default=900)
    parser.add_argument("--writes", type=int, default=50)
    args = parser.parse_args()
    asyncio.run(run(args.threads, args.leaves, args.writes))


if __name__ == "__main__":
    main()
