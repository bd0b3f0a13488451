"""Reading the ``LIFELINE.md`` written by lifeline-context 0.6.1, where it can be read.

That format is lossy (a body's edge whitespace, field values holding newlines, the
``dedup_key`` are not kept), so an entry is accepted only when its recomputed id matches
the id the file shows; the others are returned as rejections with the reason. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lifeline.entry import ID_RE, Entry, normalize_ts
from lifeline.errors import InvalidEntry
from lifeline.wording import noun

__all__ = ["Rejected", "looks_like_lc_markdown", "parse_lc_markdown"]

_HEAD = re.compile(r"^### #(\d+) — (\S+) — (.*)$", re.MULTILINE)
_END = "\n<!-- lifeline:end -->"
_FIELD = re.compile(r"^- \*\*([a-z_]+)\*\*: ?(.*)$")
_NAMES = ("author", "agent", "provider", "model", "kind", "summary", "parents", "id")


@dataclass(frozen=True, slots=True)
class Rejected:
    """An entry of the file that could not be taken over: where, which id, why."""

    number: str
    entry_id: str
    reason: str


def looks_like_lc_markdown(text: str) -> bool:
    return bool(_HEAD.search(text)) and _END in text


def _parse_block(ts_raw: str, block: str) -> Entry:
    head, sep, body = block.partition("\n**Body**:\n")
    if not sep:
        raise InvalidEntry("no '**Body**:' line")
    fields: dict[str, str] = {}
    for line in head.split("\n"):
        match = _FIELD.match(line)
        if match and match.group(1) in _NAMES:
            fields.setdefault(match.group(1), match.group(2))
    missing = [n for n in _NAMES if n not in fields]
    if missing:
        raise InvalidEntry(
            f"{noun(len(missing), 'field')} {', '.join(missing)} missing or not on one line"
        )
    raw_parents = fields["parents"].strip()
    parents = () if raw_parents in ("—", "-", "") else tuple(raw_parents.split(", "))
    if not all(ID_RE.match(p) for p in parents):
        raise InvalidEntry(f"parents {raw_parents[:80]!r} are not 64-hex ids")
    entry = Entry(
        id=fields["id"].strip(),
        ts=normalize_ts(ts_raw, naive_utc=True),
        kind=fields["kind"],
        author=fields["author"],
        agent=fields["agent"],
        provider=fields["provider"],
        model=fields["model"],
        summary=fields["summary"],
        body=body.strip(),
        parents=tuple(sorted(parents)),
    )
    entry.verify()
    return entry


def parse_lc_markdown(text: str) -> tuple[list[Entry], list[Rejected]]:
    """The entries whose id recomputes, in file order, and the ones that do not."""
    heads = list(_HEAD.finditer(text))
    accepted: list[Entry] = []
    rejected: list[Rejected] = []
    for n, head in enumerate(heads):
        stop = heads[n + 1].start() if n + 1 < len(heads) else len(text)
        chunk = text[head.end() : stop]
        block, found, _rest = chunk.partition(_END)
        id_match = re.search(r"^- \*\*id\*\*: ([0-9a-f]{64})$", block, re.MULTILINE)
        shown = id_match.group(1) if id_match else "?"
        if not found:
            rejected.append(Rejected(head.group(1), shown, "no end marker"))
            continue
        try:
            accepted.append(_parse_block(head.group(2), block))
        except InvalidEntry as exc:
            rejected.append(Rejected(head.group(1), shown, str(exc)))
    return accepted, rejected
