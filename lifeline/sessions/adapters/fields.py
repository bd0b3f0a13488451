"""Small, total accessors for the loosely typed JSON of transcripts (never raise)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["flatten", "get", "opt_int", "to_int", "to_str"]


def get(rec: dict[str, Any], *keys: str) -> Any:
    value: Any = rec
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def flatten(content: Any) -> str:
    """Text of a string or a list of blocks (images become a short note)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return "" if content is None else json.dumps(content, ensure_ascii=False)
    parts = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, dict) and block.get("type") == "image":
            parts.append("[image]")
        elif isinstance(block, str):
            parts.append(block)
    return "\n".join(parts)


def to_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def to_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def opt_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
