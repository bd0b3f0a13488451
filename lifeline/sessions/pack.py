"""Items to stored form: redact, cap, and pack into parts (decision 0019). Pure.

Items come from records that were redacted as parsed (:func:`lifeline.sessions.ingest.ingester`);
here long strings are cut to a cap with a marker that gives the original length and the
sha256 of the (redacted) full text, and keys that hold opaque crypto
(``encrypted_content``, ``signature``) are dropped wherever they occur.

Parts: items are packed greedily, in order, into parts of at most ``part_bytes`` of JSON.
Greedy packing is prefix-stable — a closed part depends only on its own items and on the
item that did not fit — so two machines that ingest the same bytes close the same parts,
whenever and however often they ingest. The last, open part (the *tail*) is written too
and superseded by its longer versions as the file grows.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from lifeline.sessions.caps import FORMAT, KIND_HEADER, KIND_PART, KIND_STATUS, Caps
from lifeline.sessions.model import Item

__all__ = [
    "FORMAT",
    "KIND_HEADER",
    "KIND_PART",
    "KIND_STATUS",
    "Caps",
    "Cleaner",
    "Packer",
    "Part",
    "dumps",
    "native_ids",
    "utf8_size",
]

_DROPPED_KEYS = frozenset({"encrypted_content", "signature", "encryptedContent"})
_MIN_CAP = 256


def dumps(value: Any) -> str:
    """The one JSON rendering of stored session data (sorted keys, no spaces)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def utf8_size(value: Any) -> int:
    """Bytes of UTF-8 of ``dumps(value)`` (the body cap counts bytes)."""
    return _utf8_len(dumps(value))


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _cut(text: str, cap: int) -> tuple[str, bool]:
    if len(text) <= cap:
        return text, False
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    note = f"\n[TRUNCATED: {len(text)} characters in all, sha256 {digest}]"
    return text[:cap] + note, True


@dataclass
class Cleaner:
    """Caps items (already redacted: the record they came from was) for storage."""

    caps: Caps = field(default_factory=Caps)
    truncated: int = 0

    def clean(self, item: Item) -> dict[str, Any]:
        """The item's stored dict: long strings cut, opaque crypto dropped."""
        data = item.model_dump(mode="json", exclude_none=True, exclude={"prov"})
        output = data.get("output")
        if isinstance(output, str):
            data["output"], cut = _cut(output, self.caps.tool_output)
            self.truncated += cut
        walked: dict[str, Any] = self._walk(data, self.caps.text)
        return walked

    def _walk(self, value: Any, cap: int) -> Any:
        if isinstance(value, str):
            text, cut = _cut(value, cap)
            self.truncated += cut
            return text
        if isinstance(value, list):
            return [self._walk(v, cap) for v in value]
        if isinstance(value, dict):
            return {k: self._walk(v, cap) for k, v in value.items() if k not in _DROPPED_KEYS}
        return value

    def fit(self, data: dict[str, Any], limit: int) -> dict[str, Any]:
        """``data`` cut harder until its JSON fits ``limit`` (an item must fit one part)."""
        return self.fitted(data, limit)[0]

    def fitted(self, data: dict[str, Any], limit: int) -> tuple[dict[str, Any], str]:
        """:meth:`fit`, with the item's JSON (``dumps``), which packing reuses."""
        cap = self.caps.text
        text = dumps(data)
        while _utf8_len(text) > limit and cap > _MIN_CAP:
            cap //= 4
            data = self._walk(data, cap)
            text = dumps(data)
        if _utf8_len(text) > limit:  # too many small strings: keep the kind and a note
            data = {
                "kind": "opaque",
                "record_type": f"oversize-{data.get('kind')}",
                "ln": data.get("ln"),
                "sha": data.get("sha"),
            }
            self.truncated += 1
            text = dumps(data)
        return data, text


def native_ids(rec: Any) -> list[str]:
    """The tool's own ids for a raw record (uuid, message id, call id…), for provenance."""
    if not isinstance(rec, dict):
        return []
    found = []
    for source in (rec, rec.get("message"), rec.get("payload")):
        if isinstance(source, dict):
            for key in ("uuid", "id", "call_id", "turn_id", "requestId"):
                value = source.get(key)
                if isinstance(value, str) and value and value not in found:
                    found.append(value)
    return found[:4]


@dataclass
class Part:
    index: int
    items: list[dict[str, Any]]
    lines: tuple[int, int]
    texts: list[str] = field(default_factory=list)  # each item's dumps(), when known
    joined: str | None = None  # the texts joined by ",", the items dropped (:meth:`slim`)
    count: int = 0  # how many items, once dropped

    @property
    def size(self) -> int:
        """How many items the part holds."""
        return self.count if self.joined is not None else len(self.items)

    def slim(self) -> Part:
        """The same part holding only its items' JSON in one string: what the body needs,
        and the cheapest form to hand from a worker process to the writer."""
        if self.joined is not None or len(self.texts) != len(self.items):
            return self
        return Part(self.index, [], self.lines, [], ",".join(self.texts), len(self.items))

    def body(self, session_id: str) -> str:
        if self.joined is None and len(self.texts) != len(self.items):
            return dumps(
                {
                    "v": FORMAT,
                    "session": session_id,
                    "part": self.index,
                    "lines": list(self.lines),
                    "items": self.items,
                }
            )
        # dumps() of the same dict, keys in sorted order, from the items' JSON already made
        return (
            f'{{"items":[{self.joined if self.joined is not None else ",".join(self.texts)}],'
            f'"lines":{dumps(list(self.lines))},'
            f'"part":{self.index},"session":{dumps(session_id)},"v":{FORMAT}}}'
        )


@dataclass
class Packer:
    """Greedy, prefix-stable packing of stored items into parts."""

    part_bytes: int
    index: int = 0
    items: list[dict[str, Any]] = field(default_factory=list)
    size: int = 0
    first_line: int = 0
    last_line: int = 0
    closed: list[Part] = field(default_factory=list)
    texts: list[str] = field(default_factory=list, init=False)  # dumps() of each item

    def __post_init__(self) -> None:
        self.texts = [dumps(i) for i in self.items]
        self.size = sum(_utf8_len(t) + 1 for t in self.texts)

    def add(
        self, number: int, stored: Iterable[dict[str, Any]], texts: Iterable[str] | None = None
    ) -> None:
        """Items of line ``number`` (with their ``dumps()``, when the caller has them)."""
        stored = list(stored)
        known = list(texts) if texts is not None else [dumps(d) for d in stored]
        for data, text in zip(stored, known, strict=True):
            size = _utf8_len(text) + 1
            if self.items and self.size + size > self.part_bytes:
                bounds = (self.first_line, self.last_line)
                self.closed.append(Part(self.index, self.items, bounds, self.texts))
                self.index += 1
                self.items, self.texts, self.size = [], [], 0
            if not self.items:
                self.first_line = number
            self.items.append(data)
            self.texts.append(text)
            self.size += size
            self.last_line = number

    def tail(self) -> Part | None:
        if not self.items:
            return None
        bounds = (self.first_line, self.last_line)
        return Part(self.index, list(self.items), bounds, list(self.texts))
