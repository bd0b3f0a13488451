"""`lifeline-mesh init`: this node's identity, and with ``--new-mesh`` a new mesh (its CA)."""

from __future__ import annotations

import argparse

from lifeline.cli.common import Commands, add_json_option, creates_project, print_json
from lifeline_mesh.cli.home_arg import node_home
from lifeline_mesh.home.identity import ensure_identity
from lifeline_mesh.home.mesh_state import NODE_KEY
from lifeline_mesh.membership.ca import create_mesh

__all__ = ["register"]


def register(sub: Commands, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "init", parents=[parent], help="create this node's identity (and with --new-mesh, a mesh)"
    )
    p.add_argument(
        "--new-mesh",
        metavar="NAME",
        help="also create a new mesh: its CA, with this node as the first member",
    )
    add_json_option(p)
    p.set_defaults(func=cmd_init)
    creates_project(p)


async def cmd_init(args: argparse.Namespace) -> int:
    home = node_home(args)
    identity, created = ensure_identity(home)
    mesh = create_mesh(home, args.new_mesh) if args.new_mesh else None
    if args.json:
        report = {
            "node_id": identity.node_id,
            "created": created,
            "key": home.documents.where(NODE_KEY),
        }
        if mesh is not None:
            report |= {
                "mesh_id": mesh.mesh_id,
                "mesh": mesh.name,
                "ca_fingerprint": mesh.fingerprint_hex,
            }
        print_json(report)
        return 0
    if created:
        where = home.documents.where(NODE_KEY)
        print(f"created node identity {identity.node_id} (key {where}, mode 0600)")
    else:
        print(f"node identity already exists: {identity.node_id}")
    if mesh is not None:
        print(f"created mesh {mesh.name!r} ({mesh.mesh_id}); this node holds its CA")
    return 0
