"""Benchmark: `lifeline context`, `recall` and `verify` against lifeline-context 0.6.1.

Generates the same ledger (bench/truth_ledger.py) in both tools' formats at each size, runs
each command as a subprocess, and prints wall time (median of --repeat runs) and the peak
RSS of the child. Our `context` is timed cold (first read folds the whole line and saves the
snapshot) and warm (later reads fold only what is new). 0.6.1 runs are capped by --timeout
and reported as "> N s" when they hit it. Prints figures; not a pass/fail test.

    .venv/bin/python bench/context.py --sizes 1000 10000 100000
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["main"]

OURS = [sys.executable, "-m", "lifeline"]
LC = ["/tmp/lcvenv/bin/lifeline"]
QUERY = "refund latency webhook"


def timed(cmd: list[str], cwd: Path, timeout: float) -> tuple[float, float, bool]:
    """(seconds, peak RSS MiB, finished) of one run."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = start + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            proc.kill()
            os.wait4(proc.pid, 0)
            return timeout, 0.0, False
        time.sleep(0.02)  # polling a child's exit, not synchronising tests
    took = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):  # verify exits 1 when it finds problems; anything else is a bug
        raise SystemExit(
            f"{cmd} failed ({code}): {proc.stderr.read().decode()[:500] if proc.stderr else ''}"
        )
    return took, usage.ru_maxrss / 1024, True


def median(cmd: list[str], cwd: Path, repeat: int, timeout: float) -> tuple[str, float, float]:
    runs = []
    for _ in range(repeat):
        took, rss, done = timed(cmd, cwd, timeout)
        if not done:
            return f"> {timeout:.0f} s", timeout, float("nan")
        runs.append((took, rss))
    secs = statistics.median(r[0] for r in runs)
    return f"{secs:.3f} s", secs, max(r[1] for r in runs)


def bench_size(n: int, repeat: int, timeout: float, work: Path) -> list[str]:
    target = work / str(n)
    generator = Path(__file__).resolve().parent / "truth_ledger.py"
    subprocess.run([sys.executable, str(generator), str(n), str(target)], check=True)
    ours, lc = target / "ours", target / "lc"
    budget = ["--budget", "8000"]
    rows = []
    cold = median([*OURS, "context", *budget], ours, 1, timeout)
    cases = [
        ("context (cold)", cold, None),
        (
            "context (warm)",
            median([*OURS, "context", *budget], ours, repeat, timeout),
            median([*LC, "context", *budget], lc, 1 if n >= 100_000 else repeat, timeout),
        ),
        (
            "recall",
            median([*OURS, "recall", QUERY], ours, repeat, timeout),
            median([*LC, "recall", QUERY], lc, 1 if n >= 100_000 else repeat, timeout),
        ),
        (
            "verify",
            median([*OURS, "verify"], ours, repeat, timeout),
            median([*LC, "verify"], lc, 1 if n >= 100_000 else repeat, timeout),
        ),
    ]
    for name, mine, theirs in cases:
        if theirs is None:
            rows.append(f"| {n:,} | {name} | {mine[0]} | {mine[2]:.0f} MiB | – | – | – |")
            print(rows[-1], flush=True)
            continue
        ratio = theirs[1] / mine[1]
        prefix = "> " if theirs[0].startswith(">") else ""
        their_rss = "–" if theirs[2] != theirs[2] else f"{theirs[2]:.0f} MiB"
        rows.append(
            f"| {n:,} | {name} | {mine[0]} | {mine[2]:.0f} MiB | {theirs[0]} | "
            f"{their_rss} | {prefix}{ratio:.1f}× |"
        )
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (median)")
    parser.add_argument("--timeout", type=float, default=180.0, help="cap per 0.6.1 run, s")
    args = parser.parse_args()
    if not Path(LC[0]).exists():
        raise SystemExit(f"lifeline-context 0.6.1 is not installed at {LC[0]}")
    work = Path(tempfile.mkdtemp(prefix="lifeline-bench-"))
    print(
        "| entries | command | lifeline | peak RSS | lifeline-context 0.6.1 | peak RSS | speed-up |"
    )
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    try:
        for n in args.sizes:
            bench_size(n, args.repeat, args.timeout, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
