"""`lifeline render --full` in worker processes (issue 21, decision 0045): the file, its
render record and the damaged rows are the serial render's, byte for byte and in order
(real CLI subprocesses on real SQLite files; the workers forced by environment)."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import subprocess
from pathlib import Path

import pytest

from lifeline.entry import Entry
from lifeline.lines import EXTERNAL_ANCHOR
from lifeline.projection import parallel as render_parallel
from lifeline.projection.file import write_projection
from lifeline.projection.worker import same_snapshot
from lifeline.store.port import RowProblem
from lifeline.store.sqlite import SqliteStore
from tests.support.clirun import lifeline
from tests.support.entries import make_entry

N = 300  # three workers: stream positions 0-99, 100-199, 200 and after
SERIAL = {"LIFELINE_RENDER_PARALLEL_MIN": str(10**9)}
PARALLEL = {"LIFELINE_RENDER_PARALLEL_MIN": "0", "LIFELINE_RENDER_WORKERS": "3"}
OTHER_LINE = "a" * 64
ANCHOR = "b" * 64
BODIES = [
    "plain",
    "",
    "a ``` fence inside and a ```` longer one",
    "tab\there\nand lines\n",
    "\u200b zero width and \u200fעברית\u200f",
    "### # looks like lifeline-context's own heading",
    "<!-- end of entry x -->\n```",
    "bell \x07 and a lone \r",
]


def run(root: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return lifeline(root, *args, timeout=120, env=env)


def _entries() -> list[Entry]:
    """A chain with merges (two and three parents), parents in other lines and anchors,
    dedup keys and bodies of every shape the projection quotes or fences."""
    out: list[Entry] = []
    for k in range(N):
        parents: tuple[str, ...] = (out[-1].id,) if out else ()
        if k % 17 == 5:
            parents += (out[-3].id,)
        if k % 41 == 7:
            parents += (out[-5].id, OTHER_LINE)
        if k % 53 == 9:
            parents += (ANCHOR,)
        ts = f"2026-03-01T00:{k // 60 % 60:02d}:{k % 60:02d}.{k:06d}Z"
        out.append(
            make_entry(
                f"entry {k}" if k % 7 else f' "quoted" {k} ',
                parents,
                ts=ts,
                body=BODIES[k % len(BODIES)],
                dedup_key=f"key {k}" if k % 11 == 0 else None,
            )
        )
    return out


async def _fill(path: Path) -> None:
    async with await SqliteStore.open(path) as store:
        await store.declare_external(OTHER_LINE, "research")
        await store.declare_external(ANCHOR, EXTERNAL_ANCHOR)
        await store.append_many(_entries())


@pytest.fixture
def damaged(tmp_path: Path) -> Path:
    """A line with damaged rows in each worker's range, and two rows moved out of their
    range by their stream key (past every height)."""
    assert run(tmp_path, "init", env={}).returncode == 0
    db = tmp_path / ".lifeline" / "ledger.db"
    asyncio.run(_fill(db))
    conn = sqlite3.connect(db)
    for base in (0, 100, 200):
        conn.execute("UPDATE entries SET parents = 'not json' WHERE seq = ?", (base + 15,))
        conn.execute("UPDATE entries SET body = x'00ff10' WHERE seq = ?", (base + 19,))
        conn.execute("UPDATE entries SET summary = 'edited' WHERE seq = ?", (base + 25,))
    conn.execute("UPDATE entries SET height = 999999, summary = 'moved' WHERE seq = 150")
    conn.execute("UPDATE entries SET ts = x'01', height = 1000000 WHERE seq = 160")
    conn.commit()
    conn.close()
    return tmp_path


def _render(root: Path, env: dict[str, str]) -> tuple[bytes, bytes, str]:
    done = run(root, "-v", "render", "--full", env=env)
    assert done.returncode == 0, done.stderr
    path = Path(done.stdout.strip())
    record = root / ".lifeline" / "ledger.projection.json"
    return path.read_bytes(), record.read_bytes(), done.stderr


def test_the_file_and_record_are_the_serial_ones(damaged: Path) -> None:
    serial, serial_record, serial_said = _render(damaged, SERIAL)
    parallel, parallel_record, parallel_said = _render(damaged, PARALLEL)
    assert "worker processes" in parallel_said
    assert "worker processes" not in serial_said
    assert parallel == serial
    assert parallel_record == serial_record
    assert "7 undecodable rows" in parallel_said  # six damaged, and the blob ts
    assert [ln for ln in parallel_said.splitlines() if "worker processes" not in ln] == [
        ln for ln in serial_said.splitlines() if "worker processes" not in ln
    ]
    # every range's blocks are there, in stream order: the ranges' edges included
    text = serial.decode("utf-8")
    assert text.count("\n### entry ") == N - 7
    assert text.index("entry 99\n") < text.index("entry 100\n") < text.index("entry 200\n")
    assert text.rindex("- summary: moved\n") > text.index("entry 299\n")
    assert f"- {OTHER_LINE} is in line research" in text
    assert f"- {ANCHOR} is an external anchor" in text


def test_workers_start_from_the_threshold(damaged: Path) -> None:
    below = run(damaged, "-v", "render", "--full", env={"LIFELINE_RENDER_WORKERS": "3"})
    assert below.returncode == 0, below.stderr
    assert "worker processes" not in below.stderr  # 300 entries: under the default
    one = run(damaged, "-v", "render", "--full", env={**PARALLEL, "LIFELINE_RENDER_WORKERS": "1"})
    assert "worker processes" not in one.stderr


async def _problems(db: Path, out: Path) -> tuple[list[RowProblem], int]:
    problems: list[RowProblem] = []
    advanced: list[int] = []
    async with await SqliteStore.open(db, create=False) as store:
        done = await write_projection(store, "ledger", out, problems, advanced.append, full=True)
    assert sum(advanced) == done.entries
    return problems, done.entries


def test_damaged_rows_are_listed_as_the_serial_render_lists_them(
    damaged: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = damaged / ".lifeline" / "ledger.db"
    for name, value in SERIAL.items():
        monkeypatch.setenv(name, value)
    serial = asyncio.run(_problems(db, damaged / "serial.md"))
    for name, value in PARALLEL.items():
        monkeypatch.setenv(name, value)
    started: list[int] = []
    real = render_parallel.render_in_workers

    async def spy(*args: object, **kwargs: object) -> object:
        started.append(1)
        return await real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(render_parallel, "render_in_workers", spy)
    parallel = asyncio.run(_problems(db, damaged / "parallel.md"))
    assert started == [1]
    assert parallel == serial
    assert len(serial[0]) == 7 and serial[1] == N - 7
    assert serial[0][-1].rowid == 160  # moved last by its stream key
    assert (damaged / "parallel.md").read_bytes() == (damaged / "serial.md").read_bytes()


def test_an_append_after_a_parallel_render_extends_it(tmp_path: Path) -> None:
    damaged = tmp_path  # damaged rows, but none sorting last
    assert run(damaged, "init", env={}).returncode == 0
    asyncio.run(_fill(damaged / ".lifeline" / "ledger.db"))
    conn = sqlite3.connect(damaged / ".lifeline" / "ledger.db")
    conn.execute("UPDATE entries SET body = x'00ff10' WHERE seq = 120")
    conn.commit()
    conn.close()
    _render(damaged, PARALLEL)
    extra = make_entry("one more", (_entries()[-1].id,), ts="2027-01-01T00:00:00Z", body="`")

    async def add() -> None:
        async with await SqliteStore.open(damaged / ".lifeline" / "ledger.db") as store:
            await store.append_many([extra])

    asyncio.run(add())
    done = run(damaged, "-v", "render", env=PARALLEL)
    assert done.returncode == 0, done.stderr
    assert "appended: 1 entry written" in done.stderr
    appended = Path(done.stdout.strip()).read_bytes()
    full, _record, _said = _render(damaged, SERIAL)
    assert appended == full


def test_a_worker_sees_whether_its_rows_are_the_parents(damaged: Path) -> None:
    db = damaged / ".lifeline" / "ledger.db"

    async def totals_now() -> tuple[int, int]:
        async with await SqliteStore.open(db, create=False) as store:
            totals = await store.entry_totals()
        return totals.count, totals.total

    count, total = asyncio.run(totals_now())
    conn = sqlite3.connect(db, isolation_level=None)
    top = conn.execute("SELECT max(seq) FROM entries").fetchone()[0]
    assert same_snapshot(conn, top, count, total)
    assert not same_snapshot(conn, top, count + 1, total)
    assert not same_snapshot(conn, top, count, total + 1)

    async def add() -> None:  # a write landing after the render's snapshot
        async with await SqliteStore.open(db, create=False) as store:
            await store.append_many([make_entry("later", ts="2027-01-01T00:00:00Z")])

    asyncio.run(add())
    assert same_snapshot(conn, top, count, total)  # rows above top only: the same rows

    async def merge() -> None:  # a merge lowering a stored entry's time
        earlier = dataclasses.replace(_entries()[40], ts="2026-02-01T00:00:00.000000Z")
        async with await SqliteStore.open(db, create=False) as store:
            await store.append_many([earlier])

    asyncio.run(merge())
    assert not same_snapshot(conn, top, count, total)
    conn.close()


def test_non_utf8_text_stops_both_renders_alike(damaged: Path) -> None:
    conn = sqlite3.connect(damaged / ".lifeline" / "ledger.db")
    conn.execute("UPDATE entries SET summary = CAST(x'ff' AS TEXT) WHERE seq = 250")
    conn.commit()
    conn.close()
    serial = run(damaged, "render", "--full", env=SERIAL)
    parallel = run(damaged, "render", "--full", env=PARALLEL)
    assert serial.returncode == parallel.returncode != 0
    assert parallel.stderr == serial.stderr
    assert "SQLite error" in parallel.stderr


@pytest.mark.parametrize("env", [SERIAL, PARALLEL], ids=["serial", "parallel"])
def test_a_row_whose_height_is_text_ends_the_stream_without_ending_the_render(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """A text height sorts after every number: the row is the stream's last, reported as
    damaged (its parents do not decode), and the render record keeps the last good key,
    so an append after it is the full render's (it crashed with ValueError before)."""
    assert run(tmp_path, "init", env={}).returncode == 0
    db = tmp_path / ".lifeline" / "ledger.db"
    asyncio.run(_fill(db))
    conn = sqlite3.connect(db)
    conn.execute("UPDATE entries SET height = 'tall', parents = 'not json' WHERE seq = 40")
    conn.commit()
    conn.close()
    first, _record, said = _render(tmp_path, env)
    assert "1 undecodable row " in said
    serial, _record, _said = _render(tmp_path, SERIAL)
    assert first == serial
    extra = make_entry("after", (_entries()[-1].id,), ts="2027-01-01T00:00:00Z", body="x")

    async def add() -> None:
        async with await SqliteStore.open(db) as store:
            await store.append_many([extra])

    _render(tmp_path, env)
    asyncio.run(add())
    done = run(tmp_path, "-v", "render", env=env)
    assert done.returncode == 0, done.stderr
    appended = Path(done.stdout.strip()).read_bytes()
    full, _record, _said = _render(tmp_path, SERIAL)
    assert appended == full
