"""The text of a checkpoint entry: where work stopped on a thread.

Pure. Validates the items and names the summary; the body is written by the truth layer's
:func:`~lifeline.truth.parse.checkpoint_body` (and its summary by `checkpoint_summary`), in the
format lifeline-context 0.6.1 wrote,
so readers of either tool parse both::

    thread: T
    goal:
      - ...
    done:
      - item
    next:
      - item
    blocked:
      - item
    tried:
      - item

Empty sections are left out. The summary leads with the first ``next`` item (what the next
agent should do), else the first item of the other sections.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lifeline.errors import InvalidEntry
from lifeline.truth.parse import BLOCKS, checkpoint_body, checkpoint_summary
from lifeline.wording import noun

__all__ = ["SECTIONS", "CheckpointText"]

SECTIONS = BLOCKS


def _clean(items: tuple[str, ...], section: str) -> tuple[str, ...]:
    out: list[str] = []
    for item in items:
        text = " ".join(item.split())  # one line per item: the format is line-based
        if not text:
            raise InvalidEntry(f"an empty item in {section!r}; give each item some text")
        out.append(text)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class CheckpointText:
    """A thread's state; ``title`` is what the summary calls the thread."""

    thread: str
    title: str
    goal: tuple[str, ...] = field(default_factory=tuple)
    done: tuple[str, ...] = field(default_factory=tuple)
    next: tuple[str, ...] = field(default_factory=tuple)
    blocked: tuple[str, ...] = field(default_factory=tuple)
    tried: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def build(
        cls, thread: str, title: str | None = None, **sections: list[str] | None
    ) -> CheckpointText:
        thread = thread.strip()
        if not thread or "\n" in thread:
            raise InvalidEntry(f"thread {thread!r} must be one non-empty line, e.g. 'main'")
        unknown = set(sections) - set(SECTIONS)
        if unknown:
            sections_named = noun(len(unknown), "section")
            raise InvalidEntry(
                f"unknown checkpoint {sections_named} {sorted(unknown)}; use {SECTIONS}"
            )
        cleaned = {name: _clean(tuple(sections.get(name) or ()), name) for name in SECTIONS}
        if not any(cleaned.values()):
            raise InvalidEntry(
                "a checkpoint needs at least one item in goal, done, next, blocked or tried"
            )
        return cls(thread=thread, title=title or thread, **cleaned)

    def body(self) -> str:
        # The truth layer parses checkpoints; it also owns how they are written.
        return checkpoint_body(self.thread, {name: list(getattr(self, name)) for name in SECTIONS})

    def summary(self) -> str:
        blocks = {name: list(getattr(self, name)) for name in SECTIONS}
        return checkpoint_summary(self.title, blocks)
