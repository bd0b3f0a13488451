"""Benchmark: what the random-id index costs a batched append, and what SQLite offers.

Replays the statements of one batched append (``append_tx``: look the batch's ids up,
insert the rows, link each to its parent by row number, move the tip) on a fresh file, in
transactions of ``--batch`` rows, for several layouts of the ``entries`` table, and prints
rows per second at the end of ``--n`` rows (median of ``--runs``, layouts alternating):

- ``text-unique``: today's layout, ``id TEXT UNIQUE`` (64 hex characters, random order).
- ``no-id-index``: the same without any index on the id (and no lookup): the floor, what
  the rest costs.
- ``blob-unique``: the id as 32 raw bytes, ``UNIQUE`` (half the key).
- ``short-key``: no ``UNIQUE``; a non-unique index on the first 16 hex characters, the
  full id compared in the row (as decision 0013 does for receipts).
- ``text-unique-8k`` / ``text-unique-1k``: today's layout with 8 KiB / 1 KiB pages.
- ``text-unique-wal100k``: today's layout, a checkpoint every 100,000 WAL pages.

Figures only; no pass/fail. ``python bench/append_index.py --n 100000 --runs 3``
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

__all__ = ["main"]

_ROW = (
    "ts TEXT NOT NULL, kind TEXT NOT NULL, author TEXT NOT NULL, agent TEXT NOT NULL,"
    " provider TEXT NOT NULL, model TEXT NOT NULL, summary TEXT NOT NULL, body TEXT NOT NULL,"
    " parents TEXT NOT NULL, dedup_key TEXT, height INTEGER NOT NULL"
)
LAYOUTS = {
    "text-unique": ("id TEXT NOT NULL UNIQUE", "", "text", {}),
    "no-id-index": ("id TEXT NOT NULL", "", "text", {}),
    "blob-unique": ("id BLOB NOT NULL UNIQUE", "", "blob", {}),
    "short-key": (
        "id TEXT NOT NULL",
        "CREATE INDEX entries_key ON entries(substr(id, 1, 16))",
        "key",
        {},
    ),
    "text-unique-8k": ("id TEXT NOT NULL UNIQUE", "", "text", {"page_size": 8192}),
    "text-unique-1k": ("id TEXT NOT NULL UNIQUE", "", "text", {"page_size": 1024}),
    "text-unique-wal100k": ("id TEXT NOT NULL UNIQUE", "", "text", {"wal_autocheckpoint": 100_000}),
}


def _open(path: Path, layout: str) -> sqlite3.Connection:
    column, extra, _mode, pragmas = LAYOUTS[layout]
    conn = sqlite3.connect(path, isolation_level=None)
    if "page_size" in pragmas:
        conn.execute(f"PRAGMA page_size = {pragmas['page_size']}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA cache_size = -32768")  # as the store sets it
    conn.execute(f"PRAGMA wal_autocheckpoint = {pragmas.get('wal_autocheckpoint', 10_000)}")
    conn.execute(f"CREATE TABLE entries (seq INTEGER PRIMARY KEY AUTOINCREMENT, {column}, {_ROW})")
    conn.execute("CREATE INDEX entries_order ON entries(height, ts, id)")
    conn.execute(
        "CREATE UNIQUE INDEX entries_dedup ON entries(dedup_key) WHERE dedup_key IS NOT NULL"
    )
    if extra:
        conn.execute(extra)
    conn.execute(
        "CREATE TABLE links (parent_seq INTEGER NOT NULL, child_seq INTEGER NOT NULL,"
        " PRIMARY KEY (parent_seq, child_seq)) WITHOUT ROWID"
    )
    conn.execute("CREATE TABLE tips (id TEXT PRIMARY KEY) WITHOUT ROWID")
    return conn


def _ids(n: int) -> list[str]:
    return [hashlib.sha256(f"entry {i} {os.getpid()}".encode()).hexdigest() for i in range(n)]


def _key(mode: str, eid: str) -> object:
    return bytes.fromhex(eid) if mode == "blob" else eid


def run(layout: str, n: int, batch: int, folder: Path) -> float:
    path = folder / f"{layout}.db"
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        p.unlink(missing_ok=True)
    conn = _open(path, layout)
    mode = LAYOUTS[layout][2]
    ids = _ids(n)
    body = "why number 0 " + "x" * 150
    start = time.perf_counter()
    prev = None
    for lo in range(0, n, batch):
        chunk = ids[lo : lo + batch]
        conn.execute("BEGIN IMMEDIATE")
        marks = ",".join("?" * (len(chunk) + 1))
        keys = [_key(mode, i) for i in chunk] + [_key(mode, prev or chunk[0])]
        if mode == "key":
            found = conn.execute(
                f"SELECT id FROM entries WHERE substr(id, 1, 16) IN ({marks})",
                [i[:16] for i in chunk] + [(prev or chunk[0])[:16]],
            ).fetchall()
            assert not found or prev is not None
        elif layout != "no-id-index":  # (without an index the lookup would scan the table)
            conn.execute(f"SELECT id FROM entries WHERE id IN ({marks})", keys).fetchall()
        rows = []
        for k, eid in enumerate(chunk):
            seq = lo + k + 1
            parents = f'["{prev}"]' if prev else "[]"
            rows.append(
                (
                    seq,
                    _key(mode, eid),
                    "2026-01-01T00:00:00Z",
                    "note",
                    "a",
                    "b",
                    "p",
                    "m",
                    f"entry {seq}",
                    body,
                    parents,
                    None,
                    seq,
                )
            )
            prev = eid
        conn.executemany("INSERT INTO entries VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        conn.executemany(
            "INSERT OR IGNORE INTO links VALUES (?, ?)",
            [(r[0] - 1, r[0]) for r in rows if r[0] > 1],
        )
        conn.execute("DELETE FROM tips")
        conn.execute("INSERT INTO tips VALUES (?)", (prev,))
        conn.execute("COMMIT")
    took = time.perf_counter() - start
    conn.close()
    return n / took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--layouts", default=",".join(LAYOUTS))
    parser.add_argument("--dir", type=Path, help="where the files go (default: a temp folder)")
    args = parser.parse_args()
    folder = args.dir or Path(tempfile.mkdtemp(prefix="lifeline-ix-"))
    folder.mkdir(parents=True, exist_ok=True)
    layouts = args.layouts.split(",")
    rates: dict[str, list[float]] = {name: [] for name in layouts}
    for _ in range(args.runs):
        for name in layouts:  # alternating, so load changes hit every layout alike
            rates[name].append(run(name, args.n, args.batch, folder))
    base = statistics.median(rates[layouts[0]])
    for name in layouts:
        rate = statistics.median(rates[name])
        print(f"{name:22} {rate:9,.0f} rows/s  ({rate / base:.2f}× {layouts[0]})")


if __name__ == "__main__":
    main()
