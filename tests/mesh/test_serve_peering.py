"""The always-on node end to end: `lifeline-mesh serve` subprocesses that keep each other in
sync with no command, stop cleanly on SIGTERM, and report through `status` and `peers`."""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import pytest

from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.peering.service import PEERS_FILE_EVERY_S
from lifeline_mesh.peering.table import load_peers_file
from tests.support.mesh_procs import cli, free_port, join_mesh, serve, wait_for_entry
from tests.support.mesh_procs import log_note as _log
from tests.support.mesh_procs import shared_node as _node
from tests.support.netns import (
    Host,
    netns_unavailable,
    own_netns,  # noqa: F401  (the fixture)
    two_hosts,
)

pytestmark = pytest.mark.slow


def test_a_write_on_one_node_reaches_the_other_without_a_command(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    line_a, line_b = _node(a), _node(b)
    pa, pb = free_port(), free_port()
    flags = ["--no-discovery", "--insecure"]  # plain loopback; mTLS is covered below
    with (
        serve(a, "--listen", f"127.0.0.1:{pa}", "--peer", f"127.0.0.1:{pb}", *flags) as node_a,
        serve(b, "--listen", f"127.0.0.1:{pb}", "--peer", f"127.0.0.1:{pa}", *flags) as node_b,
    ):
        from_a = _log(a, "written on a while both serve")
        wait_for_entry(line_b, from_a)
        from_b = _log(b, "answered on b")
        wait_for_entry(line_a, from_b)

        status = json.loads(cli("lifeline_mesh", a, "status", "--json").stdout)
        assert status["serving"] and status["listen"] == f"127.0.0.1:{pa}"
        assert status["pid"] == node_a.pid and status["lines"][0]["entries"] == 2
        # The peer table is written when a row says something new, its times at most every
        # PEERS_FILE_EVERY_S: b's row shows its session with a within that.
        deadline = time.monotonic() + 2 * PEERS_FILE_EVERY_S
        while True:
            peers = json.loads(cli("lifeline_mesh", b, "peers", "--json").stdout)
            assert peers["node_running"] and len(peers["peers"]) == 1
            row = peers["peers"][0]
            if row["last_sync_at"] is not None or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert row["address"] == f"127.0.0.1:{pa}" and row["last_sync_at"] is not None
        assert row["failures"] == 0 and row["last_error"] is None
        # ... and the nodes that synced in, with their last session.
        inbound = peers["inbound"]
        assert inbound and all(r["line"] == "ledger" for r in inbound), inbound
        assert any(r["result"].startswith("ok: sent") for r in inbound), inbound
        text = cli("lifeline_mesh", b, "peers").stdout
        assert "synced in:" in text and "LAST SESSION" in text, text

        for proc in (node_a, node_b):
            proc.send_signal(signal.SIGTERM)
        for proc in (node_a, node_b):
            out, err = proc.communicate(timeout=30)
            assert proc.returncode == 0, err
            assert "Traceback" not in err
            # The closing line counts both directions: sessions served and syncs started.
            closing = re.search(r"stopped after (\d+) sessions? in .* and (\d+) syncs? out", out)
            assert closing and int(closing[1]) >= 1 and int(closing[2]) >= 1, out
    assert not NodeHome(a).state_path.exists() and not NodeHome(b).state_path.exists()
    assert json.loads(cli("lifeline_mesh", a, "status", "--json").stdout)["serving"] is False


def test_a_dead_peer_is_reported_and_does_not_stop_the_node(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _node(a)
    line_b = _node(b)
    pa, pb, dead = free_port(), free_port(), free_port()
    with (
        serve(
            a,
            "--listen",
            f"127.0.0.1:{pa}",
            "--peer",
            f"127.0.0.1:{dead}",
            "--peer",
            f"127.0.0.1:{pb}",
            "--no-discovery",
            "--insecure",
        ),
        serve(b, "--listen", f"127.0.0.1:{pb}", "--no-discovery", "--insecure"),
    ):
        wait_for_entry(line_b, _log(a, "still flows to the live peer"))
        rows = {
            r["address"]: r
            for r in json.loads(cli("lifeline_mesh", a, "peers", "--json").stdout)["peers"]
        }
        assert rows[f"127.0.0.1:{dead}"]["failures"] >= 1
        assert "unavailable" in rows[f"127.0.0.1:{dead}"]["last_error"]
        assert rows[f"127.0.0.1:{pb}"]["failures"] == 0


def test_serve_refuses_discovery_on_every_interface(tmp_path: Path) -> None:
    _node(tmp_path)
    cli("lifeline_mesh", tmp_path, "init", "--new-mesh", "team")
    result = cli("lifeline_mesh", tmp_path, "serve", "--listen", "0.0.0.0:0", check=False)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "name the one to announce on with --interface ADDR (repeat it for more)" in result.stderr


@pytest.mark.netns
@pytest.mark.usefixtures("own_netns")  # the three serves are started in it: 5353 is theirs
def test_nodes_of_one_mesh_find_each_other_on_the_lan_and_converge(tmp_path: Path) -> None:
    a, b, stranger = tmp_path / "a", tmp_path / "b", tmp_path / "stranger"
    line_a, line_b, _ = _node(a), _node(b), _node(stranger)
    mesh_id = join_mesh(a, [b])
    cli("lifeline_mesh", stranger, "init", "--new-mesh", "elsewhere")
    # No --peer: each node learns of the other from its LAN advert on 127.0.0.1.
    with serve(a), serve(b) as node_b, serve(stranger):
        wait_for_entry(line_b, _log(a, "found over mDNS"))
        wait_for_entry(line_a, _log(b, "and back"))
        status = json.loads(cli("lifeline_mesh", a, "status", "--json").stdout)
        assert status["mesh_id"] == mesh_id and status["discovery"] is True
        assert status["interfaces"] == ["127.0.0.1"]
        peers = json.loads(cli("lifeline_mesh", a, "peers", "--json").stdout)["peers"]
        b_id = json.loads(cli("lifeline_mesh", b, "status", "--json").stdout)["node_id"]
        # The stranger's mesh is not ours: it never becomes a peer.
        assert [(p["node_id"], p["sources"]) for p in peers] == [(b_id, ["discovered"])]
        # SIGTERM: b withdraws its advert (goodbye packets), so a drops it at once.
        node_b.send_signal(signal.SIGTERM)
        assert node_b.wait(timeout=30) == 0
        deadline = time.monotonic() + 20
        while (load_peers_file(NodeHome(a)) or {"peers": [None]})["peers"]:
            assert time.monotonic() < deadline, "a still lists b after b stopped"
            time.sleep(0.05)


# -- two hosts: network namespaces joined by a veth pair -----------------------------


def _two_host_mesh(tmp_path: Path, a_host: Host, b_host: Host) -> tuple[Path, Path]:
    a, b = tmp_path / "a", tmp_path / "b"
    _node(a), _node(b)
    join_mesh(a, [b], host=a_host.address, wrap_ca=a_host.wrap([]), wraps=[b_host.wrap([])])
    return a, b


@pytest.mark.netns
def test_nodes_on_two_hosts_discover_each_other_and_converge_over_mtls(tmp_path: Path) -> None:
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    with two_hosts() as (ha, hb):
        a, b = _two_host_mesh(tmp_path, ha, hb)
        port = free_port()
        # No --peer: each node announces on its host's address and finds the other there.
        with (
            serve(a, "--listen", f"{ha.address}:{port}", wrap=ha.wrap([])),
            serve(b, "--listen", f"{hb.address}:{port}", wrap=hb.wrap([])),
        ):
            wait_for_entry(b / ".lifeline" / "ledger.db", _log(a, "across the veth"))
            wait_for_entry(a / ".lifeline" / "ledger.db", _log(b, "and back"))
            a_id = json.loads(cli("lifeline_mesh", a, "status", "--json").stdout)["node_id"]
            # The entries may arrive before B's own discovery of A (A found B first, and B
            # watches its caller back: decision 0066); the row then says both.
            end = time.monotonic() + 30
            while True:
                rows = json.loads(cli("lifeline_mesh", b, "peers", "--json").stdout)["peers"]
                if any("discovered" in r["sources"] for r in rows) or time.monotonic() > end:
                    break
                time.sleep(0.2)
            assert [(r["node_id"], r["address"]) for r in rows] == [(a_id, f"{ha.address}:{port}")]
            assert "discovered" in rows[0]["sources"], rows
