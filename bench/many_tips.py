"""A local write on a line of many tips, through the real CLI, this tree beside another.

    python bench/many_tips.py [--tips 100000] [--entries 200000] [--runs 3] [--baseline TREE]

Two lines, built once:

* **line file**: ``--tips`` notes that name no parent (so each is a tip, as after a rogue
  member's pushes or an import of unjoined leaves), one in seven in one of 50 threads;
* **hub line** (PostgreSQL, `hub init --store URL`): a chain of ``--entries`` notes; before
  each write, 20 leaves on one of its tips (forks, as CI runners' pushes leave them).

For each tree, alternating, ``--runs`` times: `lifeline log` (a note, no thread) and
`lifeline log --body "thread: t3"` on the line file, and `lifeline log` on the hub root:
wall time and the process's peak RSS (wait4). Subprocesses of the other tree run with
``PYTHONPATH`` set to it. PostgreSQL: ``LIFELINE_TEST_PG=postgresql://…``, else a
throwaway cluster (tests/support/pg_server.py). Prints medians; not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Container
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
from hub_root import new_hub_root, on_a_server
from memory import rss
from serving import TREE

from lifeline.entry import Entry, format_ts
from lifeline.home import Home
from lifeline.store.postgres import PgStore
from lifeline.store.sqlite import SqliteStore

BATCH = 10_000
START = datetime(2026, 3, 1, tzinfo=UTC)


def run_cli(
    tree: Path,
    root: Path,
    *args: str,
    module: str = "lifeline",
    ok: Container[int] = (0,),
    env: dict[str, str] | None = None,
) -> tuple[float, float]:
    """(wall s, peak RSS MiB) of ``python -m MODULE --root ROOT ARGS`` with ``tree``'s code.

    The peak is the process's own high-water mark (``VmHWM``, read until it exits): wait4's
    ``ru_maxrss`` would count this process's pages too, a million entries' worth after a
    fill (Linux carries it across the child's exec). The process runs in ``tree``: ``-m``
    puts the working folder ahead of ``PYTHONPATH``, so run from another tree it would
    import that tree's code. An exit status not in ``ok`` stops the bench. ``env``: more
    variables for it."""
    env = dict(os.environ) | ({"PYTHONPATH": str(tree)} if tree != TREE else {}) | (env or {})
    cmd = [sys.executable, "-m", module, "--root", str(root), *args]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=tree, stdout=subprocess.DEVNULL)
    peak = 0
    while proc.poll() is None:
        with contextlib.suppress(OSError, KeyError):  # it exited meanwhile
            peak = max(peak, rss(proc.pid)[1])
        time.sleep(0.005)  # polling a child's memory while it runs, not synchronising
    took = time.perf_counter() - started
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(args)} failed on {root} ({tree})")
    return took, float(peak)


def _note(k: int, parents: tuple[str, ...] = (), body: str = "x" * 300) -> Entry:
    ts = format_ts(START + timedelta(milliseconds=k))
    return Entry.create(ts=ts, kind="note", summary=f"n{k}", body=body, parents=parents)


async def fill_file(root: Path, tips: int) -> None:
    async with await SqliteStore.open(Home(root).line_path("ledger")) as store:
        for start in range(0, tips, BATCH):
            await store.append_many(
                [
                    _note(k, body="x" * 300 + (f"\nthread: t{k % 50}" if k % 7 == 0 else ""))
                    for k in range(start, min(tips, start + BATCH))
                ]
            )


async def fill_hub(url: str, entries: int) -> None:
    store = await PgStore.open(url, "ledger")
    try:
        prev: tuple[str, ...] = ()
        for start in range(0, entries, BATCH):
            chain = []
            for k in range(start, min(entries, start + BATCH)):
                chain.append(_note(k, prev))
                prev = (chain[-1].id,)
            await store.append_many(chain)
    finally:
        await store.close()
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("VACUUM ANALYZE")  # the steady state, not autovacuum's first pass
    finally:
        await conn.close()


async def fork_hub(url: str, tag: str) -> None:
    """20 leaves on one of the line's tips: a write joins 8, so each run gets its own."""
    store = await PgStore.open(url, "ledger")
    try:
        tip = (await store.tips())[0]
        await store.append_many([_note(j, (tip,), body=f"leaf {tag} {j}") for j in range(20)])
    finally:
        await store.close()


def bench(args: argparse.Namespace, server: str) -> None:
    trees = [TREE] + ([args.baseline.resolve()] if args.baseline else [])
    with tempfile.TemporaryDirectory(prefix="many-tips-") as tmp:
        line, hub = Path(tmp) / "line", Path(tmp) / "hub"
        line.mkdir()
        run_cli(TREE, line, "init")
        asyncio.run(fill_file(line, args.tips))
        url = new_hub_root(server, hub)
        asyncio.run(fill_hub(url, args.entries))
        cases = {
            f"line file, {args.tips:,} tips: log": (line, ()),
            f"line file, {args.tips:,} tips: log in a thread": (line, ("--body", "thread: t3")),
            f"hub, {args.entries:,} entries, 20+ tips: log": (hub, ()),
        }
        seen: dict[tuple[str, Path], list[tuple[float, float]]] = {}
        for r in range(args.runs):
            for tree in trees if r % 2 == 0 else trees[::-1]:
                for name, (root, extra) in cases.items():
                    summary = ("--kind", "note", "--summary", f"w {r} {tree.name} {name}")
                    if root == hub:
                        asyncio.run(fork_hub(url, f"{r} {tree}"))
                    seen.setdefault((name, tree), []).append(
                        run_cli(tree, root, "log", *summary, *extra)
                    )
        report(seen, list(cases), trees)


def report(
    seen: dict[tuple[str, Path], list[tuple[float, float]]], names: list[str], trees: list[Path]
) -> None:
    """Median wall time and peak of each case's runs ``(wall s, peak MiB)``, tree by tree."""
    for name in names:
        for tree in trees:
            runs = seen[(name, tree)]
            wall = statistics.median(w for w, _ in runs)
            peak = statistics.median(m for _, m in runs)
            label = "this" if tree == TREE else f"baseline {tree}"
            each = ", ".join(f"{w:.2f} s {m:.0f} MiB" for w, m in runs)
            print(f"{name} — {label}: median {wall:.3f} s, peak {peak:.0f} MiB ({each})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tips", type=int, default=100_000)
    parser.add_argument("--entries", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another tree to run side by side")
    args = parser.parse_args()
    on_a_server(lambda url: bench(args, url))


if __name__ == "__main__":
    main()
