"""Watching back (decision 0066): a node that only its caller knows (`serve --peer A` on B)
is watched back by A over mutual TLS, so B's writes reach A as rows over A's Watch call —
no sync session from B for them — and A's reach B over B's call, as before. A node that
listens on loopback while its peer does not says it cannot be dialled back."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from lifeline_mesh.home.inbound import load_inbound
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.node.watch_back import WatchBack
from lifeline_mesh.peering.changes import ChangeFeed
from lifeline_mesh.peering.table import PeerAddress, PeerSource, PeerState, load_peers_file
from lifeline_mesh.transport.announce import ChangeItems, _dial_back
from tests.support.mesh_procs import (
    free_port,
    join_mesh,
    log_note,
    serve,
    shared_node,
    wait_for_entry,
)

pytestmark = [pytest.mark.slow]

LIVE_S = 20.0  # far below the periodic sync (60 s)


def _rows(root: Path) -> list[dict[str, object]]:
    data = load_peers_file(NodeHome(root))
    return list(data["peers"]) if data else []


def _wait(what: str, check: object, deadline_s: float = 60.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {deadline_s}s")


def _sessions_in(root: Path) -> int:
    return sum(int(r.get("sessions") or 0) for r in load_inbound(NodeHome(root)))


def test_the_dialled_node_watches_its_caller_back(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    join_mesh(a, [b])
    line_a, line_b = shared_node(a), shared_node(b)
    port = free_port()
    dial = ("--listen", "127.0.0.1:0", "--no-discovery", "--peer", f"127.0.0.1:{port}")
    with serve(a, "--listen", f"127.0.0.1:{port}", "--no-discovery"), serve(b, *dial):
        # A has no address for B but its call: it keeps B as a peer and watches it.
        _wait(
            "A watching B back",
            lambda: any(r["sources"] == ["watcher"] and r.get("watching") for r in _rows(a)),
        )
        _wait("B watching A", lambda: all(r.get("watching") for r in _rows(b)))
        # Both calls are open: the start's sessions are over once A holds what B has.
        settled = log_note(b, "settle")
        wait_for_entry(line_a, settled, deadline_s=LIVE_S)
        before = _sessions_in(a)
        for n in range(3):
            wait_for_entry(line_a, log_note(b, f"from b {n}"), deadline_s=LIVE_S)
            wait_for_entry(line_b, log_note(a, f"from a {n}"), deadline_s=LIVE_S)
        # B's writes travelled as rows over A's call: B dialed no session per write (one
        # may carry the state statements the writes made, which rows do not carry).
        assert _sessions_in(a) - before < 3


def test_dial_back_addresses() -> None:
    assert _dial_back("ipv4:10.1.2.3:51234", 7420) == "10.1.2.3:7420"
    assert _dial_back("ipv6:[fe80::1]:51234", 7420) == "[fe80::1]:7420"
    assert _dial_back("ipv4:10.1.2.3:51234", 0) is None  # it cannot be dialled
    assert _dial_back("unix:/tmp/sock", 7420) is None


def test_a_node_on_loopback_says_it_cannot_be_dialled_from_elsewhere() -> None:
    back = WatchBack(lambda: None)
    remote = PeerState("static:10.0.0.2:7420", PeerAddress("10.0.0.2", 7420), {PeerSource.STATIC})
    local = PeerState("static:127.0.0.1:7420", PeerAddress("127.0.0.1", 7420), {PeerSource.STATIC})
    assert back.serves_port(remote) == 0  # not serving yet
    back.listening = "127.0.0.1:7000"  # a CI runner: nobody else can reach it
    assert back.serves_port(remote) == 0
    assert back.serves_port(local) == 7000
    back.listening = "10.0.0.5:7000"
    assert back.serves_port(remote) == 7000


def test_rows_are_not_echoed_to_the_node_they_came_from() -> None:
    feed = ChangeFeed(lambda: ["ledger"])
    rows = ChangeItems("ledger", (b"att",), (b"entry",), (), source="node-b")

    async def run() -> None:
        with (
            feed.subscribe(items=True, node="node-b") as sender,
            feed.subscribe(items=True, node="node-c") as other,
        ):
            feed.publish(["ledger"], rows)
            assert await other.next(0) == {"ledger"}
            assert [r.entries for r in other.take_items()["ledger"]] == [(b"entry",)]
            assert await sender.next(0) == set()  # it sent them: nothing to hear

    asyncio.run(run())
