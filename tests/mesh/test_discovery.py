"""Discovery: TXT parsing and admission (pure), then real zeroconf instances on loopback,
each test in a network namespace of its own (no other mDNS process or interface in sight)."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import secrets
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from zeroconf import IPVersion
from zeroconf._dns import DNSPointer
from zeroconf._protocol.outgoing import DNSOutgoing
from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf
from zeroconf.const import _CLASS_IN, _FLAGS_AA, _FLAGS_QR_RESPONSE, _TYPE_PTR

from lifeline.errors import ConfigError, PeerError
from lifeline_mesh.discovery.advert import (
    PROTOCOL_VERSION,
    SERVICE_TYPE,
    Advert,
    AdvertRejected,
    PeerFound,
    PeerLost,
    admit,
    instance_name,
    parse_txt,
)
from lifeline_mesh.discovery.zeroconf import PeerEvent, ZeroconfDiscovery, check_interfaces
from lifeline_mesh.home.identity import NodeIdentity
from tests.support.forged_adverts import flood_packets, made_up_node_ids, pointer_packets, send
from tests.support.mesh_procs import first_line
from tests.support.netns import (
    netns_unavailable,
    other_mdns_sockets,
    own_netns,  # noqa: F401  (the fixture)
    two_hosts,
)

LOOPBACK = "127.0.0.1"
# Mesh names unique to this run: a test that someday runs outside its own namespace must not
# take another run's adverts for ours.
RUN = secrets.token_hex(4)
MESH_A, MESH_B = f"mesh-a-{RUN}", f"mesh-b-{RUN}"


def _node() -> str:
    return NodeIdentity.generate().node_id


# -- pure: TXT records and admission -----------------------------------------------


def test_txt_round_trip() -> None:
    node = _node()
    advert = Advert(node, "mesh-1", 7000, ("10.0.0.2",))
    props = {k.encode(): v.encode() for k, v in advert.txt().items()}
    assert parse_txt(props, port=7000, addresses=("10.0.0.2",)) == advert


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"txtvers": None}, "missing"),
        ({"txtvers": b"9"}, "layout version"),
        ({"node": b"not-a-node"}, "not a node id"),
        ({"node": b"\xff\xfe"}, "not UTF-8"),
        ({"mesh": b"bad mesh id with spaces"}, "mesh id"),
        ({"mesh": b"x" * 300}, "over 255"),
        ({"proto": b"one"}, "not a number"),
        ({"proto": "²".encode()}, "not a number"),  # str.isdigit() alone accepts it
    ],
)
def test_malformed_txt_is_rejected_with_a_reason(
    change: dict[str, bytes | None], reason: str
) -> None:
    props: dict[bytes, bytes | None] = {
        k.encode(): v.encode() for k, v in Advert(_node(), "m", 1).txt().items()
    }
    for key, value in change.items():
        if value is None:
            del props[key.encode()]
        else:
            props[key.encode()] = value
    with pytest.raises(AdvertRejected, match=reason):
        parse_txt(props, port=7000, addresses=("10.0.0.2",))


TXT_KEYS = st.sampled_from([b"txtvers", b"node", b"mesh", b"proto", b"other"])
VALID_NODE = NodeIdentity.generate().node_id.encode()
TXT_VALUES = (
    st.none()
    | st.binary(max_size=300)
    | st.sampled_from([b"1", b"2", VALID_NODE, VALID_NODE.upper(), b"mesh-a", b"", b"x y"])
)


@given(
    props=st.dictionaries(TXT_KEYS, TXT_VALUES),
    port=st.none() | st.integers(-10, 70000),
    addresses=st.lists(st.sampled_from(["10.0.0.2", "::1"]), max_size=2),
)
def test_any_txt_record_parses_or_is_rejected_never_crashes(
    props: dict[bytes, bytes | None], port: int | None, addresses: list[str]
) -> None:
    try:
        advert = parse_txt(props, port=port, addresses=tuple(addresses))
    except AdvertRejected:
        return
    assert advert.txt()["node"] == advert.node_id and advert.port == port


def test_missing_port_or_address_is_rejected() -> None:
    props = {k.encode(): v.encode() for k, v in Advert(_node(), "m", 1).txt().items()}
    with pytest.raises(AdvertRejected, match="port"):
        parse_txt(props, port=0, addresses=("10.0.0.2",))
    with pytest.raises(AdvertRejected, match="no address"):
        parse_txt(props, port=7000, addresses=())


def test_admission_rules() -> None:
    me, other = _node(), _node()
    ok = Advert(other, "m", 7000, ("10.0.0.2",))
    assert admit(ok, mesh_id="m", own_node_id=me) == ok
    with pytest.raises(AdvertRejected, match="own advert"):
        admit(ok, mesh_id="m", own_node_id=other)
    with pytest.raises(AdvertRejected, match="belongs to mesh 'm'"):
        admit(ok, mesh_id="other-mesh", own_node_id=me)
    with pytest.raises(AdvertRejected, match="protocol"):
        admit(
            Advert(other, "m", 7000, ("10.0.0.2",), PROTOCOL_VERSION + 1),
            mesh_id="m",
            own_node_id=me,
        )
    with pytest.raises(AdvertRejected, match="allow-list"):
        admit(ok, mesh_id="m", own_node_id=me, allow=lambda node: node != other)


@pytest.mark.parametrize("bad", [[], ["0.0.0.0"], ["::"], ["eth0"], ["192.168.1.300"]])
def test_interfaces_are_always_named(bad: list[str]) -> None:
    with pytest.raises(ConfigError):
        check_interfaces(bad)
    assert check_interfaces([" 127.0.0.1 ", "::1"]) == ["127.0.0.1", "::1"]


# -- real zeroconf on loopback -----------------------------------------------------


def _disc(mesh: str, port: int, *, node: str | None = None, **kw: Any) -> ZeroconfDiscovery:
    return ZeroconfDiscovery(
        node_id=node or _node(), mesh_id=mesh, port=port, interfaces=[LOOPBACK], **kw
    )


@asynccontextmanager
async def _running(*fleet: ZeroconfDiscovery) -> AsyncIterator[None]:
    """Start several nodes at once (each mDNS probe takes ~1.5 s), run them, stop them."""
    await asyncio.gather(*(d.start() for d in fleet))
    try:
        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(d.run()) for d in fleet]
            try:
                yield
            finally:
                for task in tasks:
                    task.cancel()
    finally:
        await asyncio.gather(*(d.stop() for d in fleet))


async def _next(queue: asyncio.Queue[PeerEvent], timeout: float = 15) -> PeerEvent:
    async with asyncio.timeout(timeout):
        return await queue.get()


@pytest.mark.netns
@pytest.mark.usefixtures("own_netns")
async def test_two_nodes_find_each_other_and_ignore_other_meshes() -> None:
    a, stranger, b = _disc(MESH_A, 7001), _disc(MESH_B, 7003), _disc(MESH_A, 7002)
    async with _running(a, stranger):
        async with _running(b):
            found_by_b = await _next(b.events)
            found_by_a = await _next(a.events)
            assert found_by_b == PeerFound(a.advert.node_id, (LOOPBACK,), 7001)
            assert found_by_a == PeerFound(b.advert.node_id, (LOOPBACK,), 7002)
        # b said goodbye on stop: a hears it; the other mesh's node never appeared.
        assert await _next(a.events) == PeerLost(b.advert.node_id)
        assert a.events.empty()
        assert stranger.events.empty()


@pytest.mark.netns
@pytest.mark.usefixtures("own_netns")
async def test_malformed_adverts_are_ignored_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="lifeline_mesh.discovery")
    bad_node = _node()
    raw = AsyncZeroconf(interfaces=[LOOPBACK], ip_version=IPVersion.V4Only)
    bad = AsyncServiceInfo(
        SERVICE_TYPE,
        instance_name(bad_node),
        addresses=[ipaddress.ip_address(LOOPBACK).packed],
        port=7010,
        properties={"txtvers": "1", "node": bad_node, "mesh": MESH_A, "proto": "x"},
        server="bad.local.",
    )
    a, b = _disc(MESH_A, 7011), _disc(MESH_A, 7012)
    try:
        await (await raw.async_register_service(bad))
        async with _running(a, b):
            assert await _next(a.events) == PeerFound(b.advert.node_id, (LOOPBACK,), 7012)
            async with asyncio.timeout(15):
                while not any("not a number" in r.getMessage() for r in caplog.records):
                    await asyncio.sleep(0.05)
            assert a.events.empty()
    finally:
        await raw.async_close()


def _hostile_pointers(*names: str) -> None:
    """One mDNS answer, sent to the group from a plain socket as anyone on a LAN can:
    pointers of our service type to ``names``."""
    out = DNSOutgoing(_FLAGS_QR_RESPONSE | _FLAGS_AA)
    for name in names:
        out.add_answer_at_time(DNSPointer(SERVICE_TYPE, _TYPE_PTR, _CLASS_IN, 120, name), 0)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(LOOPBACK))
        for packet in out.packets():
            sock.sendto(packet, ("224.0.0.251", 5353))


@pytest.mark.netns
@pytest.mark.usefixtures("own_netns")
async def test_a_hostile_name_on_the_lan_ends_nothing() -> None:
    """A name with a control character made zeroconf raise in the lookup, out of the
    discovery loop, and ended every `serve` that heard it. Now such names are dropped
    and the node goes on finding its peers."""
    a, b = _disc(MESH_A, 7021), _disc(MESH_A, 7022)
    async with _running(a):
        hostile = ["a\x01." + SERVICE_TYPE, "\x1b[31mred\x1b[0m." + SERVICE_TYPE]
        for _ in range(3):
            _hostile_pointers(*hostile)
            await asyncio.sleep(0.3)
        async with _running(b):  # raises here if a's loop ended
            assert await _next(a.events) == PeerFound(b.advert.node_id, (LOOPBACK,), 7022)


@pytest.mark.netns
@pytest.mark.usefixtures("own_netns")
async def test_only_known_nodes_are_looked_up_and_one_known_later_is_found() -> None:
    """Anyone can make up node ids: 300 made-up nodes of our mesh (100 of them names that
    answer no lookup, 3 s each) are heard before a member, which is found all the same;
    none of them is looked up. A node heard before it was known is found once it is."""
    known: set[str] = set()
    watcher = _disc(MESH_A, 7040, known=known.__contains__, rescan_s=0.2)
    friend, later = _disc(MESH_A, 7041), _disc(MESH_A, 7042)
    known.add(friend.advert.node_id)
    async with _running(watcher):
        send(pointer_packets(made_up_node_ids(100)))
        send(flood_packets(made_up_node_ids(200), MESH_A, 7999, LOOPBACK))
        async with _running(friend, later):  # registering takes over a second: heard after
            found = await _next(watcher.events, timeout=10)
            assert found == PeerFound(friend.advert.node_id, (LOOPBACK,), 7041)
            known.add(later.advert.node_id)
            found = await _next(watcher.events, timeout=10)
            assert found == PeerFound(later.advert.node_id, (LOOPBACK,), 7042)
            assert watcher.events.empty()


@pytest.mark.netns
@pytest.mark.usefixtures("own_netns")
async def test_allow_list_filters_nodes() -> None:
    allowed = _node()
    watcher = _disc(MESH_A, 7020, allow=lambda node: node == allowed)
    async with _running(watcher):
        async with _running(_disc(MESH_A, 7021), _disc(MESH_A, 7022, node=allowed)):
            assert await _next(watcher.events) == PeerFound(allowed, (LOOPBACK,), 7022)
        assert await _next(watcher.events) == PeerLost(allowed)
        assert watcher.events.empty()


@pytest.mark.netns
@pytest.mark.usefixtures("own_netns")
async def test_the_same_node_announced_twice_is_a_clear_error() -> None:
    # Other mDNS processes on the host hold 127.0.0.1:5353 too (avahi, another node, another
    # run): a unicast answer to the second announcer's probe lands in one of their sockets.
    # The conflict must be seen anyway.
    with other_mdns_sockets(LOOPBACK, 8):
        first = _disc(MESH_A, 7030)
        async with _running(first):
            second = _disc(MESH_A, 7031, node=first.advert.node_id)
            async with asyncio.timeout(10):  # probing takes about a second
                with pytest.raises(PeerError, match="already announces node"):
                    await second.start()
            await second.stop()


# -- two hosts: network namespaces joined by a veth pair -----------------------------

ADVERTISER = """
import asyncio, sys
from lifeline_mesh.discovery.zeroconf import ZeroconfDiscovery

async def main() -> None:
    node, mesh, iface = sys.argv[1:4]
    async with ZeroconfDiscovery(node_id=node, mesh_id=mesh, port=7411, interfaces=[iface]):
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.read)  # until the test closes our stdin

asyncio.run(main())
"""


@pytest.mark.netns
@pytest.mark.slow
def test_discover_across_two_hosts(tmp_path: Path) -> None:
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    node = _node()
    with two_hosts() as (a, b):
        advertiser = subprocess.Popen(
            a.wrap([sys.executable, "-c", ADVERTISER, node, "mesh-lan", a.address]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            # registering takes about a second (probing)
            assert first_line(advertiser, 30, "the advertiser").strip() == "ready"
            argv = [sys.executable, "-m", "lifeline_mesh", "--root", str(tmp_path), "discover"]
            result = subprocess.run(
                b.wrap([*argv, "--interface", b.address, "--seconds", "2", "--json"]),
                capture_output=True,
                text=True,
                timeout=60,
            )
        finally:
            advertiser.communicate(timeout=30)
    assert result.returncode == 0, result.stderr
    nodes = json.loads(result.stdout)["nodes"]
    assert [(n["node_id"], n["mesh_id"], n["addresses"], n["port"]) for n in nodes] == [
        (node, "mesh-lan", [a.address], 7411)
    ]
