"""The frames two sessions exchange and the effects a session asks its driver to perform.

Plain dataclasses: the wire layer maps them to protobuf (``lifeline_mesh.transport.codec``),
so the core never sees generated code.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

__all__ = [
    "Abort",
    "Bound",
    "Deliver",
    "Done",
    "Effect",
    "EndOfTurn",
    "Failed",
    "Fetch",
    "Fin",
    "Frame",
    "Hello",
    "Items",
    "LoadSnapshot",
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
    ID_LIST = 2  # the sender's token prefixes in the range (a small range)
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


@dataclass(frozen=True, slots=True)
class Hello:
    protocol_version: int
    line: str
    sets: tuple[str, ...]
    capabilities: tuple[str, ...]
    max_frame_bytes: int
    max_items: int


@dataclass(frozen=True, slots=True)
class Recon:
    """Part of a range list covering the key space, continuing the previous part."""

    set_index: int
    ranges: tuple[Range, ...]


@dataclass(frozen=True, slots=True)
class Want:
    """Items the sender lacks: token prefixes it was offered, and parent ids by id."""

    set_index: int
    tokens: bytes = b""
    ids: tuple[bytes, ...] = ()


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
    """The sender has said everything for this round; the other side answers now."""


@dataclass(frozen=True, slots=True)
class Fin:
    """The initiator is done; the session ends after this frame."""


Frame = Hello | Recon | Want | Items | Abort | EndOfTurn | Fin


# -- effects --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SendFrame:
    frame: Frame


@dataclass(frozen=True, slots=True)
class LoadSnapshot:
    """Load the sorted keys and tokens of one set; answer with ``snapshot_loaded``."""

    set_index: int


@dataclass(frozen=True, slots=True)
class Fetch:
    """Load these items; answer with ``fetched(set_index, raws, externals)``."""

    set_index: int
    ids: tuple[bytes, ...]


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


Effect = SendFrame | LoadSnapshot | Fetch | Deliver | Done | Failed
