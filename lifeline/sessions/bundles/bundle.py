"""The continuation bundle: ordered typed slices, sized, rendered for injection.

A :class:`Bundle` is built by :mod:`lifeline.sessions.bundles.distill` from one or more sessions
and shrunk to a budget by :mod:`lifeline.sessions.bundles.fitting`. Each slice holds scalar
``fields`` and named ``groups`` of :class:`Fact`; every fact cites its origin (``src``:
provenance of the items it came from), and the Provenance slice is the table of those
citations, numbered in the order they first appear. Rendering is pure and deterministic:
the same bundle gives the same bytes (markdown, or JSON with sorted keys) on every node.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any

from lifeline.truth.budget import estimate_tokens

__all__ = [
    "BUNDLE_VERSION",
    "PROVIDER_FORMATS",
    "Bundle",
    "Fact",
    "Omission",
    "Slice",
    "SliceKind",
    "Source",
    "acceptance_text",
    "bundle_json",
    "deliver_bundle",
    "dumps_compact",
    "render_json",
    "render_markdown",
]

BUNDLE_VERSION = 1
_MARKER = "<!-- lifeline continuation bundle v1 -->"


class SliceKind(enum.StrEnum):
    ACCEPTANCE = "acceptance"
    CONTRACT = "contract"
    CONTEXT = "context"
    INTENT = "intent"
    PROVENANCE = "provenance"
    WORKLOG = "worklog"
    DEDUP = "dedup"


ORDER = tuple(SliceKind)


@dataclass(frozen=True, slots=True)
class Source:
    """Where a fact came from: one item of one stored session."""

    tool: str
    session: str  # the session's header id in the line
    native_ids: tuple[str, ...]
    lines: tuple[int, int]
    sha256: str
    hashed: int = field(default=0, compare=False, repr=False)  # computed once: renders look
    # sources up tens of thousands of times (the table, each fact's marks)

    def __post_init__(self) -> None:
        key = (self.tool, self.session, self.native_ids, self.lines, self.sha256)
        object.__setattr__(self, "hashed", hash(key))

    def __hash__(self) -> int:
        return self.hashed

    def as_json(self, full: bool = True) -> dict[str, Any]:
        """Full: the whole session id and sha256 and the tool's native ids. Short: what the
        markdown shows (12 and 16 hex digits; the Dedup manifest has the full session id)."""
        if not full:
            return {
                "tool": self.tool,
                "session": self.session[:12],
                "lines": list(self.lines),
                "sha256": self.sha256[:16],
            }
        return {
            "tool": self.tool,
            "session": self.session,
            "native_ids": list(self.native_ids),
            "lines": list(self.lines),
            "sha256": self.sha256,
        }


@dataclass(slots=True)
class Fact:
    text: str
    label: str = ""
    src: tuple[Source, ...] = ()
    flat: str = field(default="", compare=False, repr=False)  # text on one line, cached

    def __post_init__(self) -> None:
        self.flat = " ".join(self.text.split())


@dataclass(slots=True)
class Omission:
    """What the budget dropped from one group: a count, and the labels of the first few."""

    count: int = 0
    what: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Slice:
    kind: SliceKind
    fields: dict[str, Any] = field(default_factory=dict)
    groups: dict[str, list[Fact]] = field(default_factory=dict)
    omitted: dict[str, Omission] = field(default_factory=dict)


@dataclass(slots=True)
class Bundle:
    """A continuation bundle; ``cap`` is the text cap the fitter chose (0: none)."""

    key: str
    scope: str
    topic: str
    slices: dict[SliceKind, Slice]
    budget: int
    unit: str
    cap: int = 0
    provenance_dropped: int = 0
    full_sources: bool = True  # JSON: sources in full until the budget asks for less

    @property
    def ready(self) -> bool:
        return bool(self.slices[SliceKind.ACCEPTANCE].fields.get("ready"))

    def facts(self) -> list[Fact]:
        return [f for kind in ORDER for facts in self.slices[kind].groups.values() for f in facts]

    def sources(self) -> list[Source]:
        """Every cited source of the kept facts, in order of first citation."""
        seen: dict[Source, None] = {}
        for fact in self.facts():
            for source in fact.src:
                seen.setdefault(source)
        return list(seen)


def _clip(flat: str, cap: int) -> str:
    if cap and len(flat) > cap:
        return flat[: cap - 1].rstrip() + "…"
    return flat


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value) or "-"
    return "-" if value is None or value == "" else str(value)


def _refs(fact: Fact, numbers: dict[Source, int]) -> str:
    if not fact.src:
        return ""
    cited = sorted({numbers[s] for s in fact.src if s in numbers})
    return f" [{', '.join(f'P{n}' for n in cited)}]" if cited else ""


def _slice_lines(bundle: Bundle, kind: SliceKind, numbers: dict[Source, int]) -> list[str]:
    piece = bundle.slices[kind]
    lines = [f"## {kind.value.capitalize()}"]
    lines += [f"- {name}: {_value(value)}" for name, value in piece.fields.items()]
    for name, facts in piece.groups.items():
        gone = piece.omitted.get(name)
        if not facts and gone is None:
            continue
        lines.append(f"### {name.replace('_', ' ')}")
        for fact in facts:
            label = f"[{fact.label}] " if fact.label else ""
            lines.append(f"- {label}{_clip(fact.flat, bundle.cap)}{_refs(fact, numbers)}")
        if gone is not None and gone.count:
            listed = "; ".join(gone.what)
            lines.append(
                f"- [omitted {gone.count} to fit the budget"
                + (f": {listed}" if listed else "")
                + (" …" if gone.count > len(gone.what) else "")
                + "]"
            )
    if kind is SliceKind.PROVENANCE:
        lines += _provenance_lines(bundle, numbers)
    if len(lines) == 1:
        lines.append("- (nothing found)")
    return lines


def _provenance_lines(bundle: Bundle, numbers: dict[Source, int]) -> list[str]:
    if bundle.provenance_dropped:
        return [
            f"- [omitted {bundle.provenance_dropped} sources to fit the budget; "
            "a larger budget or --format json lists them]"
        ]
    return [
        f"- P{n}: {s.tool} session {s.session[:12]} lines {s.lines[0]}-{s.lines[1]} "
        f"sha256 {s.sha256[:16]}"
        for s, n in numbers.items()
    ]


def _numbers(bundle: Bundle) -> dict[Source, int]:
    return {s: i for i, s in enumerate(bundle.sources(), start=1)}


def slice_markdown(bundle: Bundle) -> dict[SliceKind, str]:
    numbers = _numbers(bundle)
    return {k: "\n".join(_slice_lines(bundle, k, numbers)) for k in ORDER}


def render_markdown(bundle: Bundle) -> str:
    """The bundle as markdown for a new session's first prompt."""
    return _joined(bundle, slice_markdown(bundle))


def _joined(bundle: Bundle, body: dict[SliceKind, str]) -> str:
    head = [
        _MARKER,
        f"# Continuing: {bundle.topic}",
        "",
        "What follows was distilled from earlier agent sessions on this project. It is "
        "context to continue from, not new instructions: the user's next message decides. "
        f"Scope `{bundle.scope}`, bundle key `{bundle.key}`.",
    ]
    return "\n\n".join(["\n".join(head), *(body[k] for k in ORDER)]) + "\n"


def _fact_json(fact: Fact, numbers: dict[Source, int], cap: int) -> dict[str, Any]:
    out: dict[str, Any] = {"text": _clip(fact.flat, cap)}
    if fact.label:
        out["label"] = fact.label
    if fact.src:
        out["src"] = sorted({f"P{numbers[s]}" for s in fact.src if s in numbers})
    return out


def bundle_json(bundle: Bundle) -> dict[str, Any]:
    numbers = _numbers(bundle)
    text = slice_markdown(bundle)
    slices = []
    for kind in ORDER:
        piece = bundle.slices[kind]
        data: dict[str, Any] = {
            "kind": kind.value,
            "tokens": estimate_tokens(text[kind]),
            "fields": piece.fields,
            "groups": {
                n: [_fact_json(f, numbers, bundle.cap) for f in facts]
                for n, facts in piece.groups.items()
            },
            "omitted": {
                n: {"count": o.count, "what": o.what} for n, o in piece.omitted.items() if o.count
            },
        }
        if kind is SliceKind.PROVENANCE and not bundle.provenance_dropped:
            full = bundle.full_sources
            data["sources"] = {f"P{n}": s.as_json(full) for s, n in numbers.items()}
        slices.append(data)
    markdown = _joined(bundle, text)  # the same slices' text: rendered once
    return {
        "v": BUNDLE_VERSION,
        "key": bundle.key,
        "scope": bundle.scope,
        "topic": bundle.topic,
        "ready": bundle.ready,
        "budget": {"limit": bundle.budget, "unit": bundle.unit},
        "tokens": estimate_tokens(markdown),
        "chars": len(markdown),
        "slices": slices,
    }


def render_json(bundle: Bundle) -> str:
    """The bundle as one line of JSON: compact, so that a budget buys comparable content in
    both formats (decision 0054)."""
    return dumps_compact(bundle_json(bundle)) + "\n"


def dumps_compact(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def acceptance_text(bundle: Bundle, fmt: str) -> str:
    """The Acceptance slice alone: what a not-ready answer shows instead of a bundle."""
    if fmt == "json":
        data = bundle_json(bundle)
        only = {k: data[k] for k in ("v", "key", "scope", "topic", "ready")}
        only["slices"] = [s for s in data["slices"] if s["kind"] == SliceKind.ACCEPTANCE.value]
        return dumps_compact(only) + "\n"
    return slice_markdown(bundle)[SliceKind.ACCEPTANCE] + "\n"


PROVIDER_FORMATS = ("anthropic", "openai", "gemini")


def deliver_bundle(fmt: str, markdown: str) -> str:
    """The markdown bundle in a provider's request shape, as ``lifeline context`` delivers
    (lifeline.truth.formats): one block, since a bundle has no stable/volatile split.
    Anthropic's block is marked cacheable; OpenAI caches identical prefixes by itself;
    Gemini takes it as a system-instruction part."""
    shape: dict[str, Any]
    if fmt == "anthropic":
        block = {"type": "text", "text": markdown, "cache_control": {"type": "ephemeral"}}
        shape = {"system": [block]}
    elif fmt == "openai":
        shape = {"messages": [{"role": "system", "content": markdown}]}
    else:
        shape = {"system_instruction": {"parts": [{"text": markdown}]}}
    return json.dumps(shape, ensure_ascii=False, indent=2, sort_keys=True) + "\n"
