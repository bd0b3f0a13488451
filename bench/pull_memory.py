"""The pulling side of an initial sync through the CLI: time, bytes and its RSS over time.

    python bench/pull_memory.py SERVED_ROOT [--checks 5]

SERVED_ROOT is a node folder whose `ledger` line is shared (e.g. one made by
``python bench/memory.py``'s ``fill`` and a ``NodeConfig(shared_lines=["ledger"])``, as
``bench/steady_state_live.py --initial`` makes it), so a large line is built once and
pulled many times. Starts ``lifeline-mesh serve --insecure --no-discovery`` on it, pulls
the line into an empty node with ``lifeline-mesh sync ADDRESS --insecure --json``, samples
the `sync` process's RSS every 0.5 s (printed as ``seconds:MB``) and its peak (VmHWM),
then runs ``--checks`` in-sync checks and reads the serving process's RSS. The nodes run
the code this script imported (put another tree first on PYTHONPATH to compare). Figures,
not pass/fail.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memory import rss
from serving import TREE, serving

from lifeline_mesh.home.config import NodeConfig
from lifeline_mesh.home.node_home import NodeHome


def _sync(root: Path, address: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "lifeline_mesh", "--root", str(root), "sync", address]
    env = {**os.environ, "PYTHONPATH": str(TREE)}
    return subprocess.Popen(
        [*argv, "--insecure", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=TREE,
        env=env,
    )


def _read(proc: subprocess.Popen[str]) -> dict[str, float]:
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"sync failed: {err}")
    [report] = json.loads(out)
    return dict(report)


def run(served: Path, checks: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, serving(served) as (server, address):
        puller = Path(tmp) / "a"
        puller.mkdir()
        NodeConfig(shared_lines=["ledger"]).save(NodeHome(puller))
        started = time.monotonic()
        proc = _sync(puller, address)
        timeline: list[tuple[float, int]] = []
        peak = 0
        while proc.poll() is None:
            try:
                now, high = rss(proc.pid)
            except (OSError, KeyError):
                break
            peak = max(peak, high)
            timeline.append((time.monotonic() - started, now))
            time.sleep(0.5)
        report = _read(proc)
        wall = time.monotonic() - started
        after = [_read(_sync(puller, address)) for _ in range(checks)]
        serve_now, serve_peak = rss(server.pid)
    print(
        f"initial sync pulled by `lifeline-mesh sync`: {report['seconds']:.1f} s session, "
        f"{report['entries_received']:,} received, {report['round_trips']} round trips, "
        f"{report['bytes_sent']:,} B sent / {report['bytes_received']:,} B received; "
        f"process {wall:.1f} s, peak RSS {peak} MB"
    )
    step = max(1, len(timeline) // 40)
    print("  RSS (s:MB): " + " ".join(f"{t:.0f}:{mb}" for t, mb in timeline[::step]))
    for r in after:
        print(
            f"  in-sync check: {r['seconds'] * 1000:.1f} ms session, {r['round_trips']} round "
            f"trip(s), {r['bytes_sent']} / {r['bytes_received']} B"
        )
    print(f"  serve RSS now {serve_now} MB, peak {serve_peak} MB")
    print(f"  load average {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("served", type=Path, help="a node folder sharing the line `ledger`")
    parser.add_argument("--checks", type=int, default=5)
    args = parser.parse_args()
    if not (args.served / ".lifeline").is_dir():
        raise SystemExit(f"{args.served} holds no .lifeline folder; give a node folder")
    run(args.served, args.checks)


if __name__ == "__main__":
    main()
