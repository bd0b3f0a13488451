"""The projection of a line as markdown (``LIFELINE.md``), and reading it back.

Pure: ``render(entries, line) -> str`` and ``parse(text) -> list[Entry]``; files are the
CLI's business. The format (docs/projection.md) is lossless for every valid entry: a field
whose value is not *plain-safe* is written as a JSON string literal, the body goes in a
backtick fence longer than any backtick run inside it (or, when it holds characters a text
editor would not keep, as a JSON literal), and every entry closes with an end marker that
repeats its id. ``parse`` recomputes every id, so a hand-edited entry is refused by name.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from lifeline.entry import ID_RE, Entry, normalize_ts
from lifeline.errors import IdMismatch, InvalidEntry
from lifeline.lines import EXTERNAL_ANCHOR

__all__ = [
    "FORMAT_MARKER",
    "Projection",
    "block_of",
    "entry_block",
    "header",
    "is_projection",
    "parse",
    "parse_document",
    "render",
]

FORMAT_MARKER = "<!-- lifeline-projection v1 -->"
_HEADING = "### entry "
_END = "<!-- end of entry {} -->"
_FIELDS = ("ts", "kind", "author", "agent", "provider", "model", "summary")
_NONE = "(none)"
_FENCE_OPEN = re.compile(r"^(`{3,})text$")
_FIELD = re.compile(r"^- ([a-z_]+):(?: (.*))?$")
_EXTERNAL = re.compile(r"^- ([0-9a-f]{64}) is in line ([a-z0-9][a-z0-9_-]{0,63})$")
_ANCHOR = re.compile(r"^- ([0-9a-f]{64}) is an external anchor$")
_EXTERNALS_HEADING = "## Cross-line parents"
# lifeline-context 0.6.1 cuts its LIFELINE.md at these; user text holding them is quoted with
# "#" and "<" escaped, so that tool never reads an entry out of our view (docs/projection.md).
_LC_MARKS = ("### #", "<!-- lifeline:end")
_LC_ESCAPED = "#<"


@dataclass(frozen=True, slots=True)
class Projection:
    """A parsed projection: its entries and the cross-line parents it declares."""

    entries: list[Entry]
    externals: dict[str, str] = field(default_factory=dict)


def _visible(ch: str) -> bool:
    """A character a reader sees and an editor keeps: letters, marks, digits, symbols..."""
    return ch == " " or unicodedata.category(ch)[0] in "LMNPS"


def _mimics_lc(value: str) -> bool:
    """Text lifeline-context's reader would take for its own entry structure."""
    return any(mark in value for mark in _LC_MARKS)


def _plain_safe(value: str) -> bool:
    # Also refuse what parse would read as a quoted value or an empty/parents marker.
    # str.isprintable is _visible for every character (false exactly for the Unicode
    # categories "Other" and "Separator", except the space), in C.
    return (
        value.isprintable()
        and value != ""
        and value[0] not in ' "['
        and value[-1] != " "
        and value != _NONE
        and _LC_MARKS[0] not in value
        and _LC_MARKS[1] not in value
    )


def _quote(value: str) -> str:
    """A JSON string literal; invisible characters are escaped so a reader sees them, and
    in text that mimics lifeline-context's structure, ``#`` and ``<`` too."""
    hidden = _LC_ESCAPED if _mimics_lc(value) else ""
    out = ['"']
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in hidden:
            out.append(f"\\u{ord(ch):04x}")
        elif _visible(ch):
            out.append(ch)
        else:
            out.append(json.dumps(ch))  # ensure_ascii: \n, \t, \u200b, surrogate pairs
            out[-1] = out[-1][1:-1]
    out.append('"')
    return "".join(out)


def _value(value: str) -> str:
    return value if _plain_safe(value) else _quote(value)


# kind, author, agent, provider, model: a few combinations, each written many times
_FEW: dict[tuple[str, str, str, str, str], str] = {}


def _few_fields(kind: str, author: str, agent: str, provider: str, model: str) -> str:
    key = (kind, author, agent, provider, model)
    done = _FEW.get(key)
    if done is None:
        if len(_FEW) > 4096:
            _FEW.clear()
        done = _FEW[key] = (
            f"- kind: {_value(kind)}\n- author: {_value(author)}\n- agent: {_value(agent)}\n"
            f"- provider: {_value(provider)}\n- model: {_value(model)}\n"
        )
    return done


def _fence_safe(body: str) -> bool:
    # Tabs and newlines are kept by editors; every other character must be visible (in C:
    # see _plain_safe).
    return (
        body.replace("\n", " ").replace("\t", " ").isprintable()
        and _LC_MARKS[0] not in body
        and _LC_MARKS[1] not in body
    )


def _fence(body: str) -> str:
    if "`" not in body:
        return "```"
    run = max((len(m) for m in re.findall(r"`+", body)), default=0)
    return "`" * max(3, run + 1)


def entry_block(entry: Entry) -> str:
    """One entry's block as it follows what precedes it in the file (it starts with the
    newline that separates it): the projection is the header then these, in stream order,
    so a file is extended by appending blocks."""
    return block_of(
        entry.id,
        entry.ts,
        entry.kind,
        entry.author,
        entry.agent,
        entry.provider,
        entry.model,
        entry.summary,
        entry.body,
        entry.parents,
        entry.dedup_key,
    )


def block_of(
    eid: str,
    ts: str,
    kind: str,
    author: str,
    agent: str,
    provider: str,
    model: str,
    summary: str,
    body: str,
    parents: tuple[str, ...],
    dedup_key: str | None,
) -> str:
    """:func:`entry_block` from an entry's fields, in the order of :class:`Entry`'s (a
    stream of rows renders without building an Entry for each)."""
    out = [
        f"\n{_HEADING}{eid}\n\n- ts: {_value(ts)}\n"
        f"{_few_fields(kind, author, agent, provider, model)}- summary: {_value(summary)}\n"
    ]
    if not parents:
        out.append(f"- parents: {_NONE}\n")
    elif len(parents) == 1 and ID_RE.match(parents[0]):
        out.append(f"- parents: {parents[0]}\n")
    elif all(ID_RE.match(p) for p in parents):
        out.append(f"- parents: {', '.join(parents)}\n")
    else:
        out.append(f"- parents: {json.dumps(list(parents))}\n")
    if dedup_key is not None:
        out.append(f"- dedup_key: {_value(dedup_key)}\n")
    if _fence_safe(body):
        fence = _fence(body)
        out.append(
            f"- body:\n\n{fence}text\n{body}\n{fence}\n"
            if body
            else f"- body:\n\n{fence}text\n{fence}\n"
        )
    else:
        out.append(f"- body: {_quote(body)}\n")
    out.append(f"\n{_END.format(eid)}\n")
    return "".join(out)


def header(line: str, externals: Mapping[str, str] | None = None) -> str:
    """The text before the first entry: the marker, the title, the notice and the
    cross-line parents the line declares (``externals``: parent id -> line)."""
    out = [
        FORMAT_MARKER,
        f"# LIFELINE — line {line}",
        "",
        f"> Generated from the ledger line `{line}`, entry after entry in stream order.",
        "> Do not edit: record with `lifeline log`. `lifeline ingest` reads this file back and",
        "> refuses any entry whose content no longer matches its id. Format: docs/projection.md.",
        "",
    ]
    if externals:
        out.extend([_EXTERNALS_HEADING, ""])
        out.extend(
            f"- {eid} is an external anchor"
            if other == EXTERNAL_ANCHOR
            else f"- {eid} is in line {other}"
            for eid, other in sorted(externals.items())
        )
        out.append("")
    return "\n".join(out)


def render(entries: Iterable[Entry], line: str, externals: Mapping[str, str] | None = None) -> str:
    """The projection of ``entries`` (give them in the store's stream order): the
    :func:`header`, then one :func:`entry_block` per entry.

    ``externals`` (parent id -> line) are the cross-line parents the line declares.
    """
    return header(line, externals) + "".join(map(entry_block, entries))


def is_projection(text: str) -> bool:
    """True when ``text`` is in this module's format (it starts with the marker)."""
    return text.lstrip("\ufeff").startswith(FORMAT_MARKER)


class _Reader:
    """Walks the lines of a projection; errors name the line number."""

    def __init__(self, text: str) -> None:
        # Split on "\n" only: str.splitlines would also break on \r, \x1c, U+2028...
        self.lines = text.split("\n")
        self.pos = 0
        self.start = 0  # line number of the current entry's heading

    def fail(self, what: str) -> InvalidEntry:
        shown = self.lines[self.pos - 1] if 0 < self.pos <= len(self.lines) else ""
        return InvalidEntry(
            f"projection line {self.pos}: {what} (found {shown[:80]!r}); "
            "re-render the file with `lifeline render` instead of editing it"
        )

    def next(self) -> str:
        if self.pos >= len(self.lines):
            self.pos += 1
            raise self.fail("the file ends inside an entry")
        self.pos += 1
        return self.lines[self.pos - 1]

    def expect(self, text: str) -> None:
        if self.next() != text:
            raise self.fail(f"expected {text!r}")

    def field(self, name: str) -> str | None:
        match = _FIELD.match(self.next())
        if not match or match.group(1) != name:
            raise self.fail(f"expected the field '- {name}:'")
        return match.group(2)


def _unquote(raw: str | None, reader: _Reader, name: str) -> str:
    if raw is None:
        raise reader.fail(f'field {name} has no value; an empty value is written as ""')
    if not raw.startswith('"'):
        return raw
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise reader.fail(f"field {name} is not a valid JSON string ({exc})") from exc
    if not isinstance(value, str):
        raise reader.fail(f"field {name} is not a JSON string")
    return value


def _parents(raw: str | None, reader: _Reader) -> tuple[str, ...]:
    if raw == _NONE:
        return ()
    if raw is not None and raw.startswith("["):
        try:
            value = json.loads(raw)
        except ValueError as exc:
            raise reader.fail(f"parents is not a JSON list ({exc})") from exc
        if isinstance(value, list) and all(isinstance(p, str) for p in value):
            return tuple(sorted(value))
        raise reader.fail("parents is not a JSON list of strings")
    items = (raw or "").split(", ")
    if not all(ID_RE.match(p) for p in items):
        raise reader.fail("parents must be 64-hex ids separated by ', ' or (none)")
    return tuple(sorted(items))


def _body(reader: _Reader) -> str:
    raw = reader.field("body")
    if raw is not None:
        return _unquote(raw, reader, "body")
    reader.expect("")
    match = _FENCE_OPEN.match(reader.next())
    if not match:
        raise reader.fail("expected a fence of 3 or more backticks followed by 'text'")
    fence = match.group(1)
    lines: list[str] = []
    while (line := reader.next()) != fence:
        lines.append(line)
    return "\n".join(lines)


def _parse_entry(reader: _Reader, entry_id: str) -> Entry:
    reader.expect("")
    values = {name: _unquote(reader.field(name), reader, name) for name in _FIELDS}
    parents = _parents(reader.field("parents"), reader)
    dedup: str | None = None
    if reader.pos < len(reader.lines) and reader.lines[reader.pos].startswith("- dedup_key:"):
        dedup = _unquote(reader.field("dedup_key"), reader, "dedup_key")
    body = _body(reader)
    reader.expect("")
    reader.expect(_END.format(entry_id))
    try:
        ts = normalize_ts(values["ts"])
    except InvalidEntry as exc:
        raise reader.fail(str(exc)) from exc
    entry = Entry(
        entry_id,
        ts,
        values["kind"],
        values["author"],
        values["agent"],
        values["provider"],
        values["model"],
        values["summary"],
        body,
        parents,
        dedup,
    )
    try:
        entry.verify()
    except IdMismatch as exc:
        raise IdMismatch(
            f"projection entry {entry_id} (heading at line {reader.start}): its content no "
            f"longer matches its id (it hashes to {entry.expected_id()[:12]}); it was edited "
            "by hand. Record a change with `lifeline log --kind correction`, then re-render"
        ) from exc
    return entry


def parse(text: str) -> list[Entry]:
    """The entries of a projection, every id verified; raises on the first bad entry."""
    return parse_document(text).entries


def parse_document(text: str) -> Projection:
    """Entries (every id verified) and declared cross-line parents of a projection."""
    if not is_projection(text):
        raise InvalidEntry(
            f"this is not a lifeline projection: it does not start with {FORMAT_MARKER!r}"
        )
    reader = _Reader(text.lstrip("\ufeff"))
    entries: list[Entry] = []
    externals: dict[str, str] = {}
    while reader.pos < len(reader.lines):
        line = reader.next()
        external = _EXTERNAL.match(line)
        if external and not entries:
            externals[external.group(1)] = external.group(2)
        anchor = _ANCHOR.match(line)
        if anchor and not entries:
            externals[anchor.group(1)] = EXTERNAL_ANCHOR
        if not line.startswith(_HEADING):
            continue
        entry_id = line[len(_HEADING) :]
        if not ID_RE.match(entry_id):
            raise reader.fail("an entry heading must carry a 64-hex id")
        reader.start = reader.pos
        entries.append(_parse_entry(reader, entry_id))
    return Projection(entries, externals)
