"""Progress of a long command on one terminal line of stderr, shown only to a person.

A command that reads or writes a whole line (import, render, verify) says how far it is.
The counter is drawn only when stderr is a terminal and the command is not asked for
machine output (``--json``): piped, redirected or scripted runs get no control characters.
Redraws are throttled (at most every :data:`REDRAW_S`), so counting costs nothing measurable
per entry; the line is cleared when the command ends, successful or not.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

__all__ = ["REDRAW_S", "Progress", "progress_for"]

REDRAW_S = 0.2


class Progress:
    """``with Progress(...) as p: p.advance(n)``; a no-op when not ``enabled``."""

    def __init__(
        self,
        label: str,
        total: int | None = None,
        *,
        enabled: bool,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.enabled = enabled
        self._stream = stream if stream is not None else sys.stderr
        self._clock = clock
        self._next = 0.0
        self._drawn = False
        self.note = ""

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _exc: BaseException | None,
        _tb: TracebackType | None,
    ) -> None:
        self.close()

    def advance(self, count: int = 1) -> None:
        """Count ``count`` more items done; redraw when the last draw is old enough."""
        self.done += count
        if self.enabled and self._clock() >= self._next:
            self._draw()

    def update(self, done: int, total: int | None = None, note: str = "") -> None:
        """Set how many are done (and of how many, and a note such as a file name)."""
        if total is not None:
            self.total = total
        self.note = note
        self.advance(done - self.done)

    def _draw(self) -> None:
        self._next = self._clock() + REDRAW_S
        if self.total:
            share = min(self.done, self.total) / self.total
            filled = int(share * 20)
            bar = "#" * filled + "." * (20 - filled)
            text = f"{self.label} [{bar}] {self.done:,}/{self.total:,} ({share:.0%})"
        else:
            text = f"{self.label} {self.done:,}"
        if self.note:
            text += f" {self.note}"
        self._stream.write(f"\r\x1b[K{text}")
        self._stream.flush()
        self._drawn = True

    def close(self) -> None:
        """Clear the counter's line, so what the command prints next starts clean."""
        if self._drawn:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._drawn = False


def progress_for(args: argparse.Namespace, label: str, total: int | None = None) -> Progress:
    """A :class:`Progress` for a CLI command: shown on a terminal, hidden with ``--json``."""
    quiet = bool(getattr(args, "json", False)) or not sys.stderr.isatty()
    return Progress(label, total, enabled=not quiet)
