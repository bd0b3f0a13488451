"""Redaction: secrets become typed markers before anything is written (decision 0019).

A marker is ``[REDACTED:<type>]`` and nothing else: no hash, no length, no prefix of the
secret. A hash of a secret — even keyed by a constant every node shares — lets anyone who
holds the ledger test guesses offline (a short password falls in seconds), so the marker
keeps no function of the secret at all. It is still deterministic (the same input always
gives the same output), which is what content addressing needs: two machines ingesting
one file write the same entries. The price: two different secrets of one type look alike.

Pure: strings in, strings out, counts by type. Configurable patterns come from
``.lifeline/config.json`` (``sessions.redact``); all machines of a mesh should share them
for ids to agree.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BUILTIN_PATTERNS", "Redactor", "marker"]


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


# (type, pattern). Each starts with a literal where it can, so the regex engine scans for
# it at C speed; a match glued to a word character before it is left alone (the check is
# in the replacer, a leading \\b would disable that fast scan). Specific patterns first.
BUILTIN_PATTERNS: tuple[tuple[str, str], ...] = (
    (
        "private-key",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|.*\Z)",
    ),
    ("anthropic-key", r"sk-ant-[A-Za-z0-9_\-]{16,}"),
    ("openai-key", r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
    ("stripe-key", r"[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("aws-access-key", r"(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}(?![0-9A-Za-z])"),
    ("github-token", r"gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}"),
    ("gitlab-token", r"glpat-[A-Za-z0-9_\-]{20,}"),
    ("slack-token", r"xox[abposr]-[A-Za-z0-9\-]{10,}"),
    ("google-api-key", r"AIza[0-9A-Za-z_\-]{35}"),
    ("npm-token", r"npm_[A-Za-z0-9]{36}(?![0-9A-Za-z])"),
    ("jwt", r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    # scheme://user:password@host — the credentials go, the host stays
    ("url-credentials", r"://[^\s:/@'\"]+:[^\s@/'\"]+@"),
)
# Matched on the lower-cased text (same offsets for ASCII): a name that says it is secret,
# then a quoted literal (``token = "…"``, ``"api_key": "…"``), an unspaced shell/.env
# assignment (``DB_PASSWORD=…``) or a YAML/header value (``password: …``). Code such as
# ``token = sign(user)`` is left alone: unquoted, spaced assignments are expressions.
_NAMES = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "api_key",
    "accesskey",
    "access_key",
    "privatekey",
    "private_key",
    "credentials",
    "credential",
)
_ASSIGN_TAIL = (  # what follows a name (matched right after it, found with str.find)
    r"(?:_[a-z0-9_]*)?"
    r"(?:[\"']?\s*[:=]\s*[\"']((?!\[redacted)[^\s\"']{4,})[\"']"
    r"|=((?!\[redacted)(?!\$\{|<|[a-z_][a-z0-9_]*\.[a-z_])[^\s\"',;}()]{4,})"
    r"|[\"']?:[ \t]+((?!\[redacted)(?!(?:null|none|true|false|\d+)\b|\$\{|<"
    r"|[a-z_][a-z0-9_]*\.[a-z_])"
    r"[^\s\"',;}()\[]{4,}))"
)
_TAIL = re.compile(_ASSIGN_TAIL)
_ASSIGNMENT = re.compile(f"(?:{'|'.join(_NAMES)}){_ASSIGN_TAIL}")
_BEARER = re.compile(r"bearer ([a-z0-9._~+/=\-]{16,})")
_SLOW = (  # the same, case-insensitive, for text whose lower-casing changes its length
    (re.compile(_ASSIGNMENT.pattern, re.IGNORECASE), "env-secret"),
    (re.compile(_BEARER.pattern, re.IGNORECASE), "bearer-token"),
)
# Where any BUILTIN_PATTERNS match can begin (kept in step with them; a test checks it).
# Plain substring tests: CPython's ``in`` runs at GB/s, a regex alternation at MB/s.
_TRIGGERS = (
    "-----BEGIN ",
    "sk-",
    "_live_",
    "_test_",
    "AKIA",
    "ASIA",
    "AGPA",
    "AIDA",
    "AROA",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxa-",
    "xoxb-",
    "xoxp-",
    "xoxo-",
    "xoxs-",
    "xoxr-",
    "AIza",
    "npm_",
    "eyJ",
    "://",
)
# A short string pays less for one regex call than for a loop of ``in`` tests.
_TRIGGER_RE = re.compile("|".join(re.escape(t) for t in _TRIGGERS))
_SHORT = 256
_LINE_TRIGGERS = (*(t.encode() for t in _TRIGGERS), b":\\/")  # "/" may be written "\/"
_KEYWORDS = ("pass", "secret", "token", "key", "credential", "bearer")
# The same two tests on a raw JSON line (lower-cased for the names): a line that passes
# neither holds no string any rule could change, so its record is not walked at all. JSON
# escapes cannot hide a trigger: writers never escape ASCII letters, ``/`` may be ``\/``.
_NAME_WORDS = (
    b"password",
    b"passwd",
    b"passphrase",
    b"secret",
    b"token",
    b"apikey",
    b"api_key",
    b"accesskey",
    b"access_key",
    b"privatekey",
    b"private_key",
    b"credentials",
    b"credential",
)
_NAME_TAIL = re.compile(rb"(?:_[a-z0-9_]*)?(?:\\?[\"'])?\s*[:=]")
# A JSON member whose name says its value is secret: {"password": "…"}, {"api_key": "…"}
_SECRET_NAME = re.compile(
    r"[a-z0-9_\-]*(?:password|passwd|passphrase|secret|token|api_?key|access_?key"
    r"|private_?key|credentials?)(?:_[a-z0-9_]*)?"
)
_ANYWHERE = frozenset({"private-key", "url-credentials"})
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


@dataclass
class Redactor:
    """Replaces secrets in strings, counting what it removed by type."""

    extra: Iterable[tuple[str, str]] = ()  # (type, regex) from the configuration
    counts: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        rules = [(kind, re.compile(rx, re.DOTALL)) for kind, rx in BUILTIN_PATTERNS]
        rules += [(kind, re.compile(rx)) for kind, rx in self.extra]
        self._rules = rules

    def text(self, value: str) -> str:
        """``value`` with every secret replaced by its marker."""
        if len(value) < 8:
            return value
        # Most strings hold no secret: one scan for any pattern's first characters (and a
        # few substring checks for the assignment forms) decides, before any full pattern.
        if self.extra or (
            _TRIGGER_RE.search(value) is not None
            if len(value) < _SHORT
            else any(t in value for t in _TRIGGERS)
        ):
            for kind, rx in self._rules:
                if rx.search(value) is not None:
                    value = rx.sub(self._replacer(kind), value)
        low = value.lower()
        if any(word in low for word in _KEYWORDS):
            return self._lowered(value, low)
        return value

    def _replacer(self, kind: str) -> Any:
        def replace(match: re.Match[str]) -> str:
            start, text = match.start(), match.string
            if (
                kind not in _ANYWHERE
                and start
                and text[start - 1] in _WORD
                and not (start >= 2 and text[start - 2] == "\\")  # \n, \t in embedded JSON
            ):
                return match.group(0)  # part of a longer word: not a token of this kind
            self.counts[kind] += 1
            if kind == "url-credentials":  # scheme://user:password@host keeps the host
                return f"://{marker(kind)}@"
            return marker(kind)

        return replace

    def _lowered(self, value: str, low: str) -> str:
        """Secret assignments and bearer tokens, found on the lower-cased text."""
        spans: list[tuple[int, int, str]] = []
        if len(low) != len(value):  # a few non-ASCII letters change length when lowered
            for rx, kind in _SLOW:
                spans += [(*_group_span(m), kind) for m in rx.finditer(value)]
        else:
            for name in _NAMES:  # find() each name, then match what must follow it
                at = low.find(name)
                while at >= 0:
                    m = _TAIL.match(low, at + len(name))
                    if m is not None:
                        spans.append((*_group_span(m), "env-secret"))
                    at = low.find(name, at + 1)
            if "bearer " in low:
                spans += [(*_group_span(m), "bearer-token") for m in _BEARER.finditer(low)]
        if not spans:
            return value
        out, last = [], 0
        for start, end, kind in sorted(spans):
            if start < last:
                continue
            out += [value[last:start], marker(kind)]
            self.counts[kind] += 1
            last = end
        out.append(value[last:])
        return "".join(out)

    def may_hold_secret(self, raw: bytes) -> bool:
        """False when no rule can change any string of this raw JSON line (cheap)."""
        if self.extra:
            return True
        if any(t in raw for t in _LINE_TRIGGERS):
            return True
        low = raw.lower()
        if b"bearer " in low:
            return True
        for word in _NAME_WORDS:  # find() and one anchored match: no scan of every letter
            at = low.find(word)
            while at >= 0:
                if _NAME_TAIL.match(low, at + len(word)) is not None:
                    return True
                at = low.find(word, at + 1)
        return False

    def value(self, data: Any) -> Any:
        """Every string in a JSON-like value redacted (keys included); a string member
        whose name says it is secret (``"password": "…"``) is replaced whole."""
        if isinstance(data, str):
            return self.text(data)
        if isinstance(data, list | tuple):
            return [self.value(v) for v in data]
        if isinstance(data, dict):
            return {self.text(str(k)): self._member(str(k), v) for k, v in data.items()}
        return data

    def _member(self, name: str, value: Any) -> Any:
        if (
            isinstance(value, str)
            and len(value) >= 4
            and not value.startswith("[REDACTED:")
            and _SECRET_NAME.fullmatch(name.lower())
        ):
            self.counts["env-secret"] += 1
            return marker("env-secret")
        return self.value(value)


def _group_span(match: re.Match[str]) -> tuple[int, int]:
    """The span of the first group that took part in ``match``."""
    for group in range(1, (match.re.groups or 0) + 1):
        if match.group(group) is not None:
            return match.span(group)
    return match.span()
