"""Delivery shapes: the context as plain markdown or as the JSON a provider API takes.

- ``anthropic``: the Messages API ``system`` blocks; the stable prefix carries
  ``cache_control`` (ephemeral), so a changed tail does not invalidate the cached prefix.
- ``openai``: ``messages`` with the stable prefix as the first system message; OpenAI caches
  identical prompt prefixes automatically, so nothing is marked.
- ``gemini``: ``system_instruction.parts``; Gemini caches through a separate cached-content
  resource, so the stable prefix is the first part, ready to be cached that way.
"""

from __future__ import annotations

import json
from typing import Any

from lifeline.errors import ConfigError
from lifeline.truth.assemble import Context

__all__ = ["FORMATS", "deliver"]

FORMATS = ("markdown", "anthropic", "openai", "gemini")


def _shape(fmt: str, ctx: Context) -> dict[str, Any]:
    if fmt == "anthropic":
        return {
            "system": [
                {"type": "text", "text": ctx.stable, "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": ctx.volatile},
            ]
        }
    if fmt == "openai":
        return {
            "messages": [
                {"role": "system", "content": ctx.stable},
                {"role": "system", "content": ctx.volatile},
            ]
        }
    return {"system_instruction": {"parts": [{"text": ctx.stable}, {"text": ctx.volatile}]}}


def deliver(fmt: str, ctx: Context) -> str:
    """The context in delivery format ``fmt`` (one of :data:`FORMATS`)."""
    if fmt not in FORMATS:
        raise ConfigError(f"format {fmt!r} is unknown; use one of: {', '.join(FORMATS)}")
    if fmt == "markdown":
        return ctx.text
    return json.dumps(_shape(fmt, ctx), ensure_ascii=False, indent=2, sort_keys=True) + "\n"
