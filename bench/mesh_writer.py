"""The fault lab's writers: signed appends on several nodes' lines, from one process.

Run by bench/mesh_lab.py (under libfaketime for a node whose clock is skewed, so its
entries' times and signatures carry the skewed clock, as that laptop's would). Each root is
written in turn, one entry every ``--every`` seconds per root, through the ledger with the
node's append hooks (its author signature), as ``lifeline log`` writes. Prints one JSON
line per write as it is committed: ``{"root": ..., "id": ...}`` (the lab times it when it
reads the line: under libfaketime every clock of this process is skewed). Stops when
stdin closes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from pathlib import Path

from lifeline.errors import StoreError
from lifeline.home import Home
from lifeline.ledger import Draft, Ledger
from lifeline.plugins import load_append_hooks
from lifeline.store.sqlite import SqliteStore

BODY = "lab write {n}: " + "what was decided and why, in a sentence or two. " * 3


async def _stdin_closed() -> None:
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)


async def _write(roots: list[Path], every: float) -> None:
    stop = asyncio.Event()
    watcher = asyncio.get_running_loop().create_task(_stdin_closed())
    watcher.add_done_callback(lambda _: stop.set())
    async with contextlib.AsyncExitStack() as stack:
        ledgers = []
        for root in roots:
            store = await stack.enter_async_context(
                await SqliteStore.open(root / ".lifeline" / "ledger.db")
            )
            ledgers.append(Ledger(store, hooks=load_append_hooks(Home(root))))
        tick = every / len(roots)
        n = 0
        while not stop.is_set():
            for root, ledger in zip(roots, ledgers, strict=True):
                n += 1
                draft = Draft(kind="note", summary=f"{root.name} {n}", body=BODY.format(n=n))
                try:
                    entry, _ = await ledger.append(draft)
                except StoreError as exc:  # locked past the busy timeout: skip this turn
                    print(json.dumps({"root": str(root), "error": str(exc)}), flush=True)
                    continue
                print(json.dumps({"root": str(root), "id": entry.id}), flush=True)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), tick)
                if stop.is_set():
                    break


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--every", type=float, required=True)
    parser.add_argument("roots", nargs="+", type=Path)
    args = parser.parse_args()
    asyncio.run(_write(args.roots, args.every))


if __name__ == "__main__":
    main()
