"""How counts read in what we print: ``1 entry``, ``2 entries``, never ``1 entries``."""

from __future__ import annotations

__all__ = ["count", "noun"]


def noun(n: int, one: str, many: str | None = None) -> str:
    """The form of a noun that agrees with ``n``: ``one`` for 1, else ``many`` (default:
    ``one + "s"``)."""
    return one if n == 1 else (many or one + "s")


def count(n: int, one: str, many: str | None = None) -> str:
    """``n`` and its noun: ``count(1, "entry", "entries")`` is ``1 entry``,
    ``count(0, "entry", "entries")`` is ``0 entries``."""
    return f"{n} {noun(n, one, many)}"
