"""The fleet of bench/hub.py: N nodes, each its own process on its own SQLite root, writing
signed notes and syncing with two hub processes on one PostgreSQL database.

Each node is this file run as a worker (`python bench/hub_fleet.py ROOT HUB1 HUB2 INDEX
ROUNDS PER`): it makes its root (a node key, the line `ledger` shared), prints `ready`, waits
for `go` on stdin, then ROUNDS times appends PER signed notes (as `lifeline log` writes them)
and syncs once with a hub (alternating, starting with INDEX's parity), prints its timings as
JSON, waits for `converge`, syncs once with the other hub and prints how many entries it
holds. The parent (bench/hub.py) starts them all before timing anything, so interpreter
start-up is not counted.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from lifeline.home import Home
from lifeline.ledger import Draft, Ledger
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.config import NodeConfig
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.node.root import Node
from lifeline_mesh.notary.sign import AuthorHook

__all__ = ["FleetResult", "make_root", "run_fleet"]

LINE = "ledger"


def make_root(root: Path, lines: list[str]) -> NodeIdentity:
    """A node root sharing ``lines``, with a node key (its writes are signed)."""
    home = NodeHome(root)
    Home(root).prepare()
    NodeConfig(shared_lines=lines).save(home)
    identity, _ = NodeIdentity.load_or_create(home)
    return identity


async def _write(root: Path, identity: NodeIdentity, texts: list[str]) -> None:
    async with await SqliteStore.open(Home(root).line_path(LINE), create=True) as store:
        ledger = Ledger(store, hooks=[AuthorHook(identity)])
        for text in texts:
            await ledger.append(Draft("note", text))


async def _count(root: Path) -> int:
    async with await SqliteStore.open(Home(root).line_path(LINE)) as store:
        return (await store.entry_totals()).count


async def _worker(root: Path, hubs: list[str], index: int, rounds: int, per: int) -> None:
    identity = make_root(root, [LINE])
    await _write(root, identity, [])  # the line file exists before timing starts
    node = Node(NodeHome(root), insecure=True)
    print("ready", flush=True)
    assert sys.stdin.readline().strip() == "go"
    sessions: list[dict[str, object]] = []
    for r in range(rounds):
        await _write(root, identity, [f"{root.name} round {r} note {k}" for k in range(per)])
        hub = hubs[(index + r) % 2]
        started = time.perf_counter()
        error = await _sync(node, hub)
        took = time.perf_counter() - started
        sessions.append({"hub": hub, "seconds": took, "error": error})
    print(json.dumps({"sessions": sessions}), flush=True)
    assert sys.stdin.readline().strip() == "converge"
    errors = []
    for k in range(4):  # the other hub first; a failed session is tried again, alternating
        error = await _sync(node, hubs[(index + rounds + k) % 2])
        if error is None:
            break
        errors.append(error)
    print(json.dumps({"count": await _count(root), "errors": errors}), flush=True)


async def _sync(node: Node, hub: str) -> str | None:
    """One session; None, or why it failed (the fleet goes on and reports it)."""
    try:
        await node.sync(hub, [LINE])
    except (Exception, asyncio.CancelledError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


@dataclass
class FleetResult:
    nodes: int
    written: int
    write_seconds: float  # every node's rounds, from `go` to the last one done
    converge_seconds: float  # from then until every node holds every entry
    sessions: dict[str, int]  # per hub address, in the write phase
    session_seconds: list[float]  # client-side, every session of the write phase
    counts: list[int]  # entries each node holds at the end
    failed: dict[str, list[str]]  # per hub address, why sessions failed (write phase)
    converge_failed: list[str]  # sessions of the convergence phase that failed (tried again)


def run_fleet(
    tmp: Path, hubs: list[str], nodes: int, rounds: int, per: int, on_phase: object = None
) -> FleetResult:
    """Start ``nodes`` workers, time the write phase and convergence."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    worker = [sys.executable, __file__]
    procs = [
        subprocess.Popen(
            [*worker, str(tmp / f"node{i:03d}"), *hubs, str(i), str(rounds), str(per)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(nodes)
    ]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        if callable(on_phase):
            on_phase("write")
        started = time.perf_counter()
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        reports = [json.loads(p.stdout.readline()) for p in procs if p.stdout]
        wrote = time.perf_counter()
        if callable(on_phase):
            on_phase("converge")
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("converge\n")
            p.stdin.flush()
        ends = [json.loads(p.stdout.readline()) for p in procs if p.stdout]
        counts = [int(end["count"]) for end in ends]
        converged = time.perf_counter()
        for p in procs:
            assert p.wait(timeout=120) == 0, "a fleet node failed"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    sessions = {hub: 0 for hub in hubs}
    failed: dict[str, list[str]] = {hub: [] for hub in hubs}
    seconds: list[float] = []
    for report in reports:
        for s in report["sessions"]:
            sessions[s["hub"]] += 1
            seconds.append(float(s["seconds"]))
            if s["error"] is not None:
                failed[s["hub"]].append(s["error"])
    return FleetResult(
        nodes,
        nodes * rounds * per,
        wrote - started,
        converged - wrote,
        sessions,
        seconds,
        counts,
        failed,
        [e for end in ends for e in end["errors"]],
    )


if __name__ == "__main__":
    root_arg, hub1, hub2, index_arg, rounds_arg, per_arg = sys.argv[1:7]
    asyncio.run(
        _worker(Path(root_arg), [hub1, hub2], int(index_arg), int(rounds_arg), int(per_arg))
    )
