"""The node's MCP server (stdio, or streamable HTTP): tools and resources over the merged
store, writes under the write policy, proposals for what a human must approve. See
docs/mcp.md.

Modules: ``server`` (assembly, stdio), ``remote`` (HTTP, TLS, bearer tokens checked),
``tokens`` (issued, hashed, revoked), ``caller`` (who writes: the server's agent or the
token's), ``tools_*``/``context`` (the MCP surface), ``shapes``/``shapes_sessions`` (the
typed results: each tool's output schema), ``reads``/``writes`` (what the tools do),
``policy``, ``proposals``, ``checkpoint``, ``workspace``, ``boundary`` (our errors -> MCP
errors), ``signatures`` (the notary's signatures on an entry).
The package imports nothing eagerly, so the CLI's other commands do not load the MCP SDK.
"""

from __future__ import annotations

__all__: list[str] = []
