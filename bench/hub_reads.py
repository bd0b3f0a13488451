"""Read commands on a hub root holding a large line, through the real CLI, this tree beside
another.

    python bench/scale.py --sizes 1000000 --keep DIR          # builds the line, once
    python bench/hub_reads.py --line DIR/1000000/ours/.lifeline/ledger.db [--runs 2]
                              [--baseline TREE] [--only verify]

Copies the line file's entries into a fresh hub (`hub init --store URL` on a root, the
entries written through the PostgreSQL store, then ``VACUUM ANALYZE``), runs `context`
once to fold the hub's truth tables, then, for each tree alternating, ``--runs`` times:
`context`, `recall`, `history --limit 20`, `history --limit 5 --kind decision` and
`lifeline-mesh verify` (the whole audit: entries, truth tables, notary): wall time and the
process's own peak RSS. Only the entries are copied, no attestation: the hub's verify reads
an unsigned line. ``--only NAME`` runs the commands starting with NAME. PostgreSQL:
``LIFELINE_TEST_PG=postgresql://…``, else a throwaway cluster (tests/support/pg_server.py).
Prints medians; not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import asyncpg
from hub_root import fresh_db, on_a_server
from many_tips import report, run_cli
from serving import TREE

from lifeline.store.postgres import PgStore
from lifeline.store.sqlite import SqliteStore

BATCH = 10_000
COMMANDS = [
    ("context",),
    ("recall", "refund latency webhook"),
    ("history", "--limit", "20"),
    ("history", "--limit", "5", "--kind", "decision"),
    ("verify",),  # lifeline-mesh's (MESH)
]
MESH = {"verify"}  # commands of `lifeline-mesh`; the others are `lifeline`'s


async def copy_line(source: Path, url: str) -> int:
    """Every entry of the line file ``source`` into the hub line ``ledger``, in stream order."""
    copied = 0
    hub = await PgStore.open(url, "ledger")
    try:
        async with await SqliteStore.open(source, create=False) as line:
            batch = []
            async for entry in line.stream():
                batch.append(entry)
                if len(batch) == BATCH:
                    await hub.append_many(batch)
                    copied += len(batch)
                    batch = []
            await hub.append_many(batch)
            copied += len(batch)
    finally:
        await hub.close()
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("VACUUM ANALYZE")  # the steady state, not autovacuum's first pass
    finally:
        await conn.close()
    return copied


def bench(args: argparse.Namespace, server: str) -> None:
    trees = [TREE] + ([args.baseline.resolve()] if args.baseline else [])
    with tempfile.TemporaryDirectory(prefix="hub-reads-") as tmp:
        hub = Path(tmp) / "hub"
        hub.mkdir()
        url = asyncio.run(fresh_db(server))
        subprocess.run(
            [sys.executable, "-m", "lifeline_mesh", "--root", str(hub), "hub", "init",
             "--store", url], check=True, capture_output=True,
        )  # fmt: skip
        run_cli(TREE, hub, "init")
        started = time.perf_counter()
        copied = asyncio.run(copy_line(args.line, url))
        print(f"{copied:,} entries copied into the hub in {time.perf_counter() - started:.0f} s")
        took, _peak = run_cli(TREE, hub, "context")
        print(f"first context (folds the hub's truth tables): {took:.1f} s")
        commands = [c for c in COMMANDS if " ".join(c).startswith(args.only or "")]
        seen: dict[tuple[str, Path], list[tuple[float, float]]] = {}
        for r in range(args.runs):
            for tree in trees if r % 2 == 0 else trees[::-1]:
                for command in commands:
                    module = "lifeline_mesh" if command[0] in MESH else "lifeline"
                    runs = seen.setdefault((" ".join(command), tree), [])
                    runs.append(run_cli(tree, hub, *command, module=module))
        report(seen, [" ".join(c) for c in commands], trees)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--line", type=Path, required=True, help="a line file to copy")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--baseline", type=Path, help="another tree to run side by side")
    parser.add_argument("--only", help="run only the commands starting with this")
    args = parser.parse_args()
    on_a_server(lambda url: bench(args, url))


if __name__ == "__main__":
    main()
