"""Every thread's CPU of the `lifeline-mesh` processes on this machine, while they run.

    python bench/thread_cpu.py [--seconds 150] [--every 1.0] [--timeline] [--states]

Run it beside a benchmark (e.g. ``bench/full_sync.py``): it reads ``/proc/PID/task/*/stat``
of each `lifeline-mesh sync`, `serve` and helper process every ``--every`` seconds for
``--seconds``, then prints each process's CPU and its busiest threads. With
``--timeline``, also one line per sample: the cores each kind of process used in it
(``sync-main`` is the `sync` process's event loop thread, ``sync-threads`` the rest of
it: the store thread, gRPC's). With ``--states``, each thread's state is also read every
20 ms (running, sleeping, in a disk wait, and the kernel function it waits in), and the
busiest threads' shares are printed: whether a thread that is not busy all the time waits
on the disk, a lock or its work. Decision 0108 keeps the figures. Prints figures; not a
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
STATE_EVERY = 0.02


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


def thread_states(keys: list[Key]) -> dict[Key, str]:
    """Each thread's state now: ``R`` (running or runnable), or ``S``/``D`` (asleep, in
    a disk wait) with the kernel function it waits in."""
    out: dict[Key, str] = {}
    for key in keys:
        _, pid, tid = key
        task = Path(f"/proc/{pid}/task/{tid}")
        try:
            stat = (task / "stat").read_text()
            state = stat[stat.rindex(")") + 2]
            wchan = (task / "wchan").read_text().strip()
        except (OSError, ValueError, IndexError):
            continue
        out[key] = state if state == "R" or wchan in ("", "0") else f"{state} {wchan}"
    return out


def _wait(seconds: float, keys: list[Key], seen: dict[Key, Counter[str]] | None) -> None:
    """Sleep ``seconds``; with ``seen``, reading the threads' states every 20 ms."""
    if seen is None:
        time.sleep(seconds)
        return
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        for key, state in thread_states(keys).items():
            seen.setdefault(key, Counter())[state] += 1
        time.sleep(STATE_EVERY)


def _shares(states: Counter[str]) -> str:
    count = sum(states.values())
    return ", ".join(f"{name} {n / count:.0%}" for name, n in states.most_common(4))


def _group(kind: str, pid: int, tid: int) -> str:
    if kind == "sync":
        return "sync-main" if pid == tid else "sync-threads"
    return kind


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=150.0)
    parser.add_argument("--every", type=float, default=1.0)
    parser.add_argument("--timeline", action="store_true", help="print each sample's cores")
    parser.add_argument(
        "--states", action="store_true", help="read each thread's state every 20 ms too"
    )
    args = parser.parse_args()
    last = sample()
    total: dict[Key, float] = dict(last)
    seen: dict[Key, Counter[str]] | None = {} if args.states else None
    started = time.monotonic()
    while time.monotonic() - started < args.seconds:
        _wait(args.every, list(last), seen)
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
        for cpu_t, tid in threads if seen else []:
            states = seen.get((kind, pid, tid)) if seen else None
            if states and cpu_t >= 0.1:
                print(f"    {tid}: {_shares(states)}")


if __name__ == "__main__":
    main()
