"""The first reads of a line that took a large load, with and without `serve` (decision 0103).

    python bench/fold_ahead.py [--n 1000000] [--baseline TREE] [--cache DIR] [--laptop]

The line is bench/full_sync.py's (n signed entries, built once in ``--cache``), copied as
a large pull leaves it: every row past the truth's and the recall index's marks. Per tree:

1. **no serve** (a `lifeline-mesh sync` leaves the line so): `lifeline context`, then
   `lifeline recall`, each twice; the first of each folds what it reads.
2. **under serve**: `lifeline-mesh serve` starts on another copy and folds it in the
   background; printed: the time until nothing is left behind and serve's CPU meanwhile,
   `lifeline log` (a write, waiting for at most one part) while the fold runs and after,
   then `lifeline context` and `lifeline recall` once it is done.

With ``--laptop``, instead, a new laptop's path of issue 37 on that line: the node joined
to the mesh pulls it shallow (`sync --shallow`), reads its context, then runs `serve`,
which deepens the line from the serving node in the background (decision 0082). Printed:
the time until the history is whole (the shallow boundary empty), until nothing is left
to fold, serve's CPU meanwhile, and `context` and `recall` then.

Every figure is a real CLI process's wall time. With ``--baseline TREE`` the same runs
with TREE's code (which does not fold under serve) follow, for a side-by-side view.
Prints figures; not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TREE = HERE.parent
sys.path.insert(0, str(TREE))

from bench.full_sync import _cpu_s, _serve, build  # noqa: E402
from lifeline.truth.upkeep import behind_in  # noqa: E402


def _behind(line: Path) -> int:
    """What the line's next reader would fold (the product's own count, read-only)."""
    conn = sqlite3.connect(f"file:{line}?mode=ro", uri=True, timeout=30)
    try:
        return behind_in(conn)
    finally:
        conn.close()


def _timed(env: dict[str, str], root: Path, *args: str) -> float:
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "lifeline", "--root", str(root), *args],
        env=env,
        stdout=subprocess.DEVNULL,
        check=True,
        timeout=600,
    )
    return time.monotonic() - started


def _copy(served: Path, to: Path) -> Path:
    shutil.rmtree(to, ignore_errors=True)
    shutil.copytree(served, to)
    line = to / ".lifeline" / "ledger.db"
    conn = sqlite3.connect(line)
    try:  # as a pull leaves it: nothing folded (the cache's copy was folded by build)
        conn.execute("DELETE FROM truth_core")
        conn.execute("UPDATE recall_mark SET seq = 0")
        conn.execute("INSERT INTO recall_fts(recall_fts) VALUES ('delete-all')")
        conn.commit()
    finally:
        conn.close()
    return line


def _reads(env: dict[str, str], root: Path) -> str:
    ctx = [_timed(env, root, "context") for _ in range(2)]
    rec = [_timed(env, root, "recall", "decision") for _ in range(2)]
    return f"context {ctx[0]:.2f} s then {ctx[1]:.2f} s; recall {rec[0]:.2f} s then {rec[1]:.2f} s"


def one_tree(tree: Path, served: Path, tmp: Path, n: int) -> None:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    print(f"tree {tree}", flush=True)
    _copy(served, tmp / "plain")
    print(f"  no serve: {_reads(env, tmp / 'plain')}", flush=True)
    line = _copy(served, tmp / "served")
    proc, _address = _serve(tmp / "served", env, [])
    try:
        cpu0, started = _cpu_s(proc.pid), time.monotonic()
        note = ["log", "--kind", "note", "--summary"]
        writes = []
        # the notes written meanwhile are too few for serve to fold: 100 rows is done
        while _behind(line) > 100 and time.monotonic() - started < 120:
            writes.append(_timed(env, tmp / "served", *note, "during"))
            time.sleep(0.5)
        folded, cpu = time.monotonic() - started, _cpu_s(proc.pid) - cpu0
        after = [_timed(env, tmp / "served", *note, "after") for _ in range(3)]
        behind = _behind(line)
        print(
            f"  under serve: {'folded' if behind <= 100 else f'{behind:,} behind'} after"
            f" {folded:.1f} s (serve CPU {cpu:.1f} s); `log` during: median"
            f" {statistics.median(writes) if writes else 0:.2f} s, max"
            f" {max(writes, default=0):.2f} s ({len(writes)}); after: median"
            f" {statistics.median(after):.2f} s",
            flush=True,
        )
        print(f"  then: {_reads(env, tmp / 'served')}", flush=True)
    finally:
        proc.terminate()
        proc.communicate(timeout=120)


def _boundary(line: Path) -> int:
    conn = sqlite3.connect(f"file:{line}?mode=ro", uri=True, timeout=30)
    try:
        return int(conn.execute("SELECT count(*) FROM shallow_boundary").fetchone()[0])
    finally:
        conn.close()


def _serve_laptop(root: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "lifeline_mesh", "--root", str(root), "serve"]
    argv += ["--listen", "127.0.0.1:0", "--no-discovery", "--log-format", "json"]
    with (root.parent / "laptop-serve.log").open("w") as log:  # sessions, deepening, folds
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    if not first.startswith("listening on"):
        proc.kill()
        raise SystemExit(f"serve did not start: {first!r}")
    return proc


def one_laptop(tree: Path, served: Path, template: Path, tmp: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    print(f"tree {tree}", flush=True)
    laptop = tmp / "laptop"
    shutil.rmtree(laptop, ignore_errors=True)
    shutil.copytree(template, laptop)
    line = laptop / ".lifeline" / "ledger.db"
    for leftover in line.parent.glob("ledger.db*"):
        leftover.unlink()
    source, address = _serve(served, env, [])
    try:
        started = time.monotonic()
        pull = [sys.executable, "-m", "lifeline_mesh", "--root", str(laptop), "sync"]
        subprocess.run(
            [*pull, "--shallow", address],
            env=env,
            stdout=subprocess.DEVNULL,
            check=True,
            timeout=600,
        )
        shallow = time.monotonic() - started
        first = _timed(env, laptop, "context")
        print(f"  sync --shallow {shallow:.2f} s, then context {first:.2f} s", flush=True)
        proc = _serve_laptop(laptop, env)
        try:
            cpu0, started = _cpu_s(proc.pid), time.monotonic()
            whole = None
            while time.monotonic() - started < 900:
                if whole is None and _boundary(line) == 0:
                    whole = time.monotonic() - started
                if whole is not None and (
                    _behind(line) == 0 or time.monotonic() - started > whole + 120
                ):
                    break
                time.sleep(0.5)
            done, cpu = time.monotonic() - started, _cpu_s(proc.pid) - cpu0
            behind = _behind(line)
            print(
                f"  under serve: history whole after {whole or 0:.1f} s;"
                f" {'folded' if behind == 0 else f'{behind:,} rows behind'} after {done:.1f} s"
                f" (serve CPU {cpu:.1f} s)",
                flush=True,
            )
            print(f"  then: {_reads(env, laptop)}", flush=True)
        finally:
            proc.terminate()
            proc.communicate(timeout=120)
        for event in (tmp / "laptop-serve.log").read_text().splitlines():
            if any(word in event for word in ("deepen", "folded", "session")):
                record = json.loads(event)
                print(f"    serve: {record['ts'][11:23]} {record['message']}", flush=True)
    finally:
        source.terminate()
        source.communicate(timeout=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--baseline", type=Path, help="another tree, measured after this one")
    parser.add_argument("--cache", type=Path, default=HERE / "out" / "full_sync")
    parser.add_argument("--laptop", action="store_true", help="a new laptop's shallow join")
    args = parser.parse_args()
    served, puller = build(args.cache, args.n)
    with tempfile.TemporaryDirectory(prefix="fold-ahead-") as tmp:
        for tree in [TREE] + ([args.baseline.resolve()] if args.baseline else []):
            if args.laptop:
                one_laptop(tree, served, puller, Path(tmp))
            else:
                one_tree(tree, served, Path(tmp), args.n)


if __name__ == "__main__":
    main()
