"""Read commands on a hub root holding a large line, through the real CLI, this tree beside
another.

    python bench/scale.py --sizes 1000000 --keep DIR          # builds the line, once
    python bench/hub_reads.py --line DIR/1000000/ours/.lifeline/ledger.db [--runs 2]
                              [--baseline TREE] [--only verify] [--signed] [--scan] [--migrate]

Copies the line file's entries into a fresh hub (`hub init --store URL` on a root, the
entries written through the PostgreSQL store, then ``VACUUM ANALYZE``), runs `context`
once to fold the hub's truth tables and `recall` once to build its recall index (decision
0109), then, for each tree alternating, ``--runs`` times: `context`, `recall`, `history
--limit 20`, `history --limit 5 --kind decision` and `lifeline-mesh verify` (the whole
audit: entries, truth tables, notary), and with ``--scan`` `recall` by the scan it ran
before the index: wall time and the process's own peak RSS. Only the entries are copied,
unless ``--signed``: then the line file's attestations and statements too, as stored (for
`verify` on a signed line); with ``--migrate``, by `lifeline-mesh migrate-store` from the
line's project root. ``--only NAME`` runs the commands starting with NAME. PostgreSQL:
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
from hub_root import new_hub_root, on_a_server
from many_tips import report, run_cli
from serving import TREE

from lifeline.store.postgres import PgStore
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.notary.pg_storage import PgNotaryStore
from lifeline_mesh.notary.statement import decode
from lifeline_mesh.notary.storage import NotaryStore

BATCH = 10_000
COMMANDS = [
    ("context",),
    ("recall", "refund latency webhook"),
    ("history", "--limit", "20"),
    ("history", "--limit", "5", "--kind", "decision"),
    ("verify",),  # lifeline-mesh's (MESH)
]
SCANNED = "recall (LIFELINE_RECALL=scan)"
MESH = {"verify"}  # commands of `lifeline-mesh`; the others are `lifeline`'s
# `verify` exits 1 when it finds failures: the hub root knows no signer of the copied line,
# so a signed one has some (each is still read and judged). What it found is printed once.
OK = {"verify": (0, 1)}


async def copy_line(source: Path, url: str, *, signed: bool = False) -> int:
    """Every entry of the line file ``source`` into the hub line ``ledger``, in stream order;
    ``signed``: its attestations and statements too."""
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
            if signed:
                await _copy_signatures(line, hub)
    finally:
        await hub.close()
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("VACUUM ANALYZE")  # the steady state, not autovacuum's first pass
    finally:
        await conn.close()
    return copied


def hub_holding(
    line: Path | None, server: str, folder: Path, *, signed: bool = False, migrate: bool = False
) -> Path:
    """A hub root in ``folder`` on a fresh database of ``server``, holding the entries of
    the line file ``line`` (printed: how long the copy took), or none; ``signed``: its
    attestations and statements too; ``migrate``: copied by `lifeline-mesh migrate-store`
    from the line's project root, as a team moving to a hub does (its read models made)."""
    hub = folder / "hub"
    url = new_hub_root(server, hub)
    if line is None:
        return hub
    started = time.perf_counter()
    if migrate:
        project = line.resolve().parent.parent
        run_cli(TREE, project, "migrate-store", str(project), url, "--line", line.stem,
                module="lifeline_mesh")  # fmt: skip
        print(f"migrate-store into the hub: {time.perf_counter() - started:.0f} s")
        return hub
    copied = asyncio.run(copy_line(line, url, signed=signed))
    print(f"{copied:,} entries copied into the hub in {time.perf_counter() - started:.0f} s")
    return hub


async def _copy_signatures(line: SqliteStore, hub: PgStore) -> None:
    """The line file's items into the hub line's tables, as stored (what `migrate-store`
    copies, without checking each signature again: the bench's own line)."""
    source = await NotaryStore.attach(line)
    target = PgNotaryStore(hub)
    for mine, theirs in ((source, target), (source.statements(), target.statements())):
        items = await mine.items()
        for start in range(0, len(items), BATCH):
            await theirs.add([decode(i) for i in items[start : start + BATCH]])
        print(f"{len(items):,} items copied into the hub's {theirs.table}")


def _verdict(hub: Path) -> str:
    """What `lifeline-mesh verify` says of the hub's line (its text report's first lines:
    a JSON report of a million failures would be a few hundred MB)."""
    done = subprocess.run(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(hub), "verify"],
        capture_output=True, text=True, cwd=TREE, check=False,
    )  # fmt: skip
    if done.returncode not in (0, 1):
        raise SystemExit(f"verify failed: {done.stderr.strip()[-500:]}")
    return " / ".join(line.strip() for line in done.stdout.splitlines()[:6] if line.strip())


def bench(args: argparse.Namespace, server: str) -> None:
    trees = [TREE] + ([args.baseline.resolve()] if args.baseline else [])
    with tempfile.TemporaryDirectory(prefix="hub-reads-") as tmp:
        hub = hub_holding(args.line, server, Path(tmp), signed=args.signed, migrate=args.migrate)
        commands = [c for c in COMMANDS if " ".join(c).startswith(args.only or "")]
        took, _peak = run_cli(TREE, hub, "context")
        print(f"first context (folds the hub's truth tables): {took:.1f} s")
        took, peak = run_cli(TREE, hub, *COMMANDS[1])
        print(f"first recall (builds the hub's recall index): {took:.1f} s, {peak:.0f} MiB")
        if any(c[0] == "verify" for c in commands):
            print(f"verify finds: {_verdict(hub)}")
        seen: dict[tuple[str, Path], list[tuple[float, float]]] = {}
        names = [" ".join(c) for c in commands] + ([SCANNED] if args.scan else [])
        for r in range(args.runs):
            for tree in trees if r % 2 == 0 else trees[::-1]:
                for command in commands:
                    module = "lifeline_mesh" if command[0] in MESH else "lifeline"
                    runs = seen.setdefault((" ".join(command), tree), [])
                    ok = OK.get(command[0], (0,))
                    runs.append(run_cli(tree, hub, *command, module=module, ok=ok))
                if args.scan:  # the scan a hub's recall ran before decision 0109
                    runs = seen.setdefault((SCANNED, tree), [])
                    runs.append(run_cli(tree, hub, *COMMANDS[1], env={"LIFELINE_RECALL": "scan"}))
        report(seen, names, trees)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--line", type=Path, required=True, help="a line file to copy")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--baseline", type=Path, help="another tree to run side by side")
    parser.add_argument(
        "--scan", action="store_true", help="also `recall` by the scan, without the index"
    )
    parser.add_argument("--only", help="run only the commands starting with this")
    parser.add_argument("--signed", action="store_true", help="copy the signatures too")
    parser.add_argument(
        "--migrate", action="store_true", help="copy with `lifeline-mesh migrate-store`"
    )
    args = parser.parse_args()
    on_a_server(lambda url: bench(args, url))


if __name__ == "__main__":
    main()
