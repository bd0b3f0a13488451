"""What an ``imported`` attestation fixes: the ts of an entry nobody signed (decision 0119).

An entry's ts is outside its hash, and the store keeps the earliest ts of an id, so an
unsigned entry moves to any earlier ts a member sends. An author signature stops that
(decision 0048); for an entry no author signed, an ``imported`` attestation — "this node
held it, dated so" — does:

* an entry held at a ts an import attestation held names keeps it: a received copy dated
  otherwise is refused alone (the first attested copy held wins, whoever attested the
  others — a member's own ``imported`` statement of another ts is kept as evidence, and
  moves nothing);
* an entry not held yet, with import attestations held, is taken only at a ts they name;
* an entry held at a ts none of them names (its copy arrived before the attestation) takes
  the earliest ts they name when they are stored (``provenance.imported_times_replace``).

Pure: the rule (:func:`fixed_times`), the refusal's words, and what ``verify`` says of an
entry's import attestations (:func:`import_findings`). The reads are the storages'.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lifeline.audit.line import Linked
from lifeline.entry import Entry
from lifeline_mesh.notary.statement import Attestation
from lifeline_mesh.notary.verdict import Finding

__all__ = ["fixed_times", "import_findings", "import_refusal", "imported_detail"]


def fixed_times(attested: Mapping[str, set[str]], held: Mapping[str, str]) -> dict[str, set[str]]:
    """The ts a received copy of each entry may carry, for entries with no author signature
    and import attestations held. ``attested``: entry id → the ts its import attestations
    name; ``held``: the stored ts of those the line holds. An entry held at an attested ts
    keeps it; any other may take one of the attested ts."""
    out: dict[str, set[str]] = {}
    for entry_id, times in attested.items():
        ts = held.get(entry_id)
        out[entry_id] = {ts} if ts is not None and ts in times else set(times)
    return out


def import_refusal(entry: Entry, fixed: set[str]) -> str:
    """Why a copy dated otherwise than its import attestations fix is refused."""
    return (
        f"a copy dated {entry.ts}; no author signed it, and an import attestation held fixes "
        f"its ts at {', '.join(sorted(fixed))}: refused, the attested copy stands"
    )


def imported_detail(old: str, attested: str) -> str:
    """Why an entry held at a ts no import attestation names took an attested one."""
    return (
        f"held at {old}, a time neither an author nor an import attestation names; attested "
        f"at import at {attested}, which replaced it"
    )


def import_findings(
    entry: Linked, imports: Sequence[Attestation], *, authored: bool
) -> list[Finding]:
    """What ``verify`` says of an entry's import attestations (by trusted signers).

    With no author signature: the stored ts must be one they attest (else ``ts-mismatch``,
    the ts was edited after the import), noted ``imported`` with the node that attested it
    first. Attestations of other ts (another node imported it at another time, or a member
    sent its own to move it) are a note, ``import-conflict``: the attested ts held first
    stands. With an author signature, the author's ts rules (decision 0048): an import
    attestation of another ts is the same note."""
    if not imports:
        return []
    naming = [a for a in imports if a.extras[0] == entry.ts]
    others = sorted({(a.extras[0], a.node_id, a.ts) for a in imports if a.extras[0] != entry.ts})
    out: list[Finding] = []
    if not authored:
        if not naming:
            signed = ", ".join(sorted({a.extras[0] for a in imports}))
            detail = (
                f"stored ts {entry.ts} is not the ts attested at import ({signed}); "
                "the time was edited after the import was attested"
            )
            return [Finding("ts-mismatch", entry.id, detail)]
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
    if others:
        listed = "; ".join(f"{ts} by {node} (at {at})" for ts, node, at in others)
        stands = (
            "its author's signed ts stands (decision 0048)"
            if authored
            else "the attested ts held first stands, and a copy dated otherwise is refused "
            "(decision 0119)"
        )
        detail = f"held at {entry.ts}; also attested at import at another ts: {listed}: {stands}"
        out.append(Finding("import-conflict", entry.id, detail, "note"))
    return out
