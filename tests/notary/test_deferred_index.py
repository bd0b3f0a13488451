"""A pull into an empty line builds the signatures' id index once they are in (decision 0143):
real nodes over gRPC on loopback, real line files, and a `sync` process killed mid-pull."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from lifeline.entry import Entry
from lifeline.home import Home
from lifeline.store.sqlite import SqliteStore
from lifeline.store.summary import read_totals
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.notary import deferred_index
from lifeline_mesh.notary.deferred_index import ID_INDEX, build_deferred_index
from lifeline_mesh.notary.row_writes import SUBJECT_INDEX
from lifeline_mesh.notary.sign import sign_entries
from lifeline_mesh.notary.statement import Role, sign
from lifeline_mesh.notary.storage import NotaryStore
from tests.support.mesh_procs import cli, serve_insecure
from tests.support.recon_helpers import chain
from tests.support.sync_helpers import history, make_node, serving


def _indexes(conn: sqlite3.Connection) -> dict[str, str | None]:
    sql = "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'attestations'"
    return dict(conn.execute(sql).fetchall())


def _columns(conn: sqlite3.Connection) -> list[tuple[object, ...]]:
    return conn.execute("PRAGMA table_info(attestations)").fetchall()


def _read(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)


def _pending(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM meta WHERE key = 'deferred_index'").fetchone() is not None


def _totals_kept(conn: sqlite3.Connection) -> None:
    """The table's whole-set fingerprint is the one its rows give."""
    kept = read_totals(conn, "attestations", "attestations")
    ids = [
        int.from_bytes(bytes(r[0]), "little") for r in conn.execute("SELECT id FROM attestations")
    ]
    assert kept is not None and (kept.count, kept.total) == (len(ids), sum(ids) % (1 << 256))


async def _signed_line(root: Path, entries: list[Entry]) -> NodeIdentity:
    identity, _ = NodeIdentity.load_or_create(NodeHome(root))
    async with make_node(root).open_line("ledger") as store:
        await store.append_many(entries)
        await sign_entries(store, identity, entries)
    return identity


async def test_a_pull_into_an_empty_line_builds_the_id_index_at_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deferred_index, "DEFER_MIN", 100)
    seen: list[dict[str, str | None]] = []
    build = deferred_index.build_deferred

    def watched(conn: sqlite3.Connection) -> int:
        seen.append(_indexes(conn))  # as the pull left them
        return build(conn)

    monkeypatch.setattr(deferred_index, "build_deferred", watched)
    entries = chain(300, "signed")
    await _signed_line(tmp_path / "a", entries)
    a, b = make_node(tmp_path / "a"), make_node(tmp_path / "b")
    async with serving(b) as (_, address):
        [report] = await a.sync(address, ["ledger"])
        assert report.entries_sent == 300
        assert report.signatures_sent == 300 + 1  # and the seal over them (decision 0149)
        [again] = await a.sync(address, ["ledger"])
    assert again.entries_sent == again.signatures_sent == again.attestations_added == 0
    [during] = seen  # the second session deferred nothing: no build
    assert ID_INDEX not in during and not any(sql is None for sql in during.values())
    assert SUBJECT_INDEX not in during  # dropped with it (decision 0150)
    with _read(Home(tmp_path / "a").line_path("ledger")) as left:
        served_columns, served = _columns(left), _indexes(left)
    with _read(Home(tmp_path / "b").line_path("ledger")) as conn:
        after = _indexes(conn)
        assert "UNIQUE INDEX attestations_id ON attestations(id)" in (after[ID_INDEX] or "")
        # the same columns and other indexes as a line made by the migrations
        assert _columns(conn) == served_columns
        assert set(after) - {ID_INDEX} == {n for n in served if not n.startswith("sqlite_")}
        assert not _pending(conn)
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT count(*) FROM attestations").fetchone() == (300,)
        _totals_kept(conn)
    assert await history(b) == await history(a)


def _sort_settings(conn: sqlite3.Connection) -> tuple[int, ...]:
    return tuple(
        int(conn.execute(f"PRAGMA {name}").fetchone()[0])
        for name in ("cache_size", "temp_store", "threads")
    )


async def test_a_signature_stored_twice_meanwhile_is_kept_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(deferred_index, "DEFER_MIN", 10)
    identity, _ = NodeIdentity.load_or_create(NodeHome(tmp_path / "signer"))
    entries = chain(60, "repeated")
    authors = [sign(identity, Role.AUTHOR, e.id, e.ts) for e in entries]
    receipt = sign(identity, Role.WITNESS, "60", entries[0].ts, *sorted(e.id for e in entries))
    node = make_node(tmp_path / "b")
    async with node.open_line("ledger") as store:
        notary = await NotaryStore.attach(store)  # type: ignore[arg-type]
        notary.may_defer = True
        path = store.path
        assert await notary.commit_each([*authors[:40], receipt]) == (41, [])
        # a peer repeating itself: 20 held signatures and the receipt again, 20 new
        assert await notary.commit_each([*authors[20:], receipt]) == (41, [])
        with _read(path) as conn:
            assert _pending(conn) and ID_INDEX not in _indexes(conn)
        usual = await store.run_read(_sort_settings)
        await build_deferred_index(store)  # type: ignore[arg-type]
        # the build's lean page cache and its sort's helper thread gone with it (0151)
        assert await store.run_read(_sort_settings) == usual
    assert "21 signatures were stored twice; kept once" in caplog.text
    with _read(path) as conn:
        assert conn.execute("SELECT count(*) FROM attestations").fetchone() == (61,)
        assert conn.execute("SELECT count(DISTINCT id) FROM attestations").fetchone() == (61,)
        assert not _pending(conn) and ID_INDEX in _indexes(conn)
        dangling = (
            "SELECT count(*) FROM witnessed_keys"
            " WHERE att_seq NOT IN (SELECT seq FROM attestations)"
        )
        assert conn.execute(dangling).fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM witnessed_keys").fetchone() == (60,)
        _totals_kept(conn)
    async with node.open_line("ledger") as again:  # the index holds: a repeat is ignored now
        notary = await NotaryStore.attach(again)  # type: ignore[arg-type]
        assert await notary.commit_each(authors[:5]) == (0, [])


async def test_signatures_served_by_id_while_the_index_waits_build_it_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A peer asking for signatures by id would make the node scan the table for every
    chunk it asks: serving them builds the index first, and the pull goes on with it."""
    monkeypatch.setattr(deferred_index, "DEFER_MIN", 10)
    identity, _ = NodeIdentity.load_or_create(NodeHome(tmp_path / "signer"))
    entries = chain(40, "served")
    authors = [sign(identity, Role.AUTHOR, e.id, e.ts) for e in entries]
    store = await SqliteStore.open(tmp_path / "ledger.db")
    try:
        pulling = await NotaryStore.attach(store)
        pulling.may_defer = True
        assert await pulling.commit_each(authors[:30]) == (30, [])
        with _read(store.path) as conn:
            assert _pending(conn) and ID_INDEX not in _indexes(conn)
        serving = await NotaryStore.attach(store)  # another session's, asked by its peer
        asked = [a.id for a in authors[5:8]]
        assert await serving.fetch(asked) == [a.item for a in authors[5:8]]
        with _read(store.path) as conn:
            assert not _pending(conn) and ID_INDEX in _indexes(conn)
        assert await pulling.commit_each(authors[20:]) == (10, [])  # held ones ignored
    finally:
        await store.close()


async def test_a_line_left_deferred_by_a_crash_is_indexed_by_the_next_node_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `sync` killed after a commit of its first signatures and before its end leaves this
    on disk: the signatures stored, the note, no id index. The next `lifeline-mesh` process
    to open the line builds the index before anything else; the pull then completes."""
    monkeypatch.setattr(deferred_index, "DEFER_MIN", 10)
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        root.mkdir()
        cli("lifeline", root, "init")
        cli("lifeline_mesh", root, "share", "ledger")
    entries = chain(200, "crashed")
    identity = await _signed_line(a, entries)
    authors = [sign(identity, Role.AUTHOR, e.id, e.ts) for e in entries[:80]]
    db = Home(b).line_path("ledger")
    store = await SqliteStore.open(db)
    try:
        notary = await NotaryStore.attach(store)
        notary.may_defer = True
        assert await notary.commit_each(authors) == (80, [])
    finally:
        await store.close()  # no session end: what a kill leaves
    with _read(db) as conn:
        assert _pending(conn) and not {ID_INDEX, SUBJECT_INDEX} & set(_indexes(conn))
    async with make_node(b).open_line("ledger"):  # the node opens it: built first
        with _read(db) as conn:
            assert not _pending(conn) and {ID_INDEX, SUBJECT_INDEX} <= set(_indexes(conn))
    with sqlite3.connect(db) as conn:  # as the crash left it again
        conn.execute("DROP INDEX attestations_id")
        conn.execute(f"DROP INDEX {SUBJECT_INDEX}")
        conn.execute("INSERT INTO meta (key, value) VALUES ('deferred_index', 'attestations_id')")
    conn.close()
    with serve_insecure(a) as (_, address):
        report = json.loads(
            cli("lifeline_mesh", b, "sync", address, "--insecure", "--json").stdout
        )[0]
    assert report["entries_added"] == 200 and report["attestations_added"] == 120, report
    with _read(db) as conn:
        assert not _pending(conn) and {ID_INDEX, SUBJECT_INDEX} <= set(_indexes(conn))
        assert conn.execute("SELECT count(DISTINCT id), count(*) FROM attestations").fetchone() == (
            200,
            200,
        )
        _totals_kept(conn)
