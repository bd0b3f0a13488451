"""The in-sync check at steady state, through the real CLI and `serve`.

    python bench/steady_state_live.py [--n 100000] [--checks 20]
    python bench/steady_state_live.py --initial [--n 1000000]

Builds a line of n entries (a chain of notes, ~250 bytes each) on node A, copies it to node
B, starts B as `lifeline-mesh serve --insecure --no-discovery`, then runs
`lifeline-mesh sync B --json` from A: once (the first check after the upgrade computes each
side's whole-set summary from the rows), then ``--checks`` more. Prints, per check, the
session time `sync --json` reports (`seconds`), round trips and protocol bytes each way, the
serving process's CPU per check (from /proc, less its idle rate measured just before), and
its RSS before and after. Both nodes have no node identity (no summaries are signed: see
docs/benchmarks.md on the notary). Figures, not pass/fail.

With ``--initial``, A starts empty instead: one `sync` pulls the whole line from B (a new
node joining), and B's RSS is sampled every 0.1 s during the session and read after it.

To compare with another tree, run this script with that tree first on PYTHONPATH: the
nodes run with the code this script imported.
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
import threading
import time
from pathlib import Path

from memory import fill, rss
from serving import TREE, serving

from lifeline.home import Home
from lifeline_mesh.home.config import NodeConfig
from lifeline_mesh.home.node_home import NodeHome

IDLE_SAMPLE_S = 3.0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cli_sync(root: Path, address: str) -> dict[str, float]:
    """`lifeline-mesh sync ADDRESS --json` (no mesh here: plain loopback, no identity), with
    the whole process's wall time and peak RSS (``process_s``, ``process_mb``)."""
    argv = [sys.executable, "-m", "lifeline_mesh", "--root", str(root), "sync", address]
    timer = ["/usr/bin/time", "-f", "TIME %e %M"]
    out = subprocess.run(
        [*timer, *argv, "--insecure", "--json"],
        capture_output=True,
        text=True,
        timeout=3600,
        cwd=TREE,
        env={**os.environ, "PYTHONPATH": str(TREE)},
    )
    if out.returncode != 0:
        raise SystemExit(f"sync failed: {out.stderr}")
    [report] = json.loads(out.stdout)
    took, kb = out.stderr.strip().splitlines()[-1].split()[1:]
    return {**report, "process_s": float(took), "process_mb": int(kb) / 1024}


def initial(n: int) -> None:
    """`serve` B holds n entries; A, empty, pulls them all with one `sync`."""
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a", Path(tmp) / "b"
        asyncio.run(fill(Home(b).line_path("ledger"), n))
        for root in (a, b):
            NodeConfig(shared_lines=["ledger"]).save(NodeHome(root))
        os.sync()
        with serving(b) as (server, address):
            idle_rss = rss(server.pid)[0]
            samples: list[int] = []
            done = threading.Event()

            def sample() -> None:
                while not done.wait(0.1):
                    samples.append(rss(server.pid)[0])

            sampler = threading.Thread(target=sample)
            sampler.start()
            try:
                report = cli_sync(a, address)
            finally:
                done.set()
                sampler.join()
            time.sleep(1.0)
            after, peak = rss(server.pid)
            checks = [cli_sync(a, address) for _ in range(5)]
    print(
        f"initial sync of {n:,} entries pulled from `serve` by `lifeline-mesh sync`: "
        f"{report['seconds']:.1f}s, {report['entries_received']:,} received, "
        f"{report['round_trips']} round trips, {report['bytes_sent']:,} B sent / "
        f"{report['bytes_received']:,} B received; whole `sync` process "
        f"{report['process_s']:.1f} s, peak RSS {report['process_mb']:.0f} MB"
    )
    secs = sorted(r["seconds"] * 1000 for r in checks)
    print(
        f"  in-sync checks after it (5): session median {statistics.median(secs):.1f} ms, "
        f"round trips {sorted({r['round_trips'] for r in checks})}, bytes out "
        f"{sorted({r['bytes_sent'] for r in checks})}, in "
        f"{sorted({r['bytes_received'] for r in checks})}; whole process median "
        f"{statistics.median(r['process_s'] for r in checks):.2f} s, peak RSS "
        f"{max(r['process_mb'] for r in checks):.0f} MB"
    )
    print(
        f"  serve RSS: idle {idle_rss} MB, highest sample {max(samples, default=0)} MB, "
        f"peak (VmHWM) {peak} MB, 1 s after {after} MB"
    )


def run(n: int, checks: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a", Path(tmp) / "b"
        started = time.perf_counter()
        asyncio.run(fill(Home(a).line_path("ledger"), n))
        print(f"built {n:,} entries in {time.perf_counter() - started:.1f}s (code: {TREE})")
        Home(b).line_path("ledger").parent.mkdir(parents=True)
        shutil.copy(Home(a).line_path("ledger"), Home(b).line_path("ledger"))
        for root in (a, b):
            NodeConfig(shared_lines=["ledger"]).save(NodeHome(root))
        os.sync()
        with serving(b) as (server, address):
            idle_rss = rss(server.pid)[0]
            first = cli_sync(a, address)
            print(
                f"first check (summaries computed from the rows where missing): "
                f"{first['seconds'] * 1000:.0f} ms, {first['round_trips']} RT, "
                f"{first['bytes_sent']} / {first['bytes_received']} B"
            )
            before, t0 = cpu_seconds(server.pid), time.monotonic()
            time.sleep(IDLE_SAMPLE_S)
            idle_rate = (cpu_seconds(server.pid) - before) / (time.monotonic() - t0)
            reports = []
            before, t0 = cpu_seconds(server.pid), time.monotonic()
            for _ in range(checks):
                reports.append(cli_sync(a, address))
            elapsed = time.monotonic() - t0
            cpu = cpu_seconds(server.pid) - before - idle_rate * elapsed
            after_rss, peak_rss = rss(server.pid)
    secs = [r["seconds"] * 1000 for r in reports]
    print(f"{checks} in-sync checks of {n:,} entries through `lifeline-mesh sync --json`:")
    print(
        f"  session time median {statistics.median(secs):.1f} ms (min {min(secs):.1f}, "
        f"max {max(secs):.1f}); round trips {sorted({r['round_trips'] for r in reports})}; "
        f"bytes out {sorted({r['bytes_sent'] for r in reports})}, "
        f"in {sorted({r['bytes_received'] for r in reports})}"
    )
    print(
        f"  serving side: {cpu / checks * 1000:.1f} ms CPU per check "
        f"(idle rate {idle_rate * 100:.2f}% of a core subtracted); RSS idle {idle_rss} MB, "
        f"after {after_rss} MB, peak {peak_rss} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--checks", type=int, default=20)
    parser.add_argument("--initial", action="store_true", help="time one initial sync instead")
    args = parser.parse_args()
    if args.initial:
        initial(args.n)
    else:
        run(args.n, args.checks)


if __name__ == "__main__":
    main()
