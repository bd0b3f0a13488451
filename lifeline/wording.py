"""How what we print reads: counts (``1 entry``, ``2 entries``, never ``1 entries``), and
text from elsewhere (an entry's summary or body, a peer's reason, a transcript) kept from
driving the terminal it is printed on: one safe line, or lines with their control characters
shown escaped."""

from __future__ import annotations

import re

__all__ = ["count", "noun", "one_line", "shown_text"]


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


def shown_text(text: str) -> str:
    """``text`` safe to print on a terminal, lines and tabs kept: every other control
    character (C0 such as ESC, BEL and a lone CR; DEL; C1 such as CSI) shown escaped
    (``\\x1b``). Text a member wrote (an entry, a session line) could otherwise clear the
    screen, retitle the window or, on some terminals, write the clipboard (OSC 52). A line
    ending CR LF reads as LF. For what is shown to people and models only: a file that must
    keep the text as written (``LIFELINE.md``, JSON) does not pass through here."""
    return _CONTROL.sub(_escaped, text.replace("\r\n", "\n"))


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0 but LF and TAB, DEL, C1


def _escaped(match: re.Match[str]) -> str:
    return repr(match.group())[1:-1]
