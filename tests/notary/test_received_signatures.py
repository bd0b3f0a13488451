"""Entries checked against the author signatures their session stored just before them
(an initial sync sends every signature first): the check gives what a lookup of the table
gives — a ts the author never signed is refused, whether the signature is remembered or
only in the table — and received author statements decode alike on the fast path."""

from __future__ import annotations

from pathlib import Path

import pytest

from lifeline.entry import Entry
from lifeline.errors import BadSignature, InvalidEntry
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.notary import signed_times
from lifeline_mesh.notary.notarized_set import NotarizedEntrySet
from lifeline_mesh.notary.statement import Attestation, Role, decode, sign
from lifeline_mesh.notary.storage import NotaryStore
from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.sync.entry_set import EntrySet

NOW = "2026-03-01T12:00:00.000000Z"
AUTHOR = NodeIdentity.generate()
EDITED = "2026-03-01T10:00:59.000000Z"  # a ts no signature names


def _chain(n: int) -> list[Entry]:
    out: list[Entry] = []
    for k in range(n):
        parents = (out[-1].id,) if out else ()
        ts = f"2026-03-01T10:00:{k:02d}.000000Z"
        out.append(Entry.create(ts=ts, kind="note", summary=f"e{k}", parents=parents))
    return out


async def _receive_signatures(notary: NotaryStore, entries: list[Entry]) -> None:
    """As a session admits a received batch of author signatures: checked, then stored."""
    items = [sign(AUTHOR, Role.AUTHOR, e.id, e.ts).item for e in entries]
    await notary.commit(await notary.prepare(items))


async def _admit(guarded: NotarizedEntrySet, entries: list[Entry]) -> int:
    codec = EntryCodec()
    return (await guarded.admit([codec.parse(e.to_json()) for e in entries], [])).added


@pytest.mark.parametrize("remembered", [100, 1, 0])
async def test_an_edited_ts_is_refused_after_its_signature_arrived(
    tmp_path: Path, remembered: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 100: every signature remembered; 1: only the first; 0: none (the table alone)
    monkeypatch.setattr(signed_times, "MAX_SIGNED_TIMES", remembered)
    entries = _chain(3)
    async with await SqliteStore.open(tmp_path / "line.db") as store:
        notary = await NotaryStore.attach(store, clock=lambda: NOW)
        guarded = NotarizedEntrySet(EntrySet(store), notary)
        await _receive_signatures(notary, entries)
        for k in range(3):
            edited = [*entries[:k], entries[k].with_ts(EDITED), *entries[k + 1 :]]
            with pytest.raises(BadSignature, match="time was edited"):
                await notary.check_entries(edited)
            # the edited copy and its children are refused; what comes before it is stored
            assert await _admit(guarded, edited) == (1 if k else 0)
            assert await store.count() == k
        assert await _admit(guarded, entries) == 1
        assert {e.id: e.ts for e in await store.get_many(e.id for e in entries)} == {
            e.id: e.ts for e in entries
        }


async def test_a_second_signature_of_an_entry_is_found_in_the_table(tmp_path: Path) -> None:
    """Two signatures of one id (its ts was edited and signed again): either ts passes,
    a third is refused, though only the first signature is remembered."""
    [entry] = _chain(1)
    again = entry.with_ts("2026-03-01T10:30:00.000000Z")
    async with await SqliteStore.open(tmp_path / "line.db") as store:
        notary = await NotaryStore.attach(store, clock=lambda: NOW)
        guarded = NotarizedEntrySet(EntrySet(store), notary)
        await _receive_signatures(notary, [entry])
        await _receive_signatures(notary, [again])
        with pytest.raises(BadSignature, match="time was edited"):
            await notary.check_entries([entry.with_ts(EDITED)])
        assert await _admit(guarded, [entry.with_ts(EDITED)]) == 0  # refused, not stored
        assert await _admit(guarded, [again]) == 1


async def test_signatures_refused_at_admission_are_not_remembered(tmp_path: Path) -> None:
    entries = _chain(2)
    forged = sign(AUTHOR, Role.AUTHOR, entries[0].id, entries[0].ts).item
    forged = forged[:-1] + bytes([forged[-1] ^ 1])  # the signature no longer verifies
    async with await SqliteStore.open(tmp_path / "line.db") as store:
        notary = await NotaryStore.attach(store, clock=lambda: NOW)
        guarded = NotarizedEntrySet(EntrySet(store), notary)
        with pytest.raises(BadSignature):
            await notary.commit(await notary.prepare([forged]))
        assert await notary.count() == 0
        # a real signature of another ts arrives: the entry as first dated is refused
        other = sign(AUTHOR, Role.AUTHOR, entries[0].id, EDITED).item
        await notary.commit(await notary.prepare([other]))
        with pytest.raises(BadSignature, match="time was edited"):
            await notary.check_entries(entries[:1])
        assert await _admit(guarded, entries[:1]) == 0


def test_an_author_statement_decodes_to_what_was_signed() -> None:
    [entry] = _chain(1)
    for ts in (entry.ts, "2028-02-29T23:59:59.999999Z", "2026-12-31T00:00:00.000000Z"):
        signed = sign(AUTHOR, Role.AUTHOR, entry.id, ts)
        got = decode(signed.item)
        assert isinstance(got, Attestation) and got == signed
        assert (got.id, got.sort_key, got.statement) == (
            signed.id,
            signed.sort_key,
            signed.statement,
        )
        got.verify()


@pytest.mark.parametrize(
    "ts",
    ["2026-02-29T10:00:00.000000Z", "2026-04-31T10:00:00.000000Z", "2026-02-30T10:00:00.000000Z"],
)
def test_an_author_statement_of_a_day_that_does_not_exist_is_refused(ts: str) -> None:
    [entry] = _chain(1)
    signed = sign(AUTHOR, Role.AUTHOR, entry.id, "2026-03-01T10:00:00.000000Z")
    # the same statement with another ts, signed properly: only its ts is wrong
    body = signed.statement.replace(b"2026-03-01T10:00:00.000000Z", ts.encode())
    item = body + AUTHOR.public_key + AUTHOR.sign(body)
    with pytest.raises(InvalidEntry, match="ISO-8601"):
        decode(item)


async def test_what_a_session_remembers_of_its_signatures(tmp_path: Path) -> None:
    """An initial sync stores every signature before the entries: the session keeps each
    in 8 to 16 bytes (decision 0105), finds the entries signed as dated, an entry sent again
    too, and still refuses an edited copy."""
    entries = _chain(4)
    async with await SqliteStore.open(tmp_path / "line.db") as store:
        notary = await NotaryStore.attach(store, clock=lambda: NOW)
        guarded = NotarizedEntrySet(EntrySet(store), notary)
        await _receive_signatures(notary, entries)
        assert notary._remembered is not None and len(notary._remembered) == 4
        assert notary._remembered.nbytes() == 4096 * 8  # the table's first size
        assert await _admit(guarded, entries[:3]) == 3
        assert await _admit(guarded, entries) == 1  # the three again: held already
        with pytest.raises(BadSignature, match="time was edited"):
            await notary.check_entries([entries[0].with_ts(EDITED)])
