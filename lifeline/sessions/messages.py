"""What the sessions index keeps of a stored part: its messages and its token usage. Pure.

A part's items (as stored: redacted, capped — never the raw transcript) become

- **messages**: the searchable things a person or an agent said or did — a prompt, a reply,
  recorded reasoning, a tool call (its name and input), a tool result, an error — each with
  its position in the part (so its position in the session, what ``sessions show --offset``
  takes), its time and its role;
- **usage rows**: the recorded token usage, in one vocabulary for every tool
  (:class:`Tokens`, decision 0069), with the model and the time.

The same part always gives the same messages, in the same order: the index deletes a
superseded part's rows by deriving them again (its full-text table keeps no copy of the text).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from lifeline.sessions.stored_values import count

__all__ = [
    "ROLES",
    "Message",
    "Tokens",
    "UsageRow",
    "message_text",
    "messages_of",
    "normalized",
    "usage_of",
]

# kind -> role shown (and filtered on); other kinds (context, usage, markers…) are not indexed
_ROLE_OF = {
    "prompt": "user",
    "reply": "assistant",
    "thinking": "thinking",
    "tool_call": "tool_call",
    "tool_result": "tool_result",
    "error": "error",
}
ROLES = tuple(dict.fromkeys(_ROLE_OF.values()))


@dataclass(frozen=True, slots=True)
class Message:
    position: int  # the item's index in its part
    ts: str | None
    role: str
    name: str  # the tool's name for calls and results, the model for replies, else ""
    text: str


@dataclass(frozen=True, slots=True)
class Tokens:
    """Token counts in one vocabulary for every tool (decision 0069).

    ``input`` is uncached input, ``cached`` input read from the provider's cache,
    ``cache_write`` input written to it (Claude), ``output`` every generated token, and
    ``reasoning`` the part of ``output`` spent reasoning, where the tool records it.
    ``total`` = input + cached + cache_write + output (reasoning is inside output).
    """

    input: int = 0
    cached: int = 0
    cache_write: int = 0
    output: int = 0
    reasoning: int = 0

    @property
    def total(self) -> int:
        return self.input + self.cached + self.cache_write + self.output

    def __add__(self, other: Tokens) -> Tokens:
        return Tokens(
            self.input + other.input,
            self.cached + other.cached,
            self.cache_write + other.cache_write,
            self.output + other.output,
            self.reasoning + other.reasoning,
        )

    def as_json(self) -> dict[str, int]:
        return {
            "input": self.input,
            "cached": self.cached,
            "cache_write": self.cache_write,
            "output": self.output,
            "reasoning": self.reasoning,
            "total": self.total,
        }


def _int(value: Any) -> int:
    return count(value)  # a peer's 10**23 tokens would overflow the index's integers


def normalized(tool: str, recorded: Mapping[str, Any]) -> Tokens:
    """A tool's recorded counts (the stored ``input, output, cache_read, cache_write,
    reasoning``) in :class:`Tokens`. Codex and Gemini count cached input inside ``input``;
    Codex counts reasoning inside ``output``, Gemini beside it; Claude keeps cache reads and
    writes apart from ``input`` and does not split reasoning out of ``output``."""
    raw_in, out = _int(recorded.get("input")), _int(recorded.get("output"))
    cached, write = _int(recorded.get("cache_read")), _int(recorded.get("cache_write"))
    reasoning = _int(recorded.get("reasoning"))
    if tool == "claude":
        return Tokens(raw_in, cached, write, out, reasoning)
    if tool == "gemini":
        return Tokens(raw_in - cached, cached, write, out + reasoning, reasoning)
    return Tokens(raw_in - cached, cached, write, out, reasoning)  # codex, and by default


@dataclass(frozen=True, slots=True)
class UsageRow:
    position: int
    ts: str | None
    model: str | None
    tokens: Tokens


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _call_text(item: Mapping[str, Any]) -> str:
    value = item.get("input")
    if value is None:
        args = ""
    elif isinstance(value, str):
        args = value
    else:
        args = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return f"{_text(item.get('name'))} {args}".strip()


def _message(position: int, item: Any, names: dict[str, str]) -> Message | None:
    if not isinstance(item, dict):
        return None
    kind = item.get("kind")
    role = _ROLE_OF.get(kind) if isinstance(kind, str) else None
    if role is None:
        return None
    ts = item.get("ts") if isinstance(item.get("ts"), str) else None
    if kind == "tool_call":
        name = _text(item.get("name"))
        names[_text(item.get("call_id"))] = name
        text = _call_text(item)
    elif kind == "tool_result":
        name = names.get(_text(item.get("call_id")), "")
        text = _text(item.get("output"))
    elif kind == "error":
        name = _text(item.get("error"))
        text = f"{name} {_text(item.get('text'))}".strip()
    else:
        name = _text(item.get("model")) if kind == "reply" else ""
        text = _text(item.get("text"))
    return Message(position, ts, role, name, text) if text.strip() else None


def messages_of(items: Iterable[Any]) -> Iterator[Message]:
    """The searchable messages of a part's stored items, in order."""
    names: dict[str, str] = {}
    for position, item in enumerate(items):
        found = _message(position, item, names)
        if found is not None:
            yield found


def message_text(items: list[Any], position: int) -> str:
    """The indexed text of the item at ``position`` of a part ("" when it has none)."""
    found = _message(position, items[position], {}) if 0 <= position < len(items) else None
    return found.text if found is not None else ""


def usage_of(tool: str, items: Iterable[Any]) -> Iterator[UsageRow]:
    """The usage rows of a part's stored items (deltas that sum to the session's totals)."""
    for position, item in enumerate(items):
        if isinstance(item, dict) and item.get("kind") == "usage":
            ts = item.get("ts") if isinstance(item.get("ts"), str) else None
            model = item.get("model") if isinstance(item.get("model"), str) else None
            yield UsageRow(position, ts, model, normalized(tool, item))
