"""The costs behind decision 0014: prints figures, not a test.

    python bench/lock_convoy.py [--rows 10000]

- *convoy*: ``--rows`` entry-shaped rows (64-hex id under a UNIQUE index, ~1 KB body) in
  batches of 6,400, one transaction each, written with ``executemany`` and with
  ``insert_rows`` (lifeline/store/sqlite_writes.py), alone and beside a thread that only
  runs Python (as an event loop parsing the next batch does).
- *one row*: the cost of a single-row insert through ``executemany``, ``execute`` and
  ``insert_rows`` (a single local write).
- *helper results*: what a parsed entry costs the node when a helper process parsed it
  (``marshal.loads`` of the helper's answer and building the ``ParsedItem``), against
  ``EntryCodec.parse`` in the node.
"""

from __future__ import annotations

import argparse
import hashlib
import marshal
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import astuple
from pathlib import Path

from sync_signed import build

from lifeline.store.sqlite_writes import insert_rows
from lifeline.validate import DEFAULT_LIMITS
from lifeline_mesh.helpers.worker import parse_entries
from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.sync.entry_offload import parsed_items

SCHEMA = "CREATE TABLE t (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, body TEXT)"


def _write(path: Path, rows: list[tuple[int, str, str]], many: bool, busy: bool) -> float:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(SCHEMA)
    stop = threading.Event()

    def spin() -> None:
        x = 0
        while not stop.is_set():
            for i in range(1000):
                x += i * i

    spinner = threading.Thread(target=spin)
    if busy:
        spinner.start()
    started = time.perf_counter()
    for k in range(0, len(rows), 6400):
        conn.execute("BEGIN IMMEDIATE")
        if many:
            conn.executemany("INSERT INTO t VALUES (?, ?, ?)", rows[k : k + 6400])
        else:
            insert_rows(conn, "INSERT INTO t", rows[k : k + 6400])
        conn.execute("COMMIT")
    took = time.perf_counter() - started
    stop.set()
    if busy:
        spinner.join()
    conn.close()
    return took


def convoy(n: int) -> None:
    rows = [(k, hashlib.sha256(b"%d" % k).hexdigest(), "lorem " * 170) for k in range(n)]
    print(f"convoy: {n:,} rows of ~1 KB, batches of 6,400")
    with tempfile.TemporaryDirectory() as tmp:
        for busy in (False, True):
            for many in (True, False):
                name = "executemany" if many else "insert_rows"
                path = Path(tmp) / f"{name}-{busy}.db"
                where = "beside a busy thread" if busy else "alone"
                print(f"  {name:12} {where:21} {_write(path, rows, many, busy):7.2f} s")


def _per_call(fn: Callable[[], object], n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - started) / n * 1e6


def one_row(n: int = 20_000) -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE t (a, b, c, d, e, f, g, h, i, j, k, l, m)")
    row = tuple(range(13))
    sql = "INSERT INTO t VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
    print("one row of 13 columns:")
    print(f"  executemany  {_per_call(lambda: conn.executemany(sql, [row]), n):5.2f} µs")
    print(f"  execute      {_per_call(lambda: conn.execute(sql, row), n):5.2f} µs")
    print(
        f"  insert_rows  {_per_call(lambda: insert_rows(conn, 'INSERT INTO t', [row]), n):5.2f} µs"
    )


def helper_results(n: int = 6400) -> None:
    raws = [e.to_json() for e in build(n)]
    limits = astuple(DEFAULT_LIMITS)
    _, answer = parse_entries(limits, raws)
    blob = marshal.dumps(answer)
    codec = EntryCodec()
    parse = min(_per_call(lambda: [codec.parse(r) for r in raws], 1) for _ in range(5)) / n
    load = min(_per_call(lambda: parsed_items(raws, marshal.loads(blob)), 1) for _ in range(5))
    print(f"an entry of ~1.3 KB in the node ({n:,} a batch, best of 5):")
    print(f"  EntryCodec.parse                      {parse:5.2f} µs")
    print(f"  helper's answer: marshal.loads + build {load / n:5.2f} µs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    args = parser.parse_args()
    convoy(args.rows)
    one_row()
    helper_results()


if __name__ == "__main__":
    main()
