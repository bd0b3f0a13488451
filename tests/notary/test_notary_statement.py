"""Attestation bytes: exact layout, strict decoding, signatures bound to every byte."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lifeline.errors import BadSignature, EntryTooLarge, InvalidEntry
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.notary.statement import (
    MAX_ITEM_BYTES,
    MAX_WITNESS_IDS,
    Attestation,
    Role,
    decode,
    sign,
    ts_micros,
)

IDENT = NodeIdentity.generate()
TS = "2026-01-10T10:00:00.000000Z"
E1 = "403ba775847eb9bddc331751d9ac45afac96bb80e2a4c682a9126067d2eb5ad1"
E2 = "5" * 64


def test_author_statement_layout_is_exact() -> None:
    att = sign(IDENT, Role.AUTHOR, E1, TS)
    nid = IDENT.node_id
    expected = (
        b"23:lifeline-mesh/attest/v1\n6:author\n64:" + E1.encode() + b"\n"
        b"27:" + TS.encode() + b"\n22:" + nid.encode() + b"\n"
    )
    assert att.statement == expected
    assert att.item == expected + IDENT.public_key + att.signature
    assert len(att.signature) == 64
    assert att.id == hashlib.sha256(att.item).digest()
    assert att.sort_key == ts_micros(TS) == 1_768_039_200_000_000


@pytest.mark.parametrize(
    ("role", "subject", "extras"),
    [
        (Role.AUTHOR, E1, ()),
        (Role.WITNESS, "2", (E1, E2)),
        (Role.SUMMARY, "ledger", ("7", "0" * 32, E1, E2)),
    ],
)
def test_every_role_round_trips(role: Role, subject: str, extras: tuple[str, ...]) -> None:
    att = sign(IDENT, role, subject, TS, *extras)
    again = decode(att.item)
    assert again == att
    again.verify()


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_any_changed_byte_is_refused(data: st.DataObject) -> None:
    item = bytearray(sign(IDENT, Role.WITNESS, "2", TS, E1, E2).item)
    pos = data.draw(st.integers(0, len(item) - 1))
    item[pos] ^= data.draw(st.integers(1, 255))
    with pytest.raises(InvalidEntry):  # BadSignature is an InvalidEntry
        decode(bytes(item)).verify()


def test_malformed_statements_are_refused_with_a_reason() -> None:
    with pytest.raises(InvalidEntry, match="sorted and unique"):
        sign(IDENT, Role.WITNESS, "2", TS, E2, E1)
    with pytest.raises(InvalidEntry, match="says '3' ids"):
        sign(IDENT, Role.WITNESS, "3", TS, E1, E2)
    with pytest.raises(InvalidEntry, match="not in the form"):
        sign(IDENT, Role.AUTHOR, E1, "2026-01-10T10:00:00Z")
    with pytest.raises(InvalidEntry, match="one entry id"):
        sign(IDENT, Role.AUTHOR, "abc", TS)
    with pytest.raises(InvalidEntry, match="line name"):
        sign(IDENT, Role.SUMMARY, "Bad Line", TS, "1", "0" * 32)
    many = tuple(f"{n:064x}" for n in range(MAX_WITNESS_IDS + 1))
    with pytest.raises(EntryTooLarge, match="cap"):
        sign(IDENT, Role.WITNESS, str(len(many)), TS, *many)
    with pytest.raises(EntryTooLarge, match="cap"):
        decode(b"x" * (MAX_ITEM_BYTES + 1))
    with pytest.raises(InvalidEntry, match="not a lifeline-mesh/attest/v1"):
        decode(b"3:abc\n" * 8 + b"\0" * 96)


@pytest.mark.parametrize(
    ("role", "subject", "extras"),
    [
        # digits int() refuses, or more than it takes: refused as malformed, not a crash
        (Role.STATE, "ledger", ("\u00b2", "0" * 32, "0" * 64, "1/1")),
        (Role.STATE, "ledger", ("9" * 5000, "0" * 32, "0" * 64, "1/1")),
        (Role.SUMMARY, "ledger", ("\u0663", "0" * 32)),
        # "$" would have taken a trailing newline
        (Role.STATE, "ledger", ("7", "0" * 32 + "\n", "0" * 64, "1/1")),
        (Role.STATE, "ledger", ("7", "0" * 32, "0" * 64 + "\n", "1/1")),
        (Role.STATE, "ledger\n", ("7", "0" * 32, "0" * 64, "1/1")),
        (Role.AUTHOR, E1 + "\n", ()),
        (Role.WITNESS, "1", (E1 + "\n",)),
    ],
)
def test_a_hostile_field_is_refused_as_malformed(
    role: Role, subject: str, extras: tuple[str, ...]
) -> None:
    with pytest.raises(InvalidEntry):
        sign(IDENT, role, subject, TS, *extras)
    with pytest.raises(InvalidEntry):  # as a peer would send it, signed over its bytes
        decode(_forged(role, subject, extras))
    with pytest.raises(InvalidEntry):
        sign(IDENT, Role.AUTHOR, E1, TS.replace("2026", "\u0662\u0660\u0662\u0666"))


def _forged(role: Role, subject: str, extras: tuple[str, ...]) -> bytes:
    unchecked = Attestation(role, subject, TS, IDENT.node_id, extras, IDENT.public_key, b"")
    return unchecked.statement + IDENT.public_key + IDENT.sign(unchecked.statement)


def test_a_statement_resigned_under_another_node_id_is_named() -> None:
    other = NodeIdentity.generate()
    honest = sign(other, Role.AUTHOR, E1, TS)
    forged_unsigned = Attestation(Role.AUTHOR, E1, TS, IDENT.node_id, (), other.public_key, b"")
    forged = Attestation(
        Role.AUTHOR,
        E1,
        TS,
        IDENT.node_id,
        (),
        other.public_key,
        other.sign(forged_unsigned.statement),
    )
    honest.verify()
    with pytest.raises(BadSignature, match="re-signed under another node"):
        decode(forged.item).verify()


@settings(max_examples=200, deadline=None)
@given(st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9999, 12, 31)))
def test_sort_keys_are_the_microseconds_since_the_epoch(moment: datetime) -> None:
    stamp = moment.replace(tzinfo=UTC)
    ts = stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    expected = (stamp - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    assert ts_micros(ts) == expected
    assert ts_micros(ts) == ts_micros(ts)  # the cached second gives the same answer
