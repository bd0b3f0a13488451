"""Secret rules: gitleaks' rule file plus our own, compiled once, found as spans (decision 0052).

The rules are data: ``secret_rules/gitleaks.toml`` (gitleaks' default rules, MIT, pinned to
one commit) and ``secret_rules/lifeline.toml`` (the forms gitleaks lacks), both in gitleaks'
shape: ``id``, ``regex`` (RE2), ``keywords``, ``secretGroup``, ``entropy``, ``allowlists``.
They run on RE2 (``google-re2``), the engine they are written for: linear time whatever the
text (a transcript may hold anything), and the same matches on every machine.

Semantics follow gitleaks': a rule runs on a text only when one of its keywords occurs in
the lower-cased text; the secret is its ``secretGroup``, else the first non-empty group,
else the whole match; a rule with an ``entropy`` keeps a secret whose Shannon entropy is
above it (rounded to 6 decimals so that no libm difference can change an id); allowlists
(the file's global one and the rule's own) drop a secret by regex (on the secret, the
match or the line) or stopword. Rules scoped to a file path are left out: a transcript has
no path. gitleaks' ``generic-api-key`` is left out too: our ``env-secret`` rules take the
keyword = value forms, with exceptions written for code (decision 0052). One regex of
gitleaks' global allowlist is mended as it is loaded (:data:`_MENDED`): ``(?i)^true|false|null$``
reads ``^true`` or ``false`` anywhere or ``null$``, and the global list applies to every rule,
so any secret holding "false" or ending in "null" passed (decision 0113).

Every machine of a mesh needs the same rules (the same files and the same ``google-re2``)
for two ingests of one transcript to give the same entry ids.
"""

from __future__ import annotations

import math
import tomllib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import re2

__all__ = ["SEPARATOR", "Rule", "RuleSet", "Span", "builtin_rules"]

Span = tuple[int, int, str]  # byte offsets in the UTF-8 text, and the marker type
# Joins the strings of one record for a single probe: a new line on each side, so every rule
# sees a string's ends as it sees the ends of a lone string (whitespace), and a NUL, so a
# match crossing from one string into the next shows.
SEPARATOR = b"\n\x00\n"
_SKIPPED = frozenset({"generic-api-key"})
# Regexes of gitleaks' file that do not say what they mean, and what they mean; the file
# stays as gitleaks wrote it.
_MENDED = {"(?i)^true|false|null$": "(?i)^(?:true|false|null)$"}
_OPTIONS = re2.Options()
_OPTIONS.max_mem = 32 << 20
_GATES = 512  # sets of rules whose alternation is kept compiled (RuleSet._gate)
_GATE_AFTER = 16  # texts that picked a set of rules before its alternation is compiled
_NO_GATE = object()  # a set whose alternation RE2 could not compile


def _compile(pattern: str) -> Any:
    return re2.compile(pattern.encode(), _OPTIONS)


class _Allow:
    """An allowlist: regexes (compiled when first needed) and stopwords."""

    def __init__(
        self, target: str, patterns: tuple[str, ...], stopwords: tuple[bytes, ...], every: bool
    ) -> None:
        self.target = target  # "secret", "match" or "line"
        self.patterns = patterns
        self.stopwords = stopwords
        self.every = every  # condition AND: every criterion given must hold
        self._regexes: tuple[Any, ...] | None = None

    def allows(self, secret: bytes, match: bytes, line: bytes) -> bool:
        text = {"secret": secret, "match": match}.get(self.target, line)
        checks = []
        if self.patterns:
            if self._regexes is None:
                self._regexes = tuple(_compile(rx) for rx in self.patterns)
            checks.append(any(rx.search(text) is not None for rx in self._regexes))
        if self.stopwords:
            low = secret.lower()
            checks.append(any(word in low for word in self.stopwords))
        if not checks:
            return False
        return all(checks) if self.every else any(checks)


def _allowlist(spec: dict[str, Any]) -> _Allow | None:
    if spec.get("paths") and spec.get("condition", "OR").upper() == "AND":
        return None  # a path criterion never holds here, so the whole list never does
    patterns = tuple(_MENDED.get(str(rx), str(rx)) for rx in spec.get("regexes", ()))
    stopwords = tuple(str(w).lower().encode() for w in spec.get("stopwords", ()))
    if not patterns and not stopwords:
        return None
    every = spec.get("condition", "OR").upper() == "AND"
    return _Allow(spec.get("regexTarget", "secret"), patterns, stopwords, every)


@dataclass
class Rule:
    """One rule: where it runs (keywords), what it finds, what it lets through. Its regex
    is compiled when a text first holds one of its keywords: most rules never run."""

    id: str
    pattern: str
    keywords: tuple[bytes, ...]
    group: int
    entropy: float
    allow: tuple[_Allow, ...]
    _regex: Any = None

    @property
    def regex(self) -> Any:
        if self._regex is None:
            self._regex = _compile(self.pattern)
        return self._regex

    def spans(self, text: bytes, common: tuple[_Allow, ...], *, probe: bool = False) -> list[Span]:
        """The secrets this rule finds in ``text`` (its caller picked it: one of its keywords
        occurs). ``probe``: ``text`` is several strings
        joined by :data:`SEPARATOR`; a match that crosses one counts even when dropped (it
        could have hidden a match inside one string), and the first finding ends the scan."""
        found: list[Span] = []
        for match in self.regex.finditer(text):
            start, end = self._secret_span(match)
            whole = match.group(0)
            if probe and b"\x00" in whole:
                return [(start, end, self.id)]
            if end <= start:
                continue
            secret = text[start:end]
            if self.entropy and round(shannon(secret), 6) <= self.entropy:
                continue
            if any(a.allows(secret, whole, _line_of(text, start)) for a in (*self.allow, *common)):
                continue
            found.append((start, end, self.id))
            if probe:
                break
        return found

    def _secret_span(self, match: Any) -> tuple[int, int]:
        groups = match.re.groups or 0
        if self.group and self.group <= groups:
            span: tuple[int, int] = match.span(self.group)
            return span
        for group in range(1, groups + 1):
            if match.group(group):
                found: tuple[int, int] = match.span(group)
                return found
        whole: tuple[int, int] = match.span()
        return whole


def shannon(data: bytes) -> float:
    """Shannon entropy of ``data`` in bits per byte (gitleaks' measure)."""
    if not data:
        return 0.0
    size = len(data)
    return -sum(n / size * math.log2(n / size) for n in Counter(data).values())


def _line_of(text: bytes, at: int) -> bytes:
    start = text.rfind(b"\n", 0, at) + 1
    end = text.find(b"\n", at)
    return text[start : end if end >= 0 else len(text)]


class RuleSet:
    """The rules of one redactor, compiled, with one keyword scan to pick them."""

    def __init__(self, rules: Iterable[Rule], common: Iterable[_Allow] = ()) -> None:
        self.rules = tuple(rules)
        self.common = tuple(common)
        words = sorted({k for rule in self.rules for k in rule.keywords})
        self._by_word: dict[bytes, list[int]] = {w: [] for w in words}
        self._always = [i for i, rule in enumerate(self.rules) if not rule.keywords]
        for index, rule in enumerate(self.rules):
            for word in rule.keywords:
                self._by_word[word].append(index)
        ordered = sorted(words, key=len, reverse=True)
        # Whether any keyword occurs: one RE2 scan that stops at the first (a literal
        # alternation, a small DFA). Which ones occur, overlapping ones included: an RE2 set.
        self._words = re2.compile(b"|".join(map(re2.escape, ordered)), _OPTIONS) if words else None
        self._set = re2.Set.SearchSet(_OPTIONS)
        for word in words:
            self._set.Add(re2.escape(word))
        self._set.Compile()
        self._set_words = words
        self._gates: dict[tuple[int, ...], Any] = {}
        self._seen: dict[tuple[int, ...], int] = {}

    def _may_find(self, picked: list[int], text: bytes) -> bool:
        """False when no rule of ``picked`` matches anywhere in ``text``: one scan of the
        alternation of their regexes (:meth:`_gate`) instead of one scan per rule. Every
        finding of a rule is a match of its regex, so this drops nothing; a match still
        goes through each rule (its secret group, entropy and allowlists)."""
        if len(picked) < 2:
            return bool(picked)
        key = tuple(picked)
        gate = self._gates.get(key)
        if gate is None:
            seen = self._seen[key] = self._seen.get(key, 0) + 1
            if seen < _GATE_AFTER:  # a rare set: its rules scan on their own
                return True
            gate = self._gate(key)
        return gate is _NO_GATE or gate.search(text) is not None

    def _gate(self, picked: tuple[int, ...]) -> Any:
        """The alternation of the regexes of ``picked``, compiled once per set of rules
        once it has been seen :data:`_GATE_AFTER` times (a compile costs a few ms; rare sets
        are not worth one), or ``_NO_GATE`` when it is too large for RE2's memory budget:
        then each rule scans on its own. A
        plain regex, not an RE2 set: RE2 answers a regex's search out of DFA memory with
        its NFA, where a set would answer "no match" (decision 0080)."""
        if len(self._gates) >= _GATES:
            self._gates.clear()
            self._seen.clear()
        try:
            gate = _compile("|".join(f"(?:{self.rules[i].pattern})" for i in picked))
        except re2.error:
            gate = _NO_GATE
        self._gates[picked] = gate
        return gate

    @classmethod
    def load(cls, documents: Iterable[dict[str, Any]], extra: Iterable[Rule] = ()) -> RuleSet:
        rules: list[Rule] = []
        common: list[_Allow] = []
        for doc in documents:
            glob = doc.get("allowlist")
            if isinstance(glob, dict) and (found := _allowlist(glob)) is not None:
                common.append(found)
            for spec in doc.get("rules", ()):
                if "regex" not in spec or "path" in spec or spec["id"] in _SKIPPED:
                    continue
                rules.append(rule_from(spec))
        return cls([*rules, *extra], common)

    def may_match(self, low: bytes) -> bool:
        """Whether any rule may find something in text whose lower-case form is ``low``."""
        return bool(self._always) or (
            self._words is not None and self._words.search(low) is not None
        )

    def picked(self, low: bytes) -> list[int]:
        """The rules whose keywords occur in ``low``, in rule order."""
        picked = set(self._always)
        for index in self._set.Match(low) or ():
            picked.update(self._by_word[self._set_words[index]])
        return sorted(picked)

    def probe(self, text: bytes, low: bytes, picked: list[int] | None = None) -> bool:
        """Whether any rule (of ``picked``, by default those whose keywords occur) may find
        a secret in one of the strings joined (by :data:`SEPARATOR`) into ``text``."""
        chosen = self.picked(low) if picked is None else picked
        if not self._may_find(chosen, text):
            return False
        return any(self.rules[i].spans(text, self.common, probe=True) for i in chosen)

    def spans(self, text: bytes, low: bytes) -> list[Span]:
        """Every secret the rules find in ``text`` (UTF-8), overlaps merged, in order."""
        found: list[tuple[int, int, int, str]] = []
        picked = self.picked(low)
        if not self._may_find(picked, text):
            return []
        for index in picked:
            found += [
                (s, e, index, kind) for s, e, kind in self.rules[index].spans(text, self.common)
            ]
        if not found:
            return []
        found.sort(key=lambda f: (f[0], -f[1], f[2]))
        merged: list[Span] = []
        for start, end, _, kind in found:
            if merged and start < merged[-1][1]:
                last = merged[-1]
                merged[-1] = (last[0], max(last[1], end), last[2])
            else:
                merged.append((start, end, kind))
        return merged


def rule_from(spec: dict[str, Any]) -> Rule:
    """A rule from its gitleaks-shaped table (its regex is checked when first used; the
    rule files' test compiles every one)."""
    allow = tuple(a for a in map(_allowlist, spec.get("allowlists", ())) if a is not None)
    return Rule(
        str(spec["id"]),
        str(spec["regex"]),
        tuple(str(k).lower().encode() for k in spec.get("keywords", ())),
        int(spec.get("secretGroup", 0)),
        float(spec.get("entropy", 0.0)),
        allow,
    )


def _document(name: str) -> dict[str, Any]:
    data = (
        resources.files("lifeline.sessions.ingest")
        .joinpath("secret_rules")
        .joinpath(name)
        .read_bytes()
    )
    return tomllib.loads(data.decode("utf-8"))


@cache
def builtin_rules() -> RuleSet:
    """Our rules first (their types win a tie), then gitleaks'; compiled once a process."""
    return RuleSet.load([_document("lifeline.toml"), _document("gitleaks.toml")])
