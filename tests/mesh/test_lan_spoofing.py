"""Forged LAN adverts against real `serve` processes, sent as anyone on the segment can.

A node's advert says where it serves, and anyone can send one naming it (its node id is in
every advert it sends): a forged address must not cut off two members that reached each
other, and a flood of made-up members must not keep two members from finding each other.
Each test runs in a network namespace of its own (`tests/support/netns.py`)."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.forged_adverts import (
    advert_packets,
    flood_packets,
    made_up_node_ids,
    pointer_packets,
    send,
)
from tests.support.mesh_procs import cli, free_ports, join_mesh, serve, wait_for_entry
from tests.support.mesh_procs import log_note as _log
from tests.support.mesh_procs import shared_node as _node
from tests.support.netns import own_netns  # noqa: F401  (the fixture)

pytestmark = [pytest.mark.slow, pytest.mark.netns]

LOOPBACK = "127.0.0.1"


def _status(root: Path) -> dict[str, Any]:
    return dict(json.loads(cli("lifeline_mesh", root, "status", "--json").stdout))


def _row(root: Path, node_id: str) -> dict[str, Any] | None:
    peers = json.loads(cli("lifeline_mesh", root, "peers", "--json").stdout)["peers"]
    return next((dict(p) for p in peers if p["node_id"] == node_id), None)


def _cut_connections(*ports: int) -> None:
    """Abort every TCP connection to or from ``ports`` (a Wi-Fi that drops, a laptop that
    sleeps): the nodes dial each other again, at the addresses they hold."""
    for port in ports:
        for side in ("dport", "sport"):
            subprocess.run(["ss", "-K", side, "=", f":{port}"], capture_output=True, timeout=30)


@contextmanager
def _forging(packets: list[bytes], every_s: float) -> Iterator[None]:
    """Send ``packets`` again every ``every_s`` until the block ends."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            send(packets, LOOPBACK, pace_s=0.001)
            stop.wait(every_s)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=30)


@pytest.mark.usefixtures("own_netns")
def test_a_forged_address_does_not_cut_two_members_apart(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    line_a, line_b = _node(a), _node(b)
    mesh_id = join_mesh(a, [b])
    pa, pb, dead = free_ports(3)  # nothing listens on `dead`
    with (
        serve(a, "--listen", f"{LOOPBACK}:{pa}"),
        serve(b, "--listen", f"{LOOPBACK}:{pb}"),
    ):
        wait_for_entry(line_b, _log(a, "a reaches b"))
        wait_for_entry(line_a, _log(b, "b reaches a"))
        a_id, b_id = _status(a)["node_id"], _status(b)["node_id"]
        forged = [p for n in (a_id, b_id) for p in advert_packets(n, mesh_id, dead, LOOPBACK)]
        with _forging(forged, every_s=0.5):
            # Both nodes have heard the forged adverts (the row shows the address or keeps
            # it as a candidate) ...
            end = time.monotonic() + 20
            while not all(
                f":{dead}" in json.dumps(_row(root, other))
                for root, other in ((a, b_id), (b, a_id))
            ):
                assert time.monotonic() < end, "the forged adverts were not heard"
                time.sleep(0.2)
            # ... then every connection between them drops, and they dial each other again.
            _cut_connections(pa, pb)
            started = time.monotonic()
            wait_for_entry(line_b, _log(a, "after the cut, a to b"), deadline_s=30)
            wait_for_entry(line_a, _log(b, "after the cut, b to a"), deadline_s=30)
            print(f"both ways again {time.monotonic() - started:.1f} s after the cut")
            row = _row(a, b_id)
            assert row is not None and row["address"] == f"{LOOPBACK}:{pb}", row


FLOOD = 1000  # made-up members with whole adverts
SILENT = 200  # and names that answer no lookup


@pytest.mark.usefixtures("own_netns")
def test_a_flood_of_made_up_members_does_not_keep_two_members_apart(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    line_a, line_b = _node(a), _node(b)
    mesh_id = join_mesh(a, [b])
    pa, pb, dead = free_ports(3)
    flood = flood_packets(made_up_node_ids(FLOOD), mesh_id, dead, LOOPBACK)
    flood += pointer_packets(made_up_node_ids(SILENT))
    with _forging(flood, every_s=2.0):
        time.sleep(1)  # the flood is on the LAN before the nodes start
        started = time.monotonic()
        with (
            serve(a, "--listen", f"{LOOPBACK}:{pa}"),
            serve(b, "--listen", f"{LOOPBACK}:{pb}"),
        ):
            wait_for_entry(line_b, _log(a, "through the flood, a to b"), deadline_s=60)
            wait_for_entry(line_a, _log(b, "through the flood, b to a"), deadline_s=30)
            print(f"both ways {time.monotonic() - started:.1f} s after the nodes started")
