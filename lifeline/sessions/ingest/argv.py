"""An argv seen as the command line it stands for (decision 0118).

Codex's shell tool takes its ``command`` as an argv — ``["bash", "-lc", "…"]``, or the
program itself: ``["mysql", "--password", "X"]`` — ``local_shell_call`` its
``action.command``, an MCP tool its ``args``. There a flag and its value are two JSON
strings, and the rules written for a command line (``--password X``, ``docker login -p X``,
``curl -u user:pw``, ``curl -b 'sid=…'``) see neither with the other. So the redactor runs
the rules once more over such an array written as one command line, each string quoted as
``shlex.join`` would quote it (``'admin:pa ss!'``: where a rule sees a word's ends as in a
shell), and marks each finding in the strings it lies in.

An argv is a JSON array of two strings or more, nothing else, one of which begins like a
flag (``-p``, ``--token``): only there can a string be a flag's value.

Pure.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from typing import Any, TypeGuard

import re2

from lifeline.sessions.ingest.ruleset import Span

__all__ = ["RAW_ARGV", "command_line", "cuts", "is_argv"]

_FLAG = re.compile(r"--?[A-Za-z]")
_UNSAFE = re.compile(r"[^\w@%+=:,./-]", re.ASCII)  # what shlex.quote quotes a word for
# On a raw JSON line: a string that begins like a flag, in an array (or an object's member
# after another, which costs only the slower walk): the line may hold an argv.
RAW_ARGV = re2.compile(rb'[\[,]\s*"--?[A-Za-z]')


def is_argv(value: Any) -> TypeGuard[Sequence[str]]:
    """Whether ``value`` is an argv: a list of two strings or more, one of them a flag."""
    return (
        isinstance(value, list | tuple)
        and len(value) >= 2
        and all(isinstance(v, str) for v in value)
        and any(_FLAG.match(v) is not None for v in value)
    )


def _quote(word: str) -> str:
    """``word`` as a shell would need it: bare, else in single quotes, else (it holds one)
    in double quotes; a word holding both is left bare (its own quotes tell the rules)."""
    if word and _UNSAFE.search(word) is None:
        return word
    if "'" not in word:
        return f"'{word}'"
    return f'"{word}"' if '"' not in word else word


def command_line(argv: Sequence[str]) -> tuple[bytes, list[tuple[int, int]]]:
    """``argv`` as one command line (UTF-8), and where each of its strings lies in it
    (byte offsets of the string itself, its quotes left out)."""
    parts: list[bytes] = []
    places: list[tuple[int, int]] = []
    at = 0
    for word in argv:
        quoted = _quote(word).encode("utf-8", "surrogatepass")
        size = len(word.encode("utf-8", "surrogatepass"))
        start = at + (1 if len(quoted) > size else 0)  # after the opening quote
        places.append((start, start + size))
        parts.append(quoted)
        at += len(quoted) + 1
    return b" ".join(parts), places


def cuts(
    found: list[Span], places: list[tuple[int, int]]
) -> tuple[dict[int, list[Span]], list[str]]:
    """What ``found`` (sorted, disjoint spans of a command line) covers of each string of
    its argv (``places``, from :func:`command_line`), in the string's own byte offsets, and
    the kind of each finding that touched a string (a span over spaces or quotes only is
    nothing)."""
    per: dict[int, list[Span]] = {}
    kinds: list[str] = []
    ends = [last for _first, last in places]  # ascending, as the strings lie in the line
    for start, end, kind in found:
        touched = False
        index = bisect.bisect_right(ends, start)  # the first string ending past ``start``
        while index < len(places) and places[index][0] < end:
            first, last = places[index]
            low, high = max(start, first), min(end, last)
            if low < high:
                per.setdefault(index, []).append((low - first, high - first, kind))
                touched = True
            index += 1
        if touched:
            kinds.append(kind)
    return per, kinds
