"""Reading structure out of entry bodies: thread lines, checkpoint blocks, pin targets.

The shapes are the ones lifeline-context 0.6.1 wrote, so its ledgers read the same here::

    thread: <name or open-entry id>
    done:
      - item
    next:
      - item

A pin is a ``note`` whose body starts with ``pin: <id>``. A correction whose body holds the
line ``status: open`` rewords the open question it corrects instead of closing it
(docs/truth.md). Pure functions, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = [
    "BLOCKS",
    "THREAD_LONGEST",
    "Checkpoint",
    "checkpoint_body",
    "checkpoint_summary",
    "on_thread",
    "parse_checkpoint",
    "pin_body",
    "pin_target",
    "reword_body",
    "rewords",
    "thread_of",
]

BLOCKS = ("goal", "done", "next", "blocked", "tried")
THREAD_LONGEST = 400  # characters of a thread's name (thread_of); UTF-8 within 1.6 kB
_THREAD_RE = re.compile(r"^thread:[ \t]*(\S.*?)\s*$", re.MULTILINE)
_STILL_OPEN_RE = re.compile(r"^status:[ \t]*open[ \t]*$", re.MULTILINE)
_PIN_RE = re.compile(r"^pin:[ \t]*([0-9a-f]{64})\b")
_BLOCK_RE = re.compile(r"^(goal|done|next|blocked|tried):[ \t]*(.*?)\s*$")
_ITEM_RE = re.compile(r"^[ \t]+-[ \t]*(.*?)\s*$")


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The parsed blocks of one checkpoint body."""

    thread: str | None
    blocks: dict[str, tuple[str, ...]] = field(default_factory=dict)


def thread_of(body: str) -> str | None:
    """The thread an entry belongs to: its first ``thread:`` line, if any, its first
    :data:`THREAD_LONGEST` characters. A thread's name is a key of the truth tables, and
    PostgreSQL refuses an index key over ~2.7 kB: a longer name made a hub refuse the entry
    (every sync that carried it failed), where a line file took it."""
    if "thread:" not in body:  # fast path: most bodies have none
        return None
    found = _THREAD_RE.search(body)
    return found.group(1)[:THREAD_LONGEST] if found else None


def on_thread(thread: str, body: str) -> str:
    """``body`` recorded on ``thread`` (`log --thread`): the line ``thread: <thread>`` first,
    then a blank line and ``body`` when it holds more than blanks; ``body`` as it is when its
    thread line already names ``thread``. The shape lifeline-context 0.6.1 wrote."""
    if thread_of(body) == thread:
        return body
    return f"thread: {thread}" + (f"\n\n{body}" if body.strip() else "")


def pin_body(target: str, why: str = "") -> str:
    """The body of the note that pins ``target`` (a full id): ``pin: <id>``, then a blank
    line and ``why`` (trimmed) when one is given, as lifeline-context 0.6.1 wrote it."""
    why = why.strip()
    return f"pin: {target}" + (f"\n\n{why}" if why else "")


def rewords(kind: str, body: str) -> bool:
    """Whether a correction keeps the question it corrects open (a ``status: open`` line)."""
    return kind == "correction" and "status:" in body and bool(_STILL_OPEN_RE.search(body))


def reword_body(body: str) -> str:
    """``body`` with the ``status: open`` line that makes a correction reword a question."""
    return body if rewords("correction", body) else f"status: open\n{body}".strip()


def pin_target(kind: str, body: str) -> str | None:
    """The id a pin note pins, or None when the entry is not a pin."""
    if kind != "note":
        return None
    found = _PIN_RE.match(body)
    return found.group(1) if found else None


def parse_checkpoint(body: str) -> Checkpoint:
    """Blocks of a checkpoint; an inline value (``next: x``) counts as one item."""
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in body.splitlines():
        head = _BLOCK_RE.match(line)
        if head:
            current = blocks.setdefault(head.group(1), [])
            if head.group(2):
                current.append(head.group(2))
            continue
        item = _ITEM_RE.match(line)
        if item and current is not None:
            if item.group(1):
                current.append(item.group(1))
            continue
        current = None
    return Checkpoint(thread_of(body), {k: tuple(v) for k, v in blocks.items() if v})


def checkpoint_body(thread: str, blocks: dict[str, list[str]]) -> str:
    """The body a new checkpoint is written with (the shape :func:`parse_checkpoint` reads)."""
    lines = [f"thread: {thread}"]
    for name in BLOCKS:
        items = [" ".join(i.split()) for i in blocks.get(name, []) if i.strip()]
        if items:
            lines.append(f"{name}:")
            lines.extend(f"  - {i}" for i in items)
    return "\n".join(lines)


def checkpoint_summary(title: str, blocks: dict[str, list[str]]) -> str:
    """The one-line summary of a checkpoint: its thread's title and the first item that
    says where work stands (next, else blocked, goal, done, tried), as lifeline-context
    wrote it: ``checkpoint main: next — run the load test``."""
    for name in ("next", "blocked", "goal", "done", "tried"):
        items = [" ".join(i.split()) for i in blocks.get(name, []) if i.strip()]
        if items:
            return f"checkpoint {title}: {name} — {items[0]}"[:200]
    raise ValueError("a checkpoint needs at least one item")
