"""Propagation: time from an append on node A to its arrival on node B, loopback.

Two real `lifeline-mesh serve` processes, each with the other as a static peer (no
discovery, no command after the start). With ``--dial-only``, only B knows A (`serve
--peer A`, as a CI runner behind NAT dialing the office node; A has no address for B):
A's changes reach B over B's Watch call, and runs go both ways (A -> B, then B -> A).
Each run waits until both nodes are idle, appends one entry to the writer's line from this
process (a separate SQLite connection, as `lifeline log` would) and polls the other's line
file until the entry is there. Prints the median and spread of N
runs, and the CPU an idle serving node uses.

    .venv/bin/python bench/propagation.py --runs 30 [--mtls] [--dial-only]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lifeline.ledger import Draft, Ledger
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.peering.changes import CHANGE_POLL_S

POLL_S = 0.001  # how often this script looks at B's line (well under the figures measured)
QUIET_POLLS = 4  # poll intervals to wait between runs so each write meets idle nodes


def _cli(module: str, root: Path, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", module, "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if out.returncode != 0:
        raise SystemExit(f"{module} {' '.join(args)} failed: {out.stderr}")
    return out.stdout


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(
    root: Path, port: int, peer: int | None, *, mtls: bool
) -> tuple[subprocess.Popen[str], str]:
    """Start one node; returns it and its join address ("" unless it holds the mesh CA)."""
    argv = [sys.executable, "-m", "lifeline_mesh", "--root", str(root), "serve"]
    argv += ["--listen", f"127.0.0.1:{port}", "--no-discovery"]
    if peer is not None:
        argv += ["--peer", f"127.0.0.1:{peer}"]
    if not mtls:
        argv.append("--insecure")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("listening on"):
        proc.kill()
        raise SystemExit(f"serve did not start: {line!r} {proc.communicate()[1]}")
    join = ""
    if mtls and (root / ".lifeline" / "mesh" / "ca.key").exists():
        join = proc.stdout.readline().split()[-1]  # "join port on HOST:PORT"
    return proc, join


def _start_pair(a: Path, b: Path, *, mtls: bool, dial_only: bool) -> list[subprocess.Popen[str]]:
    pa, pb = _free_port(), _free_port()
    a_peer = None if dial_only else pb
    if not mtls:
        return [_serve(a, pa, a_peer, mtls=False)[0], _serve(b, pb, pa, mtls=False)[0]]
    _cli("lifeline_mesh", a, "init", "--new-mesh", "bench")
    node_a, join = _serve(a, pa, a_peer, mtls=True)
    token = json.loads(_cli("lifeline_mesh", a, "invite", "--json"))["token"]
    _cli("lifeline_mesh", b, "join", token, "--peer", join)
    return [node_a, _serve(b, pb, pa, mtls=True)[0]]


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _idle_cpu(pid: int, seconds: float) -> float:
    """CPU share used by an idle serving node (watcher polls, periodic checks)."""
    before, start = _cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (_cpu_seconds(pid) - before) / (time.monotonic() - start)


def _arrived(conn: sqlite3.Connection, entry_id: str) -> bool:
    return conn.execute("SELECT 1 FROM entries WHERE id = ?", (entry_id,)).fetchone() is not None


def _wait_synced(root: Path, deadline: float) -> None:
    """Until every peer of the node synced once and its Watch call to it is open."""
    while time.monotonic() < deadline:
        peers = json.loads(_cli("lifeline_mesh", root, "peers", "--json"))["peers"]
        if peers and all(p["last_sync_at"] and p.get("watching", True) for p in peers):
            return
        time.sleep(0.05)
    raise SystemExit(f"{root.name} never completed a first sync")


async def _one_run(a_line: Path, b_conn: sqlite3.Connection, n: int) -> float:
    """Append on the node of ``a_line``; seconds until ``b_conn``'s line has it."""
    async with await SqliteStore.open(a_line) as store:
        entry, _ = await Ledger(store).append(
            Draft(kind="note", summary=f"propagation probe {n}", author="bench")
        )
        start = time.monotonic()
    deadline = start + 30
    while not _arrived(b_conn, entry.id):
        if time.monotonic() > deadline:
            raise SystemExit(f"entry {n} did not arrive within 30 s")
        time.sleep(POLL_S)
    return time.monotonic() - start


def _runs(a: Path, b: Path, runs: int, both_ways: bool) -> dict[str, list[float]]:
    lines = {r: r / ".lifeline" / "ledger.db" for r in (a, b)}
    conns = {r: sqlite3.connect(f"file:{p}?mode=ro", uri=True) for r, p in lines.items()}
    times: dict[str, list[float]] = {}
    for src, dst in [(a, b), (b, a)] if both_ways else [(a, b)]:
        key = f"{src.name.upper()} -> {dst.name.upper()}"
        for n in range(runs):
            # Let the echo sync of the previous run (the receiver syncs back) finish, then
            # start at a random phase of the writer's change poll.
            time.sleep(QUIET_POLLS * CHANGE_POLL_S + random.uniform(0, CHANGE_POLL_S))
            times.setdefault(key, []).append(asyncio.run(_one_run(lines[src], conns[dst], n)))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument(
        "--mtls", action="store_true", help="a real mesh (join, mutual TLS) instead of --insecure"
    )
    parser.add_argument(
        "--idle-seconds", type=float, default=10.0, help="how long to sample an idle node's CPU"
    )
    parser.add_argument(
        "--dial-only",
        action="store_true",
        help="only B knows A (serve --peer A); time both directions",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp, "a"), Path(tmp, "b")
        for root in (a, b):
            root.mkdir()
            _cli("lifeline", root, "init")
            _cli("lifeline_mesh", root, "share", "ledger")
        procs = _start_pair(a, b, mtls=args.mtls, dial_only=args.dial_only)
        try:
            deadline = time.monotonic() + 30
            if not args.dial_only:
                _wait_synced(a, deadline)
            _wait_synced(b, deadline)
            times = _runs(a, b, args.runs, args.dial_only)
            idle = _idle_cpu(procs[0].pid, args.idle_seconds)
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=30)
    how = "B dialed A only" if args.dial_only else "each knows the other"
    print(
        f"propagation on loopback ({'mutual TLS' if args.mtls else 'plain'}; {how}), "
        f"{args.runs} runs a direction, change poll {CHANGE_POLL_S * 1000:.0f} ms"
    )
    for key, seconds in times.items():
        ms = sorted(t * 1000 for t in seconds)
        print(
            f"  {key}: median {statistics.median(ms):.1f} ms   "
            f"p90 {ms[int(0.9 * (len(ms) - 1))]:.1f} ms   min {ms[0]:.1f} ms   max {ms[-1]:.1f} ms"
        )
    print(f"  idle node A: {idle * 100:.2f}% of one core over {args.idle_seconds:g} s")


if __name__ == "__main__":
    main()
