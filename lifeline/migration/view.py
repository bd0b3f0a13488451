"""A line written as lifeline-context 0.6.1's ``LIFELINE.md``, for teams mid-migration.

``lifeline render --format lifeline-context`` writes this view where lifeline-context
expects its own, so a teammate still on that tool reads our entries with its ``migrate`` or
``pull`` and gets the same ids (tested against the real 0.6.1). That format has no quoting:
a field value is one line read back stripped, and the body runs to an end marker. An entry
whose text the format cannot carry exactly would come back with another id; such an entry
is left out, with its descendants (their parent would be missing there), and counted.
Pure: entries in, text and what was left out, out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from lifeline.entry import LC_KINDS, Entry

__all__ = ["LC_KINDS", "LcView", "LcViewWriter", "render_lc_view", "unwritable_reason"]

_BODY_END = "<!-- lifeline:end -->"
_HEAD_MARK = "### #"
_LINE_FIELDS = ("author", "agent", "provider", "model", "kind", "summary")


@dataclass(slots=True)
class LcView:
    """The view's text, and the ids left out (each with why) and their descendants."""

    text: str
    unwritable: dict[str, str] = field(default_factory=dict)
    descendants: list[str] = field(default_factory=list)


def unwritable_reason(entry: Entry) -> str | None:
    """Why lifeline-context would not read ``entry`` back with its id, or None."""
    if entry.kind not in LC_KINDS:
        return f"kind {entry.kind!r} is not one lifeline-context knows"
    for name in _LINE_FIELDS:
        value: str = getattr(entry, name)
        if not value or value != value.strip() or "\n" in value:
            return f"{name} is empty, multi-line or has edge spaces"
        if _HEAD_MARK in value or _BODY_END in value:
            return f"{name} holds that format's own markers"
    if _BODY_END in entry.body:
        return "the body holds that format's end marker"
    return None


def _ts(ts: str) -> str:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).isoformat()


def _entry_text(n: int, e: Entry) -> str:
    parents = ", ".join(e.parents) if e.parents else "—"
    fields = [
        f"### #{n:04d} — {_ts(e.ts)} — {e.kind}",
        "",
        *(f"- **{name}**: {getattr(e, name)}" for name in _LINE_FIELDS),
        f"- **parents**: {parents}",
        f"- **id**: {e.id}",
        "",
        "**Body**:",
        e.body,
        "",
        _BODY_END,
        "",
    ]
    return "\n".join(fields)


class LcViewWriter:
    """The view piece by piece: :meth:`head`, then :meth:`block` per entry (parents first,
    as the store streams them); what is left out is gathered in :attr:`view`."""

    def __init__(self, line: str) -> None:
        self.line = line
        self.view = LcView("")
        self._left_out: set[str] = set()
        self._written = 0

    def head(self) -> str:
        return (
            f"# LIFELINE — line {self.line}\n\n"
            "> Written by lifeline-mesh (`lifeline render --format lifeline-context`) in the\n"
            "> format of lifeline-context 0.6, for its `migrate` and `pull`. Do not edit.\n\n"
            "## Entries\n\n"
        )

    def block(self, entry: Entry) -> str:
        """The text that follows for ``entry`` ("" when it is left out)."""
        reason = unwritable_reason(entry)
        if reason is not None:
            self.view.unwritable[entry.id] = reason
        elif self._left_out.intersection(entry.parents):
            self.view.descendants.append(entry.id)
        else:
            self._written += 1
            text = _entry_text(self._written, entry)
            return text if self._written == 1 else "\n" + text
        self._left_out.add(entry.id)
        return ""


def render_lc_view(entries: Iterable[Entry], line: str) -> LcView:
    """The view of ``entries`` (parents first, as the store streams them)."""
    writer = LcViewWriter(line)
    writer.view.text = writer.head() + "".join(writer.block(e) for e in entries)
    return writer.view
