"""The node's home of a `lifeline-mesh` command: built once from ``--root`` (kept on ``args``)."""

from __future__ import annotations

import argparse

from lifeline.cli.common import home_of
from lifeline_mesh.home.mesh_state import binding_of
from lifeline_mesh.home.node_home import NodeHome

__all__ = ["attach_state", "node_home"]


def node_home(args: argparse.Namespace) -> NodeHome:
    """The command's :class:`NodeHome` (``--root``, else found from the current directory)."""
    home = NodeHome.of(home_of(args))
    args.home = home
    return attach_state(home)


def attach_state(home: NodeHome) -> NodeHome:
    """``home``, its documents bound to its hub database when it is a hub process root
    (``.lifeline/mesh/hub.json``, docs/hub.md); the driver is loaded only then."""
    if binding_of(home) is not None:
        from lifeline_mesh.hub.state_init import attach

        attach(home)
    return home
