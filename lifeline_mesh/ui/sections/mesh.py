"""The Mesh section: this node, its members, peers, lines, a topology picture, and the
findings of the last audit (``verify``), each linked to its entry."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from lifeline.errors import ConfigError
from lifeline_mesh.home.config import NodeConfig
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.state import pid_alive, read_node_state
from lifeline_mesh.membership.ca import local_mesh_id
from lifeline_mesh.membership.registry import Registry
from lifeline_mesh.peering.report import peers_report
from lifeline_mesh.ui.links import Links
from lifeline_mesh.ui.render import page, viewer_of
from lifeline_mesh.ui.section import Section
from lifeline_mesh.ui.topology import peer_health, render_topology
from lifeline_mesh.ui.viewer import Viewer

__all__ = ["SECTION"]


def _node(viewer: Viewer) -> dict[str, Any]:
    identity = NodeIdentity.maybe_of(viewer.home)
    state = read_node_state(viewer.home)
    serving = state is not None and pid_alive(state.pid)
    return {
        "node_id": identity.node_id if identity is not None else None,
        "mesh_id": local_mesh_id(viewer.home),
        "serving": state.listen if state is not None and serving else None,
        "root": str(viewer.home.root.resolve()),
    }


def _members(viewer: Viewer) -> tuple[str, list[dict[str, Any]]]:
    try:
        registry = Registry.load(viewer.home)
    except ConfigError:
        return "", []
    return registry.name, [
        {
            "node_id": m.node_id,
            "role": m.role,
            "status": m.status,
            "joined_at": m.joined_at,
            "revoked_at": m.revoked_at,
            "ca_holder": m.ca_holder,
        }
        for m in sorted(registry.members.values(), key=lambda m: m.node_id)
    ]


async def _lines(viewer: Viewer) -> list[dict[str, Any]]:
    shared = set(NodeConfig.load(viewer.home).shared_lines)
    out = []
    for name in viewer.lines():
        reader = await viewer.reader(name)
        out.append(
            # the count the truth keeps (cached by the line's head): `count(*)` read every
            # entry's index row on each request, 215 ms at 1M entries
            {"name": name, "entries": await reader.count(), "shared": name in shared}
        )
    return out


def _audits(viewer: Viewer) -> list[dict[str, Any]]:
    out = []
    for name in sorted(viewer.audit.results):
        held = viewer.audit.results[name]
        out.append(
            {
                "line": name,
                "report": held.report,
                "finished_at": held.finished_at,
                "failures": held.failures,
                "more": max(0, int(held.report.get("failures", 0)) - len(held.failures)),
                "notes": held.notes,
            }
        )
    return out


async def mesh_page(request: Request) -> Response:
    viewer = viewer_of(request)
    if viewer.static:
        await viewer.audit.run()  # a copy shows a fresh audit; served pages never wait
    else:
        viewer.audit.refresh()
    node = _node(viewer)
    name, members = _members(viewer)
    peers = peers_report(viewer.home)
    for row in peers["peers"]:
        row["health"] = peer_health(row)
    return page(
        request,
        "mesh.html",
        section="mesh",
        title="Mesh",
        node=node,
        mesh_name=name,
        members=members,
        peers=peers,
        lines_table=await _lines(viewer),
        topology=render_topology(node["node_id"] or "this node", peers["peers"]),
        audits=_audits(viewer),
        audit_running=viewer.audit.running,
        audit_error=viewer.audit.error,
    )


def _nav(links: Links, line: str | None) -> str | None:
    return links.mesh()


SECTION = Section("mesh", "Mesh", _nav, [Route("/mesh", mesh_page)])
