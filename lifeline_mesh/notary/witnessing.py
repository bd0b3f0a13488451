"""An entry's first witnesses, for a whole line in one pass (DESIGN §6, decision 0015).

Pure: no I/O. An entry's id commits to its parents, so a signed statement that a node held
a set of tips at time T proves that every ancestor of those tips existed at T. Evidence:

* ``state`` statements (second wave) and ``summary`` attestations (first wave): their tips;
* ``witness`` receipts (first wave): the ids they list (each held, so its ancestors too).

:func:`first_witnesses` marks each named entry with (T, node), then walks the line once from
children to parents, handing each entry's earliest marks to its parents. It keeps the
earliest time of up to :data:`KEEP` distinct nodes per entry, so that an entry's first
witness *other than its author(s)* is known without a query per entry.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from lifeline.entry import Entry
from lifeline_mesh.notary.statement import Attestation, Role

__all__ = ["KEEP", "Mark", "first_witnesses", "hand_down", "marks_of", "rank", "ranked"]

# Distinct nodes remembered per entry: an entry has one author (rarely two), so three
# earliest witnesses always include the earliest one that is not an author.
KEEP = 3

Mark = tuple[str, str]  # (ts, node id)


def marks_of(atts: Iterable[Attestation]) -> dict[str, list[Mark]]:
    """The entries each statement names directly: tips of states and summaries, receipt ids."""
    out: dict[str, list[Mark]] = {}
    for att in atts:
        if att.role is Role.WITNESS:
            named: Sequence[str] = att.extras
        elif att.role is Role.STATE or att.role is Role.SUMMARY:
            named = att.summary_tips
        else:
            continue
        for entry_id in named:
            out.setdefault(entry_id, []).append((att.ts, att.node_id))
    return out


def rank(marks: Iterable[Mark]) -> list[Mark]:
    """The earliest mark of each node, earliest first, at most KEEP nodes."""
    best: dict[str, str] = {}
    for ts, node in marks:
        if node not in best or ts < best[node]:
            best[node] = ts
    return sorted((ts, node) for node, ts in best.items())[:KEEP]


def first_witnesses(
    entries: Sequence[Entry], marks: Mapping[str, Sequence[Mark]]
) -> dict[str, list[Mark]]:
    """Entry id → earliest (ts, node) of up to KEEP nodes whose evidence covers the entry.

    ``entries`` must list parents before children (the store's stream order); each is
    visited once, children first, and hands its marks to its parents in the line.
    """
    best = ranked(marks)
    for entry in reversed(entries):
        mine = best.get(entry.id)
        if mine:
            hand_down(best, mine, entry.parents)
    return best


def ranked(marks: Mapping[str, Sequence[Mark]]) -> dict[str, list[Mark]]:
    """Each named entry's own marks, ranked (the start of a walk)."""
    return {entry_id: rank(own) for entry_id, own in marks.items()}


def hand_down(best: dict[str, list[Mark]], mine: list[Mark], parents: Iterable[str]) -> None:
    """One step of the walk: an entry's earliest marks handed to its parents. A caller
    walking the line in pages may pop an entry's marks once visited (its children all
    came before it), so that only the walk's frontier is held."""
    for parent in parents:
        held = best.get(parent)
        if held is None:
            best[parent] = mine  # shared, never mutated: a chain costs no copies
        elif held != mine:
            best[parent] = rank((*held, *mine))
