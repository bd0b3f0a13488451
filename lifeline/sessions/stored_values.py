"""Values read back from stored session entries, taken as counts, states and facts.

A sessions line is shared: its headers and statuses come from every member's ingest, and
from newer versions that may record a tool, a status or a field this one does not know.
One such entry must not stop the list, a bundle or the index for every session on every
node (the ledger keeps it for good), so each value is read as what it must be, and what is
not becomes its default: a count that is not a whole number in range is 0, a status this
version does not know is ``crashed`` (the reason kept), facts that do not validate keep
the fields that do. A header whose tool is unknown is left out of the list, counted.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from lifeline.sessions.model import SessionFacts, SessionStatus, Tool

__all__ = ["MAX_COUNT", "count", "counts", "facts", "session_status", "tool_of"]

# Counts past this are not counts (2**40: a trillion tokens in one message): 0 instead, so
# that sums of many stay far inside SQLite's 64-bit integers.
MAX_COUNT = 1 << 40
_STORED = frozenset(s.value for s in SessionStatus if s is not SessionStatus.LIVE)
_TOOLS = frozenset(t.value for t in Tool)


def count(value: object) -> int:
    """``value`` if it is a whole number in ``[0, MAX_COUNT)``, else 0 (bools are not)."""
    return value if type(value) is int and 0 <= value < MAX_COUNT else 0


def counts(value: object) -> dict[str, int]:
    """A stored ``{name: count}`` (skips by reason, redactions by type, usage…)."""
    if not isinstance(value, dict):
        return {}
    return {str(k): count(v) for k, v in value.items()}


def session_status(value: object) -> SessionStatus:
    """A stored status; anything else (``live`` is never stored) reads as crashed."""
    if isinstance(value, str) and value in _STORED:
        return SessionStatus(value)
    return SessionStatus.CRASHED


def tool_of(header: dict[str, Any]) -> Tool | None:
    """The header's tool (``claude`` when it names none, as the first format wrote), or
    None when it names one this version does not read."""
    value = header.get("tool", "claude")
    return Tool(value) if isinstance(value, str) and value in _TOOLS else None


def facts(value: object) -> SessionFacts:
    """Stored facts; when they do not validate as a whole, the fields that do."""
    if not isinstance(value, dict):
        return SessionFacts()
    try:
        return SessionFacts.model_validate(value)
    except ValidationError:
        pass
    kept: dict[str, Any] = {}
    for name in SessionFacts.model_fields:
        if name in value:
            try:
                SessionFacts.model_validate({name: value[name]})
            except ValidationError:
                continue
            kept[name] = value[name]
    return SessionFacts.model_validate(kept)
