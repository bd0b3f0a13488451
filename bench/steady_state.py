"""The mesh at steady state, through the real CLI (issue 14, decision 0015).

    python bench/steady_state.py [--checks 20] [--entries 10000] [--joiners 20]
                                 [--after-syncs 5] [--only after-sync]

1. **No-op syncs.** Two signed nodes (`lifeline-mesh init`: every write carries its author
   attestation), one serving (`lifeline-mesh serve --insecure`); after they converge,
   `--checks` more `lifeline-mesh sync --json` runs. Prints the attestations and
   statements added by those checks (target 0) and each check's round trips and bytes.
2. **Joiners.** An origin node holds a line of `--entries` signed entries (~430-byte
   entries written through the ledger with the notary's hook) and serves it; `--joiners`
   fresh signed nodes join one after another, each running `lifeline-mesh sync` twice.
   Prints the witness evidence in the mesh (every statement but the author signatures,
   which each entry carries once whatever happens) as a share of the entry bytes (target
   ≤ 2%), the author signatures' share for reference, and the last joiner's first-sync
   bytes against the first's (target ≤ 1.05×).
3. **The sync after a sync** (decision 0059). Two signed nodes, one serving; `--after-syncs`
   times: a write on the serving node (then one on each node), one `lifeline-mesh sync`,
   then a second. Prints the second sync's round trips, bytes each way and what it added
   (target: 1 round trip, < 200 B each way, nothing added), and the first sync's bytes.

Nodes run with `--insecure` (no mesh CA): signatures are still made and verified; the
membership check is what is off. To measure another tree (e.g. before decision 0015):
`cd bench && PYTHONPATH=<tree> python steady_state.py` (the nodes run from that tree).
Prints figures; not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from serving import TREE, serving

from lifeline.home import Home
from lifeline.ledger import Draft, Ledger
from lifeline.plugins import load_append_hooks
from lifeline.store.sqlite import SqliteStore


def run(root: Path, module: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", module, "--root", str(root), *args],
        capture_output=True, text=True, timeout=600, cwd=TREE,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{module} {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def signed_node(root: Path) -> None:
    root.mkdir(parents=True)
    run(root, "lifeline", "init")
    run(root, "lifeline_mesh", "init")
    run(root, "lifeline_mesh", "share", "ledger")


def sync(root: Path, address: str) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(run(root, "lifeline_mesh", "sync", "--insecure",
                                            "--json", address))[0]  # fmt: skip
    return report


def evidence(root: Path) -> dict[str, tuple[int, int]]:
    """role -> (rows, bytes) over both notary tables of the line."""
    conn = sqlite3.connect(f"file:{Home(root).line_path('ledger')}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        rows = [
            row
            for table in ("attestations", "statements")
            if table in tables  # a tree before decision 0015 has no `statements`
            for row in conn.execute(
                f"SELECT role, count(*), sum(length(item)) FROM {table} GROUP BY role"
            )
        ]
    finally:
        conn.close()
    return {str(r): (int(n), int(b)) for r, n, b in rows}


def no_op_checks(base: Path, checks: int) -> None:
    a, b = base / "a", base / "b"
    for root in (a, b):
        signed_node(root)
        for k in range(3):
            run(root, "lifeline", "log", "--kind", "note", "--summary", f"{root.name} {k}")
    with serving(b) as (_proc, address):
        sync(a, address)
        sync(a, address)  # each side's state statement crosses over
        before = (evidence(a), evidence(b))
        reports = [sync(a, address) for _ in range(checks)]
        after = (evidence(a), evidence(b))
    added = sum(n for side in after for n, _b in side.values()) - sum(
        n for side in before for n, _b in side.values()
    )
    print(f"\n## {checks} no-op syncs between two signed nodes (one serving)")
    print(f"new attestations and statements on both nodes: {added}")
    print(f"round trips per check: {sorted({r['round_trips'] for r in reports})}")
    for key in ("bytes_sent", "bytes_received", "seconds"):
        values = [r[key] for r in reports]
        print(f"{key}: median {statistics.median(values)}, max {max(values)}")


def after_sync(base: Path, rounds: int) -> None:
    a, b = base / "after-a", base / "after-b"
    for root in (a, b):
        signed_node(root)
    rows: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    with serving(b) as (_proc, address):
        sync(a, address)
        for k in range(rounds):
            for both in (False, True):
                run(b, "lifeline", "log", "--kind", "note", "--summary", f"on b {k} {both}")
                if both:
                    run(a, "lifeline", "log", "--kind", "note", "--summary", f"on a {k}")
                first = sync(a, address)
                rows.append(("both sides" if both else "one side", first, sync(a, address)))
    print(f"\n## The sync after a sync ({rounds} rounds of each; a write, a sync, a second sync)")
    print("| writes on | 1st sync bytes out/in | 2nd sync round trips | 2nd bytes out/in "
          "| 2nd items added |")  # fmt: skip
    print("|---|---|---|---|---|")
    for kind in ("one side", "both sides"):
        mine = [(f, s) for w, f, s in rows if w == kind]
        seconds = [s for _f, s in mine]

        def span(values: list[int]) -> str:
            return (
                f"{min(values)}" if min(values) == max(values) else f"{min(values)}–{max(values)}"
            )

        added = [
            int(s["entries_added"]) + int(s.get("attestations_added", 0)) for s in seconds
        ]  # a tree before 0059 counts its signatures in entries_added
        print(
            f"| {kind} "
            f"| {span([f['bytes_sent'] for f, _s in mine])}/"
            f"{span([f['bytes_received'] for f, _s in mine])} "
            f"| {span([s['round_trips'] for s in seconds])} "
            f"| {span([s['bytes_sent'] for s in seconds])}/"
            f"{span([s['bytes_received'] for s in seconds])} "
            f"| {span(added)} |"
        )


async def fill(root: Path, n: int) -> int:
    """``n`` signed entries on ``root``'s line; returns their canonical bytes."""
    async with await SqliteStore.open(Home(root).line_path("ledger")) as store:
        ledger = Ledger(store, hooks=load_append_hooks(Home(root)))
        for start in range(0, n, 1000):
            await ledger.append_many([
                Draft(kind="note", summary=f"entry {k}", body=f"{k} " + "lorem ipsum " * 30)
                for k in range(start, min(n, start + 1000))
            ])  # fmt: skip
        return sum([len(e.to_json()) async for e in store.stream()])


def joiners(base: Path, entries: int, count: int) -> None:
    origin = base / "origin"
    signed_node(origin)
    entry_bytes = asyncio.run(fill(origin, entries))
    firsts: list[dict[str, Any]] = []
    started = time.perf_counter()
    with serving(origin) as (_proc, address):
        for k in range(count):
            node = base / f"joiner{k:02d}"
            signed_node(node)
            firsts.append(sync(node, address))
            sync(node, address)
    elapsed = time.perf_counter() - started
    held = evidence(origin)
    author_bytes = held.get("author", (0, 0))[1]
    witness = {role: v for role, v in held.items() if role != "author"}
    witness_bytes = sum(b for _n, b in witness.values())

    def moved(r: dict[str, Any]) -> int:
        return int(r["bytes_sent"]) + int(r["bytes_received"])

    print(f"\n## {count} joiners of a {entries}-entry line, each syncing twice ({elapsed:.0f}s)")
    print(f"entry bytes (canonical JSON): {entry_bytes}")
    print(
        f"author signatures: {held.get('author', (0, 0))[0]} rows, {author_bytes} bytes "
        f"({100 * author_bytes / entry_bytes:.1f}% of entry bytes; one per entry, always)"
    )
    print(
        f"witness evidence at the origin: {witness} -> {witness_bytes} bytes "
        f"({100 * witness_bytes / entry_bytes:.3f}% of entry bytes)"
    )
    print(
        f"first joiner's first sync: {moved(firsts[0])} bytes, "
        f"{firsts[0]['seconds']}s; last joiner's: {moved(firsts[-1])} bytes, "
        f"{firsts[-1]['seconds']}s; ratio {moved(firsts[-1]) / moved(firsts[0]):.4f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checks", type=int, default=20)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--joiners", type=int, default=20)
    parser.add_argument("--after-syncs", type=int, default=5)
    parser.add_argument("--only", choices=("after-sync",), help="run only this part")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.only is None:
            no_op_checks(Path(tmp), args.checks)
            joiners(Path(tmp), args.entries, args.joiners)
        after_sync(Path(tmp), args.after_syncs)


if __name__ == "__main__":
    main()
