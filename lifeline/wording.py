"""How what we print reads: counts (``1 entry``, ``2 entries``, never ``1 entries``), and
text from elsewhere (an entry's summary, a peer's reason) kept to one safe terminal line."""

from __future__ import annotations

__all__ = ["count", "noun", "one_line"]


def noun(n: int, one: str, many: str | None = None) -> str:
    """The form of a noun that agrees with ``n``: ``one`` for 1, else ``many`` (default:
    ``one + "s"``)."""
    return one if n == 1 else (many or one + "s")


def count(n: int, one: str, many: str | None = None) -> str:
    """``n`` and its noun: ``count(1, "entry", "entries")`` is ``1 entry``,
    ``count(0, "entry", "entries")`` is ``0 entries``."""
    return f"{n} {noun(n, one, many)}"


def one_line(text: str, cap: int | None = None) -> str:
    """``text`` safe for one terminal line: newlines as spaces, other control characters
    (ESC, CR...) shown escaped, and with ``cap``, at most that many characters (then ``…``)."""
    if cap is not None and len(text) > cap:
        text = text[:cap] + "…"
    text = text.replace("\n", " ")
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
