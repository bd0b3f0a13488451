"""Range-based set reconciliation: the pure, sans-I/O core of mesh sync (DESIGN §5).

``Session`` takes frames and ``now`` and returns effects; it never touches a store, a clock
or a socket. Sets are pluggable (:class:`~lifeline_mesh.recon.sets.ItemCodec` plus a
:class:`~lifeline_mesh.recon.sets.Snapshot`), so a second set joins without touching the
protocol.
"""

from __future__ import annotations

from lifeline_mesh.recon.frames import (
    Abort,
    Bound,
    Deliver,
    Done,
    EndOfTurn,
    Failed,
    Fetch,
    FetchRun,
    Fin,
    Frame,
    Hello,
    Items,
    LoadSnapshot,
    Mode,
    Range,
    Recon,
    SendFrame,
    Want,
)
from lifeline_mesh.recon.session import Role, Session, SessionLimits, SessionStats
from lifeline_mesh.recon.sets import ItemCodec, ParsedItem, Snapshot, token_of

__all__ = [
    "Abort",
    "Bound",
    "Deliver",
    "Done",
    "EndOfTurn",
    "Failed",
    "Fetch",
    "FetchRun",
    "Fin",
    "Frame",
    "Hello",
    "ItemCodec",
    "Items",
    "LoadSnapshot",
    "Mode",
    "ParsedItem",
    "Range",
    "Recon",
    "Role",
    "SendFrame",
    "Session",
    "SessionLimits",
    "SessionStats",
    "Snapshot",
    "Want",
    "token_of",
]
