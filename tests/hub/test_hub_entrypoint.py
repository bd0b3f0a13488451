"""docker/entrypoint.sh's hub mode (LIFELINE_MESH_STORE set) as local processes on a real
PostgreSQL, without a Docker engine: `bootstrap` makes the hub node and its mesh in the
database on the first root (again: nothing changes), `node` on a second root becomes another
process of that node without an invite and serves joins, and a laptop redeems the invite
bootstrap wrote on the first root at the second process's join port. The same steps run in
containers in tests/deploy/test_docker_engine.py (docker/compose.hub.yml)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.mesh_procs import free_ports, terminate
from tests.support.paths import REPO
from tests.support.pg_server import fresh_database

pytestmark = pytest.mark.slow

ENTRYPOINT = REPO / "docker" / "entrypoint.sh"


@pytest.mark.timeout(600)
def test_the_entrypoint_makes_two_roots_one_hub_node(pg_server: str, tmp_path: Path) -> None:
    url = asyncio.run(fresh_database(pg_server))
    sync_1, sync_2, join_2, laptop_port = free_ports(4)
    tokens = tmp_path / "tokens"
    base = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "LIFELINE_MESH_TOKENS": str(tokens),
    }
    hub = {**base, "LIFELINE_MESH_STORE": url}
    roots = {name: tmp_path / name for name in ("hub-1", "hub-2", "laptop")}
    for root in roots.values():
        root.mkdir()

    def run(name: str, env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(ENTRYPOINT), *argv],
            cwd=roots[name],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    boot_env = {
        **hub,
        "LIFELINE_MESH_JOIN_ADDRESS": f"127.0.0.1:{join_2}",
        "LIFELINE_MESH_INVITE_FOR": "laptop",
    }
    first = run("hub-1", boot_env, "bootstrap", "hub")
    assert first.returncode == 0, first.stderr
    assert "created hub node" in first.stdout, first.stdout
    mesh_1 = roots["hub-1"] / ".lifeline" / "mesh"
    assert (mesh_1 / "hub.json").exists() and (mesh_1 / "tls.pem").exists()
    assert not (mesh_1 / "node.key").exists() and not (mesh_1 / "ca.key").exists()
    token = (tokens / "laptop").read_text()
    again = run("hub-1", boot_env, "bootstrap", "hub")
    assert again.returncode == 0 and "already a process of the hub node" in again.stderr
    assert (tokens / "laptop").read_text() == token  # kept, not issued again

    procs: list[subprocess.Popen[str]] = []

    def start(name: str, env: dict[str, str]) -> None:
        procs.append(
            subprocess.Popen(
                [str(ENTRYPOINT), "node"],
                cwd=roots[name],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
        deadline = time.monotonic() + 120
        while run(name, env, "health").returncode != 0:
            dead = [p for p in procs if p.poll() is not None]
            assert not dead, f"{name}: exited: {dead[0].communicate()[1][-3000:]}"
            assert time.monotonic() < deadline, f"{name} not serving within 120 s"
            time.sleep(0.5)

    hub_2 = {
        **hub,
        "LIFELINE_MESH_NODE": "hub-2",
        "LIFELINE_MESH_LISTEN": f"127.0.0.1:{sync_2}",
        "LIFELINE_MESH_JOIN_LISTEN": f"127.0.0.1:{join_2}",
    }
    laptop = {
        **base,
        "LIFELINE_MESH_NODE": "laptop",
        "LIFELINE_MESH_LISTEN": f"127.0.0.1:{laptop_port}",
        "LIFELINE_MESH_PEERS": f"127.0.0.1:{sync_1} 127.0.0.1:{sync_2}",
    }
    try:
        start("hub-1", {**hub, "LIFELINE_MESH_LISTEN": f"127.0.0.1:{sync_1}",
                        "LIFELINE_MESH_JOIN_LISTEN": "127.0.0.1:0"})  # fmt: skip
        start("hub-2", hub_2)  # no invite in tokens/: `hub init --store` makes it a process
        ids = {name: run(name, hub, "id").stdout.strip() for name in ("hub-1", "hub-2")}
        assert ids["hub-1"] and ids["hub-1"] == ids["hub-2"], ids
        assert not (roots["hub-2"] / ".lifeline" / "mesh" / "node.key").exists()
        # the laptop's invite was made on hub-1's root; hub-2's join port redeems it
        start("laptop", laptop)
        members = {
            name: sorted(
                m["node_id"]
                for m in json.loads(run(name, hub, "members", "--json").stdout)["members"]
            )
            for name in ("hub-1", "hub-2")
        }
        assert members["hub-1"] == members["hub-2"] and len(members["hub-1"]) == 2, members
        laptop_id = run("laptop", laptop, "id").stdout.strip()
        assert laptop_id in members["hub-2"] and ids["hub-1"] in members["hub-2"], members
    finally:
        for proc in procs:
            terminate(proc)
