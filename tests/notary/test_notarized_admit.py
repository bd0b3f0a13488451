"""A received batch of entries is admitted in one transaction: the check against the
attestations held and the entries commit together or not at all. No receipt is signed per
batch any more (decision 0015): the set counts what it admitted, and the node signs one
state statement when the session ends."""

from __future__ import annotations

from pathlib import Path

import pytest

from lifeline.entry import Entry
from lifeline.errors import BadSignature
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.notary.notarized_set import NotarizedEntrySet
from lifeline_mesh.notary.sign import sign_entries
from lifeline_mesh.notary.statement import Role, decode
from lifeline_mesh.notary.storage import NotaryStore
from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.sync.entry_set import EntrySet

NOW = "2026-03-01T12:00:00.000000Z"


def _chain(n: int) -> list[Entry]:
    out: list[Entry] = []
    for k in range(n):
        parents = (out[-1].id,) if out else ()
        ts = f"2026-03-01T10:00:{k:02d}.000000Z"
        out.append(Entry.create(ts=ts, kind="note", summary=f"e{k}", parents=parents))
    return out


async def _setup(tmp_path: Path) -> tuple[SqliteStore, NotaryStore, NotarizedEntrySet]:
    store = await SqliteStore.open(tmp_path / "line.db")
    notary = await NotaryStore.attach(store, clock=lambda: NOW)
    guarded = NotarizedEntrySet(EntrySet(store), notary)
    return store, notary, guarded


async def _receipts(notary: NotaryStore) -> list[tuple[str, ...]]:
    items = [decode(raw) for raw in await notary.items()]
    return [a.extras for a in items if a.role is Role.WITNESS]


async def test_a_copy_its_author_did_not_date_so_is_refused_alone(tmp_path: Path) -> None:
    """The copy is not stored and the batch's other entries are: one bad item never costs
    the session (decision 0048). The honest copy is admitted afterwards."""
    author = NodeIdentity.generate()
    first, second = _chain(2)
    store, notary, guarded = await _setup(tmp_path)
    try:
        await sign_entries(store, author, [first, second])  # held before the entries arrive
        edited = second.with_ts("2026-03-01T10:00:59.000000Z")  # not the time signed
        codec = EntryCodec()
        batch = [codec.parse(e.to_json()) for e in (first, edited)]
        assert (await guarded.admit(batch, [])).added == 1
        assert [e.id for e in await store.get_many([first.id, second.id])] == [first.id]
        with pytest.raises(BadSignature, match="time was edited"):
            await notary.check_entries([edited])  # the strict check still names it

        honest = [codec.parse(e.to_json()) for e in (first, second)]
        result = await guarded.admit(honest, [])
        assert result.added == 1 and await store.count() == 2 and guarded.admitted == 2
        assert (await guarded.admit(honest, [])).added == 0  # again: nothing new
        assert guarded.admitted == 2
        assert await _receipts(notary) == []  # no per-batch receipt: one state per session
    finally:
        await store.close()


async def test_cross_line_parents_are_declared_in_the_same_transaction(tmp_path: Path) -> None:
    other = "c" * 64
    child = Entry.create(ts=NOW, kind="note", summary="child", parents=(other,))
    store, _notary, guarded = await _setup(tmp_path)
    try:
        parsed = EntryCodec().parse(child.to_json())
        result = await guarded.admit([parsed], [(bytes.fromhex(other), "research")])
        assert result.added == 1 and await store.externals() == {other: "research"}
        assert await store.children(other) == [child.id]
    finally:
        await store.close()


@pytest.mark.parametrize("order", ["signed-first", "edited-first"])
async def test_an_id_twice_in_a_batch_is_checked_for_each_ts(tmp_path: Path, order: str) -> None:
    author = NodeIdentity.generate()
    first, second = _chain(2)
    store, _notary, guarded = await _setup(tmp_path)
    try:
        await sign_entries(store, author, [first, second])
        edited = second.with_ts("2026-03-01T10:00:59.000000Z")  # same id, a ts never signed
        pair = (second, edited) if order == "signed-first" else (edited, second)
        codec = EntryCodec()
        await guarded.admit([codec.parse(e.to_json()) for e in (first, *pair)], [])
        stored = {e.id: e.ts for e in await store.get_many([first.id, second.id])}
        assert stored == {first.id: first.ts, second.id: second.ts}  # the edited copy refused
    finally:
        await store.close()
