"""Signing on this node: author attestations, witness receipts, state summaries, the hook.

Adapters around :mod:`lifeline_mesh.notary.statement`: they sign with the node's identity
and store the result beside the entries. The append hook (entry-point group
``lifeline.append_hooks``) makes every local write of a project with a node identity signed,
whichever front end wrote it (CLI, API, MCP).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path

from lifeline.entry import Entry
from lifeline.errors import ConfigError
from lifeline.plugins import AppendHook
from lifeline.store.port import Store
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.identity import NodeIdentity, key_path
from lifeline_mesh.notary.statement import (
    MAX_SUMMARY_TIPS,
    MAX_WITNESS_IDS,
    Attestation,
    Role,
    sign,
)
from lifeline_mesh.notary.storage import NotaryStore

__all__ = [
    "append_hook_factory",
    "fingerprint",
    "sign_entries",
    "summarize",
    "witness",
]

log = logging.getLogger(__name__)


def _sqlite(store: Store) -> SqliteStore:
    if not isinstance(store, SqliteStore):
        raise ConfigError(
            f"attestations are stored in the line's SQLite file; {type(store).__name__} "
            "cannot hold them (open the line with SqliteStore)"
        )
    return store


async def sign_entries(
    store: Store, identity: NodeIdentity, entries: Sequence[Entry]
) -> list[Attestation]:
    """Sign ``(author, entry id, ts, node id)`` for each entry and store the attestations."""
    atts = [sign(identity, Role.AUTHOR, e.id, e.ts) for e in entries]
    notary = await NotaryStore.attach(_sqlite(store))
    await notary.add(atts)
    return atts


async def witness(
    store: Store, identity: NodeIdentity, entry_ids: Sequence[str], now: str
) -> list[Attestation]:
    """One receipt for a batch received from a peer, dated by this node's clock ``now``.

    Batches larger than MAX_WITNESS_IDS get one receipt per slice of that size.
    """
    atts = receipts(identity, entry_ids, now)
    if atts:
        notary = await NotaryStore.attach(_sqlite(store))
        await notary.add(atts)
    return atts


def receipts(identity: NodeIdentity, entry_ids: Sequence[str], now: str) -> list[Attestation]:
    """The witness receipts of :func:`witness`, signed but not stored."""
    ids = sorted(set(entry_ids))
    return [
        sign(identity, Role.WITNESS, str(len(part)), now, *part)
        for part in (ids[i : i + MAX_WITNESS_IDS] for i in range(0, len(ids), MAX_WITNESS_IDS))
    ]


def fingerprint(ids: Sequence[str]) -> str:
    """First 16 bytes (hex) of sha256(sum of ids mod 2^256 ‖ count as 8 bytes big-endian)."""
    total = sum(int(i, 16) for i in ids) % (1 << 256)
    data = total.to_bytes(32, "big") + len(ids).to_bytes(8, "big")
    return hashlib.sha256(data).digest()[:16].hex()


async def summarize(
    store: Store, identity: NodeIdentity, line: str, now: str
) -> Attestation | None:
    """Sign this line's state (count, fingerprint, tips): a later truncation shows.

    Returns None when the line has more tips than a summary may carry (MAX_SUMMARY_TIPS).
    """
    keys = await store.keys()
    tips = await store.tips()
    if len(tips) > MAX_SUMMARY_TIPS:
        log.warning("line %s has %d tips; no summary signed", line, len(tips))
        return None
    ids = [i for _h, i in keys]
    att = sign(identity, Role.SUMMARY, line, now, str(len(ids)), fingerprint(ids), *tips)
    notary = await NotaryStore.attach(_sqlite(store))
    await notary.add([att])
    return att


def append_hook_factory(root: Path) -> AppendHook | None:
    """Entry point: sign every local write when ``root`` has a node identity."""
    path = key_path(root)
    if not path.exists():
        return None
    identity = NodeIdentity.load(path)

    async def hook(store: Store, entries: Sequence[Entry]) -> None:
        if entries:
            await sign_entries(store, identity, entries)

    return hook
