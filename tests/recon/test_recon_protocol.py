"""The reconciliation protocol on two in-memory sessions: exact bytes and round trips."""

from __future__ import annotations

import random
from collections import deque

from hypothesis import given, settings
from hypothesis import strategies as st

from lifeline.errors import IdMismatch, InvalidEntry, PeerError, RemoteProtocolError
from lifeline_mesh.recon import Hello, Role, Session, SessionLimits
from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.recon.frames import (
    Abort,
    Bound,
    Deliver,
    EndOfTurn,
    Failed,
    Fin,
    Items,
    Mode,
    Range,
    Recon,
    SendFrame,
    Want,
)
from lifeline_mesh.recon.sets import Snapshot
from lifeline_mesh.testing.pair import SessionPair
from lifeline_mesh.wire import sync_pb2 as pb
from lifeline_mesh.wire.codec import MAX_PEER_TEXT, decode_bytes, encode
from tests.support.recon_helpers import BlobCodec, blob_set, chain, entry_set, open_responder

BASE = chain(500, "base", body="x" * 200)


def test_in_sync_is_one_round_trip_and_a_few_dozen_bytes() -> None:
    a, b = entry_set(BASE), entry_set(BASE)
    r = SessionPair([a], [b]).run()
    assert r.errors == [] and r.done == 2
    assert r.rounds == 1
    # hello (with the keep-alive, closing, closing-any, compact-ranges and set-sums
    # capabilities, an 8-byte salt and the opening: the set's count and 16-byte fingerprint)
    # + end-of-turn + fin; hello (the capabilities with closing-any alone and open-sums, the
    # responder's whole-set fingerprint) + end-of-turn
    assert (r.bytes_a_to_b, r.bytes_b_to_a) == (124, 122)
    assert (r.frames_a_to_b, r.frames_b_to_a) == (3, 2)


def test_empty_sets_are_in_sync() -> None:
    r = SessionPair([entry_set()], [entry_set()]).run()
    assert r.errors == [] and r.rounds == 1


def test_initial_sync_sends_everything_in_the_first_round_trip() -> None:
    a, b = entry_set(BASE), entry_set()
    r = SessionPair([a], [b]).run()
    # one round to find the difference and send the items, one for the receiver to say
    # whether any parent is missing (it is not: two bytes of end-of-turn)
    assert r.errors == [] and r.rounds == 2
    assert b.state() == a.state() and b.closed()
    entry_bytes = sum(len(e.to_json()) for e in BASE)
    assert r.bytes_a_to_b - entry_bytes < 0.02 * entry_bytes


def test_pull_from_a_full_peer() -> None:
    a, b = entry_set(), entry_set(BASE)
    r = SessionPair([a], [b]).run()
    assert r.errors == [] and a.state() == b.state()
    assert r.rounds == 1  # an empty root range: the responder just sends everything


def test_recent_differences_on_both_sides() -> None:
    a = entry_set(BASE + chain(30, "a-new", BASE[-1].id))
    b = entry_set(BASE + chain(20, "b-new", BASE[-1].id))
    r = SessionPair([a], [b]).run()
    assert r.errors == [] and a.state() == b.state()
    assert len(a.items) == 550
    assert r.rounds <= 4


def test_scattered_differences_converge_within_five_round_trips() -> None:
    rng = random.Random(7)
    roots = [e for e in chain(3000, "r") if rng.random() < 1.0]
    missing = set(rng.sample(range(len(roots)), 40))
    # leaves with no descendants can be missing without breaking closure: use a star
    star = [chain(1, f"leaf{k}", roots[0].id)[0] for k in range(400)]
    a = entry_set(roots + star)
    b = entry_set(roots + [e for k, e in enumerate(star) if k not in missing])
    r = SessionPair([a], [b]).run()
    assert r.errors == [] and a.state() == b.state()
    assert r.rounds <= 5


def test_same_id_with_different_ts_converges_to_the_earliest() -> None:
    late = BASE[-1]
    early = late.with_ts("2025-06-01T00:00:00.000000Z")
    a = entry_set(BASE)
    b = entry_set([*BASE[:-1], early])
    r = SessionPair([a], [b]).run()
    assert r.errors == []
    assert a.state() == b.state()
    assert a.state()[bytes.fromhex(late.id)] == early.ts.encode()


def test_two_sets_in_one_session() -> None:
    blobs_a = [f"sig-{k}".encode() for k in range(50)]
    blobs_b = [f"sig-{k}".encode() for k in range(30, 90)]
    ea, eb = entry_set(BASE[:300]), entry_set(BASE)
    xa, xb = blob_set(blobs_a), blob_set(blobs_b)
    r = SessionPair([ea, xa], [eb, xb], names=("entries", "attestations")).run()
    assert r.errors == []
    assert ea.state() == eb.state() and xa.state() == xb.state()
    assert len(xa.items) == 90


def test_a_set_the_responder_does_not_know_is_skipped() -> None:
    ea, eb = entry_set(BASE[:10]), entry_set(BASE[:20])
    xa = blob_set([b"only-here"])
    r = SessionPair([ea, xa], [eb], names=("entries", "attestations")).run()
    assert r.errors == []
    assert ea.state() == eb.state() and len(xa.items) == 1


def test_frames_are_split_under_the_frame_cap() -> None:
    a, b = entry_set(chain(300, "big", body="y" * 3000)), entry_set()
    limits = SessionLimits(max_frame_bytes=64 * 1024)
    pair = SessionPair([a], [b], limits=limits)
    sizes: list[int] = []
    original = pair._send

    def spy(side: str, frame: object) -> None:
        sizes.append(len(encode(frame).SerializeToString()))  # type: ignore[arg-type]
        original(side, frame)  # type: ignore[arg-type]

    pair._send = spy  # type: ignore[method-assign]
    r = pair.run()
    assert r.errors == [] and a.state() == b.state()
    assert max(sizes) <= 64 * 1024 and r.frames_a_to_b > 10


def _responder(limits: SessionLimits | None = None) -> Session:
    s = Session(Role.RESPONDER, "ledger", [("entries", EntryCodec())], 0.0, limits)
    open_responder(s, Hello(1, "ledger", ("entries",), (), 1 << 20, 10**6))
    return s


def _failure(effects: list[object]) -> tuple[Abort, Exception]:
    aborts = [e.frame for e in effects if isinstance(e, SendFrame) and isinstance(e.frame, Abort)]
    failed = [e.error for e in effects if isinstance(e, Failed)]
    assert len(aborts) == 1 and len(failed) == 1, effects
    return aborts[0], failed[0]


def test_an_altered_entry_is_refused_alone_and_the_rest_of_its_frame_delivered() -> None:
    """One damaged or altered copy (a hub row edited, a disk error) is refused with its
    reason and counted; its frame's other items are delivered (decision 0111)."""
    e = BASE[0]
    tampered = e.to_json().replace(b"base-0", b"base-X")
    s = _responder()
    effects = s.receive(Items(0, (tampered, b"\xff\x00garbage", BASE[1].to_json())), 0.0)
    assert not [x for x in effects if isinstance(x, Failed)], effects
    assert s.stats.refused == 2
    assert "does not match its content" in s.stats.refusals[0] and e.id[:12] in s.stats.refusals[0]
    assert "not valid JSON" in s.stats.refusals[1]
    # BASE[1]'s parent was refused: it waits for it, and nothing is delivered yet
    assert not [x for x in effects if isinstance(x, Deliver)]
    s.receive(Items(0, (tampered,)), 0.0)  # sent again (asked for as a missing parent)
    assert s.stats.refused == 2  # counted once
    delivered = s.receive(Items(0, (BASE[0].to_json(),)), 0.0)
    [deliver] = [x for x in delivered if isinstance(x, Deliver)]
    assert [i.id.hex() for i in deliver.items] == [BASE[0].id, BASE[1].id]


def test_past_max_refused_the_session_is_aborted_with_the_reason() -> None:
    limits = SessionLimits(max_refused=2)
    bad = [e.to_json().replace(b"base-", b"evil-") for e in BASE[:3]]
    s = _responder(limits)
    assert not [x for x in s.receive(Items(0, tuple(bad[:2])), 0.0) if isinstance(x, Failed)]
    abort, error = _failure(s.receive(Items(0, (bad[2],)), 0.0))
    assert isinstance(error, IdMismatch)
    assert "does not match its content" in abort.reason and "max_refused" in abort.reason
    abort, error = _failure(_responder(SessionLimits(max_refused=0)).receive(
        Items(0, (b"\xff\x00garbage",)), 0.0))  # fmt: skip
    assert isinstance(error, InvalidEntry) and "not valid JSON" in abort.reason


def test_caps_name_themselves() -> None:
    limits = SessionLimits(max_items=3, orphan_pool=1, orphan_overflow=1, max_item_bytes=5000)
    raws = tuple(e.to_json() for e in BASE[:4])
    _, error = _failure(_responder(limits).receive(Items(0, raws), 0.0))
    assert isinstance(error, RemoteProtocolError) and "max_items" in str(error)
    orphans = tuple(e.to_json() for e in BASE[1:4])  # parents never sent
    _, error = _failure(_responder(limits).receive(Items(0, orphans), 0.0))
    assert "orphan_pool" in str(error)
    big = chain(1, "big", body="z" * 6000)[0].to_json()
    _, error = _failure(_responder(limits).receive(Items(0, (big,)), 0.0))
    assert "max_item_bytes" in str(error)


def test_wrong_protocol_version_and_line_are_refused() -> None:
    s = Session(Role.RESPONDER, "ledger", [("entries", EntryCodec())], 0.0)
    _, error = _failure(s.receive(Hello(9, "ledger", ("entries",), (), 1 << 20, 1), 0.0))
    assert "protocol version 9" in str(error)
    s = Session(Role.RESPONDER, "ledger", [("entries", EntryCodec())], 0.0)
    _, error = _failure(s.receive(Hello(1, "other", ("entries",), (), 1 << 20, 1), 0.0))
    assert "'other'" in str(error)


def test_peer_abort_becomes_peer_error() -> None:
    effects = _responder().receive(Abort("item", "bad entry"), 0.0)
    assert len(effects) == 1 and isinstance(effects[0], Failed)
    assert isinstance(effects[0].error, PeerError) and "bad entry" in str(effects[0].error)


def test_orphans_are_held_then_released_when_the_parent_arrives() -> None:
    a, b = entry_set(BASE[:5]), entry_set()
    s = _responder()
    first = s.receive(Items(0, (BASE[1].to_json(), BASE[2].to_json())), 0.0)
    assert first == []
    effects = s.receive(Items(0, (BASE[0].to_json(),)), 0.0)
    delivered = [i.id.hex() for e in effects for i in e.items]  # type: ignore[attr-defined]
    assert delivered == [BASE[0].id, BASE[1].id, BASE[2].id]
    assert a and b


def test_faulty_frames_never_break_closure() -> None:
    rng = random.Random(3)
    for _ in range(30):
        a = entry_set(BASE[: rng.randrange(0, 500)])
        b = entry_set(BASE[: rng.randrange(0, 500)])

        def faults(side: str, q: deque[bytes]) -> None:
            roll = rng.random()
            if roll < 0.1:
                q.popleft()
            elif roll < 0.2:
                q.appendleft(q[0])
            elif roll < 0.3 and len(q) > 1:
                q[0], q[1] = q[1], q[0]

        SessionPair([a], [b], faults=faults).run()
        assert a.closed() and b.closed()
        r = SessionPair([a], [b]).run()
        assert r.errors == [] and a.state() == b.state()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=200), max_size=6))
def test_arbitrary_bytes_never_escape_a_session(chunks: list[bytes]) -> None:
    session = _responder()
    for data in chunks:
        try:
            frame = decode_bytes(data)
        except RemoteProtocolError:
            continue
        for eff in session.receive(frame, 0.0):
            if isinstance(eff, Failed):
                assert isinstance(eff.error, (RemoteProtocolError, InvalidEntry, PeerError))


_bounds = st.one_of(st.none(), st.builds(Bound, st.integers(0, 2**64 - 1), st.binary(max_size=33)))
_ranges = st.builds(
    Range,
    _bounds,
    st.sampled_from(list(Mode)),
    st.binary(max_size=20),
    st.integers(0, 2**64 - 1),
    st.binary(max_size=70),
)
_frames = st.one_of(
    st.builds(Recon, st.integers(0, 3), st.lists(_ranges, max_size=5).map(tuple)),
    st.builds(Want, st.integers(0, 3), st.binary(max_size=40), st.just(())),
    st.builds(Items, st.integers(0, 3), st.lists(st.binary(max_size=80), max_size=3).map(tuple)),
    st.builds(EndOfTurn),
    st.builds(Fin),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_frames, max_size=8))
def test_arbitrary_frames_end_in_a_clean_failure_or_nothing(frames: list[object]) -> None:
    session = Session(Role.RESPONDER, "ledger", [("entries", EntryCodec())], 0.0)
    hello = Hello(1, "ledger", ("entries",), (), 1 << 20, 10**6)
    open_responder(session, hello, entry_set(BASE[:30]).snapshot())
    for frame in frames:
        for eff in session.receive(frame, 0.0):  # type: ignore[arg-type]
            if isinstance(eff, Failed):
                assert isinstance(eff.error, (RemoteProtocolError, InvalidEntry, PeerError))


def test_children_found_before_their_parents_converge_with_a_tiny_orphan_pool() -> None:
    # B holds the start of a long chain; the newest ranges settle first, so children come
    # before the parents still being reconciled. The pool keeps 5; the rest are asked again.
    long = chain(3000, "long")
    a, b = entry_set(long), entry_set(long[:1000])
    limits = SessionLimits(orphan_pool=5)
    pair = SessionPair([a], [b], limits=limits)
    r = pair.run()
    assert r.errors == [] and a.state() == b.state() and b.closed()
    assert r.rounds <= 5


def test_items_sent_ahead_are_counted_and_a_set_not_in_the_session_gets_none() -> None:
    """What a sender sends ahead of a fetch (decision 0106): packed into frames of its set,
    counted like fetched items; nothing for a set the session does not reconcile."""
    sets = [("attestations", BlobCodec()), ("entries", EntryCodec())]
    s = Session(Role.INITIATOR, "ledger", sets, 0.0)
    frames = [e.frame for e in s.send_ahead("attestations", [b"sig-1", b"sig-2"])]
    assert frames == [Items(0, (b"sig-1", b"sig-2"))]
    assert s.stats.items_sent == 2 and s.stats.sent_by_set == {"attestations": 2}
    assert s.send_ahead("statements", [b"x"]) == [] and s.send_ahead("attestations", []) == []
    assert s.stats.items_sent == 2


def test_a_responder_takes_items_sent_ahead_unasked() -> None:
    """Items of a set arriving before any range of it asked for them (the signatures sent
    ahead of entries) are delivered like any others; the set's snapshot is loaded first."""
    sets = [("attestations", BlobCodec()), ("entries", EntryCodec())]
    s = Session(Role.RESPONDER, "ledger", sets, 0.0)
    open_responder(s, Hello(1, "ledger", ("attestations", "entries"), (), 1 << 20, 10**6))
    effects = s.receive(Items(1, (BASE[0].to_json(),)), 0.0)  # entries: not loaded yet
    assert [type(e).__name__ for e in effects] == ["LoadSnapshot"]
    effects = s.snapshot_loaded(1, Snapshot.empty(), 0.0)
    assert [type(e).__name__ for e in effects] == ["Deliver"]
    delivered = s.receive(Items(0, (b"sig-1",)), 0.0)  # its snapshot loaded at the hello
    assert [(type(e), e.set_index) for e in delivered if isinstance(e, Deliver)] == [(Deliver, 0)]
    assert len(delivered) == 1


def test_a_peers_free_text_is_safe_to_print_and_its_refusals_bounded() -> None:
    """An abort's reason and a closing turn's refusals come from the peer: control
    characters (a terminal's escapes) arrive escaped, long text cut, at most three reasons
    kept (decision 0112)."""
    hostile = "\x1b[2J\x1b]0;owned\x07gone\r\nfine"
    abort = decode_bytes(encode(Abort("item\x1b[31m", hostile)).SerializeToString())
    assert isinstance(abort, Abort)
    assert abort.reason.isprintable() and "\\x1b[2J" in abort.reason and "fine" in abort.reason
    assert abort.code.isprintable()
    told = pb.Frame(end_of_turn=pb.EndOfTurn(refused=9, refusals=["x" * 5000, *"abcd"]))
    end = decode_bytes(told.SerializeToString())
    assert isinstance(end, EndOfTurn) and end.refused == 9
    assert len(end.refusals) == 3 and len(end.refusals[0]) == MAX_PEER_TEXT + 1
    assert decode_bytes(encode(EndOfTurn()).SerializeToString()) == EndOfTurn()
