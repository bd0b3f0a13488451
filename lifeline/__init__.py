"""lifeline: an event-sourced reasoning ledger (entries, store, lines, truth, projection)."""

from __future__ import annotations

from lifeline.entry import KNOWN_KINDS, Entry, compute_id
from lifeline.errors import LifelineError
from lifeline.ledger import Draft, Ledger

__all__ = ["KNOWN_KINDS", "Draft", "Entry", "Ledger", "LifelineError", "compute_id"]
__version__ = "0.1.0"
