"""The entries a line's current truth is made of: what a shallow snapshot must carry.

In force (docs/truth.md): the decisions in force (corrections in force among them), the
open items, the identity (the live bootstrap), pins and the notes that pin them, and the
newest checkpoint of each thread (``## Resume``); plus the newest entries (the Recent
section). A line holding exactly these entries gives the same sections in its context as
the full line, minus the counts of what is not held (docs/decisions/0063-shallow-join.md).
"""

from __future__ import annotations

from lifeline.store.port import Store
from lifeline.truth.service import read_shown

__all__ = ["ids_in_force"]


async def ids_in_force(store: Store) -> list[str]:
    """Sorted ids of every entry the current truth of ``store`` names."""
    lt = await read_shown(store)
    truth = lt.truth
    ids = {*truth.decisions, *truth.open, *truth.pinned, *truth.resume.values()}
    ids.update(note for notes in truth.pin_notes.values() for note in notes)
    if truth.identity is not None:
        ids.add(truth.identity)
    ids.update(entry_id for _ts, entry_id in lt.state.recent)
    return sorted(ids)
