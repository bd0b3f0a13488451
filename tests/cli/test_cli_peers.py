"""`lifeline-mesh peers` and `status`, run as a user runs them (subprocesses)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.discovery.zeroconf import ZeroconfDiscovery
from lifeline_mesh.home.config import NodeConfig
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.home.state import NodeState, recorded_node_state, write_node_state
from lifeline_mesh.membership import create_mesh
from lifeline_mesh.membership.registry import Member, Registry
from lifeline_mesh.peering.schedule import SchedulePolicy
from lifeline_mesh.peering.scheduler import SyncScheduler
from lifeline_mesh.peering.table import PeerAddress, PeerState, save_peers_file
from tests.support.entries import make_entry
from tests.support.netns import own_netns  # noqa: F401  (the fixture)


def _mesh(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _json(root: Path, *args: str) -> Any:
    result = _mesh(root, *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_status_of_an_empty_project(tmp_path: Path) -> None:
    report = _json(tmp_path, "status")
    assert report["node_id"] is None and report["mesh_id"] is None
    assert report["serving"] is False and report["lines"] == []
    text = _mesh(tmp_path, "status").stdout
    assert "lifeline-mesh init" in text and "lifeline init" in text


async def test_status_shows_identity_lines_and_the_serving_node(tmp_path: Path) -> None:
    mesh = create_mesh(NodeHome(tmp_path), "team")
    identity, _ = NodeIdentity.load_or_create(NodeHome(tmp_path))
    NodeConfig(shared_lines=["ledger"]).save(NodeHome(tmp_path))
    async with await SqliteStore.open(tmp_path / ".lifeline" / "ledger.db") as store:
        await store.append_many([make_entry("a"), make_entry("b")])
    async with await SqliteStore.open(tmp_path / ".lifeline" / "notes.db") as store:
        await store.append(make_entry("c"))
    state = NodeState(os.getpid(), "127.0.0.1:7411", time.time(), identity.node_id)
    with recorded_node_state(NodeHome(tmp_path), state):
        report = await asyncio.to_thread(_json, tmp_path, "status")
        text = (await asyncio.to_thread(_mesh, tmp_path, "status")).stdout
    assert not NodeHome(tmp_path).state_path.exists()  # removed when the node stops
    assert report["node_id"] == identity.node_id
    assert report["mesh_id"] == mesh.mesh_id and len(mesh.mesh_id) == 16
    assert report["serving"] is True and report["listen"] == "127.0.0.1:7411"
    assert report["lines"] == [
        {"name": "ledger", "entries": 2, "shared": True},
        {"name": "notes", "entries": 1, "shared": False},
    ]
    assert "127.0.0.1:7411" in text and identity.node_id in text


def test_status_ignores_a_state_file_left_by_a_dead_node(tmp_path: Path) -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    write_node_state(NodeHome(tmp_path), NodeState(int(gone.stdout), "127.0.0.1:1", 0.0))
    report = _json(tmp_path, "status")
    assert report["serving"] is False and report["listen"] is None


async def test_peers_shows_the_table_the_node_wrote(tmp_path: Path) -> None:
    NodeConfig(peers=["10.9.9.9:7411", "127.0.0.1:7000"]).save(NodeHome(tmp_path))
    synced = asyncio.Event()

    async def sync_one(peer: PeerState) -> str:
        if peer.address.port == 7001:
            raise ConnectionRefusedError(111, "Connection refused")
        return "received 3, sent 1"

    def persist(rows: list[dict[str, Any]]) -> None:
        save_peers_file(NodeHome(tmp_path), rows, pid=os.getpid(), wall_now=time.time())
        if sum(1 for r in rows if r["last_sync_at"] or r["last_error"]) == 2:
            synced.set()

    sched = SyncScheduler(sync_one, policy=SchedulePolicy(period=3600), on_update=persist)
    for port in (7000, 7001):
        sched.add_static(PeerAddress("127.0.0.1", port))
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(sched.run(tg))
        async with asyncio.timeout(10):
            await synced.wait()
        runner.cancel()
    report = await asyncio.to_thread(_json, tmp_path, "peers")
    assert report["node_running"] is True and report["pid"] == os.getpid()
    rows = {r["address"]: r for r in report["peers"]}
    assert set(rows) == {"127.0.0.1:7000", "127.0.0.1:7001", "10.9.9.9:7411"}
    assert rows["127.0.0.1:7000"]["last_result"] == "received 3, sent 1"
    assert rows["127.0.0.1:7001"]["failures"] == 1
    assert "Connection refused" in rows["127.0.0.1:7001"]["last_error"]
    assert rows["10.9.9.9:7411"]["last_sync_at"] is None  # configured, not yet tried
    text = (await asyncio.to_thread(_mesh, tmp_path, "peers")).stdout
    assert "Connection refused" in text and "10.9.9.9:7411" in text


def test_a_bad_configured_peer_is_one_clear_error(tmp_path: Path) -> None:
    NodeConfig(peers=["10.0.0.1"]).save(NodeHome(tmp_path))
    result = _mesh(tmp_path, "peers")
    assert result.returncode == 2
    assert "'10.0.0.1' is not HOST:PORT" in result.stderr and "Traceback" not in result.stderr


def test_a_damaged_peers_file_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / ".lifeline" / "mesh" / "peers.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    result = _mesh(tmp_path, "peers", "--json")
    assert result.returncode == 2 and "delete it" in result.stderr


@pytest.mark.netns
@pytest.mark.usefixtures("own_netns")  # and `discover` with it: no other mDNS traffic in sight
async def test_discover_lists_ours_and_says_why_others_are_ignored(tmp_path: Path) -> None:
    home = NodeHome(tmp_path)
    mesh_id = create_mesh(home, "team").mesh_id
    member = NodeIdentity.generate()
    registry = Registry.load(home)
    registry.add(Member.new(member.public_key, "member", dt.datetime.now(dt.UTC)))
    registry.save(home)
    ours, theirs, unknown = member.node_id, _node_id(), _node_id()
    ads = [
        ZeroconfDiscovery(node_id=n, mesh_id=m, port=p, interfaces=["127.0.0.1"])
        for n, m, p in (
            (ours, mesh_id, 7401),
            (theirs, "mesh-theirs", 7402),
            (unknown, mesh_id, 7403),  # of our mesh, but on no members list of ours
        )
    ]
    async with ads[0], ads[1], ads[2]:
        proc = await asyncio.create_subprocess_exec(
            *[sys.executable, "-m", "lifeline_mesh", "--root", str(tmp_path)],
            *["discover", "--interface", "127.0.0.1", "--seconds", "3", "--json"],
            stdout=asyncio.subprocess.PIPE,
        )
        # discover listens 3 s (1.5 s missed an advert now and then under load), then
        # resolves each name heard (3 s at most each)
        out, _ = await asyncio.wait_for(proc.communicate(), timeout=30)
    assert proc.returncode == 0
    found = {n["node_id"]: n for n in json.loads(out)["nodes"]}
    assert found[ours]["ignored_because"] is None and found[ours]["port"] == 7401
    assert "belongs to mesh 'mesh-theirs'" in found[theirs]["ignored_because"]
    assert "is not on this node's members list" in found[unknown]["ignored_because"]


def _node_id() -> str:
    return NodeIdentity.generate().node_id


def test_discover_rejects_a_silly_window(tmp_path: Path) -> None:
    result = _mesh(tmp_path, "discover", "--seconds", "0")
    assert result.returncode == 2 and "--seconds 0 is out of range" in result.stderr
