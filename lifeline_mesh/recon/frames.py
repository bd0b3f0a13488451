"""The frames two sessions exchange and the effects a session asks its driver to perform.

Plain dataclasses: the wire layer maps them to protobuf (``lifeline_mesh.transport.codec``),
so the core never sees generated code.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from lifeline.errors import PeerError, PermissionDenied

__all__ = [
    "Abort",
    "Bound",
    "Deliver",
    "Done",
    "Effect",
    "EndOfTurn",
    "Failed",
    "Fetch",
    "FetchRun",
    "Fin",
    "Frame",
    "Hello",
    "Items",
    "KeepAlive",
    "LoadSnapshot",
    "LoadSummary",
    "Mode",
    "Range",
    "Recon",
    "SendFrame",
    "Want",
]


class Mode(enum.IntEnum):
    """What a range carries (numbers are the wire values)."""

    SKIP = 0  # nothing to do here (equal, or resolved)
    FINGERPRINT = 1  # fingerprint + count of the sender's items in the range
    ID_LIST = 2  # the sender's token prefixes or short ids in the range (a small range)
    WANT_ALL = 3  # the sender holds nothing here: send every item of the range


@dataclass(frozen=True, slots=True, order=True)
class Bound:
    """Exclusive upper end of a range: items with ``(height, id) < (height, id_prefix)``."""

    height: int
    id_prefix: bytes = b""


@dataclass(frozen=True, slots=True)
class Range:
    """One range of a reconciliation message; ``upper`` None means +infinity."""

    upper: Bound | None
    mode: Mode
    fingerprint: bytes = b""
    count: int = 0
    tokens: bytes = b""
    full: bool = False  # ID_LIST of whole 32-byte tokens (compact ranges: short ids collided)
    summed: bool = False  # compact FINGERPRINT that is a sum of keyed tokens (decodable)


@dataclass(frozen=True, slots=True)
class Hello:
    protocol_version: int
    line: str
    sets: tuple[str, ...]
    capabilities: tuple[str, ...]
    max_frame_bytes: int
    max_items: int
    salt: bytes = b""  # this side's share of the session key (compact ranges)
    # responder, "set-summaries": each whole set's plain fingerprint, in the order of
    # ``sets`` (b"": not known)
    summaries: tuple[bytes, ...] = ()
    # initiator, "open-sums": its opening range of each set, (count, plain fingerprint), in
    # the order of ``sets`` (empty: its opening ranges come as Recon frames)
    opening: tuple[tuple[int, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class Recon:
    """Part of a range list covering the key space, continuing the previous part."""

    set_index: int
    ranges: tuple[Range, ...]
    compact: bool = False  # packed ranges, keyed fingerprints and short ids (protocol.md)
    fingerprint_bytes: int = 0  # compact: the widths the sender used, checked on receipt
    short_id_bytes: int = 0


@dataclass(frozen=True, slots=True)
class Want:
    """Items the sender lacks: what it was offered in id lists, and parent ids by id.

    ``tokens``: 16-byte token prefixes (plain id lists); ``short_ids``: keyed short ids
    (compact id lists); ``full_tokens``: whole 32-byte tokens (compact fallback lists).
    """

    set_index: int
    tokens: bytes = b""
    ids: tuple[bytes, ...] = ()
    short_ids: bytes = b""
    full_tokens: bytes = b""


@dataclass(frozen=True, slots=True)
class Items:
    """Raw items, parents first, and the cross-line references their parents need."""

    set_index: int
    items: tuple[bytes, ...]
    externals: tuple[tuple[bytes, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Abort:
    code: str
    reason: str


@dataclass(frozen=True, slots=True)
class EndOfTurn:
    """The sender has said everything for this round; the other side answers now.

    In the closing round only: how many of the items the peer sent this session the sender
    refused alone, and why the first few were (decisions 0111, 0112)."""

    refused: int = 0
    refusals: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Fin:
    """The initiator is done; the session ends after this frame."""


@dataclass(frozen=True, slots=True)
class KeepAlive:
    """The sender is busy and still there (capability ``keep-alive``): the receiver's idle
    timer starts again; the session itself ignores it, in any phase."""


Frame = Hello | Recon | Want | Items | Abort | EndOfTurn | Fin | KeepAlive


# -- effects --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SendFrame:
    frame: Frame


@dataclass(frozen=True, slots=True)
class LoadSnapshot:
    """Load the sorted keys and tokens of one set; answer with ``snapshot_loaded``."""

    set_index: int


@dataclass(frozen=True, slots=True)
class LoadSummary:
    """Read the whole-set summary of one set (no snapshot); answer with ``summary_loaded``
    (None when the set keeps none)."""

    set_index: int


@dataclass(frozen=True, slots=True)
class Fetch:
    """Load these items; answer with ``fetched(set_index, raws, externals)``."""

    set_index: int
    ids: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class FetchRun:
    """Load up to ``limit`` items of one set in key order, after the key ``after`` (None:
    from the first): the whole set, sent with no snapshot to a peer that holds none of it
    (decision 0144). Answer with ``fetched_run(set_index, raws, externals, after)``, where
    ``after`` is the last key read, or None once the set is over. The key is opaque here."""

    set_index: int
    after: tuple[object, ...] | None
    limit: int


@dataclass(frozen=True, slots=True)
class Deliver:
    """Admit these items (closed under parents) in one atomic batch."""

    set_index: int
    items: tuple[object, ...]  # ParsedItem, typed loosely to keep this module leaf-level
    externals: tuple[tuple[bytes, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Done:
    orphans_dropped: int = 0


@dataclass(frozen=True, slots=True)
class Failed:
    error: Exception = field(compare=False)


Effect = SendFrame | LoadSnapshot | LoadSummary | Fetch | FetchRun | Deliver | Done | Failed


REFUSED_CODE = "refused"  # an Abort for a permission refusal: the caller may not do that


def abort_error(frame: Abort) -> PeerError:
    """Our error for an Abort the peer sent: a refusal stays a refusal."""
    message = f"the peer aborted the session: {frame.reason} [{frame.code}]"
    if frame.code == REFUSED_CODE:
        return PermissionDenied(message)
    return PeerError(message)
