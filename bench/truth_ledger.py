"""A generated ledger with a realistic mix, written for lifeline and for lifeline-context 0.6.1.

Mix: one bootstrap; ≈20% checkpoints over 50 threads; ≈3% corrections (of decisions, and
sometimes of earlier corrections); ≈10% decisions; ≈3% open items; a few pins; the rest
notes, fixes and features. Each entry follows the previous one (a single writer's chain);
a correction names the entry it corrects, a pin the entry it pins.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
from pathlib import Path

from lifeline.entry import Entry
from lifeline.store.sqlite import SqliteStore

__all__ = ["generate", "write_lc", "write_ours"]

WORDS = (
    "cache",
    "queue",
    "ledger",
    "payment",
    "refund",
    "latency",
    "audit",
    "tenant",
    "shard",
    "index",
    "retry",
    "budget",
    "schema",
    "token",
    "replica",
    "webhook",
    "invoice",
    "session",
    "billing",
    "export",
    "import",
    "gateway",
)


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _pick(rng: random.Random, n: int) -> tuple[str, str, str]:
    """(kind, summary, body) for entry number ``n``."""
    roll = rng.random()
    if roll < 0.20:
        thread = f"thread-{rng.randrange(50)}"
        body = f"thread: {thread}\ndone:\n  - {_text(rng, 6)}\nnext:\n  - {_text(rng, 8)}"
        return "checkpoint", f"checkpoint {thread}: {_text(rng, 5)}", body
    if roll < 0.30:
        return "decision", f"decision {n}: {_text(rng, 5)}", _text(rng, 40)
    if roll < 0.33:
        return "open", f"open {n}: {_text(rng, 5)}", _text(rng, 20)
    kind = rng.choice(["note", "fix", "feature", "note", "incident"])
    return kind, f"{kind} {n}: {_text(rng, 6)}", _text(rng, 30)


def generate(count: int, seed: int = 1) -> list[Entry]:
    rng = random.Random(seed)
    out = [
        Entry.create(
            ts="2026-01-01T00:00:00Z",
            kind="bootstrap",
            summary="Bench project",
            body="A generated ledger.",
            author="bench",
        )
    ]
    corrigible: list[str] = []
    for n in range(1, count):
        ts = f"2026-01-01T00:00:00.{n:06d}Z" if n < 1_000_000 else "2026-01-02T00:00:00Z"
        roll = rng.random()
        parents: tuple[str, ...] = (out[-1].id,)
        if roll < 0.03 and corrigible:
            target = rng.choice(corrigible[-500:])
            kind, summary, body = "correction", f"correction {n}: {_text(rng, 5)}", _text(rng, 20)
            parents = (target,)
        elif roll < 0.035 and corrigible:
            target = rng.choice(corrigible)
            kind, summary, body = "note", f"pin {n}", f"pin: {target}"
            parents = (target,)
        else:
            kind, summary, body = _pick(rng, n)
        entry = Entry.create(
            ts=ts, kind=kind, summary=summary, body=body, author="bench", parents=parents
        )
        out.append(entry)
        if kind in ("decision", "correction"):
            corrigible.append(entry.id)
    return out


async def _write_ours(path: Path, entries: list[Entry]) -> None:
    async with await SqliteStore.open(path) as store:
        for start in range(0, len(entries), 5_000):
            await store.append_many(entries[start : start + 5_000])


def write_ours(root: Path, entries: list[Entry]) -> None:
    (root / ".lifeline").mkdir(parents=True, exist_ok=True)
    asyncio.run(_write_ours(root / ".lifeline" / "ledger.db", entries))


def write_lc(root: Path, entries: list[Entry]) -> None:
    """The same entries in the SQLite layout lifeline-context 0.6.1 reads."""
    (root / ".lifeline").mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(root / ".lifeline" / "ledger.db")
    conn.executescript(
        """
        CREATE TABLE entries (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL,
            ts TEXT NOT NULL, kind TEXT NOT NULL, dedup_key TEXT, parents TEXT NOT NULL,
            payload TEXT NOT NULL);
        CREATE TABLE edges (parent_id TEXT NOT NULL, child_id TEXT NOT NULL,
            PRIMARY KEY (parent_id, child_id));
        CREATE UNIQUE INDEX idx_dedup ON entries(dedup_key) WHERE dedup_key IS NOT NULL;
        CREATE INDEX idx_edges_child ON edges(child_id);
        """
    )
    rows, edges = [], []
    for e in entries:
        payload = json.dumps(e.to_dict(), ensure_ascii=False, separators=(",", ":"))
        rows.append(
            (e.id, e.ts.replace("Z", "+00:00"), e.kind, None, json.dumps(list(e.parents)), payload)
        )
        edges.extend((p, e.id) for p in e.parents)
    with conn:
        conn.executemany(
            "INSERT INTO entries (id, ts, kind, dedup_key, parents, payload) VALUES (?,?,?,?,?,?)",
            rows,
        )
        conn.executemany("INSERT OR IGNORE INTO edges VALUES (?, ?)", edges)
    conn.close()


if __name__ == "__main__":
    # Run as a child of bench/context.py, so the benchmark process stays small: a child's
    # peak RSS on Linux includes what its parent held when it forked.
    import sys

    count, target = int(sys.argv[1]), Path(sys.argv[2])
    made = generate(count)
    write_ours(target / "ours", made)
    write_lc(target / "lc", made)
