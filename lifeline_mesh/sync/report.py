"""What one session did (``SyncReport``), as `lifeline-mesh sync` prints it: filled in by
the driver (``sync/driver.py``) and its admitter (``sync/admitter.py``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["SyncReport"]


@dataclass(slots=True)
class SyncReport:
    """What one session did, as `lifeline-mesh sync` prints it."""

    line: str
    role: str
    entries_sent: int = 0
    entries_received: int = 0
    entries_added: int = 0  # entries newly stored
    attestations_added: int = 0  # signatures and statements newly stored
    signatures_sent: int = 0
    signatures_received: int = 0
    ts_lowered: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    round_trips: int = 0
    seconds: float = 0.0
    orphans_dropped: int = 0
    snapshots: int = 0  # sets this side had to sort (0: an in-sync check from summaries)
    refused: int = 0  # inadmissible items the peer sent, refused one by one (decision 0111)
    refusals: list[str] = field(default_factory=list)  # the first few reasons
    # what the peer said it refused of the items this side sent (decision 0112)
    refused_there: int = 0
    refusals_there: list[str] = field(default_factory=list)
    # why the line did not sync (the peer refused it; `sync` goes on with the next lines)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
