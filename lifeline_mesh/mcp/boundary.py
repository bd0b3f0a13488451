"""The one place our errors become MCP errors.

A :class:`~lifeline.errors.LifelineError` raised in a tool becomes an ``isError`` tool
result whose text is our message (what happened, the value, what to do); in a resource it
becomes a protocol error carrying the same message. Anything else is a bug: the SDK logs it
and tells the client only that the tool failed. Over ``--http`` the client may be on
another machine: the project's folder (:func:`hide_path`) is shown as ``.`` in messages,
which name it for a user at the terminal.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError

from lifeline.errors import LifelineError, NotFound

__all__ = ["bounded", "hide_path", "resource_errors", "tool_errors"]

MAX_ERROR_CHARS = 600  # an error message that echoes a huge argument is cut to this
_HIDDEN: list[str] = []  # folders a message shows as "." (this process serves remote clients)


def hide_path(path: Path) -> None:
    """Show ``path`` (the served project's folder) as ``.`` in every message from here on."""
    _HIDDEN.append(str(path))


def bounded(message: str) -> str:
    """``message``, cut when it is longer than :data:`MAX_ERROR_CHARS` (a value echoed in
    full could be megabytes), hidden folders shown as ``.``."""
    for path in _HIDDEN:
        message = message.replace(path, ".")
    if len(message) <= MAX_ERROR_CHARS:
        return message
    return f"{message[: MAX_ERROR_CHARS - 80]}… ({len(message)} characters; the rest cut)"


@contextmanager
def tool_errors() -> Iterator[None]:
    try:
        yield
    except LifelineError as exc:
        raise ToolError(bounded(str(exc))) from exc


@contextmanager
def resource_errors() -> Iterator[None]:
    try:
        yield
    except NotFound as exc:
        raise ResourceNotFoundError(bounded(str(exc))) from exc
    except LifelineError as exc:
        raise ResourceError(bounded(str(exc))) from exc
