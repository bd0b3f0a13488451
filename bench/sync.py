"""Benchmark of mesh sync: protocol bytes, round trips and wall time (docs/benchmarks.md).

    python bench/sync.py                 # n = 100k, in-memory session pair, all cases
    python bench/sync.py --grpc          # plus one initial sync over real gRPC + SQLite

Entries are ~1 KB and shaped like a ledger written with default parents (the tips): a
spine where each entry follows the previous one, and every other entry a side note hanging
off the spine. "Recent" differences are the newest entries (the highest heights);
"scattered" ones are random side notes anywhere in history. Not a pass/fail test.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from serving import serving, timed_sync

from lifeline.entry import Entry, format_ts
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.recon.session import SessionLimits
from lifeline_mesh.testing.pair import MemorySet, SessionPair

START = datetime(2026, 1, 1, tzinfo=UTC)


def build(n: int) -> list[Entry]:
    out: list[Entry] = []
    spine: list[str] = []
    for k in range(n):
        parents = (spine[-1],) if spine else ()
        e = Entry.create(
            # one second apart, never wrapping: a child stamped before its parent is refused
            ts=format_ts(START + timedelta(seconds=k)),
            kind="note",
            summary=f"entry {k}",
            body=f"{k} " + "lorem ipsum " * 80,
            parents=parents,
        )
        out.append(e)
        if k % 2 == 0:
            spine.append(e.id)
    return out


def memory_set(entries: list[Entry]) -> MemorySet:
    s = MemorySet(EntryCodec())
    for e in entries:
        s.add_raw(e.to_json())
    return s


def clone(src: MemorySet, drop: set[bytes] = frozenset()) -> MemorySet:  # type: ignore[assignment]
    s = MemorySet(src.codec)
    s.items = {k: v for k, v in src.items.items() if k not in drop}
    return s


def case(
    label: str, full: MemorySet, drop: set[bytes], entry_bytes: int, limits: SessionLimits
) -> None:
    a, b = clone(full), clone(full, drop)
    started = time.perf_counter()
    r = SessionPair([a], [b], limits=limits).run()
    seconds = time.perf_counter() - started
    assert not r.errors and a.state() == b.state(), r.errors
    overhead = r.bytes_a_to_b + r.bytes_b_to_a - entry_bytes
    share = f"{100 * overhead / entry_bytes:.1f}%" if entry_bytes else "-"
    print(
        f"| {label} | {r.rounds} | {r.bytes_a_to_b:,} | {r.bytes_b_to_a:,} | "
        f"{overhead:,} | {share} | {seconds:.2f} |"
    )


async def grpc_initial_sync(entries: list[Entry]) -> None:
    """A `lifeline-mesh serve` subprocess receives every entry from this process.

    Plain gRPC on 127.0.0.1 (``--insecure``): this times the sync and the receiving store,
    not the TLS handshake, and the entries carry no signatures.
    """
    from lifeline_mesh.home.config import NodeConfig
    from lifeline_mesh.node.root import Node

    with tempfile.TemporaryDirectory() as tmp:
        roots = [Path(tmp) / name for name in "ab"]
        for root in roots:
            root.mkdir()
            NodeConfig(shared_lines=["ledger"]).save(NodeHome(root))
        sender = Node(NodeHome(roots[0]), insecure=True)
        async with sender.open_line("ledger") as store:
            for k in range(0, len(entries), 5000):
                await store.append_many(entries[k : k + 5000])
        with serving(roots[1]) as (_, address):
            report, seconds = await timed_sync(sender, address)
    rate = report.entries_sent / seconds
    print(
        f"gRPC initial sync (two processes): {report.entries_sent:,} entries in {seconds:.2f}s"
        f" = {rate:,.0f} entries/s; {report.round_trips} round trip(s); "
        f"bytes out {report.bytes_sent:,} / in {report.bytes_received:,}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--grpc", action="store_true", help="also time a real gRPC sync")
    parser.add_argument("--branch", type=int, default=SessionLimits().branch)
    parser.add_argument("--leaf", type=int, default=SessionLimits().leaf)
    args = parser.parse_args()
    n = args.n
    limits = SessionLimits(branch=args.branch, leaf=args.leaf)
    t = time.perf_counter()
    entries = build(n)
    full = memory_set(entries)
    size = {bytes.fromhex(e.id): len(e.to_json()) for e in entries}
    print(
        f"built {n:,} entries ({sum(size.values()) / n:.0f} B avg) "
        f"in {time.perf_counter() - t:.1f}s"
    )
    print(f"naive: sending every id costs {32 * n:,} bytes each way (hex JSON: {66 * n:,})")
    print("| case | round trips | bytes A→B | bytes B→A | overhead bytes | overhead/entries | s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    rng = random.Random(2)
    leaves = [bytes.fromhex(e.id) for k, e in enumerate(entries) if k % 2 == 1]
    ids = [bytes.fromhex(e.id) for e in entries]
    for d in (0, 10, 1000):
        recent = set(ids[n - d :]) if d else set()
        case(f"d={d} recent", full, recent, sum(size[i] for i in recent), limits)
        if d:
            scattered = set(rng.sample(leaves, d))
            case(f"d={d} scattered", full, scattered, sum(size[i] for i in scattered), limits)
    case(f"d=n={n} (empty receiver)", full, set(ids), sum(size.values()), limits)
    if args.grpc:
        asyncio.run(grpc_initial_sync(entries))


if __name__ == "__main__":
    main()
