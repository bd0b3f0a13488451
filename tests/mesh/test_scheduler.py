"""The asyncio scheduler with an injected sync_one: concurrency, isolation, triggers, stop.

Timing constants are shrunk (SchedulePolicy, session_timeout, watcher interval) instead of
sleeping; every wait is on an event with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from lifeline.errors import PeerError
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.discovery.advert import PeerFound
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.peering.changes import LineWatcher
from lifeline_mesh.peering.schedule import SchedulePolicy
from lifeline_mesh.peering.scheduler import SyncScheduler
from lifeline_mesh.peering.table import PeerAddress, PeerState, load_peers_file, save_peers_file
from tests.support.entries import make_entry

FAST = SchedulePolicy(period=3600, backoff_base=0.01, backoff_max=0.05, backoff_jitter=0.5)
NODE_B = "bbbb-bbbb-bbbb-bbbb-00"


@contextlib.asynccontextmanager
async def _running(sched: SyncScheduler, watcher: LineWatcher | None = None) -> AsyncIterator[None]:
    async def main() -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(sched.run(tg))
            if watcher is not None:
                tg.create_task(watcher.run(sched.local_change))

    task = asyncio.create_task(main())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _until(predicate: object, timeout: float = 10.0) -> None:
    """Wait (on the loop, not the clock) until ``predicate()`` holds."""
    assert callable(predicate)
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.005)


async def test_concurrent_sessions_are_bounded() -> None:
    gate = asyncio.Event()
    running: set[str] = set()
    peak = 0
    done: list[str] = []

    async def sync_one(peer: PeerState) -> str:
        nonlocal peak
        running.add(peer.key)
        peak = max(peak, len(running))
        await gate.wait()
        running.discard(peer.key)
        done.append(peer.key)
        return "ok"

    sched = SyncScheduler(sync_one, policy=FAST, max_sessions=2)
    for n in range(6):
        sched.add_static(PeerAddress("127.0.0.1", 9000 + n))
    async with _running(sched):
        await _until(lambda: len(running) == 2)
        for _ in range(20):  # give any extra session every chance to start
            await asyncio.sleep(0)
        assert len(running) == 2
        gate.set()
        await _until(lambda: len(done) == 6)
    assert peak == 2
    assert all(p.last_sync_at is not None and p.failures == 0 for p in sched.table)


@pytest.mark.serial  # 20 syncs must fit in the dead peer's 0.3 s: a wall-clock bound
async def test_dead_and_flapping_peers_do_not_hurt_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="lifeline_mesh.peering.scheduler")
    calls: Counter[int] = Counter()

    async def sync_one(peer: PeerState) -> str:
        calls[peer.address.port] += 1
        if peer.address.port == 1:  # dead: hangs until the session timeout
            await asyncio.Event().wait()
        if peer.address.port == 2:  # flapping: refuses every time
            raise PeerError(f"connection to {peer.address} refused")
        return "ok"

    policy = SchedulePolicy(period=0.01, backoff_base=0.01, backoff_max=0.02)
    sched = SyncScheduler(sync_one, policy=policy, max_sessions=2, session_timeout=0.3)
    for port in (1, 2, 3):
        sched.add_static(PeerAddress("127.0.0.1", port))
    async with _running(sched):
        await _until(lambda: calls[3] >= 20 and calls[2] >= 3)
        assert calls[1] == 1  # still inside its first (hanging) session
        await _until(lambda: sched.table.get("static:127.0.0.1:1").failures >= 1)
    dead, flappy, good = (sched.table.get(f"static:127.0.0.1:{p}") for p in (1, 2, 3))
    assert "no result within 0.3s" in (dead.last_error or "")
    assert flappy.last_error == "connection to 127.0.0.1:2 refused"
    assert good.failures == 0 and good.last_error is None
    warnings = [
        r for r in caplog.records if r.levelno == logging.WARNING and ":2 " in r.msg % r.args
    ]
    assert len(warnings) == 1  # repeated failures log once, then quietly


async def test_discovered_peer_syncs_at_once_and_lost_peer_is_dropped() -> None:
    seen: asyncio.Queue[str | None] = asyncio.Queue()

    async def sync_one(peer: PeerState) -> str:
        await seen.put(peer.node_id)
        return "ok"

    sched = SyncScheduler(sync_one, policy=FAST)
    async with _running(sched):
        sched.peer_found(PeerFound(NODE_B, ("127.0.0.1",), 7411))
        async with asyncio.timeout(5):
            assert await seen.get() == NODE_B
        sched.peer_lost(NODE_B)
        assert len(sched.table) == 0


async def test_an_append_triggers_a_sync(tmp_path: Path) -> None:
    line = tmp_path / "ledger.db"
    writer = await SqliteStore.open(line)
    await writer.append(make_entry("first"))
    syncs = 0

    async def sync_one(peer: PeerState) -> str:
        nonlocal syncs
        syncs += 1
        return "ok"

    sched = SyncScheduler(sync_one, policy=FAST)  # period of an hour: only a change can wake it
    sched.add_static(PeerAddress("127.0.0.1", 7411))
    watcher = LineWatcher([line, tmp_path / "absent.db"], interval=0.01)
    try:
        async with _running(sched, watcher):
            await _until(lambda: syncs == 1 and watcher.polls >= 1)  # the baseline is taken
            await writer.append(make_entry("second"))
            await _until(lambda: syncs == 2)
            await writer.append(make_entry("first"))  # already stored: no new entry, no sync
            seen = watcher.polls
            await _until(lambda: watcher.polls >= seen + 2)
            assert syncs == 2
            await writer.append(make_entry("third"))
            await _until(lambda: syncs == 3)
    finally:
        await writer.close()
    assert not (tmp_path / "absent.db").exists()  # the watcher never creates a line


async def test_cancellation_stops_sessions_and_table_is_persisted(tmp_path: Path) -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def sync_one(peer: PeerState) -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    def persist(rows: list[dict[str, object]]) -> None:
        save_peers_file(NodeHome(tmp_path), rows, pid=1, wall_now=0.0)

    sched = SyncScheduler(sync_one, policy=FAST, on_update=persist)
    sched.add_static(PeerAddress("127.0.0.1", 7411))
    async with _running(sched):
        async with asyncio.timeout(5):
            await started.wait()
        data = load_peers_file(NodeHome(tmp_path))
        assert data is not None and data["peers"][0]["syncing"] is True
    assert cancelled.is_set()
    assert data["peers"][0]["address"] == "127.0.0.1:7411"


async def test_watcher_follows_the_line_list_and_survives_a_bad_file(tmp_path: Path) -> None:
    watched: list[Path] = [tmp_path / "bad.db"]
    (tmp_path / "bad.db").write_bytes(b"this is not a database" * 100)
    changes = 0

    def changed() -> None:
        nonlocal changes
        changes += 1

    watcher = LineWatcher(lambda: watched, interval=0.01)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(watcher.run(changed))
        await _until(lambda: watcher.polls >= 1)  # the baseline, without later.db
        async with await SqliteStore.open(tmp_path / "later.db") as store:
            await store.append(make_entry("x"))
            watched.append(tmp_path / "later.db")  # shared while the node runs
            await _until(lambda: changes == 1)
            await store.append(make_entry("y"))
            await _until(lambda: changes == 2)
        task.cancel()


async def test_a_link_watched_both_ways_is_checked_by_one_end() -> None:
    """Both peers are watched live and take our rows over their calls to us: the one whose
    node id sorts before ours checks that link every period, so our next check waits the
    live period; the one after ours is ours to check every period; a peer whose call to us
    is not taking rows keeps the period whatever its id (decision 0093)."""
    policy = SchedulePolicy(period=60, live_period=300, period_jitter=0.0)
    clock = [1000.0]
    done: list[str] = []

    async def sync_one(peer: PeerState) -> str:
        done.append(peer.key)
        return "ok"

    sched = SyncScheduler(sync_one, policy=policy, clock=lambda: clock[0])
    own = "mmmm-mmmm-mmmm-mmmm-00"
    before, after, unwatched = "aaaa-aaaa-aaaa-aaaa-00", "zzzz-zzzz-zzzz-zzzz-00", NODE_B
    peers = {}
    for n, node in enumerate((before, after, unwatched)):
        found = PeerFound(node, (f"10.0.0.{n + 2}",), 7411)
        peers[node] = sched.peer_found(found).key
    sched.own_id = own
    sched.covered = lambda: {before, after}  # their calls to us take our rows
    sched.watched = lambda: set(peers.values())  # our calls to all three are open
    async with _running(sched):
        await _until(lambda: len(done) == 3)
        await _until(lambda: not any(p.in_flight for p in sched.table))
    due = {node: sched.table.get(key).next_attempt - clock[0] for node, key in peers.items()}
    assert due == {before: 300.0, after: 60.0, unwatched: 60.0}
    sched.own_id = None  # an insecure node has no id: every link keeps the period
    assert sched._checked_by_peer() == frozenset()
