"""The one place our errors become MCP errors.

A :class:`~lifeline.errors.LifelineError` raised in a tool becomes an ``isError`` tool
result whose text is our message (what happened, the value, what to do); in a resource it
becomes a protocol error carrying the same message. Anything else is a bug: the SDK logs it
and tells the client only that the tool failed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError

from lifeline.errors import LifelineError, NotFound

__all__ = ["resource_errors", "tool_errors"]


@contextmanager
def tool_errors() -> Iterator[None]:
    try:
        yield
    except LifelineError as exc:
        raise ToolError(str(exc)) from exc


@contextmanager
def resource_errors() -> Iterator[None]:
    try:
        yield
    except NotFound as exc:
        raise ResourceNotFoundError(str(exc)) from exc
    except LifelineError as exc:
        raise ResourceError(str(exc)) from exc
