"""Run one command and print its wall time, CPU and the peak memory of its whole process tree.

``/usr/bin/time -f %M`` reports the largest single process; a command that starts worker
processes (``lifeline verify`` of a large line, issue 21) holds the sum of them at once.
This samples every process of the tree (``/proc/PID/status`` VmRSS, shared pages counted in
each process: an upper bound) every 50 ms and prints the largest sum seen, with the CPU of
the command and all its children (``getrusage(RUSAGE_CHILDREN)``)::

    python bench/tree_peak.py [--out FILE] -- python -m lifeline verify

The command's stdout goes to ``--out`` (default: discarded), its stderr through.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

INTERVAL_S = 0.05


def _children(pid: int) -> list[int]:
    """The child processes of ``pid`` (``/proc/PID/task/*/children``: only the tree is
    read, not every process of the machine, so sampling costs little CPU)."""
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            text = Path(f"/proc/{pid}/task/{task}/children").read_text()
            out.extend(int(word) for word in text.split())
    except OSError:
        pass
    return out


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_rss(root: int) -> tuple[int, int, int]:
    """(sum of VmRSS in KiB, largest one, number of processes) of ``root`` and descendants."""
    todo, total, largest, n = [root], 0, 0, 0
    while todo:
        pid = todo.pop()
        rss = _rss_kib(pid)
        total, largest, n = total + rss, max(largest, rss), n + 1
        todo.extend(_children(pid))
    return total, largest, n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the command's stdout here")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    out = args.out.open("wb") if args.out else subprocess.DEVNULL
    start = time.monotonic()
    proc = subprocess.Popen(command, stdout=out)
    peak = largest = most = 0
    while proc.poll() is None:
        total, big, n = tree_rss(proc.pid)
        peak, largest, most = max(peak, total), max(largest, big), max(most, n)
        time.sleep(INTERVAL_S)
    wall = time.monotonic() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        f"{wall:.2f} s wall, user {usage.ru_utime:.2f} s, sys {usage.ru_stime:.2f} s, "
        f"cpu {usage.ru_utime + usage.ru_stime:.2f} s; peak tree RSS {peak / 1024:.0f} MB "
        f"(largest process {largest / 1024:.0f} MB, up to {most} processes); "
        f"exit {proc.returncode}",
        file=sys.stderr,
    )
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
