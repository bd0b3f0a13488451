"""Commands on a laptop and on a hub root, through the real CLI, this tree beside another.

    python bench/hub_root.py [--entries 20000] [--runs 3] [--baseline TREE]

One origin node (`lifeline-mesh init`, so every entry carries its author signature) holds
``--entries`` signed entries. For each tree, alternating, ``--runs`` times:

* **laptop**: a fresh signed node syncs the line from the origin's `serve --insecure`
  (the signed initial sync), syncs again (the in-sync check: wall, round trips, bytes), and
  runs `lifeline context` (wall, and the entries the context says it holds);
* **hub root**: a fresh database and a root made a hub process with `hub init --store URL`,
  `serve --insecure` on it; the origin syncs its line into the hub (the signed initial
  sync), syncs again (the in-sync check), and `lifeline context` runs on the hub root.

Subprocesses of the other tree run with ``PYTHONPATH`` and their working folder set to it.
PostgreSQL: ``LIFELINE_TEST_PG=postgresql://…``, else a throwaway cluster (tests/support/
pg_server.py). Prints medians per tree and the ratios; not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncpg
from serving import TREE
from steady_state import fill

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository's tests/
from tests.support.pg_server import Cluster, database_url, server_binaries


def _env(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    if tree != TREE:
        env["PYTHONPATH"] = str(tree)
    return env


def cli(tree: Path, root: Path, module: str, *args: str) -> tuple[str, float]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", module, "--root", str(root), *args],
        capture_output=True, text=True, timeout=900, cwd=tree, env=_env(tree),
    )  # fmt: skip
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{module} {' '.join(args)} failed ({tree}): {done.stderr.strip()}")
    return done.stdout, took


@contextmanager
def serving(tree: Path, root: Path) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(root), "serve", "--insecure",
         "--no-discovery", "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, text=True, cwd=tree, env=_env(tree),
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("listening on "):
            raise SystemExit(f"serve did not start on {root} ({tree})")
        yield line.split()[-1]
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def sync(tree: Path, root: Path, address: str) -> tuple[dict[str, object], float]:
    out, took = cli(tree, root, "lifeline_mesh", "sync", "--insecure", "--json", address)
    report: dict[str, object] = json.loads(out)[0]
    return report, took


def context(tree: Path, root: Path) -> tuple[int, float]:
    """`lifeline context`: the entries it says the line holds, and its wall time."""
    out, took = cli(tree, root, "lifeline", "context")
    found = re.search(r"([\d,]+) entr(?:y|ies)", out)
    return (int(found.group(1).replace(",", "")) if found else 0), took


def signed_root(tree: Path, root: Path) -> None:
    root.mkdir(parents=True)
    cli(tree, root, "lifeline", "init")
    cli(tree, root, "lifeline_mesh", "init")
    cli(tree, root, "lifeline_mesh", "share", "ledger")


async def fresh_db(server: str) -> str:
    name = f"hub_root_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(server)
    try:
        await conn.execute(f"CREATE DATABASE {name}")
    finally:
        await conn.close()
    return database_url(server, name)


def new_hub_root(server: str, hub: Path, tree: Path = TREE) -> str:
    """``hub`` made a hub root (``tree``'s `hub init` and `init`) on a fresh database of
    ``server``; its URL."""
    hub.mkdir()
    url = asyncio.run(fresh_db(server))
    cli(tree, hub, "lifeline_mesh", "hub", "init", "--store", url)
    cli(tree, hub, "lifeline", "init")
    return url


def laptop_run(tree: Path, base: Path, origin_address: str) -> dict[str, float]:
    node = base / f"laptop-{uuid.uuid4().hex[:8]}"
    signed_root(tree, node)
    first, t_sync = sync(tree, node, origin_address)
    check, t_check = sync(tree, node, origin_address)
    entries, t_ctx = context(tree, node)
    return {
        "sync_s": t_sync, "received": float(first["entries_received"]),  # type: ignore[arg-type]
        "check_s": t_check, "check_rt": float(check["round_trips"]),  # type: ignore[arg-type]
        "check_out": float(check["bytes_sent"]), "check_in": float(check["bytes_received"]),  # type: ignore[arg-type]
        "context_s": t_ctx, "context_entries": float(entries),
    }  # fmt: skip


def hub_run(tree: Path, base: Path, origin: Path, server: str) -> dict[str, float]:
    hub = base / f"hub-{uuid.uuid4().hex[:8]}"
    new_hub_root(server, hub, tree)
    cli(tree, hub, "lifeline_mesh", "share", "ledger")
    with serving(tree, hub) as address:
        first, t_sync = sync(tree, origin, address)
        check, t_check = sync(tree, origin, address)
    entries, t_ctx = context(tree, hub)
    return {
        "sync_s": t_sync, "received": float(first["entries_sent"]),  # type: ignore[arg-type]
        "check_s": t_check, "check_rt": float(check["round_trips"]),  # type: ignore[arg-type]
        "check_out": float(check["bytes_sent"]), "check_in": float(check["bytes_received"]),  # type: ignore[arg-type]
        "context_s": t_ctx, "context_entries": float(entries),
    }  # fmt: skip


def show(title: str, rows: dict[str, list[dict[str, float]]], names: dict[Path, str]) -> None:
    print(f"\n{title}")
    print("| tree | signed initial sync | in-sync check | check RT, B out/in | `context` | "
          "entries `context` sees |")  # fmt: skip
    print("| --- | ---: | ---: | --- | ---: | ---: |")
    medians: dict[str, dict[str, float]] = {}
    for name, runs in rows.items():
        m = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        medians[name] = m
        print(f"| {name} | {m['sync_s']:.2f} s | {m['check_s'] * 1000:.0f} ms | "
              f"{m['check_rt']:.0f}, {m['check_out']:.0f}/{m['check_in']:.0f} | "
              f"{m['context_s'] * 1000:.0f} ms | {m['context_entries']:.0f} |")  # fmt: skip
    if len(medians) == 2:
        (a, ma), (b, mb) = medians.items()
        print(f"ratios {a}/{b}: sync {ma['sync_s'] / mb['sync_s']:.2f}×, check "
              f"{ma['check_s'] / mb['check_s']:.2f}×, context "
              f"{ma['context_s'] / mb['context_s']:.2f}×")  # fmt: skip


def run(args: argparse.Namespace, server: str) -> None:
    trees = {TREE: "this tree"}
    if args.baseline is not None:
        trees[args.baseline.resolve()] = "baseline"
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    with tempfile.TemporaryDirectory() as name:
        base = Path(name)
        origin = base / "origin"
        signed_root(TREE, origin)
        asyncio.run(fill(origin, args.entries))
        laptop: dict[str, list[dict[str, float]]] = {n: [] for n in trees.values()}
        hub: dict[str, list[dict[str, float]]] = {n: [] for n in trees.values()}
        for k in range(args.runs):
            for tree, label in trees.items():
                with serving(tree, origin) as address:
                    laptop[label].append(laptop_run(tree, base, address))
                hub[label].append(hub_run(tree, base, origin, server))
                print(f"run {k + 1} {label}: laptop {laptop[label][-1]}, hub {hub[label][-1]}")
    show(f"laptop ({args.entries} signed entries, medians of {args.runs})", laptop, trees)
    show(f"hub root ({args.entries} signed entries, medians of {args.runs})", hub, trees)
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another tree to run side by side")
    args = parser.parse_args()
    on_a_server(lambda url: run(args, url))


def on_a_server(run: Callable[[str], None]) -> None:
    """``run(url)`` on ``LIFELINE_TEST_PG``, else on a throwaway cluster."""
    given = os.environ.get("LIFELINE_TEST_PG")
    if given:
        run(given)
        return
    bin_dir = server_binaries()
    if bin_dir is None:
        raise SystemExit("no PostgreSQL binaries: apt-get install postgresql, or LIFELINE_TEST_PG")
    cluster = Cluster(bin_dir)
    cluster.start()
    try:
        run(cluster.url)
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
