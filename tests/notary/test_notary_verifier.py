"""Signatures checked in worker processes, and the author fast path of decode."""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lifeline.errors import InvalidEntry
from lifeline_mesh.helpers import pool as offload
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.notary import verifier
from lifeline_mesh.notary.statement import (
    Attestation,
    Role,
    _parse_frames,
    decode,
    sign,
    ts_micros,
)

IDENTITY = NodeIdentity.generate()
OTHER = NodeIdentity.generate()


def _items(n: int) -> list[bytes]:
    return [
        sign(IDENTITY, Role.AUTHOR, f"{k:064x}", f"2026-03-01T00:00:{k % 60:02d}.000000Z").item
        for k in range(n)
    ]


def _spoil(item: bytes) -> bytes:
    return item[:-1] + bytes([item[-1] ^ 1])


def test_first_bad_in_names_the_first_bad_item() -> None:
    items = _items(10)
    assert verifier.first_bad_in(items) == -1
    assert verifier.first_bad_in([]) == -1
    assert verifier.first_bad_in([*items[:4], _spoil(items[4]), _spoil(items[5])]) == 4
    assert verifier.first_bad_in([items[0], b"short"]) == 1
    # another node's key under the same statement: the signature does not match it
    stolen = items[2][:-96] + OTHER.public_key + items[2][-64:]
    assert verifier.first_bad_in([items[0], stolen]) == 1
    assert verifier.first_bad_in([items[1][:-96] + b"\x00" * 32 + items[1][-64:]]) == 0


@pytest.mark.parametrize("bad", [None, 0, 63, 64, 199])
async def test_worker_processes_answer_like_the_in_process_check(
    monkeypatch: pytest.MonkeyPatch, bad: int | None
) -> None:
    monkeypatch.setattr(verifier, "MIN_OFFLOAD", 1)
    items = _items(200)
    if bad is not None:
        items[bad] = _spoil(items[bad])
    assert await verifier.first_bad_signature(items) == (-1 if bad is None else bad)


async def test_a_dead_worker_is_replaced_and_the_batch_still_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(verifier, "MIN_OFFLOAD", 1)
    items = _items(80)
    offload.warm_up()
    for worker in offload._workers():
        proc = worker._started()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    items[70] = _spoil(items[70])
    assert await verifier.first_bad_signature(items) == 70  # checked here meanwhile
    assert await verifier.first_bad_signature(items[:70]) == -1  # a new worker answers
    assert all(w._started().poll() is None for w in offload._workers())


_TS = st.builds(
    "2026-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}.{:06d}Z".format,
    st.integers(1, 12),
    st.integers(1, 28),
    st.integers(0, 23),
    st.integers(0, 59),
    st.integers(0, 59),
    st.integers(0, 999_999),
)


@settings(max_examples=60, deadline=None)
@given(subject=st.binary(min_size=32, max_size=32).map(bytes.hex), ts=_TS)
def test_decoding_an_author_statement_equals_the_general_parse(subject: str, ts: str) -> None:
    att = sign(IDENTITY, Role.AUTHOR, subject, ts)
    got = decode(att.item)
    assert got == att
    fields = _parse_frames(att.item[:-96], 10)
    assert fields == ["lifeline-mesh/attest/v1", "author", subject, ts, IDENTITY.node_id]
    # what decode filled in is what the statement computes from the fields
    fresh = Attestation(**{f: getattr(got, f) for f in att.__dataclass_fields__})
    assert (got.statement, got.item, got.id, got.sort_key) == (
        fresh.statement,
        fresh.item,
        fresh.id,
        fresh.sort_key,
    )
    got.verify()


def test_near_author_shapes_still_take_the_strict_path() -> None:
    att = sign(IDENTITY, Role.AUTHOR, "ab" * 32, "2026-03-01T00:00:00.000000Z")
    body, tail = att.item[:-96], att.item[-96:]
    for mangled in (
        body.replace(b"64:", b"064:"),  # a length with a leading zero
        body.replace(b"27:2026-03-01", b"27:2026-02-30"),  # no such day
        body.upper(),
        body + b"0:\n",  # an extra (empty) field
    ):
        with pytest.raises(InvalidEntry):
            decode(mangled + tail)
    decode(body + tail).verify()
    assert replace(att, ts="2026-03-01T00:00:00.000001Z").id != att.id


async def test_without_a_worker_process_batches_are_checked_in_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(verifier, "MIN_OFFLOAD", 1)
    monkeypatch.setattr(offload, "_WORKERS", [])  # fresh workers, which cannot start
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    offload.warm_up()  # must not raise: a serving node starts anyway
    items = _items(90)
    items[80] = _spoil(items[80])
    for _ in range(offload.MAX_FAILURES + 1):
        assert await verifier.first_bad_signature(items) == 80
    assert all(w._failures >= offload.MAX_FAILURES for w in offload._workers())


@settings(max_examples=200, deadline=None)
@given(ts=_TS)
def test_ts_micros_counts_microseconds_since_the_epoch(ts: str) -> None:
    moment = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    assert ts_micros(ts) == (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
