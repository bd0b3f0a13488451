"""Pure verification rules and signer registry: revocation, notes, members.json shapes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lifeline.errors import BadSignature, ConfigError, InvalidEntry
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.notary.admission import check_entry_times, check_items
from lifeline_mesh.notary.import_times import fixed_times
from lifeline_mesh.notary.rules import Policy, check_attestations
from lifeline_mesh.notary.sign import witness
from lifeline_mesh.notary.signers import FileSigners, SignerState
from lifeline_mesh.notary.statement import MAX_WITNESS_IDS, Role, decode, sign
from lifeline_mesh.notary.storage import NotaryStore
from tests.support.entries import make_entry

A, B = NodeIdentity.generate(), NodeIdentity.generate()
T0, T1, T2 = "2026-02-01T00:00:00.000000Z", "2026-03-01T00:00:00.000000Z", "2026-04-01T00:00:00Z"


def test_revoked_signer_fails_only_for_signatures_after_revocation() -> None:
    early, late = make_entry("early", ts=T0), make_entry("late", ts=T2)
    items = [
        sign(B, Role.AUTHOR, early.id, early.ts).item,
        sign(B, Role.AUTHOR, late.id, late.ts).item,
    ]
    signers = FileSigners([A.node_id], revoked={B.node_id: T1})
    verdict = check_attestations([early, late], items, signers, Policy(A.node_id))
    by_subject = {f.subject: f for f in verdict.findings}
    assert by_subject[late.id].check == "revoked-signer" and by_subject[late.id].severity == "fail"
    assert by_subject[early.id].severity == "note"
    # Admission stores both: members that learned of the revocation later may already hold
    # the late one, and refusing it would stop their syncs for good. verify flags it.
    assert len(check_items(items, "2026-05-01T00:00:00.000000Z", signers)) == 2
    stranger = FileSigners([A.node_id])
    with pytest.raises(BadSignature, match="not a member"):
        check_items([items[1]], "2026-05-01T00:00:00.000000Z", stranger)


def test_attestations_for_entries_not_here_yet_are_notes_unless_ours() -> None:
    absent = make_entry("elsewhere")
    theirs = sign(B, Role.AUTHOR, absent.id, T0).item
    signers = FileSigners([A.node_id, B.node_id])
    verdict = check_attestations([], [theirs], signers, Policy(A.node_id))
    assert [(f.check, f.severity) for f in verdict.findings] == [("attested-missing", "note")]
    ours = sign(A, Role.AUTHOR, absent.id, T0).item
    verdict = check_attestations([], [ours], signers, Policy(A.node_id))
    assert [(f.check, f.severity) for f in verdict.findings] == [("truncated", "fail")]


def test_members_file_shapes_and_errors(tmp_path: Path) -> None:
    path = NodeHome(tmp_path).members_path
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps([B.node_id.upper(), {"node_id": A.node_id}]))
    signers = FileSigners.load(NodeHome(tmp_path), None)
    assert signers.status(B.node_id).state is SignerState.KNOWN
    path.write_text(json.dumps({"members": [{"node_id": B.node_id, "revoked_at": "2026-03-01Z"}]}))
    with pytest.raises(ConfigError, match="revoked_at"):
        FileSigners.load(NodeHome(tmp_path), A.node_id)
    path.write_text(json.dumps({"members": [{"node_id": B.node_id, "revoked_at": T2}]}))
    status = FileSigners.load(NodeHome(tmp_path), A.node_id).status(B.node_id)
    assert (
        status.state is SignerState.REVOKED and status.revoked_at == "2026-04-01T00:00:00.000000Z"
    )
    path.write_text(json.dumps({"members": [{"name": "no id"}]}))
    with pytest.raises(ConfigError, match="no node_id"):
        FileSigners.load(NodeHome(tmp_path), A.node_id)
    path.write_text("{")
    with pytest.raises(ConfigError, match="not readable JSON"):
        FileSigners.load(NodeHome(tmp_path), A.node_id)


async def test_a_large_batch_gets_one_receipt_per_slice(tmp_path: Path) -> None:
    ids = [f"{n:064x}" for n in range(MAX_WITNESS_IDS + 5)]
    async with await SqliteStore.open(tmp_path / "l.db") as store:
        receipts = await witness(store, A, list(reversed(ids)), T0)
        assert [len(r.extras) for r in receipts] == [MAX_WITNESS_IDS, 5]
        notary = await NotaryStore.attach(store)
        stored = [decode(i) for i in await notary.items()]
    assert sorted(e for r in stored for e in r.extras) == ids


def test_received_times_in_another_iso_form_are_judged() -> None:
    """A received entry's ts in another ISO 8601 form (lifeline-context wrote ``…:00Z``
    without fractions) is brought to the stored form as it is decoded, so admission's time
    arithmetic reads it: a backdate is refused with the usual message. (A stored row edited
    into a form that is no time is `verify`'s case: ts-unreadable.)"""
    parent = make_entry("parent", ts="2026-01-10T12:00:00.000000Z")
    known = {parent.id: parent.ts}
    backdated = make_entry("short form", (parent.id,), ts="2026-01-10T11:00:00Z")
    with pytest.raises(InvalidEntry, match="backdated; refused"):
        check_entry_times([backdated], {}, known)
    within = make_entry("within the skew", (parent.id,), ts="2026-01-10T11:59:59Z")
    check_entry_times([within], {}, known)


def test_import_attestations_of_another_ts_are_a_note_not_a_failure() -> None:
    """An entry held at the ts A attested at import; B attested an earlier one (another
    import, or a member's try at moving it): a note naming B, never a failure — unless no
    import names the ts held (edited after the import). Beside an author signature, an
    import of another ts is the same note (decision 0119)."""
    imported, authored = make_entry("imported", ts=T1), make_entry("authored", ts=T1)
    signers = FileSigners([A.node_id, B.node_id])
    items = [
        sign(A, Role.IMPORTED, imported.id, T2.replace("Z", ".000000Z"), imported.ts).item,
        sign(B, Role.IMPORTED, imported.id, T0, T0).item,
        sign(A, Role.AUTHOR, authored.id, authored.ts).item,
        sign(B, Role.IMPORTED, authored.id, T0, T0).item,
    ]
    verdict = check_attestations([imported, authored], items, signers, Policy(A.node_id))
    found = {(f.check, f.subject): f for f in verdict.findings}
    assert not verdict.failures and (verdict.signed, verdict.imported) == (1, 1)
    assert A.node_id in found[("imported", imported.id)].detail
    for entry in (imported, authored):
        conflict = found[("import-conflict", entry.id)]
        assert f"{T0} by {B.node_id}" in conflict.detail and conflict.severity == "note"
    # B's claim alone: the entry is as unsigned as before it, and the claim a note; only
    # this node's own attestation of another ts says the ts was edited (decision 0122)
    verdict = check_attestations([imported], items[1:2], signers, Policy(A.node_id))
    checks = [(f.check, f.severity) for f in verdict.findings]
    assert checks == [("unsigned", "note"), ("import-conflict", "note")]
    assert (verdict.imported, verdict.unsigned) == (0, 1)
    verdict = check_attestations([imported], items[1:2], signers, Policy(B.node_id))
    assert [(f.check, f.severity) for f in verdict.findings] == [("ts-mismatch", "fail")]


def test_an_import_conflict_names_a_few_claims_and_counts_the_rest() -> None:
    """A member may sign any number of `imported` statements of one entry: the note names
    five and counts the others (30,000 made a note of 2.6 MB)."""
    entry = make_entry("imported", ts=T1)
    signers = FileSigners([A.node_id, B.node_id])
    claims = [sign(A, Role.IMPORTED, entry.id, T0, entry.ts).item]
    claims += [
        sign(B, Role.IMPORTED, entry.id, T0, f"2025-01-01T00:00:{n:02d}.000000Z").item
        for n in range(40)
    ]
    verdict = check_attestations([entry], claims, signers, Policy(A.node_id))
    [conflict] = [f for f in verdict.findings if f.check == "import-conflict"]
    assert conflict.detail.count(B.node_id) == 5  # five listed, the rest counted
    assert "and 35 more, by 1 node" in conflict.detail and len(conflict.detail) < 1000


def test_an_import_fixes_the_held_ts_and_refuses_a_copy_dated_otherwise() -> None:
    held, fresh = make_entry("held", ts=T1), make_entry("fresh", ts=T1)
    attested = {held.id: {T0, T1}, fresh.id: {T0, T1}, "c" * 64: {T0}}
    fixed = fixed_times(attested, {held.id: T1, "c" * 64: T1})
    # only what is held at an attested ts: a copy of the others is taken (decision 0122)
    assert fixed == {held.id: {T1}}
    check_entry_times([held, fresh, fresh.with_ts(T2)], {}, {}, attested=fixed)
    with pytest.raises(InvalidEntry, match=f"fixes its ts at {T1}"):
        check_entry_times([held.with_ts(T0)], {}, {}, attested=fixed)
