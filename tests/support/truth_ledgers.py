"""Random ledgers of every shape the truth reads (shared by the truth tables' tests)."""

from __future__ import annotations

import random

from lifeline.entry import Entry

__all__ = ["KINDS", "random_ledger"]

KINDS = ["decision", "decision", "open", "note", "checkpoint", "correction", "fix", "bootstrap"]


def random_ledger(seed: int, n: int) -> list[Entry]:
    """Every shape the truth reads: threads named and by open id, checkpoints, pins,
    corrections of anything (chains, reversals), rewordings of questions, bootstraps."""
    rng = random.Random(seed)
    out: list[Entry] = []
    opens: list[str] = []
    for i in range(n):
        kind = rng.choice(KINDS)
        k = rng.randint(0, min(2, len(out)))
        parents = tuple(sorted({p.id for p in rng.sample(out, k)}))
        body = f"why {rng.randint(0, 5)} refund"
        thread = rng.choice(["t0", "t1", *opens[-2:]]) if rng.random() < 0.5 else ""
        if thread:
            body = f"thread: {thread}\n{body}"
        if kind == "checkpoint":
            body = f"thread: {thread or 't2'}\nnext:\n  - step {i}"
        if kind == "note" and out and rng.random() < 0.4:
            target = rng.choice(out).id
            parents, body = (target,), f"pin: {target}"
        if kind == "correction":
            if out and (not parents or rng.random() < 0.5):
                pool = [e for e in out if e.kind in ("open", "correction", "decision")] or out
                parents = (rng.choice(pool).id,)
            if rng.random() < 0.3:
                body = f"status: open\n{body}"
        ts = f"2026-01-01T00:{rng.randint(0, 5):02d}:00Z"  # ties on purpose
        entry = Entry.create(ts=ts, kind=kind, summary=f"s{i} latency", body=body, parents=parents)
        if kind == "open":
            opens.append(entry.id)
        out.append(entry)
    return out
