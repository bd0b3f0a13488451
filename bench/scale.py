"""Benchmark: every read command of the `lifeline` CLI on a large line, as a user runs it.

Builds a line of N entries with bench/truth_ledger.py (corrections, 50 threads of
checkpoints, decisions, open items, pins), then runs each command as a whole process and
prints its wall time (median of --repeat runs) and the peak RSS of the process tree.
`history | head -3` runs through a real pipe, as a user types it. Prints figures; not a
pass/fail test.

    .venv/bin/python bench/scale.py --sizes 100000 1000000
    .venv/bin/python bench/scale.py --sizes 1000000 --keep /tmp/scale   # reuse the line later
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from context import timed

__all__ = ["main"]

LIFELINE = [sys.executable, "-m", "lifeline"]
QUERY = "refund latency webhook"


def _commands() -> list[tuple[str, list[str]]]:
    me = " ".join(LIFELINE)
    return [
        ("context (first)", [*LIFELINE, "context", "--budget", "8000"]),
        ("context (warm)", [*LIFELINE, "context", "--budget", "8000"]),
        ("recall (warm)", [*LIFELINE, "recall", QUERY]),
        ("verify", [*LIFELINE, "verify"]),
        ("history | head -3", ["sh", "-c", f"{me} history | head -3"]),
        ("history --json", [*LIFELINE, "history", "--json"]),
        ("history --limit 20", [*LIFELINE, "history", "--limit", "20"]),
        ("render", [*LIFELINE, "render"]),
    ]


def _row(n: int, name: str, runs: list[tuple[float, float]]) -> str:
    secs = statistics.median(r[0] for r in runs)
    rss = max(r[1] for r in runs)
    return f"| {n:,} | {name} | {secs:.3f} s | {rss:.0f} MiB |"


def bench_size(n: int, repeat: int, timeout: float, work: Path) -> None:
    target = work / str(n)
    if not (target / "ours" / ".lifeline" / "ledger.db").exists():
        generator = Path(__file__).resolve().parent / "truth_ledger.py"
        start = time.perf_counter()
        subprocess.run([sys.executable, str(generator), str(n), str(target)], check=True)
        print(f"(generated {n:,} entries in {time.perf_counter() - start:.1f} s)", flush=True)
    ours = target / "ours"
    for name, cmd in _commands():
        runs = []
        times = 1 if name.endswith("(first)") else repeat
        for _ in range(times):
            took, rss, done = timed(cmd, ours, timeout)
            if not done:
                print(f"| {n:,} | {name} | > {timeout:.0f} s | – |", flush=True)
                break
            runs.append((took, rss))
        if runs:
            print(_row(n, name, runs), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (median)")
    parser.add_argument("--timeout", type=float, default=300.0, help="cap per run, s")
    parser.add_argument("--keep", type=Path, help="build (or reuse) the lines in this folder")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="lifeline-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    print("| entries | command | time (median) | peak RSS |")
    print("| ---: | --- | ---: | ---: |")
    try:
        for n in args.sizes:
            bench_size(n, args.repeat, args.timeout, work)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
