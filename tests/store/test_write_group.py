"""Grouped writes (lifeline/store/grouped.py, sqlite_group.py; decision 0107): the writes of a bulk
pull commit together, seen by another process only once committed; they commit when the
group is full, idle, asked to, or ends, so another process's writer gets the line between
groups; a failed write loses the uncommitted ones loudly and never what was committed
before."""

from __future__ import annotations

import asyncio
import sqlite3
import stat
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from lifeline.errors import StoreError
from lifeline.home import Home
from lifeline.ledger import Draft, Ledger
from lifeline.store import sqlite_group
from lifeline.store.grouped import commit_group, grouped
from lifeline.store.lock_wait import begin_immediate, hand_of
from lifeline.store.sqlite import SqliteStore
from lifeline.store.sqlite_group import WriteGroup, read_transaction


def _clock() -> Callable[[], str]:
    ticks = iter(range(1_000_000))
    return lambda: f"2026-01-01T00:00:00.{next(ticks):06d}Z"


def _drafts(n: int, tag: str) -> list[Draft]:
    return [Draft(kind="note", summary=f"{tag} {i}", body=f"body {i}") for i in range(n)]


def _seen(path: Path) -> int:
    """The entries another process would see (its own connection)."""
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT count(*) FROM entries").fetchone()[0])
    finally:
        conn.close()


def _fails(conn: sqlite3.Connection) -> None:
    """A write that changes a row, then fails (as a batch the notary refuses)."""
    conn.execute("INSERT INTO meta VALUES ('k', 'v')")
    raise ValueError("a batch that breaks a rule")


def _never() -> WriteGroup:
    return WriteGroup(changes=10**9, seconds=1e9)


@asynccontextmanager
async def _line(path: Path) -> AsyncIterator[tuple[SqliteStore, Ledger]]:
    """The line file at ``path``, and a ledger on it with a clock that ticks per entry."""
    async with await SqliteStore.open(path) as store:
        yield store, Ledger(store, clock=_clock())


async def test_grouped_writes_are_seen_elsewhere_once_the_group_ends(tmp_path: Path) -> None:
    path = tmp_path / "line.db"
    async with _line(path) as (store, ledger):
        async with grouped(store, group=_never()):
            await ledger.append_many(_drafts(300, "a"))  # a batch, on the worker
            await ledger.append(_drafts(1, "b")[0])  # a short write: not in place
            await ledger.append_many(_drafts(300, "c"))
            assert await store.count() == 601  # this connection reads what it wrote
            assert _seen(path) == 0  # another one sees nothing yet
        assert _seen(path) == 601
        assert store.group is None
        await ledger.append_many(_drafts(2, "d"))  # after the group: a transaction each
        assert _seen(path) == 603


async def test_a_group_commits_when_full_when_asked_and_when_idle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "line.db"
    monkeypatch.setattr(sqlite_group, "GROUP_IDLE_S", 0.05)
    async with _line(path) as (store, ledger):
        full = WriteGroup(changes=500, seconds=1e9)
        async with grouped(store, group=full):
            await ledger.append_many(_drafts(200, "a"))
            await ledger.append_many(_drafts(200, "b"))  # 400 rows and their links
            assert full.commits == 1 and _seen(path) == 400
            await ledger.append_many(_drafts(10, "c"))
            await commit_group(store)  # e.g. before the node signs what it holds
            assert full.commits == 2 and _seen(path) == 410
            await ledger.append_many(_drafts(10, "d"))
            assert _seen(path) == 410
            for _ in range(100):  # no write for GROUP_IDLE_S: committed
                await asyncio.sleep(0.02)
                if _seen(path) == 420:
                    break
            assert _seen(path) == 420


async def test_a_failed_write_loses_the_uncommitted_writes_loudly_and_nothing_before(
    tmp_path: Path,
) -> None:
    path = tmp_path / "line.db"
    async with _line(path) as (store, ledger):
        await ledger.append_many(_drafts(5, "before"))
        with pytest.raises(StoreError, match="not stored"):
            async with grouped(store, group=_never()):
                await ledger.append_many(_drafts(50, "a"))
                await commit_group(store)
                await ledger.append_many(_drafts(50, "b"))  # uncommitted
                with pytest.raises(ValueError, match="breaks a rule"):
                    await store.run_write(_fails)
                with pytest.raises(StoreError, match="not stored"):  # what it lost: said
                    await ledger.append_many(_drafts(1, "c"))
        assert store.group is None
        assert _seen(path) == 55  # before the group, and its first commit
        assert await store.run_read(lambda c: c.execute("SELECT * FROM meta").fetchall()) == []
        await ledger.append_many(_drafts(1, "after"))  # the line works as before
        assert _seen(path) == 56


async def test_a_failed_first_write_of_a_transaction_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "line.db"
    async with _line(path) as (store, ledger):
        async with grouped(store, group=_never()):
            await ledger.append_many(_drafts(3, "a"))
            await commit_group(store)
            with pytest.raises(ValueError):
                await store.run_write(_fails)
            await ledger.append_many(_drafts(3, "b"))  # the group goes on
        assert _seen(path) == 6


async def test_an_error_inside_the_group_is_raised_and_what_was_written_committed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "line.db"
    async with _line(path) as (store, ledger):
        with pytest.raises(ConnectionError):
            async with grouped(store, group=_never()):
                await ledger.append_many(_drafts(7, "a"))
                raise ConnectionError("the peer went away")
        assert _seen(path) == 7  # stored batches stay stored, as without a group


async def test_read_transactions_inside_a_group_read_its_writes(tmp_path: Path) -> None:
    path = tmp_path / "line.db"
    async with _line(path) as (store, ledger):

        def count(conn: sqlite3.Connection) -> int:
            with read_transaction(conn):  # no BEGIN inside the group's transaction
                return int(conn.execute("SELECT count(*) FROM entries").fetchone()[0])

        async with grouped(store, group=_never()):
            await ledger.append_many(_drafts(4, "a"))
            assert await store.run_read(count) == 4
            assert await store.run_read(lambda c: c.in_transaction)  # still the group's
        assert await store.run_read(count) == 4
        assert not await store.run_read(lambda c: c.in_transaction)


def _opened(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has the file at ``path`` open (Linux's /proc)."""
    fds = Path(f"/proc/{pid}/fd")
    try:
        return any(fd.resolve() == path for fd in fds.iterdir())
    except OSError:  # it exited, or a descriptor closed while read
        return False


@pytest.mark.serial  # timing: a loaded machine's stalls would blur the commits
async def test_a_writer_of_another_process_gets_the_line_at_the_next_commit(
    tmp_path: Path,
) -> None:
    """A `lifeline log` beside a long grouped pull takes the line at the group's next
    commit (GROUP_GAP_S leaves the lock free a moment): not groups later, nor refused after
    its 30 s busy timeout."""
    path = Home(tmp_path).line_path("ledger")
    path.parent.mkdir(parents=True)
    async with _line(path) as (store, ledger):
        stop = asyncio.Event()

        async def pull(name: str) -> None:  # writes without a pause, as a large pull does
            k = 0
            while not stop.is_set():
                await ledger.append_many(_drafts(20, f"pull {name} {k}"))
                k += 1

        group = WriteGroup(seconds=1.0)
        async with grouped(store, group=group):
            # two writers: the store's worker always has the next write queued
            pulling = asyncio.gather(pull("a"), pull("b"))
            log = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "lifeline", "--root", str(tmp_path), "log",
                "--kind", "note", "--summary", "written beside a pull",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            waiting = asyncio.create_task(log.communicate())
            while not _opened(log.pid, path) and not waiting.done():
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)  # its reads done: it waits for the write lock
            before = group.commits
            _out, err = await asyncio.wait_for(waiting, 60)
            commits = group.commits - before
            stop.set()
            await pulling
    assert log.returncode == 0, err.decode()
    assert commits <= 1, f"`lifeline log` waited for {commits} commits of the pull"
    conn = sqlite3.connect(path)
    try:
        found = conn.execute("SELECT count(*) FROM entries WHERE summary LIKE 'written%'")
        assert found.fetchone()[0] == 1
    finally:
        conn.close()


async def test_a_group_leaves_the_lock_free_only_while_a_writer_says_it_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decision 0151: the gap after a commit only while the mark a waiting writer raises
    (lock_wait.py) is fresh; a writer that finds the lock taken raises it."""
    path = tmp_path / "line.db"
    monkeypatch.setattr(sqlite_group, "GROUP_GAP_S", 0.5)
    async with _line(path) as (store, ledger):
        group = WriteGroup(changes=100, seconds=1e9)
        async with grouped(store, group=group):
            loop = asyncio.get_running_loop()
            began = loop.time()
            for n in range(4):  # a commit after each
                await ledger.append_many(_drafts(100, f"alone {n}"))
            assert group.commits == 4 and loop.time() - began < 1.0  # no gap: nobody waits
            await ledger.append_many(_drafts(10, "held"))  # the group's open transaction
            other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            try:
                waiting = asyncio.create_task(asyncio.to_thread(_wait_to_write, other, path))
                for _ in range(500):  # it finds the lock taken and says so
                    if hand_of(path).exists() or waiting.done():
                        break
                    await asyncio.sleep(0.01)
                assert hand_of(path).exists() and not waiting.done()
                began = loop.time()
                await ledger.append_many(_drafts(100, "watched"))  # a commit, then the gap
                assert loop.time() - began >= 0.5
                await asyncio.wait_for(waiting, 30)  # it got the lock, in the gap
            finally:
                other.close()
        assert stat.S_IMODE(hand_of(path).stat().st_mode) == 0o600
    conn = sqlite3.connect(path)
    try:
        found = conn.execute("SELECT value FROM meta WHERE key = 'written beside'").fetchone()
        assert found == ("the pull",)
    finally:
        conn.close()


def test_a_mark_planted_as_a_link_is_not_followed(tmp_path: Path) -> None:
    """A cloned repository can carry ``.lifeline/ledger.db-waiting`` as a link (git keeps
    links, decision 0132): a waiting writer neither creates nor touches what it points to,
    and still gets the line once it is free."""
    path = tmp_path / "line.db"
    target = tmp_path / "elsewhere"
    hand_of(path).symlink_to(target)
    holder = sqlite3.connect(path, isolation_level=None)
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        holder.execute("PRAGMA journal_mode = WAL")
        holder.execute("CREATE TABLE t (x)")
        holder.execute("BEGIN IMMEDIATE")
        waiting = threading.Thread(target=begin_immediate, args=(writer, path))
        waiting.start()
        time.sleep(0.2)  # it found the lock taken, and waits
        holder.execute("COMMIT")
        waiting.join(10)
        assert not waiting.is_alive() and writer.in_transaction
        writer.execute("COMMIT")
    finally:
        holder.close()
        writer.close()
    assert not target.exists() and hand_of(path).is_symlink()


def _wait_to_write(conn: sqlite3.Connection, path: Path) -> None:
    """A writer of another connection, as SqliteStore writes: the mark, then the wait."""
    begin_immediate(conn, path)
    conn.execute("INSERT INTO meta VALUES ('written beside', 'the pull')")
    conn.execute("COMMIT")


def _wal(path: Path) -> int:
    wal = path.with_name(path.name + "-wal")
    return wal.stat().st_size if wal.exists() else 0


async def _interval(store: SqliteStore) -> int:
    return int(await store.run_read(lambda c: c.execute("PRAGMA wal_autocheckpoint").fetchone()[0]))


async def test_a_group_lets_the_wal_grow_and_hands_it_back_at_its_end(tmp_path: Path) -> None:
    """Decision 0145: checkpoints every ~800 MB of WAL (0151) while a group is open, the store's
    interval after it, and the WAL checkpointed and truncated when it ends."""
    path = tmp_path / "line.db"
    async with _line(path) as (store, ledger):
        before = await _interval(store)
        async with grouped(store, group=WriteGroup(changes=200, seconds=1e9)):
            assert await _interval(store) == sqlite_group.GROUP_AUTOCHECKPOINT_PAGES
            for n in range(5):
                await ledger.append_many(_drafts(300, f"batch {n}"))
            assert _wal(path) > 0
        assert await _interval(store) == before == 10_000
        assert _wal(path) == 0 and _seen(path) == 1500


def _copiers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "wal-copier"]


def _in_file(path: Path) -> int:
    """The entries the line file itself holds, its WAL left unread."""
    conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM entries").fetchone()[0])
    except sqlite3.OperationalError:  # the schema itself still in the WAL only
        return 0
    finally:
        conn.close()


async def test_a_groups_commits_are_copied_into_the_file_beside_its_writes(
    tmp_path: Path,
) -> None:
    """Decision 0151: a thread of the group's own checkpoints the WAL after each commit,
    long before the writer's own interval (~800 MB) would; it ends with the group."""
    path = tmp_path / "line.db"
    async with _line(path) as (store, ledger):
        async with grouped(store, group=WriteGroup(changes=1000, seconds=1e9)):
            await ledger.append_many(_drafts(300, "a"))
            assert _in_file(path) == 0  # not committed yet
            assert not _copiers()  # nor a thread started: it comes with the first commit
            await ledger.append_many(_drafts(300, "b"))  # the group is full: committed
            for _ in range(200):
                if _in_file(path) == 600:
                    break
                await asyncio.sleep(0.02)
            assert _in_file(path) == 600
            assert _wal(path) > 0  # copied, not truncated: the writer goes on after it
            assert _copiers()
            await ledger.append_many(_drafts(10, "c"))
        assert not _copiers()
        assert _wal(path) == 0 and _in_file(path) == 610


async def test_a_reader_on_the_wal_keeps_it_and_loses_nothing(tmp_path: Path) -> None:
    """A reader still reading when the group ends: the WAL is left as it is, at once."""
    path = tmp_path / "line.db"
    async with _line(path) as (store, ledger):
        reader = sqlite3.connect(path, isolation_level=None)
        try:
            reader.execute("BEGIN")
            assert reader.execute("SELECT count(*) FROM entries").fetchone()[0] == 0
            loop = asyncio.get_running_loop()
            async with grouped(store, group=_never()):
                await ledger.append_many(_drafts(300, "kept"))
                ended = loop.time()
            assert loop.time() - ended < 5
            assert _wal(path) > 0 and _seen(path) == 300
        finally:
            reader.close()
        assert await _interval(store) == 10_000
