"""What a million random-keyed index rows cost SQLite, the store of a large pull, alone.

    python bench/store_indexes.py [--keys text|int|none|late] [--n 1000000] [--batch 3200]
                                  [--page 4096] [--cache-kib 32768] [--checkpoint 10000]
                                  [--sorted] [--commit-every 1]

Writes ``--n`` entry rows and ``--n`` signature rows shaped as a line file's (a 64-hex id,
~480 bytes of body; a 32-byte id, a 64-hex subject, a 257-byte item) into a fresh SQLite
file in WAL mode with the store's settings, ``--batch`` of each a transaction, as a pull
stores them, and prints the time of the entry inserts, the signature inserts and the
COMMITs, and the process's CPU. ``--keys`` picks the random-keyed indexes: ``text`` the
store's (``entries.id`` and ``attestations.id`` UNIQUE, the subjects' 16-character keys),
``int`` 8-byte integer keys of the same ids, ``none`` no index on a random key (a lower
bound), ``late`` none while the rows go in, then the store's three built at the end (a
pull into an empty line could build them so). Decisions 0102 and 0108 keep the figures.
Not the product's path: a probe of one layer, to see which change of format could pay;
not a test.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

SCHEMAS = {
    "text": """
        CREATE TABLE entries (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,
            ts TEXT, body TEXT, height INTEGER);
        CREATE INDEX entries_order ON entries(height, ts, id);
        CREATE TABLE attestations (seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id BLOB NOT NULL UNIQUE, sort_key INTEGER, role TEXT, subject TEXT, item BLOB);
        CREATE INDEX attestations_order ON attestations(sort_key, id);
        CREATE INDEX attestations_subject ON attestations(role, substr(subject, 1, 16));
    """,
    "int": """
        CREATE TABLE entries (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL,
            k INTEGER NOT NULL, ts TEXT, body TEXT, height INTEGER);
        CREATE INDEX entries_key ON entries(k);
        CREATE INDEX entries_order ON entries(height, ts, id);
        CREATE TABLE attestations (seq INTEGER PRIMARY KEY AUTOINCREMENT, id BLOB NOT NULL,
            k INTEGER NOT NULL, sk INTEGER NOT NULL, sort_key INTEGER, role TEXT,
            subject TEXT, item BLOB);
        CREATE INDEX attestations_key ON attestations(k);
        CREATE INDEX attestations_order ON attestations(sort_key, id);
        CREATE INDEX attestations_subject ON attestations(sk);
    """,
    "none": """
        CREATE TABLE entries (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL,
            ts TEXT, body TEXT, height INTEGER);
        CREATE INDEX entries_order ON entries(height, ts, id);
        CREATE TABLE attestations (seq INTEGER PRIMARY KEY AUTOINCREMENT, id BLOB NOT NULL,
            sort_key INTEGER, role TEXT, subject TEXT, item BLOB);
        CREATE INDEX attestations_order ON attestations(sort_key, id);
    """,
}
INSERTS = {
    "text": (
        "INSERT OR IGNORE INTO entries(id, ts, body, height) VALUES (?, ?, ?, ?)",
        "INSERT OR IGNORE INTO attestations(id, sort_key, role, subject, item)"
        " VALUES (?, ?, ?, ?, ?)",
    ),
    "int": (
        "INSERT INTO entries(id, k, ts, body, height) SELECT ?1, ?2, ?3, ?4, ?5"
        " WHERE NOT EXISTS (SELECT 1 FROM entries WHERE k = ?2 AND id = ?1)",
        "INSERT INTO attestations(id, k, sk, sort_key, role, subject, item)"
        " SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7"
        " WHERE NOT EXISTS (SELECT 1 FROM attestations WHERE k = ?2 AND id = ?1)",
    ),
}
SCHEMAS["late"] = SCHEMAS["none"]  # the store's indexes built once the rows are in
LATE_INDEXES = """
    CREATE UNIQUE INDEX entries_id ON entries(id);
    CREATE UNIQUE INDEX attestations_id ON attestations(id);
    CREATE INDEX attestations_subject ON attestations(role, substr(subject, 1, 16));
"""
INSERTS["none"] = (
    "INSERT INTO entries(id, ts, body, height) VALUES (?, ?, ?, ?)",
    "INSERT INTO attestations(id, sort_key, role, subject, item) VALUES (?, ?, ?, ?, ?)",
)
INSERTS["late"] = INSERTS["none"]


def _key(raw: bytes) -> int:
    return int.from_bytes(raw[:8], "big", signed=True)


def rows(keys: str, i: int) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """One entry row and its signature row."""
    entry_id = hashlib.sha256(str(i).encode()).hexdigest()
    att_id = hashlib.sha256(b"a" + str(i).encode()).digest()
    ts, body, height = f"2026-01-01T00:00:{i:07d}Z", "x" * 480, i // 3
    sort_key, item = 1_795_461_422_563_614 + i * 1_000_000, os.urandom(257)
    if keys == "int":
        k, sk = _key(att_id), _key(bytes.fromhex(entry_id))
        return (entry_id, sk, ts, body, height), (att_id, k, sk, sort_key, "author", entry_id, item)
    return (entry_id, ts, body, height), (att_id, sort_key, "author", entry_id, item)


def run(args: argparse.Namespace, path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA page_size = {args.page}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(f"PRAGMA cache_size = -{args.cache_kib}")
    conn.execute(f"PRAGMA wal_autocheckpoint = {args.checkpoint}")
    conn.executescript(SCHEMAS[args.keys])
    entry_sql, att_sql = INSERTS[args.keys]
    spent = [0.0, 0.0, 0.0]
    started, cpu = time.perf_counter(), time.process_time()
    for first in range(0, args.n, args.batch):
        made = [rows(args.keys, i) for i in range(first, min(args.n, first + args.batch))]
        entries, atts = [e for e, _ in made], [a for _, a in made]
        if args.sorted:
            entries.sort(key=lambda r: r[0])
            atts.sort(key=lambda r: r[-2])
        if not conn.in_transaction:
            conn.execute("BEGIN")
        t0 = time.perf_counter()
        conn.executemany(entry_sql, entries)
        t1 = time.perf_counter()
        conn.executemany(att_sql, atts)
        t2 = time.perf_counter()
        if (first // args.batch + 1) % args.commit_every == 0 or first + args.batch >= args.n:
            conn.execute("COMMIT")
        t3 = time.perf_counter()
        spent[0], spent[1], spent[2] = spent[0] + t1 - t0, spent[1] + t2 - t1, spent[2] + t3 - t2
    built = time.perf_counter()
    if args.keys == "late":
        conn.executescript(LATE_INDEXES)
    built = time.perf_counter() - built
    conn.close()
    print(
        f"keys={args.keys} n={args.n:,} batch={args.batch} page={args.page}"
        f" cache={args.cache_kib} KiB checkpoint={args.checkpoint}"
        f" commit every {args.commit_every}"
        f"{' sorted' if args.sorted else ''}:"
        f" wall {time.perf_counter() - started:.1f} s, CPU {time.process_time() - cpu:.1f} s;"
        f" entry inserts {spent[0]:.1f} s, signature inserts {spent[1]:.1f} s,"
        f" COMMITs {spent[2]:.1f} s"
        f"{f', index builds {built:.1f} s' if args.keys == 'late' else ''}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", choices=sorted(SCHEMAS), default="text")
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=3200)
    parser.add_argument("--page", type=int, default=4096)
    parser.add_argument("--cache-kib", type=int, default=32 * 1024)
    parser.add_argument("--checkpoint", type=int, default=10_000, help="WAL pages")
    parser.add_argument("--sorted", action="store_true", help="each batch sorted by key")
    parser.add_argument(
        "--commit-every",
        type=int,
        default=1,
        help="batches a transaction (the rows of one batch in memory at a time)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="store-indexes-") as tmp:
        run(args, Path(tmp) / "line.db")


if __name__ == "__main__":
    main()
