"""Peering as serve runs it: options from args + config, and two nodes on loopback finding
and syncing with each other (sync_one injected; the wire protocol is tested elsewhere)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from lifeline.errors import ConfigError, PeerError
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.config import NodeConfig
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.peering.schedule import SchedulePolicy
from lifeline_mesh.peering.service import (
    Peering,
    PeeringOptions,
    add_peering_arguments,
    peering_options,
)
from lifeline_mesh.peering.table import PeerAddress, PeerState, load_peers_file
from tests.support.entries import make_entry
from tests.support.netns import (
    other_mdns_sockets,
    own_netns,  # noqa: F401  (the fixture)
)


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_peering_arguments(parser)
    return parser.parse_args(list(argv))


def test_options_merge_config_and_command_line() -> None:
    config = NodeConfig(peers=["10.0.0.2:7411", "10.0.0.3:7411"])
    opts = peering_options(
        _args("--peer", "10.0.0.3:7411", "--peer", "[::1]:9"), config, listen_host="127.0.0.1"
    )
    assert [str(p) for p in opts.static_peers] == ["10.0.0.2:7411", "10.0.0.3:7411", "[::1]:9"]
    assert opts.discovery and opts.interfaces == ["127.0.0.1"]
    opts = peering_options(_args("--no-discovery"), config, listen_host="0.0.0.0")
    assert not opts.discovery and opts.interfaces == []
    opts = peering_options(
        _args("--interface", "10.0.0.1", "--interface", "10.1.0.1"), config, listen_host="0.0.0.0"
    )
    assert opts.interfaces == ["10.0.0.1", "10.1.0.1"]
    assert peering_options(_args(), config, listen_host="localhost").interfaces == ["127.0.0.1"]


@pytest.mark.parametrize(
    ("argv", "listen", "message"),
    [
        ((), "0.0.0.0", "name the one"),
        (("--interface", "0.0.0.0"), "0.0.0.0", "means every interface"),
        (("--interface", "eth0"), "127.0.0.1", "is not an IP address"),
        (("--peer", "nowhere"), "127.0.0.1", "'nowhere' is not HOST:PORT"),
    ],
)
def test_options_errors_name_the_value(argv: tuple[str, ...], listen: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        peering_options(_args(*argv), NodeConfig(), listen_host=listen)


class _Node:
    """One Peering with a recording sync_one, on a real line file."""

    def __init__(self, root: Path, mesh: str, port: int, options: PeeringOptions) -> None:
        self.root = root
        self.node_id = NodeIdentity.generate().node_id
        self.synced: asyncio.Queue[PeerState] = asyncio.Queue()
        self.line = NodeHome(root).line_path("ledger")
        self.peering = Peering(
            NodeHome(root),
            options,
            self._sync_one,
            node_id=self.node_id,
            mesh_id=mesh,
            port=port,
            line_files=[self.line],
        )

    async def _sync_one(self, peer: PeerState) -> str:
        await self.synced.put(peer)
        return "ok"

    async def next_sync(self) -> PeerState:
        async with asyncio.timeout(15):
            return await self.synced.get()


@contextlib.asynccontextmanager
async def _serving(node: _Node) -> AsyncIterator[_Node]:
    node.line.parent.mkdir(parents=True, exist_ok=True)
    ready = asyncio.Event()

    async def main() -> None:
        async with asyncio.TaskGroup() as tg:
            await node.peering.start(tg)
            ready.set()

    task = asyncio.create_task(main())
    try:
        async with asyncio.timeout(15):
            await ready.wait()
        yield node
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


# The tests with discovery run each in a network namespace of its own (port 5353 on its loopback
# is theirs alone); a mesh name unique to this run all the same.
MESH = f"mesh-x-{secrets.token_hex(4)}"
FAST = SchedulePolicy(period=3600, backoff_base=0.05, backoff_max=0.1)


@pytest.mark.netns
@pytest.mark.usefixtures("own_netns")
async def test_two_nodes_discover_each_other_sync_and_notice_leaving(tmp_path: Path) -> None:
    opts = PeeringOptions(interfaces=["127.0.0.1"], policy=FAST, watch_interval=0.02)
    a = _Node(tmp_path / "a", MESH, 7101, opts)
    b = _Node(tmp_path / "b", MESH, 7102, opts)
    async with _serving(a):
        async with _serving(b):
            assert (await a.next_sync()).node_id == b.node_id
            peer = await b.next_sync()
            assert (peer.node_id, str(peer.address)) == (a.node_id, "127.0.0.1:7101")
            # An append on b makes b sync with a again, with no command.
            async with await SqliteStore.open(b.line) as store:
                await store.append(make_entry("new on b"))
            assert (await b.next_sync()).node_id == a.node_id
        async with asyncio.timeout(15):
            while len(a.peering.scheduler.table):  # b said goodbye
                await asyncio.sleep(0.01)
        data = load_peers_file(NodeHome(a.root))
        assert data is not None and data["peers"] == []


async def test_static_peers_without_discovery(tmp_path: Path) -> None:
    opts = PeeringOptions(
        static_peers=[PeerAddress("127.0.0.1", 7999)], discovery=False, policy=FAST
    )
    node = _Node(tmp_path, MESH, 7201, opts)
    async with _serving(node):
        peer = await node.next_sync()
        assert str(peer.address) == "127.0.0.1:7999"
        assert node.peering.discovery is None
    data = load_peers_file(NodeHome(tmp_path))
    assert data is not None and data["peers"][0]["address"] == "127.0.0.1:7999"


async def test_without_a_mesh_discovery_stays_off_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    opts = PeeringOptions(
        static_peers=[PeerAddress("127.0.0.1", 7999)], interfaces=["127.0.0.1"], policy=FAST
    )
    node = _Node(tmp_path, "", 7301, opts)
    node.peering.mesh_id = None
    async with _serving(node):
        assert str((await node.next_sync()).address) == "127.0.0.1:7999"
    assert node.peering.discovery is None
    assert "LAN discovery is off: this node is in no mesh" in caplog.text


async def test_run_until_stop_cancels_everything(tmp_path: Path) -> None:
    cancelled = asyncio.Event()
    calls = 0

    async def sync_one(peer: PeerState) -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            return "ok"
        try:  # the second session (after a local change) hangs until the stop
            await asyncio.Event().wait()
        finally:
            cancelled.set()
        return "never"

    opts = PeeringOptions(
        static_peers=[PeerAddress("127.0.0.1", 7999)],
        discovery=False,
        policy=FAST,
        watch_interval=0.01,
    )
    line = NodeHome(tmp_path).line_path("ledger")
    line.parent.mkdir(parents=True)
    peering = Peering(
        NodeHome(tmp_path), opts, sync_one, node_id="n", mesh_id=None, port=1, line_files=[line]
    )
    stop = asyncio.Event()
    async with asyncio.timeout(10), asyncio.TaskGroup() as tg:
        runner = tg.create_task(peering.run_until(stop))
        async with await SqliteStore.open(line) as store:
            for n in itertools.count():  # new entries until one lands after the baseline
                if calls >= 2:
                    break
                await store.append(make_entry(f"entry {n}"))
                await asyncio.sleep(0.02)
        stop.set()
    assert runner.result() is None and cancelled.is_set()


@pytest.mark.netns
@pytest.mark.usefixtures("own_netns")
async def test_run_until_raises_a_start_failure_as_itself(tmp_path: Path) -> None:
    opts = PeeringOptions(interfaces=["127.0.0.1"], policy=FAST)
    first = _Node(tmp_path / "a", MESH, 7401, opts)
    second = _Node(tmp_path / "b", MESH, 7402, opts)
    second.peering.node_id = first.node_id  # the same node started twice
    # Other mDNS processes hold 127.0.0.1:5353 as well: the conflict is seen all the same.
    with other_mdns_sockets("127.0.0.1", 8):
        async with _serving(first):
            stop = asyncio.Event()
            runner = asyncio.create_task(second.peering.run_until(stop))
            # What we wait for is the start: a refused advert ends run_until within the probing
            # (about a second); an accepted one leaves it running until stop, which we then set.
            done, _ = await asyncio.wait([runner], timeout=10)
            if not done:
                stop.set()
                await runner
                pytest.fail("the same node started twice: its second start did not fail in 10 s")
            with pytest.raises(PeerError, match="already announces"):
                runner.result()
