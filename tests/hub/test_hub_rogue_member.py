"""A hub node (membership in PostgreSQL) syncing with a rogue member believes none of its
hand-edited rows (decision 0047): the same checks as on a node with files."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from tests.support.mesh_procs import cli, free_port, serve, shared_node, start_ca_serve, terminate
from tests.support.pg_server import fresh_database

pytestmark = pytest.mark.slow
ROGUE = (sys.executable, "-m", "tests.support.rogue_node")


@pytest.mark.timeout(900)
def test_a_hub_takes_no_unproven_row_from_a_rogue_member(pg_server: str, tmp_path: Path) -> None:
    url = asyncio.run(fresh_database(pg_server))
    hub, rogue, outsider = tmp_path / "hub", tmp_path / "rogue", tmp_path / "outsider"
    hub.mkdir()
    made = json.loads(
        cli("lifeline_mesh", hub, "hub", "init", "--store", url, "--new-mesh", "t", "--json").stdout
    )
    shared_node(hub)
    shared_node(rogue)
    proc, _, join_address = start_ca_serve(hub)
    try:
        token = json.loads(cli("lifeline_mesh", hub, "invite", "--json").stdout)["token"]
        cli("lifeline_mesh", rogue, "join", token, "--peer", join_address)
    finally:
        terminate(proc)

    outsider.mkdir()
    key = NodeIdentity.load_or_create(NodeHome(outsider))[0]
    data = json.loads(NodeHome(rogue).members_path.read_text())
    data["members"].append(
        {
            "node_id": key.node_id,
            "public_key": key.public_key.hex(),
            "role": "member",
            "status": "active",
            "joined_at": "2026-01-01T00:00:00Z",
        }
    )
    data["retired"] = [[made["node_id"], "2026-01-01T00:00:00Z", "ci"]]
    NodeHome(rogue).members_path.write_text(json.dumps(data))

    address = f"127.0.0.1:{free_port()}"
    with serve(rogue, "--listen", address, wrap=ROGUE):
        pulled = cli("lifeline_mesh", hub, "members", "--pull", address, "--json")
    listed = {m["node_id"] for m in json.loads(pulled.stdout)["members"]}
    assert key.node_id not in listed
    assert made["node_id"] in listed  # the retired row erased nothing
    for node_id in (key.node_id, made["node_id"]):
        assert f"members row for {node_id} sent by peer {address} refused" in pulled.stderr
    # The hub's members document is in the database, not a file on the process root.
    assert not (hub / ".lifeline" / "mesh" / "members.json").exists()
