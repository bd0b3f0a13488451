"""What a peer's frames may make a session hold, with the caps shrunk: orphans by bytes,
cross-line parents, ids wanted by id (docs/protocol.md, "Limits"; the floods themselves
run against a real serve in tests/mesh/test_admitted_floods.py)."""

from __future__ import annotations

import hashlib
import os

import pytest

from lifeline.entry import Entry
from lifeline.errors import RemoteProtocolError
from lifeline_mesh.recon.closure import OrphanPool
from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.recon.frames import Abort, Deliver, EndOfTurn, Failed, Fetch, Hello, Items, Want
from lifeline_mesh.recon.session import Role, Session, SessionLimits
from lifeline_mesh.recon.sets import ParsedItem
from tests.support.recon_helpers import chain, entry_set, open_responder

HELLO = Hello(1, "ledger", ("entries",), (), 1 << 20, 10**6)


def _item(n: int, size: int, parent: bytes) -> ParsedItem:
    raw = n.to_bytes(4, "big") * (size // 4)
    return ParsedItem(hashlib.sha256(raw).digest(), b"", (parent,), raw)


def test_orphans_past_the_byte_budget_are_kept_by_id() -> None:
    pool = OrphanPool(cap=100, overflow_cap=10, byte_cap=1000)
    missing = os.urandom(32)
    orphans = [_item(n, 400, missing) for n in range(4)]
    assert pool.admit(orphans, lambda _: False, lambda _: None) == []
    assert pool.bytes == 800 and len(pool) == 4  # two kept, two by id
    asked = pool.unasked_parents()
    assert missing in asked and {o.id for o in orphans[2:]} <= set(asked)
    # the parent arrives: the two kept are delivered and their bytes given back
    known: set[bytes] = set()
    ready = pool.admit([ParsedItem(missing, b"", (), b"p")], known.__contains__, known.add)
    assert ready[0].id == missing
    assert {r.id for r in ready[1:]} == {orphans[0].id, orphans[1].id}
    assert pool.bytes == 0


def test_the_byte_budget_names_itself_once_the_ids_are_full() -> None:
    pool = OrphanPool(cap=100, overflow_cap=1, byte_cap=500)
    orphans = [_item(n, 400, os.urandom(32)) for n in range(3)]
    with pytest.raises(RemoteProtocolError, match=r"orphan_pool_bytes=500.*orphan_overflow=1"):
        pool.admit(orphans, lambda _: False, lambda _: None)


def _session(limits: SessionLimits, held: list[Entry] = ()) -> Session:  # type: ignore[assignment]
    session = Session(Role.RESPONDER, "ledger", [("entries", EntryCodec())], 0.0, limits)
    open_responder(session, HELLO, entry_set(list(held)).snapshot())
    return session


def _abort(effects: list[object]) -> str:
    aborts = [e.frame for e in effects if hasattr(e, "frame") and isinstance(e.frame, Abort)]
    assert aborts and any(isinstance(e, Failed) for e in effects), effects
    return str(aborts[0].reason)


def test_cross_line_parents_are_counted_once_each() -> None:
    session = _session(SessionLimits(max_externals=3))
    ids = [os.urandom(32) for _ in range(4)]
    frame = Items(0, (), tuple((i, "design") for i in ids[:3]))
    for _ in range(5):  # declared again and again: counted once
        assert session.receive(frame, 0.0) == []
    reason = _abort(session.receive(Items(0, (), ((ids[3], "design"),)), 0.0))
    assert "more than 3 cross-line parents" in reason and "cap max_externals" in reason


def test_a_cross_line_parent_s_line_is_measured() -> None:
    session = _session(SessionLimits())
    reason = _abort(session.receive(Items(0, (), ((os.urandom(32), "x" * 5000),)), 0.0))
    assert "5000 characters" in reason


def test_declared_parents_still_let_a_child_through() -> None:
    session = _session(SessionLimits())
    parent = os.urandom(32).hex()
    child = Entry.create(ts="2026-01-01T00:00:00Z", kind="note", summary="c", parents=(parent,))
    frame = Items(0, (child.to_json(),), ((bytes.fromhex(parent), "design"),))
    [deliver] = [e for e in session.receive(frame, 0.0) if isinstance(e, Deliver)]
    assert deliver.externals == ((bytes.fromhex(parent), "design"),)


def _fetched(session: Session) -> list[bytes]:
    ids: list[bytes] = []
    for effect in session.receive(EndOfTurn(), 0.0):
        if isinstance(effect, Fetch):
            ids += effect.ids
    return ids


def test_ids_wanted_that_this_side_lacks_are_not_kept() -> None:
    held = chain(3, "a")
    session = _session(SessionLimits(), held)
    mine = bytes.fromhex(held[1].id)
    strangers = tuple(os.urandom(32) for _ in range(1000))
    assert session.receive(Want(0, ids=(*strangers, mine, mine)), 0.0) == []
    assert _fetched(session) == [mine]  # once, and nothing of the strangers


def test_ids_wanted_past_the_cap_end_the_session() -> None:
    session = _session(SessionLimits(max_wanted_ids=10))
    assert session.receive(Want(0, ids=tuple(os.urandom(32) for _ in range(10))), 0.0) == []
    reason = _abort(session.receive(Want(0, ids=(os.urandom(32),)), 0.0))
    assert "more than 10 items by id" in reason and "cap max_wanted_ids" in reason
