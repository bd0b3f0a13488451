"""Bounded fork joining (decision 0018): no local write fails because of how many tips a line
has, a thread write chains to its thread's newest tip, and forks still converge.

The "imported" line is shaped like a lifeline-context ledger: every thread a chain that is
never joined, so the line holds far more tips than the parent cap.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest

from lifeline.entry import Entry
from lifeline.home import Home
from lifeline.ledger import JOIN_TIPS, Draft, Ledger, choose_parents
from lifeline.store.memory import MemoryStore
from lifeline.store.sqlite import SqliteStore
from lifeline.store.sqlite_reads import NEWEST_TIPS, tips_for_write
from lifeline.truth.parse import thread_of
from lifeline.validate import DEFAULT_LIMITS
from lifeline_mesh.home.node_home import NodeHome
from tests.support.clirun import lifeline
from tests.support.mcp_client import call_tool, mcp_client
from tests.support.pg_server import open_test_store

THREADS = 150
LEAVES = 900


def _leafy_line() -> list[Entry]:
    """A bootstrap, THREADS threads (open + checkpoint each) and LEAVES notes, none joined."""
    root = Entry.create(ts="2025-01-01T00:00:00Z", kind="bootstrap", summary="Project: leafy")
    out = [root]
    for t in range(THREADS):
        opened = Entry.create(
            ts=f"2025-01-02T00:{t // 60:02d}:{t % 60:02d}Z",
            kind="open",
            summary=f"Question {t}",
            body=f"thread: t{t}",
            parents=(root.id,),
        )
        cp = Entry.create(
            ts=f"2025-01-03T00:{t // 60:02d}:{t % 60:02d}Z",
            kind="checkpoint",
            summary=f"checkpoint t{t}: next — step",
            body=f"thread: t{t}\nnext:\n  - step",
            parents=(opened.id,),
        )
        out += [opened, cp]
    for n in range(LEAVES):
        out.append(
            Entry.create(
                ts=f"2025-01-04T{n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z",
                kind="note",
                summary=f"leaf {n}",
                parents=(root.id,),
            )
        )
    return out


def _thread_head(entries: list[Entry], thread: str) -> str:
    return next(
        e.id for e in entries if e.kind == "checkpoint" and e.body.startswith(f"thread: {thread}\n")
    )


def test_choose_parents_rules() -> None:
    tips = [(f"{n:02d}" * 32, "") for n in range(20)]  # newest first
    assert choose_parents(tips[:3], "") == tuple(sorted(i for i, _b in tips[:3]))
    assert choose_parents(tips, "") == tuple(sorted(i for i, _b in tips[:JOIN_TIPS]))
    threaded = [*tips[:15], ("ff" * 32, "note\nthread: q7\n"), *tips[15:]]
    chosen = choose_parents(threaded, "thread: q7\nnext:\n  - x")
    assert len(chosen) == JOIN_TIPS and "ff" * 32 in chosen
    assert set(chosen) - {"ff" * 32} == {i for i, _b in tips[: JOIN_TIPS - 1]}
    assert choose_parents(threaded, "thread: other") == choose_parents(threaded, "")
    assert choose_parents(tips, "", cap=1) == (tips[0][0],)
    assert choose_parents([], "") == ()


@pytest.mark.parametrize("adapter", ["sqlite", "memory", "postgres"])
async def test_a_leafy_line_stays_writable_and_converges(
    request: pytest.FixtureRequest, tmp_path: Path, adapter: str
) -> None:
    entries = _leafy_line()
    store = await open_test_store(request, adapter, tmp_path)
    try:
        await store.append_many(entries)
        tips = len(await store.tips())
        assert tips == THREADS + LEAVES > DEFAULT_LIMITS.max_parents
        ledger = Ledger(store)
        cp, _ = await ledger.append(Draft(kind="checkpoint", summary="cp", body="thread: t3"))
        assert _thread_head(entries, "t3") in cp.parents and len(cp.parents) == JOIN_TIPS
        writes = 1
        while len(await store.tips()) > 1:
            entry, _ = await ledger.append(Draft(kind="note", summary=f"w{writes}"))
            assert len(entry.parents) <= JOIN_TIPS
            writes += 1
        assert writes == -(-(tips - 1) // (JOIN_TIPS - 1))  # t - 1 tips retired per write
    finally:
        await store.close()


async def test_every_backend_chooses_the_same_parents(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    entries = _leafy_line()
    chosen = []
    for kind in ("sqlite", "memory", "postgres"):
        store = await open_test_store(request, kind, tmp_path)
        await store.append_many(entries)
        ledger = Ledger(store, clock=lambda: "2026-01-01T00:00:00.000000Z")
        entry, _ = await ledger.append(Draft(kind="note", summary="same"))
        batch = await ledger.append_many(
            [Draft(kind="note", summary="b1"), Draft(kind="note", summary="b2")]
        )
        threaded, _ = await ledger.append(Draft(kind="note", summary="t", body="thread: t5"))
        more = await ledger.append_many([Draft(kind="note", summary="u", body="thread: t6")])
        [in_t6] = await store.get_many(more.added)
        chosen.append((entry.parents, batch.added, threaded.parents, in_t6.parents))
        await store.close()
    assert chosen[0] == chosen[1] == chosen[2]
    assert _thread_head(entries, "t5") in chosen[0][2]
    assert _thread_head(entries, "t6") in chosen[0][3]


async def test_concurrent_forks_converge() -> None:
    base = Entry.create(ts="2026-01-01T00:00:00Z", kind="bootstrap", summary="Project: p")
    a, b = MemoryStore(), MemoryStore()
    for s in (a, b):
        await s.append(base)
    (ea, _), (eb, _) = await asyncio.gather(
        Ledger(a).append(Draft(kind="note", summary="on a")),
        Ledger(b).append(Draft(kind="note", summary="on b")),
    )
    await a.append(eb)  # sync both ways
    await b.append(ea)
    assert sorted(await a.tips()) == sorted(await b.tips()) == sorted((ea.id, eb.id))
    joined, _ = await Ledger(a).append(Draft(kind="note", summary="join"))
    assert joined.parents == tuple(sorted((ea.id, eb.id)))
    assert await a.tips() == [joined.id]


async def _leafy_project(root: Path) -> list[Entry]:
    path = Home(root).line_path("ledger")
    path.parent.mkdir(parents=True)
    entries = _leafy_line()
    async with await SqliteStore.open(path) as store:
        await store.append_many(entries)
    return entries


async def test_cli_log_and_checkpoint_on_a_leafy_line(tmp_path: Path) -> None:
    entries = await _leafy_project(tmp_path)
    logged = lifeline(tmp_path, "log", "--kind", "note", "--summary", "after import", "--json")
    assert logged.returncode == 0, logged.stderr
    cp = lifeline(tmp_path, "checkpoint", "--thread", "t42", "--next", "go on", "--json")
    assert cp.returncode == 0, cp.stderr
    async with await SqliteStore.open(Home(tmp_path).line_path("ledger")) as store:
        wrote = [e async for e in store.stream()][len(entries) :]
        assert wrote[0].summary == "after import"
        assert _thread_head(entries, "t42") in wrote[1].parents
        assert len(await store.tips()) == THREADS + LEAVES - 2 * (JOIN_TIPS - 1)


@pytest.mark.timeout(120)
async def test_mcp_append_and_checkpoint_on_a_leafy_line(tmp_path: Path) -> None:
    entries = await _leafy_project(tmp_path)
    NodeHome(tmp_path).policy_path.write_text(json.dumps({"default": "direct"}))
    async with mcp_client(tmp_path) as client:
        done = await call_tool(client, "append", kind="note", summary="from an agent")
        assert len(done["entry"]["parents"]) == JOIN_TIPS
        cp = await call_tool(client, "checkpoint", thread="t9", next=["resume here"])
        assert _thread_head(entries, "t9") in cp["entry"]["parents"]


async def test_reading_the_tips_never_walks_the_line(tmp_path: Path) -> None:
    async with await SqliteStore.open(tmp_path / "l.db") as store:
        await store.append_many(_leafy_line())
        plan = await store.run_read(
            lambda conn: conn.execute(f"EXPLAIN QUERY PLAN {NEWEST_TIPS}", (9,)).fetchall()
        )
    steps = [row[3] for row in plan]
    assert steps[0].startswith("SCAN t") and "entries_order" not in " ".join(steps), steps


async def test_a_write_reads_only_the_tips_that_could_be_chosen(tmp_path: Path) -> None:
    """The tips a write reads (the newest, and those that may be in its thread) give the
    parents every tip with its body would, on a line of many tips in many threads."""
    entries = _leafy_line()
    async with await SqliteStore.open(tmp_path / "l.db") as store:
        await store.append_many(entries)

        def every_tip(conn: sqlite3.Connection) -> list[tuple[str, str]]:
            rows = conn.execute(
                "SELECT e.id, e.body FROM tips t CROSS JOIN entries e ON e.id = t.id"
                " ORDER BY e.height DESC, e.ts DESC, e.id DESC"
            )
            return rows.fetchall()

        tips = await store.run_read(every_tip)
        assert len(tips) == THREADS + LEAVES
        for body in ("", "thread: t7", "thread: t1", "thread: t149\nnext:\n  - x", "thread: none"):
            thread = thread_of(body)
            for cap in (1, 3, JOIN_TIPS):
                read = await store.run_read(lambda c: tips_for_write(c, thread, cap))  # noqa: B023
                assert choose_parents(read, body, cap) == choose_parents(tips, body, cap)
                naming = 0 if thread is None else sum(thread in b for _i, b in tips)
                assert len(read) <= cap + 1 + naming  # "t1" is in t1, t10, t149...
                assert all(b == "" or thread in b for _i, b, _ts in read)
        # a line of no more tips than the cap: every tip, and no body is read
        few = await store.run_read(lambda c: tips_for_write(c, "t7", len(tips)))
        assert [i for i, _b, _ts in few] == [i for i, _b in tips]
        assert {b for _i, b, _ts in few} == {""}
