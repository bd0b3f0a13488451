"""Received entries parsed in the helper processes, and rows written many per statement.

The helpers must answer exactly as ``EntryCodec.parse`` does (the session trusts them), hand
back an inadmissible batch so that the session's own refusal names it, follow the node's
size limits, and be replaced by in-process parsing when they die. ``insert_rows`` must
write what ``executemany`` wrote, without stalling behind a busy Python thread.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from lifeline.entry import Entry
from lifeline.errors import IdMismatch, InvalidEntry
from lifeline.store import sqlite_writes
from lifeline.store.sqlite_writes import insert_rows
from lifeline.validate import Limits
from lifeline_mesh.helpers import pool as offload
from lifeline_mesh.recon.entry_codec import ENTRIES, EntryCodec
from lifeline_mesh.recon.frames import Items, LoadSnapshot
from lifeline_mesh.recon.session import Role, Session, SessionLimits
from lifeline_mesh.recon.sets import ParsedItems, Snapshot
from lifeline_mesh.sync import entry_offload
from lifeline_mesh.sync.entry_offload import parse_in_helpers, preparse
from tests.support.sync_helpers import history, make_node, serving, write


def _entries(n: int) -> list[Entry]:
    out: list[Entry] = []
    for k in range(n):
        out.append(
            Entry.create(
                ts=f"2026-04-01T09:{k // 60 % 60:02d}:{k % 60:02d}.{k:06d}Z",
                kind="decision" if k % 3 else "note",
                summary=f"entscheidung {k} — ünïcödé ✓",
                body=f"  body {k}\n with trailing space  ",
                author="ana",
                parents=tuple(e.id for e in out[-3:][: k % 4]),
                dedup_key=f"key-{k}" if k % 5 == 0 else None,
            )
        )
    return out


def _raws(entries: list[Entry]) -> list[bytes]:
    return [
        json.dumps(e.to_dict(), ensure_ascii=k % 2 == 0).encode() for k, e in enumerate(entries)
    ]


async def test_helpers_parse_exactly_as_the_codec_does() -> None:
    raws = _raws(_entries(300))
    codec = EntryCodec()
    got = await parse_in_helpers(codec, raws)
    assert got == [codec.parse(raw) for raw in raws]


@pytest.mark.parametrize("where", [0, 150, 299])
async def test_an_inadmissible_entry_hands_the_batch_back_to_the_session(where: int) -> None:
    entries = _entries(300)
    raws = _raws(entries)
    tampered = entries[where].to_dict() | {"summary": "edited after the id was computed"}
    raws[where] = json.dumps(tampered).encode()
    codec = EntryCodec()
    assert await parse_in_helpers(codec, raws) is None
    frame = Items(0, tuple(raws))
    assert await preparse(frame, codec) is frame  # the session parses it and refuses
    with pytest.raises(IdMismatch):
        codec.parse(raws[where])


async def test_a_batch_that_breaks_the_parser_is_handed_back_and_the_helpers_live() -> None:
    raws = _raws(_entries(300))
    raws[7] = b'{"body":' + b"[" * 100_000 + b"]" * 100_000 + b"}"  # deeper than Python goes
    assert await parse_in_helpers(EntryCodec(), raws) is None
    with pytest.raises(InvalidEntry, match="nests too deeply"):
        EntryCodec().parse(raws[7])
    assert all(w._failures == 0 for w in offload._workers())  # answered, did not die


async def test_helpers_apply_the_nodes_size_limits() -> None:
    raws = _raws(_entries(300))
    assert await parse_in_helpers(EntryCodec(Limits(body_bytes=10)), raws) is None
    assert await parse_in_helpers(EntryCodec(Limits(body_bytes=40)), raws) is not None


async def test_small_batches_and_other_frames_are_left_to_the_session() -> None:
    raws = _raws(_entries(entry_offload.MIN_OFFLOAD - 1))
    small = Items(0, tuple(raws))
    assert await preparse(small, EntryCodec()) is small
    assert await preparse(small, None) is small
    large = Items(0, tuple(_raws(_entries(entry_offload.MIN_OFFLOAD))))
    parsed = await preparse(large, EntryCodec())
    assert isinstance(parsed, ParsedItems) and parsed.frame is large


async def test_dead_helpers_are_replaced_and_the_batch_parsed_meanwhile() -> None:
    raws = _raws(_entries(300))
    offload.warm_up()
    for worker in offload._workers():
        proc = worker._started()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    codec = EntryCodec()
    expected = [codec.parse(raw) for raw in raws]
    assert await parse_in_helpers(codec, raws) == expected  # parsed here meanwhile
    assert await parse_in_helpers(codec, raws) == expected  # new helpers answer
    assert all(w._started().poll() is None for w in offload._workers())


def test_a_preparsed_frame_still_gets_the_sessions_size_cap() -> None:
    codec = EntryCodec()
    raws = _raws(_entries(3))
    session = Session(Role.RESPONDER, "ledger", [(ENTRIES, codec)], 0.0,
                      SessionLimits(max_item_bytes=200))  # fmt: skip
    session.peer_hello = object()  # type: ignore[assignment]  # past the handshake
    parsed = ParsedItems(Items(0, tuple(raws)), tuple(codec.parse(r) for r in raws))
    effects = session.receive(parsed, 0.0)
    if effects == [LoadSnapshot(0)]:  # the set's snapshot first, as the driver does
        effects = session.snapshot_loaded(0, Snapshot.empty(), 0.0)
    assert session.finished
    assert "max_item_bytes" in repr(effects)


async def test_a_large_sync_parses_in_the_helpers_and_converges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = entry_offload.parse_in_helpers

    async def counting(codec: EntryCodec, raws: list[bytes]) -> object:
        calls.append(len(raws))
        return await real(codec, raws)

    monkeypatch.setattr(entry_offload, "parse_in_helpers", counting)
    a, b = make_node(tmp_path / "a"), make_node(tmp_path / "b")
    await write(a, _entries(700))
    async with serving(b) as (_, address):
        [report] = await a.sync(address, ["ledger"])
    assert report.entries_sent == 700
    assert sum(calls) == 700  # every entry went through the helpers
    assert await history(a) == await history(b)


def test_insert_rows_writes_what_executemany_wrote(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_writes, "ROWS_PER_STATEMENT", 3)
    rows = [(k, f"v{k}", None if k % 2 else k * 1.5) for k in range(10)]
    got, want = sqlite3.connect(":memory:"), sqlite3.connect(":memory:")
    for conn in (got, want):
        conn.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT, x REAL)")
    insert_rows(got, "INSERT OR IGNORE INTO t", [*rows, rows[4]])  # a duplicate: ignored
    insert_rows(got, "INSERT INTO t", [])
    want.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    dump = "SELECT * FROM t ORDER BY k"
    assert got.execute(dump).fetchall() == want.execute(dump).fetchall()
    with pytest.raises(sqlite3.IntegrityError):
        insert_rows(got, "INSERT INTO t", [rows[0]])


@pytest.mark.serial  # a bound on wall-clock time: run alone, not beside the other workers
def test_insert_rows_keeps_pace_beside_a_busy_python_thread(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "t.db", check_same_thread=False)
    conn.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, id TEXT UNIQUE, body TEXT)")
    rows = [(k, hashlib.sha256(b"%d" % k).hexdigest(), "lorem " * 170) for k in range(4000)]
    stop = threading.Event()

    def spin() -> None:  # an event loop thread parsing: never blocks, never sleeps
        x = 0
        while not stop.is_set():
            for i in range(1000):
                x += i * i

    spinner = threading.Thread(target=spin)
    spinner.start()
    try:
        started = time.perf_counter()
        insert_rows(conn, "INSERT INTO t", rows)
        took = time.perf_counter() - started
    finally:
        stop.set()
        spinner.join()
    # executemany hands the lock over once a row: 5.5 s here on our 2-core machine,
    # against 0.04 s for insert_rows
    assert took < 1.0
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (4000,)
