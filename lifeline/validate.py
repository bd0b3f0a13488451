"""Validation of entries written locally, and size caps for entries from anywhere.

Local writes must name a known kind and a non-empty summary; every entry, local or from a
peer, must fit the size caps and hold valid UTF-8 (no lone surrogates). Entries from
elsewhere with a kind this version does not know are accepted (forward compatibility).
"""

from __future__ import annotations

from dataclasses import dataclass

from lifeline.entry import ID_RE, KNOWN_KINDS, Entry
from lifeline.errors import EntryTooLarge, InvalidEntry

__all__ = [
    "DEFAULT_LIMITS",
    "HARD_LIMITS",
    "Limits",
    "check_admissible",
    "check_local",
    "over_limits",
]


@dataclass(frozen=True, slots=True)
class Limits:
    """Size caps in bytes of UTF-8. Defaults are documented in docs/cli.md."""

    summary_bytes: int = 1_000
    body_bytes: int = 64_000
    field_bytes: int = 200  # author, agent, provider, model, kind
    max_parents: int = 64
    dedup_key_bytes: int = 200


DEFAULT_LIMITS = Limits()

# What an imported entry must fit: history another tool accepted is kept even when it is
# over this project's local caps (config.json), but never past these, which protect the
# store and keep one entry well inside a sync message (about 1 MiB).
HARD_LIMITS = Limits(
    summary_bytes=16_000,
    body_bytes=512_000,
    field_bytes=1_000,
    max_parents=1_024,
    dedup_key_bytes=1_000,
)


def _utf8_len(name: str, value: str) -> int:
    if value.isascii():  # O(1) in CPython: one byte per character, nothing to encode
        return len(value)
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidEntry(
            f"{name} holds a lone surrogate at position {exc.start}; send valid UTF-8 text"
        ) from exc


def _too_large(name: str, size: int, cap: int) -> EntryTooLarge:
    return EntryTooLarge(
        f"{name} is {size} bytes, over the cap of {cap}; shorten it "
        "(or raise the limit in the configuration)"
    )


def check_admissible(
    entry: Entry, limits: Limits = DEFAULT_LIMITS, *, id_computed: bool = False
) -> None:
    """Checks every entry must pass before it is stored: shape, size, UTF-8, id.

    One pass: each field is measured once, and that measurement also proves it is valid
    UTF-8 (every hashed field has a cap). ``id_computed``: the caller has just derived the
    id from this very content (a local write), so hashing it a second time would prove
    nothing; entries from elsewhere are always re-hashed.
    """
    if not id_computed and not ID_RE.match(entry.id):
        raise InvalidEntry(f"id {entry.id[:80]!r} is not 64 lowercase hex characters")
    if not _plainly_within_caps(entry, limits):
        _check_sizes(entry, limits)
    if len(entry.parents) > limits.max_parents:
        raise EntryTooLarge(
            f"entry has {len(entry.parents)} parents, over the cap of {limits.max_parents}"
        )
    for parent in entry.parents:
        if not ID_RE.match(parent):
            raise InvalidEntry(f"parent {parent[:80]!r} is not a 64-hex entry id")
    if not id_computed:
        entry.verify()


def check_local(
    entry: Entry, limits: Limits = DEFAULT_LIMITS, *, id_computed: bool = False
) -> None:
    """The stricter checks for an entry written on this node."""
    if entry.kind not in KNOWN_KINDS:
        known = ", ".join(sorted(KNOWN_KINDS))
        raise InvalidEntry(f"unknown kind {entry.kind!r}; use one of: {known}")
    if not entry.summary.strip():
        raise InvalidEntry("summary is empty; say in one line what this entry records")
    check_admissible(entry, limits, id_computed=id_computed)


def over_limits(entry: Entry, limits: Limits) -> str | None:
    """Which cap of ``limits`` an (admissible) entry is over, as a message, or None."""
    if _plainly_within_caps(entry, limits) and len(entry.parents) <= limits.max_parents:
        return None
    if len(entry.parents) > limits.max_parents:
        return f"{len(entry.parents)} parents, over the cap of {limits.max_parents}"
    try:
        _check_sizes(entry, limits)
    except InvalidEntry as exc:
        return str(exc).split(";", 1)[0]
    return None


def _check_sizes(entry: Entry, limits: Limits) -> None:
    """Each field measured (in UTF-8) against its cap; raises on the first one over."""
    cap = limits.field_bytes
    for name, value in (
        ("kind", entry.kind),
        ("author", entry.author),
        ("agent", entry.agent),
        ("provider", entry.provider),
        ("model", entry.model),
    ):
        size = _utf8_len(name, value)
        if size > cap:
            raise _too_large(name, size, cap)
    size = _utf8_len("summary", entry.summary)
    if size > limits.summary_bytes:
        raise _too_large("summary", size, limits.summary_bytes)
    size = _utf8_len("body", entry.body)
    if size > limits.body_bytes:
        raise _too_large("body", size, limits.body_bytes)
    if entry.dedup_key is not None:
        size = _utf8_len("dedup_key", entry.dedup_key)
        if size > limits.dedup_key_bytes:
            raise _too_large("dedup_key", size, limits.dedup_key_bytes)


def _plainly_within_caps(entry: Entry, limits: Limits) -> bool:
    """The usual entry, decided in one go: every field ASCII (one byte per character, so
    valid UTF-8 and measured by ``len``) and within its cap."""
    kind, author, agent, provider, model = (
        entry.kind,
        entry.author,
        entry.agent,
        entry.provider,
        entry.model,
    )
    summary, body, key = entry.summary, entry.body, entry.dedup_key or ""
    return (
        (kind + author + agent + provider + model + summary + key).isascii()
        and body.isascii()
        and max(len(kind), len(author), len(agent), len(provider), len(model)) <= limits.field_bytes
        and len(summary) <= limits.summary_bytes
        and len(body) <= limits.body_bytes
        and len(key) <= limits.dedup_key_bytes
    )
