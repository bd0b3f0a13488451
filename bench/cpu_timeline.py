"""Where a signed initial sync spends its CPU, over time: prints figures, not a test.

    python bench/cpu_timeline.py [--n 100000] [--every 0.5]

Runs ``bench/sync_signed.py --n N`` and, every ``--every`` seconds while the receiving
node works, prints the cores used since the last line by: the sending process
(``sender``), each thread of the receiving ``serve`` process (``recv:main`` is its event
loop, ``recv:python`` its store thread), and the helper processes (``helpers``, summed).
Linux only (reads /proc).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TICKS = os.sysconf("SC_CLK_TCK")


def _cpu(stat: str) -> float:
    fields = Path(stat).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def _roles(bench_pid: int) -> dict[str, str]:
    roles = {str(bench_pid): "sender"}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "serve --insecure" in cmd:
            roles[pid] = "recv"
        elif "lifeline_mesh.helpers.worker" in cmd or "lifeline_mesh.sigworker" in cmd:
            roles[pid] = "helpers"
    return roles


def _sample(bench_pid: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for pid, role in _roles(bench_pid).items():
        try:
            if role != "recv":
                out[role] = out.get(role, 0.0) + _cpu(f"/proc/{pid}/stat")
                continue
            for tid in os.listdir(f"/proc/{pid}/task"):
                name = "main" if tid == pid else Path(f"/proc/{pid}/task/{tid}/comm").read_text()
                key = f"recv:{name.strip()[:10]}"
                out[key] = out.get(key, 0.0) + _cpu(f"/proc/{pid}/task/{tid}/stat")
        except (OSError, IndexError):
            continue
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--every", type=float, default=0.5)
    args = parser.parse_args()
    bench = subprocess.Popen(
        [sys.executable, str(HERE / "sync_signed.py"), "--n", str(args.n)],
        stdout=subprocess.PIPE,
        text=True,
    )
    started, last = time.monotonic(), _sample(bench.pid)
    while bench.poll() is None:
        time.sleep(args.every)
        now = _sample(bench.pid)
        used = {k: (v - last.get(k, 0.0)) / args.every for k, v in now.items()}
        last = now
        if sum(v for k, v in used.items() if k.startswith(("recv", "helpers"))) > 0.05:
            cells = " ".join(f"{k}={v:.2f}" for k, v in sorted(used.items()) if v > 0.01)
            print(f"{time.monotonic() - started:6.1f} s  {cells}", flush=True)
    assert bench.stdout is not None
    print(bench.stdout.read(), end="")


if __name__ == "__main__":
    main()
