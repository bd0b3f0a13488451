"""Who is calling a tool: the server's own agent (stdio), or the holder of a bearer token.

On stdio the agent and author are the server's (``--agent``, ``--author``), set by whoever
configured the client. Over HTTP each request carries a token (:mod:`.remote`), and the
caller is the token's: its agent is what writes are recorded under and what the write
policy rules on, its author is ``token:NAME``, and its role says whether it may write at
all -- a ``reader`` token is refused before the policy is even read.
"""

from __future__ import annotations

from dataclasses import replace

from mcp.server.auth.middleware.auth_context import get_access_token

from lifeline_mesh.mcp.policy import PolicyDenied
from lifeline_mesh.mcp.workspace import Workspace

__all__ = ["as_caller", "as_writer"]


def as_caller(ws: Workspace) -> Workspace:
    """``ws`` as the current caller: the token's agent and author over HTTP."""
    token = get_access_token()
    if token is None or not token.claims:
        return ws
    claims = token.claims
    return replace(ws, agent=str(claims["agent"]), author=str(claims["author"]))


def as_writer(ws: Workspace) -> Workspace:
    """``ws`` as the current caller, who must be allowed to write (a reader token is not)."""
    token = get_access_token()
    if token is not None and token.claims and token.claims.get("role") != "member":
        name = token.claims.get("name")
        raise PolicyDenied(
            f"token {name!r} has role {token.claims.get('role')!r}, which may not write; "
            "ask the node's owner for a member token "
            "(`lifeline-mesh mcp token issue NAME --role member`)"
        )
    return as_caller(ws)
