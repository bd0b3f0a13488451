"""Append throughput through the API: single appends and batches (DESIGN §10).

Prints figures; not a test. Usage::

    .venv/bin/python bench/append.py [--sizes 1000,10000,100000] [--runs 3] [--lc]

Modes (``--modes``):

- ``single``: ``Ledger.append`` one draft at a time, each its own transaction (validation,
  clock, parents = the line's tips).
- ``store1``: ``Entry.create`` + ``SqliteStore.append`` one at a time, each entry chained
  onto the previous one in memory: the same loop the lifeline-context column runs
  (its ``Entry(...)`` + ``SQLiteEventStore.append``).
- ``batched``: ``Ledger.append_many`` in batches of ``--batch`` (lifeline-context column:
  ``Entry(...)`` + ``append_many`` in the same batches).
- ``store``: ``SqliteStore.append_many`` in batches, entries built before the clock starts
  (the store alone).
- ``signed``: ``single`` in a project with a node identity: each write also signs and
  stores its author attestation (the notary's append hook, as `lifeline log` runs it).
- ``signed_batched``: ``batched`` with the same hook (one attestation per entry).

For sizes above ``--single-cap`` the one-at-a-time modes first fill the line to size minus
the cap with batches, and only the last ``--single-cap`` appends are timed: a sample at
that size. ``--lc`` runs the lifeline-context 0.6.1 column (interpreter /tmp/lcvenv, driver
bench/lc_append.py) in a subprocess.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from lifeline.entry import Entry
from lifeline.home import Home
from lifeline.ledger import Draft, Ledger
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.identity import ensure_identity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.notary.sign import append_hook_factory

__all__ = ["main"]

LC_PYTHON = Path("/tmp/lcvenv/bin/python")


def _draft(n: int) -> Draft:
    return Draft(kind="note", summary=f"entry {n}", body=f"why number {n} " + "x" * 150)


async def _fill(ledger: Ledger, count: int, batch: int, start: int = 0) -> None:
    for base in range(start, start + count, batch):
        stop = min(base + batch, start + count)
        await ledger.append_many([_draft(n) for n in range(base, stop)])


async def _singles(ledger: Ledger, size: int, batch: int, cap: int) -> tuple[float, int]:
    """Fill to ``size`` minus the timed sample with batches, then time single appends."""
    timed = min(size, cap)
    await _fill(ledger, size - timed, batch)
    begin = time.perf_counter()
    for n in range(size - timed, size):
        await ledger.append(_draft(n))
    return time.perf_counter() - begin, timed


async def _batches(ledger: Ledger, size: int, batch: int) -> tuple[float, int]:
    begin = time.perf_counter()
    await _fill(ledger, size, batch)
    return time.perf_counter() - begin, size


def _signing_ledger(store: SqliteStore, root: Path) -> Ledger:
    ensure_identity(NodeHome(root))
    hook = append_hook_factory(Home(root))
    assert hook is not None
    return Ledger(store, hooks=[hook])


async def _single(path: Path, size: int, batch: int, cap: int) -> tuple[float, int]:
    async with await SqliteStore.open(path) as store:
        return await _singles(Ledger(store), size, batch, cap)


async def _signed(path: Path, size: int, batch: int, cap: int) -> tuple[float, int]:
    async with await SqliteStore.open(path) as store:
        return await _singles(_signing_ledger(store, path.parent), size, batch, cap)


async def _batched(path: Path, size: int, batch: int, cap: int) -> tuple[float, int]:
    async with await SqliteStore.open(path) as store:
        return await _batches(Ledger(store), size, batch)


async def _signed_batched(path: Path, size: int, batch: int, cap: int) -> tuple[float, int]:
    async with await SqliteStore.open(path) as store:
        return await _batches(_signing_ledger(store, path.parent), size, batch)


async def _store(path: Path, size: int, batch: int, cap: int) -> tuple[float, int]:
    entries: list[Entry] = []
    parent: tuple[str, ...] = ()
    for n in range(size):
        d = _draft(n)
        entry = Entry.create(
            ts="2026-01-01T00:00:00Z", kind=d.kind, summary=d.summary, body=d.body, parents=parent
        )
        entries.append(entry)
        parent = (entry.id,)
    async with await SqliteStore.open(path) as store:
        begin = time.perf_counter()
        for base in range(0, size, batch):
            await store.append_many(entries[base : base + batch])
        return time.perf_counter() - begin, size


async def _store_single(path: Path, size: int, batch: int, cap: int) -> tuple[float, int]:
    async with await SqliteStore.open(path) as store:
        timed = min(size, cap)
        await _fill(Ledger(store), size - timed, batch)
        parent = tuple(await store.tips())
        begin = time.perf_counter()
        for n in range(size - timed, size):
            d = _draft(n)
            entry = Entry.create(
                ts="2026-01-01T00:00:00Z",
                kind=d.kind,
                summary=d.summary,
                body=d.body,
                parents=parent,
            )
            await store.append(entry)
            parent = (entry.id,)
        return time.perf_counter() - begin, timed


Mode = Callable[[Path, int, int, int], Awaitable[tuple[float, int]]]
MODES: dict[str, Mode] = {
    "single": _single,
    "store1": _store_single,
    "batched": _batched,
    "store": _store,
    "signed": _signed,
    "signed_batched": _signed_batched,
}
LC_MODE = {"single": "single", "store1": "single", "batched": "batched"}


def _run_ours(mode: Mode, size: int, batch: int, cap: int) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(mode(Path(tmp) / "bench.db", size, batch, cap))


LC_SCRIPT = Path(__file__).with_name("lc_append.py")


def _run_lc(mode: str, size: int, batch: int, cap: int) -> tuple[float, int] | None:
    if not LC_PYTHON.exists():
        return None
    args = [str(LC_PYTHON), str(LC_SCRIPT), mode, str(size), str(batch), str(cap)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        print(f"  lifeline-context {mode}: failed: {done.stderr.strip()[-300:]}")
        return None
    seconds, count = done.stdout.split()
    return float(seconds), int(count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--single-cap", type=int, default=10_000)
    parser.add_argument("--modes", default="single,store1,batched,store")
    parser.add_argument("--lc", action="store_true", help="also run lifeline-context 0.6.1")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, median of {args.runs} runs, batch {args.batch}")
    print(f"{'mode':<9} {'size':>7} {'timed':>7} {'entries/s':>11} {'lc 0.6.1/s':>11}")
    for size in (int(s) for s in args.sizes.split(",")):
        for name in args.modes.split(","):
            ours = [
                _run_ours(MODES[name], size, args.batch, args.single_cap) for _ in range(args.runs)
            ]
            rate = statistics.median(count / sec for sec, count in ours)
            lc_rate = "-"
            if args.lc and name != "store":
                theirs = [
                    _run_lc(name, size, args.batch, args.single_cap) for _ in range(args.runs)
                ]
                if all(t is not None for t in theirs):
                    lc_rate = f"{statistics.median(c / s for s, c in theirs if s):,.0f}"
            print(f"{name:<9} {size:>7} {ours[0][1]:>7} {rate:>11,.0f} {lc_rate:>11}", flush=True)


if __name__ == "__main__":
    main()
