"""Initial sync of a signed line to an empty node, against the bare signature check (§10).

    python bench/sync_signed.py [--n 100000]

Node A holds n entries (~1 KB) each with its author attestation (ed25519, signed by A);
node B is empty and runs as its own process (`lifeline-mesh serve --insecure`). We time one
real gRPC session on loopback (SQLite on both ends, every signature verified at B's
admission, one state statement signed when the session ends), and, in the same run,
the bare cost of verifying the n signatures once (the limit the target is measured
against: "within 2x"). Prints figures; not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from serving import serving, timed_sync

from lifeline.entry import Entry
from lifeline.home import Home
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.config import NodeConfig
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.node.root import Node
from lifeline_mesh.notary.sign import sign_entries
from lifeline_mesh.notary.statement import decode
from lifeline_mesh.notary.storage import NotaryStore


def build(n: int) -> list[Entry]:
    out: list[Entry] = []
    for k in range(n):
        out.append(
            Entry.create(
                ts=f"2026-01-01T{k // 3600 % 24:02d}:{k // 60 % 60:02d}:{k % 60:02d}Z",
                kind="note",
                summary=f"entry {k}",
                body=f"{k} " + "lorem ipsum " * 80,
                parents=(out[-1].id,) if out and k % 3600 else (),
            )
        )
    return out


async def prepare(root: Path, n: int) -> list[bytes]:
    root.mkdir(parents=True)
    NodeConfig(shared_lines=["ledger"]).save(NodeHome(root))
    identity, _ = NodeIdentity.load_or_create(NodeHome(root))
    path = Home(root).line_path("ledger")
    path.parent.mkdir(parents=True, exist_ok=True)
    entries = build(n)
    async with await SqliteStore.open(path) as store:
        for k in range(0, n, 5000):
            await store.append_many(entries[k : k + 5000])
            await sign_entries(store, identity, entries[k : k + 5000])
        return await (await NotaryStore.attach(store)).items()


def bare_verify(items: list[bytes]) -> float:
    atts = [decode(raw) for raw in items]
    started = time.perf_counter()
    for att in atts:
        att.verify()
    return time.perf_counter() - started


async def run(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a", Path(tmp) / "b"
        items = await prepare(a, n)
        b.mkdir()
        NodeConfig(shared_lines=["ledger"]).save(NodeHome(b))
        NodeIdentity.load_or_create(NodeHome(b))
        assert NodeHome(b).key_path.exists()
        limit = bare_verify(items)
        node_a = Node(NodeHome(a), insecure=True)
        with serving(b) as (_, address):
            report, took = await timed_sync(node_a, address)
        print(f"n = {n:,} entries + {len(items):,} author signatures")
        print(f"bare verification of {len(items):,} signatures: {limit:.2f} s")
        print(
            f"initial sync over gRPC: {took:.2f} s ({n / took:,.0f} entries/s), "
            f"{report.round_trips} round trips; ratio to the bare check {took / limit:.2f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    asyncio.run(run(parser.parse_args().n))


if __name__ == "__main__":
    main()
