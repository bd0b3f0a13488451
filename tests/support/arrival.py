"""Random arrival orders of a ledger's entries, as sync delivers them (parents first)."""

from __future__ import annotations

import random

from lifeline.entry import Entry


def arrival_order(entries: list[Entry], rng: random.Random) -> list[Entry]:
    """A random order in which every entry comes after its parents (as sync delivers)."""
    left, seen, out = list(entries), set[str](), list[Entry]()
    while left:
        ready = [e for e in left if set(e.parents) <= seen]
        pick = rng.choice(ready)
        left.remove(pick)
        seen.add(pick.id)
        out.append(pick)
    return out
