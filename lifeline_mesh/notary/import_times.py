"""What an ``imported`` attestation fixes: the ts of an entry nobody signed (decisions
0119, 0122).

An entry's ts is outside its hash, and the store keeps the earliest ts of an id, so an
unsigned entry moves to any earlier ts a member sends. An author signature stops that
(decision 0048); for an entry no author signed, an ``imported`` attestation — "this node
held it, dated so" — does, for a node that holds the entry at a ts one names: a received
copy dated otherwise is refused (the first attested copy held wins, whoever attested the
others — a member's own ``imported`` statement of another ts is kept as evidence, and
moves nothing).

That is all it does. Any member may sign an ``imported`` statement of any entry and any
ts, so one never refuses a copy of an entry a node does not hold, and never re-dates an
entry held at a ts it does not name (decision 0122): a member's statement naming a ts no
copy carries made every node refuse the entry and all that descends from it, and one
naming a later ts moved the entry after its children, which every new node then refused
as dated before their parent.

Pure: the rule (:func:`fixed_times`), the refusal's words, and what ``verify`` says of an
entry's import attestations (:func:`import_findings`). The reads are the storages'.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lifeline.audit.line import Linked
from lifeline.entry import Entry
from lifeline.wording import count
from lifeline_mesh.notary.statement import Attestation
from lifeline_mesh.notary.verdict import Finding

__all__ = ["CONFLICTS_LISTED", "attests", "fixed_times", "import_findings", "import_refusal"]


def fixed_times(attested: Mapping[str, set[str]], held: Mapping[str, str]) -> dict[str, set[str]]:
    """The ts a received copy of each entry may carry, for entries with no author signature
    and import attestations held. ``attested``: entry id → the ts its import attestations
    name; ``held``: the stored ts of those the line holds. Only an entry held at an attested
    ts is fixed (it keeps it); one not held, or held at a ts none names, takes a copy as
    any unsigned entry does (decision 0122)."""
    return {
        entry_id: {ts}
        for entry_id, times in attested.items()
        if (ts := held.get(entry_id)) is not None and ts in times
    }


def import_refusal(entry: Entry, fixed: set[str]) -> str:
    """Why a copy dated otherwise than its import attestations fix is refused."""
    return (
        f"a copy dated {entry.ts}; no author signed it, and an import attestation held fixes "
        f"its ts at {', '.join(sorted(fixed))}: refused, the attested copy stands"
    )


def attests(imports: Sequence[Attestation], ts: str) -> bool:
    """Whether one of ``imports`` attests ``ts``: the entry held at it counts as imported;
    otherwise it is as unsigned as before they arrived (decision 0122)."""
    return any(a.extras[0] == ts for a in imports)


def import_findings(
    entry: Linked, imports: Sequence[Attestation], *, authored: bool, local: str | None = None
) -> list[Finding]:
    """What ``verify`` says of an entry's import attestations (by trusted signers).

    With no author signature, one that attests the stored ts makes the entry ``imported``
    (a note naming the node that attested it first). When none does: ``ts-mismatch`` if
    this node (``local``) attested another ts itself — the ts was edited after its import;
    else the attestations are other nodes' claims, which move nothing (decision 0122), and
    the entry is judged as unsigned by the caller. Attestations of other ts (another node
    imported it at another time, or a member sent its own to move it) are a note,
    ``import-conflict``, naming at most ``CONFLICTS_LISTED`` of them. With an author
    signature, the author's ts rules (decision 0048): an import of another ts is the same
    note."""
    if not imports:
        return []
    naming = [a for a in imports if a.extras[0] == entry.ts]
    others = sorted({(a.extras[0], a.node_id, a.ts) for a in imports if a.extras[0] != entry.ts})
    out: list[Finding] = []
    if not authored and naming:
        first = min(naming, key=lambda a: (a.ts, a.node_id))
        out.append(
            Finding(
                "imported",
                entry.id,
                f"no author signature; attested as imported (not authored) by {first.node_id} "
                f"at {first.ts}: its ts is as trustworthy as its source",
                "note",
            )
        )
    elif not authored and (own := sorted({ts for ts, node, _at in others if node == local})):
        detail = (
            f"stored ts {entry.ts} is not the ts this node attested at import "
            f"({', '.join(own)}); the time was edited after the import was attested"
        )
        return [Finding("ts-mismatch", entry.id, detail)]
    if others:
        if authored:
            stands = "its author's signed ts stands (decision 0048)"
        elif naming:
            stands = (
                "the attested ts held first stands, and a copy dated otherwise is refused "
                "(decision 0119)"
            )
        else:
            stands = (
                "no import attestation names the ts held, so none moves it: the copy held "
                "first stands, as for any unsigned entry (decision 0122)"
            )
        detail = f"held at {entry.ts}; also attested at import at another ts: {_listed(others)}"
        out.append(Finding("import-conflict", entry.id, f"{detail}: {stands}", "note"))
    return out


# Attested ts of other nodes named in one note; past them they are counted (a member may
# sign any number of ``imported`` statements of one entry: 30,000 made a 2.6 MB note).
CONFLICTS_LISTED = 5


def _listed(others: Sequence[tuple[str, str, str]]) -> str:
    shown = "; ".join(f"{ts} by {node} (at {at})" for ts, node, at in others[:CONFLICTS_LISTED])
    more = others[CONFLICTS_LISTED:]
    if not more:
        return shown
    nodes = len({node for _ts, node, _at in more})
    return f"{shown}; and {len(more)} more, by {count(nodes, 'node')}"
