"""The notary's storage contract, on a line file (SQLite) and on a hub's database
(PostgreSQL): the same sets, the same refusals, one transaction per admitted batch."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from lifeline.entry import Entry
from lifeline.errors import BadSignature, InvalidEntry
from lifeline.ledger import Draft, Ledger
from lifeline.store.port import Store
from lifeline.store.postgres import PgDatabase, PgStore
from lifeline.store.sqlite import SqliteStore
from lifeline.store.summary import SetTotals
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.notary.notarized_set import NotarizedEntrySet
from lifeline_mesh.notary.pg_schema import PG_NOTARY
from lifeline_mesh.notary.pg_storage import PgNotaryStore
from lifeline_mesh.notary.port import Notary
from lifeline_mesh.notary.provenance import Outcome
from lifeline_mesh.notary.seals import SEAL_MIN, seal
from lifeline_mesh.notary.sign import attest_state, sign_entries, state_statements
from lifeline_mesh.notary.statement import Role, decode, sign
from lifeline_mesh.notary.states import StateOf
from lifeline_mesh.notary.storage import NotaryStore
from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.sync.entry_set import EntrySet
from tests.support.pg_server import line_name

NOW = "2026-03-01T12:00:00.000000Z"


def _chain(n: int, tag: str = "e") -> list[Entry]:
    out: list[Entry] = []
    for k in range(n):
        parents = (out[-1].id,) if out else ()
        ts = f"2026-03-01T10:00:{k:02d}.000000Z"
        out.append(Entry.create(ts=ts, kind="note", summary=f"{tag}{k}", parents=parents))
    return out


@pytest.fixture(params=["sqlite", "postgres"])
async def line(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    if request.param == "sqlite":
        async with await SqliteStore.open(tmp_path / "line.db") as store:
            yield store
        return
    db = await PgDatabase.connect(request.getfixturevalue("pg_server"), migrations=PG_NOTARY)
    try:
        yield await db.line(line_name())
    finally:
        await db.close()


async def _notary(store: Store, source: str | None = None) -> Notary:
    if isinstance(store, PgStore):
        return PgNotaryStore(store, clock=lambda: NOW, source=source)
    assert isinstance(store, SqliteStore)
    notary = await NotaryStore.attach(store, clock=lambda: NOW)
    notary.source = source
    return notary


async def test_attestations_form_the_same_set_on_every_store(line: Store) -> None:
    author = NodeIdentity.generate()
    entries = _chain(3)
    notary = await _notary(line)
    atts = [sign(author, Role.AUTHOR, e.id, e.ts) for e in entries]
    assert await notary.admit(atts) == 3
    assert await notary.admit(atts) == 0  # idempotent
    assert await notary.keys() == sorted((a.sort_key, a.id) for a in atts)
    total = sum(int.from_bytes(a.id, "little") for a in atts) % (1 << 256)
    assert await notary.totals() == SetTotals(3, total)
    assert await notary.fetch([atts[2].id, b"\x00" * 32, atts[0].id]) == [
        atts[2].item,
        atts[0].item,
    ]
    assert await notary.count() == 3 and len(await notary.items()) == 3
    assert await notary.statements().count() == 0
    forged = bytearray(atts[0].item)
    forged[-1] ^= 1
    with pytest.raises(BadSignature, match="attestation 0 of the batch refused"):
        await notary.admit([bytes(forged)])
    [state] = state_statements(author, "ledger", StateOf(0, "00" * 16, ()), NOW)
    with pytest.raises(InvalidEntry, match="belongs to the set 'statements'"):
        await notary.admit([state])


async def test_a_copy_its_author_did_not_date_so_is_refused_alone(line: Store) -> None:
    """Refused and named with its sender; the rest of the batch is stored (decision 0048)."""
    author = NodeIdentity.generate()
    first, second, third = _chain(3)
    notary = await _notary(line, source="rogue-node")
    guarded = NotarizedEntrySet(EntrySet(line), notary)
    await sign_entries(line, author, [first, second])  # held before the entries arrive
    codec = EntryCodec()
    edited = second.with_ts("2026-03-01T10:00:59.000000Z")  # not the time signed
    result = await guarded.admit([codec.parse(e.to_json()) for e in (first, edited, third)], [])
    assert result.added == 1 and await line.count() == 1  # `third` is a child of the copy
    [child, refused] = sorted(await notary.sources(), key=lambda r: r.detail)
    assert (refused.entry_id, refused.ts, refused.source) == (second.id, edited.ts, "rogue-node")
    assert refused.outcome is Outcome.REFUSED and "did not sign" in refused.detail
    assert child.entry_id == third.id and child.outcome is Outcome.REFUSED
    honest = [codec.parse(e.to_json()) for e in (first, second, third)]
    assert (await guarded.admit(honest, [])).added == 2
    other = "c" * 64
    child_of = Entry.create(ts=NOW, kind="note", summary="child", parents=(other, second.id))
    result = await guarded.admit(
        [codec.parse(child_of.to_json())], [(bytes.fromhex(other), "research")]
    )
    assert result.added == 1 and await line.externals() == {other: "research"}
    assert await line.count() == 4 and guarded.admitted == 4
    # `third` arrived unsigned from the node: its sender is its attributable source
    unsigned = [r for r in await notary.sources() if r.outcome is Outcome.UNSIGNED]
    assert {r.entry_id for r in unsigned} == {third.id, child_of.id}


async def test_an_unsigned_copy_takes_its_authors_signed_time(line: Store) -> None:
    """A copy stored without its signature, dated earlier than its author dated it: the
    signature, when it arrives, replaces the ts, and the copy's sender is named."""
    author = NodeIdentity.generate()
    [entry] = _chain(1)
    early = entry.with_ts("2026-03-01T09:00:00.000000Z")
    notary = await _notary(line, source="rogue-node")
    guarded = NotarizedEntrySet(EntrySet(line), notary)
    assert (await guarded.admit([EntryCodec().parse(early.to_json())], [])).added == 1
    later = await _notary(line, source="honest-node")
    assert await later.admit([sign(author, Role.AUTHOR, entry.id, entry.ts)]) == 1
    [held] = await line.get_many([entry.id])
    assert held.ts == entry.ts
    replaced = [r for r in await later.sources() if r.outcome is Outcome.REPLACED]
    assert [(r.source, r.ts) for r in replaced] == [("rogue-node", early.ts)]
    # the entries' whole-set fingerprint follows the new ts
    fresh = EntrySet(line)
    summary = await fresh.summary()
    assert summary is not None
    assert (await fresh.snapshot()).whole() == (summary.count, summary.total)


async def test_a_backdated_signature_is_refused_against_the_stored_parent(line: Store) -> None:
    author = NodeIdentity.generate()
    first, second = _chain(2)
    await line.append_many([first, second])
    notary = await _notary(line)
    early = sign(author, Role.AUTHOR, second.id, "2026-03-01T09:00:00.000000Z")
    with pytest.raises(InvalidEntry, match="backdated"):
        await notary.admit([early])
    assert await notary.count() == 0


async def test_a_signature_dated_after_a_held_child_is_refused(line: Store) -> None:
    """An author signature of an entry nobody signed, dated after a child of it held, is
    refused on both stores, and the entry keeps its ts (decision 0124); one dated before
    the child is taken as its author's."""
    author = NodeIdentity.generate()
    first, second = _chain(2)
    await line.append_many([first, second])
    notary = await _notary(line)
    late = sign(author, Role.AUTHOR, first.id, "2026-03-01T11:00:00.000000Z")
    with pytest.raises(InvalidEntry, match="after a child of it held"):
        await notary.admit([late])
    assert await notary.count() == 0
    [held] = await line.get_many([first.id])
    assert held.ts == first.ts
    assert await notary.admit([sign(author, Role.AUTHOR, first.id, first.ts)]) == 1


async def test_each_item_a_held_rule_refuses_is_refused_alone(line: Store) -> None:
    """A session's path (decision 0112): a backdated signature, a rolled-back state and an
    entry dated before its parent are each refused alone, the rest of their batch stored,
    and the reasons handed back; a batch taken whole (`admit`) still refuses them all."""
    author = NodeIdentity.generate()
    first, second, third = _chain(3)
    await line.append_many([first, second])
    notary = await _notary(line, source="peer")
    early = sign(author, Role.AUTHOR, second.id, "2026-03-01T09:00:00.000000Z")
    honest = sign(author, Role.AUTHOR, first.id, first.ts)
    added, why = await notary.commit_each([early, honest])
    assert added == 1 and await notary.count() == 1 and len(why) == 1
    assert "#0 of its batch" in why[0] and "backdated" in why[0]
    assert second.id in notary.refused_signatures  # a copy of it now needs a good signature

    statements = notary.statements()
    held = StateOf(2, "00" * 16, (second.id,))
    full = state_statements(author, "ledger", held, "2026-03-01T11:00:00.000000Z")
    fewer = state_statements(
        author, "ledger", StateOf(1, "00" * 16, (first.id,)), "2026-03-01T11:30:00.000000Z"
    )
    added, why = await statements.commit_each([*full, *fewer])
    assert added == len(full) and len(why) == 1 and "rolled back" in why[0]
    with pytest.raises(InvalidEntry, match="rolled back"):
        await statements.admit(fewer)

    guarded = NotarizedEntrySet(EntrySet(line), notary)
    before = Entry.create(
        ts="2026-03-01T09:30:00.000000Z", kind="note", summary="clock went back",
        parents=(third.id,),
    )  # fmt: skip
    after = Entry.create(ts=NOW, kind="note", summary="its child", parents=(before.id,))
    apart = Entry.create(ts=NOW, kind="note", summary="unrelated")
    codec = EntryCodec()
    result = await guarded.admit(
        [codec.parse(e.to_json()) for e in (third, before, after, apart)], []
    )
    assert result.added == 2 and await line.count() == 4  # third and apart
    assert len(result.refused) == 1 and "before its parent" in result.refused[0]
    refused = {r.entry_id: r.detail for r in await notary.sources() if r.outcome is Outcome.REFUSED}
    assert "backdated" in refused[before.id] and "a child of a refused copy" in refused[after.id]


async def test_the_state_statement_is_signed_once_per_state(line: Store) -> None:
    node = NodeIdentity.generate()
    await line.append_many(_chain(4))
    [statement] = await attest_state(line, node, "ledger", lambda: NOW)
    assert statement.role is Role.STATE and statement.summary_count == 4
    assert await attest_state(line, node, "ledger", lambda: NOW) == []  # nothing changed
    await line.append_many(_chain(2, "more"))
    [later] = await attest_state(line, node, "ledger", lambda: "2026-03-01T12:00:01.000000Z")
    assert later.summary_count == 6 and later.extras[1] != statement.extras[1]
    notary = (await _notary(line)).statements()
    assert sorted(await notary.items()) == sorted([statement.item, later.item])
    assert {decode(i).role for i in await notary.items()} == {Role.STATE}


async def test_the_state_fingerprint_is_the_same_on_both_stores(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    node = NodeIdentity.generate()
    entries = _chain(5)
    signed = []
    async with await SqliteStore.open(tmp_path / "a.db") as sqlite:
        await sqlite.append_many(entries)
        signed += await attest_state(sqlite, node, "ledger", lambda: NOW)
    db = await PgDatabase.connect(request.getfixturevalue("pg_server"), migrations=PG_NOTARY)
    try:
        pg = await db.line(line_name())
        await pg.append_many(entries)
        signed += await attest_state(pg, node, "ledger", lambda: NOW)
    finally:
        await db.close()
    assert signed[0].item == signed[1].item  # same node, time and state: the same bytes


async def test_a_peers_declarations_and_dedup_keys_change_nothing_of_ours(line: Store) -> None:
    """What a member sends with its entries: cross-line declarations are kept only for
    parents of the batch, never replace one held, and name no entry held; its dedup keys
    are stored with its entries but never answer a local write (decision 0115)."""
    design = "d" * 64
    await line.declare_external(design, "design")
    held = Entry.create(ts=NOW, kind="note", summary="held", parents=(design,))
    await line.append(held)
    guarded = NotarizedEntrySet(EntrySet(line), await _notary(line, source="member-b"))
    squat = Entry.create(ts=NOW, kind="decision", summary="squatted", dedup_key="mcp:retry-42")
    child = Entry.create(ts=NOW, kind="note", summary="child", parents=(design, held.id))
    stray = [(bytes([k]) * 32, "zz") for k in range(1, 200)]
    declared = [(bytes.fromhex(design), "bogus"), (bytes.fromhex(held.id), "bogus"), *stray]
    codec = EntryCodec()
    result = await guarded.admit([codec.parse(e.to_json()) for e in (squat, child)], declared)
    assert result.added == 2
    assert await line.externals() == {design: "design"}
    assert (await line.get(squat.id)).dedup_key == "mcp:retry-42"  # kept, as it travels
    assert await line.by_dedup_key("mcp:retry-42") is None
    ours, created = await Ledger(line).append(
        Draft(kind="decision", summary="Database: PostgreSQL 16", dedup_key="mcp:retry-42")
    )
    assert created and ours.summary == "Database: PostgreSQL 16"
    assert await line.by_dedup_key("mcp:retry-42") == await line.get(ours.id)
    again, created = await Ledger(line).append(
        Draft(kind="decision", summary="Database: PostgreSQL 16", dedup_key="mcp:retry-42")
    )
    assert not created and again.id == ours.id  # a retry still records once


async def test_an_imported_entry_keeps_the_ts_its_import_attests(line: Store) -> None:
    """An entry nobody signed, held with this node's import attestation: a member's own
    `imported` statement of an earlier ts is kept as evidence and moves nothing, its copy
    at that ts is refused alone and named, and a child written on the entry is stored
    (decision 0119). A copy of an entry not held is taken as any unsigned copy, whatever
    ts a member attested: a statement naming a ts no copy carries refused the entry and
    its descendants everywhere (decision 0122)."""
    here, rogue = NodeIdentity.generate(), NodeIdentity.generate()
    entry, other = _chain(1)[0], _chain(1, "other")[0]
    await line.append(entry)
    early, later = "2026-03-01T09:00:00.000000Z", "2026-03-01T11:00:00.000000Z"
    statements = (await _notary(line, source="rogue-node")).statements()
    assert await statements.admit([sign(here, Role.IMPORTED, entry.id, NOW, entry.ts)]) == 1
    forged = [
        sign(rogue, Role.IMPORTED, entry.id, "2026-03-01T09:00:01.000000Z", early),
        sign(rogue, Role.IMPORTED, other.id, NOW, later),
    ]
    assert await statements.admit(forged) == 2
    [held] = await line.get_many([entry.id])
    assert held.ts == entry.ts  # the attested ts held stands

    notary = await _notary(line, source="rogue-node")
    guarded = NotarizedEntrySet(EntrySet(line), notary)
    child = Entry.create(ts=NOW, kind="note", summary="on top", parents=(entry.id,))
    other_child = Entry.create(ts=NOW, kind="note", summary="on other", parents=(other.id,))
    moved = [entry.with_ts(early), child, other, other_child]
    codec = EntryCodec()
    result = await guarded.admit([codec.parse(e.to_json()) for e in moved], [])
    assert result.added == 3 and await line.count() == 4  # all but the moved copy
    held, taken = await line.get_many([entry.id, other.id])
    assert held.ts == entry.ts and taken.ts == other.ts  # the member's `later` moved nothing
    refused = {r.entry_id: r for r in await notary.sources() if r.outcome is Outcome.REFUSED}
    assert set(refused) == {entry.id}
    assert refused[entry.id].ts == early and refused[entry.id].source == "rogue-node"
    assert f"fixes its ts at {entry.ts}" in refused[entry.id].detail


async def test_an_import_attestation_moves_no_entry_held(line: Store) -> None:
    """An entry nobody signed, held at a ts no import attestation names: one that arrives
    after it, of an earlier or a later ts, moves nothing (a member's later one moved the
    entry after its children, which every new node then refused: decision 0122)."""
    importer, rogue = NodeIdentity.generate(), NodeIdentity.generate()
    [entry] = _chain(1)
    notary = await _notary(line, source="honest-node")
    guarded = NotarizedEntrySet(EntrySet(line), notary)
    codec = EntryCodec()
    assert (await guarded.admit([codec.parse(entry.to_json())], [])).added == 1
    statements = (await _notary(line, source="rogue-node")).statements()
    claims = [
        sign(rogue, Role.IMPORTED, entry.id, NOW, "2026-03-01T11:30:00.000000Z"),
        sign(importer, Role.IMPORTED, entry.id, NOW, "2026-03-01T09:00:00.000000Z"),
    ]
    assert await statements.admit(claims) == 2
    [held] = await line.get_many([entry.id])
    assert held.ts == entry.ts
    assert not [r for r in await statements.sources() if r.outcome is Outcome.REPLACED]
    fresh = EntrySet(line)  # the entries' whole-set fingerprint is the stored rows'
    summary = await fresh.summary()
    assert summary is not None
    assert (await fresh.snapshot()).whole() == (summary.count, summary.total)


async def test_seals_are_kept_with_their_spans_on_every_store(line: Store) -> None:
    """Seals (decision 0149): made with a bulk write, held beside the sets with the span of
    keys they vouch for, found by a run's span, widened when held again, stored with a
    received batch in its transaction."""
    author = NodeIdentity.generate()
    notary = await _notary(line)
    atts = [sign(author, Role.AUTHOR, e.id, e.ts) for e in _chain(SEAL_MIN + 4)]
    [(made, lo, hi)] = seal(author, atts, NOW)
    await notary.add(atts)
    await notary.keep_seals([(made, lo + 10, hi)])
    assert [(s.item, a, b) for s, a, b in await notary.held_seals()] == [(made.item, lo + 10, hi)]
    await notary.keep_seals([(made, lo, hi - 10)])  # held again: its span widened
    assert [(a, b) for _, a, b in await notary.held_seals()] == [(lo, hi)]
    assert await notary.seals_covering(None, None) == [(made.id, made.item)]
    assert await notary.seals_covering(hi, None) == [(made.id, made.item)]
    assert await notary.seals_covering(hi + 1, None) == []
    assert await notary.seals_covering(None, lo - 1) == []
    # a received batch's seals go in with it (nothing held before: a fresh line's notary)
    other = NodeIdentity.generate()
    theirs = [sign(other, Role.AUTHOR, e.id, e.ts) for e in _chain(SEAL_MIN, "o")]
    [(their_seal, a, b)] = seal(other, theirs, NOW)
    notary.hold_seals([(their_seal, a, b)])
    added, refused = await notary.commit_each(theirs)
    assert (added, refused) == (SEAL_MIN, [])
    assert {s.id for s, _, _ in await notary.held_seals()} == {made.id, their_seal.id}
    with pytest.raises(ValueError, match="no member of a set"):
        await notary.add([made])
