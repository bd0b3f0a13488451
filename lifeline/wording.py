"""How what we print reads: counts (``1 entry``, ``2 entries``, never ``1 entries``), and
text from elsewhere (an entry's summary or body, a peer's reason, a transcript) kept from
driving the terminal it is printed on: one safe line, or lines with their control characters
shown escaped."""

from __future__ import annotations

import re

__all__ = ["LONG_WORD", "clipped_words", "count", "error_text", "noun", "one_line", "shown_text"]


def noun(n: int, one: str, many: str | None = None) -> str:
    """The form of a noun that agrees with ``n``: ``one`` for 1, else ``many`` (default:
    ``one + "s"``)."""
    return one if n == 1 else (many or one + "s")


def count(n: int, one: str, many: str | None = None) -> str:
    """``n`` and its noun: ``count(1, "entry", "entries")`` is ``1 entry``,
    ``count(0, "entry", "entries")`` is ``0 entries``."""
    return f"{n} {noun(n, one, many)}"


# A word (a run without white space) longer than this is clipped in an error: an argument
# of thousands of characters, a pasted blob, told back whole, buries the line that matters.
LONG_WORD = 240
_LONG = re.compile(rf"\S{{{LONG_WORD + 1},}}")


def clipped_words(text: str) -> str:
    """``text`` with each word over ``LONG_WORD`` characters cut to its start, ``…`` and its
    length: ``'xxx…' (5,002 characters)``. Paths and ids are far shorter."""
    return _LONG.sub(_clipped, text)


def error_text(text: str) -> str:
    """An error's text as printed: control characters escaped, overlong words clipped."""
    return shown_text(clipped_words(text))


def _clipped(match: re.Match[str]) -> str:
    word = match.group()
    body = word.rstrip(_AFTER)
    tail = word[len(body) :]  # the closing quote and punctuation the message put after it
    quotes = tail[: len(tail) - len(tail.lstrip(_QUOTES))]
    core = body.lstrip(_QUOTES + "([")  # what was given, counted without the message's quote
    lead = body[: len(body) - len(core)]
    shown = f"{lead}{core[: LONG_WORD // 2]}…{quotes}"
    return f"{shown} ({len(core):,} characters){tail[len(quotes) :]}"


_QUOTES = "'\"`"
_AFTER = _QUOTES + ".,;:)]"


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
