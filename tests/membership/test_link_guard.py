"""The guard of a dialed link (lifeline_mesh/node/link_guard.py, decision 0138): the node
serving at the address is checked against the revocations known now and against the
expiry of the certificate it served with, and a link it refuses is cut: its pooled
channel closed, its pin forgotten. Its end to end effect, with real `serve` nodes, is in
tests/membership/test_revoked_live_link.py."""

from __future__ import annotations

import asyncio
import datetime as dt
import shutil
from pathlib import Path

import grpc
import pytest

from lifeline.errors import PeerError, PermissionDenied
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.certs import CertIdentity
from lifeline_mesh.node.link_guard import LinkGuard
from lifeline_mesh.node.security import PeerPins
from lifeline_mesh.transport.authz import MeshRole
from lifeline_mesh.transport.pool import ChannelPool
from tests.support.mesh_procs import cli, free_port, join_mesh, shared_node

EXPIRES = dt.datetime(2026, 12, 6, 18, 0, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def mesh_made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A CA holder's root and a member's node id, made once for the module."""
    a, b = (tmp_path_factory.mktemp("guard") / n for n in "ab")
    for root in (a, b):
        shared_node(root)
    join_mesh(a, [b])
    return a, cli("lifeline_mesh", b, "id").stdout.strip()


@pytest.fixture
def mesh(mesh_made: tuple[Path, str], tmp_path: Path) -> tuple[NodeHome, str]:
    """A copy of the CA holder's home for this test (a root holds no absolute path), and
    the member's node id."""
    made, node_id = mesh_made
    shutil.copytree(made, tmp_path / "a")
    return NodeHome(tmp_path / "a"), node_id


def _pinned(home: NodeHome, address: str, node_id: str) -> PeerPins:
    pins = PeerPins(home)
    pins.known[address] = node_id
    pins.served[node_id] = CertIdentity(node_id, "m", MeshRole.MEMBER, expires=EXPIRES)
    return pins


def test_a_guard_refuses_an_expired_served_certificate(mesh: tuple[NodeHome, str]) -> None:
    home, node_id = mesh
    now = [EXPIRES - dt.timedelta(seconds=1)]
    pins = _pinned(home, "127.0.0.1:1", node_id)

    async def pull(_: grpc.aio.Channel) -> None:
        return None

    guard = LinkGuard(home, pins, ChannelPool(), "127.0.0.1:1", pull, clock=lambda: now[0])
    assert guard.refused() is None
    now[0] = EXPIRES  # not valid after: its last second is the one before
    assert guard.refused() == (
        f"node {node_id} at 127.0.0.1:1 served with a certificate that expired at "
        "2026-12-06T18:00:00Z; it must renew it (`lifeline-mesh join` again) before it is "
        "synced with"
    )
    pins.known.clear()  # not pinned yet: the next dial checks it
    assert guard.refused() is None


def test_a_guard_cuts_the_link_once_the_node_is_revoked(mesh: tuple[NodeHome, str]) -> None:
    home, node_id = mesh
    address = f"127.0.0.1:{free_port()}"
    pins = _pinned(home, address, node_id)
    pins.served.clear()  # no expiry known: only the revocation can refuse it
    pulls: list[int] = []

    async def pull(_: grpc.aio.Channel) -> None:
        pulls.append(1)
        if len(pulls) == 1:  # a peer that does not answer: asked again next time
            raise PeerError("no answer")
        if len(pulls) == 3:
            cli("lifeline_mesh", home.root, "revoke", node_id, "--reason", "test")

    async def run() -> tuple[LinkGuard, grpc.aio.Channel, grpc.ChannelConnectivity]:
        pool = ChannelPool()
        guard = LinkGuard(home, pins, pool, address, pull, every=0.05)
        async with pool.lease(address, None) as channel:
            guard.start(channel)
            for _ in range(400):
                await asyncio.sleep(0.05)
                if guard.reason is not None:
                    break
            await asyncio.sleep(0.1)  # the cut closes the channel
            state = channel.get_state()
            guard.stop()
        return guard, channel, state

    guard, _, state = asyncio.run(run())
    assert len(pulls) == 3  # the lists asked every time, the failed ask too; then no more
    assert guard.reason is not None and f"served by node {node_id}, revoked at" in guard.reason
    assert state is grpc.ChannelConnectivity.SHUTDOWN
    assert address not in pins.known  # the next dial asks who serves there again
    with pytest.raises(PermissionDenied, match="revoked at"):
        guard.raise_if_cut()


def test_a_peer_that_stalls_its_answer_does_not_hold_off_its_own_check(
    mesh: tuple[NodeHome, str],
) -> None:
    """Revoked as another link told: cut at the next tick, before asking the peer (which
    here would never answer)."""
    home, node_id = mesh
    address = f"127.0.0.1:{free_port()}"
    pins = _pinned(home, address, node_id)
    pins.served.clear()
    cli("lifeline_mesh", home.root, "revoke", node_id, "--reason", "test")
    asked: list[int] = []

    async def stalls(_: grpc.aio.Channel) -> None:
        asked.append(1)
        await asyncio.sleep(3600)

    async def run() -> LinkGuard:
        pool = ChannelPool()
        guard = LinkGuard(home, pins, pool, address, stalls, every=0.05)
        async with pool.lease(address, None) as channel:
            guard.start(channel)
            async with asyncio.timeout(10):
                while guard.reason is None:
                    await asyncio.sleep(0.02)
            guard.stop()
        return guard

    guard = asyncio.run(run())
    assert asked == [] and guard.reason is not None and "revoked at" in guard.reason
