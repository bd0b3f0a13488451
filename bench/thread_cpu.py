"""Every thread's CPU of the `lifeline-mesh` processes on this machine, while they run.

    python bench/thread_cpu.py [--seconds 150] [--every 1.0] [--timeline]

Run it beside a benchmark (e.g. ``bench/full_sync.py``): it reads ``/proc/PID/task/*/stat``
of each `lifeline-mesh sync`, `serve` and helper process every ``--every`` seconds for
``--seconds``, then prints each process's CPU and its busiest threads. With
``--timeline``, also one line per sample: the cores each kind of process used in it
(``sync-main`` is the `sync` process's event loop thread, ``sync-threads`` the rest of
it: the store thread, gRPC's). Decision 0108 keeps the figures. Prints figures; not a
test.
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
Key = tuple[str, int, int]  # (kind, pid, tid)


def _kind(cmdline: str) -> str | None:
    if "lifeline_mesh.helpers.worker" in cmdline:
        return "helper"
    if "lifeline_mesh" not in cmdline and "lifeline-mesh" not in cmdline:
        return None
    words = cmdline.split()
    if "sync" in words:
        return "sync"
    if "serve" in words:
        return "serve"
    return None


def sample() -> dict[Key, float]:
    """CPU seconds so far of every thread of every process of interest."""
    out: dict[Key, float] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            kind = _kind((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode())
            if kind is None:
                continue
            for task in (proc / "task").iterdir():
                stat = (task / "stat").read_text()
                fields = stat[stat.rindex(")") + 2 :].split()
                cpu = (int(fields[11]) + int(fields[12])) / TICK  # utime + stime
                out[(kind, int(proc.name), int(task.name))] = cpu
        except (OSError, ValueError, IndexError):
            continue  # it exited while we read it
    return out


def _group(kind: str, pid: int, tid: int) -> str:
    if kind == "sync":
        return "sync-main" if pid == tid else "sync-threads"
    return kind


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=150.0)
    parser.add_argument("--every", type=float, default=1.0)
    parser.add_argument("--timeline", action="store_true", help="print each sample's cores")
    args = parser.parse_args()
    last = sample()
    total: dict[Key, float] = dict(last)
    started = time.monotonic()
    while time.monotonic() - started < args.seconds:
        time.sleep(args.every)
        now = sample()
        used: Counter[str] = Counter()
        for key, cpu in now.items():
            used[_group(*key)] += cpu - last.get(key, 0.0)
            total[key] = cpu
        last = now
        if args.timeline and sum(used.values()) > 0.05 * args.every:
            cores = " ".join(f"{k}={v / args.every:.2f}" for k, v in sorted(used.items()))
            print(f"{time.monotonic() - started:6.0f} s  {cores}", flush=True)
    per_process: Counter[tuple[str, int]] = Counter()
    for (kind, pid, _tid), cpu in total.items():
        per_process[(kind, pid)] += cpu
    for (kind, pid), cpu in per_process.most_common():
        threads = sorted(
            ((cpu_t, tid) for (k, p, tid), cpu_t in total.items() if (k, p) == (kind, pid)),
            reverse=True,
        )[:3]
        busiest = ", ".join(f"{tid}: {c:.1f} s" for c, tid in threads if c >= 0.1)
        print(f"{kind} {pid}: {cpu:.1f} s of CPU (busiest threads {busiest})")


if __name__ == "__main__":
    main()
