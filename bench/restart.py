"""Restart: how soon a SIGKILLed `serve` listens again and is current with its peers.

Sets up the soak's three nodes (bench/soak.py: one mesh, mutual TLS, static peers, the
line pre-filled with ``--prefill`` signed entries on every node), lets them settle, then
``--restarts`` times: SIGKILLs node a's process group, appends one entry on a's line and
one on b's while a is down (as `lifeline log` would), starts a again and measures

* exec to ``listening on``: wall time, and the CPU of serve's process at that moment;
* listening to both entries having crossed (b holds a's, a holds b's), and the CPU of
  serve's process when they had.

Prints one line per restart and the medians::

    .venv/bin/python bench/restart.py --prefill 100000 --restarts 5
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from soak import SoakNode, _ids, _kill_all, _setup

from lifeline.home import Home
from lifeline.ledger import Draft, Ledger
from lifeline.plugins import load_append_hooks
from lifeline.store.sqlite import SqliteStore


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _append(node: SoakNode, summary: str) -> str:
    async with await SqliteStore.open(node.line) as store:
        ledger = Ledger(store, hooks=load_append_hooks(Home(node.root)))
        entry, _ = await ledger.append(Draft(kind="note", summary=summary, body=summary))
        return entry.id


def _restart(nodes: list[SoakNode], n: int) -> tuple[float, float, float, float]:
    a, b = nodes[0], nodes[1]
    a.kill()
    down_a = asyncio.run(_append(a, f"written on a while down ({n})"))
    down_b = asyncio.run(_append(b, f"written on b while a is down ({n})"))
    started = time.monotonic()
    a.start()
    listening = time.monotonic()
    assert a.proc is not None
    cpu_listen = _cpu_s(a.proc.pid)
    while down_a not in _ids(b.line) or down_b not in _ids(a.line):
        if time.monotonic() - listening > 120:
            raise SystemExit("the writes made while a was down did not cross within 120 s")
        time.sleep(0.05)
    crossed = time.monotonic()
    return listening - started, cpu_listen, crossed - listening, _cpu_s(a.proc.pid)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prefill", type=int, default=100_000, help="signed entries")
    parser.add_argument("--restarts", type=int, default=5)
    parser.add_argument("--settle", type=float, default=10.0, help="seconds before each kill")
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="restart-") as tmp:
        nodes = _setup(Path(tmp), args.prefill)
        try:
            for n in range(args.restarts):
                time.sleep(args.settle)
                row = _restart(nodes, n)
                rows.append(row)
                print(
                    f"restart {n + 1}: listening {row[0]:.2f}s after exec ({row[1]:.2f}s CPU); "
                    f"both writes crossed {row[2]:.2f}s later ({row[3]:.2f}s CPU in all)",
                    flush=True,
                )
        finally:
            _kill_all(nodes)
    med = [statistics.median(r[k] for r in rows) for k in range(4)]
    print(
        f"median of {len(rows)}: listening {med[0]:.2f}s ({med[1]:.2f}s CPU), crossed "
        f"{med[2]:.2f}s later ({med[3]:.2f}s CPU in all); prefill {args.prefill:,}"
    )
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
