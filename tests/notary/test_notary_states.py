"""State statements: their bytes, when a node signs one, and the witnessed time they give
every ancestor of their tips (decision 0015)."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path

import pytest

from lifeline.entry import Entry
from lifeline.errors import InvalidEntry
from lifeline.store.shallow import record_boundary
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.notary.rules import Policy, check_attestations
from lifeline_mesh.notary.sign import attest_state, sign_entries, state_statements
from lifeline_mesh.notary.signers import FileSigners
from lifeline_mesh.notary.statement import (
    MAX_STATE_TIPS,
    Attestation,
    Role,
    decode,
    sign,
    tips_digest,
)
from lifeline_mesh.notary.states import StateOf, covering_states, fingerprint, state_of
from lifeline_mesh.notary.storage import NotaryStore
from lifeline_mesh.notary.witnessing import KEEP, first_witnesses, marks_of

A, B, C, D = (NodeIdentity.generate() for _ in range(4))
T0 = "2026-03-01T12:00:00.000000Z"


def _chain(n: int, start: int = 0, parent: str | None = None) -> list[Entry]:
    out: list[Entry] = []
    for k in range(start, start + n):
        parents = (out[-1].id,) if out else ((parent,) if parent else ())
        ts = f"2026-03-01T10:{k // 60:02d}:{k % 60:02d}.000000Z"
        out.append(Entry.create(ts=ts, kind="note", summary=f"e{k}", parents=parents))
    return out


def test_a_state_statement_round_trips_and_binds_its_tips() -> None:
    tips = sorted(e.id for e in _chain(3))
    state = StateOf(7, fingerprint(tips), tuple(tips))
    [att] = state_statements(A, "ledger", state, T0)
    again = decode(att.item)
    assert again == att and again.summary_tips == tuple(tips) and again.summary_count == 7
    assert again.state_key == ("7", fingerprint(tips), tips_digest(tips))
    again.verify()
    forged = att.item.replace(b"1:7\n", b"1:9\n")  # another count, the same signature
    with pytest.raises(InvalidEntry, match="does not verify"):
        decode(forged).verify()
    wrong = (att.extras[0], att.extras[1], "0" * 64, "1/1", *tips)
    with pytest.raises(InvalidEntry, match="digest"):
        sign(A, Role.STATE, "ledger", T0, *wrong)


def test_more_tips_than_a_statement_carries_are_signed_in_parts() -> None:
    tips = sorted(f"{k:064x}" for k in range(MAX_STATE_TIPS * 2 + 5))
    parts = state_statements(A, "ledger", StateOf(len(tips), "0" * 32, tuple(tips)), T0)
    assert [p.part for p in parts] == [(1, 3), (2, 3), (3, 3)]
    assert [t for p in parts for t in p.summary_tips] == tips  # no tip left unwitnessed
    assert {p.state_key for p in parts} == {(str(len(tips)), "0" * 32, tips_digest(tips))}
    assert all(len(p.item) < 72 * 1024 for p in parts)


async def test_a_node_signs_each_state_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    entries = _chain(5)
    async with await SqliteStore.open(tmp_path / "line.db") as store:
        await store.append_many(entries[:3])
        [first] = await attest_state(store, A, "ledger", T0)
        assert first.summary_tips == (entries[2].id,) and first.summary_count == 3
        assert await attest_state(store, A, "ledger", "2026-03-01T12:01:00.000000Z") == []
        await store.append_many(entries[3:])
        [second] = await attest_state(store, A, "ledger", "2026-03-01T12:02:00.000000Z")
        assert second.summary_count == 5
        # another node's state is its own: B signs the same state once too
        assert len(await attest_state(store, B, "ledger", T0)) == 1
        notary = (await NotaryStore.attach(store)).statements()
        assert await notary.count() == 3
        gone = entries[4].id
        await store.run_write(lambda c: c.execute("DELETE FROM entries WHERE id = ?", (gone,)))
        # a truncated store is not signed again (its earlier, larger state stands)
        caplog.set_level(logging.INFO, "lifeline_mesh.notary.sign")
        assert await attest_state(store, A, "ledger", "2026-03-01T12:03:00.000000Z") == []
        [warned] = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert "fewer than the 5 this node signed" in warned.getMessage()
        # a shallow line holds fewer on purpose: said so, no call to verify
        caplog.clear()
        await store.run_write(lambda c: record_boundary(c, {"ab" * 32: 0}))
        assert await attest_state(store, A, "ledger", "2026-03-01T12:04:00.000000Z") == []
        [said] = caplog.records
        assert said.levelno == logging.INFO and "is shallow" in said.getMessage()


def test_every_ancestor_of_a_tip_is_witnessed_in_one_pass() -> None:
    trunk = _chain(4)
    side = _chain(2, start=10, parent=trunk[1].id)  # a fork off trunk[1]
    entries = [*trunk, *side]
    late, early = "2026-03-01T13:00:00.000000Z", "2026-03-01T12:30:00.000000Z"
    tips = sorted([trunk[-1].id, side[-1].id])
    states = [
        sign(B, Role.STATE, "ledger", late, "6", "0" * 32, tips_digest(tips), "1/1", *tips),
        sign(C, Role.STATE, "ledger", early, "2", "0" * 32, tips_digest([side[0].id]), "1/1",
             side[0].id),
    ]  # fmt: skip
    got = first_witnesses(entries, marks_of(states))
    assert got[trunk[3].id] == [(late, B.node_id)]
    assert got[side[1].id] == [(late, B.node_id)]
    # side[0] and its ancestors were seen by C earlier, and by B later
    for entry in (side[0], trunk[1], trunk[0]):
        assert got[entry.id] == [(early, C.node_id), (late, B.node_id)]
    assert trunk[2].id in got and got[trunk[2].id] == [(late, B.node_id)]


def test_at_most_keep_witnesses_per_entry_earliest_first() -> None:
    [entry] = _chain(1)
    nodes = [A, B, C, D]
    states = [
        sign(n, Role.STATE, "ledger", f"2026-03-01T12:0{k}:00.000000Z", "1", "0" * 32,
             tips_digest([entry.id]), "1/1", entry.id)
        for k, n in enumerate(reversed(nodes))
    ]  # fmt: skip
    got = first_witnesses([entry], marks_of(states))[entry.id]
    assert len(got) == KEEP and [n for _ts, n in got] == [D.node_id, C.node_id, B.node_id]


async def test_a_state_statement_bounds_the_time_of_every_ancestor(tmp_path: Path) -> None:
    """A backdated entry deep in the line is caught by one state over a later tip."""
    old = Entry.create(ts="2026-02-20T10:00:00.000000Z", kind="decision", summary="long ago")
    later = _chain(3, parent=old.id)
    entries = [old, *later]
    async with await SqliteStore.open(tmp_path / "line.db") as store:
        await store.append_many(entries)
        await sign_entries(store, A, entries)  # A authored them all
        [state] = await attest_state(store, B, "ledger", T0)  # B saw the tip on 1 March
        notary = await NotaryStore.attach(store)
        items = await notary.items() + await notary.statements().items()
    signers = FileSigners([A.node_id, B.node_id])
    verdict = check_attestations(entries, items, signers, Policy(local_node_id=B.node_id))
    flagged = {(f.check, f.subject) for f in verdict.findings}
    assert ("possible-backdate", old.id) in flagged  # 9 days before B's state, beyond 1 day
    assert not any(f.subject in {e.id for e in later} for f in verdict.findings)
    assert state.summary_tips == (later[-1].id,)
    # A's own states never witness A's entries
    async with await SqliteStore.open(tmp_path / "line.db") as store:
        await store.run_write(lambda c: c.execute("DELETE FROM statements"))
        await attest_state(store, A, "ledger", T0)
        notary = await NotaryStore.attach(store)
        items = await notary.items() + await notary.statements().items()
    verdict = check_attestations(entries, items, signers, Policy(local_node_id=A.node_id))
    assert not verdict.findings


async def test_one_entry_finds_each_nodes_first_covering_state(tmp_path: Path) -> None:
    trunk = _chain(6)
    side = _chain(2, start=20, parent=trunk[2].id)
    async with await SqliteStore.open(tmp_path / "line.db") as store:
        await store.append_many(trunk[:4])
        await attest_state(store, B, "ledger", "2026-03-01T12:01:00.000000Z")  # tip trunk[3]
        await store.append_many([*trunk[4:], *side])
        await attest_state(store, B, "ledger", "2026-03-01T12:02:00.000000Z")
        await attest_state(store, C, "ledger", "2026-03-01T12:03:00.000000Z")

        async def covering(entry: Entry, budget: int = 1000) -> list[tuple[str, str]]:
            def read(conn: sqlite3.Connection) -> list[tuple[str, str]]:
                return [(s.node_id, s.ts) for s in covering_states(conn, entry.id, budget)]

            return await store.run_read(read)

        first = [
            (B.node_id, "2026-03-01T12:01:00.000000Z"),
            (C.node_id, "2026-03-01T12:03:00.000000Z"),
        ]
        assert await covering(trunk[1]) == first  # below B's first tip: B's first state
        assert await covering(trunk[5]) == [
            (B.node_id, "2026-03-01T12:02:00.000000Z"),
            (C.node_id, "2026-03-01T12:03:00.000000Z"),
        ]
        assert await covering(side[0]) == await covering(trunk[5])  # a fork: other tip
        assert await covering(trunk[0], budget=1) == []  # gives up within its budget


async def test_the_state_of_a_growing_line_is_summed_from_the_rows_added(tmp_path: Path) -> None:
    """state_of keeps each line's id sum and adds the new rows; it always equals the sum of
    every id, also after rows were removed by hand (then it sums them all again)."""
    entries = _chain(30)
    path = tmp_path / "line.db"
    async with await SqliteStore.open(path) as store:
        for part in (entries[:10], entries[10:11], entries[11:]):
            await store.append_many(part)
            state = await store.run_read(state_of)
            ids = await store.run_read(
                lambda c: [r[0] for r in c.execute("SELECT id FROM entries")]
            )
            assert (state.count, state.fingerprint) == (len(ids), fingerprint(ids))
    conn = sqlite3.connect(path)
    try:
        conn.execute("DELETE FROM entries WHERE id = ?", (entries[29].id,))
        conn.commit()
        state = state_of(conn)
        ids = [r[0] for r in conn.execute("SELECT id FROM entries")]
        assert (state.count, state.fingerprint) == (29, fingerprint(ids))
    finally:
        conn.close()


async def test_statements_made_together_are_dated_in_the_order_they_were_made(
    tmp_path: Path,
) -> None:
    """Sessions ending at once on one node (one store each) sign while entries keep
    arriving: read inside the write transaction, the time orders the statements as the
    counts grow, so no peer sees a smaller count after a larger one (a rollback)."""
    entries = [  # roots: the appends race each other
        Entry.create(ts=f"2026-03-01T10:00:{k:02d}.000000Z", kind="note", summary=f"r{k}")
        for k in range(40)
    ]
    path = tmp_path / "line.db"
    ticks = iter(range(1, 10**6))

    def clock() -> str:
        return f"2026-03-01T12:00:00.{next(ticks):06d}Z"

    stores = [await SqliteStore.open(path) for _ in range(4)]
    try:
        await stores[0].append_many(entries[:2])
        for k in range(2, 40, 2):
            await asyncio.gather(
                attest_state(stores[0], A, "ledger", clock),
                stores[1].append_many(entries[k : k + 1]),
                attest_state(stores[2], A, "ledger", clock),
                stores[3].append_many(entries[k + 1 : k + 2]),
                attest_state(stores[1], A, "ledger", clock),
            )
        rows = await stores[0].run_read(
            lambda c: [bytes(r[0]) for r in c.execute("SELECT item FROM statements")]
        )
    finally:
        for store in stores:
            await store.close()
    signed = sorted((att.ts, att.summary_count) for att in map(decode, rows))
    counts = [count for _ts, count in signed]
    assert len(signed) >= 20 and counts == sorted(counts)


async def test_earlier_claims_are_verified_once_and_still_refuse_a_rollback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entries = _chain(30)
    async with await SqliteStore.open(tmp_path / "line.db") as store:
        notary = (await NotaryStore.attach(store, signers=FileSigners([B.node_id]))).statements()
        await store.append_many(entries)
        claims = [
            state_statements(B, "ledger", StateOf(n, "00" * 16, (entries[n - 1].id,)), ts)[0]
            for n, ts in ((10, "2026-03-01T12:00:00.000000Z"), (20, "2026-03-01T12:01:00.000000Z"))
        ]
        await notary.admit(claims)
        checked: list[str] = []
        real = Attestation.verify

        def counted(self: Attestation, *args: object, **kwargs: object) -> object:
            checked.append(self.ts)
            return real(self, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(Attestation, "verify", counted)
        for n, ts in ((25, "2026-03-01T12:02:00.000000Z"), (30, "2026-03-01T12:03:00.000000Z")):
            later = state_statements(B, "ledger", StateOf(n, "00" * 16, (entries[n - 1].id,)), ts)
            await notary.admit(later)
        # each stored claim's signature was checked at most once for both admissions (not
        # at all since they count more: see the test below)
        stored = [c for c in checked if c < "2026-03-01T12:02:00"]
        assert len(stored) == len(set(stored)) <= 2
        rollback = state_statements(
            B, "ledger", StateOf(15, "00" * 16, (entries[14].id,)), "2026-03-01T12:04:00.000000Z"
        )
        with pytest.raises(InvalidEntry, match="rolled back"):
            await notary.admit(rollback)
        assert len([c for c in checked if c < "2026-03-01T12:02:00"]) == 2


async def test_an_honest_claim_reads_no_earlier_claim_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node's state statements count more and more entries: admitting the next one reads
    only the rows stored since the last (it cannot contradict any earlier claim), so the
    work per admission does not grow with the claims held. A smaller count still reads
    them all and is refused."""
    import lifeline_mesh.notary.claims as claims_module

    reads: list[bytes] = []
    real_claim, real_decode = claims_module.Claims.stored, claims_module.decode

    def claim(self: claims_module.Claims, raw: bytes) -> tuple[str, int] | None:
        reads.append(raw)
        return real_claim(self, raw)

    def decoded(raw: bytes) -> Attestation:
        reads.append(raw)
        return real_decode(raw)

    monkeypatch.setattr(claims_module.Claims, "stored", claim)
    monkeypatch.setattr(claims_module, "decode", decoded)
    n_claims = 40
    entries = _chain(n_claims)
    async with await SqliteStore.open(tmp_path / "line.db") as store:
        notary = (await NotaryStore.attach(store, signers=FileSigners([B.node_id]))).statements()
        await store.append_many(entries)
        for n in range(1, n_claims + 1):
            ts = f"2026-03-01T12:{n:02d}:00.000000Z"
            state = StateOf(n, "00" * 16, (entries[n - 1].id,))
            await notary.admit(state_statements(B, "ledger", state, ts))
        # each stored claim read back about once (all of them every time: 780 reads)
        assert len(reads) <= 2 * n_claims, len(reads)
        reads.clear()
        smaller = StateOf(5, "00" * 16, (entries[4].id,))
        with pytest.raises(InvalidEntry, match="rolled back"):
            await notary.admit(
                state_statements(B, "ledger", smaller, "2026-03-01T13:00:00.000000Z")
            )
        assert len(reads) >= n_claims
