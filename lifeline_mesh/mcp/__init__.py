"""The node's MCP server (stdio): tools and resources over the merged store, writes under
the write policy, proposals for what a human must approve. See docs/mcp.md.

Modules: ``server`` (assembly, stdio), ``tools_read``/``tools_write``/``context`` (the MCP
surface), ``reads``/``writes`` (what the tools do), ``policy``, ``proposals``, ``checkpoint``,
``workspace``, ``boundary`` (our errors -> MCP errors), ``seams`` (the notary's signatures).
The package imports nothing eagerly, so the CLI's other commands do not load the MCP SDK.
"""

from __future__ import annotations

__all__: list[str] = []
