"""Seals (decision 0149): one author signature over a batch of its author signatures.

A bulk write is sealed; a pull of a whole run checks the seals, not each signature, and
keeps them to serve on; a peer that does not name the capability gets none; a seal
vouches only for the exact items it lists, under its own key, and one that does not pass
vouches for nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from lifeline.errors import EntryTooLarge, InvalidEntry
from lifeline.home import Home
from lifeline.ledger import Draft, Ledger, utc_now
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.node.root import Node
from lifeline_mesh.notary import intake
from lifeline_mesh.notary.intake import ATTESTATIONS_TABLE, verify_batch
from lifeline_mesh.notary.row_writes import insert_attestations
from lifeline_mesh.notary.seals import SEAL_MIN, SealMemory, keep_seals, seal
from lifeline_mesh.notary.sign import AuthorHook
from lifeline_mesh.notary.signers import FileSigners, KnownSigners
from lifeline_mesh.notary.statement import MAX_SEAL_IDS, Attestation, Role, decode, sign
from lifeline_mesh.notary.storage import NotaryStore
from lifeline_mesh.recon.session import SessionLimits
from tests.support.pg_server import fresh_database
from tests.support.recon_helpers import chain
from tests.support.sync_helpers import make_node, serving, signature_ids, write_signed

N = 300  # entries written at once: sealed (SEAL_MIN and more)


def _identity(root: Path) -> NodeIdentity:
    identity, _ = NodeIdentity.load_or_create(NodeHome(root))
    return identity


def _seal_rows(root: Path) -> list[tuple[bytes, int, int]]:
    path = root / ".lifeline" / "ledger.db"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        sql = "SELECT item, first_key, last_key FROM seals ORDER BY first_key"
        return [(bytes(i), int(lo), int(hi)) for i, lo, hi in conn.execute(sql)]


async def _sealed_node(root: Path, limits: SessionLimits | None = None) -> Node:
    """A node at ``root`` holding ``N`` entries it wrote at once: sealed."""
    node = make_node(root) if limits is None else make_node(root, limits=limits)
    await write_signed(node, root, chain(N, "sealed"))
    return node


def _signed(identity: NodeIdentity, n: int) -> list[Attestation]:
    """Author signatures by ``identity`` over a chain of ``n`` entries."""
    return [sign(identity, Role.AUTHOR, e.id, e.ts) for e in chain(n, "sealed")]


class _Checked:
    """Counts the items whose own signature admission checks (intake.first_bad_signature)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.items = 0
        real = intake.first_bad_signature

        async def counting(items: Sequence[bytes]) -> int:
            self.items += len(items)
            return await real(items)

        monkeypatch.setattr(intake, "first_bad_signature", counting)


# -- the statement ---------------------------------------------------------------------


def test_a_seal_reads_back_as_signed_and_its_shape_is_strict(tmp_path: Path) -> None:
    identity = _identity(tmp_path)
    ids = sorted(f"{k:064x}" for k in range(1, 4))
    made = sign(identity, Role.SEALED, "3", "2026-03-01T10:00:00.000000Z", *ids)
    back = decode(made.item)
    assert back == made and back.id == made.id
    back.verify()
    with pytest.raises(InvalidEntry, match="sorted and unique"):
        sign(identity, Role.SEALED, "3", "2026-03-01T10:00:00.000000Z", *reversed(ids))
    with pytest.raises(InvalidEntry, match="says '4' ids but lists 3"):
        sign(identity, Role.SEALED, "4", "2026-03-01T10:00:00.000000Z", *ids)
    many = [f"{k:064x}" for k in range(1, MAX_SEAL_IDS + 2)]
    with pytest.raises(EntryTooLarge, match="over the cap"):
        sign(identity, Role.SEALED, str(len(many)), "2026-03-01T10:00:00.000000Z", *many)


def test_seals_cover_a_bulk_write_in_key_order_and_none_a_short_one(tmp_path: Path) -> None:
    identity = _identity(tmp_path)
    atts = _signed(identity, 2 * MAX_SEAL_IDS + 5)
    seals = seal(identity, atts, utc_now())
    assert [len(s.extras) for s, _, _ in seals] == [MAX_SEAL_IDS, MAX_SEAL_IDS, 5]
    by_key = sorted(atts, key=lambda a: (a.sort_key, a.id))
    for n, (made, lo, hi) in enumerate(seals):
        part = by_key[n * MAX_SEAL_IDS : (n + 1) * MAX_SEAL_IDS]
        assert set(made.extras) == {a.id.hex() for a in part}
        assert (lo, hi) == (part[0].sort_key, part[-1].sort_key)
    assert seal(identity, atts[: SEAL_MIN - 1], utc_now()) == []
    other = _identity(tmp_path / "other")
    assert seal(other, atts, utc_now()) == []  # only one's own signatures


# -- admission -------------------------------------------------------------------------


async def _verify(
    items: Sequence[Attestation], memory: SealMemory, signers: KnownSigners | None = None
) -> list[Attestation]:
    async def held() -> list[Attestation]:
        return []

    return await verify_batch(
        items, now=utc_now(), signers=signers, skew_s=300.0, table=ATTESTATIONS_TABLE,
        held=held, vouched=memory.vouched,
    )  # fmt: skip


async def test_a_seal_vouches_only_for_the_exact_items_it_lists_under_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine, theirs = _identity(tmp_path / "a"), _identity(tmp_path / "b")
    entries = chain(40, "sealed")
    atts = [sign(mine, Role.AUTHOR, e.id, e.ts) for e in entries]
    [(made, _, _)] = seal(mine, atts, utc_now())
    memory = SealMemory()
    memory.learn([made], utc_now(), None, 300.0)
    checked = _Checked(monkeypatch)
    assert await _verify(atts, memory) == atts
    assert checked.items == 0  # every one vouched for
    # An item altered after it was sealed is another item: checked alone, refused.
    altered = replace(atts[3], signature=bytes(64))
    with pytest.raises(InvalidEntry, match="does not verify"):
        await _verify([altered], memory)
    # Another key's item is never vouched for by this seal, even one it lists: a seal by
    # ``theirs`` naming ``mine``'s items vouches for nothing of mine.
    foreign = sign(theirs, Role.SEALED, str(len(made.extras)), utc_now(), *made.extras)
    stranger = SealMemory()
    stranger.learn([foreign], utc_now(), None, 300.0)
    assert not any(stranger.vouched(a) for a in atts)
    forged = replace(sign(theirs, Role.AUTHOR, entries[0].id, entries[0].ts), signature=bytes(64))
    [(theirs_seal, _, _)] = seal(
        theirs, [forged, *[sign(theirs, Role.AUTHOR, e.id, e.ts) for e in entries[1:20]]], utc_now()
    )
    # ``theirs`` sealed its own forged item: it passes where the seal travels (its author
    # vouched for those very bytes), and verify reports it (docs/notary.md, Seals).
    own = SealMemory()
    own.learn([theirs_seal], utc_now(), None, 300.0)
    assert own.vouched(forged)


async def test_a_seal_that_does_not_pass_vouches_for_nothing(tmp_path: Path) -> None:
    mine = _identity(tmp_path / "a")
    atts = _signed(mine, 20)
    [(made, _, _)] = seal(mine, atts, utc_now())
    bad = decode(made.statement + made.public_key + bytes(64))
    ahead = seal(mine, atts, "2099-01-01T00:00:00.000000Z")[0][0]
    memory = SealMemory()
    memory.learn([bad, ahead], utc_now(), None, 300.0)
    assert memory.refused == 2 and len(memory) == 0
    assert not any(memory.vouched(a) for a in atts)
    # An unknown signer's seal: refused too (its items are then checked alone, and refused)
    stranger = _identity(tmp_path / "b")
    other = seal(stranger, _signed(stranger, 20), utc_now())
    memory.learn([other[0][0]], utc_now(), FileSigners({mine.node_id}), 300.0)
    assert memory.refused == 3 and len(memory) == 0


async def test_a_seal_sent_as_a_member_of_a_set_is_refused(tmp_path: Path) -> None:
    mine = _identity(tmp_path)
    atts = _signed(mine, 20)
    [(made, _, _)] = seal(mine, atts, utc_now())
    with pytest.raises(InvalidEntry, match="belongs to the set 'seals'"):
        await _verify([made], SealMemory())


def test_a_receiving_session_forgets_its_oldest_seals(tmp_path: Path) -> None:
    mine = _identity(tmp_path)
    atts = _signed(mine, 3 * SEAL_MIN)
    seals = [
        seal(mine, atts[k : k + SEAL_MIN], utc_now())[0][0] for k in range(0, len(atts), SEAL_MIN)
    ]
    memory = SealMemory(limit=2)
    memory.learn(seals, utc_now(), None, 300.0)
    assert len(memory) == 2
    assert not memory.vouched(atts[0]) and memory.vouched(atts[-1])


# -- through a session -----------------------------------------------------------------


async def test_a_pull_checks_the_seals_not_each_signature_and_serves_them_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = await _sealed_node(tmp_path / "a", limits=SessionLimits(max_frame_bytes=64 * 1024))
    sealed = _seal_rows(tmp_path / "a")
    assert len(sealed) == 1 and len(decode(sealed[0][0]).extras) == N
    checked = _Checked(monkeypatch)
    b = make_node(tmp_path / "b")
    async with serving(a) as (_, address):
        [report] = await b.sync(address, ["ledger"])
    assert report.entries_added == N and report.attestations_added == N, report
    assert checked.items == 0, checked.items  # the seal vouched for all of them
    assert signature_ids(tmp_path / "b") == signature_ids(tmp_path / "a")
    assert _seal_rows(tmp_path / "b") == sealed  # kept, with its span, to serve on
    c = make_node(tmp_path / "c")
    async with serving(b) as (_, address):
        [report] = await c.sync(address, ["ledger"])
    assert report.attestations_added == N and checked.items == 0
    assert _seal_rows(tmp_path / "c") == sealed


async def test_a_peer_that_does_not_take_seals_gets_none_and_checks_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = await _sealed_node(tmp_path / "a")
    checked = _Checked(monkeypatch)
    older = make_node(tmp_path / "b", limits=SessionLimits(seals=False))  # before 0149
    async with serving(a) as (_, address):
        [report] = await older.sync(address, ["ledger"])
    assert report.attestations_added == N and report.refused == 0, report
    assert checked.items == N  # every signature checked alone, as before seals
    assert _seal_rows(tmp_path / "b") == []


async def test_a_pushed_run_is_checked_by_its_seals_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = await _sealed_node(tmp_path / "a")
    checked = _Checked(monkeypatch)
    b = make_node(tmp_path / "b")
    async with serving(b) as (server, address):
        await a.sync(address, ["ledger"])
    [served] = server.reports
    assert served.attestations_added == N and checked.items == 0, served
    assert len(_seal_rows(tmp_path / "b")) == 1


async def test_a_seal_too_large_for_the_peers_frames_is_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = await _sealed_node(tmp_path / "a")  # one seal of ~20 KB
    checked = _Checked(monkeypatch)
    small = make_node(tmp_path / "b", limits=SessionLimits(max_frame_bytes=8192))
    async with serving(a) as (_, address):
        [report] = await small.sync(address, ["ledger"])
    assert report.error is None and report.attestations_added == N, report
    assert checked.items == N and _seal_rows(tmp_path / "b") == []


async def test_a_local_write_of_many_entries_is_sealed_in_its_transaction(tmp_path: Path) -> None:
    identity = _identity(tmp_path)
    async with await SqliteStore.open(Home(tmp_path).line_path("ledger")) as store:
        ledger = Ledger(store, hooks=[AuthorHook(identity)])
        await ledger.append_many([Draft("note", f"bulk {k}") for k in range(SEAL_MIN)])
        await ledger.append_many([Draft("note", f"short {k}") for k in range(SEAL_MIN - 1)])
    [(item, lo, hi)] = _seal_rows(tmp_path)
    made = decode(item)
    made.verify()
    path = Home(tmp_path).line_path("ledger")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT id, sort_key FROM attestations WHERE role = 'author'")
        keys = {bytes(i).hex(): int(k) for i, k in rows}
    assert len(keys) == 2 * SEAL_MIN - 1
    assert set(made.extras) <= keys.keys() and len(made.extras) == SEAL_MIN
    assert (lo, hi) == (min(keys[i] for i in made.extras), max(keys[i] for i in made.extras))


async def test_a_hub_keeps_the_seals_it_takes_and_serves_them(
    pg_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = await _sealed_node(tmp_path / "a")
    hub = make_node(tmp_path / "hub", store_url=await fresh_database(pg_server))
    checked = _Checked(monkeypatch)
    async with serving(hub) as (server, address):
        await a.sync(address, ["ledger"])  # pushed whole to the hub: checked by the seal
        laptop = make_node(tmp_path / "laptop")
        [report] = await laptop.sync(address, ["ledger"])  # pulled whole from the hub
    await hub.close()
    assert server.reports[0].attestations_added == N and report.attestations_added == N
    assert checked.items == 0, checked.items
    assert _seal_rows(tmp_path / "laptop") == _seal_rows(tmp_path / "a")


async def _rogue_line(root: Path, victim: NodeIdentity, n: int) -> list[Attestation]:
    """A rogue member's line, edited by hand: ``n`` entries with author signatures that
    claim ``victim``'s key but do not verify, one seal by the rogue listing them and one
    "by the victim" whose signature is made up. What its node then sends is what any node
    sends of its store. Returns the forged signatures."""
    rogue = _identity(root)
    node = make_node(root)
    entries = chain(n, "forged")
    async with node.open_line("ledger") as store:
        await store.append_many(entries)
        forged = [
            Attestation(Role.AUTHOR, e.id, e.ts, victim.node_id, (), victim.public_key, bytes(64))
            for e in entries
        ]
        ids = sorted(a.id.hex() for a in forged)
        by_rogue = sign(rogue, Role.SEALED, str(len(ids)), utc_now(), *ids)
        made_up = replace(by_rogue, node_id=victim.node_id, public_key=victim.public_key)
        lo, hi = forged[0].sort_key, forged[-1].sort_key

        def edit(conn: sqlite3.Connection) -> None:
            insert_attestations(conn, forged)
            keep_seals(conn, [(by_rogue, lo, hi), (made_up, lo, hi)])

        await NotaryStore.attach(store)  # type: ignore[arg-type]
        await store.run_write(edit)  # type: ignore[attr-defined]
    await node.close()
    return forged


async def test_a_rogue_members_seals_vouch_for_nothing_of_another_member(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    victim = _identity(tmp_path / "victim")
    forged = await _rogue_line(tmp_path / "rogue", victim, 20)
    checked = _Checked(monkeypatch)
    rogue = make_node(tmp_path / "rogue")
    b = make_node(tmp_path / "b", limits=SessionLimits(max_refused=100))
    async with serving(rogue) as (_, address):
        [report] = await b.sync(address, ["ledger"])
    # Both seals went ahead of the run; neither vouched: every forgery's own signature was
    # checked, with its batch and then alone (the batch failed: decision 0111)
    assert report.signatures_received == len(forged) + 2, report
    assert checked.items == 2 * len(forged), checked.items
    assert report.refused == len(forged) and report.entries_added == 0, report  # nor their entries
    assert any("does not verify" in why for why in report.refusals), report.refusals
    assert signature_ids(tmp_path / "b") == set()
    assert _seal_rows(tmp_path / "b") == []
