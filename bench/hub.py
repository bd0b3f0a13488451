"""A hub on PostgreSQL under a fleet: two `serve --store` processes on one database.

    python bench/hub.py [--nodes 20] [--rounds 3] [--per 5] [--big 100000] [--runs 3]
                        [--append 20000]

Starts a throwaway PostgreSQL cluster with default durability (fsync on; the binaries of
Debian's `postgresql`, as tests/support/pg_server.py does; or LIFELINE_TEST_PG=postgresql://…),
then two `lifeline-mesh serve --store postgresql://… --insecure` processes on one database.
Prints, each with its median and the SQLite node beside it where there is one:

1. **Fleet**: ``--nodes`` processes (bench/hub_fleet.py), each on its own SQLite root, ROUNDS
   times append PER signed notes and sync with one hub (alternating between the two); then
   each syncs once more with the other hub. Write-phase time, sessions/s per hub process,
   each hub's CPU (from /proc), the time until every node holds every entry.
2. **Initial sync of ``--big`` entries** (~1 KB, each signed) to an empty node with
   `lifeline-mesh sync --json`: from the hub (the line moved in by `migrate-store`) and from
   a SQLite node (`serve` on the line file); seconds, bytes, round trips, the ratio.
3. **The in-sync check** of a node holding all of them: `sync --json` again (bytes, round
   trips, client seconds) and the hub's server-side session time (its inbound.json).
4. **Batched append** on PostgreSQL vs SQLite (bench/hub_store.py, ``--append`` entries).

Not a test: figures. At 1M entries the initial syncs take long on a loaded machine:
`--big 1000000 --runs 0 --nodes 0 --append 0` measures only the in-sync check (the source
node, migrated into the hub's database, checks against the hub); writing and signing a
million entries first takes long, so `--source ROOT --runs 0 --nodes 0 --append 0` takes an
existing line instead (e.g. `bench/truth_ledger.py 1000000 DIR` made `DIR/ours`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import asyncpg
from hub_fleet import make_root, run_fleet
from hub_store import main as append_bench
from sync_signed import build

from lifeline.home import Home
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.notary.sign import sign_entries

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository's tests/
from tests.support.pg_server import Cluster, database_url, server_binaries

BIG = "big"
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def cli(root: Path, *args: str, module: str = "lifeline_mesh") -> str:
    done = subprocess.run(
        [sys.executable, "-m", module, "--root", str(root), *args],
        capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{module} {' '.join(args[:2])} failed: {done.stderr.strip()[-600:]}")
    return done.stdout


@contextmanager
def serve(root: Path, *extra: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(root), "serve", "--insecure",
         "--no-discovery", "--listen", "127.0.0.1:0", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    first = proc.stdout.readline()
    if not first.startswith("listening on "):
        proc.kill()
        raise SystemExit(f"serve did not start: {first!r} {proc.communicate()[1][-600:]}")
    try:
        yield proc, first.split()[-1]
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=120)
        print(f"  ({root.name}: {out.strip().splitlines()[-1] if out.strip() else 'no summary'})")


def sync_json(root: Path, address: str, line: str) -> dict[str, float]:
    [report] = json.loads(cli(root, "sync", address, "--insecure", "--json", "--line", line))
    return dict(report)


def server_seconds(hub_root: Path) -> float:
    rows = json.loads(NodeHome(hub_root).inbound_path.read_text())["inbound"]
    latest = max(rows, key=lambda r: r["last_session_at"])
    return float(latest["seconds"])


async def make_big(root: Path, n: int) -> None:
    """A node holding ``n`` signed entries of the line ``big``."""
    identity = make_root(root, [BIG])
    entries = build(n)
    async with await SqliteStore.open(Home(root).line_path(BIG), create=True) as store:
        for k in range(0, n, 5000):
            await store.append_many(entries[k : k + 5000])
            await sign_entries(store, identity, entries[k : k + 5000])


async def count_entries(path: Path) -> int:
    async with await SqliteStore.open(path) as store:
        return (await store.entry_totals()).count


def med(values: list[float]) -> float:
    return statistics.median(values)


def fleet(
    args: argparse.Namespace, tmp: Path, hubs: list[tuple[subprocess.Popen[str], str]]
) -> int:
    cpu: dict[str, list[float]] = {}

    def mark(phase: str) -> None:
        cpu[phase] = [cpu_seconds(p.pid) for p, _ in hubs]

    result = run_fleet(tmp, [a for _, a in hubs], args.nodes, args.rounds, args.per, mark)
    used = [cpu_seconds(p.pid) for p, _ in hubs]
    print(f"\n1. fleet: {result.nodes} nodes x {args.rounds} rounds x {args.per} signed notes "
          f"= {result.written} entries, each round one session with a hub")  # fmt: skip
    print(f"   write phase {result.write_seconds:.2f} s; sessions: median "
          f"{med(result.session_seconds) * 1000:.0f} ms, max "
          f"{max(result.session_seconds) * 1000:.0f} ms (client side)")  # fmt: skip
    for k, (_, address) in enumerate(hubs):
        n = result.sessions[address]
        write_cpu = cpu["converge"][k] - cpu["write"][k]
        bad = result.failed[address]
        if bad:
            print(f"   hub {k + 1}: {len(bad)} of its sessions failed: {sorted(set(bad))}")
        print(f"   hub {k + 1}: {n} sessions, {n / result.write_seconds:.1f} sessions/s, "
              f"CPU {write_cpu:.2f} s ({100 * write_cpu / result.write_seconds:.0f}% of one "
              f"core), {1000 * write_cpu / max(n, 1):.0f} ms CPU a session; converge phase "
              f"CPU {used[k] - cpu['converge'][k]:.2f} s")  # fmt: skip
    if result.converge_failed:
        print(f"   convergence: {len(result.converge_failed)} sessions failed and were tried "
              f"again: {sorted(set(result.converge_failed))}")  # fmt: skip
    ok = all(c == result.written for c in result.counts)
    print(f"   convergence (one more session each, every node at once): "
          f"{result.converge_seconds:.2f} s; every node holds all {result.written}: {ok}"
          f" (min {min(result.counts)})")  # fmt: skip
    return result.written


def big_line(args: argparse.Namespace, tmp: Path, url: str, hub: str, hub_root: Path) -> None:
    source = tmp / "source"
    started = time.perf_counter()
    if args.source:  # an existing line (e.g. bench/truth_ledger.py's 1M), copied as `big`
        make_root(source, [BIG])
        shutil.copyfile(Home(args.source).line_path(args.source_line), Home(source).line_path(BIG))
        args.big = asyncio.run(count_entries(Home(source).line_path(BIG)))
        print(f"\n2. {args.big:,} entries of {args.source} copied in "
              f"{time.perf_counter() - started:.1f} s")  # fmt: skip
    else:
        asyncio.run(make_big(source, args.big))
        print(f"\n2. {args.big:,} signed entries written to a SQLite node in "
              f"{time.perf_counter() - started:.1f} s")  # fmt: skip
    started = time.perf_counter()
    cli(source, "migrate-store", str(source), url, "--line", BIG)
    print(f"   migrate-store into the hub's database: {time.perf_counter() - started:.1f} s")
    with serve(source) as (_, sqlite_node):
        sources = {"hub": (hub, hub_root), "sqlite": (sqlite_node, source)}
        holder = initial_syncs(args, tmp, sources) if args.runs else None
        if holder is None:  # no initial sync: the source itself checks against the hub
            holder, sources = source, {"hub": sources["hub"]}
        in_sync_checks(args, holder, sources)


def initial_syncs(
    args: argparse.Namespace, tmp: Path, sources: dict[str, tuple[str, Path]]
) -> Path:
    """``--runs`` initial syncs from each source, alternating; returns a node holding all."""
    initial: dict[str, list[dict[str, float]]] = {kind: [] for kind in sources}
    for run in range(args.runs):
        for kind, (address, _) in sources.items():
            empty = tmp / f"empty-{kind}-{run}"
            make_root(empty, [BIG])
            initial[kind].append(sync_json(empty, address, BIG))
    for kind, rows in initial.items():
        assert all(r["entries_received"] == args.big for r in rows), rows
        took = [round(r["seconds"], 2) for r in rows]
        mb = rows[0]["bytes_received"] / 1e6
        print(f"   initial sync from the {kind:6}: median {med(took):.2f} s of {took}, "
              f"{mb:.1f} MB in, {rows[0]['round_trips']} round trips")  # fmt: skip
    ratio = med([r["seconds"] for r in initial["hub"]]) / med(
        [r["seconds"] for r in initial["sqlite"]]
    )
    print(f"   hub / SQLite node: {ratio:.2f}x (goal: within 1.5x)")
    return empty


def in_sync_checks(
    args: argparse.Namespace, holder: Path, sources: dict[str, tuple[str, Path]]
) -> None:
    """The in-sync check of ``holder`` against each source: `sync --json` and the serving
    side's own session time (its inbound.json)."""
    checks: dict[str, list[dict[str, float]]] = {kind: [] for kind in sources}
    server: dict[str, list[float]] = {kind: [] for kind in sources}
    for address, _ in sources.values():
        sync_json(holder, address, BIG)  # its own state statement goes first (not a check)
    for _ in range(max(5, args.runs)):
        for kind, (address, root) in sources.items():
            checks[kind].append(sync_json(holder, address, BIG))
            server[kind].append(server_seconds(root))
    runs = len(server["hub"])
    print(f"\n3. in-sync check of {args.big:,} entries (`sync --json`, median of {runs})")
    for kind, rows in checks.items():
        assert all(r["entries_received"] == r["entries_sent"] == 0 for r in rows), rows
        size = med([r["bytes_sent"] + r["bytes_received"] for r in rows])
        client = med([r["seconds"] for r in rows]) * 1000
        served = [round(s * 1000, 1) for s in server[kind]]
        print(f"   against the {kind:6}: {size:.0f} B ({rows[0]['bytes_sent']} out, "
              f"{rows[0]['bytes_received']} in), {rows[0]['round_trips']} round trip(s), "
              f"client {client:.1f} ms; server side median {med(served):.1f} ms of "
              f"{served}")  # fmt: skip
    print("   (goal for the hub: 1 round trip, < 200 B each way, < 20 ms server time)")


async def fresh_db(server: str) -> str:
    conn = await asyncpg.connect(server)
    try:
        await conn.execute("CREATE DATABASE lifeline_hub_bench")
    finally:
        await conn.close()
    return database_url(server, "lifeline_hub_bench")


async def hub_rows(url: str) -> tuple[int, int]:
    conn = await asyncpg.connect(url)
    try:
        n = await conn.fetchval("SELECT n FROM lines WHERE name = 'ledger'")
        signed = await conn.fetchval(
            "SELECT count(*) FROM attestations a JOIN lines l USING (line_id) "
            "WHERE l.name = 'ledger' AND a.role = 'author'"
        )
        return int(n), int(signed)
    finally:
        await conn.close()


def run(args: argparse.Namespace, server: str) -> None:
    url = asyncio.run(fresh_db(server))
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    with tempfile.TemporaryDirectory() as name, ExitStack() as stack:
        tmp = Path(name)
        roots = [tmp / "hub1", tmp / "hub2"]
        for root in roots:
            make_root(root, ["ledger", BIG])
        hubs = [stack.enter_context(serve(root, "--store", url)) for root in roots]
        print(f"two hub processes on one database: {hubs[0][1]}, {hubs[1][1]}")
        if args.nodes:
            written = fleet(args, tmp, hubs)
            n, signed = asyncio.run(hub_rows(url))
            print(f"   the hub's database: {n} entries, {signed} author signatures "
                  f"(written: {written})")  # fmt: skip
        if args.big:
            big_line(args, tmp, url, hubs[0][1], roots[0])
    if args.append:
        print(f"\n4. batched append (bench/hub_store.py {args.append} 1000), PostgreSQL fsync on:")
        asyncio.run(append_bench(args.append, 1000, server))
    print(f"\nuptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=20, help="fleet nodes (0: skip 1.)")
    parser.add_argument("--rounds", type=int, default=3, help="sessions per fleet node")
    parser.add_argument("--per", type=int, default=5, help="notes each node appends a round")
    parser.add_argument("--big", type=int, default=100_000, help="entries for 2. and 3. (0: skip)")
    parser.add_argument(
        "--runs", type=int, default=3, help="initial syncs from each source (0: only the check)"
    )
    parser.add_argument("--append", type=int, default=20_000, help="entries for 4. (0: skip)")
    parser.add_argument(
        "--source",
        type=Path,
        help="for 2. and 3.: copy a line of this node root instead of writing --big entries "
        "(e.g. the 1M line of bench/truth_ledger.py; its entries are unsigned)",
    )
    parser.add_argument("--source-line", default="ledger", help="the line of --source")
    args = parser.parse_args()
    given = os.environ.get("LIFELINE_TEST_PG")
    if given:
        run(args, given)
        return
    bin_dir = server_binaries()
    if bin_dir is None:
        raise SystemExit("no PostgreSQL binaries: apt-get install postgresql, or LIFELINE_TEST_PG")
    cluster = Cluster(bin_dir, durable=True)
    cluster.start()
    try:
        run(args, cluster.url)
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
