"""The node's home of a `lifeline-mesh` command: built once from ``--root`` (kept on ``args``).

The home chooses where the lines and the node's documents live (the files of ``.lifeline/``,
or a hub's database named by ``hub.json``) the first time either is needed, and every part
of the command takes them from it (decision 0060).
"""

from __future__ import annotations

import argparse

from lifeline.cli.common import home_of
from lifeline_mesh.home.node_home import NodeHome

__all__ = ["node_home"]


def node_home(args: argparse.Namespace) -> NodeHome:
    """The command's :class:`NodeHome` (``--root``, else found from the current directory)."""
    home = NodeHome.of(home_of(args))
    args.home = home
    return home
