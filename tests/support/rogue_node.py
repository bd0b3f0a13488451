"""Run a lifeline-mesh command as a rogue member would: hostile code on a valid certificate.

``python -m tests.support.rogue_node python -m lifeline_mesh --root R serve ...`` runs the
command after one change to the node's code: its Membership service hands out its members
file as written — the hand-edited rows included — instead of only the rows the mesh CA's
certificates prove. What honest nodes then believe must not depend on the sender's code.
"""

from __future__ import annotations

import json
import runpy
import sys
from typing import Any

from lifeline_mesh.membership import service
from lifeline_mesh.membership.registry import Registry


def _as_written(self: Any, registry: Registry, lines: tuple[str, ...] = ()) -> str:
    """Every row, to every caller (``lines``, the caller's, is ignored)."""
    raw = self.home.members_path.read_text()
    return json.dumps(json.loads(raw), sort_keys=True)


def main() -> None:
    args = sys.argv[1:]
    module = args.index("-m") + 1  # the wrapped command: python -m lifeline_mesh ...
    if hasattr(service.MembershipServicer, "_proven_members"):
        service.MembershipServicer._proven_members = _as_written  # type: ignore[method-assign]
    sys.argv = [args[module], *args[module + 1 :]]
    runpy.run_module(args[module], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
