"""Answering what the SDK's stdio transport drops: lines that are no JSON-RPC message.

The SDK reads one JSON-RPC message per line; a line that is not JSON, or JSON that is no
JSON-RPC message, reaches the session as an exception and is dropped without an answer, and
a request whose strings hold a lone surrogate (``"\\ud800"``, valid JSON, not encodable as
UTF-8) is handled but its answer cannot be written, so the client waits forever. JSON-RPC 2.0
says to answer: ``-32700`` (parse error, id null) and ``-32600`` (invalid request).
:func:`screened` sits between the transport and the server and does so.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

__all__ = ["screened"]

SHOWN_CHARS = 80  # how much of the parser's complaint an answer quotes


def _error(code: int, message: str, request_id: Any = None) -> SessionMessage:
    error = types.ErrorData(code=code, message=message)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _rejection(exc: Exception) -> SessionMessage:
    if not isinstance(exc, ValidationError):
        return _error(types.PARSE_ERROR, "Parse error: the line is not JSON (send one per line)")
    invalid = [e for e in exc.errors() if e.get("type") == "json_invalid"]
    if invalid:  # e.g. not JSON at all, or a lone surrogate escape the parser refuses
        detail = str(invalid[0].get("ctx", {}).get("error", ""))[:SHOWN_CHARS]
        return _error(types.PARSE_ERROR, f"Parse error: the line is not valid JSON ({detail})")
    return _error(
        types.INVALID_REQUEST,
        "Invalid Request: the JSON is not a JSON-RPC 2.0 message (jsonrpc, id, method)",
    )


def _lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _unencodable(message: SessionMessage) -> bool:
    try:
        message.message.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8")
    except (UnicodeEncodeError, ValueError):
        return True
    return False


@asynccontextmanager
async def screened(read_stream: Any, write_stream: Any) -> AsyncIterator[Any]:
    """The read side the server should use: only messages it can answer reach it; the
    others are answered here, on ``write_stream``."""
    send, receive = create_context_streams[SessionMessage | Exception](0)

    async def screen() -> None:
        async with send:
            async for item in read_stream:
                if isinstance(item, Exception):
                    await write_stream.send(_rejection(item))
                elif _unencodable(item):
                    request_id = getattr(item.message, "id", None)
                    if isinstance(request_id, str) and _lone_surrogate(request_id):
                        request_id = None  # the id itself may be what cannot be encoded
                    await write_stream.send(
                        _error(
                            types.INVALID_REQUEST,
                            "Invalid Request: a string holds a lone surrogate (e.g. \\ud800); "
                            "send valid UTF-8 text",
                            request_id,
                        )
                    )
                else:
                    await send.send(item)

    async with anyio.create_task_group() as tg:
        tg.start_soon(screen)
        yield receive
        tg.cancel_scope.cancel()
