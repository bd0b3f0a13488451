"""Redaction: secrets become typed markers before anything is written (decisions 0019, 0052).

A marker is ``[REDACTED:<type>]`` and nothing else: no hash, no length, no prefix of the
secret. A hash of a secret — even keyed by a constant every node shares — lets anyone who
holds the ledger test guesses offline (a short password falls in seconds), so the marker
keeps no function of the secret at all. It is still deterministic (the same input always
gives the same output), which is what content addressing needs: two machines ingesting
one file write the same entries. The price: two different secrets of one type look alike.

What is a secret is decided by :mod:`lifeline.sessions.ingest.ruleset` (gitleaks' rules and our
own, on RE2); a JSON member whose name says its value is secret (``"password": "…"``) is
replaced whole. Configured patterns (``sessions.redact`` in ``.lifeline/config.json``,
Python regexes) run first. All machines of a mesh need the same rules and patterns for ids
to agree.

A string that holds JSON text (Codex's ``arguments``, Cursor's ``rawArgs``: an object or an
array, :func:`~lifeline.sessions.adapters.fields.json_text`) is redacted twice: what it
decodes to, value by value — where its quotes are quotes again and its ``\\u0070`` escapes
letters, as the adapter that decodes it after will see them — then, re-encoded compact when
that found something, as the text it is. Decision 0113: the quoted rules missed
``PGPASSWORD=\\"…\\"`` written inside such a string, and the adapter decoded a token
nobody had redacted.

An argv (a JSON array of strings with a flag in it: Codex's ``["mysql", "--password", "X"]``,
an MCP tool's ``args``) is redacted string by string, then as the command line it stands
for (:mod:`~lifeline.sessions.ingest.argv`), each finding marked in the strings it lies in:
a flag and its value are two strings, which no rule saw together (decision 0118).

Pure: strings in, strings out, counts by type.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import re2

from lifeline.sessions.adapters.fields import MAX_DEPTH, json_text
from lifeline.sessions.ingest.argv import RAW_ARGV, command_line, cuts, is_argv
from lifeline.sessions.ingest.ruleset import SEPARATOR, RuleSet, Span, builtin_rules

__all__ = ["Redactor", "marker"]


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


# A JSON member whose name says its value is secret: {"password": "…"}, {"api_key": "…"}
_SECRET_NAME = re.compile(
    r"[a-z0-9_\-]*(?:password|passwd|passphrase|secret|token|api_?key|access_?key"
    r"|private_?key|credentials?)(?:_[a-z0-9_]*)?"
)
# The same on a raw, lower-cased JSON line: such a member with a string value.
_MEMBER = re2.compile(
    rb'"[a-z0-9_\-]*(?:password|passwd|passphrase|secret|token|api_?key|access_?key'
    rb'|private_?key|credentials?)(?:_[a-z0-9_]*)?"\s*:\s*"'
)
# A string of a raw JSON line that begins with an object or an array: it may hold JSON text
_JSON_TEXT = re2.compile(rb'"(?: |\\[nrt])*[\[{]')
_MIN = 8  # no rule finds a secret in a shorter string
_JOIN = SEPARATOR.decode()
# Levels of containers the redactor walks, JSON texts decoded included: a record nests at
# most MAX_DEPTH (deeper lines are skipped), and a JSON text an adapter decodes in it
# MAX_DEPTH more; a text deeper than what is left is redacted as text only.
_DEPTH = 2 * MAX_DEPTH


@dataclass
class Redactor:
    """Replaces secrets in strings, counting what it removed by type."""

    extra: Iterable[tuple[str, str]] = ()  # (type, Python regex) from the configuration
    counts: Counter[str] = field(default_factory=Counter)
    rules: RuleSet | None = None  # the built-in rules when None

    def __post_init__(self) -> None:
        self._extra = [(kind, re.compile(rx)) for kind, rx in self.extra]
        self._rules = self.rules or builtin_rules()

    def text(self, value: str) -> str:
        """``value`` with every secret replaced by its marker."""
        return self._text(value, 0)

    def _text(self, value: str, depth: int) -> str:
        if len(value) < _MIN:
            return value
        inner = json_text(value, min(MAX_DEPTH, _DEPTH - depth))
        if inner is not None:
            before = self.counts.total()
            redacted = self._value(inner, depth + 1)
            if self.counts.total() != before:  # the text as what it holds less its secrets
                value = json.dumps(redacted, ensure_ascii=False, separators=(",", ":"))
        return self._plain(value)

    def _plain(self, value: str) -> str:
        for kind, rx in self._extra:
            if rx.search(value) is not None:
                value = rx.sub(self._counted(kind), value)
        raw = value.encode("utf-8", "surrogatepass")
        low = raw.lower()
        if not self._rules.may_match(low):
            return value
        spans = self._rules.spans(raw, low)
        if not spans:
            return value
        self.counts.update(kind for _, _, kind in spans)
        return _spliced(raw, spans)

    def _argv(self, argv: list[str]) -> list[str]:
        """``argv`` (its strings redacted each on its own) with what the rules find in the
        command line it stands for marked in the strings it lies in (decision 0118)."""
        line, places = command_line(argv)
        low = line.lower()
        if len(line) < _MIN or not self._rules.may_match(low):
            return argv
        found = self._rules.spans(line, low)
        if not found:
            return argv
        per, kinds = cuts(found, places)
        self.counts.update(kinds)
        for index, spans in per.items():
            argv[index] = _spliced(argv[index].encode("utf-8", "surrogatepass"), spans)
        return argv

    def _counted(self, kind: str) -> Any:
        def replace(_: re.Match[str]) -> str:
            self.counts[kind] += 1
            return marker(kind)

        return replace

    def may_hold_secret(self, raw: bytes) -> bool:
        """False when no rule can change any string of this raw JSON line (one scan).
        JSON writers never escape ASCII letters, but a JSON text inside a string may
        (``gh\\u0070_…``): a line with a ``\\u`` escape may hold anything; ``/`` (written
        ``\\/`` by some) is checked for apart."""
        if self._extra or b"\\u" in raw:
            return True
        return self._rules.may_match(raw.lower()) or b":\\/" in raw

    def record(self, raw: bytes, data: Any) -> Any:
        """``data`` (the JSON value of the line ``raw``) redacted, or ``data`` itself when
        nothing in it is secret, which is decided on the raw bytes: a keyword scan, then the
        rules once over the line with its JSON escapes undone (:func:`_view`)."""
        if self._extra or b"\\u" in raw:  # \uXXXX: the view would not show that character
            return self.value(data)
        low = raw.lower()
        # the rules whose keywords occur: in the raw line, a superset of those in its
        # strings (escapes never hide a letter; "/" may be written "\\/")
        picked = self._rules.picked(low.replace(b"\\/", b"/") if b"\\/" in raw else low)
        if not picked:
            return data
        if _MEMBER.search(low) is not None:
            return self._value(data)
        if _JSON_TEXT.search(raw) is not None:  # JSON text in a string: the view is not its
            return self.value(data)
        if RAW_ARGV.search(raw) is not None:  # an argv: the view does not join its strings
            return self.value(data)
        view = _view(raw)
        if not self._rules.probe(view, b"", picked):  # picked: no lower-case text needed
            return data
        return self._value(data)

    def value(self, data: Any) -> Any:
        """Every string in a JSON-like value redacted (keys included); a string member
        whose name says it is secret (``"password": "…"``) is replaced whole.

        One probe first: every string of ``data`` joined, the rules run once over the
        whole; only when it finds something is each string redacted on its own. Most
        records hold a keyword somewhere (``input_tokens``) and no secret."""
        if not self._extra:
            strings: list[str] = []
            if not _collect(data, strings):
                joined = _JOIN.join(strings).encode("utf-8", "surrogatepass")
                if not self._rules.probe(joined, joined.lower()):
                    return data
        return self._value(data)

    def _value(self, data: Any, depth: int = 0) -> Any:
        if isinstance(data, str):
            return self._text(data, depth)
        if isinstance(data, list | tuple):
            items = [self._value(v, depth + 1) for v in data]
            return self._argv(items) if is_argv(data) else items
        if isinstance(data, dict):
            return {
                self._text(str(k), depth + 1): self._member(str(k), v, depth + 1)
                for k, v in data.items()
            }
        return data

    def _member(self, name: str, value: Any, depth: int) -> Any:
        if (
            isinstance(value, str)
            and len(value) >= 4
            and not value.startswith("[REDACTED:")
            and _SECRET_NAME.fullmatch(name.lower())
        ):
            self.counts["env-secret"] += 1
            return marker("env-secret")
        return self._value(value, depth)


def _spliced(raw: bytes, spans: list[Span]) -> str:
    """The UTF-8 text ``raw`` with each span (sorted, disjoint) replaced by its marker."""
    out, last = [], 0
    for start, end, kind in spans:
        out += [raw[last:start], marker(kind).encode()]
        last = end
    out.append(raw[last:])
    joined = b"".join(out)
    try:
        return joined.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:  # a span cut a lone surrogate: keep the rest readable
        return joined.decode("utf-8", "replace")


def _view(raw: bytes) -> bytes:
    """A JSON line (without \\u escapes) as its strings, each between :data:`SEPARATOR`s:
    the escapes undone, every quote that delimits a string made a separator. Between them
    stay the JSON punctuation, numbers and literals, which no rule takes for a secret
    alone; a match that crosses a separator counts in the probe (see ``Rule.spans``)."""
    if b"\\" not in raw:  # no escape: the same steps, less the ones that change nothing
        return raw.replace(b'"', SEPARATOR).replace(b"\x02", b'"').replace(b"\x01", b"\\")
    view = raw.replace(b"\\\\", b"\x01").replace(b'\\"', b"\x02").replace(b'"', SEPARATOR)
    view = view.replace(b"\\n", b"\n").replace(b"\\t", b"\t").replace(b"\\r", b"\r")
    view = view.replace(b"\\/", b"/").replace(b"\\b", b"\b").replace(b"\\f", b"\f")
    return view.replace(b"\x02", b'"').replace(b"\x01", b"\\")


def _collect(data: Any, out: list[str], depth: int = 0) -> bool:
    """The strings of ``data`` a rule could match, keys included, into ``out``, and those of
    every JSON text a string holds (decoded as :meth:`Redactor._text` decodes it, at the same
    depths); True when a member's name says its string value is secret (it is replaced
    whatever it holds)."""
    if isinstance(data, str):
        if len(data) < _MIN:
            return False
        out.append(data)
        inner = json_text(data, min(MAX_DEPTH, _DEPTH - depth))
        return inner is not None and _collect(inner, out, depth + 1)
    if isinstance(data, list | tuple):
        if is_argv(data):  # and the command line it stands for
            out.append(command_line(data)[0].decode("utf-8", "surrogatepass"))
        return any([_collect(v, out, depth + 1) for v in data])
    if isinstance(data, dict):
        named = False
        for key, value in data.items():
            name = str(key)
            named = _collect(name, out, depth + 1) or named
            if (
                isinstance(value, str)
                and len(value) >= 4
                and _SECRET_NAME.fullmatch(name.lower())
                and not value.startswith("[REDACTED:")
            ):
                named = True
            named = _collect(value, out, depth + 1) or named
        return named
    return False
