"""KeepAlive frames: a peer busy longer than the idle timeout (a snapshot of a large line, a
batch being stored) is not taken for a dead one, when both sides speak ``keep-alive``.

Real gRPC servers on 127.0.0.1; the idle timeout and the keep-alive period are shrunk, and
every snapshot is made slower than the idle timeout.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from lifeline.errors import PeerError
from lifeline_mesh.node.root import NODE_LIMITS, Node
from lifeline_mesh.notary.notarized_set import NotarizedEntrySet
from lifeline_mesh.recon.entry_codec import EntryCodec
from lifeline_mesh.recon.frames import Hello, KeepAlive, LoadSummary, SendFrame
from lifeline_mesh.recon.session import Role, Session
from lifeline_mesh.recon.session_state import KEEP_ALIVE_CAPABILITY
from lifeline_mesh.sync import driver
from lifeline_mesh.sync.entry_set import EntrySet
from lifeline_mesh.sync.snapshot_cache import SnapshotCache
from lifeline_mesh.wire.codec import decode_bytes, encode
from tests.support.recon_helpers import chain
from tests.support.sync_helpers import history, make_node, serving, write

BUSY = 1.5  # seconds a serving node's snapshot takes here: longer than the idle timeout


@pytest.fixture
def slow_snapshots(monkeypatch: pytest.MonkeyPatch) -> Callable[[Node], Node]:
    """Shrinks the timeouts; the node passed to the returned function builds its entry
    snapshots ``BUSY`` seconds slower (its sets are told apart by its snapshot cache)."""
    monkeypatch.setattr(driver, "IDLE_TIMEOUT", 0.6)
    monkeypatch.setattr(driver, "KEEP_ALIVE_EVERY", 0.1)
    built = EntrySet.snapshot
    slow_caches: list[SnapshotCache] = []

    async def slow(self: EntrySet):  # type: ignore[no-untyped-def]
        if any(self.snapshots.cache is c for c in slow_caches):
            await asyncio.sleep(BUSY)
        return await built(self)

    monkeypatch.setattr(EntrySet, "snapshot", slow)

    def make_slow(node: Node) -> Node:
        slow_caches.append(node.snapshots)
        return node

    return make_slow


def test_a_keep_alive_crosses_the_wire_and_the_session_ignores_it_in_any_phase() -> None:
    assert isinstance(decode_bytes(encode(KeepAlive()).SerializeToString()), KeepAlive)
    s = Session(Role.RESPONDER, "ledger", [("entries", EntryCodec())], 0.0)
    s.start(0.0)
    assert s.receive(KeepAlive(), 0.1) == []  # before the hello
    assert s.receive(Hello(1, "ledger", ("entries",), (), 1 << 20, 10**6), 0.2) == [LoadSummary(0)]
    assert s.receive(KeepAlive(), 0.3) == []  # while this side reads its summary
    effects = s.summary_loaded(0, None, 0.4)
    assert s.receive(KeepAlive(), 0.5) == []  # while this side works on its turn
    assert not s.finished
    [hello, *_] = [e.frame for e in effects if isinstance(e, SendFrame)]
    assert isinstance(hello, Hello) and KEEP_ALIVE_CAPABILITY in hello.capabilities


@pytest.mark.serial  # wall-clock bounds: a loaded machine's stalls would pass for silence
async def test_a_peer_busier_than_the_idle_timeout_keeps_the_session_alive(
    tmp_path: Path, slow_snapshots: Callable[[Node], Node]
) -> None:
    a, b = make_node(tmp_path / "a"), slow_snapshots(make_node(tmp_path / "b"))
    await write(a, chain(40, "a"))
    await write(b, chain(30, "b"))
    async with serving(b) as (server, address):
        [report] = await a.sync(address, ["ledger"])
    assert report.entries_sent == 40 and report.entries_received == 30
    assert report.seconds > BUSY  # both sides waited longer than the idle timeout
    assert await history(a) == await history(b)
    assert server.failures == []


@pytest.mark.serial
async def test_without_the_capability_no_keep_alive_is_sent_and_the_wait_times_out(
    tmp_path: Path, slow_snapshots: Callable[[Node], Node]
) -> None:
    """A caller from before keep-alives (its hello does not list it) gets none: its busy
    peer stays silent and the idle timeout ends the session, as it did before."""
    older = dataclasses.replace(NODE_LIMITS, keep_alive=False)
    a, b = make_node(tmp_path / "a", limits=older), slow_snapshots(make_node(tmp_path / "b"))
    await write(a, chain(40, "a"))
    await write(b, chain(30, "b"))
    async with serving(b) as (_, address):
        with pytest.raises(PeerError, match="sent nothing for 1s"):
            await a.sync(address, ["ledger"])


@pytest.mark.serial
async def test_a_backlog_of_received_batches_stored_slowly_keeps_the_session_alive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node pulling a line stores each batch in less than the keep-alive period, but the
    batches still in hand after the transfer take longer than the peer's idle timeout: the
    peer, waiting for the turn, hears keep-alives meanwhile (before, nothing went out
    between the short stores, and it gave up, as at 1M entries on a loaded machine)."""
    monkeypatch.setattr(driver, "IDLE_TIMEOUT", 1.0)
    monkeypatch.setattr(driver, "KEEP_ALIVE_EVERY", 0.4)
    small = dataclasses.replace(NODE_LIMITS, fetch_chunk=10)
    a, b = make_node(tmp_path / "a", limits=small), make_node(tmp_path / "b", limits=small)
    await write(b, chain(120, "b"))
    admit = NotarizedEntrySet.admit
    slow = a.snapshots

    async def slowly(self: NotarizedEntrySet, *args):  # type: ignore[no-untyped-def]
        if self.inner.snapshots.cache is slow:
            await asyncio.sleep(0.25)
        return await admit(self, *args)

    monkeypatch.setattr(NotarizedEntrySet, "admit", slowly)
    async with serving(b) as (server, address):
        [report] = await a.sync(address, ["ledger"])
    assert report.entries_received == 120
    assert report.seconds > 2.5  # twelve batches stored one after another
    assert await history(a) == await history(b)
    assert server.failures == []
