"""Sync adapters: reconciled sets backed by a store, and the asyncio driver of a session."""

from __future__ import annotations

from lifeline_mesh.sync.driver import Channel, SyncReport, drive
from lifeline_mesh.sync.entry_set import EntrySet
from lifeline_mesh.sync.port import FetchResult, ReconSet

__all__ = ["Channel", "EntrySet", "FetchResult", "ReconSet", "SyncReport", "drive"]
