"""Compact ranges: keyed fingerprints and short ids, packed ranges, collisions, interop.

Short ids are forced down to one byte here so that collisions are everywhere: a side's own
items share short ids (the list falls back to whole tokens), a listed name matches several
of ours (ambiguous: we send ours and want theirs), and wants name items of several ranges.
"""

from __future__ import annotations

import contextlib
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lifeline_mesh.recon.dialect as dialect_module
from lifeline.errors import RemoteProtocolError
from lifeline_mesh.recon import Hello, Role, Session, SessionLimits
from lifeline_mesh.recon.dialect import COMPACT_CAPABILITY, compact, session_key
from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.recon.frames import (
    Bound,
    Failed,
    Frame,
    Mode,
    Range,
    Recon,
    Want,
)
from lifeline_mesh.recon.ranges import Responder
from lifeline_mesh.testing.pair import MemorySet, SessionPair
from lifeline_mesh.wire.codec import decode_bytes, encode
from lifeline_mesh.wire.packed import pack_ranges, unpack_ranges
from tests.support.recon_helpers import blob_set, chain, entry_set, open_responder

BASE = chain(400, "base", body="x" * 100)
KEY = session_key(b"i" * 8, b"r" * 8)


def _spy(pair: SessionPair) -> list[tuple[str, Frame]]:
    sent: list[tuple[str, Frame]] = []
    original = pair._send

    def spy(side: str, frame: Frame) -> None:
        sent.append((side, frame))
        original(side, frame)

    pair._send = spy  # type: ignore[method-assign]
    return sent


def _ranges(sent: list[tuple[str, Frame]]) -> list[tuple[Recon, Range]]:
    return [(f, r) for _, f in sent if isinstance(f, Recon) for r in f.ranges]


def _star(n: int, tag: str) -> list[bytes]:
    """Side notes of BASE: leaves that can be missing without breaking closure."""
    return [chain(1, f"{tag}{k}", BASE[k % len(BASE)].id)[0].to_json() for k in range(n)]


def _with(raws: list[bytes]) -> MemorySet:
    s = entry_set(BASE)
    for raw in raws:
        s.add_raw(raw)
    return s


def test_compact_ranges_are_agreed_and_used_after_the_opening() -> None:
    leaves = _star(300, "n")
    a, b = _with(leaves), _with(leaves[::2])
    pair = SessionPair([a], [b], limits=SessionLimits(branch=4, leaf=3))
    sent = _spy(pair)
    r = pair.run()
    assert r.errors == [] and a.state() == b.state()
    # The opening travels in the initiator's hello (plain: the responder's capabilities
    # are unknown yet); every range list after it is compact.
    hellos = [f for _, f in sent if isinstance(f, Hello)]
    assert [len(h.opening) for h in hellos] == [1, 0]
    assert len(hellos[0].opening[0][1]) == 16
    recons = [f for _, f in sent if isinstance(f, Recon)]
    assert recons and all(f.compact for f in recons)
    assert all(len(r.fingerprint) == 8 for f in recons for r in f.ranges if r.fingerprint)
    # A responder from before the opening in the hello gets it as a plain Recon frame.
    a, b = _with(leaves), _with(leaves[::2])
    pair = SessionPair([a], [b], limits=SessionLimits(branch=4, leaf=3, open_sums=False))
    sent = _spy(pair)
    assert pair.run().errors == [] and a.state() == b.state()
    recons = [f for _, f in sent if isinstance(f, Recon)]
    assert not recons[0].compact
    assert recons[1:] and all(f.compact for f in recons[1:])


def test_one_missing_item_is_found_from_the_sums_without_an_id_list() -> None:
    leaves = _star(200, "m")
    a, b = _with(leaves), _with(leaves[:57] + leaves[58:])
    pair = SessionPair([a], [b], limits=SessionLimits(branch=4, leaf=3))
    sent = _spy(pair)
    r = pair.run()
    assert r.errors == [] and a.state() == b.state()
    assert not any(rng.mode is Mode.ID_LIST for _, rng in _ranges(sent))
    assert r.rounds <= 3


def test_one_missing_item_on_the_side_with_fewer_is_echoed_then_found() -> None:
    # The responder holds one more: the initiator answers with its fingerprint of the same
    # range, and the responder finds the item from the difference.
    leaves = _star(200, "e")
    a, b = _with(leaves[:120] + leaves[121:]), _with(leaves)
    pair = SessionPair([a], [b], limits=SessionLimits(branch=4, leaf=3))
    sent = _spy(pair)
    r = pair.run()
    assert r.errors == [] and a.state() == b.state()
    assert not any(rng.mode is Mode.ID_LIST for _, rng in _ranges(sent))


def test_one_byte_short_ids_miss_nothing_when_one_side_lacks_items() -> None:
    # Every list of more than a few items has colliding short ids; differences are
    # one-sided, so a missed item could only come from mishandling those collisions.
    rng = random.Random(5)
    limits = SessionLimits(branch=4, leaf=24, short_id_bytes=1)
    full_lists = 0
    for seed in range(6):
        leaves = _star(400, f"c{seed}-")
        kept = [raw for raw in leaves if rng.random() < 0.85]
        for a, b in ((_with(leaves), _with(kept)), (_with(kept), _with(leaves))):
            pair = SessionPair([a], [b], limits=limits)
            sent = _spy(pair)
            r = pair.run()
            assert r.errors == [] and a.state() == b.state() and len(a.items) == 800
            full_lists += sum(rng_.full for _, rng_ in _ranges(sent))
    assert full_lists > 0  # the whole-token fallback was exercised


def test_one_byte_short_ids_converge_over_sessions_with_differences_on_both_sides() -> None:
    # A cross collision (their new item and our new item share a short id in one range)
    # can delay an item to the next session: the next key separates them.
    leaves = _star(300, "t")
    a, b = _with(leaves[:200]), _with(leaves[100:])
    limits = SessionLimits(branch=4, leaf=24, short_id_bytes=1)
    for _ in range(6):
        r = SessionPair([a], [b], limits=limits).run()
        assert r.errors == []
        if a.state() == b.state():
            break
    assert a.state() == b.state() and len(a.items) == 700


def test_a_plain_node_and_a_compact_node_reconcile_in_plain_ranges() -> None:
    leaves = _star(300, "p")
    plain = SessionLimits(branch=4, leaf=3, compact_ranges=False)
    for limits, limits_b in ((plain, SessionLimits(branch=4, leaf=3)), (None, plain)):
        a, b = _with(leaves[:250]), _with(leaves[50:])
        pair = SessionPair([a], [b], limits=limits, limits_b=limits_b)
        sent = _spy(pair)
        r = pair.run()
        assert r.errors == [] and a.state() == b.state()
        assert not any(f.compact for _, f in sent if isinstance(f, Recon))
        assert all(not f.salt for _, f in sent if isinstance(f, Hello) and f.capabilities == ())


def test_own_short_id_collision_falls_back_to_whole_tokens() -> None:
    snap = entry_set(BASE[:40]).snapshot()
    dialect = compact(KEY, 8, 1)
    names = [dialect.list_id(snap.token(i)) for i in range(40)]
    lo = next(i for i in range(40) if names.index(names[i]) != i)  # a later twin
    first = names.index(names[lo])
    responder = Responder(snap, leaf=64, dialect=dialect)
    theirs = Range(None, Mode.FINGERPRINT, b"\x00" * 8, 50)  # not one more: no echo
    responder.answer((theirs,), dialect)
    (offer,) = responder.reply.ranges
    assert offer.mode is Mode.ID_LIST and offer.full
    assert offer.tokens == b"".join(snap.token(i) for i in range(40))
    assert responder.offered[snap.token(first)] == [first]


def test_a_listed_name_matching_two_of_ours_sends_both_and_wants_theirs() -> None:
    snap = entry_set(BASE[:40]).snapshot()
    dialect = compact(KEY, 8, 1)
    names = [dialect.list_id(snap.token(i)) for i in range(40)]
    twin = next(i for i in range(40) if names.index(names[i]) != i)
    first = names.index(names[twin])
    others = [n for i, n in enumerate(names) if n != names[twin]]
    listed = b"".join([names[twin], *others])  # the peer holds one item of that name
    responder = Responder(snap, dialect=dialect)
    responder.answer((Range(None, Mode.ID_LIST, tokens=listed),), dialect)
    sent = {i for lo, hi in responder.reply.send for i in range(lo, hi)}
    assert {first, twin} <= sent
    assert names[twin] in responder.reply.want_short


def test_a_want_for_a_short_id_offered_in_two_ranges_sends_both() -> None:
    from lifeline_mesh.recon.outbox import SetOutbox

    snap = entry_set(BASE[:40]).snapshot()
    dialect = compact(KEY, 8, 1)
    names = [dialect.list_id(snap.token(i)) for i in range(40)]
    twin = next(i for i in range(40) if names.index(names[i]) != i)
    first = names.index(names[twin])
    responder = Responder(snap, leaf=2, dialect=dialect)
    # offer each item in a list of its own: the same short id in two ranges
    ranges = tuple(
        Range(snap.bound_before(i + 1) if i + 1 < 40 else None, Mode.FINGERPRINT, b"\0" * 8, 3)
        for i in range(40)
    )
    responder.answer(ranges, dialect)
    outbox = SetOutbox()
    outbox.want(responder, Want(0, short_ids=names[twin]))
    fetch = list(outbox.plan(0, responder, 256) or ())
    assert {snap.item_id(first), snap.item_id(twin)} <= set(fetch[0].ids)


def test_compact_ranges_without_agreement_are_refused() -> None:
    s = Session(Role.RESPONDER, "ledger", [("entries", EntryCodec())], 0.0)
    open_responder(s, Hello(1, "ledger", ("entries",), (), 1 << 20, 10**6))
    effects = s.receive(Recon(0, (Range(None, Mode.SKIP),), True, 8, 6), 0.0)
    failed = [e for e in effects if isinstance(e, Failed)]
    assert failed and "was not agreed" in str(failed[0].error)


def test_a_hello_offering_compact_ranges_needs_a_salt() -> None:
    s = Session(Role.RESPONDER, "ledger", [("entries", EntryCodec())], 0.0)
    hello = Hello(1, "ledger", ("entries",), (COMPACT_CAPABILITY,), 1 << 20, 10**6, b"ab")
    failed = [e for e in s.receive(hello, 0.0) if isinstance(e, Failed)]
    assert failed and "salt is 2 bytes" in str(failed[0].error)


def test_two_sets_use_compact_ranges_together() -> None:
    blobs_a = [f"sig-{k}".encode() for k in range(500)]
    blobs_b = [f"sig-{k}".encode() for k in range(3, 500, 7)]
    leaves = _star(200, "s")
    ea, eb = _with(leaves), _with(leaves[::3])
    xa, xb = blob_set(blobs_a), blob_set(blobs_b)
    r = SessionPair([ea, xa], [eb, xb], names=("entries", "attestations")).run()
    assert r.errors == [] and ea.state() == eb.state() and xa.state() == xb.state()


_bounds = st.one_of(st.none(), st.builds(Bound, st.integers(0, 2**40), st.binary(max_size=32)))


@st.composite
def _packable(draw: st.DrawFn) -> tuple[tuple[Range, ...], int, int]:
    fp, sid = draw(st.integers(1, 32)), draw(st.integers(1, 31))
    heights = sorted(draw(st.lists(st.integers(0, 2**64 - 1), max_size=8)))
    out = []
    for height in heights:
        upper = Bound(height, draw(st.binary(max_size=32)))
        mode = draw(st.sampled_from(list(Mode)))
        if mode is Mode.FINGERPRINT:
            fingerprint = draw(st.binary(min_size=fp, max_size=fp))
            out.append(Range(upper, mode, fingerprint, height, summed=draw(st.booleans())))
        elif mode is Mode.ID_LIST:
            full = draw(st.booleans())
            width = 32 if full else sid
            n = draw(st.integers(0, 4))
            tokens = draw(st.binary(min_size=n * width, max_size=n * width))
            out.append(Range(upper, mode, tokens=tokens, full=full))
        else:
            out.append(Range(upper, mode))
    if draw(st.booleans()):
        out.append(Range(None, Mode.SKIP))
    return tuple(out), fp, sid


@settings(max_examples=300, deadline=None)
@given(_packable())
def test_packed_ranges_round_trip(case: tuple[tuple[Range, ...], int, int]) -> None:
    ranges, fp, sid = case
    assert unpack_ranges(pack_ranges(ranges, fp, sid)) == case
    frame = Recon(2, ranges, True, fp, sid)
    assert decode_bytes(encode(frame).SerializeToString()) == frame


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=120))
def test_garbage_packed_ranges_are_a_protocol_error(data: bytes) -> None:
    with contextlib.suppress(RemoteProtocolError):
        unpack_ranges(data)


def test_packed_ranges_are_smaller_than_plain_ones() -> None:
    snap = entry_set(BASE).snapshot()
    dialect = compact(KEY, 8, 6)
    ranges = tuple(
        Range(snap.bound_before(i), Mode.FINGERPRINT, dialect.fingerprint(snap, i - 25, i), 25)
        for i in range(25, 400, 25)
    )
    plain = len(encode(Recon(0, ranges)).SerializeToString())
    packed = len(encode(Recon(0, ranges, True, 8, 6)).SerializeToString())
    assert packed < 0.6 * plain  # the same fingerprints, without per-range framing


_any_bounds = st.one_of(
    st.none(), st.builds(Bound, st.integers(0, 2**64 - 1), st.binary(max_size=33))
)
_any_ranges = st.builds(
    Range,
    _any_bounds,
    st.sampled_from(list(Mode)),
    st.binary(max_size=12),
    st.integers(0, 2**64 - 1),
    st.binary(max_size=70),
    st.booleans(),
    st.booleans(),
)
_compact_frames = st.one_of(
    st.builds(
        Recon,
        st.integers(0, 2),
        st.lists(_any_ranges, max_size=5).map(tuple),
        st.booleans(),
        st.integers(0, 12),
        st.integers(0, 40),
    ),
    st.builds(
        Want,
        st.integers(0, 2),
        st.binary(max_size=40),
        st.just(()),
        st.binary(max_size=20),
        st.binary(max_size=70),
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_compact_frames, max_size=8))
def test_arbitrary_compact_frames_end_in_a_clean_failure_or_nothing(frames: list[Frame]) -> None:
    from lifeline.errors import InvalidEntry, PeerError

    session = Session(Role.RESPONDER, "ledger", [("entries", EntryCodec())], 0.0)
    hello = Hello(1, "ledger", ("entries",), (COMPACT_CAPABILITY,), 1 << 20, 10**6, b"s" * 8)
    open_responder(session, hello, entry_set(BASE[:30]).snapshot())
    for frame in frames:
        for eff in session.receive(frame, 0.0):
            if isinstance(eff, Failed):
                assert isinstance(eff.error, (RemoteProtocolError, InvalidEntry, PeerError))


def test_a_keyed_hash_fingerprint_hashes_no_item() -> None:
    snap = entry_set(BASE).snapshot()
    dialect = compact(KEY, 8, 6)
    small = dialect.fingerprint(snap, 0, 10, summed=True)
    assert int.from_bytes(small, "little") == dialect.keyed_sum(snap, 0, 10)
    assert len(snap._keyed[(KEY, 8)][0]) == 10
    big = dialect.fingerprint(snap, 0, 400)
    assert len(big) == 8 and len(snap._keyed[(KEY, 8)][0]) == 10  # no more
    assert big != dialect.fingerprint(snap, 0, 399)
    assert big != compact(session_key(b"j" * 8, b"r" * 8), 8, 6).fingerprint(snap, 0, 400)


@pytest.mark.parametrize(("sum_limit", "echo_limit"), [(8, 1 << 16), (8, 0), (0, 0)])
def test_sessions_converge_when_ranges_are_too_large_to_sum(
    monkeypatch: pytest.MonkeyPatch, sum_limit: int, echo_limit: int
) -> None:
    monkeypatch.setattr(dialect_module, "SUM_LIMIT", sum_limit)
    monkeypatch.setattr(dialect_module, "ECHO_LIMIT", echo_limit)
    leaves = _star(300, "h")
    for a, b in (
        (_with(leaves), _with(leaves[:140] + leaves[141:])),
        (_with(leaves[:140] + leaves[141:]), _with(leaves)),
        (_with(leaves[:250]), _with(leaves[40:])),
        (_with(leaves[:140] + leaves[142:]), _with(leaves[1:])),  # one apart, not one item
    ):
        r = SessionPair([a], [b], limits=SessionLimits(branch=4, leaf=3)).run()
        assert r.errors == [] and a.state() == b.state() and r.rounds <= 8
