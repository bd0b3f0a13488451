"""What a node keeps and logs of the calls it refuses: bounded, whoever sends them.

A peer chooses the text of what it sends (a line name, a set name), and a refusal quotes
it; a peer also chooses how often it is refused. So nothing here grows with either:
:func:`cut` shortens any quoted value or reason to ``MAX_QUOTE`` / ``MAX_REASON``
characters, :class:`FailureRing` keeps the last ``FAILURES_KEPT`` reasons and counts the
rest, and :class:`QuietLog` logs a peer's first failure of a window and counts the
following ones, with at most ``LOG_LINES_PER_WINDOW`` lines per window from all peers
together (many addresses cannot flood the log either) and one summary line for what it
kept quiet (CONVENTIONS: repeated per-peer failures log once, then quietly).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from lifeline.errors import Refused
from lifeline.lines import is_line_name

__all__ = [
    "FAILURES_KEPT",
    "LOG_LINES_PER_WINDOW",
    "LOG_WINDOW_S",
    "MAX_QUOTE",
    "MAX_REASON",
    "FailureRing",
    "QuietLog",
    "cut",
    "not_shared",
    "peer_host",
    "quote",
    "quote_all",
]

MAX_QUOTE = 64  # characters of a peer's value (a line name…) quoted in a message
MAX_REASON = 300  # characters of a refusal's reason kept, logged or sent back
FAILURES_KEPT = 100  # reasons a server keeps; older ones are only counted
LOG_WINDOW_S = 60.0
LOG_LINES_PER_WINDOW = 20  # lines logged per window, all peers together


def cut(text: str, limit: int = MAX_REASON) -> str:
    """``text`` when short enough, else its start and how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} characters)"


def quote(value: str, limit: int = MAX_QUOTE) -> str:
    """``repr(value)`` for a message, its start only when long (a peer chose it)."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}… ({len(value)} characters)"


def not_shared(line: str) -> Refused:
    """The refusal of a call on a line this node does not share. Its words are read by the
    caller, whose own node does share it: "there" is the node serving the call."""
    name = line if is_line_name(line) else "LINE"  # a peer's text goes in quoted only
    return Refused(
        f"line {quote(line)} is not shared by the node serving there, so it neither sends "
        f"nor accepts it; the owner of that node can run `lifeline-mesh share {name}` on it"
    )


def quote_all(values: Iterable[str], limit: int = 8) -> str:
    """The first ``limit`` values, quoted, and how many more there are."""
    items = sorted(values)
    shown = ", ".join(quote(v) for v in items[:limit])
    more = len(items) - limit
    return f"[{shown}{f', and {more} more' if more > 0 else ''}]"


def peer_host(peer: str) -> str:
    """The host of a gRPC peer string (``ipv4:127.0.0.1:5000`` → ``ipv4:127.0.0.1``): a
    peer dialing again comes from another port, not from another peer."""
    return peer.rpartition(":")[0] or peer


class FailureRing(list[str]):
    """The last ``kept`` failure reasons (each cut), oldest first; ``total`` counts all."""

    def __init__(self, kept: int = FAILURES_KEPT) -> None:
        super().__init__()
        self.kept = kept
        self.total = 0

    def append(self, reason: str) -> None:
        self.total += 1
        super().append(cut(reason))
        if len(self) > self.kept:
            del self[0]


class QuietLog:
    """Logs a key's (a peer host's) first failure per window, then counts it quietly."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        window: float = LOG_WINDOW_S,
        lines: int = LOG_LINES_PER_WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = logger
        self._window = window
        self._lines = lines
        self._clock = clock
        self._started = clock()
        self._logged: set[str] = set()  # keys logged this window: at most ``lines``
        self.quiet = 0  # failures counted, not logged, this window

    def warning(self, key: str, message: str, *args: object) -> bool:
        """Log ``message % args`` (cut) unless ``key`` was logged this window or the
        window's lines are spent; True when it was logged."""
        self._roll()
        if key in self._logged or len(self._logged) >= self._lines:
            self.quiet += 1
            return False
        self._logged.add(key)
        self._log.warning("%s", cut(message % args))
        return True

    def _roll(self) -> None:
        now = self._clock()
        if now - self._started < self._window:
            return
        if self.quiet:
            self._log.warning(
                "%d more refused or failed calls in the last %.0fs were not logged one by "
                "one (%d peers logged)",
                self.quiet,
                now - self._started,
                len(self._logged),
            )
        self._started = now
        self._logged.clear()
        self.quiet = 0
