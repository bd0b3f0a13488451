"""What the node of this project is doing, read from its files: the peers report and the
status report (``lifeline-mesh peers``, ``status``, and the viewer's mesh page).

Both read files the running node keeps up to date (``peers.json``, ``state.json``,
``inbound.json``) plus the config and the line files, so they work from any shell, with or
without a node running.
"""

from __future__ import annotations

from typing import Any

from lifeline.file_modes import loose_modes
from lifeline.ignore import tracked_private_files
from lifeline_mesh.home.config import NodeConfig
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.inbound import load_inbound
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.home.state import pid_alive, read_node_state
from lifeline_mesh.membership.ca import local_mesh_id
from lifeline_mesh.peering.table import PeerAddress, load_peers_file

__all__ = ["own_node_id", "peers_report", "status_report"]


def _static_row(address: str) -> dict[str, Any]:
    return {
        "key": f"static:{address}",
        "address": address,
        "node_id": None,
        "sources": ["static"],
        "last_sync_at": None,
        "last_result": None,
        "last_error": None,
        "last_error_at": None,
        "failures": 0,
        "syncs": 0,
        "next_attempt_at": None,
        "syncing": False,
    }


def peers_report(home: NodeHome) -> dict[str, Any]:
    """The node's peer table if a node wrote one, plus configured peers it does not list."""
    data = load_peers_file(home) or {"peers": [], "pid": None, "updated_at": None}
    pid = data.get("pid")
    running = isinstance(pid, int) and pid_alive(pid)
    rows: list[dict[str, Any]] = [r for r in data["peers"] if isinstance(r, dict)]
    listed = {r.get("key") for r in rows}
    for text in NodeConfig.load(home).peers:
        address = str(PeerAddress.parse(text))
        if f"static:{address}" not in listed:
            rows.append(_static_row(address))
    return {
        "node_running": running,
        "pid": pid if running else None,
        "updated_at": data.get("updated_at"),
        "peers": rows,
        "inbound": load_inbound(home),
    }


async def _line_counts(home: NodeHome, shared: list[str]) -> list[dict[str, Any]]:
    out = []
    for name in home.line_names():
        async with home.open_line(name) as store:
            count = await store.count()
        out.append({"name": name, "entries": count, "shared": name in shared})
    return out


def own_node_id(home: NodeHome) -> str | None:
    """This node's id, None before `lifeline-mesh init`."""
    identity = NodeIdentity.maybe_of(home)
    return identity.node_id if identity is not None else None


async def status_report(home: NodeHome) -> dict[str, Any]:
    """This node: ids, whether and where it serves, its lines and counts, its peers, and
    the files of `.lifeline/` that git tracks or other users may read."""
    config = NodeConfig.load(home)
    state = read_node_state(home)
    running = state is not None and pid_alive(state.pid)
    node_id = own_node_id(home)
    mesh_id = local_mesh_id(home)
    peers = peers_report(home)["peers"]
    return {
        "root": str(home.root.resolve()),
        "node_id": node_id,
        "mesh_id": mesh_id,
        "serving": running,
        "pid": state.pid if state and running else None,
        "listen": state.listen if state and running else None,
        "join": state.join if state and running else None,
        "started_at": state.started_at if state and running else None,
        "discovery": state.discovery if state and running else None,
        "interfaces": state.interfaces if state and running else [],
        "lines": await _line_counts(home, config.shared_lines),
        "peers": {"total": len(peers), "failing": sum(1 for p in peers if p.get("failures"))},
        "tracked_by_git": tracked_private_files(home),
        "readable_by_others": [
            {"path": home.relative(x.path), "mode": f"{x.mode:04o}"} for x in loose_modes(home)
        ],
    }
