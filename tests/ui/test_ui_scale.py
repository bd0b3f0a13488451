"""The viewer's reads that must not grow with the line (issue 21: pages < 200 ms and the
server ≤ 300 MB at 1M entries), on a line of a few thousand entries with the bench's mix:

- the truth the pages read holds only what they can show, and every page built from it
  is byte for byte the page built from the whole folded state;
- the witness walk reads the line a page of ids and parents at a time, gives the marks of
  the whole-line walk, and reads no entry when no statement names one;
- the Mesh page counts no rows and keeps an audit's counts, not its findings; a search's
  ranking is kept until the line changes;
- the timeline's and the walk's queries go down the (height, ts, id) index, in its order.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lifeline.entry import Entry
from lifeline.home import Home
from lifeline.store.sqlite import SqliteStore
from lifeline.truth.service import LineTruth, read_truth
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.notary.witnessing import Mark, first_witnesses
from lifeline_mesh.ui import audit_cache, reader
from lifeline_mesh.ui.app import create_app
from lifeline_mesh.ui.export import asgi_get
from lifeline_mesh.ui.reader import SHOWN, Filters, LineReader
from lifeline_mesh.ui.viewer import Viewer

N = 2_500
WORDS = ("cache", "queue", "ledger", "refund", "latency", "tenant", "shard", "retry")


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _line(n: int, seed: int = 3) -> list[Entry]:
    """Decisions (a quarter: more than the Truth page shows), open questions, checkpoints
    over 8 threads, corrections, pins and merges."""
    rng = random.Random(seed)
    out = [Entry.create(ts="2026-01-01T00:00:00Z", kind="bootstrap", summary="Scale", body="")]
    fixable: list[str] = []
    for k in range(1, n):
        ts = f"2026-01-01T00:{k // 3600 % 60:02d}:{k // 60 % 60:02d}.{k:06d}Z"
        parents: tuple[str, ...] = (out[-1].id,)
        roll = rng.random()
        if roll < 0.04 and fixable:
            kind, summary, body = "correction", f"correction {k}", _text(rng, 8)
            parents = (rng.choice(fixable[-300:]),)
        elif roll < 0.06 and fixable:
            target = rng.choice(fixable)
            kind, summary, body = "note", f"pin {k}", f"pin: {target}"
            parents = (target,)
        elif roll < 0.30:
            kind, summary, body = "decision", f"decision {k}: {_text(rng, 4)}", _text(rng, 12)
        elif roll < 0.36:
            kind, summary, body = "open", f"open {k}: {_text(rng, 4)}", _text(rng, 8)
        elif roll < 0.56:
            thread = f"thread-{rng.randrange(8)}"
            body = f"thread: {thread}\ndone:\n  - {_text(rng, 3)}\nnext:\n  - {_text(rng, 3)}"
            kind, summary = "checkpoint", f"checkpoint {thread}: {_text(rng, 3)}"
        else:
            kind, summary, body = "note", f"note {k}: {_text(rng, 5)}", _text(rng, 10)
        if k % 97 == 0 and len(out) > 10:  # a merge now and then
            parents = (*parents, out[-7].id)
        entry = Entry.create(
            ts=ts, kind=kind, summary=summary, body=body, author="bench", parents=parents
        )
        out.append(entry)
        if kind in ("decision", "correction"):
            fixable.append(entry.id)
    return out


async def _write(root: Path, entries: list[Entry]) -> None:
    path = Home(root).line_path("ledger")
    path.parent.mkdir(parents=True, exist_ok=True)
    async with await SqliteStore.open(path) as store:
        await store.append_many(entries)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Entry]]:
    root = tmp_path_factory.mktemp("scale") / "project"
    root.mkdir()
    entries = _line(N)
    asyncio.run(_write(root, entries))
    return root, entries


async def _pages(root: Path, paths: list[tuple[str, str]]) -> tuple[list[bytes], LineTruth]:
    viewer = Viewer(NodeHome(root))
    app = create_app(viewer)
    try:
        out = []
        for path, query in paths:
            status, body = await asgi_get(app, path, query)
            assert status == 200, (path, query, body[:300])
            out.append(body)
        return out, await (await viewer.reader("ledger")).truth()
    finally:
        await viewer.close()


def test_pages_from_the_bounded_truth_are_the_pages_from_the_whole_state(
    project: tuple[Path, list[Entry]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, entries = project
    focus = entries[len(entries) // 2].id
    paths = [
        ("/lines/ledger/", ""),
        ("/lines/ledger/history", ""),
        ("/lines/ledger/history", "thread=thread-3"),
        ("/lines/ledger/history", f"thread=thread-5&before={entries[-400].id}"),
        ("/lines/ledger/history", "kind=decision"),
        ("/lines/ledger/history", "thread=no-such-thread"),
        ("/lines/ledger/search", "q=refund+latency"),
        ("/lines/ledger/search", "q=decision"),
        (f"/lines/ledger/graph/{focus}", ""),
        ("/mesh", ""),
    ]
    bounded, lt = asyncio.run(_pages(root, paths))
    decisions = [e for e in entries if e.kind == "decision"]
    assert len(lt.truth.decisions) > 2 * SHOWN  # more than the page shows
    assert len(lt.state.items) < len(decisions)  # and not every one was loaded
    assert lt.state.threads and not any(lt.state.threads.values())  # names, no marks
    assert "thread-3" in bounded[2].decode() and "checkpoint thread-3" in bounded[2].decode()

    async def whole(store: SqliteStore) -> LineTruth:
        return await read_truth(store)

    monkeypatch.setattr(reader, "read_shown", whole)
    full, lt_full = asyncio.run(_pages(root, paths))
    assert len(lt_full.state.items) > len(decisions)  # the whole state, for comparison
    for (path, query), mine, theirs in zip(paths, bounded, full, strict=True):
        assert mine == theirs, (path, query)


async def _traced(store: SqliteStore, work: Callable[[], Any]) -> tuple[Any, list[str]]:
    """``work()``'s result and the statements it ran on ``store``'s connection."""
    seen: list[str] = []
    await store.run_read(lambda conn: conn.set_trace_callback(seen.append))
    try:
        return await work(), seen
    finally:
        await store.run_read(lambda conn: conn.set_trace_callback(None))


def _marks(entries: list[Entry]) -> dict[str, list[Mark]]:
    rng = random.Random(5)
    picked = rng.sample(entries, 12)
    return {
        e.id: [(f"2026-02-0{1 + k % 8}T00:00:00Z", f"node-{k % 4}")] for k, e in enumerate(picked)
    }


def test_the_witness_walk_in_pages_gives_the_whole_line_walk(
    project: tuple[Path, list[Entry]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, entries = project
    monkeypatch.setattr(audit_cache, "WALK_PAGE", 97)  # many pages, one ending mid-line
    marks = _marks(entries)

    async def main() -> tuple[dict[str, list[Mark]], list[str], list[str]]:
        async with await SqliteStore.open(Home(root).line_path("ledger"), create=False) as s:
            ordered = [e async for e in s.stream()]
            assert len(ordered) == len(entries)
            expected = first_witnesses(ordered, marks)
            got, walked = await _traced(s, lambda: audit_cache.walk_witnesses(s, marks))
            assert got == expected
            none, idle = await _traced(s, lambda: audit_cache.walk_witnesses(s, {}))
            assert none == {}
            return got, walked, idle

    got, walked, idle = asyncio.run(main())
    assert len(got) > len(marks)  # marks were handed down to ancestors
    pages = [s for s in walked if "FROM entries" in s]
    assert len(pages) == -(-N // 97) or len(pages) == N // 97 + 1
    assert not idle  # nothing names an entry: nothing is read


def test_mesh_counts_no_rows_and_search_keeps_its_ranking(
    project: tuple[Path, list[Entry]], tmp_path: Path
) -> None:
    root, _entries = project

    async def main() -> None:
        viewer = Viewer(NodeHome(root))
        app = create_app(viewer)
        try:
            line = await viewer.reader("ledger")
            await line.truth()
            status, body = await asgi_get(app, "/mesh")
            assert status == 200
            assert re.search(rf"<td>{N}</td>", body.decode()), "the line's count is shown"
            _r, seen = await _traced(line.store, lambda: asgi_get(app, "/mesh"))
            assert not [s for s in seen if re.search(r"count\(\*\)\s+FROM entries", s, re.I)]

            await viewer.audit.run()  # a note per unsigned entry: counted, not kept
            held = viewer.audit.results["ledger"]
            assert "findings" not in held.report and held.failures == []
            assert sum(n for _check, n in held.notes) >= N
            status, body = await asgi_get(app, "/mesh")
            assert f"Notes: unsigned ×{N}<" in body.decode()

            first, seen = await _traced(line.store, lambda: line.search("refund latency"))
            assert any("bm25" in s for s in seen) and first.hits
            again, seen = await _traced(line.store, lambda: line.search("refund latency", 1))
            assert not any("bm25" in s for s in seen)  # the kept ranking, its second page
            assert {h.entry_id for h in again.hits}.isdisjoint(h.entry_id for h in first.hits)
            await line.store.append(
                Entry.create(ts="2026-03-01T00:00:00Z", kind="note", summary="refund later")
            )
            _after, seen = await _traced(line.store, lambda: line.search("refund latency"))
            assert any("bm25" in s for s in seen)  # the line changed: ranked again
        finally:
            await viewer.close()

    # on a copy: this test appends an entry
    copy = tmp_path / "project"
    (copy / ".lifeline").mkdir(parents=True)
    src = Home(root).line_path("ledger")
    (copy / ".lifeline" / src.name).write_bytes(src.read_bytes())
    root = copy
    asyncio.run(main())


def _plan(conn: Any, sql: str) -> str:
    return " | ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql))


def test_timeline_and_walk_queries_follow_the_index(project: tuple[Path, list[Entry]]) -> None:
    root, entries = project

    async def main() -> list[str]:
        async with await SqliteStore.open(Home(root).line_path("ledger"), create=False) as s:
            line = LineReader("ledger", s)
            cursor = entries[N // 2].id
            work = [
                lambda: line.history(Filters()),
                lambda: line.history(Filters(), cursor),
                lambda: line.history(Filters(thread="thread-2"), cursor),
                lambda: line.history(Filters(kind="decision"), cursor),
                lambda: audit_cache.walk_witnesses(s, _marks(entries)),
            ]
            plans = []
            for item in work:
                _r, seen = await _traced(s, item)
                for sql in seen:
                    if "SELECT id FROM truth_marks WHERE thread =" in sql:  # a thread's marks
                        plan = await s.run_read(lambda c, q=sql: _plan(c, q))
                        assert "USING PRIMARY KEY (thread=?)" in plan, plan
                    if "FROM entries" in sql and "ORDER BY height" in sql:
                        plans.append(await s.run_read(lambda c, q=sql: _plan(c, q)))
            return plans

    plans = asyncio.run(main())
    assert len(plans) >= 5
    for plan in plans:
        if "json_each" in plan:  # a thread: its own entries, looked up by id (then sorted)
            assert "SEARCH entries USING INDEX sqlite_autoindex_entries_1 (id=?)" in plan, plan
            assert "SCAN entries" not in plan, plan
            continue
        assert "entries_order" in plan, plan  # down the (height, ts, id) index
        assert "TEMP B-TREE" not in plan, plan  # in its order: no sort of the line


def test_a_long_thread_pages_down_the_index_to_the_same_pages(
    project: tuple[Path, list[Entry]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every page of a thread (alone and with a kind), looked up by id as before, and read
    down the index within a window: one that holds whole pages, and one so small that
    most pages fall back to the lookup."""
    root, _entries = project

    async def walk(line: LineReader, f: Filters) -> list[tuple[list[str], str | None]]:
        pages, before = [], None
        while True:
            page = await line.history(f, before)
            pages.append(([r["id"] for r in page.rows], page.older))
            if page.older is None:
                return pages
            before = page.older

    async def main() -> None:
        async with await SqliteStore.open(Home(root).line_path("ledger"), create=False) as s:
            line = LineReader("ledger", s)
            for f in (Filters(thread="thread-2"), Filters(kind="checkpoint", thread="thread-5")):
                monkeypatch.setattr(reader, "THREAD_SCAN", 10**9)
                looked_up = await walk(line, f)
                assert len(looked_up) > 1 and looked_up[0][0]
                monkeypatch.setattr(reader, "THREAD_SCAN", 10)
                indexed, seen = await _traced(s, lambda f=f: walk(line, f))
                assert indexed == looked_up
                used = [q for q in seen if "INDEXED BY entries_order" in q]
                plan = await s.run_read(lambda c, q=used[0]: _plan(c, q))
                assert "entries_order" in plan and "TEMP B-TREE" not in plan, plan
                monkeypatch.setattr(reader, "SCAN_BUDGET", 150)
                assert await walk(line, f) == looked_up
                monkeypatch.setattr(reader, "SCAN_BUDGET", 20_000)

    asyncio.run(main())
