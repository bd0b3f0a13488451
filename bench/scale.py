"""Benchmark: every read command of the `lifeline` CLI on a large line, and `log` and `pin`,
as a user runs them.

Builds a line of N entries with bench/truth_ledger.py (corrections, 50 threads of
checkpoints, decisions, open items, pins; the same entries also in lifeline-context 0.6's
SQLite layout), then runs each command as a whole process and prints its wall time (median
of --repeat runs), CPU time (user + system) and peak RSS. `history | head -3` runs through
a real pipe, as a user types it. `import` reads the lifeline-context copy into a fresh
folder each run; `render (after 1 append)` times the render that follows one `lifeline
log` (untimed); `log (checked)` is a note written after the file's last integrity check
was forgotten, `log` one written while that check is believed (decision 0104). With --lc
(lifeline-context's `lifeline` executable) its `rebuild` and `verify` run on its copy too.
Prints figures; not a pass/fail test.

    .venv/bin/python bench/scale.py --sizes 100000 1000000
    .venv/bin/python bench/scale.py --sizes 1000000 --keep /tmp/scale   # reuse the line later
    .venv/bin/python bench/scale.py --sizes 100000 --keep /tmp/scale --only render import
    PYTHONPATH=TREE .venv/bin/python bench/scale.py ...   # the commands run TREE's code
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
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


Step = tuple[str, list[str], str, list[str] | None]  # name, command, folder, untimed setup


def _newest_id(db: Path) -> str:
    conn = sqlite3.connect(db)
    try:
        return str(conn.execute("SELECT id FROM entries ORDER BY seq DESC LIMIT 1").fetchone()[0])
    finally:
        conn.close()


def _commands(lc: str | None, newest: str) -> list[Step]:
    me = " ".join(LIFELINE)
    note = [*LIFELINE, "log", "--kind", "note", "--summary", "bench append", "--body", "b"]
    steps: list[Step] = [
        ("context (first)", [*LIFELINE, "context", "--budget", "8000"], "ours", None),
        ("context (warm)", [*LIFELINE, "context", "--budget", "8000"], "ours", None),
        ("recall (warm)", [*LIFELINE, "recall", QUERY], "ours", None),
        ("verify", [*LIFELINE, "verify"], "ours", None),
        ("verify --json", [*LIFELINE, "verify", "--json"], "ours", None),
        ("show", [*LIFELINE, "show", newest[:12]], "ours", None),
        ("show --json", [*LIFELINE, "show", "--json", newest[:12]], "ours", None),
        ("history | head -3", ["sh", "-c", f"{me} history | head -3"], "ours", None),
        ("history --json", [*LIFELINE, "history", "--json"], "ours", None),
        ("history --limit 20", [*LIFELINE, "history", "--limit", "20"], "ours", None),
        # a local write: the first checks the whole file (decision 0104), the next believe it
        ("log (checked)", note, "ours", ["rm", "-f", ".lifeline/ledger.db-checked"]),
        ("log", note, "ours", None),
        ("pin", [*LIFELINE, "pin", newest[:12]], "ours", None),  # reads what is in force
        ("render (full)", [*LIFELINE, "render", "--full"], "ours", None),
        ("render (after 1 append)", [*LIFELINE, "render"], "ours", note),
        ("import", [*LIFELINE, "import", "../lc"], "import", ["rm", "-rf", ".lifeline"]),
    ]
    if lc is not None:
        steps += [
            ("lifeline-context rebuild", [lc, "rebuild"], "lc", None),
            ("lifeline-context verify", [lc, "verify"], "lc", None),
        ]
    return steps


def _row(n: int, name: str, runs: list[tuple[float, float, float]]) -> str:
    secs = statistics.median(r[0] for r in runs)
    cpu = statistics.median(r[2] for r in runs)
    rss = max(r[1] for r in runs)
    return f"| {n:,} | {name} | {secs:.3f} s | {cpu:.2f} s | {rss:.0f} MiB |"


def _timed_cpu(cmd: list[str], cwd: Path, timeout: float) -> tuple[float, float, float, bool]:
    """(wall s, peak RSS MiB, CPU s of the command's processes, finished)."""
    before = os.times()
    took, rss, done = timed(cmd, cwd, timeout)
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return took, rss, cpu, done


def bench_size(
    n: int, repeat: int, timeout: float, work: Path, lc: str | None, only: list[str]
) -> None:
    target = work / str(n)
    if not (target / "ours" / ".lifeline" / "ledger.db").exists():
        generator = Path(__file__).resolve().parent / "truth_ledger.py"
        start = time.perf_counter()
        subprocess.run([sys.executable, str(generator), str(n), str(target)], check=True)
        print(f"(generated {n:,} entries in {time.perf_counter() - start:.1f} s)", flush=True)
    (target / "import").mkdir(exist_ok=True)
    newest = _newest_id(target / "ours" / ".lifeline" / "ledger.db")
    for name, cmd, folder, setup in _commands(lc, newest):
        if only and not any(name.startswith(o) for o in only):
            continue
        runs = []
        times = 1 if name.endswith("(first)") else repeat
        for _ in range(times):
            if setup is not None:
                subprocess.run(setup, cwd=target / folder, check=True, capture_output=True)
            took, rss, cpu, done = _timed_cpu(cmd, target / folder, timeout)
            if not done:
                print(f"| {n:,} | {name} | > {timeout:.0f} s | – | – |", flush=True)
                break
            runs.append((took, rss, cpu))
        if runs:
            print(_row(n, name, runs), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (median)")
    parser.add_argument("--timeout", type=float, default=300.0, help="cap per run, s")
    parser.add_argument("--keep", type=Path, help="build (or reuse) the lines in this folder")
    parser.add_argument("--lc", help="lifeline-context 0.6's `lifeline` executable, to compare")
    parser.add_argument("--only", nargs="*", default=[], help="only commands starting so")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="lifeline-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    print("| entries | command | time (median) | CPU (median) | peak RSS |")
    print("| ---: | --- | ---: | ---: | ---: |")
    try:
        for n in args.sizes:
            bench_size(n, args.repeat, args.timeout, work, args.lc, args.only)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
