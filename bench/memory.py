"""Memory of a node holding a large line (DESIGN §10: ≤ 300 MB RSS at 1M entries).

    python bench/memory.py [--n 1000000]

Builds a line of n small entries (a chain of notes, ~250 bytes each) in node A's root,
copies the file to node B, starts B as `lifeline-mesh serve --insecure` in its own
process, runs one sync session from A (the sets are equal: one round trip), then reads B's
peak and current RSS from /proc. Prints figures; not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from serving import serving, timed_sync

from lifeline.entry import Entry, format_ts
from lifeline.home import Home
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.config import NodeConfig
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.node.root import Node

BATCH = 20_000


async def fill(path: Path, n: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    base = time.time() - n
    prev: str | None = None
    async with await SqliteStore.open(path) as store:
        for start in range(0, n, BATCH):
            batch = []
            for k in range(start, min(n, start + BATCH)):
                ts = format_ts(datetime.fromtimestamp(base + k, UTC))
                e = Entry.create(
                    ts=ts,
                    kind="note",
                    summary=f"entry {k}",
                    body="why " * 40,
                    parents=(prev,) if prev else (),
                )
                batch.append(e)
                prev = e.id
            await store.append_many(batch)


class Sampler:
    """Calls ``read`` every ``every`` seconds in a thread of its own, until :meth:`stop`
    or until ``read`` raises OSError (the process it reads has exited)."""

    def __init__(self, read: Callable[[], None], every: float) -> None:
        self._read = read
        self._every = every
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(self._every):
            try:
                self._read()
            except OSError:
                return

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def rss(pid: int) -> tuple[int, int]:
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(fields["VmRSS"].split()[0]) // 1024, int(fields["VmHWM"].split()[0]) // 1024


async def run(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a", Path(tmp) / "b"
        started = time.perf_counter()
        await fill(Home(a).line_path("ledger"), n)
        print(f"built {n:,} entries in {time.perf_counter() - started:.1f}s")
        Home(b).line_path("ledger").parent.mkdir(parents=True)
        shutil.copy(Home(a).line_path("ledger"), Home(b).line_path("ledger"))
        for root in (a, b):
            NodeConfig(shared_lines=["ledger"]).save(NodeHome(root))
        os.sync()  # the files just written go to disk now, not during the timed session
        with serving(b) as (server, address):
            idle = rss(server.pid)
            report, took = await timed_sync(Node(NodeHome(a), insecure=True), address)
            after = rss(server.pid)
        print(f"serve holding {n:,} entries: RSS idle {idle[0]} MB")
        print(
            f"after a sync check with a peer holding the same {n:,}: RSS {after[0]} MB, "
            f"peak {after[1]} MB; session {took:.1f}s, {report.round_trips} round trip(s), "
            f"{report.bytes_sent} / {report.bytes_received} bytes"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    asyncio.run(run(parser.parse_args().n))


if __name__ == "__main__":
    main()
