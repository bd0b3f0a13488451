"""Real grpc.aio servers on 127.0.0.1 (port 0): convergence, refusals, misbehaving peers."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from lifeline.errors import ConfigError, PeerError
from lifeline_mesh.recon.frames import EndOfTurn, Hello, Items
from lifeline_mesh.recon.session import SessionLimits
from lifeline_mesh.transport.client import sync_line
from lifeline_mesh.transport.errors import Refused
from lifeline_mesh.wire.codec import encode
from tests.support.recon_helpers import chain
from tests.support.sync_helpers import history, make_node, raw_session, serving, write

BASE = chain(200, "base", body="b" * 300)


async def test_two_nodes_converge(tmp_path: Path) -> None:
    a, b = make_node(tmp_path / "a"), make_node(tmp_path / "b")
    await write(a, BASE + chain(30, "a", BASE[-1].id))
    await write(b, BASE[:150] + chain(20, "b", BASE[149].id))
    async with serving(b) as (server, address):
        [report] = await a.sync(address, ["ledger"])
        assert report.entries_sent == 80 and report.entries_received == 20
        assert report.entries_added == 20 and report.round_trips <= 4
        [again] = await a.sync(address, ["ledger"])
    assert again.round_trips == 1 and again.entries_sent == again.entries_received == 0
    # three sets (attestations, statements, entries), the opening in the hello: DESIGN §10
    assert again.bytes_sent < 200 and again.bytes_received < 200
    assert await history(a) == await history(b)
    assert len(await history(a)) == 250
    assert server.failures == []


async def test_chain_and_triangle_converge(tmp_path: Path) -> None:
    nodes = [make_node(tmp_path / n) for n in "abc"]
    for k, node in enumerate(nodes):
        await write(node, BASE[:50] + chain(10 + k, f"n{k}", BASE[49].id))
    async with serving(nodes[1]) as (_, b_addr), serving(nodes[2]) as (_, c_addr):
        # chain a - b - c: a only knows b, b only knows c
        await nodes[0].sync(b_addr, ["ledger"])
        await nodes[1].sync(c_addr, ["ledger"])
        await nodes[0].sync(b_addr, ["ledger"])
        views = [await history(n) for n in nodes]
        assert views[0] == views[1] == views[2] and len(views[0]) == 50 + 10 + 11 + 12
        # triangle: everyone writes again, each pair syncs once
        for k, node in enumerate(nodes):
            await write(node, chain(5, f"t{k}"))
        await nodes[0].sync(b_addr, ["ledger"])
        await nodes[0].sync(c_addr, ["ledger"])
        await nodes[1].sync(c_addr, ["ledger"])
        await nodes[0].sync(b_addr, ["ledger"])
    views = [await history(n) for n in nodes]
    assert views[0] == views[1] == views[2] and len(views[0]) == 83 + 15


async def test_concurrent_appends_during_sync_are_not_lost(tmp_path: Path) -> None:
    a, b = make_node(tmp_path / "a"), make_node(tmp_path / "b")
    await write(a, chain(1500, "bulk", body="c" * 500))
    extra_a, extra_b = chain(40, "late-a"), chain(40, "late-b")

    async def trickle() -> None:
        for ea, eb in zip(extra_a, extra_b, strict=True):
            await write(a, [ea])
            await write(b, [eb])
            await asyncio.sleep(0)

    async with serving(b) as (_, address):
        await asyncio.gather(a.sync(address, ["ledger"]), trickle())
        await a.sync(address, ["ledger"])
    ha, hb = await history(a), await history(b)
    assert ha == hb and len(ha) == 1580


async def test_unshared_lines_are_never_offered_or_accepted(tmp_path: Path) -> None:
    a = make_node(tmp_path / "a")
    b = make_node(tmp_path / "b", shared=())
    await write(a, BASE[:10])
    await write(b, chain(10, "private"))
    async with serving(b) as (server, address):
        with pytest.raises(Refused, match="not shared by the node serving there"):
            await a.sync(address, ["ledger"])
        assert "not shared" in server.failures[0]
        a_private = make_node(tmp_path / "a", shared=())
        with pytest.raises(Refused, match="lifeline-mesh share ledger"):
            await a_private.sync(address, ["ledger"])
    assert len(await history(b)) == 10 and len(await history(a)) == 10


def _frame(frame: object) -> bytes:
    return encode(frame).SerializeToString()  # type: ignore[arg-type]


async def _still_serves(a_root: Path, address: str) -> None:
    node = make_node(a_root)
    await write(node, BASE[:5])
    [report] = await node.sync(address, ["ledger"])
    assert report.round_trips >= 1


async def test_misbehaving_peers_are_refused_and_the_node_keeps_serving(tmp_path: Path) -> None:
    # the protocol's default frame limit (a node's own sessions allow 8 MiB): the cap is
    # enforced the same way at any size, by the gRPC options derived from it; no
    # inadmissible item let through (a node refuses up to max_refused one by one and
    # stores the rest: tests/sync/test_refused_items.py)
    limits = SessionLimits(max_frame_bytes=1 << 20, max_refused=0)
    b = make_node(tmp_path / "b", limits=limits)
    hello = _frame(Hello(1, "ledger", ("entries",), (), 1 << 20, 10**6))
    tampered = BASE[0].to_json().replace(b"base-0", b"evil-0")
    async with serving(b) as (server, address):
        got, code = await raw_session(address, [hello, _frame(Items(0, (tampered,)))])
        abort = got[-1]
        assert "does not match its content" in abort.reason  # type: ignore[attr-defined]
        nested = b'{"body":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        got, code = await raw_session(address, [hello, _frame(Items(0, (nested,)))])
        assert "nests too deeply" in got[-1].reason  # type: ignore[attr-defined]
        got, code = await raw_session(address, [b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"])
        assert code is grpc.StatusCode.INVALID_ARGUMENT
        assert "not a valid protobuf Frame" in server.failures[-1]
        huge = _frame(Items(0, (b"x" * (2 << 20),)))
        got, code = await raw_session(address, [hello, huge, _frame(EndOfTurn())])
        # refused by gRPC before the session reads it; the sender sees RESOURCE_EXHAUSTED
        # if its frame went out whole before the refusal came back, else its stream is
        # reset (INTERNAL): on a loaded machine either (docs/protocol.md)
        assert code in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INTERNAL), code
        await _still_serves(tmp_path / "a", address)
    assert await history(b) == [e.to_dict() for e in BASE[:5]]


async def test_an_item_over_the_peers_frame_cap_is_refused_by_name(tmp_path: Path) -> None:
    a, b = make_node(tmp_path / "a"), make_node(tmp_path / "b")
    await write(b, chain(3, "big", body="q" * 60_000))
    small = SessionLimits(max_frame_bytes=4096)
    async with serving(b) as (_, address), a.open_line("ledger") as store:
        from lifeline_mesh.sync.entry_set import EntrySet

        with pytest.raises(PeerError, match="cap max_frame_bytes"):
            await sync_line(address, "ledger", [EntrySet(store)], limits=small)


async def test_non_loopback_without_tls_is_refused(tmp_path: Path) -> None:
    node = make_node(tmp_path / "a")
    with pytest.raises(ConfigError, match="not a loopback address"):
        await node.sync("192.0.2.1:7420", ["ledger"])
    with pytest.raises(ConfigError, match="not a loopback address"):
        await node.server().start("0.0.0.0:0")
    with pytest.raises(ConfigError, match="HOST:PORT"):
        await node.sync("nonsense", ["ledger"])


async def test_unreachable_peer_is_a_peer_error(tmp_path: Path) -> None:
    node = make_node(tmp_path / "a")
    async with serving(make_node(tmp_path / "b")) as (server, address):
        pass  # started and stopped: the port is now closed
    with pytest.raises(PeerError, match="unavailable"):
        await node.sync(address, ["ledger"])
    assert server.reports == []


async def test_cross_line_parents_travel_with_their_declaration(tmp_path: Path) -> None:
    a, b = make_node(tmp_path / "a"), make_node(tmp_path / "b")
    [foreign] = chain(1, "in-other-line")
    await write(a, [foreign], line="other")  # "other" is private: never synced
    [child] = chain(1, "child", foreign.id)
    async with a.open_line("ledger") as store:
        await store.declare_external(foreign.id, "other")
        await store.append_many([child, *chain(3, "plain")])
    async with serving(b) as (_, address):
        [report] = await a.sync(address, ["ledger"])
    assert report.entries_sent == 4
    async with b.open_line("ledger") as store:
        assert await store.externals() == {foreign.id: "other"}
        assert (await store.get(child.id)).parents == (foreign.id,)
    assert not (tmp_path / "b" / ".lifeline" / "other.db").exists()


async def test_session_clock_works_on_a_machine_up_for_days(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Regression: the responder once started its session at t=0 while the driver fed it
    # time.monotonic(), so on a machine up for more than an hour every session "timed out".
    import time

    real = time.monotonic
    monkeypatch.setattr(time, "monotonic", lambda: real() + 5 * 86_400)
    a, b = make_node(tmp_path / "a"), make_node(tmp_path / "b")
    await write(a, chain(3, "a"))
    async with serving(b) as (_, address):
        await a.sync(address, ["ledger"])
    assert await history(a) == await history(b)
