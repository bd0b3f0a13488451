"""`lifeline-mesh mcp`: serve this node's ledger to the agents on this machine over stdio."""

from __future__ import annotations

import argparse
import os

from lifeline.cli.common import Commands, add_line_option, default_author, line_of, root_of
from lifeline.errors import ConfigError
from lifeline.validate import DEFAULT_LIMITS
from lifeline_mesh.mcp.workspace import Workspace

__all__ = ["register"]


def register(sub: Commands, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "mcp",
        parents=[parent],
        help="serve the MCP tools (context, append, checkpoint, ...) over stdio",
        description="Serve this node's lines to an MCP client over stdin/stdout. "
        "Configure your client to run `lifeline-mesh mcp --root /path/to/project`; "
        "see docs/mcp.md.",
    )
    add_line_option(p, "the line the tools read and write by default (default: ledger)")
    p.add_argument(
        "--agent",
        default=None,
        help="the name writes are recorded under and the write policy applies to "
        "(default: $LIFELINE_AGENT, else 'mcp')",
    )
    p.add_argument("--author", default=None, help="who (default: $LIFELINE_AUTHOR or $USER)")
    p.set_defaults(func=cmd_mcp)


async def cmd_mcp(args: argparse.Namespace) -> int:
    # Imported here: the MCP SDK is heavy, and only this command needs it.
    from lifeline_mesh.mcp.server import serve_stdio

    agent = (args.agent or os.environ.get("LIFELINE_AGENT") or "mcp").strip()
    if not agent or len(agent.encode("utf-8")) > DEFAULT_LIMITS.field_bytes:
        raise ConfigError(
            f"--agent {agent!r} must be 1 to {DEFAULT_LIMITS.field_bytes} bytes; "
            "name the client, e.g. --agent claude-code"
        )
    ws = Workspace.open(
        root_of(args).resolve(),
        agent=agent,
        author=args.author or default_author(),
        line=line_of(args),
    )
    await serve_stdio(ws)
    return 0
