"""The entry: an immutable, content-addressed record, and its canonical form (DESIGN §3).

Pure: no I/O, no clock. The id is ``sha256`` of the v2 canonical form, byte-compatible with
the ids of lifeline-context 0.6.1::

    "v2\\n" + F(kind) + F(author) + F(agent) + F(provider) + F(model) + F(summary)
           + F(body.strip()) + F(p1) + ... + F(pk)      # parents sorted, duplicates kept
    F(x) = str(len(utf8(x))) + ":" + x + "\\n"

``ts`` and ``dedup_key`` are outside the hash.
"""

from __future__ import annotations

import calendar
import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from lifeline.errors import IdMismatch, InvalidEntry

__all__ = [
    "HASHED_FIELDS",
    "ID_RE",
    "KNOWN_KINDS",
    "LC_KINDS",
    "Entry",
    "canonical_bytes",
    "compute_id",
    "format_ts",
    "normalize_ts",
]

# The kinds lifeline-context 0.6.1 knows (it refuses a whole LIFELINE.md holding any other).
LC_KINDS: frozenset[str] = frozenset(
    {
        "bootstrap",
        "decision",
        "feature",
        "fix",
        "incident",
        "milestone",
        "release",
        "note",
        "open",
        "correction",
        "service",
        "api",
        "test",
        "requirement",
        "debt",
        "relation",
        "checkpoint",
    }
)
# ... and ours: agent sessions (DESIGN §9, docs/decisions/0019-session-entries.md)
KNOWN_KINDS: frozenset[str] = LC_KINDS | {"session", "session-part", "session-status"}

# The stored form exactly; days 29-31 are checked against their month below. Anything else
# (other zones, no fraction, spaces) takes the full parse.
_CANONICAL_TS = re.compile(
    r"(\d{4})-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d\.\d{6}Z"
)
# The json module's string escaper for ensure_ascii=False (its C version when available).
_json_string = json.encoder.encode_basestring
HASHED_FIELDS = ("kind", "author", "agent", "provider", "model", "summary", "body")
ID_RE = re.compile(r"^[0-9a-f]{64}\Z")  # \Z: "$" would take a trailing newline


def canonical_bytes(
    kind: str,
    author: str,
    agent: str,
    provider: str,
    model: str,
    summary: str,
    body: str,
    parents: tuple[str, ...] | list[str],
) -> bytes:
    """The v2 canonical form. Raises UnicodeEncodeError on lone surrogates."""
    # This runs for every entry written or received. The usual entry is ASCII, where each
    # field's character count is its byte count: one f-string, one check, one encode.
    body = body.strip()
    ordered = sorted(parents) if parents else ()
    text = (
        f"v2\n{len(kind)}:{kind}\n{len(author)}:{author}\n{len(agent)}:{agent}\n"
        f"{len(provider)}:{provider}\n{len(model)}:{model}\n{len(summary)}:{summary}\n"
        f"{len(body)}:{body}\n"
    )
    if ordered:
        text += "".join([f"{len(p)}:{p}\n" for p in ordered])
    if text.isascii():  # O(1) in CPython
        return text.encode("ascii")
    out = ["v2\n"]
    for value in (kind, author, agent, provider, model, summary, body, *ordered):
        out.append(f"{len(value.encode('utf-8'))}:{value}\n")
    return "".join(out).encode("utf-8")


def compute_id(
    kind: str,
    author: str,
    agent: str,
    provider: str,
    model: str,
    summary: str,
    body: str,
    parents: tuple[str, ...] | list[str],
) -> str:
    """The entry id: lowercase hex sha256 of the canonical form."""
    form = canonical_bytes(kind, author, agent, provider, model, summary, body, parents)
    return hashlib.sha256(form).hexdigest()


def format_ts(moment: datetime) -> str:
    """Render a timestamp in the one form we store: UTC, microseconds, ``Z``."""
    if moment.tzinfo is None:
        raise InvalidEntry(f"timestamp {moment!r} has no time zone; pass an aware datetime")
    if moment.utcoffset():
        moment = moment.astimezone(UTC)
    # isoformat is cheaper than strftime; year < 1000 would lose its padding there
    if moment.year < 1000:
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return moment.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def normalize_ts(value: str, *, naive_utc: bool = False) -> str:
    """Parse any ISO-8601 timestamp with a zone and return it in the stored form.

    lifeline-context wrote both ``...Z`` and ``...+00:00``; both normalise to ``...Z``, so
    that string order is time order. With ``naive_utc`` (imports), a timestamp without a
    zone is read as UTC: lifeline-context's API and its ``migrate`` wrote such rows.
    """
    found = _CANONICAL_TS.fullmatch(value)
    if found is not None:  # already the stored form: skip the parse and the re-format
        year, month, day = found.groups()
        if day <= "28" or int(day) <= calendar.monthrange(int(year), int(month))[1]:
            return value
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise InvalidEntry(
            f"timestamp {value!r} is not ISO-8601; use e.g. 2026-01-31T12:00:00Z"
        ) from exc
    if moment.tzinfo is None:
        if not naive_utc:
            raise InvalidEntry(f"timestamp {value!r} has no time zone; append Z for UTC")
        moment = moment.replace(tzinfo=UTC)
    try:
        return format_ts(moment)
    except OverflowError as exc:  # e.g. 9999-12-31T23:59:59-14:00 is in the year 10000 UTC
        raise InvalidEntry(
            f"timestamp {value!r} falls outside the years 1 to 9999 in UTC; "
            "use e.g. 2026-01-31T12:00:00Z"
        ) from exc


@dataclass(frozen=True, slots=True)
class Entry:
    """One immutable record. Build new ones with :meth:`create`; ``id`` is derived."""

    id: str
    ts: str
    kind: str
    author: str
    agent: str
    provider: str
    model: str
    summary: str
    body: str
    parents: tuple[str, ...] = field(default_factory=tuple)
    dedup_key: str | None = None

    @classmethod
    def create(
        cls,
        *,
        ts: str,
        kind: str,
        summary: str,
        body: str = "",
        author: str = "",
        agent: str = "human",
        provider: str = "none",
        model: str = "human",
        parents: tuple[str, ...] | list[str] = (),
        dedup_key: str | None = None,
        ts_normal: bool = False,
    ) -> Entry:
        """A new entry with its id computed; the body is stored stripped (as hashed).

        ``ts_normal``: the caller vouches that ``ts`` is already in the stored form (it
        comes from :func:`format_ts`), so it is not parsed again.
        """
        ordered = tuple(sorted(parents)) if len(parents) > 1 else tuple(parents)
        body = body.strip()
        form = canonical_bytes(kind, author, agent, provider, model, summary, body, ordered)
        return cls(  # positional: this runs for every entry written
            hashlib.sha256(form).hexdigest(),
            ts if ts_normal else normalize_ts(ts),
            kind,
            author,
            agent,
            provider,
            model,
            summary,
            body,
            ordered,
            dedup_key,
        )

    def expected_id(self) -> str:
        """The id this entry's content hashes to (may differ from ``id`` if tampered)."""
        return compute_id(
            self.kind,
            self.author,
            self.agent,
            self.provider,
            self.model,
            self.summary,
            self.body,
            self.parents,
        )

    def verify(self) -> None:
        """Raise :class:`IdMismatch` when ``id`` is not the hash of the content."""
        try:
            expected = self.expected_id()
        except UnicodeEncodeError as exc:
            raise InvalidEntry(
                f"entry {self.id[:12]} holds text that is not valid UTF-8 ({exc.reason})"
            ) from exc
        if expected != self.id:
            raise IdMismatch(
                f"entry {self.id[:12]}: its id does not match its content "
                f"(content hashes to {expected[:12]}); it was altered after it was written"
            )

    def is_intact(self) -> bool:
        try:
            self.verify()
        except InvalidEntry:
            return False
        return True

    def with_ts(self, ts: str) -> Entry:
        return replace(self, ts=ts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "ts": self.ts,
            "kind": self.kind,
            "author": self.author,
            "agent": self.agent,
            "provider": self.provider,
            "model": self.model,
            "summary": self.summary,
            "body": self.body,
            "parents": list(self.parents),
            "dedup_key": self.dedup_key,
        }

    def to_json(self) -> bytes:
        """Compact, key-sorted JSON: the form entries travel in.

        Exactly ``json.dumps(self.to_dict(), ensure_ascii=False, sort_keys=True,
        separators=(",", ":"))``, written out (keys in sorted order, strings escaped by the
        json module's own function): a sync sends every entry this way, and the general
        encoder is built anew on each call.
        """
        q = _json_string
        key = "null" if self.dedup_key is None else q(self.dedup_key)
        parents = ",".join([q(p) for p in self.parents])
        return (
            f'{{"agent":{q(self.agent)},"author":{q(self.author)},"body":{q(self.body)},'
            f'"dedup_key":{key},"id":{q(self.id)},"kind":{q(self.kind)},'
            f'"model":{q(self.model)},"parents":[{parents}],"provider":{q(self.provider)},'
            f'"summary":{q(self.summary)},"ts":{q(self.ts)}}}'
        ).encode()

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, check: bool = True) -> Entry:
        """Decode an entry from elsewhere. With ``check``, its id must match its content."""
        try:
            parents = data.get("parents") or []
            if not isinstance(parents, list) or not all(isinstance(p, str) for p in parents):
                raise TypeError("parents must be a list of ids")
            # every entry received in a sync comes through here: fields read one by one
            values = (
                data["id"],
                data["ts"],
                data["kind"],
                data["author"],
                data["agent"],
                data["provider"],
                data["model"],
                data["summary"],
                data["body"],
            )
            if not all(isinstance(v, str) for v in values):
                raise TypeError("id, ts and the hashed fields must be strings")
            dedup = data.get("dedup_key")
            if dedup is not None and not isinstance(dedup, str):
                raise TypeError("dedup_key must be a string or null")
        except (KeyError, TypeError) as exc:
            raise InvalidEntry(f"malformed entry: {exc}") from exc
        eid, ts, kind, author, agent, provider, model, summary, body = values
        entry = cls(
            eid,
            normalize_ts(ts),
            kind,
            author,
            agent,
            provider,
            model,
            summary,
            body.strip(),
            tuple(sorted(parents)) if len(parents) > 1 else tuple(parents),
            dedup,
        )
        if check:
            entry.verify()
        return entry

    @classmethod
    def from_json(cls, raw: bytes | str, *, check: bool = True) -> Entry:
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise InvalidEntry(f"entry is not valid JSON: {exc}") from exc
        except RecursionError:  # e.g. a peer's "[[[[…" nested past the interpreter's depth
            raise InvalidEntry("entry JSON nests too deeply to be an entry") from None
        if not isinstance(data, dict):
            raise InvalidEntry("entry JSON must be an object")
        return cls.from_dict(data, check=check)
