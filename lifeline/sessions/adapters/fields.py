"""Small, total accessors for the loosely typed JSON of transcripts (never raise), and the
one way a transcript's JSON is parsed (:func:`parse_json`, :func:`json_text`)."""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = [
    "MAX_DEPTH",
    "as_list",
    "flatten",
    "get",
    "json_text",
    "opt_int",
    "parse_json",
    "to_int",
    "to_str",
]

# Containers nested in one record, or in one JSON text held in a string (Codex `arguments`).
# Real records nest a dozen levels; a hostile one nested 600 deep overflowed the redactor's
# recursion, and 260 pydantic's serializer (decision 0113).
MAX_DEPTH = 64
# A JSON string: its escapes, a lone surrogate's (\ud83d alone), and what is left once every
# string of a JSON text is taken out (its brackets, for the depth).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_PAIR = re.compile(rb"\[\]|\{\}")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def get(rec: dict[str, Any], *keys: str) -> Any:
    value: Any = rec
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def as_list(value: Any) -> list[Any]:
    """``value`` when it is a list, else an empty one (a field a transcript left out or wrote
    with another type)."""
    return value if isinstance(value, list) else []


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


def parse_json(text: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value of ``text``, every lone surrogate (``"\\ud83d"`` with no pair: Claude
    Code writes one when it cuts a string inside an emoji) made U+FFFD, which UTF-8 can
    hold. ValueError when it is not JSON or nests deeper than ``max_depth``."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if _deeper_than(raw, max_depth):
        raise ValueError(f"JSON nested deeper than {max_depth} levels")
    try:
        value = json.loads(raw)
    except RecursionError as exc:  # not reached after the depth check; kept for safety
        raise ValueError("JSON nested too deeply") from exc
    if _SURROGATE_ESCAPE.search(raw) is not None:
        return _mended(value)
    return value


def json_text(value: str, max_depth: int = MAX_DEPTH) -> dict[str, Any] | list[Any] | None:
    """The object or array a string holds as JSON text (Codex's `arguments` and older
    `output`, Cursor's `rawArgs` and `result`), or None. One rule for the redactor, which
    redacts what such a string holds, and for the adapters, which decode it after: an
    adapter never decodes a string the redactor did not (decision 0113)."""
    head = value[:1] if value[:1] in "{[" else value.lstrip()[:1]
    if head not in ("{", "[") or value.rstrip()[-1:] not in ("}", "]"):
        return None
    try:
        found = parse_json(value, max_depth)
    except ValueError:
        return None
    return found if isinstance(found, dict | list) else None


def _deeper_than(raw: bytes, limit: int) -> bool:
    """Whether the JSON text ``raw`` nests more than ``limit`` containers: its strings taken
    out, innermost pairs of brackets are removed one level a pass (C-speed passes; most
    lines have too few brackets to need one)."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    shape = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    if shape.count(b"[") + shape.count(b"{") <= limit:
        return False
    for _ in range(limit):
        shape, removed = _PAIR.subn(b"", shape)
        if not shape or not removed:  # all gone; or unbalanced: not JSON, json.loads says
            return False
    return True


def _mended(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_mended(v) for v in value]
    if isinstance(value, dict):
        return {_SURROGATE.sub("\ufffd", k): _mended(v) for k, v in value.items()}
    return value
